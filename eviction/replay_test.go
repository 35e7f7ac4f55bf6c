package eviction

import (
	"fmt"
	"testing"
	"time"

	"github.com/seenapi/seenapi/userfilter"
)

// A journal record is added back as its call added it, with the cap
// counted as of the call: counted as of the load, with a time bucket gone
// since, the cap left room that the call did not have, the items it had
// refused took it, and a later call's items, recorded and acknowledged,
// were refused in their place.
func TestJournalReplayCountsTheCapAsItsCallsDid(t *testing.T) {
	now, advance := newTestClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	p := userfilter.Profile{Window: 3 * time.Hour, Granularity: time.Hour, MaxItems: 100}
	opts := Options{Now: now}
	fx := &fixture{t: t, dir: t.TempDir(), ns: []Namespace{{Name: "capped", Profile: p}}}
	fx.st = openStore(t, fx.dir)
	fx.h = fx.newHotSet(opts)
	t.Cleanup(func() {
		fx.h.Close()
		fx.st.Close()
	})
	call := func(prefix string, n, recorded int, saturated bool) []string {
		t.Helper()
		batch := make([]string, n)
		for i := range batch {
			batch[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		res, err := fx.h.Record("capped", "u", batch)
		if err != nil {
			t.Fatal(err)
		}
		if res.Recorded != recorded || res.Saturated != saturated {
			t.Fatalf("%s: recorded %d (saturated %v), want %d (%v)", prefix, res.Recorded, res.Saturated, recorded, saturated)
		}
		return batch
	}
	call("a", 60, 60, false)
	advance(time.Hour)
	call("b", 60, 40, true) // at the cap
	advance(3 * time.Hour)  // a's bucket leaves the window
	c := call("c", 50, 50, false)
	fx.restart(false, opts) // the three calls are in the journal only
	got := seen(t, fx.h, "capped", "u", c...)
	lost := 0
	for _, s := range got {
		if !s {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("after a crash, %d of the %d items the last call recorded test unseen", lost, len(c))
	}
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
