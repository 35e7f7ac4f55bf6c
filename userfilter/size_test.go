package userfilter

import (
	"math"
	"testing"
)

// boundBitsPerItem is the Bloom bound: an optimal Bloom filter sized in
// advance needs 1.44*log2(1/p) bits per item.
func boundBitsPerItem(p float64) float64 { return math.Log2(1/p) / math.Ln2 }

// sizeRatios fills one filter to n items for n log-uniform in [100, 1e5]
// (growing it as it goes) and returns the mean and worst in-memory and
// encoded size against the Bloom bound.
func sizeRatios(tb testing.TB, p Profile, points int) (memMean, memMax, encMean, encMax float64) {
	f := mustNew(tb, p)
	bound := boundBitsPerItem(f.p.FPRate)
	added := 0
	for j := 0; j <= points; j++ {
		n := int(math.Round(math.Pow(10, 2+3*float64(j)/float64(points))))
		for ; added < n; added++ {
			f.Add([]string{itemName(added)}, t0)
		}
		st := f.Stats(t0)
		mem := float64(8*bitsBytes(f)) / float64(st.Items) / bound
		enc := float64(8*st.EncodedBytes) / float64(st.Items) / bound
		memMean += mem
		encMean += enc
		memMax = max(memMax, mem)
		encMax = max(encMax, enc)
	}
	return memMean / float64(points+1), memMax, encMean / float64(points+1), encMax
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
