package userfilter

import (
	"fmt"
	"slices"
)

// A staged filter (KindStaged) is the Bloom chain, layer i built for
// c0*s^i items at error e_i = p0*r^i, whose newest layer is staged: it
// holds its items as a sorted set of fingerprints, as a compact layer does
// (compact.go), so that its memory grows with its items. When it fills it
// is sealed: it becomes a Bloom layer set from those fingerprints, and a
// new staged layer opens. Every layer but the newest is a Bloom layer, and
// a layer allocated whole is only ever a full one, so memory follows the
// items instead of doubling a layer at a time (see the package doc).
//
// A sealed layer knows its items only by their fingerprints, so its
// positions come from the fingerprint (fpHash of the top f bits of the
// hash's Hi half), not from the item's hash. An absent item then tests
// seen in it when its fingerprint is one of the layer's (probability at
// most c/2^f) or when the Bloom layer answers a false positive for a
// fingerprint it does not hold: the two halves of e_i, f = ceil(log2(2c/e_i))
// and the Bloom layer built for e_i/2, so the layer stays within e_i.
//
// A generation's layers: the sealed ones in Bloom form at back-to-back bit
// offsets from 0, as a Bloom filter's, then the staged one in the form of a
// compact layer (k = 0, slice = f) at the next multiple of 64.

// stagedPlan returns the capacity and Bloom shape of staged layer i, given
// the capacity of the layers before it: built for half its error.
func (p *Profile) stagedPlan(i int, before uint64) (uint64, shape) {
	c := p.layerCapacity(i, before)
	return c, layerShape(c, p.layerError(i)/2)
}

// stagedTables fills s.fpBits and, for a shared profile, s.staged.
func (s *sharedProfile) stagedTables() {
	var before uint64
	s.fpBits = make([]uint8, maxLayers)
	for i := range s.fpBits {
		c := s.layerCapacity(i, before)
		s.fpBits[i] = uint8(fpBits(c, s.layerError(i)/2))
		before += c
	}
	s.staged = make([][]layer, len(s.layers))
	for i := range s.staged {
		var end uint64
		if i > 0 {
			end = uint64(s.layers[i-1].off) + s.layers[i-1].bits()
		}
		l := s.layers[i]
		t := make([]layer, i+1)
		copy(t, s.layers[:i])
		t[i] = layer{off: uint32((end + 63) &^ 63), slice: uint32(s.fpBits[i]), cap: l.cap}
		s.staged[i] = t
	}
}

// sharesLayers reports whether ls is one of p's shared tables, which a
// filter does not pay for.
func (p *sharedProfile) sharesLayers(ls []layer) bool {
	if len(ls) == 0 {
		return true
	}
	if len(p.layers) > 0 && &ls[0] == &p.layers[0] {
		return true
	}
	i := len(ls) - 1
	return i < len(p.staged) && &ls[0] == &p.staged[i][0]
}

// fpHash is the hash a sealed layer derives an item's positions from: a
// function of the item's fingerprint x alone (murmur3's finalizer, twice).
// It is persisted, as HashItem is.
func fpHash(x uint64) Hash { return Hash{Lo: fmix64(x), Hi: fmix64(x ^ golden)} }

func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	return k ^ k>>33
}

// stest is test for a staged generation: v is the view of its staged
// layer (stagedView), fpb the profile's fpBits.
func (g *generation) stest(v *efView, h Hash, fpb []uint8) bool {
	last := len(g.layers) - 1
	if last >= 0 && g.layers[last].compact() {
		if v.holds(h) {
			return true
		}
		last--
	}
	return g.sealedTest(last, h, fpb)
}

// stagedView is the view of g's staged layer (empty without one).
func (g *generation) stagedView() efView {
	if n := len(g.layers); n > 0 && g.layers[n-1].compact() {
		return g.view(n - 1)
	}
	return efView{}
}

// sealedTest tests the sealed layers 0 to last of g, newest first.
func (g *generation) sealedTest(last int, h Hash, fpb []uint8) bool {
	salt := saltOf(last)
	for i := last; i >= 0; i-- {
		if g.layers[i].test(g.slab, fpHash(h.Hi>>(64-fpb[i])), salt) {
			return true
		}
		salt -= golden
	}
	return false
}

// stagedViews returns views, emptied, with the stagedView of each of
// gens: Select works them out once a call.
func stagedViews(gens []generation, views []efView) []efView {
	views = views[:0]
	for gi := range gens {
		views = append(views, gens[gi].stagedView())
	}
	return views
}

// testStaged is testLive for staged generations with their stagedViews.
func testStaged(gens []generation, views []efView, h Hash, fpb []uint8) bool {
	for i := len(gens) - 1; i >= 0; i-- {
		if gens[i].stest(&views[i], h, fpb) {
			return true
		}
	}
	return false
}

// bloomEnd is the bit where the staged generation g's sealed layers end.
func (g *generation) bloomEnd() uint64 {
	for i := len(g.layers) - 1; i >= 0; i-- {
		if l := &g.layers[i]; !l.compact() {
			return uint64(l.off) + l.bits()
		}
	}
	return 0
}

