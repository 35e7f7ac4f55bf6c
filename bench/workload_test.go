package bench

import (
	"container/list"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestUserIDsHaveWorkloadLengthsAndAreDistinct(t *testing.T) {
	w := DefaultWorkload(100000)
	seen := map[string]bool{}
	for _, rank := range []int{0, 1, 35, 36, 99999, 1<<31 - 1} {
		u := w.User(rank)
		if len(u) < MinUserLen || len(u) > MaxUserLen {
			t.Errorf("user %d: %q has %d bytes, want %d..%d", rank, u, len(u), MinUserLen, MaxUserLen)
		}
	}
	lengths := map[int]bool{}
	for rank := range 100000 {
		u := w.User(rank)
		if seen[u] {
			t.Fatalf("user id %q repeats (rank %d)", u, rank)
		}
		seen[u] = true
		lengths[len(u)] = true
	}
	if len(lengths) < 8 {
		t.Errorf("user ids take only %d distinct lengths, want most of 6..16", len(lengths))
	}
}

func TestItemIDsHaveWorkloadLengthsAndAreDistinctInAPool(t *testing.T) {
	w := DefaultWorkload(10)
	lengths := map[int]bool{}
	for rank := range 10 {
		pool := map[string]bool{}
		for j := range w.withDefaults().Pool {
			it := w.Item(rank, j)
			if len(it) < MinItemLen || len(it) > MaxItemLen {
				t.Fatalf("item (%d,%d) %q has %d bytes, want %d..%d", rank, j, it, len(it), MinItemLen, MaxItemLen)
			}
			if pool[it] {
				t.Fatalf("item %q repeats in the pool of user %d", it, rank)
			}
			pool[it] = true
			lengths[len(it)] = true
		}
	}
	if len(lengths) != MaxItemLen-MinItemLen+1 {
		t.Errorf("item ids take %d distinct lengths, want %d", len(lengths), MaxItemLen-MinItemLen+1)
	}
}

func TestIDsDependOnTheSeed(t *testing.T) {
	a, b := DefaultWorkload(10), DefaultWorkload(10)
	b.Seed = 2
	if a.Item(3, 7) == b.Item(3, 7) {
		t.Errorf("item (3,7) is %q under both seeds", a.Item(3, 7))
	}
}

func TestGenIsDeterministicPerStream(t *testing.T) {
	w := DefaultWorkload(1000)
	g1, _ := NewGen(w, 5)
	g2, _ := NewGen(w, 5)
	g3, _ := NewGen(w, 6)
	var c1, c2, c3 Call
	differ := false
	for range 100 {
		g1.Next(&c1)
		g2.Next(&c2)
		g3.Next(&c3)
		if c1.User != c2.User || !slices.Equal(c1.Candidates, c2.Candidates) {
			t.Fatalf("same stream, different calls: %q vs %q", c1.User, c2.User)
		}
		if c1.User != c3.User || !slices.Equal(c1.Candidates, c3.Candidates) {
			differ = true
		}
	}
	if !differ {
		t.Error("streams 5 and 6 generated the same 100 calls")
	}
}

func TestCallOffersDistinctItemsOfTheUsersPool(t *testing.T) {
	w := DefaultWorkload(50)
	g, _ := NewGen(w, 1)
	var c Call
	for range 200 {
		g.Next(&c)
		if c.User != w.User(c.Rank) {
			t.Fatalf("user %q is not the id of rank %d", c.User, c.Rank)
		}
		if len(c.Candidates) != DefaultCandidates || c.Limit != DefaultLimit {
			t.Fatalf("call has %d candidates, limit %d", len(c.Candidates), c.Limit)
		}
		seen := map[string]bool{}
		for _, it := range c.Candidates {
			if seen[it] {
				t.Fatalf("candidate %q twice in one call", it)
			}
			seen[it] = true
			j, ok := poolIndex(it)
			if !ok || w.Item(c.Rank, j) != it {
				t.Fatalf("candidate %q is not in the pool of user %d", it, c.Rank)
			}
		}
	}
}

// poolIndex parses j back out of an item id ("i<j base 36>.<filler>").
func poolIndex(it string) (int, bool) {
	head, _, ok := strings.Cut(strings.TrimPrefix(it, "i"), ".")
	if !ok {
		return 0, false
	}
	j := 0
	for _, ch := range head {
		j = j*36 + strings.IndexRune(idChars, ch)
	}
	return j, true
}

func TestFillCanOfferTheWholePool(t *testing.T) {
	w := DefaultWorkload(3)
	g, _ := NewGen(w, 1)
	var c Call
	g.Fill(&c, 2, DefaultPool, DefaultPool)
	got := slices.Clone(c.Candidates)
	slices.Sort(got)
	want := make([]string, DefaultPool)
	for j := range want {
		want[j] = w.Item(2, j)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Error("a fill of the pool size does not offer exactly the pool")
	}
}

// The Zipf law with s = 1.1 over ranks 1..U gives rank 0 the probability
// 1/H where H = sum_{k=1..U} k^-1.1. With 200,000 draws the observed share
// has a standard error under 0.001; the test allows 0.005.
func TestRanksFollowZipf(t *testing.T) {
	const users, draws = 10000, 200000
	w := DefaultWorkload(users)
	g, _ := NewGen(w, 1)
	counts := make([]int, users)
	for range draws {
		counts[g.Rank()]++
	}
	h := 0.0
	for k := 1; k <= users; k++ {
		h += math.Pow(float64(k), -1.1)
	}
	for _, rank := range []int{0, 1, 9} {
		want := math.Pow(float64(rank+1), -1.1) / h
		got := float64(counts[rank]) / draws
		if math.Abs(got-want) > 0.005 {
			t.Errorf("rank %d drawn %.4f of the time, want %.4f +- 0.005", rank, got, want)
		}
	}
}

// Uniform ranks: each decile of the users gets 10% of 100,000 draws; the
// standard error is under 0.001, the test allows 0.005.
func TestUniformRanksSpreadEvenly(t *testing.T) {
	w := DefaultWorkload(1000)
	w.Zipf = 0
	g, _ := NewGen(w, 1)
	var deciles [10]int
	for range 100000 {
		deciles[g.Rank()/100]++
	}
	for i, n := range deciles {
		if got := float64(n) / 100000; math.Abs(got-0.1) > 0.005 {
			t.Errorf("decile %d drawn %.4f of the time, want 0.1 +- 0.005", i, got)
		}
	}
}

func TestValidateRejectsBadWorkloads(t *testing.T) {
	for _, w := range []Workload{
		{Users: 0},
		{Users: 10, Pool: 10, Candidates: 11},
		{Users: 10, Zipf: 1.0},
		{Users: 10, Pool: 1 << 17},
	} {
		if err := w.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", w)
		}
	}
}

