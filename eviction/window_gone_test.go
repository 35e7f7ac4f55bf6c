package eviction

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seenapi/seenapi/storage/storagetest"
	"github.com/seenapi/seenapi/userfilter"
)

// goneCheck fails the test unless the user of ns is gone: not listed, no
// stats (as a user never seen), not counted as hot (hot is how many other
// users of ns are). when says what happened before.
func goneCheck(t *testing.T, fx *fixture, ns, user string, hot int64, when string) {
	t.Helper()
	users, err := fx.h.Users(ns, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(users, user) {
		t.Errorf("%s: %s still listed in %s: %q", when, user, ns, users)
	}
	if st, err := fx.h.User(ns, user); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("%s: User(%s) = %d items (hot %v), %v; want ErrUserNotFound, as for a user never seen", when, user, st.Items, st.Hot, err)
	}
	if st, err := fx.h.Peek(ns, user); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("%s: Peek(%s) = %d items, %v; want ErrUserNotFound", when, user, st.Items, err)
	}
	if n := fx.h.Stats().Namespaces[ns].HotUsers; n != hot {
		t.Errorf("%s: %d hot users in %s, want %d", when, n, ns, hot)
	}
}

// offDisk fails the test unless the store holds nothing of the user: no
// filter, no journal record.
func offDisk(t *testing.T, fx *fixture, ns, user, when string) {
	t.Helper()
	raw, journal, err := fx.st.Load(ns, user)
	if err != nil {
		t.Fatal(err)
	}
	if raw != nil || len(journal) != 0 {
		t.Errorf("%s: the store still holds %s: a value of %d bytes, %d journal records", when, user, len(raw), len(journal))
	}
}

// briefFixture is a fixture with the namespace "brief" too: a window of
// 2 s, in buckets of 1 s. Badger expires values by the wall clock, so
// tests of what leaves the disk wait such a window out.
func briefFixture(t *testing.T) *fixture {
	fx := newFixture(t, Options{})
	fx.ns = append(append([]Namespace(nil), defaultNS...),
		Namespace{Name: "brief", Profile: userfilter.Profile{Window: 2 * time.Second, Granularity: time.Second}})
	fx.restart(true, Options{})
	return fx
}

// pastBrief is longer than an item of "brief" stays seen: to the end of
// its bucket and the window after it, at most 3 s.
const pastBrief = 3*time.Second + 100*time.Millisecond

// backAgain fails the test unless recording item for the user brings it
// back as a new user holding that item only (old, recorded before it
// left, tests unseen).
func backAgain(t *testing.T, fx *fixture, ns, user, old, item string) {
	t.Helper()
	record(t, fx.h, ns, user, item)
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	users, err := fx.h.Users(ns, "", 0)
	if err != nil || !slices.Contains(users, user) {
		t.Fatalf("recorded again: %s listed in %q (%v), want it listed", user, users, err)
	}
	st, err := fx.h.User(ns, user)
	if err != nil || st.Items != 1 {
		t.Fatalf("recorded again: stats %d items, %v; want 1 item", st.Items, err)
	}
	if got := seen(t, fx.h, ns, user, old, item); got[0] || !got[1] {
		t.Fatalf("recorded again: %s, %s seen %v; want [false true]", old, item, got)
	}
}

// TestUserWhoseHistoryLeftTheWindowIsGone: a user recorded once in a
// windowed namespace and written back, then not called again, is gone
// once its items have left the window: not listed, stats as for a user
// never seen, nothing on disk, not counted hot (while it was still in the
// cache).
func TestUserWhoseHistoryLeftTheWindowIsGone(t *testing.T) {
	fx := briefFixture(t)
	record(t, fx.h, "brief", "u", "a")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	st, err := fx.h.User("brief", "u")
	if err != nil || st.Items != 1 {
		t.Fatalf("stats %d items, %v; want 1 item", st.Items, err)
	}
	time.Sleep(pastBrief)
	goneCheck(t, fx, "brief", "u", 0, "past the window")
	offDisk(t, fx, "brief", "u", "past the window")
	backAgain(t, fx, "brief", "u", "a", "b")
}

