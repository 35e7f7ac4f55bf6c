package eviction

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/storage"
)

// heldStore is the real store whose first write-back is held at a gate
// (it says so on entered and goes on once release is closed) and then
// fails for every user if fail is set, as a store that filled up
// meanwhile refuses it. Later write-backs go straight through.
type heldStore struct {
	*storage.Store
	held    atomic.Bool
	fail    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func newHeldStore(t *testing.T) *heldStore {
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() })
	return &heldStore{Store: st, entered: make(chan struct{}, 1), release: make(chan struct{})}
}

var errFilledUp = fmt.Errorf("%w: the disk filled up meanwhile", storage.ErrFull)

func (g *heldStore) WriteBack(writes []storage.Write, merge storage.MergeFunc) error {
	if g.held.Swap(true) {
		return g.Store.WriteBack(writes, merge)
	}
	g.entered <- struct{}{}
	<-g.release
	if g.fail.Load() {
		wbe := &storage.WriteBackError{}
		for _, w := range writes {
			wbe.Failed = append(wbe.Failed, storage.UserError{NS: w.NS, User: w.User, Err: errFilledUp})
		}
		return wbe
	}
	return g.Store.WriteBack(writes, merge)
}

// overHeld is a hot set over g whose budget holds one user: each new user
// evicts the last.
func overHeld(t *testing.T, g *heldStore, opts Options) *HotSet {
	opts.CacheBytes, opts.Shards, opts.FlushInterval = 1, 1, time.Hour
	h, err := New(g, defaultNS, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// flushHeld starts a write-back of every dirty user and returns once the
// store holds it, with what the write-back returns.
func flushHeld(h *HotSet, g *heldStore) <-chan error {
	flushed := make(chan error, 1)
	go func() { flushed <- h.Flush() }()
	<-g.entered
	return flushed
}

// A user evicted while dirty whose write-back fails, called meanwhile and
// written back since, keeps what that call recorded: the entry whose write
// failed must not stay queued for a later write-back once a second copy of
// the user has been loaded beside it, where its older filter, written
// after the second copy's (which retired the journal), replaced it.
func TestFailedWriteBackOfEvictedUserLosesNothing(t *testing.T) {
	g := newHeldStore(t)
	g.fail.Store(true)
	h := overHeld(t, g, Options{})
	record(t, h, "default", "a", "a1")
	record(t, h, "default", "b", "b1") // evicts a, dirty
	flushed := flushHeld(h, g)
	record(t, h, "default", "a", "a2") // acknowledged during a's write-back
	close(g.release)
	if err := <-flushed; !errors.Is(err, storage.ErrFull) {
		t.Fatalf("held write-back: %v, want it to fail with ErrFull", err)
	}
	wantBothAfterReload(t, h, "its failed write-back, a retry and a reload")
}

// A bulk recording (import-redis's /seen?bulk=true) of a user evicted
// while its write-back is under way keeps its items: the write-back, which
// writes the user without reading what is stored, must not land after the
// bulk recording's write of the same user and replace it.
func TestBulkRecordDuringEvictedUsersWriteBackLosesNothing(t *testing.T) {
	g := newHeldStore(t)
	h := overHeld(t, g, Options{})
	record(t, h, "default", "a", "a1")
	record(t, h, "default", "b", "b1") // evicts a, dirty
	flushed := flushHeld(h, g)
	if _, err := h.RecordBulk("default", "a", []string{"a2"}); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	wantBothAfterReload(t, h, "a bulk recording during its write-back")
}

// With the journal off, a user evicted while dirty stays the truth until
// its write-back lands (see the package's doc): a call for it meanwhile
// takes that entry back, instead of loading the store's older filter and
// writing it back over the evicted one's.
func TestEvictedUserReachableUntilItsWriteBackLandsWithoutJournal(t *testing.T) {
	g := newHeldStore(t)
	h := overHeld(t, g, Options{NoJournal: true})
	record(t, h, "default", "a", "a1")
	record(t, h, "default", "b", "b1") // evicts a, dirty
	flushed := flushHeld(h, g)
	record(t, h, "default", "a", "a2")
	close(g.release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	wantBothAfterReload(t, h, "a call during its write-back")
}

// wantBothAfterReload writes a back, evicts it clean and loads it again,
// then wants both its items, a1 and a2, seen; after says what a went
// through, for the failure.
func wantBothAfterReload(t *testing.T, h *HotSet, after string) {
	t.Helper()
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	record(t, h, "default", "c", "c1") // evicts a, clean
	if got := seen(t, h, "default", "a", "a1", "a2"); !allTrue(got) {
		t.Errorf("a after %s: seen %v, want [true true]", after, got)
	}
}