func BenchmarkGenNext(b *testing.B) {
	for _, users := range []int{10_000, 10_000_000} {
		b.Run(formatUsers(users), func(b *testing.B) {
			g, _ := NewGen(DefaultWorkload(users), 1)
			var c Call
			b.ReportAllocs()
			for b.Loop() {
				g.Next(&c)
			}
		})
	}
}

// lruHits fills an LRU of capacity users in the given order, then counts
// the hits of calls drawn by g.
func lruHits(order []int32, capacity, calls int, g *Gen) float64 {
	l := list.New()
	at := map[int32]*list.Element{}
	touch := func(r int32) bool {
		if e, ok := at[r]; ok {
			l.MoveToFront(e)
			return true
		}
		if l.Len() == capacity {
			delete(at, l.Remove(l.Back()).(int32))
		}
		at[r] = l.PushFront(r)
		return false
	}
	for _, r := range order {
		touch(r)
	}
	hits := 0
	for range calls {
		if touch(int32(g.Rank())) {
			hits++
		}
	}
	return float64(hits) / float64(calls)
}

// The fill order leaves an LRU that holds a tenth of the users where a
// long run of the workload would: the 4,000 calls that follow hit it about
// as often as they hit one warmed by a million calls, and far more often
// than one filled in rank order (which ends holding the least popular).
func TestFillOrderLeavesAnLRUInItsSteadyState(t *testing.T) {
	const users, capacity, calls = 20000, 2000, 4000
	w := DefaultWorkload(users)
	src, err := NewSource(w)
	if err != nil {
		t.Fatal(err)
	}
	order := src.FillOrder()
	sorted := slices.Clone(order)
	slices.Sort(sorted)
	for i, r := range sorted {
		if int(r) != i {
			t.Fatalf("fill order is not a permutation of the ranks: sorted[%d] = %d", i, r)
		}
	}
	byRank := make([]int32, users)
	for i := range byRank {
		byRank[i] = int32(i)
	}
	g := func() *Gen { return src.Gen(1) } // the same calls after each fill
	filled := lruHits(order, capacity, calls, g())
	ranked := lruHits(byRank, capacity, calls, g())
	// The steady state: rank-order fill, a million calls, then the calls.
	warm := src.Gen(2)
	long := make([]int32, 0, users+1_000_000)
	long = append(long, byRank...)
	for range 1_000_000 {
		long = append(long, int32(warm.Rank()))
	}
	steady := lruHits(long, capacity, calls, g())
	t.Logf("hit ratio after the fill order %.3f, after rank order %.3f, steady %.3f", filled, ranked, steady)
	if math.Abs(filled-steady) > 0.02 {
		t.Errorf("after the fill order an LRU hits %.3f, at its steady state %.3f: want within 0.02", filled, steady)
	}
	if filled < ranked+0.1 {
		t.Errorf("after the fill order an LRU hits %.3f, after rank order %.3f: want 0.1 more", filled, ranked)
	}
}

