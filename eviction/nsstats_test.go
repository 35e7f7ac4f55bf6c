package eviction

import (
	"fmt"
	"testing"

	"github.com/seenapi/seenapi/userfilter"
)

// hotByNamespace walks the shards and sums each namespace's hot users and
// accounted bytes, as the per-namespace counters should have them.
func hotByNamespace(h *HotSet) map[string]NamespaceStats {
	out := map[string]NamespaceStats{}
	for _, s := range h.shards {
		s.mu.Lock()
		for _, e := range s.lru.Values() {
			name := h.infoOf(e).Name
			n := out[name]
			n.HotUsers++
			n.CacheBytes += int64(e.bytes)
			out[name] = n
		}
		s.mu.Unlock()
	}
	return out
}

// checkNamespaceStats asserts that the namespaces' figures sum to the
// service's and that their hot users and bytes are what the shards hold.
func checkNamespaceStats(t *testing.T, h *HotSet) Stats {
	t.Helper()
	st := h.Stats()
	if len(st.Namespaces) != len(h.nss.Load().byIndex) {
		t.Fatalf("%d namespaces in the stats, %d configured", len(st.Namespaces), len(h.nss.Load().byIndex))
	}
	var sum NamespaceStats
	walked := hotByNamespace(h)
	for name, n := range st.Namespaces {
		if w := walked[name]; n.HotUsers != w.HotUsers || n.CacheBytes != w.CacheBytes {
			t.Fatalf("%s: %d hot users and %d bytes counted, %d and %d in the shards", name, n.HotUsers, n.CacheBytes, w.HotUsers, w.CacheBytes)
		}
		if calls := n.Hits + n.Misses; calls > 0 && n.HitRatio != float64(n.Hits)/float64(calls) {
			t.Fatalf("%s: hit ratio %v with %d hits and %d misses", name, n.HitRatio, n.Hits, n.Misses)
		}
		// Each cold call, a miss or one for a user with no history, loads.
		if n.Loads < n.Misses+n.NoHistory {
			t.Fatalf("%s: %d loads, fewer than %d misses and %d calls for users with no history", name, n.Loads, n.Misses, n.NoHistory)
		}
		sum.add(n)
	}
	sum.HitRatio = st.HitRatio
	if sum != st.NamespaceStats {
		t.Fatalf("the namespaces sum to %+v, the service has %+v", sum, st.NamespaceStats)
	}
	if b, _ := h.Usage(); b != st.CacheBytes {
		t.Fatalf("Usage says %d bytes, Stats %d", b, st.CacheBytes)
	}
	return st
}

// Each namespace's share of the hot set is counted apart: users, bytes,
// hits and misses, loads and new users, evictions and erasures.
func TestStatsByNamespace(t *testing.T) {
	fx := newFixture(t, Options{CacheBytes: 64 << 10, Shards: 1})
	record(t, fx.h, "push", "p1", "a", "b")
	record(t, fx.h, "push", "p2", "a")
	for u := range 3 {
		record(t, fx.h, "default", fmt.Sprintf("d%d", u), "a", "b", "c")
	}
	record(t, fx.h, "default", "d0", "d") // hot: a hit
	seen(t, fx.h, "default", "nobody", "a")
	st := checkNamespaceStats(t, fx.h)
	d, p := st.Namespaces["default"], st.Namespaces["push"]
	if d.HotUsers != 3 || p.HotUsers != 2 || d.CacheBytes <= 0 || p.CacheBytes <= 0 {
		t.Fatalf("hot users or bytes: default %+v, push %+v", d, p)
	}
	// Four users came from nothing; "nobody", only read, was looked for:
	// calls for users with no history, which are no misses.
	if d.Hits != 1 || d.Misses != 0 || d.NoHistory != 4 || d.Loads != 4 || d.NewUsers != 3 ||
		p.Hits != 0 || p.Misses != 0 || p.NoHistory != 2 || p.NewUsers != 2 {
		t.Fatalf("calls: default %+v, push %+v", d, p)
	}

	if err := fx.h.Forget("push", "p1"); err != nil {
		t.Fatal(err)
	}
	st = checkNamespaceStats(t, fx.h)
	if n := st.Namespaces["push"]; n.HotUsers != 1 || n.CacheBytes >= p.CacheBytes || n.Evictions != 0 {
		t.Fatalf("push after erasing p1: %+v (before: %+v)", n, p)
	}
	if n := st.Namespaces["default"]; n.HotUsers != d.HotUsers || n.CacheBytes != d.CacheBytes {
		t.Fatalf("erasing a push user changed default: %+v, before %+v", n, d)
	}

	// p2, the least recently used, goes first when default's users fill
	// the budget. Written back first, it then leaves memory for good.
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	for u := 3; st.Namespaces["push"].HotUsers > 0; u++ {
		if u == 20000 {
			t.Fatalf("push's user never evicted: %+v", st.Namespaces)
		}
		record(t, fx.h, "default", fmt.Sprintf("d%d", u), "x")
		st = checkNamespaceStats(t, fx.h)
	}
	if n := st.Namespaces["push"]; n.Evictions != 1 || n.CacheBytes != 0 {
		t.Fatalf("push after its last user's eviction: %+v", n)
	}
	if st.CacheBytes > st.CacheBudgetBytes {
		t.Fatalf("%d bytes over the budget of %d", st.CacheBytes, st.CacheBudgetBytes)
	}

	// Back from the store: a load, not a new user.
	if !seen(t, fx.h, "push", "p2", "a")[0] {
		t.Fatal("p2 lost a through eviction")
	}
	st = checkNamespaceStats(t, fx.h)
	if n := st.Namespaces["push"]; n.HotUsers != 1 || n.Loads != 3 || n.NewUsers != 2 {
		t.Fatalf("push after p2 came back: %+v", n)
	}
}

