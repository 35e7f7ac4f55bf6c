package storage

import (
	"bytes"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestEmptyWriteListsNoUserAndKeepsItsCoverMark: a write marked Empty (a
// user gone past its window) lists no user, and still covers the journal
// records it supersedes, after a restart too, so that none is replayed.
func TestEmptyWriteListsNoUserAndKeepsItsCoverMark(t *testing.T) {
	opts := testOptions(t)
	s := openTest(t, opts)
	seq := mustAppend(t, s, "ns", "gone", "record")
	if err := s.WriteBack([]Write{
		{NS: "ns", User: "gone", Value: []byte{0}, UpTo: seq, TTL: time.Hour, Empty: true},
		{NS: "ns", User: "kept", Value: []byte{1}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if users, err := s.Users("ns", "", 0, Hidden{}); err != nil || !slices.Equal(users, []string{"kept"}) {
			t.Fatalf("%s: users %q, %v; want [kept]", when, users, err)
		}
		if _, j := mustLoad(t, s, "ns", "gone"); len(j) != 0 {
			t.Fatalf("%s: gone's journal holds %v, superseded by its empty write", when, journalValues(j))
		}
	}
	check("after the write")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, opts)
	check("after a restart")
}

// storeWithHiddenFilters opens a store holding in "ns" filters "hide"
// (a-hidden; b-marked, with a cover mark; d-journaled, with a journal record
// after it) and "keep" (e-kept), and a longer one (c-long).
func storeWithHiddenFilters(t *testing.T) *Store {
	t.Helper()
	s := openTest(t, testOptions(t))
	seq := mustAppend(t, s, "ns", "b-marked", "record")
	if err := s.WriteBack([]Write{
		{NS: "ns", User: "a-hidden", Value: []byte("hide")},
		{NS: "ns", User: "b-marked", Value: []byte("hide"), UpTo: seq},
		{NS: "ns", User: "c-long", Value: []byte("hide, but longer than read")},
		{NS: "ns", User: "d-journaled", Value: []byte("hide")},
		{NS: "ns", User: "e-kept", Value: []byte("keep")},
	}, nil); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "ns", "d-journaled", "record")
	return s
}

// TestUsersLeavesOutHiddenFilters: a stored filter Hidden hides is not
// listed, nor takes a place in a page, its cover mark left out of what
// Hidden is asked about; a longer filter is listed unread, and a user with
// journal records is listed whatever its filter.
func TestUsersLeavesOutHiddenFilters(t *testing.T) {
	s := storeWithHiddenFilters(t)
	var asked []string
	hide := Hidden{MaxBytes: 8, Is: func(f []byte) bool {
		asked = append(asked, string(f))
		return string(f) == "hide"
	}}
	if users, err := s.Users("ns", "", 2, hide); err != nil || !slices.Equal(users, []string{"c-long", "d-journaled"}) {
		t.Errorf("a page of two: %q, %v; want [c-long d-journaled]", users, err)
	}
	if users, err := s.Users("ns", "", 0, hide); err != nil || !slices.Equal(users, []string{"c-long", "d-journaled", "e-kept"}) {
		t.Errorf("users %q, %v; want [c-long d-journaled e-kept]", users, err)
	}
	if i := slices.IndexFunc(asked, func(f string) bool { return f != "hide" && f != "keep" }); i >= 0 {
		t.Errorf("Hidden was asked about %q, past its MaxBytes or with a cover mark", asked[i])
	}
}

// TestEmptyWriteMergedWithStoredItemsIsListed: an Empty write merged into
// a stored value that holds more (another writer's items) is an ordinary
// write: the user is listed.
func TestEmptyWriteMergedWithStoredItemsIsListed(t *testing.T) {
	s := openTest(t, testOptions(t))
	if err := s.WriteBack([]Write{{NS: "ns", User: "u", Value: []byte{1}}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteBack([]Write{{NS: "ns", User: "u", Value: []byte{0}, TTL: time.Hour, Empty: true}}, orMerge); err != nil {
		t.Fatal(err)
	}
	if users, err := s.Users("ns", "", 0, Hidden{}); err != nil || !slices.Equal(users, []string{"u"}) {
		t.Fatalf("users %q, %v; want [u]", users, err)
	}
	if f, _ := mustLoad(t, s, "ns", "u"); !bytes.Equal(f, []byte{1}) {
		t.Fatalf("stored %x, want the merge, 01", f)
	}
}

// backupOfGoneAndKept backs up a store holding in "ns" a gone user's Empty
// value and a kept user's filter (01), after more (nil: nothing) adds to it.
func backupOfGoneAndKept(t *testing.T, more func(*Store)) *bytes.Buffer {
	t.Helper()
	src := openTest(t, testOptions(t))
	if err := src.WriteBack([]Write{
		{NS: "ns", User: "gone", Value: []byte{0}, TTL: time.Hour, Empty: true},
		{NS: "ns", User: "kept", Value: []byte{1}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	if more != nil {
		more(src)
	}
	var buf bytes.Buffer
	if err := src.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// TestRestoreLeavesEmptyWritesOut: a backup's Empty value, kept in its
// store for a cover mark that means nothing in another, is not restored.
func TestRestoreLeavesEmptyWritesOut(t *testing.T) {
	buf := backupOfGoneAndKept(t, nil)
	dst := openTest(t, testOptions(t))
	if err := dst.Restore(buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	if f, _ := mustLoad(t, dst, "ns", "gone"); f != nil {
		t.Fatalf("gone restored: %x", f)
	}
	if f, _ := mustLoad(t, dst, "ns", "kept"); !bytes.Equal(f, []byte{1}) {
		t.Fatalf("kept restored as %x, want 01", f)
	}
}

// TestVerifyBackupCountsWhatARestoreBringsBack: a backup's Empty value (a
// gone user, which Restore leaves out) is not counted as a filter.
func TestVerifyBackupCountsWhatARestoreBringsBack(t *testing.T) {
	buf := backupOfGoneAndKept(t, func(src *Store) { mustAppend(t, src, "ns", "journalled", "record") })
	c, err := VerifyBackup(bytes.NewReader(buf.Bytes()), Hidden{})
	if err != nil {
		t.Fatal(err)
	}
	dst := openTest(t, testOptions(t))
	if err := dst.Restore(buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	users, err := dst.Users("ns", "", 0, Hidden{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (BackupContents{Filters: 1, JournalRecords: 1}); !reflect.DeepEqual(c, want) {
		t.Fatalf("VerifyBackup counts %+v, want %+v: the restore brought back the users %q", c, want, users)
	}
}

// TestVerifyBackupCountsHiddenFiltersApart: of a backup's filters, those
// Hidden hides whose user has no journal record in it are counted apart
// (NoHistory), its cover mark left out of what Hidden is asked about: the
// filters less those are what the listing of a restore of it counts.
func TestVerifyBackupCountsHiddenFiltersApart(t *testing.T) {
	src := storeWithHiddenFilters(t)
	var buf bytes.Buffer
	if err := src.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	hide := Hidden{MaxBytes: 8, Is: func(f []byte) bool { return string(f) == "hide" }}
	c, err := VerifyBackup(bytes.NewReader(buf.Bytes()), hide)
	if err != nil {
		t.Fatal(err)
	}
	dst := openTest(t, testOptions(t))
	if err := dst.Restore(&buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	users, err := dst.Users("ns", "", 0, hide)
	if err != nil {
		t.Fatal(err)
	}
	if want := (BackupContents{Filters: 5, NoHistory: 2, JournalRecords: 1}); !reflect.DeepEqual(c, want) {
		t.Fatalf("VerifyBackup counts %+v, want %+v: the restore lists the users %q", c, want, users)
	}
	if len(users) != c.Filters-c.NoHistory {
		t.Fatalf("the restore lists %q, not the %d filters less the %d with no history", users, c.Filters, c.NoHistory)
	}
}
