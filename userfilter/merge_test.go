package userfilter

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func merged(t *testing.T, fs ...*Filter) *Filter {
	t.Helper()
	out := fs[0].Clone()
	for _, f := range fs[1:] {
		if err := out.Merge(f); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// mergeInputs returns three filters of one profile with overlapping items,
// different sizes and, for windowed profiles, different buckets.
func mergeInputs(t *testing.T, p Profile) (a, b, c *Filter, itemsOf [3][]string) {
	fs := [3]*Filter{mustNew(t, p), mustNew(t, p), mustNew(t, p)}
	for i, n := range []int{50, 3000, 700} {
		its := append(items(fmt.Sprintf("m%d", i), n), items("shared", 100)...)
		fs[i].Add(its, t0.Add(time.Duration(i)*25*time.Hour))
		itemsOf[i] = its
	}
	return fs[0], fs[1], fs[2], itemsOf
}

func TestMergeIsCommutativeAssociativeIdempotent(t *testing.T) {
	for name, p := range profiles() {
		t.Run(name, func(t *testing.T) {
			a, b, c, _ := mergeInputs(t, p)
			if !bytes.Equal(encode(t, merged(t, a, b)), encode(t, merged(t, b, a))) {
				t.Fatal("a+b != b+a")
			}
			left := merged(t, merged(t, a, b), c)
			right := merged(t, a, merged(t, b, c))
			if !bytes.Equal(encode(t, left), encode(t, right)) {
				t.Fatal("(a+b)+c != a+(b+c)")
			}
			ab := merged(t, a, b)
			if !bytes.Equal(encode(t, merged(t, ab, ab)), encode(t, ab)) || !bytes.Equal(encode(t, merged(t, a, a)), encode(t, a)) {
				t.Fatal("merge is not idempotent")
			}
		})
	}
}

func TestMergeLosesNoItem(t *testing.T) {
	for name, p := range profiles() {
		t.Run(name, func(t *testing.T) {
			a, b, c, its := mergeInputs(t, p)
			m := merged(t, a, b, c)
			now := t0.Add(50 * time.Hour)
			for i, src := range []*Filter{a, b, c} {
				for _, it := range its[i] {
					if src.Test(it, now) && !m.Test(it, now) {
						t.Fatalf("%q seen in input %d is unseen after merge", it, i)
					}
				}
			}
		})
	}
}

// A merged filter was first seen when the earlier of the two was and last
// seen when the later of the two was, whichever is merged into which.
func TestMergeKeepsTheEarliestFirstSeenAndTheLatestLastSeen(t *testing.T) {
	early, late := mustNew(t, DefaultProfile()), mustNew(t, DefaultProfile())
	early.Add([]string{"a"}, t0)
	early.Add([]string{"b"}, t0.Add(time.Hour))
	late.Add([]string{"c"}, t0.Add(30*time.Minute))
	late.Add([]string{"d"}, t0.Add(2*time.Hour))
	for name, m := range map[string]*Filter{"early+late": merged(t, early, late), "late+early": merged(t, late, early)} {
		if !m.FirstSeen().Equal(t0) || !m.LastSeen().Equal(t0.Add(2*time.Hour)) {
			t.Errorf("%s: first seen %v, last seen %v; want %v and %v", name, m.FirstSeen(), m.LastSeen(), t0, t0.Add(2*time.Hour))
		}
	}
}

func TestMergeRefusesOtherParameters(t *testing.T) {
	a := mustNew(t, DefaultProfile())
	b := mustNew(t, Profile{FPRate: 0.001})
	a.Add([]string{"x"}, t0)
	before := encode(t, a)
	err := a.Merge(b)
	if !errors.Is(err, ErrIncompatible) {
		t.Fatalf("err = %v, want ErrIncompatible", err)
	}
	// The error names what differs, as a namespaces file does.
	if want := "fp_rate 0.01 against 0.001"; !strings.HasSuffix(err.Error(), ": "+want) {
		t.Errorf("err = %q, want it to end in %q", err, want)
	}
	if !bytes.Equal(before, encode(t, a)) {
		t.Fatal("failed merge changed the filter")
	}
}

// A window or a granularity that differs is written as a namespaces file
// takes it, so that the operator reads the values of the file they wrote.
func TestMergeNamesDurationsAsANamespacesFile(t *testing.T) {
	a := mustNew(t, Profile{Window: 7 * 24 * time.Hour})
	b := mustNew(t, Profile{Window: 30 * 24 * time.Hour, Granularity: 180 * time.Hour})
	c := mustNew(t, DefaultProfile())
	for _, tc := range []struct {
		into, from *Filter
		want       string
	}{
		{a, b, "window 7d against 30d, granularity 1.75d against 7.5d"},
		{c, a, "window 0 against 7d, granularity 0 against 1.75d"},
	} {
		err := tc.into.Merge(tc.from)
		if !errors.Is(err, ErrIncompatible) || !strings.HasSuffix(err.Error(), ": "+tc.want) {
			t.Errorf("err = %v, want ErrIncompatible ending in %q", err, tc.want)
		}
	}
}

func TestFormatDurationReadsAsANamespacesFile(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0"},
		{24 * time.Hour, "1d"},
		{30 * 24 * time.Hour, "30d"},
		{180 * time.Hour, "7.5d"},
		{42 * time.Hour, "1.75d"},
		{3001 * 864 * time.Second, "30.01d"},
		{25 * time.Hour, "25h"},
		{6 * time.Hour, "6h"},
		{90 * time.Minute, "90m"},
		{1500 * time.Millisecond, "1.5s"},
	} {
		if got := FormatDuration(tc.d); got != tc.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestALaterStateCoversAnEarlierOne(t *testing.T) {
	for name, p := range profiles() {
		t.Run(name, func(t *testing.T) {
			earlier := mustNew(t, p)
			earlier.Add(items("early", 500), t0)
			later := earlier.Clone()
			added, _ := later.Add(items("late", 3000), t0.Add(30*time.Minute))
			if !later.Covers(earlier) || !earlier.Covers(earlier) {
				t.Fatal("a filter does not cover an earlier state of itself")
			}
			// Covering means the merge changes nothing.
			if !bytes.Equal(encode(t, merged(t, later, earlier)), encode(t, later)) {
				t.Fatal("merging a covered filter changed the result")
			}
			if added > 0 && earlier.Covers(later) {
				t.Fatal("an earlier state covers a later one with more items")
			}
		})
	}
}

func TestAFilterWithAnItemOfItsOwnIsNotCovered(t *testing.T) {
	for name, p := range profiles() {
		t.Run(name, func(t *testing.T) {
			a, b, c, _ := mergeInputs(t, p)
			for _, pair := range [][2]*Filter{{a, b}, {b, a}, {b, c}, {c, b}} {
				if pair[0].Covers(pair[1]) {
					t.Fatal("a filter covers another holding items it lacks")
				}
			}
			// One bit more than f is enough not to be covered.
			f := mustNew(t, p)
			f.Add(items("x", 40), t0)
			g := f.Clone()
			g.Add([]string{"one more"}, t0)
			if f.Covers(g) || !g.Covers(f) {
				t.Fatalf("covers: f>=g %v, g>=f %v", f.Covers(g), g.Covers(f))
			}
			if f.Covers(mustNew(t, Profile{FPRate: 0.05})) {
				t.Fatal("a filter covers one of other parameters")
			}
		})
	}
}
