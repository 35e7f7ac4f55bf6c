package userfilter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCompactHasNoFalseNegativesAndKeepsItsRate fills compact filters of
// several shapes and checks that every item added tests seen, through Add,
// FilterAndRecord and Check, and that absent items test seen at most at
// the target rate (with a margin of five standard deviations).
func TestCompactHasNoFalseNegativesAndKeepsItsRate(t *testing.T) {
	for _, p := range []Profile{
		{Kind: KindCompact},
		{Kind: KindCompact, FPRate: 0.001},
		{Kind: KindCompact, InitialCapacity: 1, Growth: 1.1, Tightening: 0.5},
		{Kind: KindCompact, InitialCapacity: 12, Growth: 1.5, Tightening: 0.9, MaxItems: 5000},
	} {
		for _, n := range []int{10, 1000, 30_000} {
			t.Run(fmt.Sprintf("%+v/n=%d", p, n), func(t *testing.T) {
				f := mustNew(t, p)
				rng := rand.New(rand.NewPCG(uint64(n), 5))
				items := make([]string, n)
				for i := range items {
					items[i] = fmt.Sprintf("it-%x", rng.Uint64())
				}
				var s Scratch
				// Half by Add, half by the one call, a chunk at a time.
				half := n / 2
				f.Add(items[:half], t0)
				for i := half; i < n; i += 20 {
					f.FilterAndRecord(items[i:min(i+20, n)], 0, RecordReturned, t0, &s)
				}
				held := min(uint64(n), f.p.MaxItems)
				if f.p.MaxItems == 0 {
					held = uint64(n)
				}
				st := f.Stats(t0)
				if st.Items > held || st.Items < held-held/50-1 {
					t.Fatalf("holds %d items, want about %d", st.Items, held)
				}
				seen := f.Check(items, t0, nil)
				missed := 0
				for i, ok := range seen {
					if !ok {
						missed++
						if f.p.MaxItems == 0 {
							t.Fatalf("item %d of %d tests unseen", i, n)
						}
					}
				}
				if f.p.MaxItems > 0 && uint64(n-missed) < st.Items {
					t.Fatalf("%d items test seen, fewer than the %d held", n-missed, st.Items)
				}
				const probes = 200_000
				fp := 0
				for i := range probes {
					if f.Test(fmt.Sprintf("absent-%d", i), t0) {
						fp++
					}
				}
				target := f.p.FPRate * probes
				if limit := target + 5*math.Sqrt(target) + 1; float64(fp) > limit {
					t.Errorf("%d false positives in %d probes, want at most %.0f (rate %v)", fp, probes, limit, f.p.FPRate)
				}
				if st.FPRate > f.p.FPRate {
					t.Errorf("estimated rate %v over the target %v", st.FPRate, f.p.FPRate)
				}
			})
		}
	}
}

// TestInsertInPlaceBuildsTheSameSet adds items one at a time and checks,
// after each, that the newest layer's set is word for word the set efBuild
// makes of the same fingerprints: inserting in place (efInsert) keeps the
// samples, the high and the low parts exact, through the shape changes at
// powers of two and past directMax, where the buffer takes over.
func TestInsertInPlaceBuildsTheSameSet(t *testing.T) {
	for _, fpRate := range []float64{0.01, 0.2, 1e-6} {
		f := mustNew(t, Profile{Kind: KindCompact, FPRate: fpRate, InitialCapacity: 3000})
		rng := rand.New(rand.NewPCG(11, uint64(fpRate*1e6)))
		for i := 0; i < 2*directMax; i++ {
			f.Add([]string{fmt.Sprintf("i%x", rng.Uint64())}, t0)
			g := &f.gens[0]
			l := &g.layers[len(g.layers)-1]
			fps := g.fingerprints(len(g.layers)-1, nil)
			if len(g.buffer()) > 0 {
				continue
			}
			want := make([]uint64, efWords(uint64(len(fps)), uint(l.slice)))
			efBuild(want, fps, uint(l.slice))
			got := g.set(l)[:len(want)]
			if !slices.Equal(got, want) {
				t.Fatalf("p=%v, %d items: the set differs from the one built whole", fpRate, len(fps))
			}
			if len(g.slab) != int(l.off/64)+len(want) {
				t.Fatalf("p=%v, %d items: slab of %d words, want %d", fpRate, len(fps), len(g.slab), int(l.off/64)+len(want))
			}
		}
	}
}

// TestInsertBits checks insertBits against moving the bits one by one.
func TestInsertBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	for range 3000 {
		total := rng.Uint64N(400)
		count := 1 + rng.Uint64N(63)
		at := rng.Uint64N(total + 1)
		w := make([]uint64, (total+count+63)/64)
		for i := uint64(0); i < total; i++ {
			w[i/64] |= (rng.Uint64() & 1) << (i % 64)
		}
		want := make([]uint64, len(w))
		for i := uint64(0); i < total; i++ {
			bit := w[i/64] >> (i % 64) & 1
			to := i
			if i >= at {
				to = i + count
			}
			want[to/64] |= bit << (to % 64)
		}
		insertBits(w, at, count, total)
		if !slices.Equal(w, want) {
			t.Fatalf("insertBits(at %d, count %d, total %d) = %x, want %x", at, count, total, w, want)
		}
	}
}

// TestBufferStaysSorted grows a user item by item far past directMax and
// checks after each add that the buffer's merged part and its last run are
// sorted, that the run is shorter than bufRun, and that the layer's
// fingerprints, set and buffer together, are sorted and distinct and
// include every item added.
func TestBufferStaysSorted(t *testing.T) {
	f := mustNew(t, Profile{Kind: KindCompact, InitialCapacity: 40_000})
	rng := rand.New(rand.NewPCG(14, 15))
	var want []uint64
	for i := range 20_000 {
		h := HashItem(fmt.Sprintf("b%x", rng.Uint64()))
		if _, saturated := f.AddHashes([]Hash{h}, t0, t0, 0, -1); saturated {
			t.Fatal("saturated")
		}
		g := &f.gens[0]
		l := &g.layers[0]
		want = append(want, l.fingerprint(h))
		merged, run := g.buffers()
		if !slices.IsSorted(merged) || !slices.IsSorted(run) || len(run) >= bufRun {
			t.Fatalf("after %d items: buffer of %d and a run of %d, not sorted", i+1, len(merged), len(run))
		}
		if i%997 != 0 {
			continue
		}
		got := g.fingerprints(0, nil)
		w := slices.Clone(want)
		slices.Sort(w)
		w = slices.Compact(w)
		if !slices.Equal(got, w) {
			t.Fatalf("after %d items: %d fingerprints, want the %d added", i+1, len(got), len(w))
		}
	}
}
