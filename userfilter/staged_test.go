package userfilter

import (
	"math"
	"testing"
)

// A staged filter's full layers are Bloom layers and only its newest holds
// fingerprints; items of every layer stay seen across the sealing.
func TestStagedSealsFullLayers(t *testing.T) {
	f := mustNew(t, Profile{Kind: KindStaged, InitialCapacity: 100, Growth: 2})
	its := items("s", 1000) // layers of 100, 200, 400, then 300 of 800
	f.Add(its, t0)
	st := f.Stats(t0)
	ls := st.Generations[0].Layers
	if len(ls) != 4 {
		t.Fatalf("%d layers, want 4", len(ls))
	}
	for i, l := range ls[:3] {
		if l.Hashes == 0 || l.Items != l.Capacity || l.BitsSet == 0 {
			t.Fatalf("layer %d is not a full Bloom layer: %+v", i, l)
		}
	}
	// 300 items less the few that tested seen (false positives) on the way.
	if l := ls[3]; l.Hashes != 0 || l.Items < 290 || l.Items > 300 || l.Capacity != 800 {
		t.Fatalf("newest layer: %+v, want about 300 fingerprints of 800", l)
	}
	for i, ok := range f.Check(its, t0, nil) {
		if !ok {
			t.Fatalf("%q unseen after its layer was sealed", its[i])
		}
	}
	if st.FPRate > 0.01 {
		t.Fatalf("estimated false-positive rate %v over the target", st.FPRate)
	}
}

// The encoding is never larger than the filter in memory (MemoryBytes), for
// every kind, at sizes log-uniform from 1 to 1e5 items.
func TestEncodedNoLargerThanInMemory(t *testing.T) {
	for name, p := range kinds {
		f := mustNew(t, p)
		added := 0
		for j := 0; j <= 50; j++ {
			n := int(math.Round(math.Pow(10, 5*float64(j)/50)))
			for ; added < n; added++ {
				f.Add([]string{itemName(added)}, t0)
			}
			if st := f.Stats(t0); st.EncodedBytes > st.MemoryBytes {
				t.Fatalf("%s at %d items: %d bytes encoded, %d in memory", name, n, st.EncodedBytes, st.MemoryBytes)
			}
		}
	}
}