// A namespace counts the one call's distinct candidates and those that
// tested seen, and the items every recording route added; a check counts
// nothing, and /seen's items are no candidates.
func TestCandidatesSeenAndRecordedByNamespace(t *testing.T) {
	fx := newFixture(t, Options{})
	call := func(ns, user string, limit int, mode userfilter.Mode, items ...string) {
		t.Helper()
		if _, err := fx.h.Filter(ns, user, items, limit, mode); err != nil {
			t.Fatal(err)
		}
	}
	call("default", "u", 2, userfilter.RecordReturned, "a", "b", "a", "c")          // 3 distinct, a and b recorded
	call("default", "u", 0, userfilter.RecordNone, "a", "c", "d")                   // 3, a seen
	call("default", "nobody", 0, userfilter.RecordNone, "q")                        // a dry run for no one: 1
	if _, err := fx.h.Record("default", "u", []string{"c", "e", "a"}); err != nil { // c and e recorded
		t.Fatal(err)
	}
	if _, err := fx.h.RecordBulk("push", "cold", []string{"x", "y"}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.h.Check("default", "u", []string{"a", "z"}, nil); err != nil {
		t.Fatal(err)
	}
	st := checkNamespaceStats(t, fx.h)
	if d := st.Namespaces["default"]; d.Candidates != 7 || d.SeenCandidates != 1 || d.Recorded != 4 {
		t.Errorf("default: %d candidates, %d seen, %d recorded; want 7, 1, 4", d.Candidates, d.SeenCandidates, d.Recorded)
	}
	if p := st.Namespaces["push"]; p.Candidates != 0 || p.SeenCandidates != 0 || p.Recorded != 2 {
		t.Errorf("push: %d candidates, %d seen, %d recorded; want 0, 0, 2", p.Candidates, p.SeenCandidates, p.Recorded)
	}
}

// A hit or a miss is a call's: each call of a user counts one, as the user
// stood when the call came. A keyed batch looks at its users first
// (CheckCallKeys) and then makes their calls, and the start after a crash
// folds in the journal of every user it names, calling nothing.
func TestHitsAndMissesCountCallsOnly(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "cold", "a")
	record(t, fx.h, "default", "crashed", "a")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	record(t, fx.h, "default", "crashed", "b") // in its journal only
	fx.restart(false, Options{})
	if _, err := fx.h.Recover(); err != nil {
		t.Fatal(err)
	}
	if st := fx.h.Stats(); st.Hits != 0 || st.Misses != 0 || st.NoHistory != 0 {
		t.Fatalf("after folding in the journal left by a crash: %d hits, %d misses, %d calls for no history; want none, no call was made",
			st.Hits, st.Misses, st.NoHistory)
	}

	record(t, fx.h, "default", "hot", "a") // a call for a user with no history
	users := []string{"hot", "cold", "new"}
	keys := make([]CallKey, len(users))
	for i, u := range users {
		keys[i] = callKey("batch\x00"+u, "body")
	}
	if _, err := fx.h.CheckCallKeys("default", users, keys); err != nil {
		t.Fatal(err)
	}
	for i, u := range users {
		if _, err := fx.h.FilterKeyed(nil, "default", u, []string{"x"}, 0, userfilter.RecordReturned, keys[i]); err != nil {
			t.Fatal(err)
		}
	}
	// hot: a hit; cold: a miss; new: a call for a user with no history,
	// as was the first call of hot.
	if st := checkNamespaceStats(t, fx.h); st.Hits != 1 || st.Misses != 1 || st.NoHistory != 2 {
		t.Fatalf("a keyed batch of a hot, a cold and a new user: %d hits, %d misses, %d calls for no history; want 1, 1 and 2",
			st.Hits, st.Misses, st.NoHistory)
	}
}

