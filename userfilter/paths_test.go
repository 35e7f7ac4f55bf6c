package userfilter

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// pathProfiles seal a layer every few dozen items and answer false
// positives often, so that a path that moves a layer's seal or loses a
// false positive shows within a few thousand items.
var pathProfiles = map[string]Profile{
	"bloom":          {Kind: KindBloom, FPRate: 0.2, InitialCapacity: 5, Growth: 2},
	"compact":        {Kind: KindCompact, FPRate: 0.2, InitialCapacity: 5, Growth: 2},
	"staged":         {Kind: KindStaged, FPRate: 0.2, InitialCapacity: 5, Growth: 2},
	"staged-window":  {Kind: KindStaged, FPRate: 0.2, InitialCapacity: 5, Growth: 2, Window: 3 * time.Hour, Granularity: time.Hour},
	"compact-window": {Kind: KindCompact, FPRate: 0.2, InitialCapacity: 5, Growth: 2, Window: 3 * time.Hour, Granularity: time.Hour},
	"bloom-cap":      {Kind: KindBloom, FPRate: 0.2, InitialCapacity: 5, Growth: 2, Window: 3 * time.Hour, Granularity: time.Hour, MaxItems: 700},
}

// A filter that goes through a path after every call (its encoding
// decoded, a clone, a merge with an earlier state of itself, as a restore
// --merge of an older backup or an import of an older export does) must
// answer every later call as the filter that stayed as it was: the same
// items seen, false positives included, at every size, the sizes where
// layers seal among them.
func TestEveryPathKeepsTheFilterAsItWas(t *testing.T) {
	paths := map[string]func(t *testing.T, f, earlier *Filter) *Filter{
		"decode": func(t *testing.T, f, _ *Filter) *Filter {
			b := encode(t, f)
			g, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(encode(t, g), b) {
				t.Fatal("re-encoding differs")
			}
			return g
		},
		"clone": func(t *testing.T, f, _ *Filter) *Filter { return f.Clone() },
		"merge-earlier": func(t *testing.T, f, earlier *Filter) *Filter {
			g := f.Clone()
			if err := g.Merge(earlier); err != nil {
				t.Fatal(err)
			}
			return g
		},
		"earlier-merged-into": func(t *testing.T, f, earlier *Filter) *Filter {
			g := earlier.Clone()
			if err := g.Merge(f); err != nil {
				t.Fatal(err)
			}
			return g
		},
	}
	for pname, p := range pathProfiles {
		for name, path := range paths {
			t.Run(pname+"/"+name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(1, 2))
				kept, moved := mustNew(t, p), mustNew(t, p)
				var sk, sm Scratch
				earlier := moved.Clone()
				now := t0
				next := 0
				falsePositives := 0
				for call := range 300 {
					n := 1 + rng.IntN(12)
					if rng.IntN(10) == 0 {
						n = 50 + rng.IntN(200)
					}
					batch := make([]string, n)
					for i := range batch {
						if next > 0 && rng.IntN(4) == 0 {
							batch[i] = fmt.Sprint("i", rng.IntN(next))
						} else {
							batch[i] = fmt.Sprint("i", next)
							next++
						}
					}
					mode := []Mode{RecordReturned, RecordAll, RecordNone}[rng.IntN(3)]
					a := kept.FilterAndRecord(batch, 0, mode, now, &sk)
					b := moved.FilterAndRecord(batch, 0, mode, now, &sm)
					if a != b || !slices.Equal(sk.Unseen, sm.Unseen) {
						t.Fatalf("call %d (%d items, mode %v, %d items held): %+v after the path, %+v as it was",
							call, n, mode, kept.Stats(now).Items, b, a)
					}
					falsePositives += a.SeenCount
					if rng.IntN(3) == 0 {
						earlier = moved.Clone()
					}
					moved = path(t, moved, earlier)
					if p.Window > 0 {
						now = now.Add(time.Duration(rng.IntN(20)) * time.Minute)
					}
				}
				all := make([]string, next)
				for i := range all {
					all[i] = fmt.Sprint("i", i)
				}
				if !slices.Equal(kept.Check(all, now, nil), moved.Check(all, now, nil)) {
					t.Fatal("the items test otherwise after the path")
				}
				if falsePositives == 0 {
					t.Fatal("no item tested seen: nothing was at stake")
				}
			})
		}
	}
}

