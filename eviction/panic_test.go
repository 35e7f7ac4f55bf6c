package eviction

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// panickyStore is the real store whose method named on (append, load,
// writeback or delete) panics for one user while armed: a stand-in for a
// bug met by that user's data.
type panickyStore struct {
	*storage.Store
	user  string
	on    string
	armed atomic.Bool
}

func (p *panickyStore) trip(on, user string) {
	if on == p.on && user == p.user && p.armed.Load() {
		panic("panickyStore: " + on + " " + user)
	}
}

func (p *panickyStore) Append(ns, user string, value []byte, ttl time.Duration) (uint64, error) {
	p.trip("append", user)
	return p.Store.Append(ns, user, value, ttl)
}

func (p *panickyStore) Load(ns, user string) ([]byte, []storage.JournalEntry, error) {
	p.trip("load", user)
	return p.Store.Load(ns, user)
}

func (p *panickyStore) WriteBack(writes []storage.Write, merge storage.MergeFunc) error {
	for _, w := range writes {
		p.trip("writeback", w.User)
	}
	return p.Store.WriteBack(writes, merge)
}

func (p *panickyStore) Delete(ns, user string) error {
	p.trip("delete", user)
	return p.Store.Delete(ns, user)
}

// overPanicky returns a hot set (flushed only when the test says) over st
// in a panickyStore whose method on panics for the user "boom" once armed.
func overPanicky(t *testing.T, st *storage.Store, on string, opts Options) (*HotSet, *panickyStore) {
	t.Helper()
	ps := &panickyStore{Store: st, user: "boom", on: on}
	opts.FlushInterval = time.Hour
	h, err := New(ps, defaultNS, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h, ps
}

// A panic in the middle of a user's call (the API answers it with a 500)
// leaves neither that user locked nor anyone else affected: the user's next
// calls are answered, and what the panicking call did not record stays
// unseen.
func TestPanicInACallLeavesTheUserUsable(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	h, ps := overPanicky(t, st, "append", Options{})
	stuck := false
	defer func() {
		if !stuck { // Close would wait for the user's lock too
			h.Close()
		}
	}()
	record(t, h, "default", "boom", "a")
	record(t, h, "default", "other", "a")
	ps.armed.Store(true)
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Fatal("the armed append did not panic")
			}
		}()
		h.Filter("default", "boom", []string{"b"}, 0, userfilter.RecordReturned)
	}()
	ps.armed.Store(false)
	done := make(chan Result, 1)
	go func() {
		res, err := h.Filter("default", "boom", []string{"a", "b", "c"}, 0, userfilter.RecordReturned)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case res := <-done:
		if fmt.Sprint(res.Unseen) != "[b c]" || res.SeenCount != 1 {
			t.Fatalf("after the panic: %+v, want b and c unseen, a seen", res)
		}
	case <-time.After(10 * time.Second):
		stuck = true
		t.Fatal("the user's next call is still waiting 10 s after the panic: the user stayed locked")
	}
	if got := seen(t, h, "default", "other", "a", "b"); fmt.Sprint(got) != "[true false]" {
		t.Fatalf("another user after the panic: %v", got)
	}
	if st, err := h.User("default", "boom"); err != nil || st.Items != 3 {
		t.Fatalf("the user's stats after the panic: %+v, %v", st, err)
	}
}

// fileLogger logs to a file in a temp dir; read it with logged.
func fileLogger(t *testing.T) (*slog.Logger, string) {
	path := filepath.Join(t.TempDir(), "log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return slog.New(slog.NewTextHandler(f, nil)), path
}

func logged(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// within runs call in a goroutine and returns its error, failing the test
// if it panics or is still running after 10 s (a user left claimed).
func within(t *testing.T, what string, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("%s panicked: %v", what, r)
			}
		}()
		done <- call()
	}()
	select {
	case err := <-done:
		if err != nil && strings.Contains(err.Error(), what+" panicked") {
			t.Fatal(err)
		}
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s is still waiting after 10 s", what)
		return nil
	}
}

