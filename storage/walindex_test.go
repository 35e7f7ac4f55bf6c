package storage

import (
	"fmt"
	"slices"
	"testing"
)

func indexed(x *walIndex, key string) []uint64 {
	var seqs []uint64
	for r := range x.records([]byte(key)) {
		seqs = append(seqs, r.seq)
	}
	return seqs
}

// The index keeps each user's records in the order added, drops exactly
// the ones asked for, reuses a dropped user's entry and shrinks once a
// burst of users is gone.
func TestWALIndexKeepsEachUsersRecords(t *testing.T) {
	x := newWALIndex()
	seg := &segment{id: 1}
	add := func(key string, seq uint64) { x.add([]byte(key), walRec{seq: seq, seg: seg}) }
	add("a", 1)
	add("b", 2)
	add("a", 3)
	add("a", 4)
	if got := indexed(&x, "a"); !slices.Equal(got, []uint64{1, 3, 4}) {
		t.Fatalf("a: %v, want [1 3 4]", got)
	}
	if got := indexed(&x, "b"); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("b: %v, want [2]", got)
	}
	x.drop([]byte("a"), func(r walRec) bool { return r.seq == 1 || r.seq == 4 })
	if got := indexed(&x, "a"); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("a after dropping 1 and 4: %v, want [3]", got)
	}
	add("a", 5)
	x.drop([]byte("a"), func(r walRec) bool { return r.seq == 3 })
	if got := indexed(&x, "a"); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("a after dropping 3: %v, want [5]", got)
	}
	x.drop([]byte("b"), func(walRec) bool { return true })
	if got := indexed(&x, "b"); got != nil || x.len() != 1 {
		t.Fatalf("b after dropping all: %v, %d users indexed, want none and 1", got, x.len())
	}
	add("c", 6) // takes b's entry
	if len(x.users) != 2 {
		t.Errorf("%d entries for 2 users after one left", len(x.users))
	}
	if got := indexed(&x, "c"); !slices.Equal(got, []uint64{6}) {
		t.Fatalf("c: %v, want [6]", got)
	}
	if got := indexed(&x, "a"); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("a after c came: %v, want [5]", got)
	}

	for u := range 10000 {
		add(fmt.Sprintf("burst%d", u), uint64(100+u))
	}
	for u := range 10000 {
		x.drop([]byte(fmt.Sprintf("burst%d", u)), func(walRec) bool { return true })
	}
	if len(x.users) > 4096 {
		t.Errorf("index keeps %d entries after a burst of 10000 users left", len(x.users))
	}
	keys := x.keys()
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"a", "c"}) {
		t.Errorf("keys after the burst %v, want [a c]", keys)
	}
	if got := indexed(&x, "a"); !slices.Equal(got, []uint64{5}) {
		t.Errorf("a after the burst: %v, want [5]", got)
	}
	if got := indexed(&x, "c"); !slices.Equal(got, []uint64{6}) {
		t.Errorf("c after the burst: %v, want [6]", got)
	}
}

// appendAllocs appends records to key's user, with the sequence numbers
// after from, under testing.AllocsPerRun(runs) (runs+1 appends), and
// returns the allocations an append made.
func appendAllocs(x *walIndex, key []byte, seg *segment, from uint64, runs int) float64 {
	seq := from
	return testing.AllocsPerRun(runs, func() {
		seq++
		x.add(key, walRec{seq: seq, seg: seg})
	})
}

// Appending to a user already indexed allocates nothing once its record
// array has room: no key is made for it.
func TestWALIndexAppendsWithoutAllocating(t *testing.T) {
	x := newWALIndex()
	seg := &segment{id: 1}
	var kb walKeyBuf
	key := filterKey(kb[:0], "default", "user-1")
	x.add(key, walRec{seq: 1, seg: seg})
	x.users[x.slots[string(key)]].more = make([]walRec, 0, 16)
	if allocs := appendAllocs(&x, key, seg, 1, 10); allocs != 0 {
		t.Errorf("an append for an indexed user allocated %v times", allocs)
	}
	if n := len(indexed(&x, string(key))); n != 12 {
		t.Errorf("%d records indexed, want 12", n)
	}
}

// A user whose records a write-back retired leaves its record array for
// the next user with a second record: a busy user coming back does not
// grow a new one. The arrays kept have a bounded room, hold no record and
// go when the index is rebuilt.
func TestWALIndexReusesRecordArrays(t *testing.T) {
	x := newWALIndex()
	seg := &segment{id: 1}
	var kb walKeyBuf
	a, b := filterKey(kb[:0], "default", "user-a"), []byte("\x66\x07defaultuser-b")
	for seq := range uint64(100) {
		x.add(a, walRec{seq: seq + 1, seg: seg})
	}
	x.drop(a, func(walRec) bool { return true })
	if len(x.spare) != 1 || x.spareRecs < 99 {
		t.Fatalf("after a user with 100 records left: %d spare arrays with room for %d records, want 1 with 99 or more", len(x.spare), x.spareRecs)
	}
	for _, r := range x.spare[0][:cap(x.spare[0])] {
		if r.seg != nil {
			t.Fatal("a spare array still points at a segment")
		}
	}
	x.add(b, walRec{seq: 200, seg: seg})
	if allocs := appendAllocs(&x, b, seg, 200, 50); allocs != 0 {
		t.Errorf("records 2 to 52 of the next user allocated %v times, want 0 (the spare array)", allocs)
	}
	if got := indexed(&x, string(b)); len(got) != 52 || got[0] != 200 || got[51] != 251 {
		t.Errorf("next user's records: %d, from %v, want 52 from 200 to 251", len(got), got[:1])
	}
	if len(x.spare) != 0 || x.spareRecs != 0 {
		t.Errorf("%d spare arrays (room %d) after the next user took one", len(x.spare), x.spareRecs)
	}

	// Room beyond spareRoom is not kept.
	for u := range 40 {
		key := []byte(fmt.Sprintf("big%d", u))
		for seq := range uint64(1000) {
			x.add(key, walRec{seq: 1000 + seq, seg: seg})
		}
	}
	for u := range 40 {
		x.drop([]byte(fmt.Sprintf("big%d", u)), func(walRec) bool { return true })
	}
	if x.spareRecs > spareRoom || len(x.spare) == 0 {
		t.Errorf("spare arrays hold room for %d records (%d arrays), want 1 to %d", x.spareRecs, len(x.spare), spareRoom)
	}

	// A rebuilt index keeps none.
	for u := range 5000 {
		x.add([]byte(fmt.Sprintf("burst%d", u)), walRec{seq: uint64(1e6 + u), seg: seg})
	}
	for u := range 5000 {
		x.drop([]byte(fmt.Sprintf("burst%d", u)), func(walRec) bool { return true })
	}
	if len(x.spare) != 0 || x.spareRecs != 0 {
		t.Errorf("after the index was rebuilt: %d spare arrays (room %d)", len(x.spare), x.spareRecs)
	}
}
