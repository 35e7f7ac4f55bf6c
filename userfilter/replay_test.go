package userfilter

import (
	"bytes"
	"fmt"
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
					g.AddHashes(record, now, now, 0)
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
