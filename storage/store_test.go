package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

func TestLoadUnknownUserIsEmpty(t *testing.T) {
	s := openTest(t, testOptions(t))
	f, j := mustLoad(t, s, "feed", "nobody")
	if f != nil || j != nil {
		t.Fatalf("Load of unknown user = %q, %v; want nil, nil", f, j)
	}
}

func TestAppendLoadWriteBackDeleteRoundTrip(t *testing.T) {
	s := openTest(t, testOptions(t))
	s1 := mustAppend(t, s, "feed", "u1", "a")
	s2 := mustAppend(t, s, "feed", "u1", "b")
	if s2 <= s1 {
		t.Fatalf("second seq %d not above first %d", s2, s1)
	}
	f, j := mustLoad(t, s, "feed", "u1")
	if f != nil {
		t.Fatalf("filter before write-back = %q, want nil", f)
	}
	if got, want := journalValues(j), []string{fmt.Sprint(s1, ":a"), fmt.Sprint(s2, ":b")}; !slices.Equal(got, want) {
		t.Fatalf("journal = %v, want %v", got, want)
	}

	if err := s.WriteBack([]Write{{NS: "feed", User: "u1", Value: []byte("filter"), UpTo: s2}}, nil); err != nil {
		t.Fatalf("WriteBack: %v", err)
	}
	f, j = mustLoad(t, s, "feed", "u1")
	if string(f) != "filter" || len(j) != 0 {
		t.Fatalf("after write-back: filter %q, journal %v; want \"filter\", none", f, journalValues(j))
	}

	if err := s.Delete("feed", "u1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	f, j = mustLoad(t, s, "feed", "u1")
	if f != nil || len(j) != 0 {
		t.Fatalf("after Delete: filter %q, journal %v; want nothing", f, journalValues(j))
	}
}

func TestLoadReturnsCopies(t *testing.T) {
	s := openTest(t, testOptions(t))
	mustAppend(t, s, "feed", "u", "journal")
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("filter")}}, nil); err != nil {
		t.Fatal(err)
	}
	f, j := mustLoad(t, s, "feed", "u")
	copy(f, "XXXXXX")
	copy(j[0].Value, "XXXXXXX")
	f, j = mustLoad(t, s, "feed", "u")
	if string(f) != "filter" || string(j[0].Value) != "journal" {
		t.Fatalf("stored values changed through returned slices: %q, %q", f, j[0].Value)
	}
}

// The users below share prefixes of their ids and namespaces; each must see
// only its own keys.
var prefixUsers = [][2]string{
	{"n", "a"}, {"n", "ab"}, {"n", "abc"}, {"n", "b"},
	{"na", "b"}, {"n2", "ab"}, {"n", "a\x00"}, {"n\x01a", "b"},
}

func TestJournalDoesNotLeakAcrossPrefixUsersOrNamespaces(t *testing.T) {
	s := openTest(t, testOptions(t))
	seqs := map[[2]string]uint64{}
	for _, u := range prefixUsers {
		seqs[u] = mustAppend(t, s, u[0], u[1], u[0]+"/"+u[1])
	}
	for _, u := range prefixUsers {
		_, j := mustLoad(t, s, u[0], u[1])
		want := []string{fmt.Sprintf("%d:%s/%s", seqs[u], u[0], u[1])}
		if got := journalValues(j); !slices.Equal(got, want) {
			t.Errorf("journal of %q/%q = %q, want %q", u[0], u[1], got, want)
		}
	}
}

func TestWriteBackAndDeleteTouchOnlyTheirUser(t *testing.T) {
	s := openTest(t, testOptions(t))
	for _, u := range prefixUsers {
		mustAppend(t, s, u[0], u[1], "j")
		if err := s.WriteBack([]Write{{NS: u[0], User: u[1], Value: []byte(u[0] + "/" + u[1])}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Cover and then delete ("n", "ab"): every other user keeps filter and journal.
	if err := s.WriteBack([]Write{{NS: "n", User: "ab", Value: []byte("new"), UpTo: 1 << 60}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("n", "ab"); err != nil {
		t.Fatal(err)
	}
	for _, u := range prefixUsers {
		f, j := mustLoad(t, s, u[0], u[1])
		if u == [2]string{"n", "ab"} {
			if f != nil || len(j) != 0 {
				t.Errorf("deleted user still has filter %q, journal %v", f, journalValues(j))
			}
			continue
		}
		if string(f) != u[0]+"/"+u[1] || len(j) != 1 {
			t.Errorf("%q/%q: filter %q, %d journal entries; want its own filter and 1 entry", u[0], u[1], f, len(j))
		}
	}
}

func TestWriteBackDeletesExactlyTheCoveredJournal(t *testing.T) {
	s := openTest(t, testOptions(t))
	var seqs []uint64
	for i := range 5 {
		seqs = append(seqs, mustAppend(t, s, "feed", "u", fmt.Sprint("v", i)))
	}
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("f"), UpTo: seqs[2]}}, nil); err != nil {
		t.Fatal(err)
	}
	_, j := mustLoad(t, s, "feed", "u")
	want := []string{fmt.Sprint(seqs[3], ":v3"), fmt.Sprint(seqs[4], ":v4")}
	if got := journalValues(j); !slices.Equal(got, want) {
		t.Fatalf("journal after write-back up to %d = %v, want %v", seqs[2], got, want)
	}
}

func TestWriteBackMergeIsCalledWithTheStoredValue(t *testing.T) {
	s := openTest(t, testOptions(t))
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte{0x0f}}}, orMerge); err != nil {
		t.Fatal(err)
	}
	var calls [][2]string
	merge := func(stored, value []byte) ([]byte, error) {
		calls = append(calls, [2]string{string(stored), string(value)})
		return orMerge(stored, value)
	}
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte{0xf0}}}, merge); err != nil {
		t.Fatal(err)
	}
	if want := [][2]string{{"\x0f", "\xf0"}}; !slices.Equal(calls, want) {
		t.Fatalf("merge calls = %q, want %q", calls, want)
	}
	if f, _ := mustLoad(t, s, "feed", "u"); string(f) != "\xff" {
		t.Fatalf("stored %x, want ff", f)
	}
}

