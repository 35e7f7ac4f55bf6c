package userfilter

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// layerFP is one fingerprint in one layer of one time bucket.
type layerFP struct {
	bucket int64
	layer  int
	fp     uint64
}

// fingerprintsOf returns every (bucket, layer, fingerprint) item h has in
// f's layers, whether or not the layer holds it.
func fingerprintsOf(f *Filter, h Hash) []layerFP {
	var out []layerFP
	for gi := range f.gens {
		g := &f.gens[gi]
		for i := range g.layers {
			out = append(out, layerFP{g.bucket, i, g.layers[i].fingerprint(h)})
		}
	}
	return out
}

// TestForgetMakesItemsUnseenAndKeepsTheRest forgets a random part of a
// compact filter's items (with absent items and repeats among them) at
// sizes from one in-place set to several layers, and checks that every
// forgotten item tests unseen, that the count is of the distinct items
// that tested seen, and that a kept item tests unseen only where it shares
// a fingerprint, in a layer, with a forgotten one.
func TestForgetMakesItemsUnseenAndKeepsTheRest(t *testing.T) {
	for _, n := range []int{10, 700, 5000, 30_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := mustNew(t, Profile{Kind: KindCompact})
			rng := rand.New(rand.NewPCG(uint64(n), 7))
			items := make([]string, n)
			for i := range items {
				items[i] = fmt.Sprintf("it-%x", rng.Uint64())
			}
			var s Scratch
			for i := 0; i < n; i += 20 { // the one call leaves the newest layer's buffer in use
				f.FilterAndRecord(items[i:min(i+20, n)], 0, RecordReturned, t0, &s)
			}
			var forget, kept []string
			for _, it := range items {
				if rng.IntN(3) == 0 {
					forget = append(forget, it)
				} else {
					kept = append(kept, it)
				}
			}
			forget = append(forget, "never-seen-1", "never-seen-2")
			if len(forget) > 2 {
				forget = append(forget, forget[0]) // a repeat counts once
			}
			wasSeen := map[string]bool{}
			for i, ok := range f.Check(forget, t0, nil) {
				if ok {
					wasSeen[forget[i]] = true
				}
			}
			dropped := map[layerFP]bool{}
			for _, it := range forget {
				for _, x := range fingerprintsOf(f, HashItem(it)) {
					dropped[x] = true
				}
			}
			before := f.Stats(t0).Items

			got, err := f.Forget(forget, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got != len(wasSeen) {
				t.Errorf("Forget = %d, want the %d distinct items that tested seen", got, len(wasSeen))
			}
			for i, ok := range f.Check(forget, t0, nil) {
				if ok {
					t.Fatalf("forgotten item %q tests seen", forget[i])
				}
			}
			lost := 0
			for i, ok := range f.Check(kept, t0, nil) {
				if ok {
					continue
				}
				lost++
				shared := false
				for _, x := range fingerprintsOf(f, HashItem(kept[i])) {
					shared = shared || dropped[x]
				}
				if !shared {
					t.Fatalf("kept item %q tests unseen and shares no fingerprint with a forgotten one", kept[i])
				}
			}
			// Each forgotten item takes out its fingerprint, or one it
			// shares with a kept item (counted in lost), or, rarely, one
			// in a second layer too.
			after := f.Stats(t0).Items
			if removed := int(before - after); removed < got-got/50-1 || removed > got+lost+got/50+1 {
				t.Errorf("holds %d items after forgetting %d (and %d alike) of %d", after, got, lost, before)
			}
		})
	}
}

// compactHolding returns a compact filter holding items "i0", "i1", ...
// up to n, and the items.
func compactHolding(t testing.TB, n int) (*Filter, []string) {
	f := mustNew(t, Profile{Kind: KindCompact})
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprint("i", i)
	}
	f.Add(items, t0)
	return f, items
}

// TestForgetThenRecordAgain: a forgotten item is recorded anew by the one
// call, and the filter encodes and decodes to the same answers.
func TestForgetThenRecordAgain(t *testing.T) {
	f, items := compactHolding(t, 2000)
	if n, err := f.Forget(items[100:110], t0); err != nil || n != 10 {
		t.Fatalf("Forget = %d, %v; want 10", n, err)
	}
	var s Scratch
	res := f.FilterAndRecord(items[95:115], 0, RecordReturned, t0, &s)
	if len(s.Unseen) != 10 || res.SeenCount != 10 || s.Unseen[0] != 5 || res.Recorded != 10 {
		t.Fatalf("after forgetting 10 of 20: unseen %v, %+v", s.Unseen, res)
	}
	raw, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range g.Check(items, t0, nil) {
		if !ok {
			t.Fatalf("item %d unseen after the round trip", i)
		}
	}
}

// TestForgetShrinksTheFilter: forgetting half the items of a compact
// filter gives back memory and disk.
func TestForgetShrinksTheFilter(t *testing.T) {
	f, items := compactHolding(t, 10_000)
	mem, enc := f.MemoryBytes(), f.Stats(t0).EncodedBytes
	if _, err := f.Forget(items[:5000], t0); err != nil {
		t.Fatal(err)
	}
	if m, e := f.MemoryBytes(), f.Stats(t0).EncodedBytes; m >= mem*3/4 || e >= enc*3/4 {
		t.Errorf("after forgetting half: %d B in memory (was %d), %d B encoded (was %d)", m, mem, e, enc)
	}
}

// TestForgetReachesEveryTimeBucket: an item recorded in two buckets of a
// window is forgotten in both.
func TestForgetReachesEveryTimeBucket(t *testing.T) {
	f := mustNew(t, Profile{Kind: KindCompact, Window: 72 * time.Hour, Granularity: 24 * time.Hour})
	f.Add([]string{"a", "b"}, t0)
	t1 := t0.Add(25 * time.Hour)
	var s Scratch
	f.FilterAndRecord([]string{"a", "c"}, 0, RecordAll, t1, &s) // "a" again, in the newer bucket
	if n, err := f.Forget([]string{"a"}, t1); err != nil || n != 1 {
		t.Fatalf("Forget = %d, %v; want 1", n, err)
	}
	if got := f.Check([]string{"a", "b", "c"}, t1, nil); got[0] || !got[1] || !got[2] {
		t.Fatalf("seen a, b, c = %v; want false, true, true", got)
	}
}

// TestForgetIsUnsupportedForBloom: a Bloom filter refuses and is unchanged.
func TestForgetIsUnsupportedForBloom(t *testing.T) {
	f := mustNew(t, Profile{})
	f.Add([]string{"a", "b"}, t0)
	before, _ := f.MarshalBinary()
	if _, err := f.Forget([]string{"a"}, t0); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Forget on a Bloom filter: %v, want ErrUnsupported", err)
	}
	if after, _ := f.MarshalBinary(); !bytes.Equal(before, after) {
		t.Fatal("a refused Forget changed the filter")
	}
	if KindBloom.CanForget() || !KindCompact.CanForget() {
		t.Fatal("CanForget: want compact only")
	}
}
