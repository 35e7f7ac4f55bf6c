package eviction

import (
	"bytes"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// lruUsers is the ids of the shard's hot users, least recently used first.
func lruUsers(s *shard) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, e := range s.lru.Values() {
		ids = append(ids, e.id())
	}
	return ids
}

func shardBytes(s *shard) int64 { s.mu.Lock(); defer s.mu.Unlock(); return s.bytes }

// assertLRUSuffix fails t unless the hot users of s are the last of users,
// in order: the shard evicted its least recently used and only those.
func assertLRUSuffix(t *testing.T, s *shard, users []string, what string) {
	t.Helper()
	hot := lruUsers(s)
	if len(hot) == 0 || len(hot) > len(users) || fmt.Sprint(hot) != fmt.Sprint(users[len(users)-len(hot):]) {
		t.Fatalf("%s holds %v, want the most recently used of %v", what, hot, users)
	}
}

// A call that takes the set over budget in a shard under its share evicts
// nothing there: the shard over its share gives up its least recently used
// users (the sweep), at once, so that the budget holds after every call.
func TestBudgetHeldBySweepingTheShardOverItsShare(t *testing.T) {
	const budget = 64 << 10
	fx := newFixture(t, Options{CacheBytes: budget, Shards: 2})
	info := fx.h.nss.Load().byName["default"]
	s0, s1 := fx.h.shards[0], fx.h.shards[1]
	var in0, in1 []string // users recorded in each shard, in order
	u := 0
	next := func(s *shard) string {
		for ; ; u++ {
			if user := fmt.Sprintf("u%d", u); fx.h.shardOf(fx.h.key(info, user, 0)) == s {
				u++
				return user
			}
		}
	}
	// Shard 0 at three quarters of the budget, past its half share, while
	// the set is under budget: nothing is evicted.
	for shardBytes(s0) <= budget*3/4 {
		user := next(s0)
		record(t, fx.h, "default", user, "x")
		in0 = append(in0, user)
	}
	if n := evictions(fx.h); n != 0 {
		t.Fatalf("%d evictions under budget", n)
	}
	// Shard 1, under its share, takes the set over budget.
	for shardBytes(s1) < s1.budget-1<<10 {
		user := next(s1)
		record(t, fx.h, "default", user, "x")
		in1 = append(in1, user)
		if b := fx.h.hotBytes.Load(); b > budget {
			t.Fatalf("after recording %s in shard 1 (%d bytes, share %d), the set holds %d bytes over budget %d; shard 0 holds %d",
				user, shardBytes(s1), s1.budget, b, budget, shardBytes(s0))
		}
		if got, want := shardBytes(s0)+shardBytes(s1), fx.h.hotBytes.Load(); got != want {
			t.Fatalf("shards hold %d bytes, the set %d", got, want)
		}
	}
	if evictions(fx.h) == 0 {
		t.Fatal("the set never went over budget: no eviction to check")
	}
	assertLRUSuffix(t, s0, in0, "shard 0, over its share,")
	assertLRUSuffix(t, s1, in1, "shard 1, under its share,")
	if got := len(lruUsers(s1)); got != len(in1) {
		t.Fatalf("shard 1, under its share, evicted %d of its users", len(in1)-got)
	}
}

// heldClock is a clock (Options.Now) that, while armed, holds the calls made
// in recordHeld where they read it: the test then holds a call between its
// look-up and its release.
type heldClock struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (c *heldClock) now() time.Time {
	if c.armed.Load() {
		buf := make([]byte, 8<<10)
		if bytes.Contains(buf[:runtime.Stack(buf, false)], []byte("eviction.recordHeld(")) {
			c.entered <- struct{}{}
			<-c.release
		}
	}
	return time.Now()
}

// recordHeld records items for the user; see heldClock.
func recordHeld(h *HotSet, ns, user string, items []string) error {
	_, err := h.Record(ns, user, items)
	return err
}

// A user that grows while others of its shard were used after its call
// looked it up is the least recently used when its release trims: the
// shard evicts the users behind it, never it, until the set is within the
// budget again.
func TestBudgetHeldWhenTheCalledUserIsTheLeastRecentlyUsed(t *testing.T) {
	const budget = 64 << 10
	clock := &heldClock{entered: make(chan struct{}), release: make(chan struct{})}
	fx := newFixture(t, Options{CacheBytes: budget, Shards: 1, Now: clock.now})
	s := fx.h.shards[0]
	record(t, fx.h, "default", "grown", "x")
	// A call that grows the user is held once it has looked it up.
	items := make([]string, 4000)
	for i := range items {
		items[i] = fmt.Sprintf("item%d", i)
	}
	clock.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- recordHeld(fx.h, "default", "grown", items) }()
	select {
	case <-clock.entered:
	case err := <-done:
		t.Fatalf("the call was not held where it reads the clock (%v)", err)
	}
	clock.armed.Store(false)
	// Others, used after it, fill the set to just under budget.
	var others []string
	for i := 0; fx.h.hotBytes.Load() < budget-1<<10; i++ {
		user := fmt.Sprintf("u%d", i)
		record(t, fx.h, "default", user, "x")
		others = append(others, user)
	}
	if lru := lruUsers(s); lru[0] != "grown" || evictions(fx.h) != 0 {
		t.Fatalf("want the held user least recently used and no eviction: %v, %d evictions", lru[:3], evictions(fx.h))
	}
	close(clock.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b := fx.h.hotBytes.Load(); b > budget {
		t.Fatalf("the set holds %d bytes over budget %d after the least recently used user grew, in %d users", b, budget, len(lruUsers(s)))
	}
	lru := lruUsers(s)
	if len(lru) == 0 || lru[len(lru)-1] != "grown" {
		t.Fatalf("the user just called is not the most recently used: %v", lru)
	}
	if st, err := fx.h.Peek("default", "grown"); err != nil || st.MemoryBytes*2 > budget {
		t.Fatalf("the grown user takes %d bytes (%v): want under half the budget %d, so that others stay", st.MemoryBytes, err, budget)
	}
	if evictions(fx.h) == 0 {
		t.Fatal("no eviction")
	}
	assertLRUSuffix(t, s, append(others, "grown"), "the shard")
}