// A merging write-back keeps the user's value as long as the longer-lived
// of the stored value and the write: in a windowed namespace the union
// holds the stored value's items too, maybe of newer time buckets than the
// writer's (another writer's), which the write's own expiry would drop
// from the store before they leave their window. A write whose value
// covers the stored one (the merge is the value itself) keeps its own.
func TestWriteBackMergedValueExpiresWithTheLaterOfBoth(t *testing.T) {
	s := openTest(t, testOptions(t))
	if err := s.WriteBack([]Write{
		{NS: "feed", User: "newer", Value: []byte{0xf0}, TTL: 100 * time.Hour},
		{NS: "feed", User: "forever", Value: []byte{0xf0}},
		{NS: "feed", User: "covered", Value: []byte{0xf0}, TTL: 100 * time.Hour},
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteBack([]Write{
		{NS: "feed", User: "newer", Value: []byte{0x0f}, TTL: time.Hour},
		{NS: "feed", User: "forever", Value: []byte{0x0f}, TTL: time.Hour},
		{NS: "feed", User: "covered", Value: []byte{0xff}, TTL: time.Hour},
	}, orMerge); err != nil {
		t.Fatal(err)
	}
	soon := uint64(time.Now().Add(2 * time.Hour).Unix())
	if at, v := storedExpiry(t, s, "feed", "newer"); v != "ff" || at < soon {
		t.Errorf("merged value %s expires at %v, want ff expiring in about 100 h, as the stored value", v, time.Unix(int64(at), 0))
	}
	if at, v := storedExpiry(t, s, "feed", "forever"); v != "ff" || at != 0 {
		t.Errorf("merged value %s expires at %v, want ff never expiring, as the stored value", v, time.Unix(int64(at), 0))
	}
	if at, v := storedExpiry(t, s, "feed", "covered"); v != "ff" || at == 0 || at > soon {
		t.Errorf("covering value %s expires at %v, want ff expiring in about 1 h, its own expiry", v, time.Unix(int64(at), 0))
	}
}

// storedExpiry returns when the user's stored filter expires (0: never)
// and its value, in hex (without a cover mark).
func storedExpiry(t *testing.T, s *Store, ns, user string) (uint64, string) {
	t.Helper()
	var at uint64
	var value []byte
	if err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(filterKey(nil, ns, user))
		if err != nil {
			return err
		}
		at = item.ExpiresAt()
		value, _, err = readFilter(item)
		return err
	}); err != nil {
		t.Fatalf("%s/%s: %v", ns, user, err)
	}
	return at, fmt.Sprintf("%x", value)
}

func TestWriteBackWithoutMergeReplaces(t *testing.T) {
	s := openTest(t, testOptions(t))
	for _, v := range []string{"old", "new"} {
		if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte(v)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if f, _ := mustLoad(t, s, "feed", "u"); string(f) != "new" {
		t.Fatalf("stored %q, want \"new\"", f)
	}
}

// A merge that fails for one user, by an error or by a panic (a bug met by
// that user's stored bytes), skips that user only.
func TestWriteBackMergeFailureSkipsOnlyThatUser(t *testing.T) {
	panicky := func(stored, value []byte) ([]byte, error) {
		if len(stored) != len(value) {
			panic("a merge bug")
		}
		return orMerge(stored, value)
	}
	for _, tc := range []struct {
		name  string
		merge MergeFunc
		says  string
	}{{"error", orMerge, "feed/u2"}, {"panic", panicky, "a merge bug"}} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, testOptions(t))
			if err := s.WriteBack([]Write{
				{NS: "feed", User: "u1", Value: []byte{1}},
				{NS: "feed", User: "u2", Value: []byte{1, 1}}, // a different length: the merge fails
				{NS: "feed", User: "u3", Value: []byte{1}},
			}, nil); err != nil {
				t.Fatal(err)
			}
			seq := mustAppend(t, s, "feed", "u2", "pending")
			err := s.WriteBack([]Write{
				{NS: "feed", User: "u1", Value: []byte{2}},
				{NS: "feed", User: "u2", Value: []byte{2}, UpTo: seq},
				{NS: "feed", User: "u3", Value: []byte{4}},
			}, tc.merge)
			var wbe *WriteBackError
			if !errors.As(err, &wbe) {
				t.Fatalf("WriteBack error = %v, want a *WriteBackError", err)
			}
			if len(wbe.Failed) != 1 || wbe.Failed[0].NS != "feed" || wbe.Failed[0].User != "u2" {
				t.Fatalf("failed users = %+v, want only feed/u2", wbe.Failed)
			}
			for _, want := range []string{"feed/u2", tc.says} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			for user, want := range map[string]string{"u1": "\x03", "u2": "\x01\x01", "u3": "\x05"} {
				if f, _ := mustLoad(t, s, "feed", user); string(f) != want {
					t.Errorf("%s: stored %x, want %x", user, f, want)
				}
			}
			if _, j := mustLoad(t, s, "feed", "u2"); len(j) != 1 {
				t.Errorf("skipped user's journal has %d entries, want its 1 entry kept", len(j))
			}
		})
	}
}

func TestWriteBackOfManyUsersWritesAll(t *testing.T) {
	s := openTest(t, testOptions(t))
	const users = 3000 // several transactions of writeBackChunk users
	writes := make([]Write, users)
	for i := range writes {
		u := fmt.Sprint("user", i)
		seq := mustAppend(t, s, "feed", u, "j")
		writes[i] = Write{NS: "feed", User: u, Value: []byte(u), UpTo: seq}
	}
	if err := s.WriteBack(writes, orMerge); err != nil {
		t.Fatal(err)
	}
	for _, w := range writes {
		f, j := mustLoad(t, s, "feed", w.User)
		if string(f) != w.User || len(j) != 0 {
			t.Fatalf("%s: filter %q, %d journal entries; want its filter and none", w.User, f, len(j))
		}
	}
}

