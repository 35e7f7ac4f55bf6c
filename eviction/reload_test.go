package eviction

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/userfilter"
)

func namesOf(nss []Namespace) []string {
	out := make([]string, len(nss))
	for i, n := range nss {
		out[i] = n.Name
	}
	return out
}

func kindOf(t *testing.T, h *HotSet, ns, user string) string {
	t.Helper()
	st, err := h.User(ns, user)
	if err != nil {
		t.Fatal(err)
	}
	return st.Kind
}

// A reload serves a new namespace at once, and a changed profile makes the
// filters of new users while those made before keep theirs; a namespace
// left out is no longer served, and its figures still count.
func TestSetNamespacesAddsAndChangesWithoutARestart(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "before", "a")
	record(t, fx.h, "push", "p", "a")
	if _, err := fx.h.Filter("email", "u", []string{"a"}, 0, userfilter.RecordReturned); !errors.Is(err, ErrUnknownNamespace) {
		t.Fatalf("email before the reload: %v, want ErrUnknownNamespace", err)
	}

	compact := userfilter.Profile{Kind: userfilter.KindCompact}
	ch, err := fx.h.SetNamespaces([]Namespace{
		{Name: "email", Profile: userfilter.Profile{FPRate: 0.001}},
		{Name: "default", Profile: compact},
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ch.Added, ch.Changed, ch.Removed) != "[email] [default] [push]" {
		t.Fatalf("changes: added %v, changed %v, removed %v", ch.Added, ch.Changed, ch.Removed)
	}
	if got := namesOf(fx.h.Namespaces()); !slices.Equal(got, []string{"default", "email"}) {
		t.Fatalf("namespaces after the reload: %v", got)
	}
	if n, ok := fx.h.Namespace("default"); !ok || n.Profile != compact.WithDefaults() {
		t.Fatalf("default's profile after the reload: %+v, %v", n.Profile, ok)
	}

	record(t, fx.h, "email", "u", "a")
	record(t, fx.h, "default", "after", "a")
	record(t, fx.h, "default", "before", "b")
	if _, err := fx.h.Filter("push", "p", []string{"b"}, 0, userfilter.RecordReturned); !errors.Is(err, ErrUnknownNamespace) {
		t.Fatalf("push after the reload that left it out: %v, want ErrUnknownNamespace", err)
	}
	if got := seen(t, fx.h, "email", "u", "a", "b"); fmt.Sprint(got) != "[true false]" {
		t.Fatalf("email: %v", got)
	}
	if got := seen(t, fx.h, "default", "before", "a", "b", "c"); fmt.Sprint(got) != "[true true false]" {
		t.Fatalf("a user made before the reload: %v", got)
	}
	if k := kindOf(t, fx.h, "default", "before"); k != "staged" {
		t.Fatalf("a user made before the reload is now %s, want it kept staged", k)
	}
	if k := kindOf(t, fx.h, "default", "after"); k != "compact" {
		t.Fatalf("a user made after the reload is %s, want compact", k)
	}
	st := checkNamespaceStats(t, fx.h)
	if st.Namespaces["push"].HotUsers != 0 || st.Namespaces["email"].HotUsers != 1 || st.Namespaces["default"].HotUsers != 2 {
		t.Fatalf("hot users by namespace: %+v", st.Namespaces)
	}

	// Written back and read again after a restart with the new list: every
	// user has what it recorded, each filter its own kind.
	fx.ns = []Namespace{{Name: "default", Profile: compact}, {Name: "email", Profile: userfilter.Profile{FPRate: 0.001}}, defaultNS[1]}
	fx.restart(true, Options{})
	if got := seen(t, fx.h, "default", "before", "a", "b"); fmt.Sprint(got) != "[true true]" {
		t.Fatalf("after a restart: %v", got)
	}
	if k := kindOf(t, fx.h, "default", "before"); k != "staged" {
		t.Fatalf("after a restart a user made before the reload is %s", k)
	}
	if got := seen(t, fx.h, "email", "u", "a"); !allTrue(got) {
		t.Fatalf("email after a restart: %v", got)
	}
	if got := seen(t, fx.h, "push", "p", "a", "b"); fmt.Sprint(got) != "[true false]" {
		t.Fatalf("push, served again after a restart: %v", got)
	}
}

