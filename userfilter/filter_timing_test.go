package userfilter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bits-and-blooms/bloom/v3"
)

// callSet is a ring of candidate lists drawn from a pool of 2n items of
// which n are recorded up front, so the filter stays between n and 2n items
// however long the benchmark runs.
type callSet struct {
	pool  []string
	calls [][]string
}

func newCallSet(n int) callSet {
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	cs := callSet{pool: make([]string, 2*n)}
	for i := range cs.pool {
		cs.pool[i] = fmt.Sprintf("item-%08x", rng.Uint32())
	}
	cs.calls = make([][]string, 256)
	for i := range cs.calls {
		c := make([]string, 200)
		for j := range c {
			c[j] = cs.pool[rng.IntN(len(cs.pool))]
		}
		cs.calls[i] = c
	}
	return cs
}

var benchSizes = []int{10, 1_000, 100_000}

// BenchmarkFilterAndRecord is the one call in-process: 200 candidates, the
// first 20 unseen recorded.
func BenchmarkFilterAndRecord(b *testing.B) {
	for _, kind := range []Kind{KindBloom, KindCompact, KindStaged} {
		for _, n := range benchSizes {
			benchFilterAndRecord(b, Profile{Kind: kind}, n)
		}
	}
}

func benchFilterAndRecord(b *testing.B, p Profile, n int) {
	name := fmt.Sprintf("n=%d", n)
	if p.Kind != KindBloom {
		name = p.Kind.String() + "/" + name
	}
	b.Run(name, func(b *testing.B) {
		cs := newCallSet(n)
		f := mustNew(b, p)
		f.Add(cs.pool[:n], t0)
		var s Scratch
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			f.FilterAndRecord(cs.calls[i&255], 20, RecordReturned, t0, &s)
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/200, "ns/cand")
	})
}

// BenchmarkSelectAbsent is the feed's common case: 200 candidates the user
// has not seen, against one of 100,000 users of 250 items each, chosen at
// random (so its filter is cold in the CPU's caches), recording nothing;
// Bloom filters, whose layers' probing layer.test's comment measures.
func BenchmarkSelectAbsent(b *testing.B) {
	const users, items = 100_000, 250
	fs := make([]*Filter, users)
	its := make([]string, items)
	for u := range fs {
		fs[u] = mustNew(b, Profile{Kind: KindBloom})
		for j := range its {
			its[j] = fmt.Sprintf("u%d-item-%d", u, j)
		}
		fs[u].Add(its, t0)
	}
	calls := make([][]string, 64)
	for i := range calls {
		calls[i] = make([]string, 200)
		for j := range calls[i] {
			calls[i][j] = fmt.Sprintf("absent-%d-%d", i, j)
		}
	}
	var s Scratch
	rng := rand.New(rand.NewPCG(1, 2))
	i := 0
	for b.Loop() {
		fs[rng.IntN(users)].Select(calls[i&63], 20, RecordNone, t0, &s)
		i++
	}
}

// BenchmarkBloomV3Reference does the same call with a plain Bloom filter
// sized in advance for 2n items (the reference the scalable filter is held
// to): Test every candidate, Add the first 20 that tested absent.
func BenchmarkBloomV3Reference(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			cs := newCallSet(n)
			f := bloom.NewWithEstimates(uint(2*n), DefaultFPRate)
			for _, it := range cs.pool[:n] {
				f.AddString(it)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				added := 0
				for _, c := range cs.calls[i&255] {
					if !f.TestString(c) && added < 20 {
						f.AddString(c)
						added++
					}
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/200, "ns/cand")
		})
	}
}

