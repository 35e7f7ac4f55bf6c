package storage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// soakDuration is the length of the soak.
const soakDuration = 20 * time.Second

// A steady workload (journal appends from 8 writers, write-backs every
// 50 ms that cover them and overwrite every touched user's filter, 90% of
// filters large enough for the value log, as most are) with value-log GC
// running: disk use levels off. Size() is sampled every 250 ms; its mean over the second
// half must stay within 1.5x its mean over the first half (it moves in a
// sawtooth as memtables fill and compactions run, so single samples would
// not do).
func TestSoakDiskUseLevelsOff(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test skipped with -short")
	}
	if raceEnabled {
		// Badger v4.9.6 reads a memtable's maxVersion in value-log GC
		// (DB.MaxVersion) while its writer updates it (memTable.Put), which
		// the race detector reports; and at race-detector speed the workload
		// writes too little to show reclaiming.
		t.Skip("soak test needs a build without -race")
	}
	opts := testOptions(t).
		WithMemTableSize(4 << 20).
		WithValueLogFileSize(4 << 20).
		WithGCInterval(500 * time.Millisecond)
	s := openTest(t, opts)

	const users = 2000
	filterSize := func(u int) int {
		if u%10 == 0 {
			return 128 // LSM tree
		}
		return 1 << 10 // value log
	}
	var (
		mu    sync.Mutex
		dirty = map[int]uint64{} // user -> highest appended seq
	)
	noise := make([]byte, 1<<20)
	for i := range noise {
		noise[i] = byte(rand.Uint32())
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var appends, writeBacks, written int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			value := make([]byte, 160) // 20 item hashes
			for n := int64(0); ; n++ {
				select {
				case <-stop:
					mu.Lock()
					appends += n
					written += n * 160
					mu.Unlock()
					return
				default:
				}
				u := rng.IntN(users)
				seq, err := s.Append("feed", fmt.Sprint("user", u), value, 0)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				dirty[u] = max(dirty[u], seq)
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(99, 1))
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			mu.Lock()
			batch := dirty
			dirty = map[int]uint64{}
			mu.Unlock()
			writes := make([]Write, 0, len(batch))
			for u, upTo := range batch {
				v := make([]byte, filterSize(u)) // random bytes, as incompressible as filter bits
				copy(v, noise[rng.IntN(len(noise)-len(v)):])
				writes = append(writes, Write{NS: "feed", User: fmt.Sprint("user", u), Value: v, UpTo: upTo})
			}
			if err := s.WriteBack(writes, nil); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			writeBacks += int64(len(writes))
			for _, w := range writes {
				written += int64(len(w.Value))
			}
			mu.Unlock()
		}
	}()

	start := time.Now()
	var sizes []int64
	for time.Since(start) < soakDuration {
		time.Sleep(250 * time.Millisecond)
		sizes = append(sizes, s.Size())
	}
	close(stop)
	wg.Wait()
	first, second := mean(sizes[:len(sizes)/2]), mean(sizes[len(sizes)/2:])
	t.Logf("%d appends, %d filter writes, %.0f MiB of values written in %v; disk use: mean %.1f MiB in the first half, %.1f MiB in the second; every second (MiB): %v",
		appends, writeBacks, float64(written)/(1<<20), soakDuration, first/(1<<20), second/(1<<20), mib(sizes, 4))
	if appends == 0 || writeBacks == 0 {
		t.Fatal("the workload did not run")
	}
	// Kept whole, what was written would take at least its own size on
	// disk: a peak of at most half of it shows that space was reclaimed.
	// The peak, not the last sample, which falls anywhere on the sawtooth
	// (at 293 of 1,001 MiB written on one machine, at its tip).
	if peak := slices.Max(sizes); written < 2*peak {
		t.Fatalf("only %d bytes written for a peak of %d on disk: too little to show reclaiming", written, peak)
	}
	if second > 1.5*first {
		t.Fatalf("mean disk use grew from %.1f MiB in the first half to %.1f MiB in the second (more than 1.5x)", first/(1<<20), second/(1<<20))
	}
}

func mean(xs []int64) float64 {
	var sum float64
	for _, x := range xs {
		sum += float64(x)
	}
	return sum / float64(len(xs))
}

// mib renders every step-th size in MiB.
func mib(sizes []int64, step int) []string {
	var out []string
	for i := step - 1; i < len(sizes); i += step {
		out = append(out, fmt.Sprintf("%.1f", float64(sizes[i])/(1<<20)))
	}
	return out
}

// Few users written back often (heavy users, a short flush interval) fill
// Badger's memtables slowly, as each write adds only a pointer to them
// while the filter goes to the value log; without compactions GC finds no
// garbage, and the store grew by everything written. runGC flushes the
// memtables once the store has grown by gcFlushGrowth value-log files with
// nothing reclaimed, and gcLoop looks at the growth every gcGrowthCheck
// even when GC itself runs rarely: disk use stays a fraction of what is
// written.
func TestFewUsersWrittenBackOftenReclaimSpace(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 288 MiB")
	}
	if raceEnabled {
		t.Skip("Badger's value-log GC races with its writes under -race (see TestSoakDiskUseLevelsOff)")
	}
	for _, tc := range []struct {
		gcEvery time.Duration
		rounds  int
	}{{100 * time.Millisecond, 240}, {time.Hour, 480}} {
		t.Run(fmt.Sprint("gc=", tc.gcEvery), func(t *testing.T) {
			opts := testOptions(t).WithValueLogFileSize(1 << 20).WithGCInterval(tc.gcEvery)
			s := openTest(t, opts)
			noise := make([]byte, 1<<20)
			for i := range noise {
				noise[i] = byte(rand.Uint32())
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var written, peak int64
			start := time.Now()
			for range tc.rounds { // 20 users of 20 KiB a round
				writes := make([]Write, 20)
				for u := range writes {
					v := make([]byte, 20<<10)
					copy(v, noise[rng.IntN(len(noise)-len(v)):])
					writes[u] = Write{NS: "feed", User: fmt.Sprint("user", u), Value: v}
					written += int64(len(v))
				}
				if err := s.WriteBack(writes, nil); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond)
				peak = max(peak, s.Size())
			}
			t.Logf("%d MiB written in %v, at most %.1f MiB on disk", written>>20, time.Since(start).Round(time.Millisecond), float64(peak)/(1<<20))
			if peak > written/2 {
				t.Fatalf("%d MiB written for 400 KiB of filters took up to %.1f MiB on disk: the value log was not reclaimed",
					written>>20, float64(peak)/(1<<20))
			}
		})
	}
}
