package storage

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Benchmark data follows the reference workload: user ids of 8 bytes in
// namespace "feed" (journal keys of 23 bytes), journal records of 160 bytes
// (20 item hashes), filters of 1 KiB.
const (
	benchRecordSize = 160
	benchFilterSize = 1 << 10
)

func benchUser(i int) string { return fmt.Sprintf("u%07d", i) }

func openBench(b *testing.B, sync bool) *Store {
	b.Helper()
	return openTest(b, testOptions(b).WithSync(sync))
}

// cpuTime returns the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// run16 runs body on 16 goroutines (whatever GOMAXPROCS is), each with its
// own user, and reports appends per second and the process's CPU time per
// append (Badger's background work included; steadier than wall time on a
// shared machine).
func run16(b *testing.B, body func(user string) error) {
	b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	defer func() {
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	}()
	b.RunParallel(func(pb *testing.PB) {
		user := benchUser(int(n.Add(1)))
		for pb.Next() {
			if err := body(user); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

// BenchmarkAppend: journal appends from 16 concurrent writers through the
// group commit. Compare with BenchmarkAppendUpdateEach in the same run.
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			s := openBench(b, sync)
			value := make([]byte, benchRecordSize)
			run16(b, func(user string) error {
				_, err := s.Append("feed", user, value, 0)
				return err
			})
		})
	}
}

// BenchmarkAppendUpdateEach: the same appends, each in its own db.Update
// (the reference that group commit improves on).
func BenchmarkAppendUpdateEach(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			s := openBench(b, sync)
			value := make([]byte, benchRecordSize)
			run16(b, func(user string) error {
				seq, err := s.takeSeqs(1)
				if err != nil {
					return err
				}
				return s.db.Update(func(txn *badger.Txn) error {
					return txn.Set(journalKey(nil, "feed", user, seq), value)
				})
			})
		})
	}
}

// populateBench stores users with a filter and journal entries each, then
// reopens the store so they are read from tables, not memtables.
func populateBench(b *testing.B, users, journal int) *Store {
	b.Helper()
	opts := testOptions(b)
	s, err := Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	filter := make([]byte, benchFilterSize)
	record := make([]byte, benchRecordSize)
	wb := s.db.NewWriteBatch()
	for i := range users {
		u := benchUser(i)
		if err := wb.Set(filterKey(nil, "feed", u), filter); err != nil {
			b.Fatal(err)
		}
		for range journal {
			seq, _ := s.takeSeqs(1)
			if err := wb.Set(journalKey(nil, "feed", u, seq), record); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := wb.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return openTest(b, opts)
}

// BenchmarkLoad: loading a random one of 100k stored users (a 1 KiB filter
// plus 0 or 4 journal records).
func BenchmarkLoad(b *testing.B) {
	const users = 100_000
	for _, journal := range []int{0, 4} {
		b.Run(fmt.Sprintf("journal=%d", journal), func(b *testing.B) {
			s := populateBench(b, users, journal)
			rng := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			for b.Loop() {
				f, j, err := s.Load("feed", benchUser(rng.IntN(users)))
				if err != nil || len(f) != benchFilterSize || len(j) != journal {
					b.Fatalf("Load: %d bytes, %d entries, %v", len(f), len(j), err)
				}
			}
		})
	}
}

// BenchmarkWriteBack: write-back batches of 256 users (1 KiB filters) over
// stored filters of 64k users: replacing them, merging into them (OR), and
// both covering one journal record per user (appended to the journal with
// the timer stopped), as the hot set's write-back does: "replace+journal"
// is the hot set as the store's only writer. "replace", writes that cover
// no record, reads each stored filter for the cover mark it carries over
// (see Store.prepare): in the hot set only a replacement (an import, a
// forget) writes so.
func BenchmarkWriteBack(b *testing.B) {
	const users, batch = 1 << 16, 256
	for _, tc := range []struct {
		name    string
		merge   MergeFunc
		journal bool
	}{
		{"replace", nil, false},
		{"merge", orMerge, false},
		{"replace+journal", nil, true},
		{"merge+journal", orMerge, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := populateBench(b, users, 0)
			filter := make([]byte, benchFilterSize)
			record := make([]byte, benchRecordSize)
			writes := make([]Write, batch)
			b.ReportAllocs()
			next := 0
			for b.Loop() {
				for i := range writes {
					writes[i] = Write{NS: "feed", User: benchUser((next + i) % users), Value: filter}
				}
				next += batch
				if tc.journal {
					b.StopTimer()
					recs := make([]walAppend, len(writes))
					for i := range writes {
						seq, err := s.takeSeqs(1)
						if err != nil {
							b.Fatal(err)
						}
						recs[i] = walAppend{seq: seq, ns: "feed", user: writes[i].User, value: record}
						writes[i].UpTo = seq
					}
					if err := s.wal.write(recs); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if err := s.WriteBack(writes, tc.merge); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "users/s")
		})
	}
}

// BenchmarkPurgeNamespace erases a namespace of users, each written back
// with a 488-byte filter (a 200-item user) and one pending journal
// record, and reports the time a user and the whole purge, so that an
// operator knows how long DELETE /v1/namespaces/{ns} takes.
func BenchmarkPurgeNamespace(b *testing.B) {
	for _, users := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint("users=", users), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				s, err := Open(testOptions(b))
				if err != nil {
					b.Fatal(err)
				}
				value := make([]byte, 488)
				writes := make([]Write, 0, 256)
				for i := 0; i < users; i += 256 {
					writes = writes[:0]
					for j := i; j < min(i+256, users); j++ {
						writes = append(writes, Write{NS: "old", User: benchUser(j), Value: value})
					}
					if err := s.WriteBack(writes, nil); err != nil {
						b.Fatal(err)
					}
				}
				for i := range users / 10 {
					if _, err := s.Append("old", benchUser(i*10), make([]byte, benchRecordSize), 0); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				start := time.Now()
				n, err := s.PurgeNamespace("old")
				if err != nil || n != users {
					b.Fatalf("PurgeNamespace: %d users, err %v", n, err)
				}
				b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(users), "ns/user")
				b.StopTimer()
				// The purged namespace's deleted keys stay until compaction
				// drops them: listing the namespaces steps over them.
				start = time.Now()
				if nss, err := s.Namespaces(); err != nil || len(nss) != 0 {
					b.Fatalf("namespaces after the purge: %v, err %v", nss, err)
				}
				b.ReportMetric(float64(time.Since(start).Microseconds()), "us/list-after")
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
