package userfilter

import (
	"fmt"
	"math"

	"github.com/bits-and-blooms/bitset"
)

// Compatible reports whether o was built with the same parameters as f, so
// that the two can be merged.
func (f *Filter) Compatible(o *Filter) bool { return f.p == o.p || f.p.Profile == o.p.Profile }

// Merge ORs o into f: afterwards every item seen by either tests seen in f.
// Both must be built with the same parameters (ErrIncompatible otherwise);
// f is unchanged on error. Merge is commutative, associative and idempotent
// (bits and counts alike): a merged layer's item count is the larger of
// the two, or its capacity when the merged fill says the union holds
// clearly more than that (a function of the merged bits, so the laws hold).
func (f *Filter) Merge(o *Filter) error {
	if !f.Compatible(o) {
		return fmt.Errorf("%w: %s", ErrIncompatible, f.p.Profile.Differences(o.p.Profile))
	}
	switch f.p.Kind {
	case KindCompact:
		f.mergeCompact(o)
		return nil
	case KindStaged:
		f.mergeStaged(o)
		return nil
	}
	// Check every shared layer first so that an error leaves f untouched.
	for gi := range o.gens {
		og := &o.gens[gi]
		fg := f.find(og.bucket)
		if fg == nil {
			continue
		}
		for li := 0; li < len(fg.layers) && li < len(og.layers); li++ {
			if !fg.layers[li].sameShape(&og.layers[li]) { // same offsets too, given the same shapes before
				return fmt.Errorf("%w: layer %d shapes differ", ErrIncompatible, li)
			}
		}
	}
	for gi := range o.gens {
		og := &o.gens[gi]
		fg := f.gen(og.bucket)
		// Layers of one profile have the same shapes and so the same
		// offsets, and a generation's layers are a prefix of the longer
		// one's: the slabs merge by a plain union, which also brings the
		// bits of the layers only o has.
		union := bitset.From(fg.slab)
		union.InPlaceUnion(bitset.From(og.slab))
		fg.slab = union.Words()
		switch nf, no := len(fg.layers), len(og.layers); {
		case no > nf:
			// f's last layer is full in o. Layers never change once
			// placed, so the two generations can share o's.
			fg.layers, fg.n = og.layers, og.n
		case no == nf && nf > 0:
			last := &fg.layers[nf-1]
			fg.n = max(fg.n, og.n)
			if fg.n < last.cap && last.estimateItems(fg.slab) >= uint64(last.cap)+4*uint64(math.Sqrt(float64(last.cap)))+2 {
				// The union is over capacity (the inputs held different
				// items): seal the layer so new items go to a fresh one.
				fg.n = last.cap
			}
		}
	}
	if o.first != 0 && (f.first == 0 || o.first < f.first) {
		f.first = o.first
	}
	f.last = max(f.last, o.last)
	return nil
}

// Covers reports whether o adds nothing to f: the same parameters, each of
// o's generations in f with o's layers a prefix of f's (same shapes, f's
// item counts at least o's), every bit set in o set in f, and o's first and
// last recording within f's. Merging such an o into f leaves every bit and
// item count as they are (only f's own fill could seal a layer), so f alone
// is the union. The hot set's write-back relies on it: what is stored is
// usually an earlier state of what is in memory, and then the merge and
// the second encoding are skipped.
func (f *Filter) Covers(o *Filter) bool {
	if !f.Compatible(o) || o.last > f.last || (o.first != 0 && (f.first == 0 || o.first < f.first)) {
		return false
	}
	for gi := range o.gens {
		og := &o.gens[gi]
		fg := f.find(og.bucket)
		if fg == nil || len(og.layers) > len(fg.layers) {
			return false
		}
		if f.p.Kind == KindStaged {
			if !stagedCovers(fg, og) {
				return false
			}
			continue
		}
		for li := range og.layers {
			if !fg.layers[li].sameShape(&og.layers[li]) || fg.itemsIn(li) < og.itemsIn(li) {
				return false
			}
			if og.layers[li].compact() && !subset(og.fingerprints(li, nil), fg.fingerprints(li, nil)) {
				return false
			}
		}
		if len(og.layers) > 0 && og.layers[0].compact() {
			continue
		}
		for i, w := range og.slab {
			var have uint64
			if i < len(fg.slab) {
				have = fg.slab[i]
			}
			if w&^have != 0 {
				return false
			}
		}
	}
	return true
}

// Clone returns a deep copy of f.
func (f *Filter) Clone() *Filter {
	c := &Filter{p: f.p, first: f.first, last: f.last}
	c.setGens(len(f.gens), len(f.gens))
	for i, g := range f.gens {
		// Layers never change once placed: the clone shares them.
		c.gens[i] = generation{bucket: g.bucket, slab: append([]uint64(nil), g.slab...), layers: g.layers, n: g.n}
	}
	return c
}

// mergeCompact is Merge for compact filters: each layer of a generation
// becomes the union of the two filters' fingerprints in it, so the laws
// hold as for sets. A layer that both had but filled with different items
// can hold more than its capacity (its false-positive rate grows with its
// items, as an overfilled Bloom layer's does); a newest layer that reaches
// its capacity is full, so new items go to a new layer.
func (f *Filter) mergeCompact(o *Filter) {
	for gi := range o.gens {
		og := &o.gens[gi]
		fg := f.gen(og.bucket)
		nl := max(len(fg.layers), len(og.layers))
		sets := make([][]uint64, nl)
		for i := range sets {
			var a, b []uint64
			if i < len(fg.layers) {
				a = fg.fingerprints(i, nil)
			}
			if i < len(og.layers) {
				b = og.fingerprints(i, nil)
			}
			sets[i] = union(a, b)
		}
		fg.placeSets(f.p, sets)
	}
	if o.first != 0 && (f.first == 0 || o.first < f.first) {
		f.first = o.first
	}
	f.last = max(f.last, o.last)
}

// placeSets rebuilds compact generation g of profile p with layer i
// holding sets[i] (sorted and distinct), in layers of p's shapes.
func (g *generation) placeSets(p *sharedProfile, sets [][]uint64) {
	g.slab, g.layers, g.n = nil, nil, 0
	var before uint64
	for i, set := range sets {
		l, _ := p.compactLayer(i, before, 0) // the shapes the filter has
		g.placeFingerprints(l, p.layers, set)
		before += uint64(l.cap)
	}
}

// union returns the sorted union of sorted a and b (in a new slice).
func union(a, b []uint64) []uint64 {
	out := make([]uint64, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			out = append(out, a[i])
			i++
		case a[i] > b[j]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// subset reports whether sorted a is a subset of sorted b.
func subset(a, b []uint64) bool {
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j == len(b) || b[j] != x {
			return false
		}
		j++
	}
	return true
}
