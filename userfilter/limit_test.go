package userfilter

import (
	"fmt"
	"testing"
	"time"
)

// An encoding limit holds every kind, windowed or not, under it from the
// first item to saturation: a filter that must be written whole as one
// value never outgrows what the store keeps.
func TestEncodingLimitHoldsTheEncodingUnderIt(t *testing.T) {
	const limit = 48 << 10
	for name, p := range map[string]Profile{
		"staged":         DefaultProfile(),
		"bloom":          {Kind: KindBloom},
		"compact":        {Kind: KindCompact},
		"staged-p0.1%":   {FPRate: 0.001},
		"staged-window":  {Window: 48 * time.Hour, Granularity: time.Hour},
		"bloom-window":   {Kind: KindBloom, Window: 48 * time.Hour, Granularity: time.Hour},
		"compact-window": {Kind: KindCompact, Window: 48 * time.Hour, Granularity: time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			f := mustNew(t, p)
			var s Scratch
			now := t0
			var recorded []string
			saturated := false
			for call := 0; call < 400 && !saturated; call++ {
				if p.Window > 0 {
					now = now.Add(20 * time.Minute) // a new bucket every third call
				}
				batch := items(fmt.Sprintf("c%d", call), 500)
				f.Select(batch, 0, RecordReturned, now, &s)
				want, full := f.Expect(now, &s, limit)
				if full != f.Full(now, limit) && len(s.ToRecord) > 0 && want == 0 {
					t.Fatalf("call %d: Expect says saturated %v, Full %v", call, full, f.Full(now, limit))
				}
				var n int
				n, saturated = f.Commit(now, &s, limit)
				for _, i := range s.Unseen[:min(n, len(s.Unseen))] {
					recorded = append(recorded, batch[i])
				}
				enc, err := f.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				if len(enc) > limit {
					t.Fatalf("call %d: encoding of %d bytes, over the limit of %d", call, len(enc), limit)
				}
			}
			if !saturated {
				t.Fatal("400 calls of 500 items never saturated")
			}
			if !f.Full(now, limit) {
				t.Error("saturated, but Full says items still fit")
			}
			// A layer opens only if the whole of it fits, and at growth 4
			// the newest is about three quarters of a filter.
			enc, _ := f.MarshalBinary()
			if len(enc) < limit/5 {
				t.Errorf("saturated at %d bytes, under a fifth of the limit of %d", len(enc), limit)
			}
			// Nothing more goes in, and nothing recorded is lost.
			f.Select(items("late", 100), 0, RecordReturned, now, &s)
			if n, sat := f.Commit(now, &s, limit); n != 0 || !sat {
				t.Errorf("a call past saturation recorded %d (saturated %v), want 0 (true)", n, sat)
			}
			if p.Window == 0 {
				for _, it := range recorded {
					if !f.Test(it, now) {
						t.Fatalf("%s forgotten at saturation", it)
					}
				}
			}
			if f.Full(now, 0) {
				t.Error("without a limit the filter still grows, but Full says it is full")
			}
		})
	}
}

// A journal replayed with the limit it was recorded under saturates where
// the calls did: every item a call recorded is in the replayed filter.
func TestAddHashesHeldToTheLimitReplaysTheCalls(t *testing.T) {
	const limit = 32 << 10
	f, g := mustNew(t, DefaultProfile()), mustNew(t, DefaultProfile())
	var s Scratch
	for call := 0; call < 200; call++ {
		f.Select(items(fmt.Sprintf("c%d", call), 500), 0, RecordReturned, t0, &s)
		f.Commit(t0, &s, limit)
		g.AddHashes(s.ToRecord, t0, t0, limit, -1)
	}
	if a, b := f.Stats(t0).Items, g.Stats(t0).Items; a != b {
		t.Fatalf("calls recorded %d items, their replay %d", a, b)
	}
	if !g.Full(t0, limit) {
		t.Fatal("the replayed filter is not full")
	}
	if n, sat := g.AddHashes([]Hash{HashItem("more")}, t0, t0, limit, -1); n != 0 || !sat {
		t.Fatalf("replay past the limit added %d (saturated %v)", n, sat)
	}
}

// A filter larger than the limit (imported, merged) is full for it.
func TestFullForAFilterPastTheLimit(t *testing.T) {
	f := mustNew(t, DefaultProfile())
	f.Add(items("i", 20000), t0)
	enc, _ := f.MarshalBinary()
	if !f.Full(t0, len(enc)/2) {
		t.Fatalf("a filter of %d bytes is not full for a limit of %d", len(enc), len(enc)/2)
	}
	if f.Full(t0, 4*len(enc)) {
		t.Fatalf("a filter of %d bytes is full for a limit of %d", len(enc), 4*len(enc))
	}
}

// A set that opens in a window's newest bucket is counted at its capacity
// against the other buckets, which hold what they hold: filling it must
// not take the filter past maxBitsTotal, the most Decode reads back, as
// counting its first word alone let it (an old bucket of almost
// maxBitsTotal bits beside a new one).
func TestANewBucketsSetCountsWholeAgainstTheOthers(t *testing.T) {
	for name, p := range map[string]Profile{
		"staged":  {Window: 30 * 24 * time.Hour},
		"compact": {Kind: KindCompact, Window: 30 * 24 * time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			for _, over := range []bool{false, true} {
				f := mustNew(t, p)
				f.Add([]string{"old"}, t0)
				now := t0.Add(8 * 24 * time.Hour)     // the next bucket, which has no layer yet
				first, _ := f.p.compactLayer(0, 0, 0) // not from the tables: the profile may not be shared
				if f.p.Kind == KindStaged {
					first, _ = f.p.stagedLayer(0, 0, 0)
				}
				// The old bucket stands for one of almost maxBitsTotal bits: a
				// Bloom layer as large as what is left, never read here.
				old := uint64(maxBitsTotal) - first.fullBits()
				if over {
					old++
				}
				g := &f.gens[0]
				g.layers, g.n = []layer{{slice: uint32(old), k: 1, cap: 1}}, 1
				if got := f.Full(now, 0); got != over {
					t.Fatalf("old bucket of %d bits, a set of %d: Full %v, want %v", old, first.fullBits(), got, over)
				}
				if over {
					if n, sat := f.Add([]string{"new"}, now); n != 0 || !sat {
						t.Fatalf("added %d (saturated %v) past maxBitsTotal", n, sat)
					}
				}
			}
		})
	}
}