// TestWriteBackOfAUserPastItsWindowLetsItGo: a user whose items all left
// the window before its write-back (changed, then not called again for
// longer than the window) is gone after it, and after a restart too,
// while another user of the namespace keeps the item still in its window.
func TestWriteBackOfAUserPastItsWindowLetsItGo(t *testing.T) {
	clock, advance := newTestClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	fx := newFixture(t, Options{Now: clock})
	record(t, fx.h, "push", "u", "a")
	record(t, fx.h, "push", "kept", "a")
	advance(6 * 24 * time.Hour)
	record(t, fx.h, "push", "kept", "b")
	advance(3 * 24 * time.Hour) // u's a and kept's a left the 7-day window, kept's b did not
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	goneCheck(t, fx, "push", "u", 1, "written back past the window")
	if got := seen(t, fx.h, "push", "kept", "a", "b"); got[0] || !got[1] {
		t.Fatalf("kept: a, b seen %v; want [false true]", got)
	}
	fx.restart(false, Options{Now: clock})
	goneCheck(t, fx, "push", "u", 0, "after a restart")
	if st, err := fx.h.User("push", "kept"); err != nil || st.Items != 1 {
		t.Fatalf("kept after a restart: %d items, %v; want 1", st.Items, err)
	}
	backAgain(t, fx, "push", "u", "a", "c")
}

// TestUserStaysUntilItsLastItemLeavesTheWindow: the user is kept, listed
// and with its item seen, up to the last instant of the window of its
// newest item, written back then too; one nanosecond later it is gone.
func TestUserStaysUntilItsLastItemLeavesTheWindow(t *testing.T) {
	start := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	clock, advance := newTestClock(start)
	fx := newFixture(t, Options{Now: clock})
	p := defaultNS[1].Profile
	record(t, fx.h, "push", "u", "a")
	// a is in the bucket [start, start+granularity): it tests seen for a
	// whole window after the end of that bucket. The restart comes a
	// minute before that end: the store's expiry runs on the real clock,
	// and the value written back then lives a minute of it, time enough
	// for a restart on a loaded machine (a nanosecond before, it would
	// live the least the store keeps, a second).
	advance(p.Granularity + p.Window - time.Minute)
	if !seen(t, fx.h, "push", "u", "a")[0] {
		t.Fatal("a unseen a minute before the end of its window")
	}
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	users, err := fx.h.Users("push", "", 0)
	if err != nil || !slices.Contains(users, "u") {
		t.Fatalf("u listed in %q (%v) before the end of its window", users, err)
	}
	if st, err := fx.h.User("push", "u"); err != nil || st.Items != 1 {
		t.Fatalf("stats before the end of the window: %d items, %v; want 1", st.Items, err)
	}
	fx.restart(true, Options{Now: clock})
	if !seen(t, fx.h, "push", "u", "a")[0] {
		t.Fatal("a unseen after a restart before the end of its window")
	}
	advance(time.Minute - time.Nanosecond)
	if !seen(t, fx.h, "push", "u", "a")[0] {
		t.Fatal("a unseen a nanosecond before the end of its window")
	}
	advance(time.Nanosecond)
	if seen(t, fx.h, "push", "u", "a")[0] {
		t.Fatal("a still seen past its window")
	}
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.h.User("push", "u"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("stats past the window: %v; want ErrUserNotFound", err)
	}
}

// TestUserPastItsWindowBeforeItsWriteBackLeavesTheDisk: the write-back of
// a user whose items all left the window writes no empty filter that
// stays on disk for good: what it writes (for its cover mark) expires as
// the journal records it covers do, a window and a bucket later.
func TestUserPastItsWindowBeforeItsWriteBackLeavesTheDisk(t *testing.T) {
	fx := briefFixture(t)
	record(t, fx.h, "brief", "u", "a")
	time.Sleep(pastBrief)
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	goneCheck(t, fx, "brief", "u", 0, "written back past the window")
	time.Sleep(pastBrief)
	offDisk(t, fx, "brief", "u", "a window and a bucket after its write-back")
	fx.restart(true, Options{})
	goneCheck(t, fx, "brief", "u", 0, "after a restart")
	offDisk(t, fx, "brief", "u", "after a restart")
	backAgain(t, fx, "brief", "u", "a", "b")
}

