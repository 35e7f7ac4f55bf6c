package userfilter

import (
	"fmt"
	"math"
	"testing"
)

// TestFalsePositiveRateUnderTarget inserts n items, probes 1e6 items never
// inserted and requires the measured rate to be at most the target plus
// four standard deviations of a binomial at the target (a false failure
// about once in 30,000 runs if the filter sat exactly at the target).
func TestFalsePositiveRateUnderTarget(t *testing.T) {
	const probes = 1_000_000
	ns := []int{10, 1_000, 100_000, 1_000_000}
	if testing.Short() {
		ns = ns[:3]
	}
	for _, kind := range []Kind{KindBloom, KindStaged} {
		for _, p := range []float64{0.01, 0.001} {
			for _, n := range ns {
				t.Run(fmt.Sprintf("%v/p=%v/n=%d", kind, p, n), func(t *testing.T) {
					f := mustNew(t, Profile{Kind: kind, FPRate: p})
					batch := make([]string, 0, 1000)
					for i := 0; i < n; i++ {
						batch = append(batch, "in:"+itoa(i))
						if len(batch) == cap(batch) || i == n-1 {
							f.Add(batch, t0)
							batch = batch[:0]
						}
					}
					fp := 0
					for i := 0; i < probes; i++ {
						if f.Test("out:"+itoa(i), t0) {
							fp++
						}
					}
					rate := float64(fp) / probes
					margin := 4 * math.Sqrt(p*(1-p)/probes)
					t.Logf("n=%d p=%v measured %.5f (estimate %.5f), limit %.5f", n, p, rate, f.Stats(t0).FPRate, p+margin)
					if rate > p+margin {
						t.Fatalf("false-positive rate %.5f over target %v + margin %.5f", rate, p, margin)
					}
				})
			}
		}
	}
}