// A user written twice in one batch is merged twice: its second write goes
// in a later transaction, which sees the first. In small batches (checked
// pair by pair) and large ones (checked with a map) alike; every other
// user's write lands under its own key.
func TestWriteBackOfAUserTwiceInOneBatch(t *testing.T) {
	for _, users := range []int{5, smallWriteBack + 40} {
		t.Run(fmt.Sprint(users, " users"), func(t *testing.T) {
			s := openTest(t, testOptions(t))
			var writes []Write
			for i := range users {
				u := fmt.Sprintf("user%03d", i)
				writes = append(writes, Write{NS: "feed", User: u, Value: []byte(u), UpTo: mustAppend(t, s, "feed", u, "j")})
				if i == users/2 {
					// The first user again, with other bits: stored must be both.
					writes = append(writes, Write{NS: "feed", User: "user000", Value: []byte("\x01\x02\x04\x08\x10\x20\x40")})
				}
			}
			if err := s.WriteBack(writes, orMerge); err != nil {
				t.Fatal(err)
			}
			for i := range users {
				u := fmt.Sprintf("user%03d", i)
				want := []byte(u)
				if i == 0 {
					for j, b := range []byte("\x01\x02\x04\x08\x10\x20\x40") {
						want[j] |= b
					}
				}
				f, j := mustLoad(t, s, "feed", u)
				if !bytes.Equal(f, want) || len(j) != 0 {
					t.Fatalf("%s: filter %q, %d journal entries; want %q and none", u, f, len(j), want)
				}
			}
		})
	}
}

// smallTxnOptions make Badger's transactions hold about 1,500 entries.
func smallTxnOptions(t testing.TB) Options {
	return testOptions(t).WithMemTableSize(1 << 20).WithValueThreshold(1 << 10)
}

func appendMany(t testing.TB, s *Store, ns, user string, n int) uint64 {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last uint64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				seq, err := s.Append(ns, user, []byte("0123456789abcdef"), 0)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				last = max(last, seq)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return last
}

func TestWriteBackOfAJournalLargerThanATransaction(t *testing.T) {
	s := openTest(t, smallTxnOptions(t))
	last := appendMany(t, s, "feed", "heavy", 5000)
	later := mustAppend(t, s, "feed", "heavy", "later")
	if err := s.WriteBack([]Write{
		{NS: "feed", User: "light", Value: []byte("l")},
		{NS: "feed", User: "heavy", Value: []byte("h"), UpTo: last},
	}, nil); err != nil {
		t.Fatal(err)
	}
	f, j := mustLoad(t, s, "feed", "heavy")
	if string(f) != "h" || len(j) != 1 || j[0].Seq != later {
		t.Fatalf("heavy user: filter %q, journal %v; want \"h\" and only seq %d", f, journalValues(j), later)
	}
	if f, _ := mustLoad(t, s, "feed", "light"); string(f) != "l" {
		t.Fatalf("light user: filter %q, want \"l\"", f)
	}
}

