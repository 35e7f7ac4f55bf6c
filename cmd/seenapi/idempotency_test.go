package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// getJSON gets url and decodes its JSON answer.
func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return m
}

// stopBinary stops run as a deploy does (SIGTERM) and fails unless it
// exits cleanly.
func stopBinary(t *testing.T, run *binaryRun) {
	t.Helper()
	run.cmd.Process.Signal(syscall.SIGTERM)
	<-run.read
	if err := run.cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, run.log.String())
	}
}

// postKeyed sends body to url with an Idempotency-Key and returns the
// status, whether the answer was given again and the answer.
func postKeyed(t *testing.T, url, key, body string) (int, bool, map[string]any) {
	t.Helper()
	status, h, m := postHeaders(t, url, body, "Idempotency-Key", key)
	return status, h.Get("Idempotent-Replayed") == "true", m
}

// A crash right after a keyed call loses the answers the service keeps in
// memory; the call's journal record keeps its answer with its items, so
// its retry after the restart gets that answer, and records nothing, for
// the one call and for a batch, with the service's real binary killed -9.
func TestKeyedCallsAreAnsweredAgainAfterKill9(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	cands := make([]string, 60)
	for i := range cands {
		cands[i] = fmt.Sprintf(`"item-%02d"`, i)
	}
	one := `{"candidates":[` + strings.Join(cands, ",") + `],"limit":20}`
	batch := `{"requests":[{"user":"a","candidates":[` + strings.Join(cands[:30], ",") + `],"limit":10},` +
		`{"user":"b","candidates":[` + strings.Join(cands[30:], ",") + `],"limit":5}]}`
	userURL := "/v1/namespaces/default/users/u/filter"
	batchURL := "/v1/namespaces/default/filter"

	// --flush-interval 1h: the calls are in the journal only when it dies.
	run := startBinary(t, bin, "--data-dir", dir, "--flush-interval", "1h")
	status, again, first := postKeyed(t, run.url+userURL, "key-1", one)
	if status != 200 || again || len(first["unseen"].([]any)) != 20 {
		t.Fatalf("first call: %d %v %v", status, again, first)
	}
	status, again, firstBatch := postKeyed(t, run.url+batchURL, "key-2", batch)
	if status != 200 || again {
		t.Fatalf("first batch: %d %v %v", status, again, firstBatch)
	}
	run.kill()

	run = startBinary(t, bin, "--data-dir", dir, "--flush-interval", "1h")
	// The same key with another body is refused and changes nothing.
	otherBatch := strings.Replace(batch, `"limit":5`, `"limit":4`, 1)
	if status, _, m := postKeyed(t, run.url+batchURL, "key-2", otherBatch); status != 422 ||
		!strings.HasSuffix(fmt.Sprint(m["type"]), "idempotency-key-reused") {
		t.Errorf("batch key reused with another body after a restart: %d %v", status, m)
	}
	other := strings.Replace(one, `"limit":20`, `"limit":19`, 1)
	if status, _, m := postKeyed(t, run.url+userURL, "key-1", other); status != 422 ||
		!strings.HasSuffix(fmt.Sprint(m["type"]), "idempotency-key-reused") {
		t.Errorf("key reused with another body after a restart: %d %v", status, m)
	}
	status, again, retry := postKeyed(t, run.url+userURL, "key-1", one)
	if status != 200 || !again || !reflect.DeepEqual(retry, first) {
		t.Fatalf("retry after kill -9: %d, replayed %v\n%v\nfirst answer\n%v", status, again, retry, first)
	}
	status, again, retryBatch := postKeyed(t, run.url+batchURL, "key-2", batch)
	if status != 200 || !again || !reflect.DeepEqual(retryBatch, firstBatch) {
		t.Fatalf("batch retry after kill -9: %d, replayed %v\n%v\nfirst answer\n%v", status, again, retryBatch, firstBatch)
	}
	// Each retry counts once among the answers given again.
	if stats := getJSON(t, run.url+"/v1/stats"); stats["idempotent_replays"] != 2.0 {
		t.Errorf("idempotent_replays %v after two retries answered again, want 2", stats["idempotent_replays"])
	}
	// Nothing was recorded again: the users hold the first calls' items.
	for user, want := range map[string]float64{"u": 20, "a": 10, "b": 5} {
		if st := getJSON(t, run.url+"/v1/namespaces/default/users/"+user); st["items"] != want {
			t.Errorf("user %s holds %v items after the retries, want %v", user, st["items"], want)
		}
	}
}

