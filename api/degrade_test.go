package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/client"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/storage/storagetest"
)

// brokenStore closes the store under a running hot set: every storage read
// and write fails from then on, as on a failed disk.
func (e *env) brokenStore() {
	e.t.Helper()
	if err := e.store.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.broken = true
}

func TestOnErrorOpenAnswersUnfilteredAndCountsIt(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	e.brokenStore()
	got := filter(t, c, "default", "cold", client.FilterRequest{Candidates: []string{"a", "b", "a", "c"}, Limit: ptr(2),
		OnError: ptr(client.Open)})
	if got.Degraded == nil || !*got.Degraded || !slices.Equal(got.Unseen, []string{"a", "b"}) || got.Recorded != 0 || got.SeenCount != 0 {
		t.Fatalf("degraded answer: %+v, want unseen [a b] (deduplicated, limited), degraded, nothing seen or recorded", got)
	}
	r, err := c.GetStatsWithResponse(ctx)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	if r.JSON200.Degraded != 1 {
		t.Fatalf("degraded answers counted %d, want 1", r.JSON200.Degraded)
	}
}

// A store that fails answers storage-unavailable, whose detail keeps the
// store's own words (file names and offsets of the server's disk) for the
// server's log; and since such a store fails every call, the log takes a
// line a second of them, which counts those held back.
func TestOnErrorFailAnswersTheStorageProblem(t *testing.T) {
	logs := &logLines{}
	e := newEnv(t, withLog(logs))
	e.brokenStore()
	call := func(user string) {
		t.Helper()
		status, h, body := e.raw("POST", userPath("default", user, "/filter"), "application/json",
			[]byte(`{"candidates":["a"],"on_error":"fail"}`))
		wantProblem(t, status, h, body, http.StatusServiceUnavailable, "storage-unavailable")
		if h.Get("Retry-After") == "" {
			t.Fatal("503 without Retry-After")
		}
		var p api.Problem
		if err := json.Unmarshal(body, &p); err != nil || p.Detail != "the store failed to read or write; the server's log has the error" {
			t.Fatalf("detail %q (%v): the caller is given the store's own words", p.Detail, err)
		}
	}
	for i := range 5 {
		call(fmt.Sprint("cold", i))
	}
	lines := logs.find(t, "seenapi: request failed")
	if len(lines) != 1 || lines[0]["err"] == "" {
		t.Fatalf("%d lines for 5 failed calls within a second, want 1 with the store's error: %v", len(lines), lines)
	}
	time.Sleep(1100 * time.Millisecond)
	call("cold-later")
	if lines = logs.find(t, "seenapi: request failed"); len(lines) != 2 || lines[1]["held_back"] != float64(4) {
		t.Fatalf("after a second: %v, want a second line holding back 4", lines)
	}
}

// A recommender that sends on_error open degrades every call while the
// store fails (a full disk, a failed one): the log takes a line a second
// of those answers, which counts the ones held back, not a line a call,
// which at thousands of calls a second would fill the disk in its turn.
func TestOnErrorOpenLogsALineASecond(t *testing.T) {
	logs := &logLines{}
	e := newEnvOver(t, onFullDisk(t, t.TempDir()), withLog(logs))
	const calls = 20
	start := time.Now()
	for i := range calls {
		status, _, body := e.raw(http.MethodPost, userPath("default", fmt.Sprint("u", i), "/filter"), "application/json",
			[]byte(`{"candidates":["a"],"on_error":"open"}`))
		if status != http.StatusOK || !strings.Contains(string(body), `"degraded":true`) {
			t.Fatalf("call %d on a full disk with on_error open: %d %s, want 200 degraded", i, status, body)
		}
	}
	elapsed := time.Since(start)
	time.Sleep(1100 * time.Millisecond)
	status, _, _ := e.raw(http.MethodPost, userPath("default", "later", "/filter"), "application/json",
		[]byte(`{"candidates":["a"],"on_error":"open"}`))
	if status != http.StatusOK {
		t.Fatalf("the call a second later: %d", status)
	}
	lines := logs.find(t, "seenapi: answering unfiltered (on_error open)")
	// A line a second at most (however slow this machine), and every
	// degraded answer either logged or counted in a later line's held_back.
	if most := int(elapsed/time.Second) + 2; len(lines) > most {
		t.Fatalf("%d lines for %d degraded answers in %v, want at most %d", len(lines), calls+1, elapsed, most)
	}
	accounted := len(lines)
	for _, l := range lines {
		n, _ := l["held_back"].(float64)
		accounted += int(n)
	}
	if accounted != calls+1 {
		t.Fatalf("lines and their held_back account for %d degraded answers, want %d: %v", accounted, calls+1, lines)
	}
}

