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

// collidingPair returns two distinct items whose fingerprints of fb bits
// are equal.
func collidingPair(t *testing.T, prefix string, fb uint8) (string, string) {
	seen := map[uint64]string{}
	for i := 0; i < 1<<22; i++ {
		it := prefix + itoa(i)
		x := HashItem(it).Hi >> (64 - fb)
		if other, ok := seen[x]; ok {
			return other, it
		}
		seen[x] = it
	}
	t.Fatal("no colliding pair")
	return "", ""
}

// Commit does not test again what Select tested, so two candidates of one
// call that share a fingerprint in the newest set must still go in once:
// with the set taking items in place (under directMax) and with its
// buffer (past it).
func TestOneCallsItemsSharingAFingerprintAreRecordedOnce(t *testing.T) {
	for _, kind := range []Kind{KindStaged, KindCompact} {
		for _, before := range []int{1, 3, 1500} {
			f := mustNew(t, Profile{Kind: kind, InitialCapacity: 4096})
			f.Add(items("pre", before), t0)
			fb := uint8(f.gens[0].layers[0].slice)
			a, b := collidingPair(t, "c", fb)
			held := f.Stats(t0).Items
			var s Scratch
			res := f.FilterAndRecord([]string{a, b}, 0, RecordReturned, t0, &s)
			if len(s.Unseen) != 2 || res.Recorded != 1 || len(s.Recorded) != 1 {
				t.Fatalf("%v after %d: unseen %v, recorded %d (%d hashes), want both unseen and one recorded", kind, before, s.Unseen, res.Recorded, len(s.Recorded))
			}
			if got := f.Stats(t0).Items; got != held+1 {
				t.Fatalf("%v after %d: %d items, want %d", kind, before, got, held+1)
			}
			if _, err := Decode(encode(t, f)); err != nil {
				t.Fatalf("%v after %d: %v", kind, before, err)
			}
			if !f.Test(a, t0) || !f.Test(b, t0) {
				t.Fatalf("%v after %d: an item of the call tests unseen", kind, before)
			}
		}
	}
}