// A panic while loading a cold user (a bug met by its stored bytes or its
// journal) fails that call, not the process: the user's load is not left
// claimed, so the next call loads again instead of waiting for good, and
// other users are served meanwhile.
func TestPanicWhileLoadingFailsThatLoadOnly(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	h, err := New(st, defaultNS, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	record(t, h, "default", "boom", "a")
	record(t, h, "default", "other", "a")
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	log, logPath := fileLogger(t)
	h, ps := overPanicky(t, st, "load", Options{Logger: log})
	defer h.Close()
	defer st.Close()
	ps.armed.Store(true)
	for i := range 2 {
		err := within(t, fmt.Sprintf("call %d", i+1), func() error {
			_, err := h.Filter("default", "boom", []string{"a", "b"}, 0, userfilter.RecordReturned)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "panic loading default/boom") {
			t.Fatalf("call %d while loading panics: %v, want the panic as its error", i+1, err)
		}
	}
	if got := seen(t, h, "default", "other", "a", "b"); fmt.Sprint(got) != "[true false]" {
		t.Fatalf("another user meanwhile: %v", got)
	}
	if n := h.Stats().Panics; n != 2 {
		t.Fatalf("%d panics counted, want 2", n)
	}
	if log := logged(t, logPath); strings.Count(log, "stack=") != 1 || !strings.Contains(log, "panickyStore: load boom") {
		t.Fatalf("want one stack logged for the two panics (they are spaced out), got:\n%s", log)
	}
	ps.armed.Store(false)
	if res := record(t, h, "default", "boom", "a", "b", "c"); fmt.Sprint(res.Unseen) != "[b c]" {
		t.Fatalf("once loading works: %v unseen, want b and c (a from before, nothing from the failed calls)", res.Unseen)
	}
}

// Recover, folding the journal a crash left, skips a user whose load
// panics and folds in the others; the service becomes ready all the same.
func TestPanicWhileRecoveringSkipsThatUserOnly(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "boom", "a")
	record(t, fx.h, "default", "other", "a")
	fx.restart(false, Options{})
	h, ps := overPanicky(t, fx.st, "load", Options{})
	ps.armed.Store(true)
	defer h.Close()
	err := within(t, "Recover", func() error { _, err := h.Recover(); return err })
	if err == nil || !strings.Contains(err.Error(), "panic loading default/boom") || !h.Ready() {
		t.Fatalf("Recover: %v, ready %v; want boom's panic as an error, and ready", err, h.Ready())
	}
	if f, j := loadStored(t, fx.st, "other"); f == nil || len(j) != 0 {
		t.Fatalf("other: stored filter %d B, %d journal entries; want it folded in", len(f), len(j))
	}
	if _, j := loadStored(t, fx.st, "boom"); len(j) != 1 {
		t.Fatalf("boom: %d journal entries, want its one kept", len(j))
	}
	ps.armed.Store(false)
	if got := seen(t, h, "default", "boom", "a", "b"); fmt.Sprint(got) != "[true false]" {
		t.Fatalf("boom once loading works: %v", got)
	}
}

func loadStored(t *testing.T, st *storage.Store, user string) ([]byte, []storage.JournalEntry) {
	t.Helper()
	f, j, err := st.Load("default", user)
	if err != nil {
		t.Fatal(err)
	}
	return f, j
}

// A panic while encoding one user's filter for write-back (a bug met by
// its data) leaves that user dirty, its journal kept and the user served,
// while the other users of the round are written; once the encoding
// works the user is written too and nothing is lost.
func TestPanicWhileEncodingFailsThatUserOnly(t *testing.T) {
	orig := appendFilter
	t.Cleanup(func() { appendFilter = orig })
	var broken atomic.Bool
	appendFilter = func(f *userfilter.Filter, dst []byte) ([]byte, error) {
		if broken.Load() && f.Stats(time.Now()).Items >= 3 { // boom's filter only
			panic("a bug in the encoder")
		}
		return orig(f, dst)
	}
	log, logPath := fileLogger(t)
	fx := newFixture(t, Options{Logger: log})
	record(t, fx.h, "default", "boom", "a", "b", "c")
	record(t, fx.h, "default", "other", "a")
	record(t, fx.h, "push", "other", "a")
	broken.Store(true)
	for range 3 {
		if err := within(t, "Flush", fx.h.Flush); err == nil || !strings.Contains(err.Error(), "panic encoding default/boom") {
			t.Fatalf("Flush: %v, want boom's panic as its error", err)
		}
	}
	if d := fx.h.Stats().DirtyUsers; d != 1 {
		t.Fatalf("%d dirty users, want boom alone", d)
	}
	if f, j := loadStored(t, fx.st, "other"); f == nil || len(j) != 0 {
		t.Fatalf("other: stored filter %d B, %d journal entries; want it written", len(f), len(j))
	}
	if f, j := loadStored(t, fx.st, "boom"); f != nil || len(j) != 1 {
		t.Fatalf("boom: stored filter %d B, %d journal entries; want nothing written, its journal kept", len(f), len(j))
	}
	if res := record(t, fx.h, "default", "boom", "a", "d"); fmt.Sprint(res.Unseen) != "[d]" {
		t.Fatalf("boom meanwhile: %v unseen, want d", res.Unseen)
	}
	if log := logged(t, logPath); strings.Count(log, "stack=") != 1 || !strings.Contains(log, "a bug in the encoder") {
		t.Fatalf("want one stack logged for three failed rounds, got:\n%s", log)
	}
	broken.Store(false)
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	if d := fx.h.Stats().DirtyUsers; d != 0 {
		t.Fatalf("%d dirty users once encoding works, want 0", d)
	}
	fx.restart(false, Options{})
	if got := seen(t, fx.h, "default", "boom", "a", "b", "c", "d", "e"); fmt.Sprint(got) != "[true true true true false]" {
		t.Fatalf("boom after a restart: %v", got)
	}
}

// A panic in the store's write-back fails that batch: its users stay dirty
// and are written by a later round, and the process goes on.
func TestPanicInTheStoreWriteBackKeepsTheBatchDirty(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	h, ps := overPanicky(t, st, "writeback", Options{})
	record(t, h, "default", "boom", "a")
	record(t, h, "default", "other", "a")
	ps.armed.Store(true)
	if err := within(t, "Flush", h.Flush); err == nil || !strings.Contains(err.Error(), "panic writing back the batch of") {
		t.Fatalf("Flush: %v, want the panic as its error", err)
	}
	if d := h.Stats().DirtyUsers; d != 2 {
		t.Fatalf("%d dirty users, want both of the failed batch", d)
	}
	ps.armed.Store(false)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, dir)
	defer st.Close()
	for _, u := range []string{"boom", "other"} {
		if f, j := loadStored(t, st, u); f == nil || len(j) != 0 {
			t.Fatalf("%s: stored filter %d B, %d journal entries; want it written at Close", u, len(f), len(j))
		}
	}
}

