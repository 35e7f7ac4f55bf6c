package userfilter

import (
	"math"
	"slices"
)

// A compact filter (KindCompact) is a chain like the Bloom filter's, layer
// i built for c0*s^i items at error p0*r^i, but a layer is the sorted set of
// its items' fingerprints of f = ceil(log2(c/e)) bits (the top f bits of
// the hash's Hi half), in Elias-Fano form (efset.go): an absent item
// matches one of a layer's n fingerprints with probability at most
// n/2^f <= e. So a layer's memory grows with the items it holds instead of
// being allocated whole when it opens.
//
// Its layers are layer values with k = 0 and slice = f, and its sets lie
// in the generation's slab back to back, each at off (a multiple of 64).
// A full layer never changes. The newest one takes items in a sorted
// buffer of one word a fingerprint right after its set, and is rebuilt
// with them when the buffer passes a sixteenth of the set (and when it
// fills): an insert costs a binary search and a short copy, and about
// sixteen items' worth of rebuilding.

// compactLayer returns layer i of a compact generation whose layers before
// it hold before items and take total bits; false past the largest filter.
func (p *Profile) compactLayer(i int, before, total uint64) (layer, bool) {
	c := p.layerCapacity(i, before)
	if c == 0 || c > maxBitsTotal {
		return layer{}, false
	}
	f := fpBits(c, p.layerError(i))
	if total+uint64(efWords(c, f))*64 > maxBitsTotal {
		return layer{}, false
	}
	return layer{off: uint32(total), slice: uint32(f), cap: uint32(c)}, true
}

// fpBits is ceil(log2(c/e)), the fingerprint bits of a layer of capacity c
// at error e, within [1, 64].
func fpBits(c uint64, e float64) uint {
	return uint(min(max(math.Ceil(math.Log2(float64(c)/e)), 1), 64))
}

// compact reports whether l is a fingerprint-set layer.
func (l *layer) compact() bool { return l.k == 0 }

// fingerprint is the item's fingerprint in layer l.
func (l *layer) fingerprint(h Hash) uint64 { return h.Hi >> (64 - l.slice) }

// set returns the words of layer l's set in g.
func (g *generation) set(l *layer) []uint64 { return g.slab[l.off/64:] }

// buffer returns the newest layer's buffer of fingerprints not yet in its set.
func (g *generation) buffer() []uint64 {
	l := &g.layers[len(g.layers)-1]
	w := g.set(l)
	n := efLen(w)
	start := efWords(n, uint(l.slice))
	return w[start : start+int(uint64(g.n)-n)]
}

// ctest is test for a compact generation.
func (g *generation) ctest(h Hash) bool {
	last := len(g.layers) - 1
	for i := last; i >= 0; i-- {
		l := &g.layers[i]
		x := l.fingerprint(h)
		if efContains(g.set(l), x, uint(l.slice)) {
			return true
		}
		if i == last {
			if _, ok := slices.BinarySearch(g.buffer(), x); ok {
				return true
			}
		}
	}
	return false
}

// cused is used for a compact generation: its slab up to the newest
// layer's buffer's end.
func (g *generation) cused() uint64 {
	l := &g.layers[len(g.layers)-1]
	n := efLen(g.set(l))
	return uint64(l.off) + 64*(uint64(efWords(n, uint(l.slice)))+uint64(g.n)-n)
}

// cadd adds h, which it does not hold, to the newest layer of compact
// generation g, which has room for it.
func (g *generation) cadd(h Hash) {
	l := &g.layers[len(g.layers)-1]
	x := l.fingerprint(h)
	buf := g.buffer()
	j, _ := slices.BinarySearch(buf, x)
	start := int(l.off/64) + efWords(efLen(g.set(l)), uint(l.slice))
	end := start + len(buf)
	g.growSlab(end + 1)
	copy(g.slab[start+j+1:end+1], g.slab[start+j:end])
	g.slab[start+j] = x
	g.n++
	if g.n >= l.cap || len(buf)+1 > max(4, int(efLen(g.set(l))/16)) {
		g.rebuild()
	}
}

// rebuild moves the newest layer's buffer into its set.
func (g *generation) rebuild() {
	l := &g.layers[len(g.layers)-1]
	f := uint(l.slice)
	all := g.fingerprints(len(g.layers)-1, make([]uint64, 0, int(g.n)))
	start := int(l.off / 64)
	words := efWords(uint64(len(all)), f)
	// Words past the slab's length are kept zero (appendLayer relies on
	// it), so clear the old set and buffer before the slab shrinks.
	clear(g.slab[start:])
	g.growSlab(start + words)
	g.slab = g.slab[:start+words]
	efBuild(g.slab[start:], all, f)
}

// fingerprints appends the fingerprints of compact layer i of g to dst,
// sorted (the newest layer's buffer merged in).
func (g *generation) fingerprints(i int, dst []uint64) []uint64 {
	l := &g.layers[i]
	start := len(dst)
	dst = efAppend(dst, g.set(l), uint(l.slice))
	if i == len(g.layers)-1 {
		mid := len(dst) - start
		dst = append(dst, g.buffer()...)
		mergeSorted(dst[start:], mid)
	}
	return dst
}

// placeFingerprints appends compact layer l (its shape; appendLayer
// places it) holding fps, sorted and distinct, to g.
func (g *generation) placeFingerprints(l layer, table []layer, fps []uint64) layer {
	l = g.appendLayer(l, table)
	start := int(l.off / 64)
	words := efWords(uint64(len(fps)), uint(l.slice))
	g.growSlab(start + words)
	efBuild(g.slab[start:start+words], fps, uint(l.slice))
	g.n = uint32(len(fps))
	return l
}

// growSlab makes the slab n words long, keeping what it holds.
func (g *generation) growSlab(n int) {
	if n > cap(g.slab) {
		ns := newSlab(n + n/8)
		copy(ns, g.slab)
		g.slab = ns[:n]
	} else if n > len(g.slab) {
		g.slab = g.slab[:n]
	}
}

// mergeSorted sorts s, whose halves s[:mid] and s[mid:] are each sorted.
func mergeSorted(s []uint64, mid int) {
	if mid == 0 || mid == len(s) || s[mid-1] <= s[mid] {
		return
	}
	slices.Sort(s) // a rebuild's cost is in efBuild; sorting a short tail in is cheap enough
}
