package eviction

import (
	"testing"

	"github.com/seenapi/seenapi/userfilter"
)

// TestSeenRouteOfItemsInTheNewestBucketJournalsNothing: in a namespace with
// a window, recording items already in the newest time bucket (the seen
// route sent twice, an impression reported again) changes nothing, so it
// appends no journal record: no write-back would follow to retire it, and
// it would stay live, keeping its journal segment on disk, until it
// expires a window and a bucket later.
func TestSeenRouteOfItemsInTheNewestBucketJournalsNothing(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "push", "u", "a", "b")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	before := fx.h.Stats()
	res, err := fx.h.Filter("push", "u", []string{"a", "b"}, 0, userfilter.RecordAll)
	if err != nil || res.SeenCount != 2 || res.Recorded != 0 {
		t.Fatalf("Filter = %+v, %v; want both seen, none recorded", res, err)
	}
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	after := fx.h.Stats()
	_, journal, err := fx.st.Load("push", "u")
	if err != nil {
		t.Fatal(err)
	}
	if after.JournalAppends != before.JournalAppends || len(journal) != 0 {
		t.Fatalf("recording items already in the newest bucket: %d journal appends, %d records live after a write-back; want none",
			after.JournalAppends-before.JournalAppends, len(journal))
	}
}