// A list that cannot be served changes nothing.
func TestSetNamespacesRefusesABadListWhole(t *testing.T) {
	fx := newFixture(t, Options{})
	before := fx.h.Namespaces()
	for name, nss := range map[string][]Namespace{
		"bad profile": {{Name: "email"}, {Name: "default", Profile: userfilter.Profile{FPRate: 2}}},
		"twice":       {{Name: "email"}, {Name: "email"}},
	} {
		if _, err := fx.h.SetNamespaces(nss); err == nil {
			t.Fatalf("%s: no error", name)
		}
		if got := fx.h.Namespaces(); !slices.Equal(got, before) {
			t.Fatalf("%s: namespaces changed to %v", name, got)
		}
		if _, err := fx.h.Filter("email", "u", []string{"a"}, 0, userfilter.RecordReturned); !errors.Is(err, ErrUnknownNamespace) {
			t.Fatalf("%s: email is served: %v", name, err)
		}
	}

	// An entry tells its namespace by a byte: a namespace served once keeps
	// its number, so at most maxNamespaces can be served since the start.
	for i := range maxNamespaces - len(before) {
		if _, err := fx.h.SetNamespaces([]Namespace{{Name: fmt.Sprintf("n%d", i)}}); err != nil {
			t.Fatalf("namespace %d: %v", len(before)+i+1, err)
		}
	}
	if _, err := fx.h.SetNamespaces([]Namespace{{Name: "one-too-many"}}); err == nil {
		t.Fatal("no error past maxNamespaces")
	}
	last := fmt.Sprintf("n%d", maxNamespaces-len(before)-1)
	if _, err := fx.h.SetNamespaces([]Namespace{{Name: "n0", Profile: userfilter.Profile{FPRate: 0.05}}, {Name: last}}); err != nil {
		t.Fatalf("serving again, with another profile, a namespace served before: %v", err)
	}
	record(t, fx.h, "n0", "u", "a")
	record(t, fx.h, last, "u", "a")
	checkNamespaceStats(t, fx.h)
}

// A journal record lasts as long as its items test seen in the filter it
// goes to: a user made before a window shrank keeps the longer window, and
// so must its records.
func TestJournalTTLFollowsTheUsersFilterAcrossAReload(t *testing.T) {
	st, h := newTTLHotSet(t, Options{})
	record(t, h, "push", "before", "a")
	day := 24 * time.Hour
	if _, err := h.SetNamespaces([]Namespace{defaultNS[0], {Name: "push", Profile: userfilter.Profile{Window: day}}}); err != nil {
		t.Fatal(err)
	}
	ttl := func(user string) time.Duration {
		record(t, h, "push", user, "b")
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.ttls["push"]
	}
	if got, want := ttl("before"), 8*day; got != want {
		t.Errorf("a user made before the reload: journal kept %v, want %v (its own window and a bucket)", got, want)
	}
	if got, want := ttl("after"), day+day/4; got != want {
		t.Errorf("a user made after the reload: journal kept %v, want %v", got, want)
	}
	// The stats say which window each user's filter keeps.
	for user, want := range map[string][2]int64{"before": {7 * 86400, 86400}, "after": {86400, 86400 / 4}} {
		st, err := h.User("push", user)
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]int64{st.Window, st.Granularity}; got != want {
			t.Errorf("%s: stats say window and granularity %v s, want %v", user, got, want)
		}
	}
}

