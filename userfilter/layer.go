package userfilter

import (
	"math"
	"math/bits"
)

// layer is one partitioned Bloom filter: k slices of `slice` bits each,
// hash function i setting one bit in slice i. Its bits live in the owning
// generation's slab at bit offset off, right after the previous layer's, so
// no layer pays for rounding to whole words.
//
// A layer never changes once placed, and its count of items is kept by
// the generation (every layer but the last is full), so the layers of every
// filter of one profile are one shared table (see sharedProfile): a user
// pays for its bits and not for describing them (six layers at 200 items).
// The fields are 32 bits: no layer reaches 2^32 bits, items or offset
// before its filter passes maxBitsTotal. Layer i's salt, which decorrelates
// layers that share the item hash, is computed from i (saltOf).
type layer struct {
	off   uint32 // bit offset in the generation's slab
	slice uint32 // bits per slice
	k     uint32 // slices (hash functions)
	cap   uint32 // items it is sized for
}

// saltOf returns layer i's salt.
func saltOf(i int) uint64 { return uint64(i) * golden }

// Slice i's position is the high bits of v_i * slice, where v_0 = Lo + salt
// and v_{i+1} = v_i * lcgMul + Hi|1. Plain double hashing (v_i = Lo + i*Hi)
// puts every item's positions on a two-parameter line, which in the tiny
// slices of a small user's first layer gives a false-positive floor several
// times the target; the multiply stirs the low bits into the next position.
const lcgMul = 6364136223846793005

// golden is 2^64/phi, used to spread layer indexes over the hash space.
const golden = 0x9E3779B97F4A7C15

// shape is the size of a layer built for capacity items at error p.
type shape struct {
	slice uint64
	k     uint32
}

// layerShape returns the smallest (k, slice) whose false-positive rate at
// capacity items, (1 - e^(-capacity/slice))^k, is at most p.
func layerShape(capacity uint64, p float64) shape {
	best := shape{}
	kopt := math.Log2(1 / p)
	for _, k := range []float64{math.Floor(kopt), math.Ceil(kopt)} {
		if k < 1 {
			k = 1
		}
		if k > 32 {
			k = 32
		}
		// Per-slice fill f = p^(1/k); slice = -capacity / ln(1 - f).
		f := math.Pow(p, 1/k)
		slice := uint64(math.Ceil(-float64(capacity) / math.Log1p(-f)))
		if slice < 8 {
			slice = 8
		}
		if best.k == 0 || uint64(k)*slice < uint64(best.k)*best.slice {
			best = shape{slice: slice, k: uint32(k)}
		}
	}
	return best
}

func (l *layer) bits() uint64 { return uint64(l.k) * uint64(l.slice) }

// openBits is what a layer takes in the slab when it opens: its bits, or a
// compact layer's empty set (one word).
func (l *layer) openBits() uint64 {
	if l.compact() {
		return 64
	}
	return l.bits()
}

// fullBits is the bits l takes once full: a set's words at its capacity.
func (l *layer) fullBits() uint64 {
	if l.compact() {
		return 64 * uint64(efWords(uint64(l.cap), uint(l.slice)))
	}
	return l.bits()
}

// sameShape reports whether l and o have the same slices and capacity (and
// so, in generations of one profile, the same offsets).
func (l *layer) sameShape(o *layer) bool { return l.k == o.k && l.slice == o.slice && l.cap == o.cap }

// test reports whether every slice has the item's bit set, stopping at the
// first zero bit; salt is the layer's (saltOf).
func (l *layer) test(w []uint64, h Hash, salt uint64) bool {
	v, b := h.Lo+salt, h.Hi|1
	base, slice := uint64(l.off), uint64(l.slice)
	i := uint32(0)
	if l.k >= 4 {
		// The first four probes without a branch between them: in a full
		// layer half the bits are set, so a branch per probe is a coin
		// toss the CPU mispredicts. An absent item, most of a feed's
		// candidates, is turned away by a full layer 15 times in 16 on one
		// predictable branch (BenchmarkSelectAbsent: a quarter less time a
		// call than probing two at a time).
		hi0, _ := bits.Mul64(v, slice)
		v = v*lcgMul + b
		hi1, _ := bits.Mul64(v, slice)
		v = v*lcgMul + b
		hi2, _ := bits.Mul64(v, slice)
		v = v*lcgMul + b
		hi3, _ := bits.Mul64(v, slice)
		v = v*lcgMul + b
		p0, p1, p2, p3 := base+hi0, base+slice+hi1, base+2*slice+hi2, base+3*slice+hi3
		if (w[p0>>6]>>(p0&63))&(w[p1>>6]>>(p1&63))&(w[p2>>6]>>(p2&63))&(w[p3>>6]>>(p3&63))&1 == 0 {
			return false
		}
		base += 4 * slice
		i = 4
	}
	for ; i < l.k; i++ {
		hi, _ := bits.Mul64(v, slice)
		pos := base + hi
		if w[pos>>6]&(1<<(pos&63)) == 0 {
			return false
		}
		v = v*lcgMul + b
		base += slice
	}
	return true
}

// set sets the item's bit in every slice; salt is the layer's (saltOf).
func (l *layer) set(w []uint64, h Hash, salt uint64) {
	v, b := h.Lo+salt, h.Hi|1
	base, slice := uint64(l.off), uint64(l.slice)
	for i := uint32(0); i < l.k; i++ {
		hi, _ := bits.Mul64(v, slice)
		pos := base + hi
		w[pos>>6] |= 1 << (pos & 63)
		v = v*lcgMul + b
		base += slice
	}
}

// bitsSet counts the layer's set bits (popcount).
func (l *layer) bitsSet(w []uint64) uint64 {
	var n uint64
	for pos, end := uint64(l.off), uint64(l.off)+l.bits(); pos < end; pos += 64 {
		n += uint64(bits.OnesCount64(bitsAt(w, pos, uint(min(64, end-pos)))))
	}
	return n
}

// fpRate is the layer's false-positive rate now, from the fill of each
// slice; n is the items it holds.
func (l *layer) fpRate(w []uint64, n uint32) float64 {
	if n == 0 {
		return 0
	}
	// Slices fill alike; the overall fill is an unbiased estimate of each.
	fill := float64(l.bitsSet(w)) / float64(l.bits())
	return math.Pow(fill, float64(l.k))
}

// estimateItems estimates the items a layer holds from its fill; used after
// a merge, when the union's count is not known exactly.
func (l *layer) estimateItems(w []uint64) uint64 {
	m := float64(l.bits())
	x := float64(l.bitsSet(w))
	if x >= m {
		return uint64(l.cap) * 4
	}
	return uint64(math.Round(-float64(l.slice) * math.Log1p(-x/m)))
}

// bitsAt returns the n <= 64 bits of w starting at bit pos, in the low bits.
func bitsAt(w []uint64, pos uint64, n uint) uint64 {
	i, s := pos>>6, pos&63
	v := w[i] >> s
	if s+uint64(n) > 64 {
		v |= w[i+1] << (64 - s)
	}
	if n < 64 {
		v &= 1<<n - 1
	}
	return v
}

// orBitsAt ORs the n <= 64 low bits of v into w at bit pos.
func orBitsAt(w []uint64, pos uint64, v uint64, n uint) {
	if n < 64 {
		v &= 1<<n - 1
	}
	i, s := pos>>6, pos&63
	w[i] |= v << s
	if s+uint64(n) > 64 {
		w[i+1] |= v >> (64 - s)
	}
}

// slabWords is the words a slab of n bits takes.
func slabWords(n uint64) int { return int((n + 63) / 64) }
