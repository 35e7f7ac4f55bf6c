package userfilter

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// fpSet is a measuring prototype, not a layer format of this package: a
// layer of BenchmarkChainFloor's "fingerprint sets", its items kept as
// sorted f-bit fingerprints in Elias-Fano form. Fingerprint x goes to
// bucket x>>l; element i of bucket h sets bit h+i of high (buckets
// separated by zeros), and its low l bits are packed in low. samples holds
// the position of every 64th zero of high, so finding a bucket reads a
// sample and about two words. BenchmarkFingerprintSet holds its lookups
// against a Bloom layer of the same capacity and error.
type fpSet struct {
	n       int
	l       uint
	buckets uint64
	low     []uint64
	high    []uint64
	samples []uint32
}

// newFPSet builds the set of fps: sorted, distinct, each under 2^f.
func newFPSet(fps []uint64, f uint) *fpSet {
	s := &fpSet{n: len(fps)}
	if len(fps) > 0 {
		s.l = uint(max(0, int(f)-bits.Len(uint(len(fps)))))
	}
	s.buckets = uint64(1) << (f - s.l)
	s.low = make([]uint64, (uint64(len(fps))*uint64(s.l)+63)/64+1)
	s.high = make([]uint64, (uint64(len(fps))+s.buckets+63)/64+1)
	for i, x := range fps {
		if s.l > 0 {
			orBitsAt(s.low, uint64(i)*uint64(s.l), x&(1<<s.l-1), s.l)
		}
		pos := x>>s.l + uint64(i)
		s.high[pos>>6] |= 1 << (pos & 63)
	}
	zeros := uint64(0)
	for pos := uint64(0); pos < uint64(len(fps))+s.buckets; pos++ {
		if s.high[pos>>6]>>(pos&63)&1 == 0 {
			if zeros%64 == 0 {
				s.samples = append(s.samples, uint32(pos))
			}
			zeros++
		}
	}
	return s
}

// select0 returns the position of zero number k (from 0) of high.
func (s *fpSet) select0(k uint64) uint64 {
	return s.selectFrom(uint64(s.samples[k/64]), k%64)
}

// selectFrom returns the position of zero number rem (from 0) of high
// counting from position p, which holds a zero.
func (s *fpSet) selectFrom(p, rem uint64) uint64 {
	w := p >> 6
	word := ^s.high[w] &^ (1<<(p&63) - 1) // zeros from p on, p's own included
	rem++                                 // so: the (rem+1)-th zero from p on
	for {
		c := uint64(bits.OnesCount64(word))
		if c >= rem {
			return w*64 + selectInWord(word, rem-1)
		}
		rem -= c
		w++
		word = ^s.high[w]
	}
}

func (s *fpSet) contains(x uint64) bool {
	h := x >> s.l
	if s.n == 0 || h >= s.buckets {
		return false
	}
	pos := uint64(0)
	if h > 0 {
		pos = s.select0(h-1) + 1
	}
	idx := pos - h
	lx := x & (1<<s.l - 1)
	for s.high[pos>>6]>>(pos&63)&1 != 0 {
		if s.l == 0 {
			return true
		}
		switch v := bitsAt(s.low, idx*uint64(s.l), s.l); {
		case v == lx:
			return true
		case v > lx:
			return false
		}
		pos++
		idx++
	}
	return false
}

// containsAll sets found[i] to contains(xs[i]) for a group of fingerprints
// at a time, one step for all of them before the next (the select sample,
// the bucket's start in high, the low bits), so that the reads of one
// step are independent of each other and overlap.
func (s *fpSet) containsAll(xs []uint64, found []bool) {
	const group = 8
	var pos [group]uint64
	var live [group]bool
	for start := 0; start < len(xs); start += group {
		g := xs[start:min(start+group, len(xs))]
		for i, x := range g {
			h := x >> s.l
			live[i] = s.n > 0 && h < s.buckets
			if live[i] && h > 0 {
				pos[i] = uint64(s.samples[(h-1)/64])
			}
		}
		for i, x := range g {
			if h := x >> s.l; live[i] && h > 0 {
				pos[i] = s.selectFrom(pos[i], (h-1)%64) + 1
			} else {
				pos[i] = 0
			}
		}
		for i, x := range g {
			found[start+i] = false
			if !live[i] {
				continue
			}
			p := pos[i]
			idx := p - x>>s.l
			lx := x & (1<<s.l - 1)
			for s.high[p>>6]>>(p&63)&1 != 0 {
				v := uint64(0)
				if s.l > 0 {
					v = bitsAt(s.low, idx*uint64(s.l), s.l)
				}
				if v >= lx {
					found[start+i] = v == lx
					break
				}
				p++
				idx++
			}
		}
	}
}

