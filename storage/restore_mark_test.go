package storage

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// A restore into a store that holds the user keeps the cover mark stored
// with the user's filter: the journal records a write-back covered, still
// in a segment kept for another user's live record, stay covered after a
// restart. Replayed, they would bring back into the filter what a
// replacement (an import, a forgetting of items) had taken out of it.
func TestRestoreIntoAStoreKeepsTheUsersCoverMark(t *testing.T) {
	for _, tc := range []struct {
		name  string
		merge MergeFunc
	}{{"merge", orMerge}, {"replace", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(t)
			s, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			covered := mustAppend(t, s, "feed", "u", "covered")
			mustAppend(t, s, "feed", "other", "live") // keeps the segment
			if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("filter"), UpTo: covered}}, nil); err != nil {
				t.Fatal(err)
			}
			var backup bytes.Buffer
			if err := s.Backup(&backup); err != nil {
				t.Fatal(err)
			}
			if err := s.Restore(bytes.NewReader(backup.Bytes()), tc.merge, nil); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openTest(t, opts)
			f, j := mustLoad(t, s, "feed", "u")
			if string(f) != "filter" || len(j) != 0 {
				t.Errorf("after the restore and a restart: filter %q, journal %q; want \"filter\" and no record (the write-back covered it)",
					f, journalValues(j))
			}
		})
	}
}

// A merging restore with a fold merges each stored filter with its
// journal records after its cover mark folded in (the filter its calls
// ran on) and keeps the records live; a user without such records, or
// whose fold fails or panics, is merged as stored.
func TestMergingRestoreFoldsThePendingRecordsIntoTheStoredFilter(t *testing.T) {
	users := []string{"pending", "clean", "failing", "panicking"}
	src := openTest(t, testOptions(t))
	var writes []Write
	for _, u := range users {
		writes = append(writes, Write{NS: "feed", User: u, Value: []byte{0x10}})
	}
	if err := src.WriteBack(writes, nil); err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	if err := src.Backup(&backup); err != nil {
		t.Fatal(err)
	}

	opts := testOptions(t)
	s := openTest(t, opts)
	covered := mustAppend(t, s, "feed", "pending", "\x40") // written back below
	for i := range writes {
		writes[i].Value, writes[i].UpTo = []byte{0x01}, covered
	}
	if err := s.WriteBack(writes, nil); err != nil {
		t.Fatal(err)
	}
	// The records' bytes are ORed into the filter; 0x80 makes the fold
	// fail, 0x20 panic.
	pending := map[string][]string{"pending": {"\x02", "\x04"}, "failing": {"\x02", "\x80"}, "panicking": {"\x20"}}
	for u, values := range pending {
		for _, v := range values {
			mustAppend(t, s, "feed", u, v)
		}
	}
	var calls [][]string
	fold := func(filter []byte, journal []JournalEntry) ([]byte, error) {
		var values []string
		out := bytes.Clone(filter)
		for _, j := range journal {
			values = append(values, string(j.Value))
			switch j.Value[0] {
			case 0x80:
				return []byte{0xff}, errors.New("a record it cannot read")
			case 0x20:
				panic("a bug")
			}
			out[0] |= j.Value[0]
		}
		calls = append(calls, values)
		return out, nil
	}
	if err := s.Restore(bytes.NewReader(backup.Bytes()), orMerge, fold); err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{"\x02", "\x04"}}; !reflect.DeepEqual(calls, want) {
		t.Errorf("folded records %q, want %q (the pending user's records after its cover mark)", calls, want)
	}
	want := map[string]byte{"pending": 0x17, "clean": 0x11, "failing": 0x11, "panicking": 0x11}
	check := func(when string) {
		t.Helper()
		for _, u := range users {
			f, j := mustLoad(t, s, "feed", u)
			var values []string
			for _, e := range j {
				values = append(values, string(e.Value))
			}
			if !bytes.Equal(f, []byte{want[u]}) || !slices.Equal(values, pending[u]) {
				t.Errorf("%s: %s has filter %x and journal %q, want %x and %q", when, u, f, values, want[u], pending[u])
			}
		}
	}
	check("after the restore")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, opts)
	check("after a restart")
}

// A merging restore with a fold folds the backup's journal records of a
// user into the backup's filter, and the store's into the stored one: each
// side's records into the filter its calls ran on. Both stay in the
// journal.
func TestMergingRestoreFoldsEachSidesRecordsIntoItsFilter(t *testing.T) {
	src := openTest(t, testOptions(t))
	covered := mustAppend(t, src, "feed", "u", "\x40") // in the backup's filter
	if err := src.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte{0x10}, UpTo: covered}}, nil); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, src, "feed", "u", "\x20")
	var backup bytes.Buffer
	if err := src.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, testOptions(t))
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte{0x01}}}, nil); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "feed", "u", "\x02")
	var calls []string
	fold := func(filter []byte, journal []JournalEntry) ([]byte, error) {
		out := bytes.Clone(filter)
		call := fmt.Sprintf("%x:", filter)
		for _, j := range journal {
			out[0] |= j.Value[0]
			call += fmt.Sprintf(" %x", j.Value)
		}
		calls = append(calls, call)
		return out, nil
	}
	// The second run, as after an interrupted restore, folds the store's
	// record into the merged filter stored by the first.
	for _, want := range [][]string{{"01: 02", "10: 20"}, {"10: 20", "33: 02"}} {
		calls = nil
		if err := s.Restore(bytes.NewReader(backup.Bytes()), orMerge, fold); err != nil {
			t.Fatal(err)
		}
		slices.Sort(calls)
		if !slices.Equal(calls, want) {
			t.Errorf("folds %q, want %q (each side's records into its filter)", calls, want)
		}
		f, j := mustLoad(t, s, "feed", "u")
		var values []string
		for _, e := range j {
			values = append(values, string(e.Value))
		}
		if !bytes.Equal(f, []byte{0x33}) || !slices.Equal(values, []string{"\x02", "\x20"}) {
			t.Errorf("after the restore: filter %x and journal %q, want 33 and [02 20]", f, values)
		}
	}
}
