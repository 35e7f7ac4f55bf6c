//go:build linux

package storage

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

// vlogResident returns the resident bytes of this process's mappings of
// the value-log files in dir (Rss of /proc/self/smaps).
func vlogResident(t *testing.T, dir string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rss int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if key, rest, ok := strings.Cut(line, ":"); ok && !strings.Contains(key, " ") && !strings.Contains(key, "-") {
			if in && key == "Rss" {
				kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err != nil {
					t.Fatalf("smaps: %q: %v", line, err)
				}
				rss += kb << 10
			}
			continue
		}
		in = mapsValueLog(line, dir) // a mapping's header
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rss
}

// vlogCached returns the bytes of the value-log files in dir that are in the
// page cache, mapped by the process or not (mincore over a map of each).
func vlogCached(t *testing.T, dir string) int64 {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	page := int64(os.Getpagesize())
	var cached int64
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := f.Stat()
		if err != nil || fi.Size() == 0 {
			f.Close()
			continue
		}
		// A map of our own touches no page: mincore reports the page cache.
		b, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		vec := make([]byte, (fi.Size()+page-1)/page)
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
		unix.Munmap(b)
		if errno != 0 {
			t.Fatalf("mincore %s: %v", name, errno)
		}
		for _, v := range vec {
			cached += int64(v&1) * page
		}
	}
	return cached
}

// writeValues writes back users random values of size bytes, as users u0,
// u1, ... of namespace feed, and returns them.
func writeValues(t *testing.T, s *Store, users, size int) [][]byte {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	values := make([][]byte, users)
	var ws []Write
	for i := range values {
		values[i] = make([]byte, size)
		for j := range values[i] {
			values[i][j] = byte(r.Uint32())
		}
		ws = append(ws, Write{NS: "feed", User: fmt.Sprint("u", i), Value: values[i]})
	}
	if err := s.WriteBack(ws, nil); err != nil {
		t.Fatalf("WriteBack: %v", err)
	}
	return values
}

// TestReleaseIntervalReleasesValueLog: an open store releases its value
// log's pages by itself, every ReleaseInterval.
func TestReleaseIntervalReleasesValueLog(t *testing.T) {
	s := openTest(t, testOptions(t).WithReleaseInterval(50*time.Millisecond))
	writeValues(t, s, 4000, 4<<10)
	dir := s.mappedDir()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		rss := vlogResident(t, dir)
		if rss < 1<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("value log's maps still hold %d B resident 10 s after writing, with a ReleaseInterval of 50ms", rss)
		}
	}
}

// TestReleaseValueLogKeepsValues: a release takes the value log's pages out
// of the process's resident memory, and every value reads back unchanged.
func TestReleaseValueLogKeepsValues(t *testing.T) {
	opts := testOptions(t).WithReleaseInterval(-1) // released by the test alone
	s := openTest(t, opts)
	const users, size = 4000, 4 << 10 // 16 MiB of values, all in the value log
	values := writeValues(t, s, users, size)
	dir := s.mappedDir()
	before, cachedBefore := vlogResident(t, dir), vlogCached(t, opts.Dir)
	if before < users*size/2 {
		t.Fatalf("value log's maps hold %d B resident after writing %d B of values: the test writes too little", before, users*size)
	}
	if !s.releaseValueLog(dir) {
		t.Fatal("releaseValueLog failed")
	}
	after, cachedAfter := vlogResident(t, dir), vlogCached(t, opts.Dir)
	t.Logf("value log: %d B resident and %d B in the page cache before a release, %d B and %d B after", before, cachedBefore, after, cachedAfter)
	if after > before/10 {
		t.Errorf("value log's maps hold %d B resident after a release, %d B before: want at most a tenth", after, before)
	}
	// Written but not yet synced, the pages would leave the maps and stay
	// in the page cache.
	if freed := cachedBefore - cachedAfter; freed < before*9/10 {
		t.Errorf("a release took %d B of the value log out of the page cache (%d B before, %d B after), its maps held %d B: want at least nine tenths of that", freed, cachedBefore, cachedAfter, before)
	}
	for i, want := range values {
		got, _ := mustLoad(t, s, "feed", fmt.Sprint("u", i))
		if !bytes.Equal(got, want) {
			t.Fatalf("user u%d's value changed by a release", i)
		}
	}
}

// TestValueLogLoadReadsNoAhead: loading users whose values were released
// brings back about the pages their values are in, not the kernel's
// readahead around each (up to the device's read_ahead_kb, megabytes on
// some disks), which made a hot set that evicts and loads users hold
// hundreds of megabytes of the value log resident between two releases.
func TestValueLogLoadReadsNoAhead(t *testing.T) {
	opts := testOptions(t).WithReleaseInterval(-1) // released by the test alone
	s := openTest(t, opts)
	const users, size, loads = 16000, 1 << 10, 64 // 16 MiB of values
	values := writeValues(t, s, users, size)
	dir := s.mappedDir()
	if !s.releaseValueLog(dir) {
		t.Fatal("releaseValueLog failed")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range loads {
		i := r.IntN(users)
		if got, _ := mustLoad(t, s, "feed", fmt.Sprint("u", i)); !bytes.Equal(got, values[i]) {
			t.Fatalf("user u%d's value changed", i)
		}
	}
	// A value of 1 KiB spans at most two pages; four a load leaves room for
	// Badger's own reads of the value's header.
	page := int64(os.Getpagesize())
	rss, cached := vlogResident(t, dir), vlogCached(t, opts.Dir)
	if limit := loads * 4 * page; rss > limit || cached > limit {
		t.Errorf("after %d loads of %d B values the value log holds %d B resident and %d B in the page cache: want at most %d B (4 pages a load)",
			loads, size, rss, cached, limit)
	}
}

// TestValueLogGCReleasesWhatItRead: value-log GC reads each file it
// rewrites whole, through Badger's map, and Badger keeps a rewritten file
// (mapped) until no iterator is open; the store releases the pages GC read
// after each rewrite, so GC rewriting file after file under load does not
// hold them all resident until the next release.
func TestValueLogGCReleasesWhatItRead(t *testing.T) {
	opts := testOptions(t).WithValueLogFileSize(4 << 20).WithGCInterval(-1).WithReleaseInterval(time.Hour)
	s := openTest(t, opts)
	writeValues(t, s, 8000, 1<<10) // 8 MiB of values, two files and more
	writeValues(t, s, 8000, 1<<10) // again: the first copies are garbage
	dir := s.mappedDir()
	if !s.releaseValueLog(dir) {
		t.Fatal("releaseValueLog failed")
	}
	if err := s.flushMemtables(); err != nil {
		t.Fatal(err)
	}
	// An iterator open, as a scan or a backup holds one, keeps the files
	// GC rewrites.
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.DefaultIteratorOptions)
	defer it.Close()
	if !s.gcRounds() {
		t.Fatal("value-log GC rewrote no file: the test makes too little garbage")
	}
	if rss := vlogResident(t, dir); rss > 1<<20 {
		t.Errorf("value log's maps hold %d B resident after GC rewrote its files: want at most 1 MiB", rss)
	}
}
