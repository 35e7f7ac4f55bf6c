package eviction

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seenapi/seenapi/userfilter"
)

// TestBucketsExpiredByACallThatRecordsNothingLeaveTheBudget: a call that
// records nothing (a dry run) but drops a user's buckets past the window
// takes their memory out of the hot set's count, so the budget is not
// spent, and other users evicted, on memory no longer held.
func TestBucketsExpiredByACallThatRecordsNothingLeaveTheBudget(t *testing.T) {
	fx, full := pastItsWindow(t)
	if _, err := fx.h.Filter("push", "u", []string{"x"}, 0, userfilter.RecordNone); err != nil {
		t.Fatal(err)
	}
	countedAsHeld(t, fx, full, "the user's buckets expired")
}

// TestBucketsExpiredByAWriteBackLeaveTheBudget: the write-back drops a
// user's buckets past the window from the filter in memory before it
// encodes it; their memory leaves the hot set's count then too, not only
// at a later call that drops some.
func TestBucketsExpiredByAWriteBackLeaveTheBudget(t *testing.T) {
	fx, full := pastItsWindow(t)
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	// A call that records nothing finds no bucket left to drop.
	if _, err := fx.h.Filter("push", "u", []string{"x"}, 0, userfilter.RecordNone); err != nil {
		t.Fatal(err)
	}
	countedAsHeld(t, fx, full, "the write-back dropped the user's buckets")
}

// pastItsWindow returns a hot set whose user "u" of the 7-day namespace
// "push" recorded 20,000 items 9 days ago, past the window and its bucket,
// and the bytes the hot set counted when they were recorded.
func pastItsWindow(t *testing.T) (fx *fixture, full int64) {
	clock, advance := newTestClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	fx = newFixture(t, Options{Now: clock})
	items := make([]string, 20000)
	for i := range items {
		items[i] = fmt.Sprint("item-", i)
	}
	record(t, fx.h, "push", "u", items...)
	full, _ = fx.h.Usage()
	advance(9 * 24 * time.Hour)
	return fx, full
}

// countedAsHeld fails the test unless the hot set counts no more than what
// pastItsWindow's user can hold now, its items all past the window: an
// empty filter, if it is still in memory at all (it is gone: no stats);
// full is what it counted before, and after says what happened since.
func countedAsHeld(t *testing.T, fx *fixture, full int64, after string) {
	t.Helper()
	if st, err := fx.h.User("push", "u"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("after %s: stats of %d items, %v; want ErrUserNotFound", after, st.Items, err)
	}
	empty, err := userfilter.New(defaultNS[1].Profile)
	if err != nil {
		t.Fatal(err)
	}
	if used, _ := fx.h.Usage(); used > int64(empty.MemoryBytes()+entryOverhead+len("u")) {
		t.Fatalf("after %s: %d bytes counted (%d before), an empty filter takes %d", after, used, full, empty.MemoryBytes())
	}
}
