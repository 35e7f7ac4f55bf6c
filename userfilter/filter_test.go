package userfilter

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func mustNew(t testing.TB, p Profile) *Filter {
	t.Helper()
	f, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func items(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s:%d", prefix, i)
	}
	return out
}

// profiles covers every shape a namespace can take.
func profiles() map[string]Profile {
	return map[string]Profile{
		"default":        DefaultProfile(),
		"bloom":          {Kind: KindBloom},
		"p0.1%":          {Kind: KindBloom, FPRate: 0.001},
		"tiny-c0":        {Kind: KindBloom, InitialCapacity: 1, Growth: 1.5, Tightening: 0.5},
		"big-c0":         {Kind: KindBloom, InitialCapacity: 4096, Growth: 4, Tightening: 0.9},
		"window":         {Kind: KindBloom, Window: 30 * 24 * time.Hour, Granularity: 24 * time.Hour},
		"window4":        {Kind: KindBloom, Window: 30 * 24 * time.Hour},
		"capped":         {Kind: KindBloom, MaxItems: 5000},
		"loose-p":        {Kind: KindBloom, FPRate: 0.2},
		"window+cap":     {Kind: KindBloom, Window: time.Hour, Granularity: time.Minute, MaxItems: 300},
		"compact":        {Kind: KindCompact},
		"compact-tiny":   {Kind: KindCompact, InitialCapacity: 1, Growth: 1.5, Tightening: 0.5},
		"compact-window": {Kind: KindCompact, Window: 30 * 24 * time.Hour, Granularity: 24 * time.Hour},
		"compact-capped": {Kind: KindCompact, MaxItems: 5000},
		"staged":         {Kind: KindStaged},
		"staged-tiny":    {Kind: KindStaged, InitialCapacity: 1, Growth: 1.5, Tightening: 0.5},
		"staged-small":   {Kind: KindStaged, InitialCapacity: 40, Growth: 2, Tightening: 0.8, FPRate: 0.001},
		"staged-window":  {Kind: KindStaged, Window: 30 * 24 * time.Hour, Granularity: 24 * time.Hour},
		"staged-capped":  {Kind: KindStaged, InitialCapacity: 100, Growth: 2, MaxItems: 5000},
	}
}

func TestNoFalseNegatives(t *testing.T) {
	for name, p := range profiles() {
		t.Run(name, func(t *testing.T) {
			f := mustNew(t, p)
			rng := rand.New(rand.NewPCG(1, 2))
			var added []string
			for len(added) < 20000 {
				batch := make([]string, 1+rng.IntN(300))
				for i := range batch {
					batch[i] = fmt.Sprintf("it-%x", rng.Uint64())
				}
				var s Scratch
				res := f.FilterAndRecord(batch, 0, RecordAll, t0, &s)
				if res.Saturated {
					break
				}
				added = append(added, batch...)
			}
			got := f.Check(added, t0, nil)
			for i, ok := range got {
				if !ok {
					t.Fatalf("item %q recorded but tests unseen", added[i])
				}
			}
		})
	}
}

func TestFilterAndRecordKeepsOrderAndDropsDuplicates(t *testing.T) {
	f := mustNew(t, DefaultProfile())
	f.Add([]string{"b", "d"}, t0)
	var s Scratch
	cands := []string{"a", "b", "c", "a", "d", "e", "c", "f"}
	res := f.FilterAndRecord(cands, 0, RecordNone, t0, &s)
	var got []string
	for _, i := range s.Unseen {
		got = append(got, cands[i])
	}
	if want := []string{"a", "c", "e", "f"}; !slices.Equal(got, want) {
		t.Fatalf("unseen = %v, want %v", got, want)
	}
	if res.SeenCount != 2 || res.Recorded != 0 {
		t.Fatalf("result = %+v, want seen 2, recorded 0", res)
	}
}

