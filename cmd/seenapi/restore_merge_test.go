package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// restore --merge of the backup of a service that crashed before writing
// back its last calls into the data directory of another that did too:
// every candidate the calls of either found seen (false positives among
// them, which they did not record) or recorded stays seen.
func TestRestoreMergeAfterACrashKeepsWhatTheLastCallsFoundSeen(t *testing.T) {
	items := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s:%d", prefix, i)
		}
		return out
	}
	nss, _ := loadNamespaces("")
	open := func(dir string) (*storage.Store, *eviction.HotSet) {
		t.Helper()
		store, err := storage.Open(storage.DefaultOptions(dir).WithMinFreeBytes(-1).WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		// No write-back but the test's own: one running while the files
		// are copied (a slow machine passing the flush interval between
		// the calls and the copy) copied a value log older than the
		// memtable pointing into it.
		hot, err := eviction.New(store, nss, eviction.Options{FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return store, hot
	}
	record := func(hot *eviction.HotSet, cands []string, mode userfilter.Mode) {
		t.Helper()
		if _, err := hot.Filter("default", "u", cands, 0, mode); err != nil {
			t.Fatal(err)
		}
	}
	closeBoth := func(store *storage.Store, hot *eviction.HotSet) {
		t.Helper()
		if err := hot.Close(); err != nil {
			t.Fatal(err)
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// Each side: a user's filter written back, then calls in the journal
	// alone when the service crashes (its files copied as they are).
	var seen []string
	crashed := func(dir, prefix, stored string) {
		t.Helper()
		live := dir + ".live"
		store, hot := open(live)
		record(hot, items(stored, 800), userfilter.RecordAll)
		if err := hot.Flush(); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, items(stored, 800)...)
		for call := range 8 {
			cands := items(fmt.Sprintf("%s%d", prefix, call), 500)
			record(hot, cands, userfilter.RecordReturned)
			seen = append(seen, cands...) // found seen, or recorded
		}
		copyDir(t, live, dir, "LOCK") // what a crash leaves
		closeBoth(store, hot)
	}
	dir := t.TempDir()
	from, into := filepath.Join(dir, "from"), filepath.Join(dir, "into")
	crashed(from, "b", "d")
	crashed(into, "c", "s")
	file := filepath.Join(dir, "backup")
	var out bytes.Buffer
	if code := run(context.Background(), []string{"backup", "--data-dir", from, "--out", file}, noEnv, &out, &out, nil); code != 0 {
		t.Fatalf("backup exit %d: %s", code, out.String())
	}

	if code := run(context.Background(), []string{"restore", "--merge", "--data-dir", into, "--in", file, "--min-free-bytes", "-1"}, noEnv, &out, &out, nil); code != 0 {
		t.Fatalf("restore --merge exit %d: %s", code, out.String())
	}
	var lost []string
	for i, s := range seenAfterRestart(t, into, "default", "u", seen...) {
		if !s {
			lost = append(lost, seen[i])
		}
	}
	if len(lost) > 0 {
		t.Errorf("after restore --merge %d of the %d items the user saw test unseen: %v", len(lost), len(seen), lost)
	}
}

// A plain restore into a data directory a crash left says that the
// directory's calls not yet written back will be replayed onto the
// restored filters, and they are: the user the backup replaces keeps the
// items of those calls besides the backup's (after a graceful stop they
// would have been written back, and replaced).
func TestRestoreIntoADirectoryACrashLeftSaysItsCallsStay(t *testing.T) {
	nss, _ := loadNamespaces("")
	dir := t.TempDir()
	from, into := filepath.Join(dir, "from"), filepath.Join(dir, "into")
	for _, side := range []struct {
		dir, item string
		crash     bool
	}{{from, "backed-up", false}, {into, "left-by-the-crash", true}} {
		live := side.dir
		if side.crash {
			live += ".live"
		}
		store, err := storage.Open(storage.DefaultOptions(live).WithMinFreeBytes(-1).WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		hot, err := eviction.New(store, nss, eviction.Options{FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hot.Filter("default", "u", []string{side.item}, 0, userfilter.RecordAll); err != nil {
			t.Fatal(err)
		}
		if side.crash {
			copyDir(t, live, side.dir, "LOCK") // what a crash leaves: the call in the journal alone
		}
		if err := errors.Join(hot.Close(), store.Close()); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "backup")
	var out bytes.Buffer
	if code := run(context.Background(), []string{"backup", "--data-dir", from, "--out", file}, noEnv, &out, &out, nil); code != 0 {
		t.Fatalf("backup exit %d: %s", code, out.String())
	}
	// A backup of the directory first, and a restore run twice (to finish
	// one interrupted, say), each leave its calls as unwritten as they
	// were: the second restore warns too.
	if code := run(context.Background(), []string{"backup", "--data-dir", into, "--out", file + ".into"}, noEnv, &out, &out, nil); code != 0 {
		t.Fatalf("backup exit %d: %s", code, out.String())
	}
	for i := range 2 {
		out.Reset()
		if code := run(context.Background(), []string{"restore", "--data-dir", into, "--in", file, "--min-free-bytes", "-1"}, noEnv, &out, &out, nil); code != 0 {
			t.Fatalf("restore exit %d: %s", code, out.String())
		}
		if want := "the next start replays them onto the restored users"; !strings.Contains(out.String(), want) {
			t.Errorf("restore %d: the log does not say %q:\n%s", i+1, want, out.String())
		}
	}
	if seen := seenAfterRestart(t, into, "default", "u", "backed-up", "left-by-the-crash"); !seen[0] || !seen[1] {
		t.Errorf("after the restore and a start, the user has seen [backed-up left-by-the-crash]: %v, want both", seen)
	}
}
