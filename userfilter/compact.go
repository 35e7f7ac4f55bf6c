package userfilter

import (
	"math"
	"slices"
	"sync"
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
// A full layer changes only when Forget takes fingerprints out of it (and
// then holds fewer than its capacity: new items still go to the newest). The newest one, while its set holds fewer
// than directMax, takes each item in place (efInsert); past that it keeps
// new items in a buffer of one word a fingerprint right after its set (a
// sorted run of under bufRun, merged into the sorted rest when it fills),
// and the set is rebuilt with the buffer when the buffer passes a
// sixteenth of it, and when the layer fills: an insert costs a short copy
// and about sixteen items' worth of rebuilding.

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

// buffers splits the buffer into its merged part and its last run of
// fewer than bufRun, each sorted (see cadd).
func (g *generation) buffers() (merged, run []uint64) {
	buf := g.buffer()
	k := len(buf) - len(buf)%bufRun
	return buf[:k], buf[k:]
}

// bufRun is how many fingerprints the buffer takes in a short sorted run
// before the run is merged into the rest of the buffer: an insert then
// moves at most bufRun words, and a merge, every bufRun inserts, the
// buffer's.
const bufRun = 64

// ctest is test for a compact generation.
func (g *generation) ctest(h Hash) bool {
	for i := len(g.layers) - 1; i >= 0; i-- {
		if v := g.view(i); v.holds(h) {
			return true
		}
	}
	return false
}

// view returns the view of compact layer i of g, its buffer included if it
// is the newest.
func (g *generation) view(i int) efView {
	l := &g.layers[i]
	v := newEFView(g.set(l), uint(l.slice))
	if i == len(g.layers)-1 {
		v.runs, v.run = g.buffers()
	}
	return v
}

// compactViews returns views, emptied, with the view of every layer of
// gens appended: the oldest generation's first, each's layers in order.
func compactViews(gens []generation, views []efView) []efView {
	views = views[:0]
	for gi := range gens {
		for i := range gens[gi].layers {
			views = append(views, gens[gi].view(i))
		}
	}
	return views
}

// testViews is testLive over the views of compactViews: newest first.
func testViews(views []efView, h Hash) bool {
	for i := len(views) - 1; i >= 0; i-- {
		if views[i].holds(h) {
			return true
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

// cadd adds h to the newest layer of compact (or staged) generation g,
// which has room for it, and reports whether it did. A set of fewer than
// directMax fingerprints takes it in place; a larger one in its buffer,
// merged in when the buffer passes a sixteenth of the set.
//
// checked says the caller has tested h against g (add does). Commit does
// not: Select tested its items, but an item can share its fingerprint with
// one added before it in the same call. Unchecked, cadd looks for h in the
// newest set, where an in-place insert finds it for free, and adds
// nothing when it is there.
func (g *generation) cadd(h Hash, checked bool) bool {
	l := &g.layers[len(g.layers)-1]
	x := l.fingerprint(h)
	buf := g.buffer()
	n := efLen(g.set(l))
	if len(buf) == 0 && n < directMax {
		switch g.efInsert(l, x) {
		case efInserted:
			g.n++
			return true
		case efHeld:
			return false
		}
	} else if !checked {
		if v := g.view(len(g.layers) - 1); v.holds(h) {
			return false
		}
	}
	merged, run := g.buffers()
	j, _ := slices.BinarySearch(run, x)
	bufStart := int(l.off/64) + efWords(n, uint(l.slice))
	start := bufStart + len(merged)
	end := start + len(run)
	g.growSlab(end + 1)
	copy(g.slab[start+j+1:end+1], g.slab[start+j:end])
	g.slab[start+j] = x
	g.n++
	if len(run)+1 == bufRun {
		mergeRun(g.slab[bufStart:end+1], len(merged))
	}
	if g.n >= l.cap || n < directMax || len(merged)+len(run)+1 > max(4, int(n/16)) {
		g.rebuild()
	}
	return true
}

// directMax is the size under which a set takes fingerprints in place: an
// insert shifts its high and low parts (about 1.2 bits a fingerprint after
// the new one, a word at a time), where a rebuild costs about 8 ns a
// fingerprint and happens every sixteenth of the set.
const directMax = 1024

// efInsert's results.
const (
	efInserted = iota // x was inserted
	efHeld            // the set holds x already: nothing changed
	efReshape         // the set does not hold x but its shape changes with it: nothing changed
)

// efInsert inserts x into the newest layer's set in place (its buffer is
// empty), unless the set holds it already or its shape changes with one
// more fingerprint (a power of two, or the first).
func (g *generation) efInsert(l *layer, x uint64) int {
	f := uint(l.slice)
	s0 := int(l.off / 64)
	n := g.slab[s0]
	if n == 0 {
		return efReshape
	}
	lo, hb := efShape(n, f)
	ns, nh, nl := efParts(n, f)
	_, nh2, nl2 := efParts(n+1, f)
	buckets := uint64(1) << hb
	// Where x goes: its bucket's start, then past the smaller low parts.
	w := g.slab[s0:]
	high, low := w[1+ns:1+ns+nh], w[1+ns+nh:1+ns+nh+nl]
	hx, lx := x>>lo, x&(1<<lo-1)
	pos := bucketStart(w[1:1+ns], high, hx)
	idx := pos - hx
	for pos < n+buckets && high[pos>>6]>>(pos&63)&1 != 0 && (lo == 0 || bitsAt(low, idx*uint64(lo), lo) < lx) {
		pos++
		idx++
	}
	if pos < n+buckets && high[pos>>6]>>(pos&63)&1 != 0 && (lo == 0 || bitsAt(low, idx*uint64(lo), lo) == lx) {
		return efHeld
	}
	if lo2, hb2 := efShape(n+1, f); lo2 != lo || hb2 != hb {
		return efReshape
	}
	g.growSlab(s0 + 1 + ns + nh2 + nl2)
	w = g.slab[s0:]
	if nh2 > nh { // the low part moves up a word to make room
		copy(w[1+ns+nh2:1+ns+nh2+nl], w[1+ns+nh:1+ns+nh+nl])
		w[1+ns+nh] = 0
	}
	high, low = w[1+ns:1+ns+nh2], w[1+ns+nh2:1+ns+nh2+nl2]
	if lo > 0 {
		insertBits(low, idx*uint64(lo), uint64(lo), n*uint64(lo))
		orBitsAt(low, idx*uint64(lo), lx, lo)
	}
	insertBits(high, pos, 1, n+buckets)
	high[pos>>6] |= 1 << (pos & 63)
	// Every zero at or after pos moved up one.
	for k := uint64(0); k < (buckets+63)/64; k++ {
		word, shift := &w[1+k/2], 32*(k&1)
		if v := *word >> shift & 0xffffffff; v >= pos {
			*word += 1 << shift
		}
	}
	w[0] = n + 1
	return efInserted
}

// insertBits moves the bits [at, total) of w up by count (1 to 63), leaving
// the bits below at as they are and [at, at+count) clear. w must hold
// total+count bits, the bits past total clear.
func insertBits(w []uint64, at, count, total uint64) {
	first, last := at/64, (total+count-1)/64
	below := uint64(1)<<(at%64) - 1
	moving := w[first] &^ below
	for i := last; i > first; i-- {
		prev := w[i-1]
		if i-1 == first {
			prev = moving
		}
		w[i] = w[i]<<count | prev>>(64-count)
	}
	w[first] = w[first]&below | moving<<count
}

// rebuild moves the newest layer's buffer into its set.
func (g *generation) rebuild() {
	l := &g.layers[len(g.layers)-1]
	f := uint(l.slice)
	scratch := getFingerprints(int(g.n))
	defer putFingerprints(scratch)
	all := g.fingerprints(len(g.layers)-1, *scratch)
	*scratch = all
	start := int(l.off / 64)
	words := efWords(uint64(len(all)), f)
	// Words past the slab's length are kept zero (appendLayer relies on
	// it), so clear the old set and buffer before the slab shrinks.
	clear(g.slab[start:])
	g.growSlab(start + words)
	g.slab = g.slab[:start+words]
	efBuild(g.slab[start:], all, f)
}

// fingerprintPool holds the scratch lists a set is rebuilt or sealed
// through: a set of a few hundred items rebuilds at every power of two,
// and those lists were most of what a staged filter allocated a call
// (375 B of a feed call's 491, against the Bloom kind's 142).
var fingerprintPool = sync.Pool{New: func() any { return new([]uint64) }}

// getFingerprints returns an empty scratch list with room for n. A list
// too small is replaced by one a quarter larger than asked: the set that
// asks again is usually the same one, grown.
func getFingerprints(n int) *[]uint64 {
	p := fingerprintPool.Get().(*[]uint64)
	if cap(*p) < n {
		*p = make([]uint64, 0, n+n/4)
	}
	*p = (*p)[:0]
	return p
}

// putFingerprints returns p to the pool, unless it grew too large to keep.
func putFingerprints(p *[]uint64) {
	if cap(*p) <= 1<<16 {
		fingerprintPool.Put(p)
	}
}

// fingerprints appends the fingerprints of compact layer i of g to dst,
// sorted (the newest layer's buffer merged in).
func (g *generation) fingerprints(i int, dst []uint64) []uint64 {
	l := &g.layers[i]
	start := len(dst)
	dst = efAppend(dst, g.set(l), uint(l.slice))
	if i == len(g.layers)-1 {
		merged, run := g.buffers()
		mid := len(dst)
		dst = append(dst, merged...)
		dst = append(dst, run...)
		mergeRun(dst[mid:], len(merged))
		mergeSorted(dst[start:], mid-start)
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

// growSlab makes the slab n words long, keeping what it holds. A new
// slab has room for the newest layer to grow by a quarter while it is
// small (under smallSet words) and by a sixteenth past that, and at least
// a sixty-fourth of the whole. Small users take a few items a call, and
// less room had a staged filter allocate a feed call 2.5 times what a
// Bloom one does (BenchmarkFeedCall); for large ones the room is memory,
// and room in proportion to the whole slab, as it once was, cost a staged
// filter, whose sealed layers never grow, a tenth more memory than its
// bits (BenchmarkProfiles' alloc/bound). A sixty-fourth bounds the
// copying to 64 words a word grown.
func (g *generation) growSlab(n int) {
	if n > cap(g.slab) {
		newest := 0
		if len(g.layers) > 0 {
			newest = int(g.layers[len(g.layers)-1].off / 64)
		}
		room := (n - newest) / 16
		if n-newest < smallSet {
			room = (n - newest) / 4
		}
		ns := newSlab(n + max(room, n/64))
		copy(ns, g.slab)
		g.slab = ns[:n]
	} else if n > len(g.slab) {
		g.slab = g.slab[:n]
	}
}

// smallSet is the size in words (4 KiB, about 2,500 fingerprints of 13
// bits) under which a set grows by a quarter: the workload's busiest users
// (2,000 items) stay under it, and reallocating their slabs every few calls
// made the newest layers' growth the largest share of what a loaded server
// allocated (a 15 s allocation profile at 1e5 users: 26 MB against the
// Bloom kind's 14.5 with 128 words).
const smallSet = 512

// mergeSorted sorts s, whose parts s[:mid] and s[mid:] are each sorted,
// from the end, with a copy of the second part.
func mergeSorted(s []uint64, mid int) {
	if mid == 0 || mid == len(s) || s[mid-1] <= s[mid] {
		return
	}
	mergeBack(s, mid, slices.Clone(s[mid:]))
}

// mergeRun is mergeSorted for a second part of at most bufRun, copied on
// the stack.
func mergeRun(s []uint64, mid int) {
	if mid == 0 || mid == len(s) || s[mid-1] <= s[mid] {
		return
	}
	var tmp [bufRun]uint64
	mergeBack(s, mid, tmp[:copy(tmp[:], s[mid:])])
}

// mergeBack merges s[:mid] and tail (a copy of s[mid:]), each sorted, into
// s, from the end.
func mergeBack(s []uint64, mid int, tail []uint64) {
	i, j := mid-1, len(tail)-1
	for k := len(s) - 1; j >= 0; k-- {
		if i >= 0 && s[i] > tail[j] {
			s[k] = s[i]
			i--
		} else {
			s[k] = tail[j]
			j--
		}
	}
}
