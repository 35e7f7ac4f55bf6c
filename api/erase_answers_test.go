package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/eviction"
	"github.com/zeebo/xxh3"
)

// Erasing a user (DELETE .../users/{user}) forgets the answers kept for
// its keyed calls too: a kept answer lists the user's items, and a retry
// given it after the erase would get the erased history back and record
// nothing. Nor does an erased answer come back after a crash, from the
// answers log or from the snapshot of a graceful stop that the crash left
// in place. Another user's answers stay.
func TestEraseForgetsTheUsersKeptAnswers(t *testing.T) {
	dir := t.TempDir()
	serve := func() *Server { return newTestServer(t) }
	const body = `{"candidates":["a","b","c"],"limit":1}`
	do := func(srv *Server, method, user, key string) (int, bool) {
		t.Helper()
		if method == "POST" {
			return keyedCall(t, srv, user, key, body)
		}
		resp, err := srv.App().Test(httptest.NewRequest(method, "/v1/namespaces/default/users/"+user, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, false
	}
	retried := func(srv *Server, user string) bool {
		t.Helper()
		status, replayed := do(srv, "POST", user, "k-"+user)
		if status != 200 {
			t.Fatalf("retry for %s: %d", user, status)
		}
		return replayed
	}

	// A graceful stop's snapshot holds s's answer.
	first := serve()
	do(first, "POST", "s", "k-s")
	var snapshot bytes.Buffer
	if _, err := first.SaveReplays(&snapshot); err != nil {
		t.Fatal(err)
	}

	second := serve()
	if _, err := second.LoadReplays(bytes.NewReader(snapshot.Bytes())); err != nil {
		t.Fatal(err)
	}
	if _, err := second.OpenAnswerLog(dir, false, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"u", "v", "w"} {
		do(second, "POST", u, "k-"+u)
	}
	AnswersLogged(t, second)
	for _, u := range []string{"u", "w", "s"} {
		if status, _ := do(second, "DELETE", u, ""); status != 204 {
			t.Fatalf("erase %s: %d", u, status)
		}
	}
	if retried(second, "u") {
		t.Errorf("a retry after the user was erased was given the answer kept from before the erase")
	}
	if !retried(second, "v") {
		t.Errorf("another user's answer was not kept")
	}
	// The user's id as the handlers read it, however the path spelled it.
	do(second, "POST", "p%71", "k-pq")
	if status, _ := do(second, "DELETE", "pq", ""); status != 204 {
		t.Fatalf("erase pq: %d", status)
	}
	if status, replayed := do(second, "POST", "pq", "k-pq"); status != 200 || replayed {
		t.Errorf("a user's answer kept under a path that spelled the id percent-encoded outlived the erase")
	}
	// A crash: no close, the snapshot left in place.

	third := serve()
	if _, err := third.LoadReplays(bytes.NewReader(snapshot.Bytes())); err != nil {
		t.Fatal(err)
	}
	if _, err := third.OpenAnswerLog(dir, false, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	defer third.CloseAnswerLog(true)
	if retried(third, "w") {
		t.Errorf("after a crash, a retry for a user erased before it got the answer from the answers log")
	}
	if retried(third, "s") {
		t.Errorf("after a crash, a retry for a user erased before it got the answer from the graceful stop's snapshot")
	}
	if !retried(third, "v") {
		t.Errorf("after a crash, another user's answer was not read back")
	}
	second.CloseAnswerLog(false)
}

// Erasing a user forgets the answers kept for the keyed batches that name
// it too (each lists the user's items), in memory, after a crash (from the
// answers log, or from the snapshot of a graceful stop that the crash left
// in place) and after a graceful restart; a batch that does not name it
// keeps its answer. The retry is served anew.
func TestEraseForgetsTheBatchAnswersThatNameTheUser(t *testing.T) {
	dir := t.TempDir()
	serve := func() *Server { return newTestServer(t) }
	// The batch of key "b-"+u asks for u and for x, who is never erased.
	batch := func(srv *Server, u string) (replayed bool) {
		t.Helper()
		req := httptest.NewRequest("POST", "/v1/namespaces/default/filter", strings.NewReader(
			`{"requests":[{"user":"x","candidates":["a","b","c"],"limit":1},{"user":"`+u+`","candidates":["secret-`+u+`"]}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderIdempotencyKey, "b-"+u)
		resp, err := srv.App().Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("batch for %s: %d %s", u, resp.StatusCode, b)
		}
		return resp.Header.Get(HeaderReplayed) == "true"
	}
	erase := func(srv *Server, u string) { eraseUser(t, srv, u) }
	snapshot := func(srv *Server) []byte { return snapshotOf(t, srv) }
	load := func(srv *Server, snap []byte) { loadSnapshot(t, srv, snap) }

	// A graceful stop's snapshot holds the batches naming s and g.
	first := serve()
	batch(first, "s")
	batch(first, "g")
	snap := snapshot(first)

	second := serve()
	load(second, snap)
	if _, err := second.OpenAnswerLog(dir, false, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"u", "v", "w"} {
		batch(second, u)
	}
	AnswersLogged(t, second)
	for _, u := range []string{"u", "w", "s", "g"} {
		erase(second, u)
	}
	if replayed := batch(second, "u"); replayed {
		t.Errorf("a retry of a batch after one of its users was erased was given the answer kept from before the erase")
	}
	if replayed := batch(second, "v"); !replayed {
		t.Errorf("a batch that does not name the erased users lost its answer")
	}
	if replayed := batch(second, "g"); replayed {
		t.Errorf("a batch's answer read back from a graceful stop's snapshot outlived the erase of one of its users")
	}
	// A crash: no close, the snapshot left in place.

	third := serve()
	load(third, snap)
	if _, err := third.OpenAnswerLog(dir, false, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if replayed := batch(third, "w"); replayed {
		t.Errorf("after a crash, a retry of a batch whose user was erased before it got the answer from the answers log")
	}
	if replayed := batch(third, "s"); replayed {
		t.Errorf("after a crash, a retry of a batch whose user was erased before it got the answer from the graceful stop's snapshot")
	}
	if replayed := batch(third, "v"); !replayed {
		t.Errorf("after a crash, a batch that does not name the erased users lost its answer")
	}

	// An erase, then a graceful restart.
	erase(third, "v")
	snap = snapshot(third)
	if err := third.CloseAnswerLog(true); err != nil {
		t.Fatal(err)
	}
	fourth := serve()
	load(fourth, snap)
	if replayed := batch(fourth, "v"); replayed {
		t.Errorf("after a graceful restart, a retry of a batch whose user was erased before it got the answer")
	}
	second.CloseAnswerLog(false)
}

// A batch in flight when one of its users is erased keeps no answer: it
// may have read the user's items before the erase. So does a one call in
// flight that began on the user before the erase, while one that had not
// keeps it (it makes its call on the user the erase leaves).
func TestEraseDropsTheAnswerOfABatchInFlightThatNamesTheUser(t *testing.T) {
	r := newReplays(1<<20, time.Minute, time.Now)
	scoped := "\x00/v1/namespaces/default/filter\x00k"
	other := "\x00/v1/namespaces/default/filter\x00other"
	began := "\x00/v1/namespaces/default/users/u/filter\x00began"
	waiting := "\x00/v1/namespaces/default/users/u/filter\x00waiting"
	p, _ := r.begin(scoped, xxh3.Uint128{})
	r.name(scoped, p, []string{"x", "u"})
	q, _ := r.begin(other, xxh3.Uint128{})
	r.name(other, q, []string{"x", "v"})
	b, _ := r.begin(began, xxh3.Uint128{})
	b.began.Store(true)
	w, _ := r.begin(waiting, xxh3.Uint128{})
	r.erase("default", "u")
	w.began.Store(true)
	r.finish(scoped, p, 200, []byte(`{"results":[]}`), false, time.Time{})
	r.finish(other, q, 200, []byte(`{"results":[]}`), false, time.Time{})
	r.finish(began, b, 200, []byte(`{"unseen":[]}`), false, time.Time{})
	r.finish(waiting, w, 200, []byte(`{"unseen":[]}`), false, time.Time{})
	if _, state := r.begin(began, xxh3.Uint128{}); state != replayNew {
		t.Errorf("a one call in flight that began on the user before its erase kept its answer")
	}
	if _, state := r.begin(waiting, xxh3.Uint128{}); state != replayDone {
		t.Errorf("a one call in flight that began on the user after its erase lost its answer")
	}
	if _, state := r.begin(scoped, xxh3.Uint128{}); state != replayNew {
		t.Errorf("a batch in flight during the erase of one of its users kept its answer")
	}
	if _, state := r.begin(other, xxh3.Uint128{}); state != replayDone {
		t.Errorf("a batch in flight during the erase of a user it does not name lost its answer")
	}
}

// An erase's mark outlives the file of answers it was written to: the
// files hold the budget, so the oldest go as answers are given after the
// erase, and the mark must still void, after a crash, the erased user's
// answer in the snapshot of a graceful stop before it (which the files'
// answers do not push out of the budget when they were erased too).
func TestAnEraseMarkOutlivesItsFileOfAnswers(t *testing.T) {
	dir := t.TempDir()
	serve := func() *Server { return newTestServerOf(t, Config{IdempotencyBytes: 4 << 10}) }
	call := func(srv *Server, user, key, body string) (int, bool) { return keyedCall(t, srv, user, key, body) }
	const secret = `{"candidates":["secret-1","secret-2"]}`

	// A graceful stop's snapshot holds u's answer.
	first := serve()
	call(first, "u", "k-u", secret)
	snap := snapshotOf(t, first)

	second := serve()
	loadSnapshot(t, second, snap)
	if _, err := second.OpenAnswerLog(dir, false, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	eraseUser(t, second, "u")
	// Answers of v, more than two files' worth, then v is erased too.
	files := logFiles(t, dir)
	for i := 0; i < 400 && (slices.Contains(logFiles(t, dir), files[0]) || i < 150); i++ {
		items := make([]string, 40)
		for j := range items {
			items[j] = fmt.Sprintf(`"item-%04d-%04d-%012d"`, i, j, 0)
		}
		if status, _ := call(second, "v", fmt.Sprint("k-v-", i), `{"candidates":[`+strings.Join(items, ",")+`]}`); status != 200 {
			t.Fatalf("call %d for v: %d", i, status)
		}
		time.Sleep(time.Millisecond)
	}
	AnswersLogged(t, second)
	eraseUser(t, second, "v")
	if slices.Contains(logFiles(t, dir), files[0]) {
		t.Fatalf("the file of u's erase mark is still there: %v", logFiles(t, dir))
	}
	// A crash: no close, the snapshot left in place.

	third := serve()
	loadSnapshot(t, third, snap)
	if _, err := third.OpenAnswerLog(dir, false, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	defer third.CloseAnswerLog(true)
	if status, replayed := call(third, "u", "k-u", secret); status != 200 || replayed {
		t.Errorf("after a crash, a retry for a user erased before it got the answer from the graceful stop's snapshot (%d, replayed %v): "+
			"the erase's mark went with its file", status, replayed)
	}
	second.CloseAnswerLog(false)
}

// keyedCall makes the one call of user of the namespace default on srv
// with body and the Idempotency-Key key, and returns its status and
// whether it was given again.
func keyedCall(t *testing.T, srv *Server, user, key, body string) (int, bool) {
	t.Helper()
	status, _, replayed := keyedPost(t, srv, "/v1/namespaces/default/users/"+user+"/filter", key, body, "")
	return status, replayed
}

// keyedPost posts the JSON body to path on srv with the Idempotency-Key
// key, by the API key of secret if not "", and returns the answer's
// status and body and whether it was given again.
func keyedPost(t *testing.T, srv *Server, path, key, body, secret string) (int, string, bool) {
	t.Helper()
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderIdempotencyKey, key)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := srv.App().Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header.Get(HeaderReplayed) == "true"
}

// keyedPostOK is keyedPost of an answer that must be a 200 (what names
// the call in the failure: who).
func keyedPostOK(t *testing.T, srv *Server, who, path, key, body, secret string) (string, bool) {
	t.Helper()
	status, b, replayed := keyedPost(t, srv, path, key, body, secret)
	if status != 200 {
		t.Fatalf("%s: %d %s", who, status, b)
	}
	return b, replayed
}

// eraseUser erases u of the namespace default on srv.
func eraseUser(t *testing.T, srv *Server, u string) {
	t.Helper()
	resp, err := srv.App().Test(httptest.NewRequest("DELETE", "/v1/namespaces/default/users/"+u, nil), -1)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("erase %s: %d", u, resp.StatusCode)
	}
}

// snapshotOf is what srv's graceful stop saves of its kept answers.
func snapshotOf(t *testing.T, srv *Server) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := srv.SaveReplays(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// loadSnapshot reads snap back into srv, as a start after a graceful stop.
func loadSnapshot(t *testing.T, srv *Server, snap []byte) {
	t.Helper()
	if _, err := srv.LoadReplays(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
}

// An erase after the answers log stopped on a disk error cannot write its
// mark, and the log's files still hold the answers given before it
// stopped: they go, so that no start after a crash gives the erased
// user's answer again (the log said a crash would lose the answers).
func TestAnEraseAfterTheAnswersLogStoppedLeavesNoAnswerOfTheUser(t *testing.T) {
	dir := t.TempDir()
	const body = `{"candidates":["secret-1","secret-2"],"limit":1}`
	first := newTestServer(t)
	if _, err := first.OpenAnswerLog(dir, false, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	keyedCall(t, first, "u", "k-u", body)
	AnswersLogged(t, first)
	l := first.replays.log
	l.fileMu.Lock()
	l.f.Close() // the next write fails, as on a disk gone bad
	l.fileMu.Unlock()
	keyedCall(t, first, "v", "k-v", body)
	AnswersLogged(t, first) // its write failed
	l.fileMu.Lock()
	stopped := l.failed
	l.fileMu.Unlock()
	if !stopped {
		t.Fatal("the log did not stop")
	}
	eraseUser(t, first, "u")
	// A crash: no close.

	second := newTestServer(t)
	if _, err := second.OpenAnswerLog(dir, false, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	defer second.CloseAnswerLog(true)
	if status, replayed := keyedCall(t, second, "u", "k-u", body); status != 200 || replayed {
		t.Errorf("after a crash, a retry for a user erased once the answers log had stopped got the answer from before the erase (%d, replayed %v)",
			status, replayed)
	}
	first.CloseAnswerLog(false)
}

// The answers read back from a graceful stop's snapshot are written to the
// answers log as it opens: a start after a crash gets them from the log
// alone, so the snapshot can go, and an erase that finds the log stopped
// leaves no answer of the user on disk once the log's files go.
func TestTheAnswersLogTakesOverTheSnapshotsAnswers(t *testing.T) {
	dir := t.TempDir()
	const body = `{"candidates":["secret-1","secret-2"],"limit":1}`
	first := newTestServer(t)
	keyedCall(t, first, "s", "k-s", body)
	keyedCall(t, first, "e", "k-e", body)
	snap := snapshotOf(t, first)

	second := newTestServer(t)
	loadSnapshot(t, second, snap)
	if _, err := second.OpenAnswerLog(dir, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	eraseUser(t, second, "e")
	// A crash, the snapshot deleted once the log opened.

	third := newTestServer(t)
	if n, err := third.OpenAnswerLog(dir, false, time.Hour); err != nil || n != 1 {
		t.Fatalf("read back %d answers, %v; want s's", n, err)
	}
	defer third.CloseAnswerLog(true)
	if status, replayed := keyedCall(t, third, "s", "k-s", body); status != 200 || !replayed {
		t.Errorf("after a crash, a retry of a call answered before a graceful restart was served anew (%d): its answer is not in the log", status)
	}
	if status, replayed := keyedCall(t, third, "e", "k-e", body); status != 200 || replayed {
		t.Errorf("after a crash, a retry for a user erased since got its answer from before the erase")
	}
	second.CloseAnswerLog(false)
}

// A wall clock stepped back (set right by NTP, or across a restart) does
// not let an erased user's answer outlive a crash: the erase's mark is
// stamped after every answer kept before it, and voids them after a
// crash, while an answer given after the erase is kept.
func TestAnEraseAfterTheClockSteppedBackVoidsTheAnswersBeforeIt(t *testing.T) {
	dir := t.TempDir()
	var back atomic.Int64
	// A wall clock without a monotonic reading, which a step leaves alone.
	clock := func() time.Time { return time.Now().Round(0).Add(-time.Duration(back.Load())) }
	const body = `{"candidates":["secret-1","secret-2"],"limit":1}`
	first := newTestServerOf(t, Config{Now: clock})
	if _, err := first.OpenAnswerLog(dir, false, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	keyedCall(t, first, "u", "k-u", body)
	keyedCall(t, first, "v", "k-v", body)
	AnswersLogged(t, first)
	back.Store(int64(time.Minute)) // the clock steps back a minute
	eraseUser(t, first, "u")
	keyedCall(t, first, "u", "k-u-after", body)
	AnswersLogged(t, first)
	// A crash, and a start whose clock is back a minute more.
	back.Store(int64(2 * time.Minute))
	second := newTestServerOf(t, Config{Now: clock})
	if _, err := second.OpenAnswerLog(dir, false, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, replayed := keyedCall(t, second, "u", "k-u", body); replayed {
		t.Errorf("after a crash, a retry for a user erased once the clock had stepped back got the answer from before the erase")
	}
	if _, replayed := keyedCall(t, second, "u", "k-u-after", body); !replayed {
		t.Errorf("after a crash, the answer given after the erase was lost")
	}
	eraseUser(t, second, "v")
	AnswersLogged(t, second)
	first.CloseAnswerLog(false)
	second.CloseAnswerLog(false)
	// Another crash: v's erase, on a clock behind its answer, voids it.
	third := newTestServerOf(t, Config{Now: clock})
	if _, err := third.OpenAnswerLog(dir, false, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	defer third.CloseAnswerLog(true)
	if _, replayed := keyedCall(t, third, "v", "k-v", body); replayed {
		t.Errorf("after a crash, a retry for a user erased after a start on a clock stepped back got the answer from before the erase")
	}
}

// A one call's Idempotency-Key is its user's however the path spells the
// user id: a retry that percent-encodes it otherwise (as another client
// library or a proxy may) gets the first answer and records nothing, and
// erasing the user, by any spelling, drops that answer. Scoped to the path
// as sent, such a retry was another call, which recorded the next items.
func TestAKeyedCallsRetryWithItsUserSpelledOtherwiseGetsItsAnswer(t *testing.T) {
	srv := newTestServer(t)
	const body = `{"candidates":["a","b","c","d"],"limit":1}`
	path := func(user string) string { return "/v1/namespaces/default/users/" + user + "/filter" }
	for _, spellings := range [][]string{
		{"u:1", "u%3A1", "u%3a1"},
		{"a!b", "a%21b", "%61%21b"},
		{"%C3%BC", "%c3%bc"},
		{"a%2Fb", "a%2fb"},
	} {
		first, _ := keyedPostOK(t, srv, "the first call as "+spellings[0], path(spellings[0]), "k", body, "")
		for _, s := range spellings[1:] {
			if got, replayed := keyedPostOK(t, srv, "the retry as "+s, path(s), "k", body, ""); !replayed || got != first {
				t.Errorf("the retry as %s: %s (replayed %v), want %s given again, as to %s", s, got, replayed, first, spellings[0])
			}
		}
		eraseUser(t, srv, spellings[len(spellings)-1])
		if got, replayed := keyedPostOK(t, srv, "the call after the erase", path(spellings[0]), "k", body, ""); replayed || got != first {
			t.Errorf("after %s was erased: %s (replayed %v), want the call served anew for a user who starts afresh: %s", spellings[0], got, replayed, first)
		}
	}
}

// A retry, sent as its call was, of a call that a build before 54d10a0
// answered (scoped to its path as sent, u%3A1 as a JavaScript client's
// encodeURIComponent spells u:1) gets that answer again after the upgrade,
// read back from the snapshot of a graceful stop, from the answers log
// after a crash, or from the journal alone after a crash before the log
// wrote it, instead of recording the next items; the same key with another
// body is still refused. testdata/before-54d10a0 holds what the build of
// eaa0369 wrote of such a call (the key k1), on SIGTERM (kept-answers, at
// 16:56:56 UTC on 2026-11-29), on kill -9 a second after it (answers/, at
// the same time) and at once after it (the journal segment, at 17:04:16).
func TestARetryOfACallAnsweredBeforeTheUpgradeWithItsUserSpelledOtherwiseGetsItsAnswer(t *testing.T) {
	const (
		path  = "/v1/namespaces/default/users/u%3A1/filter"
		body  = `{"candidates":["a","b","c"],"limit":2}`
		first = `{"unseen":["a","b"],"seen_count":0,"recorded":2}`
	)
	testdata := filepath.Join("testdata", "before-54d10a0")
	start := time.Now()
	clock := func() time.Time { return time.Date(2026, 11, 29, 17, 5, 0, 0, time.UTC).Add(time.Since(start)) }
	cfg := Config{Now: clock, IdempotencyTTL: 15 * time.Minute}
	// The store holds what the call recorded, as the data directory does
	// (the journal's record, in the last case).
	recorded := func(t *testing.T) *Server {
		srv := newTestServerOf(t, cfg)
		keyedPostOK(t, srv, "the call's items", "/v1/namespaces/default/users/u:1/filter", "other", `{"candidates":["a","b"]}`, "")
		return srv
	}
	for name, serve := range map[string]func(t *testing.T) (*Server, int, error){
		"a graceful stop": func(t *testing.T) (*Server, int, error) {
			srv := recorded(t)
			f, err := os.Open(filepath.Join(testdata, "kept-answers"))
			if err != nil {
				return nil, 0, err
			}
			defer f.Close()
			n, err := srv.LoadReplays(f)
			return srv, n, err
		},
		"a crash": func(t *testing.T) (*Server, int, error) {
			srv := recorded(t)
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(filepath.Join(testdata, "answers"))); err != nil {
				return nil, 0, err
			}
			n, err := srv.OpenAnswerLog(dir, false, time.Second)
			t.Cleanup(func() { srv.CloseAnswerLog(true) })
			return srv, n, err
		},
		"a crash before the log wrote the answer": func(t *testing.T) (*Server, int, error) {
			dir := t.TempDir()
			wal, err := os.ReadFile(filepath.Join(testdata, "00000000000000000001.wal"))
			if err == nil {
				err = os.Mkdir(filepath.Join(dir, "journal"), 0o755)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, "journal", "00000000000000000001.wal"), wal, 0o644)
			}
			if err != nil {
				return nil, 0, err
			}
			srv, hot, store := openJournaledWith(t, dir, cfg, eviction.Options{Now: clock, ReplyTTL: cfg.IdempotencyTTL})
			t.Cleanup(func() { hot.Close(); store.Close() })
			return srv, 1, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, n, err := serve(t)
			if n != 1 || err != nil {
				t.Fatalf("read back %d answers, %v; want 1", n, err)
			}
			if got, replayed := keyedPostOK(t, srv, "the retry", path, "k1", body, ""); !replayed || got != first {
				t.Errorf("the retry after the upgrade: %s (replayed %v), want %s given again", got, replayed, first)
			}
			if status, got, _ := keyedPost(t, srv, path, "k1", `{"candidates":["c","d"]}`, ""); status != 422 {
				t.Errorf("the key with another body: %d %s, want 422 idempotency-key-reused", status, got)
			}
		})
	}
}
