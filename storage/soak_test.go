package storage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// soakDuration is the shortest the soak runs.
const soakDuration = 20 * time.Second

// soakWrittenPerPeak is how many times its peak disk use the soak writes
// before it stops (at least soakDuration, at most soakLongest): each half
// of it then spans several rises and falls of disk use, whatever the
// machine's speed.
const soakWrittenPerPeak = 8

// soakLongest bounds the soak on a machine too slow to write
// soakWrittenPerPeak times its peak (or a store whose disk use does not
// level off, which the checks then fail).
const soakLongest = 4 * time.Minute

// A steady workload (journal appends from 8 writers, write-backs every
// 50 ms that cover them and overwrite every touched user's filter, 90% of
// filters large enough for the value log, as most are) with value-log GC
// running: disk use levels off. Size() is sampled every 250 ms with the
// bytes written so far; its mean over the second half of what was written
// must stay within 1.5x its mean over the first half (it moves in a
// sawtooth as memtables fill and compactions run, so single samples would
// not do).
//
// Disk use is a function of what is written, so the soak runs by what is
// written, not by the clock. On a loaded machine 20 s wrote 156 MiB, under
// two of the sawtooth's teeth, and the halves of those 20 s (the first
// mostly the climb from an empty store) gave means 1.7x apart while disk
// use peaked at 84 MiB as elsewhere. So it runs until it has written
// soakWrittenPerPeak times the peak the store reports, leaves out the
// climb (the first soakWrittenPerPeak-th of what it wrote), halves the rest
// by bytes written, and weighs each sample by the bytes written since the
// one before: under load a tooth can stay longer at its tip, GC getting
// less of the CPU, and counted by the clock, with the climb in the first
// half, the halves' means were up to 1.41x apart (in a 61 s run whose
// tips were 98.5 and 106.8 MiB).
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
	var appends, writeBacks, written atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			value := make([]byte, 160) // 20 item hashes
			for n := int64(0); ; n++ {
				select {
				case <-stop:
					appends.Add(n)
					return
				default:
				}
				u := rng.IntN(users)
				seq, err := s.Append("feed", fmt.Sprint("user", u), value, 0)
				if err != nil {
					t.Error(err)
					return
				}
				written.Add(int64(len(value)))
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
			writeBacks.Add(int64(len(writes)))
			for _, w := range writes {
				written.Add(int64(len(w.Value)))
			}
		}
	}()

	start := time.Now()
	var sizes, at []int64 // disk use, and bytes written when it was sampled
	for {
		time.Sleep(250 * time.Millisecond)
		sizes, at = append(sizes, s.Size()), append(at, written.Load())
		took := time.Since(start)
		if took >= soakLongest || took >= soakDuration && at[len(at)-1] >= soakWrittenPerPeak*slices.Max(sizes) {
			break
		}
	}
	took := time.Since(start)
	close(stop)
	wg.Wait()
	total := written.Load()
	// The halves of what was written past its first soakWrittenPerPeak-th,
	// not of the time it took. That first part, at least the peak when
	// disk use levels off, holds the climb from an empty store, which would
	// count in the first half only; when disk use grows with what is
	// written, it is too little to hide that (past it, the second half's
	// mean is 2.3x the first's; 2.24x in a run that reclaimed nothing).
	peak := slices.Max(sizes)
	from, _ := slices.BinarySearch(at, total/soakWrittenPerPeak)
	from = min(from, len(sizes)-2)
	half, _ := slices.BinarySearch(at, at[from]+(at[len(at)-1]-at[from])/2)
	half = min(max(half, from+1), len(sizes)-1)
	first, second := meanByWritten(sizes[from:half], at[from:half], at[from]), meanByWritten(sizes[half:], at[half:], at[half-1])
	t.Logf("%d appends, %d filter writes, %.0f MiB of values written in %v; disk use: peak %.1f MiB, mean %.1f MiB over the first half written past the climb (%d samples after %d), %.1f MiB over the second (%d); every second (MiB): %v",
		appends.Load(), writeBacks.Load(), float64(total)/(1<<20), took.Round(time.Millisecond), float64(peak)/(1<<20),
		first/(1<<20), half-from, from, second/(1<<20), len(sizes)-half, mib(sizes, 4))
	if appends.Load() == 0 || writeBacks.Load() == 0 {
		t.Fatal("the workload did not run")
	}
	// Kept whole, what was written would take at least its own size on
	// disk: a peak of at most half of it shows that space was reclaimed.
	// The peak, not the last sample, which falls anywhere on the sawtooth
	// (at 293 of 1,001 MiB written on one machine, at its tip).
	if total < 2*peak {
		t.Fatalf("only %d bytes written in %v for a peak of %d on disk: too little to show reclaiming", total, took.Round(time.Millisecond), peak)
	}
	if second > 1.5*first {
		t.Fatalf("mean disk use grew from %.1f MiB over the first half written to %.1f MiB over the second (more than 1.5x)", first/(1<<20), second/(1<<20))
	}
}

// meanByWritten is the mean of sizes, each weighed by the bytes written
// since the sample before it (at holds the bytes written at each, from the
// bytes written before the first); samples with nothing written since the
// one before count as one byte, so the mean of an idle store is its size.
func meanByWritten(sizes, at []int64, before int64) float64 {
	var sum, weight float64
	for i, size := range sizes {
		w := float64(max(at[i]-before, 1))
		sum += w * float64(size)
		weight += w
		before = at[i]
	}
	return sum / weight
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