// Calls go on while the namespaces are reloaded (run with -race).
func TestCallsWhileNamespacesAreReloaded(t *testing.T) {
	fx := newFixture(t, Options{CacheBytes: 256 << 10, Shards: 4})
	var calls atomic.Int64
	stop := goLoops(4, func(g, i int) bool {
		ns := []string{"default", "push", "email"}[i%3]
		user := fmt.Sprintf("u%d-%d", g, i%50)
		_, err := fx.h.Filter(ns, user, []string{fmt.Sprint(i)}, 0, userfilter.RecordReturned)
		if err != nil && !(ns != "default" && errors.Is(err, ErrUnknownNamespace)) {
			t.Error(err)
			return false
		}
		fx.h.Stats()
		fx.h.Namespaces()
		calls.Add(1)
		return true
	})
	// Reload until the calls have met many reloads, however the
	// goroutines are scheduled: push and email are left out by turns, and
	// their users evicted.
	for i := 0; i < 200 || calls.Load() < 5000; i++ {
		nss := []Namespace{defaultNS[0], {Name: "email", Profile: userfilter.Profile{FPRate: 0.01 / float64(1+i%3)}}}
		if i%2 == 1 {
			nss = []Namespace{defaultNS[0], defaultNS[1]}
		}
		if _, err := fx.h.SetNamespaces(nss); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	checkNamespaceStats(t, fx.h)
}

// A namespace a reload leaves out is no longer served: its hot users are
// evicted and those with changes written back at once, not after the flush
// interval (an hour here), and a later reload that has it again serves its
// users as they were.
func TestRemovedNamespaceIsWrittenBackAndServedAgain(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "push", "p", "a")
	record(t, fx.h, "push", "q", "x")
	record(t, fx.h, "default", "d", "a")
	if f, j, err := fx.st.Load("push", "p"); err != nil || len(f) != 0 || len(j) != 1 {
		t.Fatalf("before the reload: p has %d B stored and %d journal records (%v); want only its record", len(f), len(j), err)
	}

	ch, err := fx.h.SetNamespaces(defaultNS[:1])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ch.Added, ch.Changed, ch.Removed) != "[] [] [push]" {
		t.Fatalf("changes: added %v, changed %v, removed %v", ch.Added, ch.Changed, ch.Removed)
	}
	for _, call := range []func() error{
		func() error {
			_, err := fx.h.Filter("push", "p", []string{"b"}, 0, userfilter.RecordReturned)
			return err
		},
		func() error { _, err := fx.h.Check("push", "p", []string{"a"}, nil); return err },
		func() error { _, err := fx.h.User("push", "p"); return err },
		func() error { return fx.h.Forget("push", "p") },
	} {
		if err := call(); !errors.Is(err, ErrUnknownNamespace) {
			t.Fatalf("a call for push after the reload: %v, want ErrUnknownNamespace", err)
		}
	}
	if _, ok := fx.h.Namespace("push"); ok {
		t.Fatal("push is still listed")
	}

	// The write-back was asked for at once.
	deadline := time.Now().Add(10 * time.Second)
	for _, user := range []string{"p", "q"} {
		for {
			f, j, err := fx.st.Load("push", user)
			if err != nil {
				t.Fatal(err)
			}
			if len(f) > 0 && len(j) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s was not written back: %d B stored, %d journal records", user, len(f), len(j))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	st := checkNamespaceStats(t, fx.h)
	if n := st.Namespaces["push"]; n.HotUsers != 0 || n.CacheBytes != 0 || n.Evictions != 2 {
		t.Fatalf("push after the reload: %+v, want no hot user and two evictions", n)
	}
	if fmt.Sprint(st.RemovedNamespaces) != "[push]" {
		t.Fatalf("removed namespaces in the stats: %v", st.RemovedNamespaces)
	}
	if st.Namespaces["default"].HotUsers != 1 || st.DirtyUsers != 1 {
		t.Fatalf("default after the reload: %+v, %d dirty users; want its user left as it was", st.Namespaces["default"], st.DirtyUsers)
	}

	// Served again, under its old index and counters.
	ch, err = fx.h.SetNamespaces(defaultNS)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ch.Added, ch.Changed, ch.Removed) != "[push] [] []" {
		t.Fatalf("changes: added %v, changed %v, removed %v", ch.Added, ch.Changed, ch.Removed)
	}
	if got := seen(t, fx.h, "push", "p", "a", "b"); fmt.Sprint(got) != "[true false]" {
		t.Fatalf("p served again: %v", got)
	}
	if got := seen(t, fx.h, "push", "q", "x"); !allTrue(got) {
		t.Fatalf("q served again: %v", got)
	}
	st = checkNamespaceStats(t, fx.h)
	if n := st.Namespaces["push"]; n.HotUsers != 2 || n.Evictions != 2 || n.Loads < 4 || len(st.RemovedNamespaces) != 0 {
		t.Fatalf("push served again: %+v, removed namespaces %v", n, st.RemovedNamespaces)
	}
}

