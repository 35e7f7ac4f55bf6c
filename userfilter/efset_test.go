package userfilter

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEFSetHoldsExactlyItsFingerprints builds sets of every small size and
// some large ones, of narrow and wide fingerprints, and checks each against
// the exact set: every member found, every non-member not, by a lookup that
// selects and by one with the table of bucket starts (efView.index), the
// members read back in order, and the words taken what efWords says.
func TestEFSetHoldsExactlyItsFingerprints(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	sizes := []int{0, 1, 2, 3, 7, 63, 64, 65, 127, 128, 129, 1000, 4097}
	for _, f := range []uint{1, 3, 8, 17, 33, 63, 64} {
		for _, n := range sizes {
			if f < 12 && n > 1<<f {
				n = 1 << f
			}
			fps, in := randomFingerprints(rng, n, f)
			words := efWords(uint64(n), f)
			// A word more on either side, to catch writes outside the set.
			buf := make([]uint64, words+2)
			buf[0], buf[words+1] = 0xdead, 0xbeef
			w := buf[1 : 1+words : 1+words]
			efBuild(w, fps, f)
			if buf[0] != 0xdead || buf[words+1] != 0xbeef {
				t.Fatalf("f=%d n=%d: efBuild wrote outside its %d words", f, n, words)
			}
			if got := efLen(w); got != uint64(n) {
				t.Fatalf("f=%d n=%d: efLen = %d", f, n, got)
			}
			if got := efAppend(nil, w, f); !slices.Equal(got, fps) && !(n == 0 && len(got) == 0) {
				t.Fatalf("f=%d n=%d: efAppend gives %d fingerprints, not the %d built", f, n, len(got), n)
			}
			// n lookups in at most 2n buckets: always indexed, after what
			// the buffer held.
			indexed := newEFView(w, f)
			tbl := indexed.index([]uint32{7}, n)
			if n > 0 && (tbl[0] != 7 || len(tbl) != 1+len(indexed.starts) || uint64(len(indexed.starts)) != indexed.buckets+1) {
				t.Fatalf("f=%d n=%d: index appended %d starts for %d buckets after the buffer's 1", f, n, len(tbl)-1, indexed.buckets)
			}
			check := func(x uint64, want bool) {
				t.Helper()
				if got := efContains(w, x, f); got != want {
					t.Fatalf("f=%d n=%d: efContains(%x) = %v", f, n, x, got)
				}
				if got := indexed.contains(x); got != want {
					t.Fatalf("f=%d n=%d: contains(%x) with the table of starts = %v", f, n, x, got)
				}
			}
			for _, x := range fps {
				check(x, true)
			}
			for range 2000 {
				x := rng.Uint64() >> (64 - f)
				check(x, in[x])
			}
			// Neighbours of members: the lookups that compare most.
			for _, x := range fps[:min(n, 50)] {
				for _, y := range []uint64{x - 1, x + 1} {
					if y < 1<<f || f == 64 {
						check(y, in[y])
					}
				}
			}
		}
	}
}

// TestEFIndexOnlyWhereItPays checks that a view makes its table of bucket
// starts only when the lookups to come are at least a 1/indexMaxBuckets of
// the buckets and the table fits under indexMaxTable with the tables
// before it, and leaves an empty set without one.
func TestEFIndexOnlyWhereItPays(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const f = 20
	fps, _ := randomFingerprints(rng, 1000, f) // 1,024 buckets
	w := make([]uint64, efWords(1000, f))
	efBuild(w, fps, f)
	for _, c := range []struct {
		lookups int
		indexed bool
	}{{1, false}, {1024/indexMaxBuckets - 1, false}, {1024 / indexMaxBuckets, true}, {200, true}} {
		v := newEFView(w, f)
		buf := v.index(nil, c.lookups)
		if got := v.starts != nil; got != c.indexed || len(buf) != len(v.starts) {
			t.Errorf("%d lookups in 1,024 buckets: indexed %v (%d starts appended), want %v", c.lookups, got, len(buf), c.indexed)
		}
	}
	for _, c := range []struct {
		before  int
		indexed bool
	}{{100, true}, {indexMaxTable - 1025, true}, {indexMaxTable - 1024, false}} {
		v := newEFView(w, f)
		buf := v.index(make([]uint32, c.before), 200)
		if got := v.starts != nil; got != c.indexed || len(buf) != c.before+len(v.starts) {
			t.Errorf("1,024 buckets after %d starts: indexed %v (%d appended), want %v", c.before, got, len(buf)-c.before, c.indexed)
		}
	}
	big, _ := randomFingerprints(rng, indexMaxTable/2, f+8) // indexMaxTable buckets
	w = make([]uint64, efWords(uint64(len(big)), f+8))
	efBuild(w, big, f+8)
	if v := newEFView(w, f+8); len(v.index(nil, indexMaxTable)) != 0 {
		t.Errorf("a set of %d buckets made a table past indexMaxTable", v.buckets)
	}
	empty := newEFView([]uint64{0}, f)
	if buf := empty.index(nil, 1000); len(buf) != 0 || empty.starts != nil {
		t.Errorf("an empty set made a table of %d starts", len(buf))
	}
}

// TestSelectInWord checks the broadword select against counting bit by bit.
func TestSelectInWord(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	words := []uint64{1, 1 << 63, ^uint64(0), 0x8000000000000001, 0xff00, 0x0101010101010101}
	for range 5000 {
		words = append(words, rng.Uint64()&rng.Uint64(), rng.Uint64()|rng.Uint64(), rng.Uint64())
	}
	for _, w := range words {
		r := uint64(0)
		for pos := uint64(0); pos < 64; pos++ {
			if w>>pos&1 == 0 {
				continue
			}
			if got := selectInWord(w, r); got != pos {
				t.Fatalf("selectInWord(%#x, %d) = %d, want %d", w, r, got, pos)
			}
			r++
		}
	}
}

// randomFingerprints returns n distinct random fingerprints of f bits,
// sorted, and the set of them.
func randomFingerprints(rng *rand.Rand, n int, f uint) ([]uint64, map[uint64]bool) {
	in := map[uint64]bool{}
	for len(in) < n {
		in[rng.Uint64()>>(64-f)] = true
	}
	fps := make([]uint64, 0, n)
	for x := range in {
		fps = append(fps, x)
	}
	slices.Sort(fps)
	return fps, in
}

// TestSearchUniform checks searchUniform against a binary search on
// uniform, crowded and tiny sorted sets, for members, their neighbours and
// the values past both ends.
func TestSearchUniform(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 17))
	sets := [][]uint64{{}, {5}, {0, ^uint64(0)}}
	for _, n := range []int{2, 3, 10, 100, 5000} {
		fps, _ := randomFingerprints(rng, n, 40)
		sets = append(sets, fps)
		crowded := make([]uint64, n) // all but one in a narrow range: interpolation guesses badly
		for i := range crowded {
			crowded[i] = uint64(i) * 3
		}
		crowded[n-1] = 1 << 50
		sets = append(sets, crowded)
	}
	for _, s := range sets {
		probes := []uint64{0, 1, ^uint64(0)}
		for _, x := range s {
			probes = append(probes, x, x-1, x+1)
		}
		for range 200 {
			probes = append(probes, rng.Uint64()>>24)
		}
		for _, x := range probes {
			_, want := slices.BinarySearch(s, x)
			if got := searchUniform(s, x); got != want {
				t.Fatalf("searchUniform(%d values, %d) = %v, want %v", len(s), x, got, want)
			}
		}
	}
}