// BenchmarkProfiles reports, for a few (c0, s, r), layers at 1e5 items,
// ns per candidate at 1e5 items, and in-memory bytes against the Bloom
// bound averaged over n log-uniform in [100, 1e5] and at worst: the
// measurement behind the defaults.
func BenchmarkProfiles(b *testing.B) {
	for _, p := range []Profile{
		{Kind: KindBloom, InitialCapacity: 12, Growth: 2, Tightening: 0.85},
		{Kind: KindBloom, InitialCapacity: 12, Growth: 1.5, Tightening: 0.85},
		{Kind: KindBloom, InitialCapacity: 12, Growth: 1.5, Tightening: 0.9},
		{Kind: KindBloom, InitialCapacity: 32, Growth: 1.5, Tightening: 0.85},
		{Kind: KindBloom, InitialCapacity: 64, Growth: 2, Tightening: 0.85},
		{Kind: KindBloom, InitialCapacity: 12, Growth: 3, Tightening: 0.8},
		{Kind: KindCompact, InitialCapacity: 512, Growth: 3, Tightening: 0.6},
		{Kind: KindCompact, InitialCapacity: 256, Growth: 2, Tightening: 0.7},
		{Kind: KindCompact, InitialCapacity: 512, Growth: 4, Tightening: 0.6},
		{Kind: KindCompact, InitialCapacity: 512, Growth: 8, Tightening: 0.6},
		{Kind: KindCompact, InitialCapacity: 1024, Growth: 4, Tightening: 0.6},
		{Kind: KindCompact, InitialCapacity: 512, Growth: 4, Tightening: 0.5},
		{Kind: KindStaged, InitialCapacity: 512, Growth: 4, Tightening: 0.6},
		{Kind: KindStaged, InitialCapacity: 256, Growth: 4, Tightening: 0.6},
		{Kind: KindStaged, InitialCapacity: 512, Growth: 3, Tightening: 0.6},
		{Kind: KindStaged, InitialCapacity: 1024, Growth: 4, Tightening: 0.5},
		{Kind: KindStaged, InitialCapacity: 256, Growth: 2, Tightening: 0.7},
		{Kind: KindStaged, InitialCapacity: 128, Growth: 4, Tightening: 0.7},
		{Kind: KindStaged, InitialCapacity: 512, Growth: 8, Tightening: 0.6},
	} {
		b.Run(fmt.Sprintf("%v/c0=%d/s=%.2f/r=%.2f", p.WithDefaults().Kind, p.InitialCapacity, p.Growth, p.Tightening), func(b *testing.B) {
			mem, alloc, _ := sizeRatios(b, p, 40)
			cs := newCallSet(100_000)
			f := mustNew(b, p)
			f.Add(cs.pool[:100_000], t0)
			layers := f.Stats(t0).Layers
			var s Scratch
			i := 0
			for b.Loop() {
				f.FilterAndRecord(cs.calls[i&255], 20, RecordReturned, t0, &s)
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/200, "ns/cand")
			b.ReportMetric(float64(layers), "layers")
			b.ReportMetric(mem.Mean(), "mem/bound-mean")
			b.ReportMetric(mem.Max, "mem/bound-max")
			b.ReportMetric(alloc.Mean(), "alloc/bound-mean")
			b.ReportMetric(alloc.Max, "alloc/bound-max")
		})
	}
}

