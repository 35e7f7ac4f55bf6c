package userfilter

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// fpDirect is a second prototype of the same layer that finds a bucket
// without a select: n/4 to n/2 buckets (two to four fingerprints each),
// and for every bucket the index of its first fingerprint, packed in
// bits.Len(n) bits, so a lookup reads two neighbouring offsets and then
// the bucket's few low parts. It pays a few bits an item more than an efset
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

// TestFPDirectPrototype checks the prototype the benchmark measures beside
// efsets: every member is found, and absent fingerprints test present at
// about n/2^f.
func TestFPDirectPrototype(t *testing.T) {
	for _, n := range []int{1, 10, 200, 5000} {
		const f = 20
		rng := rand.New(rand.NewPCG(uint64(n), 9))
		fps, in := randomFingerprints(rng, n, f)
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
		fp, probes := 0, 200_000
		for range probes {
			x := rng.Uint64() >> (64 - f)
			if d.contains(x) != in[x] {
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

// BenchmarkFingerprintSet measures an efset's lookup (and fpDirect's) of an absent
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
		sets := make([][]uint64, count)
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
			sets[i], direct[i] = make([]uint64, efWords(uint64(len(fps)), f)), newFPDirect(fps, f)
			efBuild(sets[i], fps, f)
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
				if efContains(sets[i%count], probes[i&1023].Lo>>(64-f), f) {
					hits++
				}
				i++
			}
			b.ReportMetric(float64(hits)/float64(i), "hits/op")
			b.ReportMetric(float64(64*len(sets[0]))/float64(n)/bound, "mem/bound")
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