func TestFilterAndRecordModes(t *testing.T) {
	cands := []string{"a", "b", "c", "d", "e"}
	for _, tc := range []struct {
		mode     Mode
		limit    int
		recorded []string
		unseen   []string
	}{
		{RecordReturned, 2, []string{"a", "b"}, []string{"c", "d", "e"}},
		{RecordReturned, 0, cands, nil},
		{RecordNone, 2, nil, cands},
		{RecordAll, 2, cands, nil},
	} {
		t.Run(fmt.Sprintf("%v/limit%d", tc.mode, tc.limit), func(t *testing.T) {
			f := mustNew(t, DefaultProfile())
			var s Scratch
			res := f.FilterAndRecord(cands, tc.limit, tc.mode, t0, &s)
			wantRet := len(cands)
			if tc.limit > 0 {
				wantRet = tc.limit
			}
			if len(s.Unseen) != wantRet || res.Recorded != len(tc.recorded) || len(s.Recorded) != len(tc.recorded) {
				t.Fatalf("returned %d recorded %d, want %d and %d", len(s.Unseen), res.Recorded, wantRet, len(tc.recorded))
			}
			for _, it := range tc.recorded {
				if !f.Test(it, t0) {
					t.Errorf("%q should be seen", it)
				}
			}
			for _, it := range tc.unseen {
				if f.Test(it, t0) {
					t.Errorf("%q should be unseen", it)
				}
			}
		})
	}
}

func TestRecordingTwiceCountsOnce(t *testing.T) {
	f := mustNew(t, DefaultProfile())
	if n, _ := f.Add([]string{"x", "y"}, t0); n != 2 {
		t.Fatalf("first add: %d", n)
	}
	if n, _ := f.Add([]string{"x", "y", "z"}, t0); n != 1 {
		t.Fatalf("second add: %d new, want 1", n)
	}
	if st := f.Stats(t0); st.Items != 3 {
		t.Fatalf("items = %d, want 3", st.Items)
	}
}

func TestWindowEdges(t *testing.T) {
	p := Profile{Window: 30 * 24 * time.Hour, Granularity: 24 * time.Hour}
	f := mustNew(t, p)
	at := t0
	f.Add([]string{"old"}, at)
	// Anything less than W after recording is still seen.
	if !f.Test("old", at.Add(p.Window-time.Second)) {
		t.Fatal("item recorded less than the window ago tests unseen")
	}
	// Anything more than W + g after recording is unseen.
	if f.Test("old", at.Add(p.Window+p.Granularity+time.Second)) {
		t.Fatal("item recorded more than window+granularity ago tests seen")
	}
	// Expired generations are dropped.
	later := at.Add(p.Window + p.Granularity + time.Second)
	f.Add([]string{"new"}, later)
	if len(f.gens) != 1 || !f.Test("new", later) {
		t.Fatalf("gens = %d after expiry, want 1", len(f.gens))
	}
}

// A time bucket is numbered, and its width encoded, in whole seconds: a
// granularity with a fraction of a second (a window of 10s has 2.5s by
// default) would work as the whole seconds below it, its items leaving
// the window before it, and come back from the store as another profile.
// Such a profile is refused; one in whole seconds keeps its window.
func TestWindowGranularityIsWholeSeconds(t *testing.T) {
	for _, p := range []Profile{{Window: 10 * time.Second}, {Window: 3 * time.Second, Granularity: 1500 * time.Millisecond}} {
		if _, err := New(p); !errors.Is(err, ErrBadProfile) {
			t.Errorf("window %v granularity %v: New err %v, want ErrBadProfile", p.Window, p.WithDefaults().Granularity, err)
		}
	}
	p := Profile{Window: 10 * time.Second, Granularity: 2 * time.Second}
	f := mustNew(t, p)
	f.Add([]string{"a"}, t0)
	if !f.Test("a", t0.Add(p.Window-time.Second)) {
		t.Fatal("item recorded less than the window ago tests unseen")
	}
	d, err := Decode(encode(t, f))
	if err != nil || d.Profile() != f.Profile() {
		t.Fatalf("decoded profile %+v (err %v), want %+v", d.Profile(), err, f.Profile())
	}
}

