package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// dirState lists every file under dir with its size and time of change.
func dirState(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %d %v", p, fi.Size(), fi.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// PeekNamespaces counts each namespace's users, stored or in the journal
// alone, leaving out the erased, the purged and the skipped; it stops
// counting at the limit, and writes nothing to the directory.
func TestPeekNamespacesCountsTheUsersOfEachNamespace(t *testing.T) {
	opts := testOptions(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	var writes []Write
	for i := range 5 {
		writes = append(writes, Write{NS: "push", User: fmt.Sprintf("p%d", i), Value: []byte("filter")})
	}
	writes = append(writes, Write{NS: "feed", User: "f", Value: []byte("filter")},
		Write{NS: "gone", User: "g", Value: []byte("filter")}, Write{NS: "email", User: "e1", Value: []byte("filter")})
	if err := s.WriteBack(writes, nil); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "email", "e1", "item")      // stored as well
	mustAppend(t, s, "email", "e2", "item")      // in the journal alone
	mustAppend(t, s, "email", "erased", "item")  // erased below
	mustAppend(t, s, "journal", "j", "item")     // a namespace in the journal alone
	mustAppend(t, s, "gone", "journal-only", "") // purged below
	if err := s.Delete("email", "erased"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PurgeNamespace("gone"); err != nil {
		t.Fatal(err)
	}

	// While the store is open, it is in use.
	if _, err := PeekNamespaces(opts, func(string) bool { return false }, 0, Hidden{}); !errors.Is(err, ErrInUse) {
		t.Fatalf("PeekNamespaces of a store open elsewhere: %v, want ErrInUse", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	before := dirState(t, opts.Dir)
	got, err := PeekNamespaces(opts, func(ns string) bool { return ns == "feed" }, 3, Hidden{})
	if err != nil {
		t.Fatal(err)
	}
	want := []NamespaceUsers{{"email", 2, false}, {"journal", 1, false}, {"push", 3, true}}
	if !slices.Equal(got, want) {
		t.Errorf("PeekNamespaces: %v, want %v", got, want)
	}
	if after := dirState(t, opts.Dir); !slices.Equal(after, before) {
		t.Errorf("PeekNamespaces changed the directory:\n%v\nwas\n%v", after, before)
	}
	if got, err := PeekNamespaces(opts, func(string) bool { return false }, 0, Hidden{}); err != nil ||
		!slices.Contains(got, NamespaceUsers{"push", 5, false}) || !slices.Contains(got, NamespaceUsers{"feed", 1, false}) {
		t.Errorf("PeekNamespaces with no limit: %v, %v", got, err)
	}

	// The service opens the store once PeekNamespaces is done.
	s, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// PeekNamespaces counts the users Users lists: not a gone user's Empty
// value, nor a filter hide hides, unless its user has journal records; a
// namespace of such users alone holds none.
func TestPeekNamespacesCountsListedUsersOnly(t *testing.T) {
	opts := testOptions(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteBack([]Write{
		{NS: "feed", User: "kept", Value: []byte("keep")},
		{NS: "feed", User: "gone", Value: []byte("keep"), TTL: time.Hour, Empty: true},
		{NS: "feed", User: "hidden", Value: []byte("hide")},
		{NS: "feed", User: "journaled", Value: []byte("hide")},
		{NS: "none", User: "hidden", Value: []byte("hide")},
	}, nil); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "feed", "journaled", "item")
	hide := Hidden{MaxBytes: 8, Is: func(f []byte) bool { return string(f) == "hide" }}
	listed, err := s.Users("feed", "", 0, hide)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := PeekNamespaces(opts, func(string) bool { return false }, 0, hide)
	if want := []NamespaceUsers{{"feed", len(listed), false}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("PeekNamespaces: %v, %v; want %v, as Users lists %q", got, err, want, listed)
	}
}

// A directory with no store holds no namespace, and stays as it was.
func TestPeekNamespacesOfNoStore(t *testing.T) {
	dir := t.TempDir()
	none := filepath.Join(dir, "none")
	for _, d := range []string{dir, none} {
		if got, err := PeekNamespaces(DefaultOptions(d).WithLogger(testLogger(t)), func(string) bool { return false }, 0, Hidden{}); err != nil || len(got) != 0 {
			t.Errorf("PeekNamespaces of %s: %v, %v", d, got, err)
		}
	}
	if _, err := os.Stat(none); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("PeekNamespaces made the directory: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("PeekNamespaces wrote %v", ents)
	}

}

// A store a crash left is not read (Badger reads it only once recovered):
// PeekNamespaces says so, and reads it once Open has recovered it.
func TestPeekNamespacesOfAStoreACrashLeft(t *testing.T) {
	s := openTest(t, testOptions(t))
	if err := s.WriteBack([]Write{{NS: "push", User: "p", Value: []byte("filter")}}, nil); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "push", "q", "item")
	opts := s.opts.WithDir(crashCopyDir(t, s))
	before := dirState(t, opts.Dir)
	if _, err := PeekNamespaces(opts, func(string) bool { return false }, 0, Hidden{}); !errors.Is(err, ErrNotClosed) {
		t.Fatalf("PeekNamespaces of a store a crash left: %v, want ErrNotClosed", err)
	}
	if after := dirState(t, opts.Dir); !slices.Equal(after, before) {
		t.Errorf("PeekNamespaces changed the directory:\n%v\nwas\n%v", after, before)
	}
	recovered, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := recovered.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := PeekNamespaces(opts, func(string) bool { return false }, 0, Hidden{}); err != nil || !slices.Equal(got, []NamespaceUsers{{"push", 2, false}}) {
		t.Errorf("PeekNamespaces once recovered: %v, %v", got, err)
	}
}