// A user of a removed namespace whose write-back is still pending when the
// namespace is served again is taken back from memory, not loaded a second
// time from the store (which would lose its change).
func TestNamespaceServedAgainBeforeItsWriteBack(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "push", "p", "a")
	fx.h.flushMu.Lock() // hold write-back off
	if _, err := fx.h.SetNamespaces(defaultNS[:1]); err != nil {
		fx.h.flushMu.Unlock()
		t.Fatal(err)
	}
	_, err := fx.h.SetNamespaces(defaultNS)
	if err == nil {
		record(t, fx.h, "push", "p", "b")
	}
	fx.h.flushMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if got := seen(t, fx.h, "push", "p", "a", "b"); !allTrue(got) {
		t.Fatalf("p: %v, want both items", got)
	}
	if n := checkNamespaceStats(t, fx.h).Namespaces["push"]; n.Loads != 1 {
		t.Fatalf("p was loaded %d times, want once (taken back from memory after the reload)", n.Loads)
	}
	fx.restart(true, Options{})
	if got := seen(t, fx.h, "push", "p", "a", "b"); !allTrue(got) {
		t.Fatalf("p after a restart: %v, want both items", got)
	}
}

// A user whose filter was not written back when the process died is
// rebuilt from its journal with the profile it was made with, not with its
// namespace's profile after a reload changed it: a cap added since would
// drop items, and another kind or window would change the user. A user
// written back and called again keeps its stored profile the same way.
func TestCrashAfterAProfileChangeKeepsEachUsersProfile(t *testing.T) {
	fx := newFixture(t, Options{})
	week := 7 * 24 * time.Hour
	fx.ns = []Namespace{{Name: "feed", Profile: userfilter.Profile{Window: week}}}
	fx.restart(true, Options{})
	items := make([]string, 40)
	for i := range items {
		items[i] = fmt.Sprintf("i%d", i)
	}
	record(t, fx.h, "feed", "stored", items[:20]...)
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	record(t, fx.h, "feed", "stored", items[20:]...) // the first record since the write-back
	// Two calls: only the first record names the profile.
	for i := 0; i < 20; i += 10 {
		record(t, fx.h, "feed", "new", items[i:i+10]...)
	}

	capped := []Namespace{{Name: "feed", Profile: userfilter.Profile{Kind: userfilter.KindBloom, MaxItems: 10}}}
	if _, err := fx.h.SetNamespaces(capped); err != nil {
		t.Fatal(err)
	}
	fx.ns = capped
	fx.restart(false, Options{}) // a crash, and a start with the file as the reload left it

	for user, n := range map[string]int{"new": 20, "stored": 40} {
		if got := seen(t, fx.h, "feed", user, items[:n]...); !allTrue(got) {
			t.Errorf("%s after the crash: %v, want all %d seen", user, got, n)
		}
		st, err := fx.h.User("feed", user)
		if err != nil {
			t.Fatal(err)
		}
		if st.Kind != "staged" || st.Window != int64(week/time.Second) || st.MaxItems != 0 || st.Items != uint64(n) {
			t.Errorf("%s after the crash: %s, window %ds, cap %d, %d items; want staged, a week, no cap, %d",
				user, st.Kind, st.Window, st.MaxItems, st.Items, n)
		}
	}
	// A user made after the change has the namespace's new profile.
	record(t, fx.h, "feed", "after", items[:20]...)
	if st, err := fx.h.User("feed", "after"); err != nil || st.Kind != "bloom" || st.Items != 10 {
		t.Errorf("a user made after the change: %+v %v, want bloom with 10 items", st, err)
	}
}
