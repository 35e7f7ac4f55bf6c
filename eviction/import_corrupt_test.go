package eviction

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/storage/storagetest"
	"github.com/seenapi/seenapi/userfilter"
)

// damagedFixture is a hot set over a store whose users before, victim and
// after of namespace default have seen item-0 to item-1999, written back,
// victim then "late" too (in its journal alone), and victim's stored
// filter damaged on disk. It returns victim's export from before the
// damage, and the items.
func damagedFixture(t *testing.T) (fx *fixture, kept []byte, items []string) {
	t.Helper()
	fx = newFixture(t, Options{})
	items = make([]string, 2000) // a filter for the value log, not the tree
	for i := range items {
		items[i] = fmt.Sprint("item-", i)
	}
	for _, u := range []string{"before", "victim", "after"} {
		record(t, fx.h, "default", u, items...)
	}
	kept, err := fx.h.Export("default", "victim")
	if err != nil {
		t.Fatal(err)
	}
	fx.restart(true, Options{})
	// Once more, so that the users' value-log file is not the last one,
	// which Badger cuts at its first damaged record when it opens.
	fx.restart(true, Options{})
	record(t, fx.h, "default", "victim", "late")
	fx.open = func(t testing.TB, dir string) *storage.Store {
		storagetest.DamageFilter(t, dir, "default", "victim")
		return openStore(t, dir)
	}
	fx.restart(false, Options{}) // late stays in the journal
	fx.open = nil
	if _, err := fx.h.Check("default", "victim", []string{"item-1"}, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("the damaged user: %v, want ErrCorrupt", err)
	}
	return fx, kept, items
}

// crashCopyHotSet copies fx's store as a crash of its process would leave
// it and returns a hot set over the copy, opened as the next start would.
func crashCopyHotSet(t *testing.T, fx *fixture) *HotSet {
	t.Helper()
	dst := t.TempDir()
	storagetest.CopyAsACrashLeaves(t, fx.dir, dst)
	st := openStore(t, dst)
	h, err := New(st, defaultNS, Options{FlushInterval: time.Hour})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Close()
		st.Close()
	})
	return h
}

// A replace import repairs a user whose stored filter the disk damaged,
// in one step: the user then holds the export's items, not the records
// of its journal that belonged to the damaged state (late), serves and
// records again, and stays so after a crash; the users beside it are
// unaffected. A merge import into it still fails, with nothing to merge
// into.
func TestReplaceImportRepairsADamagedUser(t *testing.T) {
	fx, kept, items := damagedFixture(t)
	if _, err := fx.h.Import("default", "victim", kept, false, 1<<20); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("merge import into the damaged user: %v, want ErrCorrupt", err)
	}
	if imported, err := fx.h.Import("default", "victim", kept, true, 1<<20); err != nil || !imported {
		t.Fatalf("replace import over the damaged user: imported %v, %v; want it imported", imported, err)
	}
	record(t, fx.h, "default", "victim", "new")
	for _, h := range []*HotSet{fx.h, crashCopyHotSet(t, fx)} {
		for _, u := range []string{"before", "victim", "after"} {
			if got := seen(t, h, "default", u, items...); !allTrue(got) {
				t.Errorf("%s after the repair: an item of item-0 to item-1999 tests unseen", u)
			}
		}
		if got := seen(t, h, "default", "victim", "late", "new"); got[0] || !got[1] {
			t.Errorf("victim after the repair: late, new seen %v, want [false true] (late was of the damaged state)", got)
		}
	}
}

// A replace import repairs a user whose journal holds a record that does
// not decode, voiding it: the user serves, after a crash too.
func TestReplaceImportRepairsAnUnreadableJournal(t *testing.T) {
	fx := newFixture(t, Options{})
	kept := recordedExport(t, fx.h, "default", "src", "a", "b")
	if _, err := fx.st.Append("default", "victim", []byte("not a journal record"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.h.Check("default", "victim", []string{"a"}, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("the user of the bad record: %v, want ErrCorrupt", err)
	}
	if imported, err := fx.h.Import("default", "victim", kept, true, 1<<20); err != nil || !imported {
		t.Fatalf("replace import over the bad record: imported %v, %v; want it imported", imported, err)
	}
	for _, h := range []*HotSet{fx.h, crashCopyHotSet(t, fx)} {
		if got := seen(t, h, "default", "victim", "a", "b", "c"); !got[0] || !got[1] || got[2] {
			t.Errorf("victim after the repair: a, b, c seen %v, want [true true false]", got)
		}
	}
}

// Calls on a damaged user while a replace import repairs it fail with
// ErrCorrupt until the import is stored, then load the imported filter:
// none waits for good, and each item a call recorded is kept with the
// imported ones.
func TestCallsDuringAReplaceOfADamagedUser(t *testing.T) {
	fx, kept, items := damagedFixture(t)
	var mu sync.Mutex
	var recorded []string
	done := make(chan struct{})
	inParallel(t, 5, func(w int) error {
		if w == 0 {
			defer close(done)
			if imported, err := fx.h.Import("default", "victim", kept, true, 1<<20); err != nil || !imported {
				return fmt.Errorf("replace import: imported %v, %v", imported, err)
			}
			return nil
		}
		for i := 0; ; i++ {
			item := fmt.Sprintf("w%d-%d", w, i)
			finished := false
			select {
			case <-done: // the import answered: what it stored is there
				finished = true
			default:
			}
			_, err := fx.h.Filter("default", "victim", []string{item}, 0, userfilter.RecordReturned)
			if errors.Is(err, ErrCorrupt) && !finished {
				continue
			}
			if err != nil {
				return fmt.Errorf("a call on the user (the import answered: %v): %w", finished, err)
			}
			mu.Lock()
			recorded = append(recorded, item)
			mu.Unlock()
			return nil
		}
	})
	if got := seen(t, fx.h, "default", "victim", append(recorded, items...)...); !allTrue(got) {
		t.Errorf("after the repair: %v and the export's items seen %v, want all", recorded, got)
	}
}