func TestWindowRefreshesItemsRecordedAgain(t *testing.T) {
	p := Profile{Window: 4 * time.Hour, Granularity: time.Hour}
	f := mustNew(t, p)
	f.Add([]string{"a"}, t0)
	f.Add([]string{"a"}, t0.Add(3*time.Hour))
	if !f.Test("a", t0.Add(6*time.Hour)) {
		t.Fatal("item recorded again 3h later expired with the first recording")
	}
}

// The one call in record mode all records the candidates that test seen
// too: recorded again, they stay seen a whole window from this call, as
// Add refreshes them.
func TestRecordAllRefreshesCandidatesAlreadySeen(t *testing.T) {
	p := Profile{Window: 4 * time.Hour, Granularity: time.Hour}
	f := mustNew(t, p)
	f.Add([]string{"a"}, t0)
	var s Scratch
	// a, seen in an older bucket, is added to the current one too: it
	// counts as seen and as recorded.
	if res := f.FilterAndRecord([]string{"a", "b"}, 0, RecordAll, t0.Add(3*time.Hour), &s); res.SeenCount != 1 || res.Recorded != 2 {
		t.Fatalf("seen count %d, recorded %d; want 1 (a) and 2 (a again, b)", res.SeenCount, res.Recorded)
	}
	// Within the current bucket an item is not added twice.
	// Nor chosen to record (and journal): Select leaves ToRecord empty.
	if res := f.FilterAndRecord([]string{"a", "b"}, 0, RecordAll, t0.Add(3*time.Hour+time.Minute), &s); res.SeenCount != 2 || res.Recorded != 0 || len(s.ToRecord) != 0 {
		t.Fatalf("again in the same bucket: seen count %d, recorded %d, to record %d; want 2, 0 and 0", res.SeenCount, res.Recorded, len(s.ToRecord))
	}
	later := t0.Add(6 * time.Hour) // the first recording of a is out of the window
	if got := f.Check([]string{"a", "b"}, later, nil); !got[0] || !got[1] {
		t.Fatalf("6h after the first recording, 3h after record all: seen %v, want both", got)
	}
}

func TestCapSaturates(t *testing.T) {
	f := mustNew(t, Profile{MaxItems: 100})
	its := items("i", 150)
	n, sat := f.Add(its, t0)
	if n != 100 || !sat {
		t.Fatalf("added %d saturated %v, want 100 true", n, sat)
	}
	st := f.Stats(t0)
	if st.Items != 100 || !st.Saturated {
		t.Fatalf("stats items %d saturated %v", st.Items, st.Saturated)
	}
	var capSum uint64
	for _, l := range st.Generations[0].Layers {
		capSum += l.Capacity
	}
	if capSum != 100 {
		t.Fatalf("layers sized for %d items, want exactly the cap 100", capSum)
	}
	for _, it := range its[:100] {
		if !f.Test(it, t0) {
			t.Fatalf("%s forgotten at the cap", it)
		}
	}
}

func TestStatsAreExact(t *testing.T) {
	f := mustNew(t, DefaultProfile())
	f.Add(items("s", 1000), t0)
	st := f.Stats(t0)
	// An item that already tests seen (a false positive) is not added again,
	// so the count may fall short of 1000 by about the false-positive rate.
	if st.Items > 1000 || st.Items < 970 {
		t.Fatalf("items %d, want 970..1000", st.Items)
	}
	var bits, set uint64
	for _, l := range st.Generations[0].Layers {
		bits += l.Bits
		set += l.BitsSet
		if l.Items > l.Capacity {
			t.Fatalf("layer over capacity: %+v", l)
		}
	}
	if bits != st.Bits || set != st.BitsSet || st.Layers != len(st.Generations[0].Layers) {
		t.Fatalf("totals do not add up: %+v", st)
	}
	if st.FPRate <= 0 || st.FPRate > st.TargetFPRate {
		t.Fatalf("estimated fp %v, target %v", st.FPRate, st.TargetFPRate)
	}
}