// An item recorded at t tests seen until t+Window at least, in memory and
// decoded, and unseen from t+Window+Granularity: a bucket leaves the
// window whole, never early, wherever in its bucket t falls (before the
// epoch too).
func TestWindowNeverEndsEarly(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, p := range []Profile{
		{Window: 3 * time.Hour, Granularity: time.Hour},
		{Window: 30 * 24 * time.Hour, Granularity: 24 * time.Hour},
		{Window: 7 * time.Second, Granularity: time.Second},
		{Kind: KindCompact, Window: 10 * time.Minute, Granularity: 150 * time.Second},
	} {
		p = p.WithDefaults()
		for range 300 {
			at := time.Unix(rng.Int64N(4e9)-1e9, rng.Int64N(1e9))
			f := mustNew(t, p)
			f.Add([]string{"x"}, at)
			g, err := Decode(encode(t, f))
			if err != nil {
				t.Fatal(err)
			}
			last := at.Add(p.Window - time.Nanosecond)
			gone := at.Add(p.Window + p.Granularity)
			for _, h := range []*Filter{f, g} {
				if !h.Test("x", last) {
					t.Fatalf("%v window %v of %v: recorded at %v, unseen at %v", p.Kind, p.Window, p.Granularity, at, last)
				}
				if h.Test("x", gone) {
					t.Fatalf("%v window %v of %v: recorded at %v, still seen at %v", p.Kind, p.Window, p.Granularity, at, gone)
				}
			}
		}
	}
}

// A merge of two histories tests seen every item either side tests seen,
// false positives included: an item a call found seen by one, and so did
// not record, is seen in the union.
func TestMergeKeepsEachSidesFalsePositives(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	probes := items("absent", 20000)
	for pname, p := range pathProfiles {
		for trial := range 4 {
			a, b := mustNew(t, p), mustNew(t, p)
			now := t0
			for call := range 30 {
				a.Add(items(fmt.Sprintf("a%d-%d-", trial, call), 1+rng.IntN(60)), now)
				b.Add(items(fmt.Sprintf("b%d-%d-", trial, call), 1+rng.IntN(60)), now)
				if p.Window > 0 {
					now = now.Add(10 * time.Minute)
				}
			}
			ab := a.Clone()
			if err := ab.Merge(b); err != nil {
				t.Fatal(err)
			}
			inA, inB, inAB := a.Check(probes, now, nil), b.Check(probes, now, nil), ab.Check(probes, now, nil)
			fps := 0
			for i := range probes {
				if inA[i] || inB[i] {
					fps++
					if !inAB[i] {
						t.Fatalf("%s: %s tests seen in one side (%v, %v) and unseen merged", pname, probes[i], inA[i], inB[i])
					}
				}
			}
			if fps == 0 {
				t.Fatalf("%s: no false positive: nothing was at stake", pname)
			}
		}
	}
}

// A filter decoded at every size, one item recorded at a time, is the
// filter that was encoded: the same bytes again, and the same bytes as the
// filter never encoded after every later call. The sizes cover the seals
// of the defaults' first layers (512 and 2,560 items), a compact set
// passing directMax, its buffer's runs and rebuilds, and with small
// layers, a seal every few items.
func TestDecodeAtEverySize(t *testing.T) {
	cases := map[string]struct {
		p Profile
		n int
	}{
		"bloom":         {Profile{Kind: KindBloom}, 700},
		"compact":       {Profile{Kind: KindCompact}, 2700},
		"staged":        {Profile{Kind: KindStaged}, 2700},
		"bloom-small":   {pathProfiles["bloom"], 400},
		"compact-small": {pathProfiles["compact"], 400},
		"staged-small":  {pathProfiles["staged"], 400},
		"staged-window": {pathProfiles["staged-window"], 400},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			kept, moved := mustNew(t, c.p), mustNew(t, c.p)
			var s Scratch
			now := t0
			for i := range c.n {
				it := []string{fmt.Sprint("i", i)}
				kept.FilterAndRecord(it, 0, RecordAll, now, &s)
				moved.FilterAndRecord(it, 0, RecordAll, now, &s)
				want := encode(t, kept)
				g, err := Decode(encode(t, moved))
				if err != nil {
					t.Fatalf("%d items: %v", i+1, err)
				}
				if got := encode(t, g); !bytes.Equal(got, want) {
					t.Fatalf("%d items: the filter decoded and encoded again is %d bytes, the one never encoded %d", i+1, len(got), len(want))
				}
				moved = g
				if c.p.Window > 0 {
					now = now.Add(time.Minute)
				}
			}
		})
	}
}
