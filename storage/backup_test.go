package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/seenapi/seenapi/userfilter"
)

// userState is what Load returns for one user.
type userState struct {
	filter  string
	journal []string
}

// sameStates reports whether two snapshots hold the same filters and journals.
func sameStates(a, b map[[2]string]userState) bool {
	return maps.EqualFunc(a, b, func(x, y userState) bool {
		return x.filter == y.filter && slices.Equal(x.journal, y.journal)
	})
}

func snapshot(t *testing.T, s *Store, users [][2]string) map[[2]string]userState {
	t.Helper()
	out := map[[2]string]userState{}
	for _, u := range users {
		f, j := mustLoad(t, s, u[0], u[1])
		// Restored records get new sequence numbers: compare values, in order.
		var values []string
		for _, e := range j {
			values = append(values, string(e.Value))
		}
		out[u] = userState{string(f), values}
	}
	return out
}

// populate writes filters and journals for users in two namespaces,
// including one large filter (kept in the value log) and entries with a TTL.
func populate(t *testing.T, s *Store) [][2]string {
	t.Helper()
	var users [][2]string
	for i := range 50 {
		u := [2]string{[]string{"feed", "push"}[i%2], fmt.Sprint("user", i)}
		users = append(users, u)
		var upTo uint64
		for k := range i % 4 {
			upTo = mustAppend(t, s, u[0], u[1], fmt.Sprint("covered", k))
		}
		value := []byte(fmt.Sprint("filter of ", u))
		if i == 7 {
			value = bytes.Repeat([]byte{7}, 64<<10) // above ValueThreshold
		}
		if err := s.WriteBack([]Write{{NS: u[0], User: u[1], Value: value, UpTo: upTo, TTL: time.Hour}}, nil); err != nil {
			t.Fatal(err)
		}
		for k := range i % 3 {
			if _, err := s.Append(u[0], u[1], []byte(fmt.Sprint("pending", k)), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	return users
}

func TestBackupRestoresIntoAFreshStore(t *testing.T) {
	src := openTest(t, testOptions(t))
	users := populate(t, src)
	mustAppend(t, src, "journal-only", "u", "j")
	users = append(users, [2]string{"journal-only", "u"})
	want := snapshot(t, src, users)
	var buf bytes.Buffer
	if err := src.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	var wantContents BackupContents
	for _, st := range want {
		if st.filter != "" {
			wantContents.Filters++
		}
		wantContents.JournalRecords += len(st.journal)
	}
	if c, err := VerifyBackup(bytes.NewReader(buf.Bytes()), Hidden{}); err != nil || !reflect.DeepEqual(c, wantContents) {
		t.Fatalf("VerifyBackup: %+v, %v; want %+v", c, err, wantContents)
	}

	dst := openTest(t, testOptions(t))
	if err := dst.Restore(bytes.NewReader(buf.Bytes()), nil, nil); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	got := snapshot(t, dst, users)
	for _, u := range users {
		if got[u].filter != want[u].filter || !slices.Equal(got[u].journal, want[u].journal) {
			t.Fatalf("%v after restore: filter %.20q journal %v; want %.20q %v",
				u, got[u].filter, got[u].journal, want[u].filter, want[u].journal)
		}
	}
	for _, ns := range []string{"feed", "push"} {
		a, _ := src.Users(ns, "", 0, Hidden{})
		b, _ := dst.Users(ns, "", 0, Hidden{})
		if !slices.Equal(a, b) || len(a) != 25 {
			t.Fatalf("users of %s: %d restored, want the 25 of the source", ns, len(b))
		}
	}
	var maxRestored uint64
	for _, u := range users {
		_, j := mustLoad(t, dst, u[0], u[1])
		for _, e := range j {
			maxRestored = max(maxRestored, e.Seq)
		}
	}
	if seq := mustAppend(t, dst, "feed", "user0", "new"); seq <= maxRestored {
		t.Fatalf("seq %d after restore not above the restored %d", seq, maxRestored)
	}
}

func TestRestoreMergesFiltersAndKeepsBothJournals(t *testing.T) {
	src := openTest(t, testOptions(t))
	if err := src.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte{0x0f}}}, nil); err != nil {
		t.Fatal(err)
	}
	srcSeq := mustAppend(t, src, "feed", "u", "from backup")
	var buf bytes.Buffer
	if err := src.Backup(&buf); err != nil {
		t.Fatal(err)
	}

	dst := openTest(t, testOptions(t))
	if err := dst.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte{0xf0}}}, nil); err != nil {
		t.Fatal(err)
	}
	dstSeq := mustAppend(t, dst, "feed", "u", "already here")
	if dstSeq != srcSeq {
		t.Fatalf("test needs colliding seqs, got %d and %d", srcSeq, dstSeq)
	}
	for range 2 { // restoring twice adds nothing the second time
		if err := dst.Restore(bytes.NewReader(buf.Bytes()), orMerge, nil); err != nil {
			t.Fatalf("Restore: %v", err)
		}
	}
	f, j := mustLoad(t, dst, "feed", "u")
	if string(f) != "\xff" {
		t.Errorf("filter after restore %x, want ff (merged)", f)
	}
	var values []string
	for _, e := range j {
		values = append(values, string(e.Value))
	}
	slices.Sort(values)
	if want := []string{"already here", "from backup"}; !slices.Equal(values, want) {
		t.Errorf("journal after restore %q, want %q", values, want)
	}
}