func TestAFilterStopsGrowingAtTheLargestSizeDecodeReads(t *testing.T) {
	f := mustNew(t, Profile{Kind: KindBloom})
	f.Add([]string{"a"}, t0)
	// Give the one generation a full second layer of one slice that takes
	// it to a few bits short of maxBitsTotal: the next layer would pass it.
	// (The slab's pages are never written, so they take no memory.)
	g := &f.gens[0]
	first := g.layers[0]
	big := layer{off: uint32(first.bits()), slice: maxBitsTotal - 10 - uint32(first.bits()), k: 1, cap: 1}
	g.layers, g.n = []layer{first, big}, 1
	slab := make([]uint64, slabWords(maxBitsTotal))
	copy(slab, g.slab)
	g.slab = slab
	n, saturated := f.Add([]string{"b"}, t0)
	if n != 0 || !saturated || len(f.gens[0].layers) != 2 || len(f.gens[0].slab) != len(slab) {
		t.Fatalf("added %d, saturated %v, %d layers: want the item refused as at a cap", n, saturated, len(f.gens[0].layers))
	}
	if !f.Test("a", t0) {
		t.Fatal("an item recorded before is unseen")
	}
}

func TestFiltersOfOneProfileShareItsLayers(t *testing.T) {
	for _, k := range []struct {
		kind           Kind
		a, b, c, least int // items of the grown, smaller and clone's; layers of a grown one
	}{{KindBloom, 200, 50, 300, 2}, {KindStaged, 600, 50, 3000, 2}} {
		p := Profile{Kind: k.kind}
		a, b := mustNew(t, p), mustNew(t, p)
		a.Add(items("a", k.a), t0)
		b.Add(items("b", k.b), t0)
		d, err := Decode(encode(t, a))
		if err != nil {
			t.Fatal(err)
		}
		held := a.Stats(t0).Items
		c := a.Clone()
		c.Add(items("c", k.c), t0)
		for name, f := range map[string]*Filter{"grown": a, "smaller": b, "decoded": d, "clone grown further": c} {
			g := f.gens[0]
			if (name != "smaller" && len(g.layers) < k.least) || !f.p.sharesLayers(g.layers) || f.p != a.p {
				t.Fatalf("%v %s: %d layers of its own, want the profile's", k.kind, name, len(g.layers))
			}
			// A windowless filter's generation is inside it: one object and
			// its bits.
			if !f.inline() {
				t.Fatalf("%v %s: its generation is outside the filter", k.kind, name)
			}
			want := int(unsafe.Sizeof(*f)) + 8*cap(g.slab)
			if got := f.MemoryBytes(); got != want {
				t.Fatalf("%v %s: MemoryBytes %d, want %d: the filter (with its generation) and its bits", k.kind, name, got, want)
			}
		}
		if n := len(a.gens[0].layers); n >= len(c.gens[0].layers) || a.Stats(t0).Items != held || !a.Test("a:199", t0) || a.Test("c:0", t0) {
			t.Fatalf("%v: growing a clone changed the original", k.kind)
		}
	}
}

func TestAFilterOfOtherShapesKeepsItsOwnLayers(t *testing.T) {
	// A first layer with a wider slice than the profile's table says, as a
	// Bloom filter written by a build that sized layers differently would
	// have.
	a := mustNew(t, Profile{Kind: KindBloom})
	l0 := a.p.layers[0]
	l0.slice += 8
	a.gens = []generation{{}}
	a.gens[0].appendLayer(l0, a.p.layers)
	own := a.gens[0].layers
	before := append([]layer(nil), a.p.layers...)
	a.Add(append(items("a", 40), items("b", 500)...), t0)
	if !slices.Equal(before, a.p.layers) {
		t.Fatal("a filter of other shapes changed the profile's table")
	}
	d, err := Decode(encode(t, a))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []*Filter{a, d} {
		if l := f.gens[0].layers; &l[0] == &a.p.layers[0] || l[0].slice != own[0].slice || l[1].off == a.p.layers[1].off {
			t.Fatal("a filter of other shapes took the profile's table")
		}
		for _, it := range append(items("a", 40), items("b", 500)...) {
			if !f.Test(it, t0) {
				t.Fatalf("%s unseen", it)
			}
		}
	}
}

