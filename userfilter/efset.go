package userfilter

import (
	"math/bits"
	"slices"
)

// An efset is a sorted set of f-bit fingerprints in Elias-Fano form, laid
// out in a run of words of a generation's slab (a layer of a compact
// filter, see compact.go):
//
//	word 0          the count n of fingerprints
//	samples         the position in high of every 64th zero, two to a word
//	high            2^hb buckets in unary: fingerprint x goes to bucket
//	                x>>l, and element i of bucket b sets bit b+i; the
//	                buckets are separated by zeros (n+2^hb bits)
//	low             the low l bits of each fingerprint, packed
//
// with hb = min(f, bits.Len(n)) and l = f-hb, so that there are between n
// and 2n buckets. A set costs about l+2 bits a fingerprint (plus a word
// and a 64th of a bit a bucket), so a full layer of capacity c at error e,
// with f = ceil(log2(c/e)), costs about log2(1/e)+2 bits an item, under a
// Bloom layer's 1.44*log2(1/e) for e under 4%. Its size is a function of n
// and f alone, so a full layer's place in the slab is the same in every
// filter of a profile.

// efShape returns the low bits l and the log2 of the buckets of a set of n
// fingerprints of f bits.
func efShape(n uint64, f uint) (l, hb uint) {
	hb = min(f, uint(bits.Len64(n)))
	return f - hb, hb
}

// efParts returns the word counts of a set's samples, high and low parts.
func efParts(n uint64, f uint) (samples, high, low int) {
	if n == 0 {
		return 0, 0, 0
	}
	l, hb := efShape(n, f)
	buckets := uint64(1) << hb
	samples = int(((buckets+63)/64 + 1) / 2)
	high = int((n + buckets + 63) / 64)
	low = int((n*uint64(l) + 63) / 64)
	return samples, high, low
}

// efWords returns the words a set of n fingerprints of f bits takes.
func efWords(n uint64, f uint) int {
	s, h, l := efParts(n, f)
	return 1 + s + h + l
}

// efBuild writes the set of fps (sorted, distinct, each under 2^f) into w,
// which must be efWords(len(fps), f) zero words.
func efBuild(w []uint64, fps []uint64, f uint) {
	n := uint64(len(fps))
	w[0] = n
	if n == 0 {
		return
	}
	ns, nh, _ := efParts(n, f)
	l, hb := efShape(n, f)
	samples, high, low := w[1:1+ns], w[1+ns:1+ns+nh], w[1+ns+nh:]
	for i, x := range fps {
		if l > 0 {
			orBitsAt(low, uint64(i)*uint64(l), x, l)
		}
		pos := x>>l + uint64(i)
		high[pos>>6] |= 1 << (pos & 63)
	}
	// Every 64th zero's position, walking the zeros word by word.
	zeros, end := uint64(0), n+uint64(1)<<hb
	for wi := range high {
		z := ^high[wi]
		if rest := end - uint64(wi)*64; rest < 64 {
			z &= 1<<rest - 1
		}
		c := uint64(bits.OnesCount64(z))
		for next := (zeros + 63) / 64 * 64; next < zeros+c; next += 64 {
			pos := uint64(wi)*64 + selectInWord(z, next-zeros)
			k := next / 64
			samples[k/2] |= pos << (32 * (k & 1))
		}
		zeros += c
	}
}

// efLen returns the count of the set in w.
func efLen(w []uint64) uint64 { return w[0] }

// efContains reports whether the set in w (of f-bit fingerprints) holds x.
func efContains(w []uint64, x uint64, f uint) bool {
	v := newEFView(w, f)
	return v.contains(x)
}

// efView is a set laid out for lookups: what a lookup would work out from
// the set's count each time, worked out once (Select makes one a layer a
// call).
type efView struct {
	samples, high, low []uint64
	lo                 uint   // the low bits of a fingerprint
	shift              uint   // 64 - f: a hash's top f bits are its fingerprint
	end                uint64 // the high part's bits: count + buckets
	buckets            uint64 // 2^hb
	// runs and run are the newest layer's buffer (see generation.buffers);
	// nil for the other layers.
	runs, run []uint64
	// starts, when not nil, is where every bucket starts in high (see
	// index), so that a lookup reads two entries instead of selecting.
	starts []uint32
}

