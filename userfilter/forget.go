package userfilter

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// CanForget reports whether filters of kind k can forget items (Forget):
// a compact filter keeps each item's fingerprint and can drop it, a Bloom
// filter's bits are shared between items and cannot be cleared.
func (k Kind) CanForget() bool { return k == KindCompact }

// Forget makes items unseen again and returns how many of them, counted
// once each, tested seen before. Only a kind that CanForget can: any other
// returns ErrUnsupported and f is unchanged.
//
// A compact layer holds fingerprints, not items: forgetting an item drops
// its fingerprint from every layer (and time bucket) that has it, so an
// item that shares that fingerprint in that layer is forgotten too. That
// happens with the probability that the forgotten item would have been a
// false positive, at most the profile's target rate; a forgotten item is
// then shown again, never hidden.
//
// The layers that lose fingerprints are rebuilt, each smaller: Forget
// costs about what Merge does (BenchmarkForget), so it is for the
// occasional correction, not for every call.
func (f *Filter) Forget(items []string, now time.Time) (int, error) {
	if !f.p.Kind.CanForget() {
		return 0, fmt.Errorf("%w: %v filters cannot forget items", ErrUnsupported, f.p.Kind)
	}
	f.Expire(now)
	hs := make([]Hash, len(items))
	for i, it := range items {
		hs[i] = HashItem(it)
	}
	slices.SortFunc(hs, cmpHash)
	hs = slices.Compact(hs)
	forgotten := make([]bool, len(hs))
	xs := make([]uint64, len(hs))
	for gi := range f.gens {
		g := &f.gens[gi]
		sets := make([][]uint64, len(g.layers))
		changed := false
		for i := range g.layers {
			l := &g.layers[i]
			fps := g.fingerprints(i, nil)
			xs = xs[:0]
			for j, h := range hs {
				x := l.fingerprint(h)
				if _, ok := slices.BinarySearch(fps, x); ok {
					forgotten[j] = true
					xs = append(xs, x)
				}
			}
			if len(xs) > 0 {
				slices.Sort(xs)
				fps = difference(fps, xs)
				changed = true
			}
			sets[i] = fps
		}
		if changed {
			g.placeSets(f.p, sets)
		}
	}
	n := 0
	for _, b := range forgotten {
		if b {
			n++
		}
	}
	return n, nil
}

// cmpHash orders hashes for sorting.
func cmpHash(a, b Hash) int { return cmp.Or(cmp.Compare(a.Hi, b.Hi), cmp.Compare(a.Lo, b.Lo)) }

// difference returns sorted a without the members of sorted b, in a's array.
func difference(a, b []uint64) []uint64 {
	out := a[:0]
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j < len(b) && b[j] == x {
			continue
		}
		out = append(out, x)
	}
	return out
}