func TestFiltersOfOneProfileShareItsParameters(t *testing.T) {
	a, b := mustNew(t, DefaultProfile()), mustNew(t, Profile{})
	a.Add([]string{"x"}, t0)
	d, err := Decode(encode(t, a))
	if err != nil {
		t.Fatal(err)
	}
	if a.p != b.p || a.p != d.p {
		t.Fatal("filters of one profile carry copies of it")
	}
	if c := mustNew(t, Profile{FPRate: 0.02}); c.p == a.p || c.Compatible(a) {
		t.Fatal("filters of different profiles share parameters")
	}
}

func TestSharingStopsAtItsBoundAndFiltersStillWork(t *testing.T) {
	for i := range maxShared + 10 {
		f := mustNew(t, Profile{InitialCapacity: uint32(1000 + i)})
		f.Add([]string{"x"}, t0)
		if !f.Test("x", t0) || f.Profile().InitialCapacity != uint32(1000+i) {
			t.Fatalf("profile %d: wrong filter", i)
		}
	}
	shared.RLock()
	n := len(shared.m)
	shared.RUnlock()
	if n > maxShared {
		t.Fatalf("%d profiles shared, at most %d", n, maxShared)
	}
}

// A filter's first generation lives inside it; with a window, a second one
// moves them all out (leaving the inline slot holding no bits), and expiry
// down to one brings it back.
func TestGenerationsMoveOutOfTheFilterAndBack(t *testing.T) {
	day := 24 * time.Hour
	f := mustNew(t, Profile{Window: 3 * day, Granularity: day})
	if !f.inline() || len(f.gens) != 0 {
		t.Fatalf("new filter: inline %v with %d generations, want inline and none", f.inline(), len(f.gens))
	}
	f.Add(items("d0", 50), t0)
	if !f.inline() || len(f.gens) != 1 {
		t.Fatalf("one day: inline %v with %d generations", f.inline(), len(f.gens))
	}
	f.Add(items("d1", 50), t0.Add(day))
	f.Add(items("d2", 50), t0.Add(2*day))
	if f.inline() || len(f.gens) != 3 {
		t.Fatalf("three days: inline %v with %d generations, want 3 outside", f.inline(), len(f.gens))
	}
	if f.one[0].slab != nil || f.one[0].layers != nil {
		t.Fatal("the inline slot still holds a generation's bits after moving out")
	}
	// Four days on, only day 2's generation is inside the window.
	now := t0.Add(2*day + 3*day)
	if !f.Expire(now) || !f.inline() || len(f.gens) != 1 || f.gens[0].bucket != f.bucketOf(t0.Add(2*day)) {
		t.Fatalf("after expiry: inline %v with %d generations, want day 2's alone inline", f.inline(), len(f.gens))
	}
	for _, it := range items("d2", 50) {
		if !f.Test(it, now) {
			t.Fatalf("%s recorded on day 2 is unseen inside the window", it)
		}
	}
	raw := encode(t, f)
	if !f.Expire(now.Add(2*day)) || !f.inline() || len(f.gens) != 0 || f.one[0].slab != nil {
		t.Fatalf("all expired: inline %v with %d generations, want none, inline, no bits", f.inline(), len(f.gens))
	}

	// Replace moves a filter, inline generation and all; the source is emptied.
	var g Filter
	src, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	g.Replace(src)
	if !g.inline() || src.gens != nil || src.p != nil {
		t.Fatalf("after Replace: destination inline %v, source %d generations", g.inline(), len(src.gens))
	}
	for _, it := range items("d2", 50) {
		if !g.Test(it, now) {
			t.Fatalf("%s unseen in the filter moved by Replace", it)
		}
	}
	if n, _ := g.Add([]string{"new"}, now); n != 1 || !g.Test("new", now) {
		t.Fatal("the moved filter does not record")
	}
}