// A call to a namespace that is not served (misspelt, or taken out of the
// namespaces file) says where the served ones are listed.
func TestUnknownNamespaceSaysWhereTheServedOnesAreListed(t *testing.T) {
	e := newEnv(t)
	status, h, body := e.raw("POST", "/v1/namespaces/feeed/users/u/filter", "application/json", []byte(`{"candidates":["a"]}`))
	p := problem(t, status, h, body)
	if status != http.StatusNotFound || p.Type != api.ProblemBase+"unknown-namespace" || !strings.Contains(p.Detail, `namespace "feeed" is not served; GET /v1/namespaces lists`) {
		t.Fatalf("%d %s %q", status, p.Type, p.Detail)
	}
}

func TestOnErrorOpenDoesNotHideBadRequests(t *testing.T) {
	e := newEnv(t)
	e.brokenStore()
	status, h, body := e.raw("POST", "/v1/namespaces/nope/users/u/filter", "application/json",
		[]byte(`{"candidates":["a"],"on_error":"open"}`))
	if p := problem(t, status, h, body); status != http.StatusNotFound || p.Type != api.ProblemBase+"unknown-namespace" {
		t.Fatalf("%d %s", status, p.Type)
	}
}

func TestBatchStorageFailureIsPerUser(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	filter(t, c, "default", "hot", client.FilterRequest{Candidates: []string{"a"}, Record: ptr(client.None)})
	e.brokenStore()
	r, err := c.FilterBatchWithResponse(ctx, "default", nil, client.BatchFilterRequest{Requests: []client.BatchFilterEntry{
		{User: "cold", Candidates: []string{"a"}},
		{User: "cold2", Candidates: []string{"x", "y"}, OnError: ptr(client.Open)},
	}})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("batch: %v %d %s", err, r.StatusCode(), r.Body)
	}
	res := r.JSON200.Results
	if res[0].Error == nil || res[0].Error.Type != api.ProblemBase+"storage-unavailable" {
		t.Fatalf("cold user: %+v", res[0])
	}
	if res[1].Error != nil || res[1].Degraded == nil || !*res[1].Degraded || !slices.Equal(*res[1].Unseen, []string{"x", "y"}) {
		t.Fatalf("open user: %+v", res[1])
	}
}

// A batch's user that the store fails is told "the server's log has the
// error": the log has it, with the user, a line a second for the users
// that fail alike, as for the one call.
func TestBatchStorageFailureIsLogged(t *testing.T) {
	logs := &logLines{}
	e := newEnv(t, withLog(logs))
	e.brokenStore()
	status, h, body := e.raw(http.MethodPost, "/v1/namespaces/default/filter", "application/json",
		[]byte(`{"requests":[{"user":"cold","candidates":["a"]},{"user":"cold2","candidates":["a"]}]}`))
	if status != http.StatusOK || !strings.Contains(string(body), "the server's log has the error") {
		t.Fatalf("batch on a failed store: %d %s %s", status, h, body)
	}
	lines := logs.find(t, "seenapi: a batch's user failed")
	if len(lines) != 1 || lines[0]["user"] != "cold" || lines[0]["status"] != float64(503) ||
		!strings.Contains(fmt.Sprint(lines[0]["err"]), "storage") {
		t.Fatalf("log lines of the batch's failed users: %v, want one for cold with the store's error", lines)
	}
}

