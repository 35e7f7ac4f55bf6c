package eviction

import (
	"fmt"
	"testing"
	"time"

	"github.com/seenapi/seenapi/userfilter"
)

// An item recorded by one writer tests seen to the end of its window even
// when another writer, sharing the store, writes the user back after it
// with an older history: the merged value keeps the newer items' expiry
// in the store, not the older history's. Badger expires values by the
// wall clock, so the test waits the older history's expiry out (about
// 5 s); a round that ran too late to tell is run again.
func TestAMergedWriteBackKeepsTheOtherWritersItemsTheirWholeWindow(t *testing.T) {
	const window = 4 * time.Second
	fx := newFixture(t, Options{})
	fx.ns = append(append([]Namespace(nil), defaultNS...),
		Namespace{Name: "brief", Profile: userfilter.Profile{Window: window, Granularity: time.Second}})
	fx.restart(true, Options{})
	bucketEnd := func(at time.Time) time.Time { return at.Truncate(time.Second).Add(time.Second) }
	for round := 0; ; round++ {
		user := fmt.Sprint("shared", round)
		other := fx.newHotSet(Options{}) // a second node over the same store
		record(t, fx.h, "brief", user, "early")
		older := bucketEnd(time.Now()).Add(window) // when the first writer's history expires
		// The second writer records three buckets later: its item stays
		// seen two seconds past the first writer's expiry.
		time.Sleep(time.Until(bucketEnd(time.Now()).Add(2*time.Second + 50*time.Millisecond)))
		recordedAt := time.Now()
		record(t, other, "brief", user, "late")
		if err := other.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := other.Close(); err != nil {
			t.Fatal(err)
		}
		if err := fx.h.Flush(); err != nil { // merges its older history into the second writer's
			t.Fatal(err)
		}
		fx.restart(true, Options{}) // read from the store
		time.Sleep(time.Until(older.Add(300 * time.Millisecond)))
		got := seen(t, fx.h, "brief", user, "late")[0]
		if time.Since(recordedAt) >= window-100*time.Millisecond {
			// Too late to tell (a loaded machine): the item may have
			// left its window.
			if round == 2 {
				t.Fatalf("three rounds ran too late to tell, the last %v after the recording", time.Since(recordedAt))
			}
			continue
		}
		if !got {
			t.Fatalf("an item recorded %v ago, in a window of %v, tests unseen once the other writer's older history expired",
				time.Since(recordedAt).Round(time.Millisecond), window)
		}
		return
	}
}
