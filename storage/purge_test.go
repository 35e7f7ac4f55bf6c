package storage

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// A purged namespace's users are gone, whether written back, journal-only
// or both, and stay gone after a restart or a crash (covered records in a
// segment another namespace keeps alive included); a namespace whose name
// starts like it, and the users of every other namespace, are untouched.
func TestPurgeNamespaceErasesEveryUserOfItAndNoOther(t *testing.T) {
	opts := smallTxnOptions(t)
	log := &lockedBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(log, nil))
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	const written = purgePage + 10 // more than a page
	var writes []Write
	for i := range written {
		writes = append(writes, Write{NS: "old", User: fmt.Sprintf("w%05d", i), Value: []byte("filter")})
	}
	// A covered record in the segment that kept users below hold alive.
	covered := mustAppend(t, s, "old", "w00001", "covered")
	writes[1].UpTo = covered
	if err = s.WriteBack(writes, nil); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "old", "w00002", "pending")          // written back and pending
	mustAppend(t, s, "old", "journal-only", "item")       // never written back
	keptSeq := mustAppend(t, s, "feed", "w00001", "kept") // same user in another namespace
	if err := s.WriteBack([]Write{{NS: "oldish", User: "u", Value: []byte("other")}}, nil); err != nil {
		t.Fatal(err)
	}

	// With every page's progress logged: one line after the first page.
	defer func(every time.Duration) { purgeProgressEvery = every }(purgeProgressEvery)
	purgeProgressEvery = 0
	n, err := s.PurgeNamespace("old")
	if err != nil {
		t.Fatal(err)
	}
	if n != written+1 {
		t.Errorf("PurgeNamespace erased %d users, want %d", n, written+1)
	}
	if want := fmt.Sprintf(`msg="storage: purging a namespace" namespace=old users_erased=%d`, purgePage); strings.Count(log.String(), "purging a namespace") != 1 || !strings.Contains(log.String(), want) {
		t.Errorf("the purge's progress log:\n%s\nwant one line with %s", log.String(), want)
	}
	check := func(what string, s *Store) {
		t.Helper()
		if users, err := s.Users("old", "", 0, Hidden{}); err != nil || len(users) != 0 {
			t.Errorf("%s: users of the purged namespace %v (err %v)", what, users[:min(len(users), 5)], err)
		}
		for _, u := range []string{"w00001", "w00002", "journal-only", fmt.Sprintf("w%05d", written-1)} {
			if f, j := mustLoad(t, s, "old", u); f != nil || len(j) != 0 {
				t.Errorf("%s: old/%s has filter %q and journal %v", what, u, f, journalValues(j))
			}
		}
		if _, j := mustLoad(t, s, "feed", "w00001"); !slices.Equal(journalValues(j), []string{fmtEntry(keptSeq, "kept")}) {
			t.Errorf("%s: feed/w00001's journal %v", what, journalValues(j))
		}
		if f, _ := mustLoad(t, s, "oldish", "u"); string(f) != "other" {
			t.Errorf("%s: oldish/u's filter %q", what, f)
		}
		if nss, err := s.Namespaces(); err != nil || !slices.Equal(nss, []string{"feed", "oldish"}) {
			t.Errorf("%s: namespaces %v (err %v), want [feed oldish]", what, nss, err)
		}
	}
	check("after the purge", s)
	check("after a crash", crashCopy(t, s))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check("after a restart", openTest(t, opts))
}

func TestPurgeNamespaceOfNothingErasesNothing(t *testing.T) {
	s := openTest(t, testOptions(t))
	mustAppend(t, s, "feed", "u", "item")
	if n, err := s.PurgeNamespace("never"); err != nil || n != 0 {
		t.Fatalf("PurgeNamespace of a namespace with no data: %d users, err %v", n, err)
	}
	if _, j := mustLoad(t, s, "feed", "u"); len(j) != 1 {
		t.Errorf("feed/u's journal %v", journalValues(j))
	}
	if _, err := s.PurgeNamespace(""); err == nil {
		t.Error("PurgeNamespace of the empty name: no error")
	}
}

// A format 2 store's cover keys go with the namespace's filters.
func TestPurgeNamespaceDeletesFormat2CoverKeys(t *testing.T) {
	s := openTest(t, testOptions(t))
	err := s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(filterKey(nil, "old", "u"), []byte("filter")); err != nil {
			return err
		}
		return txn.Set(coverKey(nil, "old", "u"), []byte{1})
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.PurgeNamespace("old"); err != nil || n != 1 {
		t.Fatalf("PurgeNamespace: %d users, err %v", n, err)
	}
	err = s.db.View(func(txn *badger.Txn) error {
		for _, k := range [][]byte{filterKey(nil, "old", "u"), coverKey(nil, "old", "u")} {
			if _, err := txn.Get(k); err != badger.ErrKeyNotFound {
				t.Errorf("key %q after the purge: err %v", k, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Erasing frees space: a purge goes through below MinFreeBytes, as Delete
// does.
func TestPurgeNamespaceWorksBelowMinFreeBytes(t *testing.T) {
	opts := testOptions(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteBack([]Write{{NS: "old", User: "u", Value: []byte("filter")}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, opts.WithMinFreeBytes(1<<62)) // more than any disk has
	if _, err := s.Append("old", "v", []byte("x"), 0); !errors.Is(err, ErrFull) {
		t.Fatalf("an append below MinFreeBytes: %v, want ErrFull", err)
	}
	if n, err := s.PurgeNamespace("old"); err != nil || n != 1 {
		t.Fatalf("PurgeNamespace below MinFreeBytes: %d users, err %v", n, err)
	}
}

// lockedBuffer is a log the store's goroutines write while a test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