func TestDeleteOfAJournalLargerThanATransaction(t *testing.T) {
	s := openTest(t, smallTxnOptions(t))
	appendMany(t, s, "feed", "heavy", 5000)
	if err := s.WriteBack([]Write{{NS: "feed", User: "heavy", Value: []byte("h")}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("feed", "heavy"); err != nil {
		t.Fatal(err)
	}
	if f, j := mustLoad(t, s, "feed", "heavy"); f != nil || len(j) != 0 {
		t.Fatalf("after Delete: filter %q, %d journal entries", f, len(j))
	}
}

func TestConcurrentAppendsGetDistinctIncreasingSeqsAndSurviveReopen(t *testing.T) {
	opts := testOptions(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 32, 100
	seqs := make([][]uint64, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprint("u", w%8) // four writers share each user
			for i := range each {
				seq, err := s.Append("feed", user, []byte(fmt.Sprint(w, "-", i)), 0)
				if err != nil {
					t.Error(err)
					return
				}
				seqs[w] = append(seqs[w], seq)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	all := map[uint64]string{}
	var maxSeq uint64
	for w, ss := range seqs {
		for i, seq := range ss {
			if i > 0 && seq <= ss[i-1] {
				t.Fatalf("writer %d: seq %d after %d", w, seq, ss[i-1])
			}
			if prev, dup := all[seq]; dup {
				t.Fatalf("seq %d given twice (%s and %d-%d)", seq, prev, w, i)
			}
			all[seq] = fmt.Sprint(w, "-", i)
			maxSeq = max(maxSeq, seq)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, opts)
	found := 0
	for u := range 8 {
		_, j := mustLoad(t, s, "feed", fmt.Sprint("u", u))
		for i, e := range j {
			if i > 0 && e.Seq <= j[i-1].Seq {
				t.Fatalf("journal out of order: %d after %d", e.Seq, j[i-1].Seq)
			}
			if all[e.Seq] != string(e.Value) {
				t.Fatalf("seq %d holds %q, want %q", e.Seq, e.Value, all[e.Seq])
			}
			found++
		}
	}
	if found != writers*each {
		t.Fatalf("%d entries after reopen, want %d", found, writers*each)
	}
	if seq := mustAppend(t, s, "feed", "u0", "after"); seq <= maxSeq {
		t.Fatalf("seq after reopen %d not above %d", seq, maxSeq)
	}
}

func TestAppendsAcknowledgedBeforeCloseSurviveReopen(t *testing.T) {
	opts := testOptions(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	const writers = 16
	acked := make([][]uint64, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				seq, err := s.Append("feed", fmt.Sprint("w", w), []byte(fmt.Sprint(i)), 0)
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("writer %d: %v, want ErrClosed", w, err)
					}
					return
				}
				acked[w] = append(acked[w], seq)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // let appends run; the check below does not depend on timing
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	s = openTest(t, opts)
	total := 0
	for w := range writers {
		_, j := mustLoad(t, s, "feed", fmt.Sprint("w", w))
		stored := map[uint64]bool{}
		for _, e := range j {
			stored[e.Seq] = true
		}
		for _, seq := range acked[w] {
			if !stored[seq] {
				t.Fatalf("writer %d: acknowledged seq %d lost", w, seq)
			}
		}
		total += len(acked[w])
	}
	if total == 0 {
		t.Fatal("no append was acknowledged before Close")
	}
}

// A store of a later format version is refused: the first one past this
// build's as well as a far one.
func TestNewerFormatVersionRefusesToOpen(t *testing.T) {
	for _, version := range []uint64{FormatVersion + 1, 99} {
		opts := testOptions(t)
		s, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		v := binary.AppendUvarint(nil, version)
		if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(keyFormat, v) }); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err = Open(opts)
		if err == nil {
			s.Close()
		}
		if want := fmt.Sprint(version); !errors.Is(err, ErrFormatVersion) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Open of a version-%s store: %v, want ErrFormatVersion naming %s", want, err, want)
		}
	}
}

// A directory another store holds (a service serving it) is refused with
// ErrInUse, which callers tell apart to say what to do instead.
func TestOpenOfADirectoryInUseFailsWithErrInUse(t *testing.T) {
	opts := testOptions(t)
	openTest(t, opts)
	s, err := Open(opts)
	if err == nil {
		s.Close()
		t.Fatal("a second Open of a directory in use succeeded")
	}
	if !errors.Is(err, ErrInUse) || strings.Count(err.Error(), "storage:") != 1 || !strings.Contains(err.Error(), opts.Dir) {
		t.Fatalf("second Open: %v, want ErrInUse naming storage once and the directory", err)
	}
}

func TestStoreWithoutFormatVersionRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set(filterKey(nil, "feed", "u"), []byte("x")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(DefaultOptions(dir).WithLogger(testLogger(t))); !errors.Is(err, ErrFormatVersion) {
		t.Fatalf("Open of data without a version: %v, want ErrFormatVersion", err)
	}
}

// A data directory that is a file says so, not Badger's "cannot write pid
// file".
func TestOpenOfAFileSaysItIsNotADirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(DefaultOptions(file).WithLogger(testLogger(t)))
	if want := "storage: open " + file + ": not a directory"; err == nil || err.Error() != want || !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("Open of a file: %v, want %q", err, want)
	}
}

// The store's tables are not compressed, so Badger reads a block in place
// from the table's map: by default it keeps no block cache, which would
// save nothing and, charged a map's rest for each block, hold a few dozen.
func TestOpenKeepsNoBlockCacheByDefault(t *testing.T) {
	s := openTest(t, testOptions(t))
	if m := s.db.BlockCacheMetrics(); m != nil {
		t.Errorf("a block cache by default: %v", m)
	}
	s2 := openTest(t, testOptions(t).WithBlockCacheSize(8<<20))
	if s2.db.BlockCacheMetrics() == nil {
		t.Error("no block cache with BlockCacheSize 8 MiB")
	}
}

func TestOpenWritesFormatVersion(t *testing.T) {
	s := openTest(t, testOptions(t))
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keyFormat)
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 1 || v[0] != FormatVersion {
				return fmt.Errorf("format version %x, want %d", v, FormatVersion)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitGone polls until the user has no filter and no journal; Badger's TTL
// has a granularity of one second.
func waitGone(t *testing.T, s *Store, ns, user string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, j := mustLoad(t, s, ns, user)
		if f == nil && len(j) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s still has filter %q and %d journal entries 10s after a 1s TTL", ns, user, f, len(j))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestJournalEntryWithTTLExpires(t *testing.T) {
	s := openTest(t, testOptions(t))
	if _, err := s.Append("feed", "u", []byte("x"), time.Second); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "feed", "keeper", "x")
	if _, j := mustLoad(t, s, "feed", "u"); len(j) != 1 {
		t.Fatalf("fresh entry: %d journal entries, want 1", len(j))
	}
	waitGone(t, s, "feed", "u")
	if _, j := mustLoad(t, s, "feed", "keeper"); len(j) != 1 {
		t.Fatalf("entry without TTL: %d journal entries, want 1", len(j))
	}
}

func TestFilterWithTTLExpires(t *testing.T) {
	s := openTest(t, testOptions(t))
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("x"), TTL: time.Second}}, nil); err != nil {
		t.Fatal(err)
	}
	if f, _ := mustLoad(t, s, "feed", "u"); string(f) != "x" {
		t.Fatalf("fresh filter %q, want \"x\"", f)
	}
	waitGone(t, s, "feed", "u")
}

// A write-back transaction's entries come from a reused array: a batch
// written after one with a time-to-live and cover marks carries neither
// over, and each user keeps its own value.
func TestWriteBackEntriesCarryNothingOver(t *testing.T) {
	s := openTest(t, testOptions(t))
	var first []Write
	for i := range 300 { // more than one transaction
		u := fmt.Sprint("short", i)
		first = append(first, Write{NS: "feed", User: u, Value: []byte(u), UpTo: mustAppend(t, s, "feed", u, "j"), TTL: time.Second})
	}
	if err := s.WriteBack(first, nil); err != nil {
		t.Fatal(err)
	}
	var second []Write
	for i := range 300 {
		u := fmt.Sprint("long", i)
		second = append(second, Write{NS: "feed", User: u, Value: []byte(u)})
	}
	if err := s.WriteBack(second, nil); err != nil {
		t.Fatal(err)
	}
	waitGone(t, s, "feed", "short299")
	for _, w := range second {
		f, j := mustLoad(t, s, "feed", w.User)
		if string(f) != w.User || len(j) != 0 {
			t.Fatalf("%s after the first batch expired: filter %q, %d journal entries; want its own and none", w.User, f, len(j))
		}
	}
	for _, w := range first {
		if f, _ := mustLoad(t, s, "feed", w.User); f != nil {
			t.Fatalf("%s: filter %q outlived its time-to-live", w.User, f)
		}
	}
}