// sealedForm returns staged layer i's Bloom form, placed after the sealed
// layers before it; before is their capacity.
func (p *sharedProfile) sealedForm(i int, before, off uint64) layer {
	c, sh := p.stagedPlan(i, before)
	return layer{off: uint32(off), slice: uint32(sh.slice), k: sh.k, cap: uint32(c)}
}

// stagedLayer returns staged layer i in its staged form at bit offset off
// (rounded up to a word), or false past the largest filter.
func (p *sharedProfile) stagedLayer(i int, before, off uint64) (layer, bool) {
	c := p.layerCapacity(i, before)
	if c == 0 || c > maxBitsTotal || i >= len(p.fpBits) {
		return layer{}, false
	}
	f := uint(p.fpBits[i])
	off = (off + 63) &^ 63
	if off+uint64(efWords(c, f))*64 > maxBitsTotal {
		return layer{}, false
	}
	return layer{off: uint32(off), slice: uint32(f), cap: uint32(c)}, true
}

// withLayer returns ls[:i] then l: a table of p when one matches, else a
// slice of its own.
func (p *sharedProfile) withLayer(ls []layer, i int, l layer) []layer {
	var staged []layer // the table of layer i staged, if there is one
	if i < len(p.staged) {
		staged = p.staged[i]
	}
	for _, t := range [2][]layer{p.layers, staged} {
		if i < len(t) && t[i] == l && slices.Equal(t[:i], ls[:i]) {
			return t[: i+1 : i+1]
		}
	}
	own := make([]layer, i+1)
	copy(own, ls[:i])
	own[i] = l
	return own
}

// addStaged seals g's staged layer, full, and opens the next one; false
// (and g unchanged) when the filter would pass maxBitsTotal, or an
// encoding of maxEncoded bytes when maxEncoded > 0.
func (f *Filter) addStaged(g *generation, maxEncoded uint64) bool {
	sealed, next, ok := f.nextStaged(g, maxEncoded)
	if !ok {
		return false
	}
	if len(g.layers) > 0 {
		g.seal(f.p, sealed)
	}
	g.placeStaged(f.p, next, nil)
	return true
}

// nextStaged returns what addStaged would do to g (one of f.gens, or a
// generation not made yet): the Bloom form its staged layer, if it has
// one, is sealed into, and the staged layer it opens; and whether the
// filter may grow by them.
func (f *Filter) nextStaged(g *generation, maxEncoded uint64) (sealed, next layer, ok bool) {
	i := len(g.layers)
	var before uint64
	for j := range g.layers {
		before += uint64(g.layers[j].cap)
	}
	end := g.bloomEnd()
	if i > 0 {
		sealed = f.p.sealedForm(i-1, before-uint64(g.layers[i-1].cap), end)
		end += sealed.bits()
	}
	next, ok = f.p.stagedLayer(i, before, end)
	if !ok {
		return layer{}, layer{}, false
	}
	total := uint64(next.off) + next.fullBits() // as nextLayer counts a set
	for gi := range f.gens {
		if &f.gens[gi] != g {
			total += f.gens[gi].used()
		}
	}
	if total > maxBitsTotal {
		return layer{}, layer{}, false
	}
	if maxEncoded > 0 {
		n := f.encodedMax(f.gens) + f.newGenBytes(g) + layerBytes(&next, 0, true)
		if i > 0 { // the staged layer, as encodedMax bounds it, becomes sealed
			n = n - layerBytes(&g.layers[i-1], uint64(g.n), true) + layerBytes(&sealed, uint64(sealed.cap), false)
		}
		if n > maxEncoded {
			return layer{}, layer{}, false
		}
	}
	return sealed, next, true
}

// seal turns g's staged layer into its Bloom form l, setting the bits of
// each of its fingerprints.
func (g *generation) seal(p *sharedProfile, l layer) {
	i := len(g.layers) - 1
	scratch := getFingerprints(int(g.n))
	defer putFingerprints(scratch)
	fps := g.fingerprints(i, *scratch)
	*scratch = fps
	start := uint64(l.off)
	// Clear the staged set and buffer: words past the slab's length are
	// kept zero, and the Bloom layer starts clear.
	if w := start / 64; w < uint64(len(g.slab)) {
		g.slab[w] &= 1<<(start%64) - 1
		clear(g.slab[w+1:])
	}
	n := slabWords(start + l.bits())
	if n+1 > cap(g.slab) {
		// Room for the next staged layer to start, not for this one,
		// which never grows (growSlab would leave an eighth of it).
		ns := newSlab(n + max(1, n/64))
		copy(ns, g.slab)
		g.slab = ns
	}
	g.slab = g.slab[:n]
	salt := saltOf(i)
	for _, x := range fps {
		l.set(g.slab, fpHash(x), salt)
	}
	g.layers = p.withLayer(g.layers, i, l)
	g.n = l.cap
}