// TestGoneUserComesBackWithTheNamespacesProfile: a user gone past its
// window and recorded again is a new user, made with the namespace's
// profile of the day (here a window shortened since it was made), whether
// it was still in memory or read from the store.
func TestGoneUserComesBackWithTheNamespacesProfile(t *testing.T) {
	day := 24 * time.Hour
	clock, advance := newTestClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	fx := newFixture(t, Options{Now: clock})
	record(t, fx.h, "push", "hot", "a")
	record(t, fx.h, "push", "cold", "a")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	shorter := []Namespace{defaultNS[0], {Name: "push", Profile: userfilter.Profile{Window: day, Granularity: day / 4}}}
	if _, err := fx.h.SetNamespaces(shorter); err != nil {
		t.Fatal(err)
	}
	if st, err := fx.h.User("push", "hot"); err != nil || st.Window != int64(7*day/time.Second) {
		t.Fatalf("before its window ends: window %d s, %v; want the 7 days it was made with", st.Window, err)
	}
	advance(9 * day)
	fx.ns = shorter
	record(t, fx.h, "push", "hot", "b") // in memory, gone
	fx.restart(true, Options{Now: clock})
	record(t, fx.h, "push", "cold", "b") // in the store, gone
	for _, user := range []string{"hot", "cold"} {
		st, err := fx.h.User("push", user)
		if err != nil || st.Items != 1 || st.Window != int64(day/time.Second) {
			t.Errorf("%s recorded again: %d items, window %d s, %v; want 1 item and the namespace's window of a day",
				user, st.Items, st.Window, err)
		}
	}
}

// emptyOf is an export of a filter of ns's profile that never recorded an
// item.
func emptyOf(t *testing.T, h *HotSet, ns string) []byte {
	t.Helper()
	n, _ := h.Namespace(ns)
	return storagetest.NoHistory(t, n.Profile)
}

// TestEmptiedUserIsGone: a windowed user left with no item by a step that
// writes it whole, an import of an empty filter (replacing or merged into
// a user never seen) or a forget of every item of a compact filter, is
// gone at once, as one whose items left the window: not counted hot even
// before anyone looks it up, not listed, no stats, and after a crash its
// journal, covered by what the step wrote, does not bring it back.
func TestEmptiedUserIsGone(t *testing.T) {
	compact := Namespace{Name: "cw", Profile: userfilter.Profile{Kind: userfilter.KindCompact,
		Window: 7 * 24 * time.Hour, Granularity: 24 * time.Hour}}
	for _, tc := range []struct {
		name, ns string
		empty    func(t *testing.T, h *HotSet, user string) error
		history  bool // the user has items before the step
	}{
		{"import replacing", "push", func(t *testing.T, h *HotSet, user string) error {
			_, err := h.Import("push", user, emptyOf(t, h, "push"), true, 0)
			return err
		}, true},
		{"import into a user never seen", "push", func(t *testing.T, h *HotSet, user string) error {
			_, err := h.Import("push", user, emptyOf(t, h, "push"), false, 0)
			return err
		}, false},
		{"forget every item", "cw", func(t *testing.T, h *HotSet, user string) error {
			n, err := h.ForgetItems("cw", user, []string{"a", "b", "c"})
			if err == nil && n != 3 {
				err = fmt.Errorf("forgot %d items, want 3", n)
			}
			return err
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, Options{})
			fx.ns = append(append([]Namespace(nil), defaultNS...), compact)
			fx.restart(true, Options{})
			record(t, fx.h, tc.ns, "kept", "a")
			if tc.history {
				record(t, fx.h, tc.ns, "u", "a", "b")
				if err := fx.h.Flush(); err != nil {
					t.Fatal(err)
				}
				record(t, fx.h, tc.ns, "u", "c") // journaled only
			}
			if err := tc.empty(t, fx.h, "u"); err != nil {
				t.Fatal(err)
			}
			if n := fx.h.Stats().Namespaces[tc.ns]; n.HotUsers != 1 {
				t.Errorf("emptied: %d hot users in %s before any look-up, want 1 (kept)", n.HotUsers, tc.ns)
			}
			goneCheck(t, fx, tc.ns, "u", 1, "emptied")
			fx.restart(false, Options{})
			goneCheck(t, fx, tc.ns, "u", 0, "after a crash")
			if got := seen(t, fx.h, tc.ns, "kept", "a"); !got[0] {
				t.Errorf("kept's a unseen after a crash")
			}
			backAgain(t, fx, tc.ns, "u", "a", "d")
		})
	}
}