func TestWritesBelowMinFreeBytesFailWithErrFullWhileReadsWork(t *testing.T) {
	opts := testOptions(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	seq := mustAppend(t, s, "feed", "u", "j")
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("f")}}, nil); err != nil {
		t.Fatal(err)
	}
	var backup strings.Builder
	if err := s.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, opts.WithMinFreeBytes(1<<62)) // more than any disk has
	if _, err := s.Append("feed", "u", []byte("x"), 0); !errors.Is(err, ErrFull) {
		t.Errorf("Append: %v, want ErrFull", err)
	}
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("g")}}, nil); !errors.Is(err, ErrFull) {
		t.Errorf("WriteBack: %v, want ErrFull", err)
	}
	if err := s.Restore(strings.NewReader(backup.String()), nil, nil); !errors.Is(err, ErrFull) {
		t.Errorf("Restore: %v, want ErrFull", err)
	}
	f, j := mustLoad(t, s, "feed", "u")
	if string(f) != "f" || len(j) != 1 || j[0].Seq != seq {
		t.Errorf("Load while full: filter %q, journal %v; want the stored state", f, journalValues(j))
	}
	if users, err := s.Users("feed", "", 0, Hidden{}); err != nil || !slices.Equal(users, []string{"u"}) {
		t.Errorf("Users while full: %v, %v", users, err)
	}
	if err := s.Delete("feed", "u"); err != nil {
		t.Errorf("Delete while full: %v, want it allowed", err)
	}
}

func TestClosedStoreReturnsErrClosed(t *testing.T) {
	s, err := Open(testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	checks := map[string]error{}
	_, checks["Append"] = s.Append("feed", "u", nil, 0)
	_, _, checks["Load"] = s.Load("feed", "u")
	checks["WriteBack"] = s.WriteBack([]Write{{NS: "feed", User: "u"}}, nil)
	checks["Delete"] = s.Delete("feed", "u")
	_, checks["Users"] = s.Users("feed", "", 1, Hidden{})
	_, checks["Namespaces"] = s.Namespaces()
	checks["JournalUsers"] = s.JournalUsers(func(string, string) error { return nil })
	checks["Backup"] = s.Backup(&strings.Builder{})
	checks["Restore"] = s.Restore(strings.NewReader(""), nil, nil)
	for name, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	for name, err := range checks {
		if n := strings.Count(err.Error(), "storage:"); n != 1 {
			t.Errorf("%s after Close: %q names storage %d times, want once", name, err, n)
		}
	}
}

func TestBadKeysAreRefused(t *testing.T) {
	s := openTest(t, testOptions(t))
	long := strings.Repeat("x", MaxUserLen+1)
	for _, k := range [][2]string{{"", "u"}, {"feed", ""}, {strings.Repeat("n", MaxNamespaceLen+1), "u"}, {"feed", long}} {
		if _, err := s.Append(k[0], k[1], nil, 0); !errors.Is(err, ErrBadKey) {
			t.Errorf("Append(%.10q, %.10q): %v, want ErrBadKey", k[0], k[1], err)
		}
		if _, _, err := s.Load(k[0], k[1]); !errors.Is(err, ErrBadKey) {
			t.Errorf("Load(%.10q, %.10q): %v, want ErrBadKey", k[0], k[1], err)
		}
		if err := s.Delete(k[0], k[1]); !errors.Is(err, ErrBadKey) {
			t.Errorf("Delete(%.10q, %.10q): %v, want ErrBadKey", k[0], k[1], err)
		}
	}
	err := s.WriteBack([]Write{{NS: "feed", User: "ok", Value: []byte("v")}, {NS: "feed", User: ""}}, nil)
	if !errors.Is(err, ErrBadKey) {
		t.Errorf("WriteBack with a bad key: %v, want ErrBadKey", err)
	}
	if f, _ := mustLoad(t, s, "feed", "ok"); string(f) != "v" {
		t.Errorf("the good user of that write-back: %q, want written", f)
	}
	if _, err := s.Append("feed", strings.Repeat("x", MaxUserLen), nil, 0); err != nil {
		t.Errorf("Append with a user id of exactly MaxUserLen: %v", err)
	}
}

func TestOpenRefusesBadOptions(t *testing.T) {
	for name, opts := range map[string]Options{
		"no dir":            {},
		"threshold too big": DefaultOptions(t.TempDir()).WithValueThreshold(10 << 20),
		"one memtable MB":   DefaultOptions(t.TempDir()).WithMemTableSize(1000),
		"discard ratio":     DefaultOptions(t.TempDir()).WithGCDiscardRatio(1.5),
	} {
		if _, err := Open(opts); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%s: Open: %v, want ErrBadOptions", name, err)
		}
	}
}

