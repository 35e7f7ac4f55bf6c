package storage

import (
	"bytes"
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
			if err := s.Restore(bytes.NewReader(backup.Bytes()), tc.merge); err != nil {
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
