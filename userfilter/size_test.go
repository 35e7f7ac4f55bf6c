package userfilter

import (
	"math"
	"testing"
)

// boundBitsPerItem is the Bloom bound: an optimal Bloom filter sized in
// advance needs 1.44*log2(1/p) bits per item.
func boundBitsPerItem(p float64) float64 { return math.Log2(1/p) / math.Ln2 }

// sizeRatios fills one filter to n items for n log-uniform in [100, 1e5]
// (growing it as it goes) and returns, against the Bloom bound, the mean
// and worst of: the bits in use (the slabs' words in use), the memory
// allocated for them (the slabs' capacity, which grows ahead of a compact
// or staged layer by an eighth at a time) and the encoding.
func sizeRatios(tb testing.TB, p Profile, points int) (mem, alloc, enc ratio) {
	f := mustNew(tb, p)
	bound := boundBitsPerItem(f.p.FPRate)
	added := 0
	for j := 0; j <= points; j++ {
		n := int(math.Round(math.Pow(10, 2+3*float64(j)/float64(points))))
		for ; added < n; added++ {
			f.Add([]string{itemName(added)}, t0)
		}
		st := f.Stats(t0)
		per := func(bytes int) float64 { return float64(8*bytes) / float64(st.Items) / bound }
		mem.add(per(bitsBytes(f)))
		alloc.add(per(slabBytes(f)))
		enc.add(per(st.EncodedBytes))
	}
	return mem, alloc, enc
}

// ratio is the mean and the worst of a series.
type ratio struct {
	sum, Max float64
	n        int
}

func (r *ratio) add(x float64) { r.sum, r.Max, r.n = r.sum+x, max(r.Max, x), r.n+1 }

// Mean is the series' mean.
func (r ratio) Mean() float64 { return r.sum / float64(r.n) }

// slabBytes is the bytes allocated for the filter's bit arrays.
func slabBytes(f *Filter) int {
	n := 0
	for _, g := range f.gens {
		n += 8 * cap(g.slab)
	}
	return n
}

// bitsBytes is the bytes of the filter's bit arrays.
func bitsBytes(f *Filter) int {
	n := 0
	for _, g := range f.gens {
		n += 8 * len(g.slab)
	}
	return n
}

func itemName(i int) string { return "item-" + itoa(i) }

func itoa(i int) string {
	var b [20]byte
	pos := len(b)
	for {
		pos--
		b[pos] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[pos:])
		}
	}
}
