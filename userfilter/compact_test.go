package userfilter

import (
	"fmt"
	"math"
	"math/rand/v2"
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