// BenchmarkChainFloor is the arithmetic behind the memory target's
// distance: what a chain of layers costs against the Bloom bound at best,
// over a grid of c0, s and r, averaged over n log-uniform in [100, 1e5] and
// at worst. Every layer is ideal (1.44*log2(1/e) bits an item of its
// capacity: no whole slices, no struct), so real filters only cost more.
// "opened whole" is this package's chain, which allocates each layer for
// its full capacity when it opens; "newest grows" is a chain whose newest
// layer costs only the items in it so far; "newest as fingerprints" keeps
// the newest layer's items as fingerprints of ceil(log2(c/e)) bits (a
// false-positive rate of at most e at its capacity c) until its bits would
// cost less, the layer format that would come closest to "newest grows"
// while the full layers stay Bloom layers. "fingerprint sets" has no Bloom
// layer at all: every layer is its items' fingerprints of ceil(log2(c/e))
// bits, sorted and stored as Elias-Fano codes (per item the low
// f - floor(log2 n) bits and 2 bits of the high part in unary, plus an
// eighth of a bit for a select index; 64 bits a layer), so that a layer's
// memory grows with its items and costs about log2(1/e)+2 bits an item
// when full, under the Bloom layer's 1.44*log2(1/e) for e under 4%.
// "staged" is KindStaged: full layers are Bloom layers built for e/2 and
// the newest is a fingerprint set of ceil(log2(2c/e)) bits (staged.go).
func BenchmarkChainFloor(b *testing.B) {
	const p = 0.01
	bound := 1.44 * math.Log2(1/p)
	const (
		openedWhole = iota
		newestGrows
		fingerprints
		fingerprintSets
		staged
	)
	cost := func(n float64, c0, s, r float64, newest int) float64 {
		bits, left := 0.0, n
		for i := 0; ; i++ {
			c, e := c0*math.Pow(s, float64(i)), p*(1-r)*math.Pow(r, float64(i))
			if newest == staged {
				if left <= c {
					f := math.Ceil(math.Log2(2 * c / e))
					return (bits + left*(2+max(0, math.Floor(f-math.Log2(left)))+1.0/8) + 64) / (n * bound)
				}
				bits += c * 1.44 * math.Log2(2/e)
				left -= c
				continue
			}
			if newest == fingerprintSets {
				k := min(left, c)
				f := math.Ceil(math.Log2(c / e))
				bits += k*(2+max(0, math.Floor(f-math.Log2(k)))+1.0/8) + 64
				if left -= k; left <= 0 {
					return bits / (n * bound)
				}
				continue
			}
			per := 1.44 * math.Log2(1/e)
			if left <= c {
				switch newest {
				case newestGrows:
					return (bits + left*per) / (n * bound)
				case fingerprints:
					return (bits + min(left*math.Ceil(math.Log2(c/e)), c*per)) / (n * bound)
				}
				return (bits + c*per) / (n * bound)
			}
			bits += c * per
			left -= c
		}
	}
	type best struct{ mean, worst, c0, s, r float64 }
	for newest, name := range []string{"opened whole", "newest grows", "newest as fingerprints", "fingerprint sets", "staged"} {
		b.Run(name, func(b *testing.B) {
			var top best
			var leastWorst float64 // the lowest worst case of any choice
			for b.Loop() {
				top, leastWorst = best{mean: math.Inf(1)}, math.Inf(1)
				for _, c0 := range []float64{12, 32, 64, 128, 256, 512} {
					for _, s := range []float64{1.1, 1.15, 1.25, 1.5, 1.75, 2, 3, 4, 8} {
						for _, r := range []float64{0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.97} {
							var sum, worst float64
							const steps = 400
							for j := 0; j <= steps; j++ {
								x := cost(math.Floor(math.Pow(10, 2+3*float64(j)/steps)), c0, s, r, newest)
								sum += x
								worst = max(worst, x)
							}
							if m := sum / (steps + 1); m < top.mean {
								top = best{m, worst, c0, s, r}
							}
							leastWorst = min(leastWorst, worst)
						}
					}
				}
			}
			b.Logf("%s: best mean %.3f (worst %.3f) at c0=%g s=%g r=%g; lowest worst of any choice %.3f",
				name, top.mean, top.worst, top.c0, top.s, top.r, leastWorst)
			b.ReportMetric(top.mean, "best-mem/bound-mean")
			b.ReportMetric(leastWorst, "best-mem/bound-max")
		})
	}
}

// BenchmarkMarshalBinary is write-back's encoding of one user's filter:
// its allocations are most of what the server allocates under load.
func BenchmarkMarshalBinary(b *testing.B) {
	for _, n := range []int{10, 200, 2000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			f := mustNew(b, DefaultProfile())
			f.Add(items("m", n), t0)
			var size int
			b.ReportAllocs()
			for b.Loop() {
				raw, err := f.MarshalBinary()
				if err != nil {
					b.Fatal(err)
				}
				size = len(raw)
			}
			b.ReportMetric(float64(size), "encoded-B")
		})
	}
}