// The errors of a batch's users are counted by their status, in the
// figures and in /metrics, apart from the error answers: the batch itself
// is answered 200.
func TestBatchUserErrorsAreCounted(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	e.brokenStore()
	r, err := c.FilterBatchWithResponse(ctx, "default", nil, client.BatchFilterRequest{Requests: []client.BatchFilterEntry{
		{User: "cold", Candidates: []string{"a"}},
		{User: "cold2", Candidates: []string{"a"}},
		{User: "open", Candidates: []string{"a"}, OnError: ptr(client.Open)},
	}})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("batch: %v %d %s", err, r.StatusCode(), r.Body)
	}
	st, err := c.GetStatsWithResponse(ctx)
	if err != nil || st.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	if got := st.JSON200.BatchUserErrors; len(got) != 1 || got["503"] != 2 {
		t.Errorf("batch_user_errors %v, want 2 of status 503 (the degraded user is no error)", got)
	}
	if got := st.JSON200.Errors; len(got) != 0 {
		t.Errorf("errors %v, want none: the batch was answered 200", got)
	}
	status, _, body := e.raw(http.MethodGet, "/metrics", "", nil)
	if status != http.StatusOK || !strings.Contains(string(body), "\nseenapi_batch_user_errors_total{status=\"503\"} 2\n") {
		t.Errorf("metrics lack seenapi_batch_user_errors_total{status=\"503\"} 2: %d", status)
	}
}

// panickyStore is the real store whose journal append panics for one user
// while armed: a stand-in for a bug met in the middle of that user's call.
type panickyStore struct {
	*storage.Store
	user  string
	armed atomic.Bool
}

func (p *panickyStore) Append(ns, user string, value []byte, ttl time.Duration) (uint64, error) {
	if user == p.user && p.armed.Load() {
		panic("panickyStore: " + user)
	}
	return p.Store.Append(ns, user, value, ttl)
}