// A panic in the store while erasing a user fails the erase without
// leaving the user's load slot claimed: the user's next call is answered.
func TestPanicWhileErasingFailsTheErase(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	h, ps := overPanicky(t, st, "delete", Options{})
	defer h.Close()
	record(t, h, "default", "boom", "a")
	ps.armed.Store(true)
	if err := within(t, "Forget", func() error { return h.Forget("default", "boom") }); err == nil || !strings.Contains(err.Error(), "panic erasing default/boom") {
		t.Fatalf("Forget: %v, want the panic as its error", err)
	}
	ps.armed.Store(false)
	err := within(t, "the next call", func() error {
		_, err := h.Filter("default", "boom", []string{"a"}, 0, userfilter.RecordReturned)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A write-back that keeps failing (a full disk, a bug met by one user's
// data) is retried every round, up to 200 a second; the log gets a line at
// most every logEvery, saying how many rounds failed since the last.
func TestWriteBackFailuresAreLoggedSpacedOut(t *testing.T) {
	log, path := fileLogger(t)
	var w flushWarner
	for range 100 {
		w.round(log, errors.New("disk full"))
		w.round(log, nil)
	}
	if n := strings.Count(logged(t, path), "write-back failed"); n != 1 {
		t.Fatalf("%d lines for 100 failed rounds in a row, want 1", n)
	}
	w.last.Add(-int64(logEvery))
	w.round(log, errors.New("disk full"))
	got := logged(t, path)
	if n := strings.Count(got, "write-back failed"); n != 2 || !strings.Contains(got, "failed_rounds=100") {
		t.Fatalf("after logEvery, want a second line counting the 99 rounds not logged and this one:\n%s", got)
	}
}

// TestPanicWhileMergingIsCountedAndFailsThatUserOnly writes back through a
// hot set that is not the store's only writer (it sees no Attach), so
// every write-back merges into what is stored, and meets a panic in one
// user's merge.
func TestPanicWhileMergingIsCountedAndFailsThatUserOnly(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	h, err := New(struct{ Store }{st}, defaultNS, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	record(t, h, "default", "boom", "x") // not ok's item: the two encodings differ
	record(t, h, "default", "ok", "a")
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	boomStored, _ := loadStored(t, st, "boom")
	okStored, _ := loadStored(t, st, "ok")
	orig := mergeFilters
	mergeFilters = func(stored, value []byte) ([]byte, error) {
		if bytes.Equal(stored, boomStored) {
			panic("a merge bug")
		}
		return orig(stored, value)
	}
	defer func() { mergeFilters = orig }()
	record(t, h, "default", "boom", "b")
	record(t, h, "default", "ok", "b")
	err = h.Flush()
	if err == nil || !strings.Contains(err.Error(), "boom") || strings.Contains(err.Error(), "ok") {
		t.Fatalf("flush error %v, want one naming boom only", err)
	}
	if got := h.Stats().Panics; got != 1 {
		t.Errorf("panics %d, want 1", got)
	}
	if f, _ := loadStored(t, st, "ok"); bytes.Equal(f, okStored) {
		t.Error("the other user was not written back")
	}
	if f, _ := loadStored(t, st, "boom"); !bytes.Equal(f, boomStored) {
		t.Error("the failed user's stored filter changed")
	}
	mergeFilters = orig
	if err := h.Flush(); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if f, _ := loadStored(t, st, "boom"); bytes.Equal(f, boomStored) {
		t.Error("the failed user was not written back on the retry")
	}
}