// newEFView returns the view of the set in w, of f-bit fingerprints.
func newEFView(w []uint64, f uint) efView {
	n := w[0]
	v := efView{shift: 64 - f}
	if n == 0 {
		return v
	}
	ns, nh, nl := efParts(n, f)
	l, hb := efShape(n, f)
	v.samples, v.high, v.low = w[1:1+ns], w[1+ns:1+ns+nh], w[1+ns+nh:1+ns+nh+nl]
	v.lo, v.buckets = l, uint64(1)<<hb
	v.end = n + v.buckets
	return v
}

// contains reports whether the set holds fingerprint x.
func (v *efView) contains(x uint64) bool {
	if v.end == 0 {
		return false
	}
	h := x >> v.lo
	lx := x & (1<<v.lo - 1)
	if v.starts != nil {
		// Bucket h's elements are the ones from its start to the zero that
		// ends it, right before the next bucket's start.
		pos, end := uint64(v.starts[h]), uint64(v.starts[h+1])-1
		if v.lo == 0 {
			return pos < end
		}
		for idx := pos - h; pos < end; pos, idx = pos+1, idx+1 {
			switch b := bitsAt(v.low, idx*uint64(v.lo), v.lo); {
			case b == lx:
				return true
			case b > lx:
				return false
			}
		}
		return false
	}
	pos := bucketStart(v.samples, v.high, h)
	idx := pos - h
	for pos < v.end && v.high[pos>>6]>>(pos&63)&1 != 0 {
		if v.lo == 0 {
			return true
		}
		switch b := bitsAt(v.low, idx*uint64(v.lo), v.lo); {
		case b == lx:
			return true
		case b > lx:
			return false
		}
		pos++
		idx++
	}
	return false
}

// indexMaxBuckets is how many buckets a set may have, per lookup a call
// makes in it, for index to pay. In BenchmarkSelectColdWarm, a table of
// 2,048 buckets for 200 lookups (10 a lookup) still took 18% off Select's
// time for users spread over memory and 7% for one user called again and
// again; the table's cost grows with the buckets, the select's saving with
// the lookups.
const indexMaxBuckets = 16

// indexMaxTable caps the starts of a call's tables together (256 KiB),
// which its scratch keeps for the next call: a window holds up to 367
// generations, each with a staged layer, and a call of thousands of
// candidates in sets of tens of thousands of items does without some.
const indexMaxTable = 1 << 16

// index makes v's lookups read the starts of buckets from a table instead
// of selecting them, when the set has at most indexMaxBuckets buckets per
// one of the lookups to come and buf has room for the table within
// indexMaxTable: the table is appended to buf, and buf returned. A call of
// 200 candidates makes 200 lookups in its newest layer, each of which would
// otherwise select in the high part.
func (v *efView) index(buf []uint32, lookups int) []uint32 {
	if v.end == 0 || v.buckets > indexMaxBuckets*uint64(lookups) || uint64(len(buf))+v.buckets >= indexMaxTable {
		return buf
	}
	// starts[0] is 0, and starts[b+1] is right after zero number b, which
	// ends bucket b. The first end bits of high hold exactly buckets zeros,
	// so k stays in range; written by index, the table took 15% less time
	// than appended.
	at := len(buf)
	buf = slices.Grow(buf, int(v.buckets)+1)[:at+int(v.buckets)+1]
	starts := buf[at:]
	starts[0] = 0
	k := 1
	for wi, w := range v.high {
		z := ^w
		if rest := v.end - uint64(wi)*64; rest < 64 {
			z &= 1<<rest - 1
		}
		for base := uint32(wi)*64 + 1; z != 0 && k < len(starts); z &= z - 1 {
			starts[k] = base + uint32(bits.TrailingZeros64(z))
			k++
		}
	}
	v.starts = starts
	return buf
}

// holds reports whether the layer holds the item of hash h: its set, or
// for the newest layer its buffer.
func (v *efView) holds(h Hash) bool {
	x := h.Hi >> v.shift
	if v.contains(x) {
		return true
	}
	if len(v.runs) > 0 && searchUniform(v.runs, x) {
		return true
	}
	_, ok := slices.BinarySearch(v.run, x) // short: under bufRun
	return ok
}

