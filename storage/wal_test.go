package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/seenapi/seenapi/storage/storagetest"
)

// crashCopy copies the open store's directory as a crash would leave it
// (what the process had written, nothing closed or flushed by Close) and
// opens the copy.
func crashCopy(t *testing.T, s *Store) *Store {
	t.Helper()
	return openTest(t, s.opts.WithDir(crashCopyDir(t, s)))
}

// crashCopyDir is crashCopy without the open: the copy's directory.
func crashCopyDir(t *testing.T, s *Store) string {
	t.Helper()
	s.wal.removed()
	dst := t.TempDir()
	storagetest.CopyAsACrashLeaves(t, s.opts.Dir, dst)
	return dst
}

// removed waits until removeLoop has deleted every segment collected so
// far, so that tests see the journal's files as a crash after it would.
func (w *wal) removed() {
	q := &w.rm
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.segs) > 0 || q.busy {
		q.cond.Wait()
	}
}

func segmentFiles(t *testing.T, s *Store) []string {
	t.Helper()
	s.wal.removed()
	names, err := filepath.Glob(filepath.Join(s.opts.Dir, walDir, "*"+walSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestJournalSurvivesACrash(t *testing.T) {
	s := openTest(t, testOptions(t))
	a := mustAppend(t, s, "feed", "u1", "one")
	b := mustAppend(t, s, "feed", "u1", "two")
	c := mustAppend(t, s, "feed", "u2", "three")
	r := crashCopy(t, s)
	if _, j := mustLoad(t, r, "feed", "u1"); !slices.Equal(journalValues(j), []string{fmtEntry(a, "one"), fmtEntry(b, "two")}) {
		t.Errorf("u1 after the crash: %v", journalValues(j))
	}
	if _, j := mustLoad(t, r, "feed", "u2"); !slices.Equal(journalValues(j), []string{fmtEntry(c, "three")}) {
		t.Errorf("u2 after the crash: %v", journalValues(j))
	}
	if d := mustAppend(t, r, "feed", "u2", "four"); d <= c {
		t.Errorf("sequence after the crash %d, not above %d", d, c)
	}
}

// A store tells whether the process that had it open before ended
// without closing it: after a crash it does, after a Close it does not,
// whatever its journal holds.
func TestOpenedAfterCrashTellsACrashFromAClose(t *testing.T) {
	opts := testOptions(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.OpenedAfterCrash() {
		t.Error("a new store: opened after a crash")
	}
	mustAppend(t, s, "feed", "u1", "one") // a record left in the journal at Close
	r := crashCopy(t, s)
	if !r.OpenedAfterCrash() {
		t.Error("the store a crash left: not opened after a crash")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, j := mustLoad(t, s, "feed", "u1"); len(j) != 1 {
		t.Fatalf("the record left at Close: journal %v", journalValues(j))
	}
	if s.OpenedAfterCrash() {
		t.Error("a store closed with a record in its journal: opened after a crash")
	}
}

// A store opened after a crash and closed with KeepCrashMark (an offline
// backup or restore, which folds nothing) is opened after a crash again,
// until a plain Close; KeepCrashMark on a store not opened after a crash
// changes nothing.
func TestKeepCrashMarkLeavesTheCrashToTheNextOpen(t *testing.T) {
	s := openTest(t, testOptions(t))
	mustAppend(t, s, "feed", "u1", "one")
	r := crashCopy(t, s)
	opts := r.opts
	for i, tc := range []struct{ want, keep bool }{
		{want: true, keep: true},   // the crash copy
		{want: true, keep: false},  // after a close with KeepCrashMark
		{want: false, keep: true},  // after a plain close
		{want: false, keep: false}, // after KeepCrashMark of a store not crashed
	} {
		if i > 0 {
			var err error
			if r, err = Open(opts); err != nil {
				t.Fatal(err)
			}
		}
		if r.OpenedAfterCrash() != tc.want {
			t.Errorf("open %d: opened after a crash %v, want %v", i+1, r.OpenedAfterCrash(), tc.want)
		}
		if tc.keep {
			r.KeepCrashMark()
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func fmtEntry(seq uint64, v string) string {
	return journalValues([]JournalEntry{{Seq: seq, Value: []byte(v)}})[0]
}

// A covered record stays in its segment while other users' records keep the
// segment alive; the erase record must keep it from bringing a deleted
// user back after a crash.
func TestDeletedUserStaysDeletedAfterACrash(t *testing.T) {
	s := openTest(t, testOptions(t))
	seq := mustAppend(t, s, "feed", "gone", "old item")
	other := mustAppend(t, s, "feed", "kept", "item")
	if err := s.WriteBack([]Write{{NS: "feed", User: "gone", Value: []byte("filter"), UpTo: seq}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("feed", "gone"); err != nil {
		t.Fatal(err)
	}
	r := crashCopy(t, s)
	if f, j := mustLoad(t, r, "feed", "gone"); f != nil || len(j) != 0 {
		t.Errorf("deleted user back after a crash: filter %q journal %v", f, journalValues(j))
	}
	if _, j := mustLoad(t, r, "feed", "kept"); !slices.Equal(journalValues(j), []string{fmtEntry(other, "item")}) {
		t.Errorf("other user's journal after the crash: %v", journalValues(j))
	}
}

func TestReplacingWriteBackVoidsOlderRecordsAfterACrash(t *testing.T) {
	s := openTest(t, testOptions(t))
	first := mustAppend(t, s, "feed", "u", "before")
	merge := func(stored, value []byte) ([]byte, error) { return append(stored, value...), nil }
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("a"), UpTo: first}}, merge); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("replaced")}}, nil); err != nil {
		t.Fatal(err)
	}
	after := mustAppend(t, s, "feed", "u", "after")
	r := crashCopy(t, s)
	f, j := mustLoad(t, r, "feed", "u")
	if string(f) != "replaced" || !slices.Equal(journalValues(j), []string{fmtEntry(after, "after")}) {
		t.Errorf("after a crash: filter %q journal %v, want the replacement and only the later record", f, journalValues(j))
	}
}

func TestTornJournalTailIsCutAndTheRestKept(t *testing.T) {
	opts := testOptions(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	a := mustAppend(t, s, "feed", "u", "kept")
	segs := segmentFiles(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	last := segs[len(segs)-1]
	// Half a record: a length promising more bytes than follow.
	f, err := os.OpenFile(last, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := binary.LittleEndian.AppendUint32(nil, 100)
	if _, err := f.Write(append(torn, 1, 2, 3, 4, 5, 6)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before, _ := os.Stat(last)

	r := openTest(t, opts)
	if _, j := mustLoad(t, r, "feed", "u"); !slices.Equal(journalValues(j), []string{fmtEntry(a, "kept")}) {
		t.Errorf("journal after a torn write: %v", journalValues(j))
	}
	if after, _ := os.Stat(last); after.Size() >= before.Size() {
		t.Errorf("torn segment not truncated: %d bytes, was %d", after.Size(), before.Size())
	}
	b := mustAppend(t, r, "feed", "u", "next")
	if _, j := mustLoad(t, r, "feed", "u"); !slices.Equal(journalValues(j), []string{fmtEntry(a, "kept"), fmtEntry(b, "next")}) {
		t.Errorf("journal after appending past the cut: %v", journalValues(j))
	}
}

func TestCoveredSegmentsAreDeleted(t *testing.T) {
	s := openTest(t, testOptions(t).WithJournalSegmentBytes(1<<10))
	var writes []Write
	for u := range 50 {
		user := "user" + strings.Repeat("x", u%7)
		var seq uint64
		for range 4 {
			seq = mustAppend(t, s, "feed", user+string(rune('a'+u)), strings.Repeat("v", 40))
		}
		writes = append(writes, Write{NS: "feed", User: user + string(rune('a'+u)), Value: []byte("f"), UpTo: seq})
	}
	if n := len(segmentFiles(t, s)); n < 5 {
		t.Fatalf("%d segments for 200 records of 1 KiB segments; want several", n)
	}
	if err := s.WriteBack(writes, nil); err != nil {
		t.Fatal(err)
	}
	// The active segment stays, and erase records (a replacing write-back
	// writes them) keep the oldest segment holding them.
	if n := len(segmentFiles(t, s)); n > 2 {
		t.Errorf("%d segments left after every record was covered; want at most 2", n)
	}
	// Records of another user keep their segment.
	seq := mustAppend(t, s, "feed", "late", "x")
	for range 40 {
		mustAppend(t, s, "feed", "filler", strings.Repeat("v", 40))
	}
	if err := s.WriteBack([]Write{{NS: "feed", User: "filler", Value: []byte("f"), UpTo: 1 << 62}},
		func(a, b []byte) ([]byte, error) { return b, nil }); err != nil {
		t.Fatal(err)
	}
	if _, j := mustLoad(t, s, "feed", "late"); !slices.Equal(journalValues(j), []string{fmtEntry(seq, "x")}) {
		t.Errorf("uncovered record lost with its segment: %v", journalValues(j))
	}
}

// Deleting a covered segment does not hold up appends: the deletion waits
// here, as an unlink of a large file can, and appends go on meanwhile.
func TestSegmentDeletionDoesNotHoldUpAppends(t *testing.T) {
	s := openTest(t, testOptions(t).WithJournalSegmentBytes(1<<10))
	unlinking, release := make(chan string, 16), make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(let) // before the store's Close, which waits for deletions
	s.wal.rm.mu.Lock()
	s.wal.rm.unlink = func(path string) error {
		unlinking <- path
		<-release
		return os.Remove(path)
	}
	s.wal.rm.mu.Unlock()
	var seq uint64
	for range 40 {
		seq = mustAppend(t, s, "feed", "u", strings.Repeat("v", 40))
	}
	covered := make(chan error, 1)
	go func() { covered <- s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("f"), UpTo: seq}}, nil) }()
	var path string
	select {
	case path = <-unlinking:
	case <-time.After(10 * time.Second):
		t.Fatal("no segment deleted after every record of it was covered")
	}
	appended := make(chan error, 1)
	go func() {
		_, err := s.Append("feed", "other", []byte("x"), 0)
		appended <- err
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		let()
		t.Fatal("an append waited for a segment's deletion")
	}
	if err := <-covered; err != nil {
		t.Fatal(err)
	}
	let()
	s.wal.removed()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there after its deletion was let through: %v", path, err)
	}
}

// Dead segments are deleted oldest first, as they were collected: a crash
// between two deletions must never leave a user's records while the
// segment of the erase record voiding them is gone.
func TestSegmentsAreDeletedOldestFirst(t *testing.T) {
	s := openTest(t, testOptions(t).WithJournalSegmentBytes(1<<10))
	var mu sync.Mutex
	var order []string
	s.wal.rm.mu.Lock()
	s.wal.rm.unlink = func(path string) error {
		mu.Lock()
		order = append(order, filepath.Base(path))
		mu.Unlock()
		return os.Remove(path)
	}
	s.wal.rm.mu.Unlock()
	for range 40 {
		mustAppend(t, s, "feed", "gone", strings.Repeat("v", 40))
	}
	if err := s.Delete("feed", "gone"); err != nil {
		t.Fatal(err)
	}
	var seq uint64
	for range 80 {
		seq = mustAppend(t, s, "feed", "filler", strings.Repeat("v", 40))
	}
	if err := s.WriteBack([]Write{{NS: "feed", User: "filler", Value: []byte("f"), UpTo: seq}}, nil); err != nil {
		t.Fatal(err)
	}
	s.wal.removed()
	mu.Lock()
	defer mu.Unlock()
	if len(order) < 4 {
		t.Fatalf("%d segments deleted; want several", len(order))
	}
	if !slices.IsSorted(order) { // ids are zero-padded: names sort as numbers
		t.Errorf("segments deleted in the order %v; want oldest first", order)
	}
}

// A store of format 1 kept its journal in Badger; opening it moves the
// records into the journal files.
func TestFormat1JournalMovesToTheJournalFiles(t *testing.T) {
	opts := testOptions(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := badger.Open(badger.DefaultOptions(opts.Dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(keyFormat, binary.AppendUvarint(nil, 1)); err != nil {
			return err
		}
		if err := txn.Set(journalKey(nil, "feed", "u", 7), []byte("seven")); err != nil {
			return err
		}
		return txn.Set(journalKey(nil, "feed", "u", 9), []byte("nine"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	r := openTest(t, opts)
	if _, j := mustLoad(t, r, "feed", "u"); !slices.Equal(journalValues(j), []string{"7:seven", "9:nine"}) {
		t.Errorf("journal after the upgrade: %v", journalValues(j))
	}
	if seq := mustAppend(t, r, "feed", "u", "ten"); seq <= 9 {
		t.Errorf("sequence %d after moving records up to 9", seq)
	}
	err = r.db.View(func(txn *badger.Txn) error {
		if hasPrefix(txn, []byte{prefixJournal}) {
			t.Error("journal keys left in Badger")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ver := formatVersion(t, r); ver != FormatVersion {
		t.Errorf("format version %d after the upgrade, want %d", ver, FormatVersion)
	}
}

// formatVersion reads the store's format version.
func formatVersion(t *testing.T, s *Store) (ver uint64) {
	t.Helper()
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keyFormat)
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { ver, _ = binary.Uvarint(v); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return ver
}

func TestCoveredRecordsStayCoveredAfterARestartOrACrash(t *testing.T) {
	opts := testOptions(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	covered := mustAppend(t, s, "feed", "u", "in the filter")
	mustAppend(t, s, "feed", "other", "keeps the segment")
	merge := func(stored, value []byte) ([]byte, error) { return value, nil }
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("f"), UpTo: covered}}, merge); err != nil {
		t.Fatal(err)
	}
	pending := mustAppend(t, s, "feed", "u", "after the write-back")
	want := []string{fmtEntry(pending, "after the write-back")}
	if _, j := mustLoad(t, crashCopy(t, s), "feed", "u"); !slices.Equal(journalValues(j), want) {
		t.Errorf("after a crash: journal %v, want %v", journalValues(j), want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, j := mustLoad(t, openTest(t, opts), "feed", "u"); !slices.Equal(journalValues(j), want) {
		t.Errorf("after a restart: journal %v, want %v", journalValues(j), want)
	}
}

// A load that runs while a write-back of the same user commits must see
// every record one way or the other: in the stored filter or still in the
// journal. The write-back retires records only after its filter is visible,
// so Load reads the journal first.
func TestLoadDuringWriteBackMissesNothing(t *testing.T) {
	s := openTest(t, testOptions(t))
	const rounds = 2000
	var written atomic.Int64 // records appended and acknowledged so far
	var stop atomic.Bool
	done := make(chan struct{})
	defer func() { stop.Store(true); <-done }()
	go func() {
		defer close(done)
		// The filter holds record i as "i;" (overwritten, not merged: each
		// value holds every record so far).
		var value []byte
		for i := 1; i <= rounds && !stop.Load(); i++ {
			rec := fmt.Sprintf("%d;", i)
			seq, err := s.Append("feed", "u", []byte(rec), 0)
			if err != nil {
				t.Errorf("Append: %v", err)
				return
			}
			written.Store(int64(i))
			value = append(value, rec...)
			if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: slices.Clone(value), UpTo: seq}}, nil); err != nil {
				t.Errorf("WriteBack: %v", err)
				return
			}
		}
	}()
	loads := 0
	for {
		select {
		case <-done:
			if loads == 0 {
				t.Error("no load ran")
			}
			return
		default:
		}
		want := written.Load()
		f, j, err := s.Load("feed", "u")
		if err != nil {
			t.Errorf("Load: %v", err)
			return
		}
		loads++
		have := map[string]bool{}
		for _, r := range strings.Split(string(f), ";") {
			have[r] = true
		}
		for _, e := range j {
			have[strings.TrimSuffix(string(e.Value), ";")] = true
		}
		for i := int64(1); i <= want; i++ {
			if !have[strconv.FormatInt(i, 10)] {
				t.Errorf("load %d: record %d of %d acknowledged is neither stored nor journalled (%d stored bytes, journal %v)",
					loads, i, want, len(f), journalValues(j))
				return
			}
		}
	}
}

// The journal's index of pending users shrinks once a burst of them has
// been written back, instead of keeping the burst's size for good.
func TestJournalIndexShrinksAfterABurst(t *testing.T) {
	w, err := openWAL(t.TempDir(), false, 64<<20, slog.New(slog.DiscardHandler), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	base := heap()
	// 40,000 users: the index is rebuilt with 5,000 left and with 625,
	// whose tables stay (under shrink's floor of 4,096); 100,000 proved
	// the same in 2.5 times as long.
	const users = 40_000
	seq := uint64(0)
	recs := make([]walAppend, 0, 1000)
	for u := 0; u < users; u += 1000 {
		recs = recs[:0]
		for i := u; i < u+1000; i++ {
			seq++
			recs = append(recs, walAppend{seq: seq, ns: "feed", user: fmt.Sprintf("user-%06d", i), value: []byte("v")})
		}
		if err := w.write(recs); err != nil {
			t.Fatal(err)
		}
	}
	for i := range users - 10 {
		w.cover("feed", fmt.Sprintf("user-%06d", i), seq) // every record written
	}
	left := heap()
	if w.index.len() != 10 {
		t.Fatalf("%d users pending, want 10", w.index.len())
	}
	// The index's tables for 40,000 users kept 4.9 MB; rebuilt, 0.1 MB.
	if left > base+1<<20 {
		t.Errorf("heap %d B more than when empty with 10 users pending after %d: the index kept its size", left-base, users)
	}
}

// A write-back keeps the user's cover mark at the end of the filter's value,
// in the one Badger entry: no cover key is written, and the filter reads
// back without it.
func TestWriteBackKeepsTheCoverMarkWithTheFilter(t *testing.T) {
	s := openTest(t, testOptions(t))
	covered := mustAppend(t, s, "feed", "u", "in the filter")
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("filter"), UpTo: covered}}, nil); err != nil {
		t.Fatal(err)
	}
	err := s.db.View(func(txn *badger.Txn) error {
		if hasPrefix(txn, []byte{prefixCover}) {
			t.Error("a cover key was written")
		}
		item, err := txn.Get(filterKey(nil, "feed", "u"))
		if err != nil {
			return err
		}
		f, mark, err := readFilter(item)
		if string(f) != "filter" || mark != covered || err != nil {
			t.Errorf("stored filter %q, cover mark %d, %v; want %q and %d", f, mark, err, "filter", covered)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if f, j := mustLoad(t, s, "feed", "u"); string(f) != "filter" || len(j) != 0 {
		t.Errorf("loaded %q and journal %v", f, journalValues(j))
	}
}

// A store of format 2 kept cover marks under keys of their own; opened by
// this build, they still cover what they covered, and the format is raised.
func TestFormat2CoverKeysStillCover(t *testing.T) {
	s := openTest(t, testOptions(t))
	covered := mustAppend(t, s, "feed", "u", "in the filter")
	pending := mustAppend(t, s, "feed", "u", "after the write-back")
	err := s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(keyFormat, binary.AppendUvarint(nil, 2)); err != nil {
			return err
		}
		if err := txn.Set(filterKey(nil, "feed", "u"), []byte("format 2 filter")); err != nil {
			return err
		}
		return txn.Set(coverKey(nil, "feed", "u"), binary.AppendUvarint(nil, covered))
	})
	if err != nil {
		t.Fatal(err)
	}
	r := crashCopy(t, s)
	want := []string{fmtEntry(pending, "after the write-back")}
	if f, j := mustLoad(t, r, "feed", "u"); string(f) != "format 2 filter" || !slices.Equal(journalValues(j), want) {
		t.Errorf("after opening the format 2 store: filter %q journal %v, want %v", f, journalValues(j), want)
	}
	if ver := formatVersion(t, r); ver != FormatVersion {
		t.Errorf("format version %d after opening, want %d", ver, FormatVersion)
	}
	// A write-back now moves the mark into the value; the old key, behind
	// it, changes nothing.
	if err := r.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("format 3 filter"), UpTo: pending}}, nil); err != nil {
		t.Fatal(err)
	}
	later := mustAppend(t, r, "feed", "u", "later")
	if f, j := mustLoad(t, crashCopy(t, r), "feed", "u"); string(f) != "format 3 filter" ||
		!slices.Equal(journalValues(j), []string{fmtEntry(later, "later")}) {
		t.Errorf("after a format 3 write-back and a crash: filter %q journal %v", f, journalValues(j))
	}
}

// A value flagged as ending with a cover mark but too short to hold one is
// that user's corruption, reported by Load; other users and the store's
// opening are not hurt.
func TestTruncatedCoverMarkFailsOnlyThatUser(t *testing.T) {
	s := openTest(t, testOptions(t))
	mustAppend(t, s, "feed", "bad", "record")
	if err := s.WriteBack([]Write{{NS: "feed", User: "good", Value: []byte("fine")}}, nil); err != nil {
		t.Fatal(err)
	}
	err := s.db.Update(func(txn *badger.Txn) error {
		return txn.SetEntry(badger.NewEntry(filterKey(nil, "feed", "bad"), []byte{1, 2, 3}).WithMeta(metaCoverMark))
	})
	if err != nil {
		t.Fatal(err)
	}
	r := crashCopy(t, s) // the replay reads the bad user's mark
	for _, st := range []*Store{s, r} {
		if _, _, err := st.Load("feed", "bad"); !errors.Is(err, ErrCorrupt) {
			t.Errorf("load of the damaged user: %v, want ErrCorrupt", err)
		}
		if f, _ := mustLoad(t, st, "feed", "good"); string(f) != "fine" {
			t.Errorf("the other user's filter: %q", f)
		}
	}
}

// A store closed with every journal record covered (a clean stop, every
// user written back) leaves no segment: the next start replays nothing,
// and an earlier build opened on the directory meets no record of a later
// form. Its sequence numbers still grow. A store closed with a record
// still pending keeps it.
func TestCleanCloseLeavesNoJournal(t *testing.T) {
	opts := testOptions(t)
	s := openTest(t, opts)
	seq := mustAppend(t, s, "feed", "u", "v")
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("f"), UpTo: seq}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(opts.Dir, walDir, "*"+walSuffix)); len(files) != 0 {
		t.Fatalf("segments left after a clean close: %v", files)
	}
	s = openTest(t, opts)
	next := mustAppend(t, s, "feed", "u", "w")
	if next <= seq {
		t.Fatalf("sequence number %d after %d", next, seq)
	}
	if f, j := mustLoad(t, s, "feed", "u"); string(f) != "f" || !slices.Equal(journalValues(j), []string{fmtEntry(next, "w")}) {
		t.Fatalf("after the restart: filter %q, journal %v", f, journalValues(j))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if f, j := mustLoad(t, openTest(t, opts), "feed", "u"); string(f) != "f" || !slices.Equal(journalValues(j), []string{fmtEntry(next, "w")}) {
		t.Fatalf("a pending record lost at a close: filter %q, journal %v", f, journalValues(j))
	}
}

// A crash between the creation of one of Badger's memtable or value-log
// files and its sizing, or between the truncation and the removal that
// delete one, leaves it empty, and Badger refuses to open a directory
// holding one ("while opening memtables err: while opening fid:
// 1 err: Create a new file", upstream dgraph-io/badger#2207): the start
// after such a crash must open the store, with what it held.
func TestEmptyBadgerFilesACrashLeftDoNotStopTheOpen(t *testing.T) {
	s := openTest(t, testOptions(t))
	seq := mustAppend(t, s, "feed", "written", "item")
	if err := s.WriteBack([]Write{{NS: "feed", User: "written", Value: []byte("filter"), UpTo: seq}}, nil); err != nil {
		t.Fatal(err)
	}
	pending := mustAppend(t, s, "feed", "pending", "item")
	dir := crashCopyDir(t, s)
	for _, pattern := range []string{"*.mem", "*.vlog"} {
		names, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil || len(names) == 0 {
			t.Fatalf("no %s file in the store (%v)", pattern, err)
		}
		// The next file Badger would make, created and not yet written.
		last := filepath.Base(names[len(names)-1])
		digits := strings.Index(last, ".")
		fid, err := strconv.Atoi(last[:digits])
		if err != nil {
			t.Fatal(err)
		}
		empty := fmt.Sprintf("%0*d%s", digits, fid+1, last[digits:])
		if err := os.WriteFile(filepath.Join(dir, empty), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Open(s.opts.WithDir(dir))
	if err != nil {
		t.Fatalf("Open of a store with the empty files a crash left: %v", err)
	}
	defer r.Close()
	if f, _ := mustLoad(t, r, "feed", "written"); string(f) != "filter" {
		t.Errorf("the filter written back: %q", f)
	}
	if _, j := mustLoad(t, r, "feed", "pending"); !slices.Equal(journalValues(j), []string{fmtEntry(pending, "item")}) {
		t.Errorf("the journal after the crash: %v", journalValues(j))
	}
	if err := r.WriteBack([]Write{{NS: "feed", User: "pending", Value: []byte("filter2"), UpTo: pending}}, nil); err != nil {
		t.Fatalf("a write-back after the open: %v", err)
	}
}

// One record damaged in the middle of the journal (a bad sector, a bit
// flipped) loses that record only: the records after it, other users'
// acknowledged calls, are replayed and kept, in the active segment (which
// a torn tail would have cut) as in an earlier one.
func TestADamagedJournalRecordLosesThatRecordOnly(t *testing.T) {
	for _, damage := range []struct {
		name string
		at   func(rec int) int // offset of the byte flipped, given the record's
	}{
		{"payload", func(rec int) int { return rec + walHeader + 2 }},
		{"checksum", func(rec int) int { return rec + 5 }},
		{"length", func(rec int) int { return rec + 1 }},
	} {
		for _, last := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, last segment %v", damage.name, last), func(t *testing.T) {
				opts := testOptions(t)
				s, err := Open(opts)
				if err != nil {
					t.Fatal(err)
				}
				before := mustAppend(t, s, "feed", "before", "item-of-before")
				mustAppend(t, s, "feed", "victim", "item-of-victim")
				after := mustAppend(t, s, "feed", "after", "item-of-after")
				segs := segmentFiles(t, s)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				path := segs[len(segs)-1]
				if !last {
					// A later segment, as a rotation leaves.
					id, _ := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), walSuffix), 10, 64)
					if err := os.WriteFile(s.wal.segPath(id+1), []byte(walMagic), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				v := strings.Index(string(data), "item-of-victim")
				rec := recordStart(t, data, v)
				data[damage.at(rec)] ^= 0x5a
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}

				// What restore and check read of a directory, as Open will.
				if got, err := PeekNamespaces(opts, func(string) bool { return false }, 0, Hidden{}); err != nil ||
					!slices.Equal(got, []NamespaceUsers{{Namespace: "feed", Users: 2}}) {
					t.Errorf("PeekNamespaces: %+v, %v; want feed's 2 users with an intact record", got, err)
				}
				r := openTest(t, opts)
				if _, j := mustLoad(t, r, "feed", "before"); !slices.Equal(journalValues(j), []string{fmtEntry(before, "item-of-before")}) {
					t.Errorf("before the damage: %v", journalValues(j))
				}
				if _, j := mustLoad(t, r, "feed", "after"); !slices.Equal(journalValues(j), []string{fmtEntry(after, "item-of-after")}) {
					t.Errorf("after the damage: %v, want %v", journalValues(j), fmtEntry(after, "item-of-after"))
				}
				if _, j := mustLoad(t, r, "feed", "victim"); len(j) != 0 {
					t.Errorf("the damaged record read back: %v", journalValues(j))
				}
			})
		}
	}
}

// recordStart returns the offset of the record of data that holds the
// byte at off.
func recordStart(t *testing.T, data []byte, off int) int {
	t.Helper()
	for at := len(walMagic); at < len(data); {
		n := walHeader + int(binary.LittleEndian.Uint32(data[at:]))
		if off < at+n {
			return at
		}
		at += n
	}
	t.Fatalf("no record holds offset %d", off)
	return 0
}
