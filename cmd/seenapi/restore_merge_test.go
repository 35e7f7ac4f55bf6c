package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// restore --merge into the data directory of a service that crashed before
// writing back its last calls: every candidate those calls found seen
// (false positives among them, which they did not record) or recorded
// stays seen, as do the backup's items.
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
		hot, err := eviction.New(store, nss, eviction.Options{})
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

	dir := t.TempDir()
	from, live, into := filepath.Join(dir, "from"), filepath.Join(dir, "live"), filepath.Join(dir, "into")
	store, hot := open(from)
	record(hot, items("b", 900), userfilter.RecordAll)
	closeBoth(store, hot)
	file := filepath.Join(dir, "backup")
	var out bytes.Buffer
	if code := run(context.Background(), []string{"backup", "--data-dir", from, "--out", file}, noEnv, &out, &out, nil); code != 0 {
		t.Fatalf("backup exit %d: %s", code, out.String())
	}

	store, hot = open(live)
	record(hot, items("s", 700), userfilter.RecordAll)
	if err := hot.Flush(); err != nil {
		t.Fatal(err)
	}
	seen := append(items("b", 900), items("s", 700)...)
	for call := range 8 { // in the journal alone
		cands := items(fmt.Sprintf("c%d", call), 500)
		record(hot, cands, userfilter.RecordReturned)
		seen = append(seen, cands...) // found seen, or recorded
	}
	copyDir(t, live, into, "LOCK") // what a crash leaves
	closeBoth(store, hot)

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