// A panic while serving one user's call answers that call with a 500
// problem and a logged stack; the server, the other users and that user's
// later calls go on.
func TestPanicAnswers500AndTheServiceGoesOn(t *testing.T) {
	var ps *panickyStore
	// The server logs into a file (slog serializes its writes), read once
	// the 500 is answered.
	logPath := filepath.Join(t.TempDir(), "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	e := newEnvOver(t, func(st *storage.Store) eviction.Store {
		ps = &panickyStore{Store: st, user: "boom"}
		return ps
	}, func(c *api.Config) { c.Logger = slog.New(slog.NewTextHandler(logFile, nil)) })
	c := e.client("")
	filter(t, c, "default", "boom", client.FilterRequest{Candidates: []string{"a"}})
	ps.armed.Store(true)
	status, h, body := e.raw(http.MethodPost, userPath("default", "boom", "/filter"), "application/json",
		[]byte(`{"candidates":["b"]}`))
	wantProblem(t, status, h, body, http.StatusInternalServerError, "internal")
	logged, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if l := string(logged); !strings.Contains(l, "seenapi: panic serving a request") || !strings.Contains(l, "panickyStore: boom") ||
		!strings.Contains(l, "goroutine ") {
		t.Errorf("the server's log lacks the panic and its stack:\n%s", l)
	}
	if got := filter(t, c, "default", "other", client.FilterRequest{Candidates: []string{"a", "b"}}); !slices.Equal(got.Unseen, []string{"a", "b"}) {
		t.Errorf("another user after the panic: %+v", got)
	}
	ps.armed.Store(false)
	done := make(chan client.FilterResponse, 1)
	go func() {
		r, err := c.FilterUserWithResponse(ctx, "default", "boom", nil, client.FilterRequest{Candidates: []string{"a", "b", "c"}})
		if err != nil || r.JSON200 == nil {
			t.Errorf("the user's next call: %v", err)
			close(done)
			return
		}
		done <- *r.JSON200
	}()
	select {
	case got := <-done:
		if !slices.Equal(got.Unseen, []string{"b", "c"}) {
			t.Errorf("the user's next call: %+v, want b and c unseen", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the user's next call is still waiting 10 s after the panic")
	}
	r, err := c.GetStatsWithResponse(ctx)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	if n := r.JSON200.Errors["500"]; n != 1 {
		t.Errorf("500 answers counted %d, want 1", n)
	}
	if n := r.JSON200.Panics; n != 1 {
		t.Errorf("panics counted %d, want 1", n)
	}
	m, err := c.GetMetricsWithResponse(ctx)
	if err != nil || !strings.Contains(string(m.Body), "\nseenapi_panics_total 1\n") {
		t.Errorf("metrics lack seenapi_panics_total 1: %v", err)
	}
}

// A panic while serving one user of a batch fails that user's result, not
// the batch: the users before it were recorded, and a 500 for the whole
// batch would lose their answers (its retry would get their next items).
func TestBatchPanicFailsOnlyThatUser(t *testing.T) {
	var ps *panickyStore
	logs := &logLines{}
	e := newEnvOver(t, func(st *storage.Store) eviction.Store {
		ps = &panickyStore{Store: st, user: "boom"}
		return ps
	}, withLog(logs))
	c := e.client("")
	ps.armed.Store(true)
	batch := client.BatchFilterRequest{Requests: []client.BatchFilterEntry{
		{User: "before", Candidates: []string{"a", "b"}, Limit: ptr(1)},
		{User: "boom", Candidates: []string{"a"}},
		{User: "after", Candidates: []string{"a"}},
	}}
	r, err := c.FilterBatchWithResponse(ctx, "default", &client.FilterBatchParams{IdempotencyKey: ptr("k")}, batch)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("a batch with a user whose call panics: %v %d %s, want 200", err, r.StatusCode(), r.Body)
	}
	res := r.JSON200.Results
	if res[0].Error != nil || !slices.Equal(*res[0].Unseen, []string{"a"}) || *res[0].Recorded != 1 {
		t.Errorf("the user before: %+v", res[0])
	}
	if res[1].Error == nil || res[1].Error.Type != api.ProblemBase+"internal" || res[1].Error.Status != 500 {
		t.Errorf("the user whose call panics: %+v, want an internal problem", res[1])
	}
	if res[2].Error != nil || !slices.Equal(*res[2].Unseen, []string{"a"}) {
		t.Errorf("the user after: %+v", res[2])
	}
	// The retry gets the others' answers again ("a" is shown to "before"
	// after all), and serves boom anew: its failure changed nothing.
	ps.armed.Store(false)
	again, err := c.FilterBatchWithResponse(ctx, "default", &client.FilterBatchParams{IdempotencyKey: ptr("k")}, batch)
	if err != nil || again.JSON200 == nil {
		t.Fatalf("the retry: %v %d %s", err, again.StatusCode(), again.Body)
	}
	if res := again.JSON200.Results; !reflect.DeepEqual(res[0], r.JSON200.Results[0]) || !reflect.DeepEqual(res[2], r.JSON200.Results[2]) ||
		res[1].Error != nil || !slices.Equal(*res[1].Unseen, []string{"a"}) {
		t.Fatalf("the retry: %s, want before's and after's first answers, and boom served anew", again.Body)
	}
	lines := logs.find(t, "seenapi: panic serving a batch's user")
	if len(lines) != 1 || lines[0]["user"] != "boom" || !strings.Contains(fmt.Sprint(lines[0]["stack"]), "goroutine ") {
		t.Errorf("log lines of the panic: %v, want one naming boom with its stack", lines)
	}
	if st, err := c.GetStatsWithResponse(ctx); err != nil || st.JSON200 == nil || st.JSON200.Panics != 1 {
		t.Errorf("stats: %v %s, want 1 panic", err, st.Body)
	}
}

