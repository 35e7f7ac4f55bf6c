package eviction

import (
	"errors"
	"fmt"
	"slices"
	"sync"
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
// left out is still served, and its figures still count.
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
	if fmt.Sprint(ch.Added, ch.Changed, ch.Kept) != "[email] [default] [push]" {
		t.Fatalf("changes: added %v, changed %v, kept %v", ch.Added, ch.Changed, ch.Kept)
	}
	if got := namesOf(fx.h.Namespaces()); !slices.Equal(got, []string{"default", "email", "push"}) {
		t.Fatalf("namespaces after the reload: %v", got)
	}
	if n, ok := fx.h.Namespace("default"); !ok || n.Profile != compact.WithDefaults() {
		t.Fatalf("default's profile after the reload: %+v, %v", n.Profile, ok)
	}

	record(t, fx.h, "email", "u", "a")
	record(t, fx.h, "default", "after", "a")
	record(t, fx.h, "default", "before", "b")
	record(t, fx.h, "push", "p", "b")
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
	if st.Namespaces["push"].HotUsers != 1 || st.Namespaces["email"].HotUsers != 1 || st.Namespaces["default"].HotUsers != 2 {
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
	if _, err := fx.h.SetNamespaces([]Namespace{{Name: "n0", Profile: userfilter.Profile{FPRate: 0.05}}}); err != nil {
		t.Fatalf("changing a namespace served before: %v", err)
	}
	record(t, fx.h, "n0", "u", "a")
	record(t, fx.h, fmt.Sprintf("n%d", maxNamespaces-len(before)-1), "u", "a")
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
	var wg sync.WaitGroup
	var calls atomic.Int64
	stop := make(chan struct{})
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
				ns := []string{"default", "push", "email"}[i%3]
				user := fmt.Sprintf("u%d-%d", g, i%50)
				_, err := fx.h.Filter(ns, user, []string{fmt.Sprint(i)}, 0, userfilter.RecordReturned)
				if err != nil && !(ns == "email" && errors.Is(err, ErrUnknownNamespace)) {
					t.Error(err)
					return
				}
				fx.h.Stats()
				fx.h.Namespaces()
				calls.Add(1)
			}
		}()
	}
	// Reload until the calls have met many reloads, however the
	// goroutines are scheduled.
	for i := 0; i < 200 || calls.Load() < 5000; i++ {
		nss := []Namespace{defaultNS[0], defaultNS[1], {Name: "email", Profile: userfilter.Profile{FPRate: 0.01 / float64(1+i%3)}}}
		if _, err := fx.h.SetNamespaces(nss); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	checkNamespaceStats(t, fx.h)
}
