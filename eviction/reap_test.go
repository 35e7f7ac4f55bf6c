package eviction

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seenapi/seenapi/userfilter"
)

// waitHot waits (up to a minute, for a loaded machine) until ns holds
// want hot users, and fails the test if it does not.
func waitHot(t *testing.T, h *HotSet, ns string, want int64, when string) NamespaceStats {
	t.Helper()
	var n NamespaceStats
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n = h.Stats().Namespaces[ns]; n.HotUsers == want {
			return n
		}
	}
	t.Fatalf("%s: %d hot users in %s in %d bytes, want %d", when, n.HotUsers, ns, n.CacheBytes, want)
	return n
}

// TestReaperDropsAnUntouchedUserPastItsWindow: a clean user whose items
// all left the window, and whom no call looks up, leaves the cache on its
// own: the namespace's hot users and bytes drop to none, the user is not
// listed, answers as a user never seen, and stays gone after a crash; a
// user of a namespace without a window stays hot.
func TestReaperDropsAnUntouchedUserPastItsWindow(t *testing.T) {
	fx := briefFixture(t)
	record(t, fx.h, "brief", "u", "a")
	record(t, fx.h, "default", "d", "a")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := fx.h.Stats().Namespaces["brief"]; n.HotUsers != 1 || n.CacheBytes <= 0 {
		t.Fatalf("recorded: %d hot users in brief in %d bytes, want 1", n.HotUsers, n.CacheBytes)
	}
	time.Sleep(pastBrief)
	if n := waitHot(t, fx.h, "brief", 0, "past the window, untouched"); n.CacheBytes != 0 {
		t.Fatalf("past the window, untouched: brief holds %d bytes with no hot user, want 0", n.CacheBytes)
	}
	if n := fx.h.Stats().Namespaces["default"].HotUsers; n != 1 {
		t.Fatalf("%d hot users in default, want 1: it has no window", n)
	}
	users, err := fx.h.Users("brief", "", 0)
	if err != nil || slices.Contains(users, "u") {
		t.Fatalf("past the window: brief lists %q (%v), want no u", users, err)
	}
	goneCheck(t, fx, "brief", "u", 0, "past the window")
	fx.restart(false, Options{})
	goneCheck(t, fx, "brief", "u", 0, "after a crash")
	backAgain(t, fx, "brief", "u", "a", "b")
}

// TestReaperKeepsUsersInTheirWindow: the reaper takes out the clean users
// gone as of now, and only them: a user with an item still in the window,
// one gone whose journal waits for its write-back (left to it: it writes
// the user Empty), and users of a namespace without a window stay hot.
func TestReaperKeepsUsersInTheirWindow(t *testing.T) {
	day := 24 * time.Hour
	clock, advance := newTestClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	opts := Options{Now: clock, FlushInterval: 30 * day} // no write-back but Flush
	fx := newFixture(t, opts)
	record(t, fx.h, "push", "journaled", "a")
	fx.restart(false, opts) // a crash: its journal is not written back
	for i := range 40 {
		record(t, fx.h, "push", fmt.Sprint("gone", i), "a")
		record(t, fx.h, "default", fmt.Sprint("d", i), "a")
	}
	advance(6 * day)
	record(t, fx.h, "push", "kept", "b")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	advance(3 * day) // a left the 7-day window, b did not
	// Loaded with its journal, which the write-back is to retire.
	if got := seen(t, fx.h, "push", "journaled", "a"); got[0] {
		t.Fatal("journaled's a seen past its window")
	}
	waitHot(t, fx.h, "push", 2, "past the window of a")
	if n := fx.h.Stats().Namespaces["default"].HotUsers; n != 40 {
		t.Fatalf("%d hot users in default, want 40: it has no window", n)
	}
	if st, err := fx.h.User("push", "kept"); err != nil || !st.Hot || st.Items != 1 {
		t.Fatalf("kept: %d items, hot %v, %v; want its item, hot", st.Items, st.Hot, err)
	}
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	goneCheck(t, fx, "push", "journaled", 1, "written back")
	fx.restart(false, opts)
	goneCheck(t, fx, "push", "journaled", 0, "after a crash")
}