// placeStaged appends staged layer l holding fps (sorted and distinct) to
// g, whose layers are all sealed.
func (g *generation) placeStaged(p *sharedProfile, l layer, fps []uint64) {
	l.off = uint32((g.used() + 63) &^ 63)
	start := int(l.off / 64)
	words := efWords(uint64(len(fps)), uint(l.slice))
	g.growSlab(start + words)
	efBuild(g.slab[start:start+words], fps, uint(l.slice))
	g.layers = p.withLayer(g.layers, len(g.layers), l)
	g.n = uint32(len(fps))
}

// mergeStaged is Merge for staged filters. In each generation the layers
// both have sealed OR; a layer one has sealed and the other still stages
// is sealed from the other's fingerprints; the newest layer, staged, is
// the union of the fingerprints of those that have it. So the laws hold
// as for Bloom bits and sets, and no item either saw is lost.
func (f *Filter) mergeStaged(o *Filter) {
	for gi := range o.gens {
		og := &o.gens[gi]
		fg := f.gen(og.bucket)
		nl := max(len(fg.layers), len(og.layers))
		if nl == 0 {
			continue
		}
		var newest []uint64
		for _, g := range []*generation{fg, og} {
			if len(g.layers) == nl {
				newest = union(newest, g.fingerprints(nl-1, nil))
			}
		}
		ng := generation{bucket: fg.bucket}
		var before uint64
		for i := 0; i < nl-1; i++ {
			l := f.p.sealedForm(i, before, ng.bloomEnd())
			before += uint64(l.cap)
			n := slabWords(uint64(l.off) + l.bits())
			ng.growSlab(n)
			ng.layers = f.p.withLayer(ng.layers, i, l)
			for _, g := range []*generation{fg, og} {
				switch {
				case i >= len(g.layers):
				case g.layers[i].compact():
					for _, x := range g.fingerprints(i, nil) {
						l.set(ng.slab, fpHash(x), saltOf(i))
					}
				default:
					// Sealed layers of one profile have the same offsets:
					// OR the words of the layer's span.
					for w := uint64(l.off) / 64; w < uint64(n); w++ {
						ng.slab[w] |= g.slab[w] & spanMask(w, uint64(l.off), uint64(l.off)+l.bits())
					}
				}
			}
		}
		l, _ := f.p.stagedLayer(nl-1, before, ng.bloomEnd())
		ng.placeStaged(f.p, l, newest)
		fg.slab, fg.layers, fg.n = ng.slab, ng.layers, ng.n
	}
	if o.first != 0 && (f.first == 0 || o.first < f.first) {
		f.first = o.first
	}
	f.last = max(f.last, o.last)
}

// spanMask is the bits of word w that lie in [from, to).
func spanMask(w, from, to uint64) uint64 {
	lo, hi := w*64, w*64+64
	m := ^uint64(0)
	if from > lo {
		m &^= 1<<(from-lo) - 1
	}
	if to < hi {
		m &= 1<<(to-lo) - 1
	}
	return m
}

// stagedCovers is Covers for the generations of staged filters: og's
// sealed bits are set in fg, and og's staged fingerprints are in fg's
// layer of the same index, staged or sealed.
func stagedCovers(fg, og *generation) bool {
	for i := range og.layers {
		ol, fl := &og.layers[i], &fg.layers[i]
		switch {
		case !ol.compact():
			if fl.compact() || !fl.sameShape(ol) {
				return false
			}
			for w := uint64(ol.off) / 64; w < uint64(slabWords(uint64(ol.off)+ol.bits())); w++ {
				if og.slab[w]&spanMask(w, uint64(ol.off), uint64(ol.off)+ol.bits())&^fg.slab[w] != 0 {
					return false
				}
			}
		case fl.compact():
			if !subset(og.fingerprints(i, nil), fg.fingerprints(i, nil)) {
				return false
			}
		default:
			for _, x := range og.fingerprints(i, nil) {
				if !fl.test(fg.slab, fpHash(x), saltOf(i)) {
					return false
				}
			}
		}
	}
	return true
}

// decodeStaged decodes layer li of a staged generation of nl layers: a
// sealed layer of exactly its planned shape, or the last, staged.
func (f *Filter) decodeStaged(d *decoder, g *generation, li, nl int, before uint64, total *uint64, limit uint64) (layer, error) {
	if li == nl-1 {
		return f.decodeFingerprints(d, g, li, before, total, limit)
	}
	l, err := f.decodeLayer(d, g, li, before, total, limit)
	if err != nil {
		return l, err
	}
	if want := f.p.sealedForm(li, before, 0); !l.sameShape(&want) || g.n != l.cap {
		return layer{}, fmt.Errorf("%w: sealed layer %d of shape k=%d slice=%d holding %d, not k=%d slice=%d holding %d",
			ErrCorrupt, li, l.k, l.slice, g.n, want.k, want.slice, want.cap)
	}
	return l, nil
}