// An import is one call, counted once: importing a user with nothing
// stored is a call for a user with no history (and a new user), though it
// reads the store twice, once to find the user absent and once to create
// it.
func TestImportCountsOneCall(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "src", "a", "b")
	data, err := fx.h.Export("default", "src")
	if err != nil {
		t.Fatal(err)
	}
	before := fx.h.Stats()
	if _, err := fx.h.Import("default", "new", data, false, 1<<20); err != nil {
		t.Fatal(err)
	}
	st := checkNamespaceStats(t, fx.h)
	hits, misses, none := st.Hits-before.Hits, st.Misses-before.Misses, st.NoHistory-before.NoHistory
	loads, made := st.Loads-before.Loads, st.NewUsers-before.NewUsers
	if hits != 0 || misses != 0 || none != 1 || loads != 2 || made != 1 {
		t.Fatalf("importing a user not stored: %d hits, %d misses, %d calls for no history, %d loads, %d new users; want 0, 0, 1, 2, 1",
			hits, misses, none, loads, made)
	}
	before = st
	if _, err := fx.h.Import("default", "new", data, false, 1<<20); err != nil {
		t.Fatal(err)
	}
	if st := checkNamespaceStats(t, fx.h); st.Hits-before.Hits != 1 || st.Misses != before.Misses {
		t.Fatalf("importing a hot user: %d hits, %d misses; want 1 and 0", st.Hits-before.Hits, st.Misses-before.Misses)
	}
}

// The hit ratio is the cache's: a call for a cold user with no history
// stored (a new user's first call, a check of a user never recorded), is
// no miss, as no cache could have held the user; it is
// counted apart (NoHistory). A user with a history that the call finds
// cold is a miss, and a read that is no call (Peek: a cold user's stats in
// a page of users) is a load but neither. So a fresh service's first calls for new users leave
// its hit ratio at what its cache does, not at 0.
func TestACallForAUserWithNoHistoryIsNoMiss(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "new", "a")
	seen(t, fx.h, "default", "never", "a")
	st := checkNamespaceStats(t, fx.h)
	if st.Hits != 0 || st.Misses != 0 || st.NoHistory != 2 || st.Loads != 2 || st.HitRatio != 0 {
		t.Fatalf("a new user's first call and a check of a user never recorded: %d hits, %d misses, %d calls for no history, %d loads, hit ratio %v; want 0, 0, 2, 2, 0",
			st.Hits, st.Misses, st.NoHistory, st.Loads, st.HitRatio)
	}
	record(t, fx.h, "default", "new", "b")
	if st := checkNamespaceStats(t, fx.h); st.Hits != 1 || st.Misses != 0 || st.HitRatio != 1 {
		t.Fatalf("the new user called again, hot: %d hits, %d misses, hit ratio %v; want 1, 0, 1", st.Hits, st.Misses, st.HitRatio)
	}
	// Cold with a history: a miss.
	fx.restart(true, Options{})
	if _, err := fx.h.Peek("default", "new"); err != nil {
		t.Fatal(err)
	}
	if st := checkNamespaceStats(t, fx.h); st.Loads != 1 || st.Misses != 0 || st.NoHistory != 0 {
		t.Fatalf("a cold user peeked at: %d loads, %d misses, %d calls for no history; want a load and no call", st.Loads, st.Misses, st.NoHistory)
	}
	seen(t, fx.h, "default", "new", "a")
	if st := checkNamespaceStats(t, fx.h); st.Misses != 1 || st.NoHistory != 0 || st.Loads != 2 || st.HitRatio != 0 {
		t.Fatalf("a cold user with a history called: %d misses, %d calls for no history, %d loads, hit ratio %v; want 1, 0, 2, 0",
			st.Misses, st.NoHistory, st.Loads, st.HitRatio)
	}
}