// A user whose stored filter is corrupt is answered with the corrupt-filter
// problem, not a bare 500 nor a storage one, and other users are served.
func TestCorruptStoredFilterIsItsOwnProblem(t *testing.T) {
	e := newEnv(t)
	if err := e.store.WriteBack([]storage.Write{{NS: "default", User: "bad", Value: []byte("not a filter at all")}}, nil); err != nil {
		t.Fatal(err)
	}
	status, h, body := e.raw(http.MethodPost, userPath("default", "bad", "/filter"), "application/json",
		[]byte(`{"candidates":["a"]}`))
	wantProblem(t, status, h, body, http.StatusInternalServerError, "corrupt-filter")
	if got := filter(t, e.client(""), "default", "good", client.FilterRequest{Candidates: []string{"a"}}); !slices.Equal(got.Unseen, []string{"a"}) {
		t.Fatalf("another user beside the corrupt one: %+v", got)
	}
}

// A user whose stored filter the disk damaged (its value fails Badger's
// checksum) is answered with the corrupt-filter problem, as one that does
// not decode: not storage-unavailable, a 503 its clients would retry in
// vain. The users stored beside it are served, and on_error open answers it
// unfiltered.
func TestDamagedStoredFilterIsItsOwnProblem(t *testing.T) {
	e := damagedVictimEnv(t)
	status, h, body := e.raw(http.MethodPost, userPath("default", "victim", "/filter"), "application/json",
		[]byte(`{"candidates":["item-1","new"]}`))
	wantProblem(t, status, h, body, http.StatusInternalServerError, "corrupt-filter")
	got := filter(t, e.client(""), "default", "victim", client.FilterRequest{Candidates: []string{"item-1", "new"},
		OnError: ptr(client.Open)})
	if got.Degraded == nil || !*got.Degraded || !slices.Equal(got.Unseen, []string{"item-1", "new"}) {
		t.Errorf("the damaged user with on_error open: %+v, want unseen [item-1 new], degraded", got)
	}
	for _, u := range []string{"before", "after"} {
		if got := filter(t, e.client(""), "default", u, client.FilterRequest{Candidates: []string{"item-1", "new"}}); !slices.Equal(got.Unseen, []string{"new"}) {
			t.Errorf("%s, stored beside the damaged user: %+v, want unseen [new]", u, got)
		}
	}
}

// A batch naming a user whose stored filter the disk damaged answers the
// users beside it, and that one with the corrupt-filter problem, whose
// detail says the repair, since every call for the user fails until it is
// done: a merge import into the user fails as well, and a replace import
// of an export kept earlier (here another user's of the same items)
// repairs it in one step, which the batch then serves.
func TestABatchsDamagedUserIsTold(t *testing.T) {
	e := damagedVictimEnv(t)
	c := e.client("")
	batch := client.BatchFilterRequest{Requests: []client.BatchFilterEntry{
		{User: "before", Candidates: []string{"item-1", "new"}, Record: ptr(client.None)},
		{User: "victim", Candidates: []string{"item-1", "new"}, Record: ptr(client.None)},
		{User: "after", Candidates: []string{"item-1", "new"}, Record: ptr(client.None)},
	}}
	r, err := c.FilterBatchWithResponse(ctx, "default", nil, batch)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("batch: %v %d %s", err, r.StatusCode(), r.Body)
	}
	for _, i := range []int{0, 2} {
		if res := r.JSON200.Results[i]; res.Error != nil || !slices.Equal(*res.Unseen, []string{"new"}) {
			t.Errorf("%s beside the damaged user: %s, want unseen [new]", res.User, r.Body)
		}
	}
	p := r.JSON200.Results[1].Error
	if p == nil || p.Type != client.ProblemTypeCorruptFilter || p.Detail == nil || !strings.Contains(*p.Detail, "until it is replaced by an export of it kept earlier (PUT on the user's export with mode=replace") {
		t.Fatalf("the damaged user's result: %s, want corrupt-filter saying to replace the user with an export", r.Body)
	}
	kept, err := c.ExportUserWithResponse(ctx, "default", "before")
	if err != nil || kept.StatusCode() != http.StatusOK {
		t.Fatalf("export: %v %d", err, kept.StatusCode())
	}
	status, h, body := e.raw(http.MethodPut, userPath("default", "victim", "/export"), "application/octet-stream", kept.Body)
	wantProblem(t, status, h, body, http.StatusInternalServerError, "corrupt-filter")
	if status, _, body := e.raw(http.MethodPut, userPath("default", "victim", "/export?mode=replace"), "application/octet-stream", kept.Body); status != http.StatusNoContent {
		t.Fatalf("replace import over the damaged user: %d %s, want 204", status, body)
	}
	r, err = c.FilterBatchWithResponse(ctx, "default", nil, batch)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("batch: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if res := r.JSON200.Results[1]; res.Error != nil || !slices.Equal(*res.Unseen, []string{"new"}) {
		t.Errorf("the repaired user: %s, want unseen [new]", r.Body)
	}
}

