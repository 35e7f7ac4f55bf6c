package api

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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
		path := "/v1/namespaces/default/users/" + user
		var r io.Reader
		if method == "POST" {
			path += "/filter"
			r = strings.NewReader(body)
		}
		req := httptest.NewRequest(method, path, r)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set(HeaderIdempotencyKey, key)
		}
		resp, err := srv.App().Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get(HeaderReplayed) == "true"
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
	time.Sleep(100 * time.Millisecond) // the answers are in the log's file
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