// The workload is fixed (WORKLOAD.md): every figure compares runs of the
// same ids, so a faster generator must make the same bytes. These were
// made by the filler that wrote a character at a time.
func TestIdsAreTheWorkloadsOwn(t *testing.T) {
	w := DefaultWorkload(1000)
	users := map[int]string{0: "u0-0O3hVUgAEoEKs", 7: "u7-bly9Fb2Mt1bE", 999: "urr-l9WGw"}
	items := map[[2]int]string{
		{0, 0}: "i0.OtJMt", {0, 35}: "iz.bSW65TPz", {0, 1999}: "i1jj.sK_N",
		{7, 0}: "i0.WN~z2l_IdSAzH9TqiXqT", {7, 35}: "iz.8Y4Hyznv0vAxLR~7SobNK", {7, 1999}: "i1jj.TVAaDVO0NO7Kr~Z",
		{999, 0}: "i0.bNYsejY~cDC0Km", {999, 35}: "iz.pmyhwxgMHBy~ugj1GM", {999, 1999}: "i1jj.ktwH",
	}
	for r, want := range users {
		if got := w.User(r); got != want {
			t.Errorf("user %d = %q, want %q", r, got, want)
		}
	}
	for k, want := range items {
		if got := w.Item(k[0], k[1]); got != want {
			t.Errorf("item %d of user %d = %q, want %q", k[1], k[0], got, want)
		}
	}
	// Every length, against the filler a character at a time.
	oneByOne := func(dst []byte, h uint64, n int) []byte {
		for i := 0; i < n; i += 10 {
			h = mix(h + 0x9e3779b97f4a7c15)
			for k, x := 0, h; k < 10 && i+k < n; k, x = k+1, x>>6 {
				dst = append(dst, fillChars[x&63])
			}
		}
		return dst
	}
	for h := range uint64(2000) {
		for n := range 31 {
			if got, want := appendFiller([]byte("p"), mix(h), n), oneByOne([]byte("p"), mix(h), n); string(got) != string(want) {
				t.Fatalf("filler of %d from %d: %q, want %q", n, h, got, want)
			}
		}
	}
}