// damagedVictimEnv serves a store whose users before, victim and after of
// namespace default have seen item-0 to item-1999, victim's stored filter
// damaged on disk.
func damagedVictimEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	so := storage.DefaultOptions(t.TempDir())
	e := newEnvIn(t, so, nil, opts...)
	items := make([]string, 2000) // a filter for the value log, not the tree
	for i := range items {
		items[i] = fmt.Sprint("item-", i)
	}
	for _, u := range []string{"before", "victim", "after"} {
		filter(t, e.client(""), "default", u, client.FilterRequest{Candidates: items})
	}
	e.close()
	// Started and stopped once more, so that the users' value-log file is
	// not the last one, which Badger cuts at its first damaged record when
	// it opens (see storage's doc).
	newEnvIn(t, so, nil, opts...).close()
	storagetest.DamageFilter(t, so.Dir, "default", "victim")
	return newEnvIn(t, so, nil, opts...)
}

// A corrupt stored filter is one that cannot be read: on_error open
// answers its user unfiltered, as it does when the store fails.
func TestOnErrorOpenAnswersACorruptFilterUnfiltered(t *testing.T) {
	e := newEnv(t)
	if err := e.store.WriteBack([]storage.Write{{NS: "default", User: "bad", Value: []byte("not a filter at all")}}, nil); err != nil {
		t.Fatal(err)
	}
	got := filter(t, e.client(""), "default", "bad", client.FilterRequest{Candidates: []string{"a", "b", "a"},
		OnError: ptr(client.Open)})
	if got.Degraded == nil || !*got.Degraded || !slices.Equal(got.Unseen, []string{"a", "b"}) {
		t.Fatalf("a corrupt filter with on_error open: %+v, want unseen [a b], degraded", got)
	}
}