func (s *fpSet) bytes() int { return 8 * (len(s.low) + len(s.high) + len(s.samples)/2) }

// fpDirect is a second prototype of the same layer that finds a bucket
// without a select: n/4 to n/2 buckets (two to four fingerprints each),
// and for every bucket the index of its first fingerprint, packed in
// bits.Len(n) bits, so a lookup reads two neighbouring offsets and then
// the bucket's few low parts. It pays a few bits an item more than fpSet
// for that.
type fpDirect struct {
	n, l, w uint
	b       uint // log2 of the buckets
	low     []uint64
	offs    []uint64
}

// newFPDirect builds the set of fps: sorted, distinct, each under 2^f.
func newFPDirect(fps []uint64, f uint) *fpDirect {
	n := uint(len(fps))
	s := &fpDirect{n: n, w: uint(bits.Len(n))}
	s.b = uint(max(0, bits.Len(n)-2))
	s.l = f - s.b
	s.low = make([]uint64, (uint64(n)*uint64(s.l)+63)/64+1)
	buckets := uint64(1) << s.b
	s.offs = make([]uint64, ((buckets+1)*uint64(s.w)+63)/64+1)
	next := uint64(0)
	for i, x := range fps {
		orBitsAt(s.low, uint64(i)*uint64(s.l), x&(1<<s.l-1), s.l)
		for ; next <= x>>s.l; next++ {
			orBitsAt(s.offs, next*uint64(s.w), uint64(i), s.w)
		}
	}
	for ; next <= buckets; next++ {
		orBitsAt(s.offs, next*uint64(s.w), uint64(n), s.w)
	}
	return s
}

func (s *fpDirect) contains(x uint64) bool {
	h := x >> s.l
	if s.n == 0 || h >= 1<<s.b {
		return false
	}
	two := bitsAt(s.offs, h*uint64(s.w), min(2*s.w, 64))
	i, end := two&(1<<s.w-1), two>>s.w
	if 2*s.w > 64 {
		end = bitsAt(s.offs, (h+1)*uint64(s.w), s.w)
	}
	lx := x & (1<<s.l - 1)
	for ; i < end; i++ {
		switch v := bitsAt(s.low, i*uint64(s.l), s.l); {
		case v == lx:
			return true
		case v > lx:
			return false
		}
	}
	return false
}

func (s *fpDirect) bytes() int { return 8 * (len(s.low) + len(s.offs)) }

// TestFPSetPrototype checks the prototype the benchmark measures: every
// member is found, and absent fingerprints test present at about n/2^f.
func TestFPSetPrototype(t *testing.T) {
	for _, n := range []int{1, 10, 200, 5000} {
		const f = 20
		rng := rand.New(rand.NewPCG(uint64(n), 9))
		in := map[uint64]bool{}
		for len(in) < n {
			in[rng.Uint64()>>(64-f)] = true
		}
		fps := make([]uint64, 0, n)
		for x := range in {
			fps = append(fps, x)
		}
		slices.Sort(fps)
		s := newFPSet(fps, f)
		for _, x := range fps {
			if !s.contains(x) {
				t.Fatalf("n=%d: member %x not found", n, x)
			}
		}
		d := newFPDirect(fps, f)
		for _, x := range fps {
			if !d.contains(x) {
				t.Fatalf("n=%d: member %x not found by fpDirect", n, x)
			}
		}
		for range 20_000 {
			if x := rng.Uint64() >> (64 - f); d.contains(x) != in[x] {
				t.Fatalf("n=%d: fpDirect.contains(%x) = %v", n, x, !in[x])
			}
		}
		mixed := append(slices.Clone(fps[:min(n, 100)]), rng.Uint64()>>(64-f), rng.Uint64()>>(64-f))
		found := make([]bool, len(mixed))
		s.containsAll(mixed, found)
		for i, x := range mixed {
			if found[i] != s.contains(x) {
				t.Fatalf("n=%d: containsAll says %v for %x, contains %v", n, found[i], x, !found[i])
			}
		}
		fp, probes := 0, 200_000
		for range probes {
			x := rng.Uint64() >> (64 - f)
			if s.contains(x) != in[x] {
				t.Fatalf("n=%d: contains(%x) = %v", n, x, !in[x])
			}
			if in[x] {
				fp++
			}
		}
		if want := float64(n) / (1 << f) * float64(probes); float64(fp) > 2*want+20 {
			t.Errorf("n=%d: %d of %d absent probes hit, want about %.0f", n, fp, probes, want)
		}
	}
}