// searchUniform reports whether sorted s holds x. Fingerprints are
// uniform, so a few steps of interpolation find x's place in a buffer of
// thousands where a binary search takes a dozen dependent reads; past
// those steps (fingerprints that crowd, as only items made to collide
// would) it finishes by binary search, so a lookup never takes more than
// a few steps and log2(len(s)).
func searchUniform(s []uint64, x uint64) bool {
	lo, hi := 0, len(s)-1
	for range 4 {
		if lo > hi {
			return false
		}
		a, b := s[lo], s[hi]
		if x <= a || x >= b {
			return x == a || x == b
		}
		i := lo + int(float64(x-a)/float64(b-a)*float64(hi-lo))
		switch y := s[i]; {
		case y == x:
			return true
		case y < x:
			lo = i + 1
		default:
			hi = i - 1
		}
	}
	if lo > hi {
		return false
	}
	_, ok := slices.BinarySearch(s[lo:hi+1], x)
	return ok
}

// bucketStart returns where bucket h starts in a set's high part: right
// after the zero that ends bucket h-1, found from the sample of every 64th
// zero.
func bucketStart(samples, high []uint64, h uint64) uint64 {
	if h == 0 {
		return 0
	}
	k := h - 1
	p := samples[k/128] >> (32 * ((k / 64) & 1)) & 0xffffffff
	return selectZeroFrom(high, p, k%64) + 1
}

// selectZeroFrom returns the position of zero number rem (from 0) of high
// counting from position p, which holds a zero.
func selectZeroFrom(high []uint64, p, rem uint64) uint64 {
	wi := p >> 6
	word := ^high[wi] &^ (1<<(p&63) - 1)
	rem++
	for {
		c := uint64(bits.OnesCount64(word))
		if c >= rem {
			return wi*64 + selectInWord(word, rem-1)
		}
		rem -= c
		wi++
		word = ^high[wi]
	}
}

// selectInWord returns the position of set bit number r (from 0) of w,
// which has more than r set bits: the byte that holds it from the bytes'
// running counts, then the bit from a table.
func selectInWord(w, r uint64) uint64 {
	const l8, h8 = 0x0101010101010101, 0x8080808080808080
	s := w - (w>>1)&0x5555555555555555
	s = s&0x3333333333333333 + (s>>2)&0x3333333333333333
	s = (s + s>>4) & 0x0f0f0f0f0f0f0f0f
	s *= l8 // byte i: the set bits of bytes 0 to i
	// The bytes whose running count is at most r, flagged in their top
	// bits (counts and r are under 128, so no byte borrows from the
	// next): a prefix of the bytes, as the counts only grow.
	i := uint64(bits.OnesCount64((r*l8 | h8 - s) & h8))
	before := uint64(0)
	if i > 0 {
		before = (s >> (8*i - 8)) & 0xff
	}
	return 8*i + uint64(selectInByte[uint8(w>>(8*i))][r-before])
}

// selectInByte[b][r] is the position of set bit number r of b.
var selectInByte = func() (t [256][8]uint8) {
	for b := range 256 {
		r := 0
		for i := range 8 {
			if b>>i&1 != 0 {
				t[b][r] = uint8(i)
				r++
			}
		}
	}
	return t
}()

// efAppend appends the set's fingerprints in w, in order, to dst.
func efAppend(dst []uint64, w []uint64, f uint) []uint64 {
	n := w[0]
	if n == 0 {
		return dst
	}
	ns, nh, _ := efParts(n, f)
	l, _ := efShape(n, f)
	high, low := w[1+ns:1+ns+nh], w[1+ns+nh:]
	i := uint64(0)
	for wi, word := range high {
		for word != 0 {
			pos := uint64(wi)*64 + uint64(bits.TrailingZeros64(word))
			word &= word - 1
			x := (pos - i) << l
			if l > 0 {
				x |= bitsAt(low, i*uint64(l), l)
			}
			dst = append(dst, x)
			i++
		}
	}
	return dst
}