// Every route that records or replaces a filter answers 507 storage-full,
// as the document says, when the store runs out of disk space under users
// it holds (the validating client fails on a status its operation does not
// list), and changes nothing: the users read back as they were.
func TestEveryWritingRouteAnswers507OnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	roomy, err := storage.Open(storage.DefaultOptions(dir).WithMinFreeBytes(-1).
		WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	before := newEnvOver(t, func(*storage.Store) eviction.Store { return roomy })
	for _, ns := range []string{"default", "compact"} {
		filter(t, before.client(""), ns, "u", client.FilterRequest{Candidates: []string{"a", "b"}})
	}
	before.close() // writes the users back into roomy
	if err := roomy.Close(); err != nil {
		t.Fatal(err)
	}
	e := newEnvOver(t, onFullDisk(t, dir))
	c := e.client("")
	exported, err := c.ExportUserWithResponse(ctx, "default", "u")
	if err != nil || exported.StatusCode() != http.StatusOK {
		t.Fatalf("export: %v %d", err, exported.StatusCode())
	}
	for _, call := range []struct {
		name string
		do   func() (int, []byte, error)
	}{
		{"filter", func() (int, []byte, error) {
			r, err := c.FilterUserWithResponse(ctx, "default", "u", nil, client.FilterRequest{Candidates: []string{"c"}})
			return r.StatusCode(), r.Body, err
		}},
		{"seen", func() (int, []byte, error) {
			r, err := c.RecordSeenWithResponse(ctx, "default", "u", nil, client.ItemsRequest{Items: []string{"c"}})
			return r.StatusCode(), r.Body, err
		}},
		{"forget items", func() (int, []byte, error) {
			r, err := c.ForgetItemsWithResponse(ctx, "compact", "u", client.ItemsRequest{Items: []string{"a"}})
			return r.StatusCode(), r.Body, err
		}},
		{"import", func() (int, []byte, error) {
			r, err := c.ImportUserWithBodyWithResponse(ctx, "default", "u", nil, "application/octet-stream",
				bytes.NewReader(exported.Body))
			return r.StatusCode(), r.Body, err
		}},
	} {
		status, body, err := call.do()
		if err != nil || status != http.StatusInsufficientStorage || !strings.Contains(string(body), "/problems/storage-full") {
			t.Errorf("%s on a full disk: %v %d %s, want 507 storage-full", call.name, err, status, body)
		}
	}
	for ns, want := range map[string][]bool{"default": {true, true, false}, "compact": {true, true, false}} {
		r, err := c.CheckSeenWithResponse(ctx, ns, "u", client.ItemsRequest{Items: []string{"a", "b", "c"}})
		if err != nil || r.JSON200 == nil || !slices.Equal(r.JSON200.Seen, want) {
			t.Errorf("%s after the refused calls: %v %d %s, want a and b seen, c not", ns, err, r.StatusCode(), r.Body)
		}
	}
	// Erasing takes no room the store checks for: a user can be forgotten
	// on a full disk.
	if r, err := c.ForgetUserWithResponse(ctx, "default", "u"); err != nil || r.StatusCode() != http.StatusNoContent {
		t.Fatalf("forget on a full disk: %v %d %s, want 204", err, r.StatusCode(), r.Body)
	}
	if r, err := c.GetUserWithResponse(ctx, "default", "u"); err != nil || r.StatusCode() != http.StatusNotFound {
		t.Errorf("the user forgotten on a full disk: %v %d %s, want 404", err, r.StatusCode(), r.Body)
	}
}

// A store out of disk space answers a recording call with 507 and the
// storage-full problem, and the call records nothing.
func TestFullDiskIs507(t *testing.T) {
	logs := &logLines{}
	e := newEnvOver(t, onFullDisk(t, t.TempDir()), withLog(logs))
	for range 3 {
		status, h, body := e.raw(http.MethodPost, userPath("default", "u", "/filter"), "application/json",
			[]byte(`{"candidates":["a"]}`))
		wantProblem(t, status, h, body, http.StatusInsufficientStorage, "storage-full")
	}
	// The store says it once, when it finds the disk full; a line for each
	// call refused would fill the log, often on the same full disk.
	if lines := logs.find(t, "seenapi: request failed"); len(lines) > 0 {
		t.Errorf("%d error lines for the refused calls, want none: %v", len(lines), lines[0])
	}
	// The state shows in the figures, for an operator's alert.
	if st, err := e.client("").GetStatsWithResponse(ctx); err != nil || st.JSON200 == nil || !st.JSON200.StorageFull {
		t.Errorf("stats on a full disk: %v %s, want storage_full", err, st.Body)
	}
	if status, _, body := e.raw(http.MethodGet, "/metrics", "", nil); status != 200 || !strings.Contains(string(body), "\nseenapi_storage_full 1\n") {
		t.Errorf("metrics on a full disk: %d, want seenapi_storage_full 1", status)
	}
	r, err := e.client("").CheckSeenWithResponse(ctx, "default", "u", client.ItemsRequest{Items: []string{"a"}})
	if err != nil || r.JSON200 == nil || r.JSON200.Seen[0] {
		t.Fatalf("check after the refused call: %v %d %s, want a unseen", err, r.StatusCode(), r.Body)
	}
}