// TestReaperBesideCalls: the reaper runs beside calls that load, record,
// evict and look up windowed users as they leave the window, without a
// race (go test -race), a deadlock, or figures that go astray: once the
// calls stop and every user is past its window, the hot set holds none.
func TestReaperBesideCalls(t *testing.T) {
	day := 24 * time.Hour
	clock, advance := newTestClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	// A small budget in few shards: users are evicted and loaded again.
	opts := Options{Now: clock, FlushInterval: 50 * time.Millisecond, CacheBytes: 16 << 10, Shards: 4}
	fx := newFixture(t, opts)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				user := fmt.Sprint("u", (i*7+g)%200)
				switch i % 3 {
				case 0:
					record(t, fx.h, "push", user, fmt.Sprint("i", i))
				case 1:
					fx.h.User("push", user)
				default:
					seen(t, fx.h, "push", user, "i0")
				}
			}
		}()
	}
	for range 30 {
		time.Sleep(10 * time.Millisecond)
		advance(day / 2)
	}
	close(stop)
	wg.Wait()
	advance(9 * day)
	if err := fx.h.Flush(); err != nil { // writes the dirty ones Empty, and drops them
		t.Fatal(err)
	}
	waitHot(t, fx.h, "push", 0, "every user past its window")
	if b, _ := fx.h.Usage(); b != 0 {
		t.Fatalf("%d bytes accounted with no hot user", b)
	}
	// Every key listed for the reaper, copies of users loaded again
	// included, leaves its list.
	for deadline := time.Now().Add(time.Minute); fx.h.reapKeys.Load() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d keys still listed for the reaper with no hot user", fx.h.reapKeys.Load())
		}
	}
}

// TestReaperListsAUserOnce: a windowed user evicted and loaded again many
// times, hot at the end, is listed once for the reaper after a pass, and
// a user evicted for good not at all: the list does not grow with loads.
func TestReaperListsAUserOnce(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "push", "w", "a")
	one := fx.h.Stats().Namespaces["push"].CacheBytes
	// A budget of one user and a half in one shard: each load evicts the
	// other user.
	fx.restart(true, Options{CacheBytes: one + one/2, Shards: 1})
	for range 20 {
		record(t, fx.h, "push", "v", "a")
		record(t, fx.h, "push", "u", "a")
	}
	if n := fx.h.Stats().Namespaces["push"].HotUsers; n != 1 {
		t.Fatalf("%d hot users, want 1 (u)", n)
	}
	for deadline := time.Now().Add(time.Minute); fx.h.reapKeys.Load() != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d keys listed for the reaper with one hot user, want 1", fx.h.reapKeys.Load())
		}
	}
}

// TestReaperFindsAUserImportedWithAWindow: a user of a namespace that had
// no window, replaced by an import with the window its namespace has now,
// is one the reaper looks at: it leaves the cache once past that window.
func TestReaperFindsAUserImportedWithAWindow(t *testing.T) {
	day := 24 * time.Hour
	clock, advance := newTestClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	opts := Options{Now: clock, FlushInterval: 30 * day}
	fx := newFixture(t, opts)
	fx.ns = []Namespace{defaultNS[0], {Name: "w"}}
	fx.restart(true, opts)
	record(t, fx.h, "w", "u", "a") // no window
	windowed := []Namespace{defaultNS[0], {Name: "w", Profile: userfilter.Profile{Window: day, Granularity: day / 4}}}
	if _, err := fx.h.SetNamespaces(windowed); err != nil {
		t.Fatal(err)
	}
	record(t, fx.h, "w", "src", "b") // made with the window
	data, err := fx.h.Export("w", "src")
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.h.Forget("w", "src"); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.h.Import("w", "u", data, true, 1<<20); err != nil {
		t.Fatal(err)
	}
	if st, err := fx.h.User("w", "u"); err != nil || st.Window != int64(day/time.Second) {
		t.Fatalf("imported: window %d s, %v; want a day's", st.Window, err)
	}
	advance(2 * day)
	waitHot(t, fx.h, "w", 0, "imported, past the window")
}