// BenchmarkFingerprintSet measures the prototype's lookup of an absent
// item against a Bloom layer's test (this package's layer), both built for
// capacity n at error e = 0.5% and holding n items, spread over as many
// such layers as hold 819,200 items (a server holds many users), and the
// memory of each against the Bloom bound at e.
func BenchmarkFingerprintSet(b *testing.B) {
	const e, layers = 0.005, 4096
	for _, n := range []int{200, 2000, 20000} {
		f := uint(math.Ceil(math.Log2(float64(n) / e)))
		count := max(1, layers*200/n) // about the same memory in all
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		sets := make([]*fpSet, count)
		direct := make([]*fpDirect, count)
		blooms := make([][]uint64, count)
		sh := layerShape(uint64(n), e)
		l := layer{slice: uint32(sh.slice), k: sh.k, cap: uint32(n)}
		for i := range sets {
			fps := make([]uint64, n)
			blooms[i] = make([]uint64, slabWords(l.bits())+1)
			for j := range fps {
				h := Hash{Lo: rng.Uint64(), Hi: rng.Uint64()}
				fps[j] = h.Lo >> (64 - f)
				l.set(blooms[i], h, 0)
			}
			slices.Sort(fps)
			fps = slices.Compact(fps)
			sets[i], direct[i] = newFPSet(fps, f), newFPDirect(fps, f)
		}
		probes := make([]Hash, 1024)
		for i := range probes {
			probes[i] = Hash{Lo: rng.Uint64(), Hi: rng.Uint64()}
		}
		bound := 1.44 * math.Log2(1/e)
		// Each loop is written out, not passed as a function: a call through
		// a func value would add its cost to every lookup measured.
		b.Run(fmt.Sprintf("fingerprints/n=%d", n), func(b *testing.B) {
			hits, i := 0, 0
			for b.Loop() {
				if sets[i%count].contains(probes[i&1023].Lo >> (64 - f)) {
					hits++
				}
				i++
			}
			b.ReportMetric(float64(hits)/float64(i), "hits/op")
			b.ReportMetric(float64(8*sets[0].bytes())/float64(n)/bound, "mem/bound")
		})
		b.Run(fmt.Sprintf("fingerprints-direct/n=%d", n), func(b *testing.B) {
			hits, i := 0, 0
			for b.Loop() {
				if direct[i%count].contains(probes[i&1023].Lo >> (64 - f)) {
					hits++
				}
				i++
			}
			b.ReportMetric(float64(hits)/float64(i), "hits/op")
			b.ReportMetric(float64(8*direct[0].bytes())/float64(n)/bound, "mem/bound")
		})
		b.Run(fmt.Sprintf("fingerprints-grouped/n=%d", n), func(b *testing.B) {
			xs := make([]uint64, 200)
			found := make([]bool, 200)
			hits, i := 0, 0
			for b.Loop() {
				for j := range xs {
					xs[j] = probes[(i+j)&1023].Lo >> (64 - f)
				}
				sets[i%count].containsAll(xs, found)
				for _, ok := range found {
					if ok {
						hits++
					}
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/200, "ns/lookup")
			b.ReportMetric(float64(hits)/float64(200*i), "hits/op")
		})
		b.Run(fmt.Sprintf("bloom/n=%d", n), func(b *testing.B) {
			hits, i := 0, 0
			for b.Loop() {
				if l.test(blooms[i%count], probes[i&1023], 0) {
					hits++
				}
				i++
			}
			b.ReportMetric(float64(hits)/float64(i), "hits/op")
			b.ReportMetric(float64(l.bits())/float64(n)/bound, "mem/bound")
		})
	}
}