// A 507 says which limit refused the write: here the floor of
// --min-free-bytes (the disk may have room), which an operator lowers or
// frees space above; not a full disk. The call records nothing and makes
// no user.
func TestStorageFullSaysWhichLimitRefused(t *testing.T) {
	e := newEnvOver(t, onFullDisk(t, t.TempDir()))
	status, h, body := e.raw(http.MethodPost, userPath("default", "u", "/filter"), "application/json",
		[]byte(`{"candidates":["a"]}`))
	p := wantProblem(t, status, h, body, http.StatusInsufficientStorage, "storage-full")
	if !strings.Contains(p.Detail, "--min-free-bytes") || strings.Contains(p.Detail, "disk is full") {
		t.Fatalf("detail %q, want it to name the floor of --min-free-bytes, not a full disk", p.Detail)
	}
	// The refused call made no user: it is not found, as one never seen.
	status, h, body = e.raw(http.MethodGet, userPath("default", "u", ""), "", nil, "Authorization", "Bearer "+adminKey)
	wantProblem(t, status, h, body, http.StatusNotFound, "user-not-found")
}

// onFullDisk is newEnvOver's wrap for a real store in dir that finds less
// free space than it requires (more than any disk has), in place of the
// roomy one newEnvOver opens.
func onFullDisk(t *testing.T, dir string) func(*storage.Store) eviction.Store {
	t.Helper()
	full, err := storage.Open(storage.DefaultOptions(dir).WithMinFreeBytes(1 << 62).
		WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { full.Close() })
	return func(*storage.Store) eviction.Store { return full }
}

// A recording call refused for a full disk makes no user, so it counts no
// new user, in the service's figures nor in its namespace's: an alert on
// new users must not climb while every call is refused. An import that
// succeeds on a store with room counts its one user.
func TestRefusedCallsCountNoNewUser(t *testing.T) {
	e := newEnvOver(t, onFullDisk(t, t.TempDir()))
	for _, call := range []struct{ path, body string }{
		{userPath("default", "u", "/filter"), `{"candidates":["a"]}`},
		{userPath("default", "u", "/seen"), `{"items":["a"]}`},
		{userPath("compact", "v", "/filter"), `{"candidates":["a"]}`},
	} {
		for range 2 {
			status, h, body := e.raw(http.MethodPost, call.path, "application/json", []byte(call.body))
			wantProblem(t, status, h, body, http.StatusInsufficientStorage, "storage-full")
		}
	}
	status, _, body := e.raw(http.MethodPost, "/v1/namespaces/default/filter", "application/json",
		[]byte(`{"requests":[{"user":"w","candidates":["a"]},{"user":"x","candidates":["b"]}]}`))
	if status != http.StatusOK || strings.Count(string(body), "/problems/storage-full") != 2 {
		t.Fatalf("batch on a full disk: %d %s, want each user's 507", status, body)
	}
	st, err := e.client("").GetStatsWithResponse(ctx)
	if err != nil || st.JSON200 == nil {
		t.Fatalf("stats: %v %s", err, st.Body)
	}
	if got := st.JSON200; got.NewUsers != 0 || got.Namespaces["default"].NewUsers != 0 || got.Namespaces["compact"].NewUsers != 0 {
		t.Errorf("after calls all refused 507: new_users %d (default %d, compact %d), want 0",
			got.NewUsers, got.Namespaces["default"].NewUsers, got.Namespaces["compact"].NewUsers)
	}

	roomy := newEnv(t)
	filter(t, roomy.client(""), "default", "u", client.FilterRequest{Candidates: []string{"a"}})
	exported, err := roomy.client("").ExportUserWithResponse(ctx, "default", "u")
	if err != nil || exported.StatusCode() != http.StatusOK {
		t.Fatalf("export: %v %d", err, exported.StatusCode())
	}
	if status, _, body := roomy.raw(http.MethodPut, userPath("default", "imported", "/export"), "application/octet-stream",
		exported.Body); status != http.StatusNoContent {
		t.Fatalf("import: %d %s", status, body)
	}
	if st, err := roomy.client("").GetStatsWithResponse(ctx); err != nil || st.JSON200 == nil || st.JSON200.NewUsers != 2 ||
		st.JSON200.Namespaces["default"].NewUsers != 2 {
		t.Errorf("after a call and an import that made a user each: %v %s, want new_users 2", err, st.Body)
	}
}