// Check answers each item as Test does, for every kind, with and without a
// window (items in three generations, each with its own views), whether or
// not its lookups are enough for the newest layers' tables of bucket starts
// (see efView.index), with duplicates answered each time, and a Scratch
// reused from a call on another filter carries nothing over.
func TestCheckAnswersAsTest(t *testing.T) {
	var s Scratch
	day := 24 * time.Hour
	for _, kind := range []Kind{KindBloom, KindCompact, KindStaged} {
		for _, window := range []time.Duration{0, 30 * day} {
			for _, n := range []int{0, 5, 300, 3000} {
				p := Profile{Kind: kind}
				if window > 0 {
					p.Window, p.Granularity = window, day
				}
				f := mustNew(t, p)
				in := items("in", n)
				f.Add(in[:n/3], t0.Add(-2*day))
				f.Add(in[n/3:2*n/3], t0.Add(-day))
				f.Add(in[2*n/3:], t0)
				probe := append(items("in", min(n, 150)), items("out", 150)...)
				probe = append(probe, probe[:20]...)
				for _, m := range []int{1, 10, len(probe)} {
					got := f.CheckWith(probe[:m], t0, nil, &s)
					for i, it := range probe[:m] {
						if want := f.Test(it, t0); got[i] != want {
							t.Fatalf("%v, window %v, %d items, %d checked: Check says %q is %v, Test %v", kind, window, n, m, it, got[i], want)
						}
					}
				}
			}
		}
	}
}

// RecordAll's Commit skips the test of what Select found unseen (fresh):
// the filter it leaves, the count and the hashes recorded are those of a
// Commit that tests every hash, for every kind, with and without a window,
// for batches of new, seen and repeated items.
func TestRecordAllSkipsTestingFreshItems(t *testing.T) {
	day := 24 * time.Hour
	for _, kind := range []Kind{KindBloom, KindCompact, KindStaged} {
		for _, window := range []time.Duration{0, 30 * day} {
			p := Profile{Kind: kind}
			if window > 0 {
				p.Window, p.Granularity = window, day
			}
			fast, full := mustNew(t, p), mustNew(t, p)
			pool := items("it", 3000)
			for _, f := range []*Filter{fast, full} {
				f.Add(pool[:300], t0.Add(-day))
			}
			rng := rand.New(rand.NewPCG(7, 8))
			var sf, sl Scratch
			for call := range 40 {
				batch := make([]string, 200)
				for j := range batch {
					batch[j] = pool[rng.IntN(200+call*60)]
				}
				fast.Select(batch, 0, RecordAll, t0, &sf)
				nf, _ := fast.Commit(t0, &sf, 0)
				full.Select(batch, 0, RecordAll, t0, &sl)
				sl.fresh = nil // a Commit that tests every hash
				nl, _ := full.Commit(t0, &sl, 0)
				if nf != nl || !slices.Equal(sf.Recorded, sl.Recorded) {
					t.Fatalf("%v, window %v, call %d: recorded %d against %d when testing every hash", kind, window, call, nf, nl)
				}
				a, _ := fast.MarshalBinary()
				b, _ := full.MarshalBinary()
				if !bytes.Equal(a, b) {
					t.Fatalf("%v, window %v, call %d: the filters differ", kind, window, call)
				}
			}
		}
	}
}

// A call's tables of bucket starts stay under indexMaxTable together, the
// newest generation's first, however many generations a window holds.
func TestTablesOfACallAreBounded(t *testing.T) {
	day := 24 * time.Hour
	f := mustNew(t, Profile{Kind: KindStaged, Window: 366 * day, Granularity: day})
	for d := range 40 {
		f.Add(items(fmt.Sprintf("day%d-", d), 2000), t0.Add(time.Duration(d-39)*day)) // 2,048 buckets each
	}
	var s Scratch
	f.prepare(f.live(t0), &s, 10_000)
	if len(s.views) != 40 {
		t.Fatalf("%d views for 40 generations", len(s.views))
	}
	if len(s.starts) >= indexMaxTable {
		t.Errorf("the tables hold %d starts, past %d", len(s.starts), indexMaxTable)
	}
	if s.views[39].starts == nil || s.views[0].starts != nil {
		t.Errorf("the newest generation has a table: %v; the oldest: %v (want true, false)", s.views[39].starts != nil, s.views[0].starts != nil)
	}
}
