package eviction

import (
	"bufio"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// A journal record is added back as its call added it, with the cap
// counted as of the call: counted as of the load, with a time bucket gone
// since, the cap left room that the call did not have, the items it had
// refused took it, and a later call's items, recorded and acknowledged,
// were refused in their place. capCalls makes those calls; the test runs
// them in a process it kills with SIGKILL, and in the hot set of a store
// closed without a write-back.
func TestJournalReplayCountsTheCapAsItsCallsDid(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill %v", kill), func(t *testing.T) {
			dir := t.TempDir()
			var c []string
			if kill {
				c = capChildRun(t, dir)
			} else {
				st := openStore(t, dir)
				now, set := capClock()
				h, err := newCapHotSet(st, now)
				if err != nil {
					t.Fatal(err)
				}
				c = capCalls(h, func(format string, a ...any) { t.Fatalf(format, a...) }, set)
				close(h.stop) // no write-back: the calls are in the journal only
				<-h.stopped
				h.closed.Store(true)
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
			}
			st := openStore(t, dir)
			defer st.Close()
			h, err := newCapHotSet(st, capAt(4*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			lost := 0
			for _, s := range seen(t, h, "capped", "u", c...) {
				if !s {
					lost++
				}
			}
			if lost > 0 {
				t.Fatalf("after the restart, %d of the %d items the last call recorded test unseen", lost, len(c))
			}
		})
	}
}

const capChildEnv = "SEENAPI_CAP_CHILD_DIR"

// capAt is the clock of the capped calls, d after their start.
func capAt(d time.Duration) func() time.Time {
	return func() time.Time { return time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(d) }
}

// capClock is a clock of the capped calls that set moves to d after their start.
func capClock() (now func() time.Time, set func(d time.Duration)) {
	var mu sync.Mutex
	at := time.Duration(0)
	now = func() time.Time { mu.Lock(); defer mu.Unlock(); return capAt(at)() }
	set = func(d time.Duration) { mu.Lock(); at = d; mu.Unlock() }
	return now, set
}

// newCapHotSet is a hot set of one namespace whose users hold at most 100
// items in a 3-hour window of 1-hour buckets.
func newCapHotSet(st *storage.Store, now func() time.Time) (*HotSet, error) {
	p := userfilter.Profile{Window: 3 * time.Hour, Granularity: time.Hour, MaxItems: 100}
	return New(st, []Namespace{{Name: "capped", Profile: p}}, Options{Now: now, FlushInterval: time.Hour})
}

// capCalls records 60 items, 60 an hour later (40 recorded: the cap), and
// 50 three hours after that, when the first bucket has left the window
// (all 50 recorded), and returns the last 50. setClock moves h's clock.
func capCalls(h *HotSet, fatalf func(string, ...any), setClock func(time.Duration)) []string {
	var batch []string
	for _, c := range []struct {
		prefix      string
		at          time.Duration
		n, recorded int
		saturated   bool
	}{{"a", 0, 60, 60, false}, {"b", time.Hour, 60, 40, true}, {"c", 4 * time.Hour, 50, 50, false}} {
		setClock(c.at)
		batch = make([]string, c.n)
		for i := range batch {
			batch[i] = fmt.Sprintf("%s%d", c.prefix, i)
		}
		res, err := h.Record("capped", "u", batch)
		if err != nil {
			fatalf("%s: %v", c.prefix, err)
		}
		if res.Recorded != c.recorded || res.Saturated != c.saturated {
			fatalf("%s: recorded %d (saturated %v), want %d (%v)", c.prefix, res.Recorded, res.Saturated, c.recorded, c.saturated)
		}
	}
	return batch
}

// capChild makes capCalls in the store in dir, says "done" and waits to be
// killed.
func capChild(dir string) {
	st := openStoreOrDie(dir)
	now, set := capClock()
	h, err := newCapHotSet(st, now)
	if err != nil {
		panic(err)
	}
	capCalls(h, func(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }, set)
	fmt.Println("done")
	select {}
}

// capChildRun runs capChild in a process, kills it with SIGKILL once its
// calls are answered, and returns the items of its last call.
func capChildRun(t *testing.T, dir string) []string {
	cmd, stdout := startChild(t, capChildEnv+"="+dir)
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if line != "done\n" {
		t.Fatalf("the child said %q, not done", line)
	}
	c := make([]string, 50)
	for i := range c {
		c[i] = fmt.Sprintf("c%d", i)
	}
	return c
}

// A write-back that merges into what is stored (a second writer is
// attached) leaves out the time buckets the window has left behind: merged
// back in, they were stored again at every write-back, and a user's value
// grew by a bucket a day for good.
func TestMergingWriteBackDropsBucketsPastTheWindow(t *testing.T) {
	now, advance := newTestClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	fx := newFixture(t, Options{Now: now})
	other := fx.newHotSet(Options{Now: now}) // attached beside it: every write-back merges
	defer other.Close()
	var items []string
	for day := range 30 {
		items = append(items, fmt.Sprintf("day%d", day))
		record(t, fx.h, "push", "u", items[day])
		if err := fx.h.Flush(); err != nil {
			t.Fatal(err)
		}
		advance(24 * time.Hour)
	}
	advance(-24 * time.Hour) // the day of the last write-back
	raw, _, err := fx.st.Load("push", "u")
	if err != nil {
		t.Fatal(err)
	}
	f, err := userfilter.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	// Stats at a time before every bucket lists them all, expired or not.
	if n := len(f.Stats(time.Time{}).Generations); n > 8 {
		t.Fatalf("the stored filter of a 7-day window of 1-day buckets holds %d buckets (%d bytes)", n, len(raw))
	}
	fx.restart(false, Options{Now: now})
	got := seen(t, fx.h, "push", "u", items...)
	for day, s := range got {
		if want := day >= 30-8; s != want { // the window and the bucket it started in
			t.Fatalf("day %d's item tests seen %v, want %v", day, s, want)
		}
	}
}