// TestGoneUserMadeAnewKeepsItsProfileThroughACrash: a gone user whose
// journal is not yet retired (its records outlive its items by up to a
// bucket) and who is recorded again is made anew with the namespace's
// profile of the day, here a window lengthened from a day to a week since
// its records were made; a crash before its write-back replays it with
// that profile too, not with the one its older records name: its new item
// stays seen for the week, whether the user was in memory or read from the
// store when it came back.
func TestGoneUserMadeAnewKeepsItsProfileThroughACrash(t *testing.T) {
	day := 24 * time.Hour
	short := []Namespace{defaultNS[0], {Name: "push", Profile: userfilter.Profile{Window: day, Granularity: day / 4}}}
	long := []Namespace{defaultNS[0], {Name: "push", Profile: userfilter.Profile{Window: 7 * day, Granularity: day}}}
	for _, hot := range []bool{true, false} {
		t.Run(map[bool]string{true: "in memory", false: "from the store"}[hot], func(t *testing.T) {
			clock, advance := newTestClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
			// No write-back before the crash: the user's records stay.
			opts := Options{Now: clock, FlushInterval: 30 * day}
			fx := newFixture(t, Options{})
			fx.ns = short
			fx.restart(true, opts)
			record(t, fx.h, "push", "u", "a")
			fx.ns = long
			if hot {
				if _, err := fx.h.SetNamespaces(long); err != nil {
					t.Fatal(err)
				}
			} else {
				fx.restart(false, opts)
			}
			advance(2 * day) // a left the day's window: u is gone
			record(t, fx.h, "push", "u", "b")
			fx.restart(false, opts)
			st, err := fx.h.User("push", "u")
			if err != nil || st.Items != 1 || st.Window != int64(7*day/time.Second) {
				t.Fatalf("after a crash: %d items, window %d s, %v; want 1 item and the week's window it was made with",
					st.Items, st.Window, err)
			}
			advance(3 * day)
			if got := seen(t, fx.h, "push", "u", "a", "b"); got[0] || !got[1] {
				t.Fatalf("3 days after a crash: a, b seen %v; want [false true] (b recorded in a week's window)", got)
			}
		})
	}
}

// A gone user recorded again is a new user, whether its gone filter was
// still in memory or only in the store: new users count both alike.
func TestGoneUserMadeAnewCountsAsNew(t *testing.T) {
	clock, advance := newTestClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	fx := newFixture(t, Options{Now: clock})
	newUsers := func() uint64 { return fx.h.Stats().Namespaces["push"].NewUsers }
	record(t, fx.h, "push", "hot", "a")
	record(t, fx.h, "push", "cold", "a")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := newUsers(); n != 2 {
		t.Fatalf("two users recorded: %d new users, want 2", n)
	}
	advance(9 * 24 * time.Hour) // past push's week
	record(t, fx.h, "push", "hot", "b")
	if n := newUsers(); n != 3 {
		t.Errorf("a gone user in memory recorded again: %d new users, want 3", n)
	}
	fx.restart(true, Options{Now: clock})
	record(t, fx.h, "push", "cold", "b")
	if n := newUsers(); n != 1 {
		t.Errorf("after a restart, a gone user in the store recorded again: %d new users, want 1", n)
	}
}