func TestZeroOptionsMeanDefaults(t *testing.T) {
	got, err := Options{Dir: "d"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultOptions("d")
	got.Logger = nil
	if got != want {
		t.Fatalf("defaults filled in: %+v, want %+v", got, want)
	}
}

// Users pages through every user with a stored filter or journal entries
// (one not yet written back), each once, in order.
func TestUsersArePaginatedInOrder(t *testing.T) {
	s := openTest(t, testOptions(t))
	var want []string
	for i := range 10 {
		u := fmt.Sprintf("user%02d", 9-i)
		want = append(want, u)
		if err := s.WriteBack([]Write{{NS: "n", User: u, Value: []byte("f")}, {NS: "n1", User: u + "x", Value: []byte("f")}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, s, "n", "journal-only", "j") // not yet written back: listed
	mustAppend(t, s, "n", "user04", "j")       // written back and journaled since: listed once
	mustAppend(t, s, "n", "user99", "j")       // the last, from the journal only
	mustAppend(t, s, "n1", "user00", "j")      // another namespace: not listed
	want = append(want, "journal-only", "user99")
	slices.Sort(want)
	var got []string
	after := ""
	for {
		page, err := s.Users("n", after, 3, Hidden{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 3 {
			t.Fatalf("page of %d users, limit 3", len(page))
		}
		got = append(got, page...)
		after = page[len(page)-1]
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged users = %v, want %v", got, want)
	}
}

func TestNamespacesListsEachOnce(t *testing.T) {
	s := openTest(t, testOptions(t))
	for _, u := range prefixUsers {
		if err := s.WriteBack([]Write{{NS: u[0], User: u[1], Value: []byte("f")}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, s, "journal-only", "u", "j")
	got, err := s.Namespaces()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"journal-only", "n", "n\x01a", "n2", "na"}; !slices.Equal(got, want) {
		t.Fatalf("Namespaces = %q, want %q", got, want)
	}
}

func TestJournalUsersVisitsEachUserWithAJournalOnce(t *testing.T) {
	s := openTest(t, testOptions(t))
	want := map[[2]string]bool{}
	for i := range 2*journalUsersPage + 10 { // several pages
		u := [2]string{fmt.Sprint("ns", i%3), fmt.Sprint("u", i)}
		want[u] = true
		for range 1 + i%3 {
			mustAppend(t, s, u[0], u[1], "j")
		}
	}
	if err := s.WriteBack([]Write{{NS: "ns0", User: "no-journal", Value: []byte("f")}}, nil); err != nil {
		t.Fatal(err)
	}
	got := map[[2]string]int{}
	err := s.JournalUsers(func(ns, user string) error {
		got[[2]string{ns, user}]++
		// fold the journal, as compaction at start does
		_, j, err := s.Load(ns, user)
		if err != nil {
			return err
		}
		return s.WriteBack([]Write{{NS: ns, User: user, Value: []byte("f"), UpTo: j[len(j)-1].Seq}}, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("visited %d users, want %d", len(got), len(want))
	}
	for u, n := range got {
		if !want[u] || n != 1 {
			t.Fatalf("user %v visited %d times (has journal: %v)", u, n, want[u])
		}
	}
	if err := s.JournalUsers(func(ns, user string) error { return fmt.Errorf("%s/%s has a journal left", ns, user) }); err != nil {
		t.Fatal(err)
	}
}

func TestJournalUsersStopsAtTheFirstError(t *testing.T) {
	s := openTest(t, testOptions(t))
	mustAppend(t, s, "feed", "a", "j")
	mustAppend(t, s, "feed", "b", "j")
	stop := errors.New("stop")
	calls := 0
	err := s.JournalUsers(func(string, string) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("JournalUsers: %v after %d calls, want stop after 1", err, calls)
	}
}

func TestSequenceLeaseIsRenewedAhead(t *testing.T) {
	s := openTest(t, testOptions(t))
	mustAppend(t, s, "feed", "u", "x") // leases seqLease numbers
	// Three quarters of them, without running out: only a renewal ahead
	// can extend the lease.
	if _, err := s.takeSeqs(seqLease * 3 / 4); err != nil {
		t.Fatal(err)
	}
	s.seqMu.Lock()
	before := s.leasedSeq
	s.seqMu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.seqMu.Lock()
		leased, next := s.leasedSeq, s.nextSeq
		s.seqMu.Unlock()
		if leased >= next+seqLease/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease %d (was %d) not renewed ahead of next %d", leased, before, next)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOnlyWriterSkipsTheMergeUntilAnotherWrites: the only attached
// writer's write-backs store its value without reading; a write by anyone
// else, a second writer attaching, or a restore makes every later
// write-back of that token merge again.
func TestOnlyWriterSkipsTheMergeUntilAnotherWrites(t *testing.T) {
	s := openTest(t, testOptions(t))
	merges := 0
	merge := func(stored, value []byte) ([]byte, error) {
		merges++
		return orMerge(stored, value)
	}
	write := func(writer uint64, v byte) {
		t.Helper()
		if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte{v}, Writer: writer}}, merge); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() byte {
		t.Helper()
		f, _ := mustLoad(t, s, "feed", "u")
		return f[0]
	}

	token, detach := s.Attach()
	if token == 0 {
		t.Fatal("the only writer got token 0")
	}
	write(token, 0x01)
	write(token, 0x03) // the writer's value includes what it stored
	if merges != 0 || stored() != 0x03 {
		t.Fatalf("only writer: %d merges, stored %x; want 0 merges, 03", merges, stored())
	}

	write(0, 0x10) // someone who did not attach
	if merges != 1 || stored() != 0x13 {
		t.Fatalf("unknown writer: %d merges, stored %x; want 1, 13", merges, stored())
	}
	write(token, 0x07) // must not roll the other write back
	if merges != 2 || stored() != 0x17 {
		t.Fatalf("after another's write: %d merges, stored %x; want 2, 17", merges, stored())
	}
	detach()

	// A second writer attached beside the first: neither skips.
	first, detachFirst := s.Attach()
	second, detachSecond := s.Attach()
	if second != 0 {
		t.Fatalf("a writer attached beside another got token %d, want 0", second)
	}
	write(first, 0x20)
	if merges != 3 || stored() != 0x37 {
		t.Fatalf("two writers: %d merges, stored %x; want 3, 37", merges, stored())
	}
	detachSecond()
	detachFirst()

	// A restore ends the skipping too.
	token, detach = s.Attach()
	defer detach()
	var backup bytes.Buffer
	if err := s.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(&backup, nil, nil); err != nil {
		t.Fatal(err)
	}
	write(token, 0x40)
	if merges != 4 || stored() != 0x77 {
		t.Fatalf("after a restore: %d merges, stored %x; want 4, 77", merges, stored())
	}
}

// distinctPrefix stops before a user's second write, whichever way it looks
// (pair by pair, its table, a map past a transaction's users), and tells
// namespaces apart.
func TestDistinctPrefixStopsAtAUsersSecondWrite(t *testing.T) {
	writes := func(n, dupAt int) []Write {
		var ws []Write
		for i := range n {
			ns := []string{"feed", "push"}[i%2]
			ws = append(ws, Write{NS: ns, User: fmt.Sprint("u", i/2)}) // u0 in feed and in push: distinct
			if i == dupAt {
				ws = append(ws, Write{NS: "push", User: "u1"})
			}
		}
		return ws
	}
	for _, tc := range []struct{ n, dupAt, max, want int }{
		{10, -1, writeBackChunk, 10},
		{10, 5, writeBackChunk, 6},
		{smallWriteBack + 40, -1, writeBackChunk, smallWriteBack + 40},
		{smallWriteBack + 40, 90, writeBackChunk, 91},
		{2 * writeBackChunk, -1, writeBackChunk, writeBackChunk},
		{2 * writeBackChunk, 200, writeBackChunk, 201},
		{2 * writeBackChunk, 300, writeBackChunk, writeBackChunk},
		{2 * writeBackChunk, 400, 4 * writeBackChunk, 401},
		{2 * writeBackChunk, -1, 4 * writeBackChunk, 2 * writeBackChunk},
	} {
		if got := distinctPrefix(writes(tc.n, tc.dupAt), tc.max); got != tc.want {
			t.Errorf("%d writes, the second of push/u1 after %d, max %d: %d, want %d", tc.n, tc.dupAt, tc.max, got, tc.want)
		}
	}
}

// Users lists while users are appended and written back from other
// goroutines: every page is in order past its after, and a user appended
// before the listing began is in it (run under -race: the journal's index
// is read while it changes). The writers add a bounded number of users, so
// that each listing reaches the end.
func TestUsersWhileAppendsAndWriteBacksGoOn(t *testing.T) {
	s := openTest(t, testOptions(t))
	for i := range 50 {
		mustAppend(t, s, "n", fmt.Sprintf("before%02d", i), "j")
	}
	var wg sync.WaitGroup
	var writing atomic.Int32
	for g := range 2 {
		wg.Add(1)
		writing.Add(1)
		go func() {
			defer wg.Done()
			defer writing.Add(-1)
			for i := range 300 {
				u := fmt.Sprintf("during%d-%04d", g, i)
				if _, err := s.Append("n", u, []byte("j"), 0); err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					if err := s.WriteBack([]Write{{NS: "n", User: u, Value: []byte("f"), UpTo: math.MaxUint64}}, nil); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	listings := 0
	for ; listings < 3 || writing.Load() > 0; listings++ {
		var all []string
		for after := ""; ; {
			page, err := s.Users("n", after, 7, Hidden{})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			if !slices.IsSorted(page) || page[0] <= after {
				t.Fatalf("page %q after %q: not in order past after", page, after)
			}
			all = append(all, page...)
			after = page[len(page)-1]
		}
		for i := range 50 {
			if u := fmt.Sprintf("before%02d", i); !slices.Contains(all, u) {
				t.Fatalf("listing missed %s, appended before it began", u)
			}
		}
	}
	wg.Wait()
	all, err := s.Users("n", "", 0, Hidden{})
	if err != nil || len(all) != 50+600 {
		t.Fatalf("after the writers: %d users (%v), want 650", len(all), err)
	}
	t.Logf("%d listings while the writers ran", listings)
}

// Levels lists the LSM tree's levels from 0, and a memtable flushed (at
// close here) shows as a table with bytes in it.
func TestLevelsCountTheTablesFlushed(t *testing.T) {
	opts := testOptions(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	tables := func(levels []LevelStats) (n int, bytes int64) {
		t.Helper()
		if len(levels) == 0 {
			t.Fatal("no levels")
		}
		for i, l := range levels {
			if l.Level != i {
				t.Fatalf("levels %+v: level %d at index %d", levels, l.Level, i)
			}
			n, bytes = n+l.Tables, bytes+l.Bytes
		}
		return n, bytes
	}
	if n, b := tables(s.Levels()); n != 0 || b != 0 {
		t.Fatalf("a new store has %d tables, %d B", n, b)
	}
	writes := make([]Write, 2000)
	for i := range writes {
		writes[i] = Write{NS: "feed", User: fmt.Sprint("user", i), Value: bytes.Repeat([]byte{byte(i)}, 100)}
	}
	if err := s.WriteBack(writes, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, opts)
	levels := s.Levels()
	if n, b := tables(levels); n == 0 || b < 2000*100 {
		t.Fatalf("after 2,000 users of 100 B and a flush: %d tables, %d B (%+v)", n, b, levels)
	}
	if levels[0].Tables == 0 {
		t.Fatalf("the flushed memtable is not in level 0: %+v", levels)
	}
}

// A forget or a restore that needs the journal's sequence lease written
// (the first numbers after an open) while flushMemtables waits for the
// store's writes finishes: the lease's write does not take the writes'
// lock again behind the flush, which would never get it.
func TestForgetAndRestoreFinishWhileMemtablesAreFlushed(t *testing.T) {
	opts := testOptions(t)
	var backup bytes.Buffer
	for iter := range 40 {
		s, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		if iter == 0 {
			if _, err := s.Append("ns", "u", []byte{1}, 0); err != nil {
				t.Fatal(err)
			}
			if err := s.Backup(&backup); err != nil {
				t.Fatal(err)
			}
		}
		stop, flushed := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(flushed)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.flushMemtables(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		done := make(chan error, 1)
		go func() {
			if iter%2 == 0 {
				done <- s.Delete("ns", fmt.Sprint("u", iter))
			} else {
				done <- s.Restore(bytes.NewReader(backup.Bytes()), nil, nil)
			}
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: the forget or restore still waits after 20 s", iter)
		}
		close(stop)
		<-flushed
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Opened with KeepFormat (an offline backup), a directory that holds no
// store, or none at all, is refused and left as it was: a wrong directory
// does not become an empty store whose backup would pass for one.
func TestKeepFormatMakesNoStore(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a store"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	for _, d := range []string{dir, missing} {
		s, err := Open(testOptions(t).WithDir(d).WithKeepFormat(true))
		if !errors.Is(err, ErrNoStore) {
			if err == nil {
				s.Close()
			}
			t.Fatalf("%s: %v, want ErrNoStore", d, err)
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 {
		t.Errorf("the directory holds %d entries (%v), want its one file", len(entries), err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the missing directory was made: %v", err)
	}
}

// Opened with KeepFormat (an offline backup), a store of an older format
// stays in it, so the build that wrote it can still open it, and its
// backup restores; opened without, it is upgraded.
func TestKeepFormatLeavesAnOlderStoreAsItIs(t *testing.T) {
	opts := testOptions(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("filter")}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(keyFormat, binary.AppendUvarint(nil, FormatVersion-1))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	kept, err := Open(opts.WithKeepFormat(true))
	if err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	if err := kept.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	if v := formatVersion(t, kept); v != FormatVersion-1 {
		t.Fatalf("opened with KeepFormat, the store is in format %d, want %d as before", v, FormatVersion-1)
	}
	if err := kept.Close(); err != nil {
		t.Fatal(err)
	}
	dst := openTest(t, testOptions(t))
	if err := dst.Restore(bytes.NewReader(backup.Bytes()), nil, nil); err != nil {
		t.Fatal(err)
	}
	if f, _ := mustLoad(t, dst, "feed", "u"); string(f) != "filter" {
		t.Fatalf("restored filter %q", f)
	}
	upgraded := openTest(t, opts)
	if v := formatVersion(t, upgraded); v != FormatVersion {
		t.Fatalf("opened without KeepFormat, the store is in format %d, want %d", v, FormatVersion)
	}
}

func TestWriteBackOfAValueTooLargeFailsThatUserAlone(t *testing.T) {
	// No value-log GC: with files this small it runs while the test
	// writes, and Badger v4.9.6 races with itself there (see the soak test).
	s := openTest(t, testOptions(t).WithValueLogFileSize(1<<20).WithGCInterval(-1))
	max := int(s.MaxValueBytes())
	var seqs [3]uint64
	for i, user := range []string{"u1", "big", "u3"} {
		seqs[i] = mustAppend(t, s, "feed", user, "pending")
	}
	big := bytes.Repeat([]byte{0xab}, max+1)
	err := s.WriteBack([]Write{
		{NS: "feed", User: "u1", Value: []byte{1}, UpTo: seqs[0]},
		{NS: "feed", User: "big", Value: big, UpTo: seqs[1]},
		{NS: "feed", User: "u3", Value: bytes.Repeat([]byte{3}, max), UpTo: seqs[2]}, // the largest that fits
	}, orMerge)
	var wbe *WriteBackError
	if !errors.As(err, &wbe) || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("WriteBack error = %v, want a *WriteBackError of ErrTooLarge", err)
	}
	if len(wbe.Failed) != 1 || wbe.Failed[0].User != "big" {
		t.Fatalf("failed users = %+v, want only feed/big", wbe.Failed)
	}
	msg := err.Error()
	for _, want := range []string{"feed/big", fmt.Sprint(max + 1), fmt.Sprint(max)} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "ab ab") || strings.Contains(msg, "00000000") || len(msg) > 300 {
		t.Errorf("error quotes the value: %q", msg)
	}
	for _, user := range []string{"u1", "u3"} {
		if f, j := mustLoad(t, s, "feed", user); len(f) == 0 || len(j) != 0 {
			t.Errorf("%s: stored %d bytes, %d journal entries; want written and its journal retired", user, len(f), len(j))
		}
	}
	if f, j := mustLoad(t, s, "feed", "big"); f != nil || len(j) != 1 {
		t.Errorf("big: stored %d bytes, %d journal entries; want nothing stored and its journal kept", len(f), len(j))
	}
	// Alone in its write, as write-back retries it, the same.
	err = s.WriteBack([]Write{{NS: "feed", User: "big", Value: big, UpTo: seqs[1]}}, nil)
	if !errors.Is(err, ErrTooLarge) || strings.Contains(err.Error(), "00000000") {
		t.Errorf("alone: WriteBack error = %.300v, want ErrTooLarge without the value", err)
	}
}

// A user whose journal records all expired, never written back, is not
// listed: a load finds nothing of it, and the service answers it 404.
func TestUsersLeavesOutThoseWhoseJournalExpired(t *testing.T) {
	s := openTest(t, testOptions(t))
	if _, err := s.Append("feed", "gone", []byte("x"), time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append("feed", "kept", []byte("x"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if users, err := s.Users("feed", "", 0, Hidden{}); err != nil || !slices.Equal(users, []string{"gone", "kept"}) {
		t.Fatalf("Users before the expiry: %v, %v", users, err)
	}
	// Expiry is kept in whole seconds.
	time.Sleep(2100 * time.Millisecond)
	if _, j := mustLoad(t, s, "feed", "gone"); len(j) != 0 {
		t.Fatalf("the expired journal still loads: %v", journalValues(j))
	}
	if users, err := s.Users("feed", "", 0, Hidden{}); err != nil || !slices.Equal(users, []string{"kept"}) {
		t.Fatalf("Users after the expiry: %v, %v; want [kept]", users, err)
	}
}