// A graceful stop (SIGTERM, a deploy) keeps the answers kept for retries
// in the data directory, and the next start reads them back: a retry
// after the restart gets its answer again, a dry run's too (which no
// journal holds). A file that does not read is a warning, not a failed
// start.
func TestKeptAnswersOutliveAGracefulRestartOfTheBinary(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	userURL := "/v1/namespaces/default/users/u/filter"
	one := `{"candidates":["a","b","c","d"],"limit":2}`
	dry := `{"candidates":["x","y"],"record":"none"}`
	run := startBinary(t, bin, "--data-dir", dir)
	_, _, first := postKeyed(t, run.url+userURL, "key-1", one)
	_, _, firstDry := postKeyed(t, run.url+userURL, "key-2", dry)
	stopBinary(t, run)
	if !strings.Contains(run.log.String(), `msg="seenapi: answers kept for retries saved" answers=2`) {
		t.Errorf("no line about the answers saved:\n%s", run.log.String())
	}

	run = startBinary(t, bin, "--data-dir", dir)
	if !strings.Contains(run.log.String(), `msg="seenapi: answers kept for retries read back" answers=2`) {
		t.Errorf("no line about the answers read back:\n%s", run.log.String())
	}
	retries := func(after string) {
		t.Helper()
		for _, c := range []struct {
			key, body string
			first     map[string]any
		}{{"key-1", one, first}, {"key-2", dry, firstDry}} {
			status, again, m := postKeyed(t, run.url+userURL, c.key, c.body)
			if status != 200 || !again || !reflect.DeepEqual(m, c.first) {
				t.Errorf("retry of %s after %s: %d, replayed %v, %v; want %v", c.key, after, status, again, m, c.first)
			}
		}
	}
	retries("a graceful restart")
	// The log of answers took them over as the service started: the file
	// is gone (an erase could not void it), and a crash leaves them to the
	// next start all the same.
	if _, err := os.Stat(filepath.Join(dir, keptAnswersFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file of kept answers is still there once the service started: %v", err)
	}
	run.kill()
	run = startBinary(t, bin, "--data-dir", dir)
	retries("a graceful restart, then kill -9")
	stopBinary(t, run)

	if err := os.WriteFile(filepath.Join(dir, keptAnswersFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	run = startBinary(t, bin, "--data-dir", dir)
	if status, _, _ := postKeyed(t, run.url+userURL, "key-3", one); status != 200 {
		t.Errorf("a call after a start with a broken file of kept answers: %d", status)
	}
	if !strings.Contains(run.log.String(), `msg="seenapi: cannot read back the answers kept for retries`) {
		t.Errorf("no warning about the broken file:\n%s", run.log.String())
	}
}

// The journal holds a keyed call's answer only until its user is written
// back; the log of answers holds it for its time to live. A call whose user
// was written back long before a kill -9 is answered again after the
// restart, and after a second kill -9 too (the first restart folded the
// journal in and wrote every user back). A graceful stop, which saves the
// answers whole, leaves no file of the log.
func TestKeyedAnswersOutliveTheirWriteBackAndTwoCrashes(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	userURL := "/v1/namespaces/default/users/u/filter"
	one := `{"candidates":["a","b","c","d","e"],"limit":2}`
	args := []string{"--data-dir", dir, "--flush-interval", "50ms"}
	run := startBinary(t, bin, args...)
	status, _, first := postKeyed(t, run.url+userURL, "key-1", one)
	if status != 200 {
		t.Fatalf("first call: %d %v", status, first)
	}
	// Written back: the journal no longer holds the call.
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := getJSON(t, run.url+"/v1/stats")
		if st["dirty_users"] == 0.0 && st["flushed_users"].(float64) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the user is not written back: %v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	run.kill()

	run = startBinary(t, bin, args...)
	if !strings.Contains(run.log.String(), `msg="seenapi: answers kept for retries read back from their log" answers=1`) {
		t.Errorf("no line about the answers read back from the log:\n%s", run.log.String())
	}
	waitReady(t, run.url)
	run.kill()

	run = startBinary(t, bin, args...)
	status, again, retry := postKeyed(t, run.url+userURL, "key-1", one)
	if status != 200 || !again || !reflect.DeepEqual(retry, first) {
		t.Fatalf("retry after the write-back and two kill -9: %d, replayed %v\n%v\nfirst answer\n%v", status, again, retry, first)
	}
	// The user holds the first call's items only.
	if st := getJSON(t, run.url+"/v1/namespaces/default/users/u"); st["items"] != 2.0 {
		t.Errorf("the user holds %v items, want 2", st["items"])
	}
	stopBinary(t, run)
	if files, _ := filepath.Glob(filepath.Join(dir, answersLogDir, "*")); len(files) != 0 {
		t.Errorf("files of the log after a graceful stop: %v", files)
	}
}

// waitReady waits until the service at url answers /readyz with 200 (the
// journal folded in).
func waitReady(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
