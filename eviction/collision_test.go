package eviction

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/seenapi/seenapi/userfilter"
)

// collide makes users share keys for the test's duration: every user's
// first key is one of firstKeys values, and with allKeys its other keys too.
func collide(t *testing.T, firstKeys uint64, allKeys bool) {
	first := map[uint64]bool{}
	for _, n := range defaultNS {
		first[nsSeed(n.Name)] = true
	}
	orig := userHash
	userHash = func(user string, seed uint64) uint64 {
		if allKeys || first[seed] {
			return orig(user, seed) % firstKeys
		}
		return orig(user, seed)
	}
	t.Cleanup(func() { userHash = orig })
}

// hotEntry returns the user's entry in the LRU, or nil.
func hotEntry(h *HotSet, user string) *entry {
	for _, s := range h.shards {
		s.mu.Lock()
		for _, e := range s.lru.Values() {
			if e.id() == user {
				s.mu.Unlock()
				return e
			}
		}
		s.mu.Unlock()
	}
	return nil
}

func TestUsersSharingKeysKeepTheirOwnHistory(t *testing.T) {
	collide(t, 4, false)
	// One shard and room for about a fifth of the users: loads, evictions
	// and write-backs all meet users under their later keys.
	fx := newFixture(t, Options{CacheBytes: 32 << 10, Shards: 1})
	const users, rounds, workers = 500, 3, 8
	item := func(u, r int) string { return fmt.Sprintf("u%d-r%d", u, r) }
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				for u := w; u < users; u += workers {
					if _, err := fx.h.Filter("default", fmt.Sprintf("u%d", u), []string{item(u, r)}, 0, userfilter.RecordReturned); err != nil {
						t.Error(err)
						return
					}
				}
				if w == 0 {
					if err := fx.h.Flush(); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if !fx.h.shards[0].probing {
		t.Fatal("no user took a later key: the test did not exercise collisions")
	}
	later := 0
	for _, e := range fx.h.shards[0].lru.Values() {
		if e.probe > 0 {
			later++
		}
	}
	t.Logf("%d of %d hot users under a later key; %d evictions", later, fx.h.shards[0].lru.Len(), fx.h.Stats().Evictions)
	if fx.h.Stats().Evictions == 0 {
		t.Fatal("no evictions: the budget is too large for the test")
	}
	check := func(h *HotSet) {
		t.Helper()
		others := 0
		for u := range users {
			want := make([]string, 0, rounds)
			var foreign []string
			for r := range rounds {
				want = append(want, item(u, r))
				foreign = append(foreign, item((u+1)%users, r))
			}
			if got := seen(t, h, "default", fmt.Sprintf("u%d", u), want...); !allTrue(got) {
				t.Fatalf("u%d lost its own items: %v", u, got)
			}
			for _, s := range seen(t, h, "default", fmt.Sprintf("u%d", u), foreign...) {
				if s {
					others++
				}
			}
		}
		// A mix-up would show every item of the neighbour; the filter's
		// false positives (1%) about 15 of 1,500.
		if others > 60 {
			t.Fatalf("users see %d of %d items of other users", others, users*rounds)
		}
	}
	check(fx.h)
	fx.restart(false, Options{CacheBytes: 32 << 10, Shards: 1})
	check(fx.h)
}

func TestUserUnderLaterKeyIsFoundWhenItsFirstKeyFrees(t *testing.T) {
	collide(t, 1, false)
	fx := newFixture(t, Options{Shards: 1})
	record(t, fx.h, "default", "a", "a1")
	record(t, fx.h, "default", "b", "b1")
	if e := hotEntry(fx.h, "b"); e == nil || e.probe != 1 {
		t.Fatalf("b's entry %+v, want it under its second key", e)
	}
	if err := fx.h.Forget("default", "a"); err != nil {
		t.Fatal(err)
	}
	// b is dirty and under its second key while the first is free: it must
	// be found there, not loaded as a second copy.
	loads := fx.h.Stats().Loads
	record(t, fx.h, "default", "b", "b2")
	if got := seen(t, fx.h, "default", "b", "b1", "b2"); !allTrue(got) {
		t.Fatalf("b lost items: %v", got)
	}
	if l := fx.h.Stats().Loads; l != loads {
		t.Fatalf("b loaded %d times again while hot", l-loads)
	}
	record(t, fx.h, "default", "c", "c1")
	if e := hotEntry(fx.h, "c"); e == nil || e.probe != 0 {
		t.Fatalf("c's entry %+v, want it under the free first key", e)
	}
	if err := fx.h.Forget("default", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.h.User("default", "b"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("b after Forget: %v, want ErrUserNotFound", err)
	}
	if !seen(t, fx.h, "default", "c", "c1")[0] {
		t.Fatal("c lost c1")
	}
	fx.restart(false, Options{Shards: 1})
	if got := seen(t, fx.h, "default", "c", "c1", "b1"); !got[0] || got[1] {
		t.Fatalf("after restart c sees c1, b1: %v, want true, false", got)
	}
}

func TestUserWhoseKeysAreAllTakenGetsAnErrorNotAMixUp(t *testing.T) {
	collide(t, 1, true)
	fx := newFixture(t, Options{Shards: 1})
	record(t, fx.h, "default", "a", "a1")
	if _, err := fx.h.Filter("default", "b", []string{"b1"}, 0, userfilter.RecordReturned); !errors.Is(err, errCollision) {
		t.Fatalf("b while a holds every key: %v, want errCollision", err)
	}
	if got := seen(t, fx.h, "default", "a", "a1", "b1"); !got[0] || got[1] {
		t.Fatalf("a sees a1, b1: %v, want true, false", got)
	}
	if err := fx.h.Forget("default", "a"); err != nil {
		t.Fatal(err)
	}
	if got := record(t, fx.h, "default", "b", "b1", "a1"); len(got.Unseen) != 2 {
		t.Fatalf("b once a is gone: %+v, want both items unseen", got)
	}
}