// BenchmarkFilterAndRecordGrowing is the one call of a user who keeps
// seeing new items: 200 candidates never offered before, 20 recorded, so
// every call grows the filter by 20 (BenchmarkFilterAndRecord's users stop
// growing once they have seen their pool). It measures what inserts cost.
func BenchmarkFilterAndRecordGrowing(b *testing.B) {
	fresh := make([]string, 1<<20)
	for i := range fresh {
		fresh[i] = fmt.Sprintf("fresh-%08x", i)
	}
	for _, kind := range []Kind{KindBloom, KindCompact, KindStaged} {
		for _, n := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("%v/n=%d", kind, n), func(b *testing.B) {
				f := mustNew(b, Profile{Kind: kind})
				f.Add(items("g", n), t0)
				var s Scratch
				i := 0
				for b.Loop() {
					j := i * 200 % (len(fresh) - 200)
					f.FilterAndRecord(fresh[j:j+200], 20, RecordReturned, t0, &s)
					i++
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/200, "ns/cand")
			})
		}
	}
}

// BenchmarkForget: forgetting 20 items of a compact filter of n items
// (each round on a fresh clone, made with the timer stopped), beside
// merging a 20-item filter into the same filter, the other step that
// rebuilds every layer.
func BenchmarkForget(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		f, items := compactHolding(b, n)
		forget := items[n/2 : n/2+20]
		small, _ := compactHolding(b, 0)
		small.Add(forget, t0)
		b.Run(fmt.Sprintf("forget/n=%d", n), func(b *testing.B) {
			onClones(b, f, func(g *Filter) error {
				if k, err := g.Forget(forget, t0); err != nil || k != len(forget) {
					return fmt.Errorf("Forget = %d, %v", k, err)
				}
				return nil
			})
		})
		b.Run(fmt.Sprintf("merge/n=%d", n), func(b *testing.B) {
			onClones(b, f, func(g *Filter) error { return g.Merge(small) })
		})
	}
}

