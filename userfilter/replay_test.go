package userfilter

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"
)

// A filter loaded again is its stored bytes plus its journal replayed
// (AddHashes of each call's Scratch.ToRecord). That must give back the
// filter the calls made, bit for bit: an item a call found seen by a false
// positive was not recorded, and is seen afterwards only if the replayed
// filter has the same false positive. Calls of thousands of items, which
// fill and seal sets within a call, are where a call's adds and their
// replay once parted: the call added, untested, an item that the set
// sealed during it made a false positive, and the replay, testing it, did
// not.
func TestJournalReplayRebuildsTheFilterTheCallsMade(t *testing.T) {
	profiles := map[string]Profile{
		"bloom":   {Kind: KindBloom},
		"compact": {Kind: KindCompact},
		"staged":  {Kind: KindStaged},
		"window":  {Kind: KindStaged, Window: 72 * time.Hour, Granularity: 24 * time.Hour},
	}
	modes := map[string]Mode{"all": RecordAll, "returned": RecordReturned}
	for pname, p := range profiles {
		for mname, mode := range modes {
			t.Run(pname+"/"+mname, func(t *testing.T) {
				f := mustNew(t, p.WithDefaults())
				var s Scratch
				falsePositives := 0
				for call := range 24 {
					now := t0.Add(time.Duration(call) * 6 * time.Hour)
					before, err := f.MarshalBinary()
					if err != nil {
						t.Fatal(err)
					}
					// New items, and some of the last call's again.
					batch := items(fmt.Sprintf("c%d-", call), 2500)
					if call > 0 {
						batch = append(batch, items(fmt.Sprintf("c%d-", call-1), 100)...)
					}
					res := f.Select(batch, 0, mode, now, &s)
					record := append([]Hash(nil), s.ToRecord...)
					f.Commit(now, &s, 0)
					falsePositives += res.SeenCount

					g, err := Decode(before)
					if err != nil {
						t.Fatal(err)
					}
					g.Expire(now) // as a load does before the replay
					g.AddHashes(record, now, now, 0, -1)
					want, _ := f.MarshalBinary()
					got, _ := g.MarshalBinary()
					if !bytes.Equal(got, want) {
						t.Fatalf("call %d: the filter replayed from its journal is not the one the call made (%d bytes, want %d; items %d, want %d)",
							call, len(got), len(want), g.Stats(now).Items, f.Stats(now).Items)
					}
					for _, it := range batch {
						if f.Test(it, now) != g.Test(it, now) {
							t.Fatalf("call %d: %s tests %v in the filter, %v replayed", call, it, f.Test(it, now), g.Test(it, now))
						}
					}
				}
				if falsePositives == 0 {
					t.Fatal("no call met a seen item: nothing was at stake")
				}
			})
		}
	}
}

// A journal record expires a window and a bucket after its call, so a
// filter can be rebuilt from a later call's record without an earlier one
// whose items that call's cap counted (they left the window meanwhile).
// Replayed with the room the cap left the call (Room, which the record
// keeps), it lets in what the call let in; with the cap counted from what
// the rebuilt filter holds, it let in the 20 items the second call
// refused, and then refused 10 of the 50 the third call recorded. Replayed
// twice, a record lets in nothing more.
func TestReplayLetsInTheRoomTheCapLeftTheCall(t *testing.T) {
	p := Profile{Window: 3 * time.Hour, Granularity: time.Hour, MaxItems: 100}
	f := mustNew(t, p) // the calls
	g := mustNew(t, p) // their journal but the first call's record
	var s Scratch
	var all []string
	type record struct {
		at   time.Time
		hs   []Hash
		room int
	}
	var recs []record
	for i, c := range []struct {
		at          time.Duration
		n, recorded int
	}{{0, 60, 60}, {time.Hour, 60, 40}, {4 * time.Hour, 50, 50}} {
		now := t0.Add(c.at)
		batch := items(fmt.Sprintf("c%d-", i), c.n)
		all = append(all, batch...)
		f.Select(batch, 0, RecordAll, now, &s)
		room := f.Room(now)
		if n, _ := f.Commit(now, &s, 0); n != c.recorded {
			t.Fatalf("call %d recorded %d, want %d", i, n, c.recorded)
		}
		if i > 0 {
			recs = append(recs, record{now, slices.Clone(s.ToRecord), room})
			g.Expire(now) // as a load does before each record
			if n, _ := g.AddHashes(s.ToRecord, now, now, 0, room); n != c.recorded {
				t.Errorf("the replay of call %d let in %d items, the call %d", i, n, c.recorded)
			}
		}
	}
	// The records replayed again, after the others (a backup's journal
	// merged back in): their items take the room they took, and the items
	// their calls refused stay out.
	for i, r := range recs {
		if n, _ := g.AddHashes(r.hs, r.at, r.at, 0, r.room); n != 0 {
			t.Errorf("the record of call %d replayed again let in %d items", i+1, n)
		}
	}
	end := t0.Add(4 * time.Hour)
	g.Expire(end)
	for _, it := range all {
		if f.Test(it, end) != g.Test(it, end) {
			t.Fatalf("%s tests %v in the filter, %v replayed", it, f.Test(it, end), g.Test(it, end))
		}
	}
	if a, b := f.Stats(end).Items, g.Stats(end).Items; a != b {
		t.Fatalf("the filter holds %d items, the replay %d", a, b)
	}
	if r := mustNew(t, Profile{}).Room(end); r != -1 {
		t.Fatalf("the room of a filter without a cap is %d, want -1", r)
	}
	if r := f.Room(end); r != 10 {
		t.Fatalf("the room left by 90 items under a cap of 100 is %d, want 10", r)
	}
}
