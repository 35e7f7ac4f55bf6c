package storage

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/seenapi/seenapi/storage/storagetest"
)

// bigValue is a value above ValueThreshold (it goes to the value log),
// unique to its user.
func bigValue(user string) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("<%s>", user)), 14000/(len(user)+2))
}

// damage flips one byte in the middle of value in whichever value-log file
// holds it.
func damage(t *testing.T, dir string, value []byte) {
	t.Helper()
	storagetest.DamageValueLog(t, dir, value, len(value)/2)
}

// damagedVictim returns a store in which users before, victim and after
// (and a small value, small) were written to a first value-log file,
// sealed by 100 fillers, and victim's record was then damaged on disk.
func damagedVictim(t *testing.T) *Store {
	t.Helper()
	opts := testOptions(t).WithValueLogFileSize(1 << 20)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	var writes []Write
	for _, u := range []string{"before", "victim", "after"} {
		writes = append(writes, Write{NS: "feed", User: u, Value: bigValue(u)})
	}
	writes = append(writes, Write{NS: "feed", User: "small", Value: []byte("small")})
	if err := s.WriteBack(writes, nil); err != nil {
		t.Fatal(err)
	}
	// Fill the first value-log file so it is sealed and a new one is active.
	for i := range 100 {
		u := fmt.Sprint("filler", i)
		if err := s.WriteBack([]Write{{NS: "feed", User: u, Value: bigValue(u)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	damage(t, opts.Dir, bigValue("victim"))
	return openTest(t, opts)
}

// A record damaged on disk in a value-log file fails that user's calls
// with ErrCorrupt naming the user, and every other user keeps working.
func TestCorruptValueFailsOnlyThatUser(t *testing.T) {
	s := damagedVictim(t)
	_, _, err := s.Load("feed", "victim")
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "feed/victim") {
		t.Fatalf("Load of the damaged user: %v, want ErrCorrupt naming feed/victim", err)
	}
	for _, u := range []string{"before", "after", "filler0", "filler99"} {
		if f, _ := mustLoad(t, s, "feed", u); !bytes.Equal(f, bigValue(u)) {
			t.Errorf("%s: filter of %d bytes, want its own %d", u, len(f), len(bigValue(u)))
		}
	}
	// A merging write-back fails for the damaged user only; a replacing one
	// (a fresh filter, or an import) repairs it.
	err = s.WriteBack([]Write{{NS: "feed", User: "victim", Value: []byte("fresh")}, {NS: "feed", User: "small", Value: []byte("again")}}, orMerge)
	var wbe *WriteBackError
	if !errors.As(err, &wbe) || len(wbe.Failed) != 1 || wbe.Failed[0].User != "victim" || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("merging write-back over the damaged value: %v, want only feed/victim to fail with ErrCorrupt", err)
	}
	if err := s.WriteBack([]Write{{NS: "feed", User: "victim", Value: []byte("fresh")}}, nil); err != nil {
		t.Fatalf("replacing write-back over the damaged value: %v", err)
	}
	if f, _ := mustLoad(t, s, "feed", "victim"); string(f) != "fresh" {
		t.Errorf("victim after replace: %q", f)
	}
}

// A value damaged in the last value-log file of a store closed cleanly
// fails its user alone: Badger, which truncates the last file at its first
// damaged record when it opens (a torn write, it takes it for), must not
// lose the values written after it, other users'. After a crash, when
// Badger does cut the file, those values fail with ErrCorrupt, never read
// back as empty ones.
func TestDamageInTheLastValueLogFailsThatUserOnly(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprint("crash ", crash), func(t *testing.T) {
			opts := testOptions(t).WithValueLogFileSize(1 << 20) // a crash copy copies a file's twice
			s, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			var users []string
			for i := range 10 {
				u := fmt.Sprint("user", i)
				users = append(users, u)
				if err := s.WriteBack([]Write{{NS: "feed", User: u, Value: bigValue(u)}}, nil); err != nil {
					t.Fatal(err)
				}
			}
			dir := opts.Dir
			if crash {
				dir = crashCopyDir(t, s)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			damage(t, dir, bigValue("user5"))

			s = openTest(t, opts.WithDir(dir))
			for i, u := range users {
				f, _, err := s.Load("feed", u)
				switch {
				case i == 5 || (crash && i > 5):
					if !errors.Is(err, ErrCorrupt) {
						t.Errorf("%s: %d bytes, %v; want ErrCorrupt", u, len(f), err)
					}
				case err != nil || !bytes.Equal(f, bigValue(u)):
					t.Errorf("%s: %d bytes, %v; want its value", u, len(f), err)
				}
			}
		})
	}
}

// A write that voids its user's journal (Write.VoidJournal) over a value
// the disk damaged while the store was open keeps every earlier record of
// the user out after a crash, those a write-back had covered included,
// whose cover mark went with the damaged value: the user is the value
// written, and a record appended after it is kept.
func TestAVoidingWriteOverADamagedValueOutlastsACrash(t *testing.T) {
	s := openTest(t, testOptions(t).WithValueLogFileSize(1<<20))
	old := mustAppend(t, s, "feed", "victim", "old")
	mustAppend(t, s, "feed", "other", "keep") // keeps the segment, old's too
	if err := s.WriteBack([]Write{{NS: "feed", User: "victim", Value: bigValue("victim"), UpTo: old}}, nil); err != nil {
		t.Fatal(err)
	}
	// Fill the first value-log file so it is sealed and a new one is active.
	for i := range 100 {
		u := fmt.Sprint("filler", i)
		if err := s.WriteBack([]Write{{NS: "feed", User: u, Value: bigValue(u)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	damage(t, s.opts.Dir, bigValue("victim"))
	if _, _, err := s.Load("feed", "victim"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("the damaged user: %v, want ErrCorrupt", err)
	}
	if err := s.WriteBack([]Write{{NS: "feed", User: "victim", Value: []byte("new"), VoidJournal: true}}, orMerge); err != nil {
		t.Fatalf("a voiding write over the damaged value: %v", err)
	}
	mustAppend(t, s, "feed", "victim", "later")
	for _, st := range []*Store{s, crashCopy(t, s)} {
		f, j := mustLoad(t, st, "feed", "victim")
		if string(f) != "new" || len(j) != 1 || string(j[0].Value) != "later" {
			t.Errorf("the user written over its damaged value: %q, journal %v; want new, the record later alone", f, journalValues(j))
		}
		if _, j := mustLoad(t, st, "feed", "other"); len(j) != 1 {
			t.Errorf("the other user's journal: %v, want its record", journalValues(j))
		}
	}
}