// onClones times step on a fresh clone of f each round, the clone made
// with the timer stopped.
func onClones(b *testing.B, f *Filter, step func(*Filter) error) {
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		g := f.Clone()
		b.StartTimer()
		if err := step(g); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFeedCall is the reference workload's call on users as a feed
// leaves them: 20,000 users of 200 items, each call for one at random
// (five calls a user on average, so they grow to about 300 items) with 200
// candidates drawn from the user's pool of 2,000, the first 20 unseen
// recorded. It reports what a call allocates, which the collector of a
// server holding millions of users pays for.
func BenchmarkFeedCall(b *testing.B) {
	for _, kind := range []Kind{KindBloom, KindCompact, KindStaged} {
		b.Run(kind.String(), func(b *testing.B) {
			pools, fs := feedUsers(b, kind, 2000, 200)
			rng := rand.New(rand.NewPCG(1, 2))
			cand := make([]string, 200)
			var s Scratch
			b.ReportAllocs()
			for b.Loop() {
				u := rng.IntN(len(fs))
				for j := range cand {
					cand[j] = pools[u&63][rng.IntN(2000)]
				}
				fs[u].FilterAndRecord(cand, 20, RecordReturned, t0, &s)
			}
		})
	}
}

// BenchmarkSelectColdWarm times Select alone (nothing recorded) for the
// feed's call, its 200 candidates laid out in one buffer as a request
// body's are, against users of 200 and 2,000 items (a hot user's whole
// pool): "cold" picks one of many users at random each call, as a server
// does (20,000 users, 5,000 of 2,000 items), "warm" calls the same user
// again and again. The gap between the two is what the caches cost; the
// rest is the tests' own work.
func BenchmarkSelectColdWarm(b *testing.B) {
	pools := make([][]string, 64)
	for i := range pools {
		pools[i] = items(fmt.Sprintf("u%d-item", i), 2000)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	calls := make([][][]string, len(pools)) // 16 request-like candidate lists a pool
	for i := range calls {
		for range 16 {
			picks := make([]string, 200)
			size := 0
			for j := range picks {
				picks[j] = pools[i][rng.IntN(2000)]
				size += len(picks[j])
			}
			body := make([]byte, 0, size)
			for _, p := range picks {
				body = append(body, p...)
			}
			whole, c := string(body), make([]string, 200)
			for j, off := 0, 0; j < len(c); j++ {
				c[j], off = whole[off:off+len(picks[j])], off+len(picks[j])
			}
			calls[i] = append(calls[i], c)
		}
	}
	for _, kind := range []Kind{KindBloom, KindStaged} {
		for _, n := range []int{200, 2000} {
			users := 20_000 * 200 / n
			fs := make([]*Filter, users)
			for u := range fs {
				fs[u] = mustNew(b, Profile{Kind: kind})
				fs[u].Add(pools[u&63][:n], t0)
			}
			for _, warm := range []bool{false, true} {
				name := fmt.Sprintf("%v/n=%d/cold", kind, n)
				if warm {
					name = fmt.Sprintf("%v/n=%d/warm", kind, n)
				}
				b.Run(name, func(b *testing.B) {
					var s Scratch
					b.ReportAllocs()
					for b.Loop() {
						u := 0
						if !warm {
							u = rng.IntN(users)
						}
						fs[u].Select(calls[u&63][rng.IntN(16)], 20, RecordNone, t0, &s)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/200, "ns/cand")
				})
			}
		}
	}
}

// BenchmarkCheck is the check route's work for 200 items (half of them
// seen) against staged users of 300 items, one of 20,000 at random a call.
func BenchmarkCheck(b *testing.B) {
	pools, fs := feedUsers(b, KindStaged, 400, 300)
	rng := rand.New(rand.NewPCG(1, 2))
	probe := make([]string, 200)
	out := make([]bool, 0, 200)
	var s Scratch
	b.ReportAllocs()
	for b.Loop() {
		u := rng.IntN(len(fs))
		for j := range probe {
			probe[j] = pools[u&63][100+rng.IntN(300)] // items 100 to 299 seen, 300 to 399 not
		}
		out = fs[u].CheckWith(probe, t0, out[:0], &s)
	}
}

// BenchmarkRecordAll is the seen route's work (record: all): 200 items drawn
// from the user's pool of 2,000, against staged users that start at 300
// items, one of 20,000 at random a call, every item recorded.
func BenchmarkRecordAll(b *testing.B) {
	pools, fs := feedUsers(b, KindStaged, 2000, 300)
	rng := rand.New(rand.NewPCG(1, 2))
	batch := make([]string, 200)
	var s Scratch
	b.ReportAllocs()
	for b.Loop() {
		u := rng.IntN(len(fs))
		for j := range batch {
			batch[j] = pools[u&63][rng.IntN(2000)]
		}
		fs[u].FilterAndRecord(batch, 0, RecordAll, t0, &s)
	}
}

// feedUsers makes the 20,000 users the feed's benchmarks call: user u
// draws from pool u&63 of 64 pools of poolSize items, and holds its pool's
// first held items, in a filter of kind.
func feedUsers(b *testing.B, kind Kind, poolSize, held int) ([][]string, []*Filter) {
	pools := make([][]string, 64)
	for i := range pools {
		pools[i] = items(fmt.Sprintf("u%d-item", i), poolSize)
	}
	fs := make([]*Filter, 20_000)
	for u := range fs {
		fs[u] = mustNew(b, Profile{Kind: kind})
		fs[u].Add(pools[u&63][:held], t0)
	}
	return pools, fs
}
