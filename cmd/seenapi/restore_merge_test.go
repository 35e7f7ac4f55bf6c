package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/storage/storagetest"
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
		storagetest.CopyAsACrashLeaves(t, live, dir)
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

// A plain restore refuses a data directory that holds users, here one a
// crash left (the service's binary killed -9) with keyed calls in its
// journal alone, and writes nothing. With --discard-existing the
// directory holds the backup's data alone: its own users are gone, the
// calls the crash left are not replayed onto the users restored (those
// the backup holds are), and a retry of a keyed call the crash left is
// served anew, not answered from the answers kept before.
func TestRestoreIntoADirectoryThatHoldsUsersDiscardsThemOnlyWhenTold(t *testing.T) {
	backed := wholeBackup(t, startService(t, nil, "--data-dir", t.TempDir(), "--flush-interval", "1h"), "u") // u saw "a"
	file := filepath.Join(t.TempDir(), "seenapi.backup")
	if err := os.WriteFile(file, backed, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	into := t.TempDir()
	const userURL, keyed = "/v1/namespaces/default/users/u/filter", `{"candidates":["left-by-the-crash","a"],"limit":1}`
	svc := startBinary(t, bin, "--data-dir", into, "--flush-interval", "1h")
	if status, again, m := postKeyed(t, svc.url+userURL, "key-1", keyed); status != 200 || again {
		t.Fatalf("keyed call: %d %v %v", status, again, m)
	}
	if status, m := post(t, svc.url+"/v1/namespaces/default/users/v/seen", `{"items":["v-item"]}`); status != 200 {
		t.Fatalf("seen: %d %v", status, m)
	}
	// The answer is in the answers' files too (written every 100 ms), not
	// only in the journal.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if files, _ := filepath.Glob(filepath.Join(into, answersLogDir, "*")); len(files) > 0 {
			if fi, err := os.Stat(files[0]); err == nil && fi.Size() > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no answer written to the answers' files within 10s")
		}
	}
	svc.kill()

	restore := func(args ...string) (int, string) {
		t.Helper()
		var out bytes.Buffer
		code := run(context.Background(), append([]string{"restore", "--data-dir", into, "--in", file, "--min-free-bytes", "-1"}, args...), noEnv, &out, &out, nil)
		return code, out.String()
	}
	// A backup of the directory leaves the crash to be found, as before.
	var out bytes.Buffer
	if code := run(context.Background(), []string{"backup", "--data-dir", into, "--out", file + ".into"}, noEnv, &out, &out, nil); code != 0 {
		t.Fatalf("backup exit %d: %s", code, out.String())
	}
	code, log := restore()
	for _, want := range []string{"--data-dir " + into + " holds users already (namespaces default)", "the calls a crash left not yet written back",
		"nothing was restored", "--discard-existing", "--merge"} {
		if code != 1 || !strings.Contains(log, want) {
			t.Errorf("plain restore: exit %d, want 1 and %q:\n%s", code, want, log)
		}
	}
	if strings.Contains(log, "backup restored") {
		t.Errorf("the refused restore restored:\n%s", log)
	}
	if code, log := restore("--merge", "--discard-existing"); code != 2 || !strings.Contains(log, "--merge and --discard-existing exclude each other") {
		t.Errorf("--merge --discard-existing: exit %d, want 2:\n%s", code, log)
	}
	// Twice: the second as to finish one interrupted.
	for i := range 2 {
		if code, log := restore("--discard-existing"); code != 0 || !strings.Contains(log, "discarded the data directory's users") ||
			!strings.Contains(log, "backup restored") {
			t.Fatalf("restore --discard-existing %d: exit %d:\n%s", i+1, code, log)
		}
	}

	svc = startBinary(t, bin, "--data-dir", into, "--flush-interval", "1h")
	if status, m := post(t, svc.url+"/v1/namespaces/default/users/u/check", `{"items":["a","left-by-the-crash"]}`); status != 200 ||
		fmt.Sprint(m["seen"]) != "[true false]" {
		t.Errorf("u after the restore: %d %v, want a (the backup's) seen and left-by-the-crash (the crash's) not", status, m)
	}
	if resp, err := http.Get(svc.url + "/v1/namespaces/default/users/v"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusNotFound {
		t.Errorf("v, whom the backup does not hold, after the restore: %d, want 404", resp.StatusCode)
	}
	if status, again, m := postKeyed(t, svc.url+userURL, "key-1", keyed); status != 200 || again || m["recorded"] != 1.0 {
		t.Errorf("the keyed call again after the restore: %d, given again %v, %v; want it served anew, recording left-by-the-crash", status, again, m)
	}
	if log := svc.log.String(); strings.Contains(log, "left by a crash") {
		t.Errorf("the start after the restore speaks of a crash, whose calls were discarded:\n%s", log)
	}
}

// restore --merge of a user whose stored filter was built with other
// parameters than the backup's (made anew with a changed profile since the
// backup was taken) cannot OR the two: it keeps the stored filter, whose
// items were recorded after the backup, names the user in its error, and
// merges the others.
func TestRestoreMergeKeepsAStoredUserItCannotMergeWith(t *testing.T) {
	record := func(dir string, p userfilter.Profile, user string, items ...string) {
		t.Helper()
		store, err := storage.Open(storage.DefaultOptions(dir).WithMinFreeBytes(-1).WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		hot, err := eviction.New(store, []eviction.Namespace{{Name: "default", Profile: p}}, eviction.Options{FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hot.Filter("default", user, items, 0, userfilter.RecordAll); err != nil {
			t.Fatal(err)
		}
		if err := hot.Close(); err != nil {
			t.Fatal(err)
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}
	hour := userfilter.Profile{Window: time.Hour, Granularity: 15 * time.Minute}
	twoHours := userfilter.Profile{Window: 2 * time.Hour, Granularity: 30 * time.Minute}
	dir := t.TempDir()
	from, into, file := filepath.Join(dir, "from"), filepath.Join(dir, "into"), filepath.Join(dir, "backup")
	record(from, hour, "u", "backed-up")
	record(from, hour, "v", "v-backed-up")
	record(into, twoHours, "u", "recorded-since") // u erased and made anew after a SIGHUP
	record(into, hour, "v", "v-recorded-since")
	var out bytes.Buffer
	if code := run(context.Background(), []string{"backup", "--data-dir", from, "--out", file}, noEnv, &out, &out, nil); code != 0 {
		t.Fatalf("backup exit %d: %s", code, out.String())
	}
	out.Reset()
	code := run(context.Background(), []string{"restore", "--merge", "--data-dir", into, "--in", file, "--min-free-bytes", "-1"}, noEnv, &out, &out, nil)
	if code != 1 || !strings.Contains(out.String(), "default/u") || !strings.Contains(out.String(), "cannot be merged") {
		t.Errorf("restore --merge: exit %d, want 1 naming default/u, which cannot be merged:\n%s", code, out.String())
	}
	if s := seenAfterRestart(t, into, "default", "u", "recorded-since"); !s[0] {
		t.Errorf("u's item recorded since the backup is lost by the restore")
	}
	if s := seenAfterRestart(t, into, "default", "v", "v-backed-up", "v-recorded-since"); !s[0] || !s[1] {
		t.Errorf("v after the restore: %v, want both its items seen", s)
	}
}