// A merging restore keeps a user's filter as long as the longer-lived of
// the stored one and the backup's: in a windowed namespace the union holds
// items of the stored filter's newer time buckets, which the backup's
// expiry would drop from the store before they leave their window.
func TestRestoreMergedFilterExpiresWithTheLaterOfBoth(t *testing.T) {
	src := openTest(t, testOptions(t))
	if err := src.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte{0x0f}, TTL: time.Hour},
		{NS: "feed", User: "forever", Value: []byte{0x0f}, TTL: time.Hour}}, nil); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := src.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	dst := openTest(t, testOptions(t))
	if err := dst.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte{0xf0}, TTL: 100 * time.Hour},
		{NS: "feed", User: "forever", Value: []byte{0xf0}}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(bytes.NewReader(buf.Bytes()), orMerge, nil); err != nil {
		t.Fatal(err)
	}
	expiry := func(user string) (uint64, string) {
		var at uint64
		var value []byte
		if err := dst.db.View(func(txn *badger.Txn) error {
			item, err := txn.Get(filterKey(nil, "feed", user))
			if err != nil {
				return err
			}
			at = item.ExpiresAt()
			value, err = item.ValueCopy(nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return at, fmt.Sprintf("%x", value)
	}
	if at, v := expiry("u"); v != "ff" || at < uint64(time.Now().Add(99*time.Hour).Unix()) {
		t.Errorf("merged filter %s expires at %v, want ff expiring in about 100h, the stored filter's expiry",
			v, time.Unix(int64(at), 0))
	}
	if at, v := expiry("forever"); v != "ff" || at != 0 {
		t.Errorf("merged filter %s expires at %v, want ff never expiring, as the stored filter", v, time.Unix(int64(at), 0))
	}
}

func TestRestoreWithoutMergeReplacesFilters(t *testing.T) {
	src := openTest(t, testOptions(t))
	if err := src.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("backup")}}, nil); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := src.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	dst := openTest(t, testOptions(t))
	if err := dst.WriteBack([]Write{{NS: "feed", User: "u", Value: []byte("current")}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(&buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	if f, _ := mustLoad(t, dst, "feed", "u"); string(f) != "backup" {
		t.Fatalf("filter %q, want \"backup\"", f)
	}
}

func TestRestoreNamesUsersWhoseMergeFailed(t *testing.T) {
	src := openTest(t, testOptions(t))
	if err := src.WriteBack([]Write{{NS: "feed", User: "bad", Value: []byte{1, 1}}, {NS: "feed", User: "good", Value: []byte{1}}}, nil); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := src.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	dst := openTest(t, testOptions(t))
	if err := dst.WriteBack([]Write{{NS: "feed", User: "bad", Value: []byte{2}}, {NS: "feed", User: "good", Value: []byte{2}}}, nil); err != nil {
		t.Fatal(err)
	}
	err := dst.Restore(&buf, orMerge, nil)
	var wbe *WriteBackError
	if !errors.As(err, &wbe) || len(wbe.Failed) != 1 || wbe.Failed[0].User != "bad" {
		t.Fatalf("Restore: %v, want a WriteBackError naming only feed/bad", err)
	}
	if f, _ := mustLoad(t, dst, "feed", "good"); string(f) != "\x03" {
		t.Errorf("good user %x, want 03 (merged)", f)
	}
	if f, _ := mustLoad(t, dst, "feed", "bad"); string(f) != "\x02" {
		t.Errorf("bad user %x, want 02 (unchanged)", f)
	}
}

func TestRestoreRefusesWhatIsNotABackup(t *testing.T) {
	src := openTest(t, testOptions(t))
	populate(t, src)
	good := backupBytes(t, src)
	newer := binary.AppendUvarint(append([]byte(nil), backupMagic...), FormatVersion+1)
	for name, tc := range map[string]struct {
		data []byte
		want error
	}{
		"empty":          {nil, ErrBadBackup},
		"garbage":        {[]byte("this is not a backup at all"), ErrBadBackup},
		"raw badger":     {good[len(backupMagic)+1:], ErrBadBackup},
		"truncated":      {good[:len(good)-10], ErrBadBackup},
		"newer format":   {append(newer, good[len(backupMagic)+1:]...), ErrFormatVersion},
		"huge list size": {append(binary.AppendUvarint(append([]byte(nil), backupMagic...), FormatVersion), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), ErrBadBackup},
		"no end mark":    {good[:len(good)-16], ErrBadBackup},
		"cut at a list":  {good[:listEnds(t, good)[0]], ErrBadBackup},
		"end mark off":   {append(slices.Clip(good[:len(good)-1]), good[len(good)-1]+1), ErrBadBackup},
		"after the end":  {append(slices.Clip(good), 0), ErrBadBackup},
	} {
		dst := openTest(t, testOptions(t))
		// The text names the package once, however the sentinel is wrapped.
		if err := dst.Restore(bytes.NewReader(tc.data), nil, nil); !errors.Is(err, tc.want) || strings.Count(err.Error(), "storage:") != 1 {
			t.Errorf("%s: Restore: %v, want %v, named storage once", name, err, tc.want)
		}
		if _, err := VerifyBackup(bytes.NewReader(tc.data), Hidden{}); !errors.Is(err, tc.want) || strings.Count(err.Error(), "storage:") != 1 {
			t.Errorf("%s: VerifyBackup: %v, want %v, named storage once", name, err, tc.want)
		}
	}
	if _, err := VerifyBackup(bytes.NewReader(good), Hidden{}); err != nil {
		t.Errorf("VerifyBackup of a whole backup: %v", err)
	}
}

// A stream whose reader fails (a disk's I/O error, a connection reset
// during a download) is not a bad backup: the reader's error is returned
// as it is, wherever it comes, and ErrBadBackup only for a stream that
// ends, saying where (in its header, in a list, in its end mark).
func TestBackupStreamThatFailsToReadIsNoBadBackup(t *testing.T) {
	src := openTest(t, testOptions(t))
	populate(t, src)
	good := backupBytes(t, src)
	reset := errors.New("read tcp 127.0.0.1:50000->127.0.0.1:8080: read: connection reset by peer")
	for name, at := range map[string]int{
		"before the header":   0,
		"in the header":       5,
		"in the version":      len(backupMagic),
		"in a list":           listEnds(t, good)[0] - 3,
		"at the end mark":     len(good) - 20,
		"in the end checksum": len(good) - 3,
	} {
		failing := func() io.Reader { return io.MultiReader(bytes.NewReader(good[:at]), iotest.ErrReader(reset)) }
		dst := openTest(t, testOptions(t))
		for op, err := range map[string]error{
			"Restore":      dst.Restore(failing(), nil, nil),
			"VerifyBackup": func() error { _, err := VerifyBackup(failing(), Hidden{}); return err }(),
		} {
			if !errors.Is(err, reset) || errors.Is(err, ErrBadBackup) || !strings.Contains(err.Error(), "reading the backup, in ") {
				t.Errorf("%s, %s: %v, want the reader's error, not ErrBadBackup", name, op, err)
			}
		}
	}
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"empty":       {nil, "no seenapi backup header: the stream is empty"},
		"half header": {good[:7], "the stream ends in its header, after 7 bytes"},
		"other file":  {[]byte("{\"type\":"), "no seenapi backup header"},
		"no version":  {good[:len(backupMagic)], "format version: EOF"},
		"in a list":   {good[:listEnds(t, good)[0]-3], "the backup is cut short (in a list of "},
		"in a length": {good[:listEnds(t, good)[0]+3], "the backup is cut short (in a list's length)"},
		"in the mark": {good[:len(good)-3], "the backup is cut short (in its end mark)"},
	} {
		_, err := VerifyBackup(bytes.NewReader(tc.data), Hidden{})
		if !errors.Is(err, ErrBadBackup) || !strings.Contains(err.Error(), ": "+tc.want) {
			t.Errorf("%s: VerifyBackup: %v, want ErrBadBackup saying %q", name, err, tc.want)
		}
	}
}

// listEnds returns the offsets in a backup where each list ends (and the
// next list, or the end mark, begins).
func listEnds(t *testing.T, b []byte) []int {
	t.Helper()
	var ends []int
	at := len(backupMagic) + 1 // the one-byte uvarint of FormatVersion
	for at+8 <= len(b) {
		n := binary.LittleEndian.Uint64(b[at:])
		if n == backupEnd {
			return ends
		}
		at += 8 + int(n)
		ends = append(ends, at)
	}
	t.Fatal("no end mark")
	return nil
}

// A backup cut short at a list's end, as a dropped HTTP stream can be, is
// refused; a stream of the first version, which had no end mark, restores.
func TestRestoreNeedsTheEndMarkOfAVersionOneBackup(t *testing.T) {
	src := openTest(t, testOptions(t))
	users := populate(t, src)
	want := snapshot(t, src, users)
	good := backupBytes(t, src)
	ends := listEnds(t, good)
	if len(ends) < 2 {
		t.Fatalf("%d lists, want several to cut between", len(ends))
	}
	for _, at := range ends {
		dst := openTest(t, testOptions(t))
		if err := dst.Restore(bytes.NewReader(good[:at]), nil, nil); !errors.Is(err, ErrBadBackup) {
			t.Fatalf("cut after %d of %d bytes: Restore %v, want ErrBadBackup", at, len(good), err)
		}
	}
	v0 := append(slices.Clip(backupMagicV0), good[len(backupMagic):ends[len(ends)-1]]...)
	dst := openTest(t, testOptions(t))
	if err := dst.Restore(bytes.NewReader(v0), nil, nil); err != nil {
		t.Fatalf("first-version stream: %v", err)
	}
	if got := snapshot(t, dst, users); !sameStates(got, want) {
		t.Fatal("the first-version stream restored other data")
	}
}

func TestRestoreSkipsExpiredEntries(t *testing.T) {
	src := openTest(t, testOptions(t))
	if _, err := src.Append("feed", "u", []byte("short"), time.Second); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, src, "feed", "u", "long")
	var buf bytes.Buffer
	if err := src.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // past the 1s TTL at Badger's 1s granularity
	dst := openTest(t, testOptions(t))
	if err := dst.Restore(&buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	_, j := mustLoad(t, dst, "feed", "u")
	if len(j) != 1 || string(j[0].Value) != "long" {
		got, want := journalValues(j), "one entry: long"
		t.Fatalf("journal after restore %v, want %v", got, want)
	}
}

// A byte changed anywhere in a backup, as bit rot on a disk or in an
// object store changes one, is refused before anything is restored: a user
// id's byte flipped would otherwise move its history to another user. A
// backup of format 3 (an end mark without a checksum) still restores.
func TestBackupWithAByteChangedIsRefused(t *testing.T) {
	src := openTest(t, testOptions(t))
	users := populate(t, src)
	want := snapshot(t, src, users)
	good := backupBytes(t, src)
	if _, err := VerifyBackup(bytes.NewReader(good), Hidden{}); err != nil {
		t.Fatalf("the backup as written: %v", err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		bad := slices.Clone(good)
		at := rng.IntN(len(bad))
		bad[at] ^= byte(1 + rng.IntN(255))
		_, err := VerifyBackup(bytes.NewReader(bad), Hidden{})
		if !errors.Is(err, ErrBadBackup) && !errors.Is(err, ErrFormatVersion) {
			t.Fatalf("byte %d of %d changed: VerifyBackup %v, want it refused", at, len(good), err)
		}
	}
	// The helper's case: one byte of a user id.
	i := bytes.Index(good, []byte(users[0][1]))
	if i < 0 {
		t.Fatalf("user id %q not in the backup", users[0][1])
	}
	bad := slices.Clone(good)
	bad[i+len(users[0][1])-1]++
	if _, err := VerifyBackup(bytes.NewReader(bad), Hidden{}); !errors.Is(err, ErrBadBackup) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("a user id's byte changed: %v, want the checksum named", err)
	}

	// A backup of format 3: its header says so, and its end mark has no checksum.
	v1 := append(binary.AppendUvarint(slices.Clip(backupMagic), 3), good[len(backupMagic)+1:len(good)-8]...)
	dst := openTest(t, testOptions(t))
	if _, err := VerifyBackup(bytes.NewReader(v1), Hidden{}); err != nil {
		t.Fatalf("a backup of format 3: VerifyBackup %v", err)
	}
	if err := dst.Restore(bytes.NewReader(v1), nil, nil); err != nil {
		t.Fatalf("a backup of format 3: %v", err)
	}
	if got := snapshot(t, dst, users); !sameStates(got, want) {
		t.Fatal("the backup of format 3 restored other data")
	}
}

// A backup taken after a user was erased names the user nowhere: neither
// its filter (small, in the LSM tree, or large, in the value log) nor its
// journal, nor the deletion marks Badger keeps until compaction.
func TestBackupAfterDeleteNamesNoErasedUser(t *testing.T) {
	s := openTest(t, testOptions(t))
	users := []string{"erased-small-user", "erased-large-user"}
	for i, u := range users {
		upTo := mustAppend(t, s, "feed", u, "covered")
		value := []byte("filter of " + u)
		if i == 1 {
			value = bytes.Repeat([]byte{7}, 64<<10) // above ValueThreshold
		}
		if err := s.WriteBack([]Write{{NS: "feed", User: u, Value: value, UpTo: upTo}}, nil); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, s, "feed", u, "pending")
	}
	if err := s.WriteBack([]Write{{NS: "feed", User: "kept-user", Value: []byte("filter of kept-user")}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if err := s.Delete("feed", u); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if bytes.Contains(buf.Bytes(), []byte(u)) {
			t.Errorf("the backup taken after %s was erased names it", u)
		}
	}
	dst := openTest(t, testOptions(t))
	if err := dst.Restore(bytes.NewReader(buf.Bytes()), nil, nil); err != nil {
		t.Fatal(err)
	}
	if f, _ := mustLoad(t, dst, "feed", "kept-user"); string(f) != "filter of kept-user" {
		t.Errorf("the user kept was restored as %q", f)
	}
}

// throttledWriter takes about a millisecond for every 32 KiB written: a
// client that reads a backup more slowly than the store is read.
type throttledWriter struct{ n int }

func (w *throttledWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	time.Sleep(time.Duration(len(p)>>15) * time.Millisecond)
	return len(p), nil
}

// backupToASlowClient backs s up to a throttledWriter and returns it with
// how far the heap grew past what it held before, at its peak (sampled
// every 2 ms).
func backupToASlowClient(t *testing.T, s *Store) (*throttledWriter, int64) {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak.Store(max(peak.Load(), ms.HeapAlloc))
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	w := &throttledWriter{}
	err := s.Backup(w)
	close(done)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	return w, int64(peak.Load()) - int64(base)
}

// A backup holds a few lists in memory at a time, not the store: Badger's
// own stream (8 readers, 32 buffers of 32 MiB queued for the writer) grew
// the heap by 356 MB for this store of 60 MB read by a slow client.
func TestBackupHeapStaysSmallForASlowClient(t *testing.T) {
	s := openTest(t, testOptions(t))
	// 10,000 filters of 6,000 bytes, in the value log: what a backup holds
	// goes by bytes, and 100,000 filters of 600 bytes (739 MB with the
	// Stream) took six times as long to write under -race.
	value := make([]byte, 6000)
	for b := range 10 {
		ws := make([]Write, 0, 1000)
		for i := range 1000 {
			value[0], value[1] = byte(i), byte(b)
			ws = append(ws, Write{NS: "feed", User: fmt.Sprintf("u%d-%d", b, i), Value: bytes.Clone(value)})
		}
		if err := s.WriteBack(ws, nil); err != nil {
			t.Fatal(err)
		}
	}
	w, grew := backupToASlowClient(t, s)
	if w.n < 60e6 {
		t.Fatalf("backup of %d bytes, want the 60 MB written", w.n)
	}
	if grew > 128<<20 {
		t.Fatalf("the heap grew by %d MB during a backup of %d MB", grew>>20, w.n>>20)
	}
}

// A backup holds the values of about one list in memory, however large
// each is: an iterator that reads values ahead (Badger's default reads
// the next 100) held 100 filters of half a MiB at once.
func TestBackupHeapStaysSmallForLargeFilters(t *testing.T) {
	s := openTest(t, testOptions(t).WithMinFreeBytes(-1))
	const users, size = 120, 512 << 10
	for u := range users {
		value := bytes.Repeat([]byte{byte(u)}, size)
		if err := s.WriteBack([]Write{{NS: "feed", User: fmt.Sprintf("crawler-%d", u), Value: value}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Collected often, the heap's peak is what the backup holds, not
	// garbage the collector has yet to reach.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	w, grew := backupToASlowClient(t, s)
	if w.n < users*size {
		t.Fatalf("backup of %d bytes, want the %d MB written", w.n, users*size>>20)
	}
	if grew > 16<<20 {
		t.Fatalf("the heap grew by %d MB during a backup of %d MB", grew>>20, w.n>>20)
	}
}

// A user erased while a backup begins is in it whole or not at all: an
// erase between the backup's reading of the journal and of the filters
// left the user's journal records in it without its filter, and a
// restore brought back part of an erased user.
func TestBackupTakesNoUserErasedBetweenItsSnapshots(t *testing.T) {
	s := openTest(t, testOptions(t))
	storeFilterAndJournal(t, s, "erased")
	erased := make(chan error, 1)
	betweenBackupSnapshots = func() {
		go func() { erased <- s.Delete("feed", "erased") }()
		select {
		case err := <-erased:
			erased <- err
		case <-time.After(200 * time.Millisecond): // waiting for the backup, as it should
		}
	}
	defer func() { betweenBackupSnapshots = nil }()
	var buf bytes.Buffer
	if err := s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	if err := <-erased; err != nil {
		t.Fatal(err)
	}
	restoresWholeOrNotAtAll(t, buf.Bytes(), "erased")
}

// storeFilterAndJournal gives user of "feed" a stored filter and a journal
// record written since it.
func storeFilterAndJournal(t *testing.T, s *Store, user string) {
	t.Helper()
	upTo := mustAppend(t, s, "feed", user, "written back")
	if err := s.WriteBack([]Write{{NS: "feed", User: user, Value: []byte("filter of " + user), UpTo: upTo}}, nil); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "feed", user, "journaled since")
}

// restoresWholeOrNotAtAll restores backup into a fresh store and checks
// that user of "feed" comes back with both its filter and its journal, or
// with neither.
func restoresWholeOrNotAtAll(t *testing.T, backup []byte, user string) {
	t.Helper()
	dst := openTest(t, testOptions(t))
	if err := dst.Restore(bytes.NewReader(backup), nil, nil); err != nil {
		t.Fatal(err)
	}
	f, j := mustLoad(t, dst, "feed", user)
	if (f == nil) != (len(j) == 0) {
		t.Fatalf("the user %s as the backup began restored as filter %q and journal %v: whole or not at all", user, f, journalValues(j))
	}
}

// A backup that begins while a namespace is purged holds each of its users
// whole or not at all: one that took its snapshots between the deletion of
// a page's filters and the erasure of their journal records held the
// users by their journal records alone.
func TestBackupTakesNoUserOfANamespaceHalfPurged(t *testing.T) {
	s := openTest(t, testOptions(t))
	storeFilterAndJournal(t, s, "purged")
	var buf bytes.Buffer
	backedUp := make(chan error, 1)
	betweenPurgeSteps = func() {
		go func() { backedUp <- s.Backup(&buf) }()
		select {
		case err := <-backedUp:
			backedUp <- err
		case <-time.After(200 * time.Millisecond): // waiting for the purge's step, as it should
		}
	}
	defer func() { betweenPurgeSteps = nil }()
	if _, err := s.PurgeNamespace("feed"); err != nil {
		t.Fatal(err)
	}
	if err := <-backedUp; err != nil {
		t.Fatal(err)
	}
	restoresWholeOrNotAtAll(t, buf.Bytes(), "purged")
}

// A backup taken while users are written back, journaled, erased and the
// value log is collected is one moment of the store: every user restores
// whole (its own filter, at least as new as what was acknowledged before
// the backup began), and an erased one whole or not at all; users whose
// filters are in the value log and those inline alike.
func TestBackupUnderConcurrentWritesErasesAndGCIsASnapshot(t *testing.T) {
	s := openTest(t, testOptions(t).WithMinFreeBytes(-1))
	const users, erased = 60, 10 // the last erased users are erased during the backup
	value := func(u, n int) []byte {
		v := fmt.Appendf(nil, "u%d|%d|", u, n)
		if u%2 == 0 {
			v = append(v, bytes.Repeat([]byte{'.'}, 600)...) // in the value log
		}
		return v
	}
	name := func(u int) string { return fmt.Sprintf("u%d", u) }
	// round n of user u: its record n journaled, then its filter n written
	// back covering it.
	round := func(u, n int) error {
		seq, err := s.Append("feed", name(u), fmt.Appendf(nil, "u%d|%d|", u, n), 0)
		if err == nil {
			err = s.WriteBack([]Write{{NS: "feed", User: name(u), Value: value(u, n), UpTo: seq}}, nil)
		}
		return err
	}
	for u := range users {
		if err := round(u, 0); err != nil {
			t.Fatal(err)
		}
		// Acknowledged before the backup, journaled only.
		mustAppend(t, s, "feed", name(u), fmt.Sprintf("u%d|1|", u))
	}
	// Users enough for lists written one after another while the rest
	// changes, and the value log collected under the backup's iterator.
	var filler []Write
	for u := range 4000 {
		filler = append(filler, Write{NS: "other", User: name(u), Value: value(0, u)})
	}
	if err := s.WriteBack(filler, nil); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(3)
	go func() { // write-backs
		defer wg.Done()
		for n := 2; ; n++ {
			for u := range users - erased {
				select {
				case <-stop:
					return
				default:
				}
				if err := round(u, n); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	go func() { // erasure
		defer wg.Done()
		for u := users - erased; u < users; u++ {
			if err := s.Delete("feed", name(u)); err != nil {
				errs <- err
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	go func() { // value-log GC
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			s.runGC()
			if err := s.flushMemtables(); err != nil {
				errs <- err
				return
			}
		}
	}()
	time.Sleep(15 * time.Millisecond) // a few erased before it, the others during it
	var buf bytes.Buffer
	err := s.Backup(&slowWriter{w: &buf})
	close(stop)
	wg.Wait()
	close(errs)
	if err != nil {
		t.Fatal(err)
	}
	for err := range errs {
		t.Fatal(err)
	}
	dst := openTest(t, testOptions(t).WithMinFreeBytes(-1))
	if err := dst.Restore(bytes.NewReader(buf.Bytes()), nil, nil); err != nil {
		t.Fatal(err)
	}
	for u := range users {
		f, j := mustLoad(t, dst, "feed", name(u))
		if u >= users-erased && f == nil && len(j) == 0 {
			continue // erased before the backup's snapshots
		}
		var fn int
		if _, err := fmt.Sscanf(string(f), "u%d|%d|", new(int), &fn); err != nil || !bytes.Equal(f, value(u, fn)) {
			t.Fatalf("%s restored with filter %.30q (%v), want its own", name(u), f, err)
		}
		state := fn
		for _, e := range j {
			var ju, jn int
			if _, err := fmt.Sscanf(string(e.Value), "u%d|%d|", &ju, &jn); err != nil || ju != u {
				t.Fatalf("%s restored with journal record %q", name(u), e.Value)
			}
			state = max(state, jn)
		}
		if state < 1 {
			t.Fatalf("%s restored at round %d, before what was acknowledged when the backup began", name(u), state)
		}
	}
}

// slowWriter writes through to w, 20 ms a write: a client reading
// a backup while the store goes on changing.
type slowWriter struct{ w io.Writer }

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(20 * time.Millisecond)
	return w.w.Write(p)
}

// A backup written by Badger's Stream (the builds before backups read the
// store with one iterator) restores: testdata/stream-backup.bak holds, in
// namespace default, a filter inline (inline) and one in the value log
// (vlog, with a journal record since), a user journaled only (journaled)
// and none of gone, erased before it.
func TestBackupOfTheStreamBuildsRestores(t *testing.T) {
	raw, err := os.ReadFile("testdata/stream-backup.bak")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyBackup(bytes.NewReader(raw), Hidden{}); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, testOptions(t))
	if err := s.Restore(bytes.NewReader(raw), nil, nil); err != nil {
		t.Fatal(err)
	}
	if users, err := s.Users("default", "", 0, Hidden{}); err != nil || !slices.Equal(users, []string{"inline", "journaled", "vlog"}) {
		t.Fatalf("users %q (%v), want inline, journaled and vlog", users, err)
	}
	for _, u := range []struct {
		user    string
		items   int // recorded in its filter, named prefix-0, prefix-1, ...
		prefix  string
		journal int // records
	}{{"inline", 3, "a", 0}, {"vlog", 3000, "b", 1}, {"journaled", 0, "", 1}, {"gone", 0, "", 0}} {
		raw, j := mustLoad(t, s, "default", u.user)
		if len(j) != u.journal || (raw == nil) != (u.items == 0) {
			t.Errorf("%s restored with a filter of %d bytes and %d journal records, want %d", u.user, len(raw), len(j), u.journal)
			continue
		}
		if raw == nil {
			continue
		}
		f, err := userfilter.Decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", u.user, err)
		}
		for i := range u.items {
			if item := fmt.Sprintf("%s-%d", u.prefix, i); !f.Test(item, time.Now()) {
				t.Fatalf("%s restored without %s", u.user, item)
			}
		}
	}
}

func TestRestoreOfAFilterTooLargeForTheStoreFailsThatUserAlone(t *testing.T) {
	src := openTest(t, testOptions(t))
	big := bytes.Repeat([]byte{0xab}, 1<<20)
	if err := src.WriteBack([]Write{{NS: "feed", User: "big", Value: big}, {NS: "feed", User: "u1", Value: []byte{1}}}, nil); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := src.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	// Holds 8 bytes less than big; no value-log GC, as in
	// TestWriteBackOfAValueTooLargeFailsThatUserAlone.
	dst := openTest(t, testOptions(t).WithValueLogFileSize(1<<20).WithGCInterval(-1))
	err := dst.Restore(&buf, nil, nil)
	var wbe *WriteBackError
	if !errors.As(err, &wbe) || !errors.Is(err, ErrTooLarge) || len(wbe.Failed) != 1 || wbe.Failed[0].User != "big" {
		t.Fatalf("Restore error = %.300v, want ErrTooLarge for feed/big alone", err)
	}
	if strings.Contains(err.Error(), "00000000") {
		t.Errorf("error quotes the value: %.300q", err)
	}
	if f, _ := mustLoad(t, dst, "feed", "u1"); string(f) != "\x01" {
		t.Errorf("u1 restored as %x, want 01", f)
	}
}

// backupBytes is a backup of s, whole.
func backupBytes(t *testing.T, s *Store) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
