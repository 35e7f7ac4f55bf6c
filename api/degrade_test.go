package api_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/client"
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
	if got.Degraded == nil || !*got.Degraded || !slices.Equal(got.Unseen, []string{"a", "b"}) || got.Recorded != 0 {
		t.Fatalf("degraded answer: %+v, want unseen [a b] (deduplicated, limited), degraded", got)
	}
	r, err := c.GetStatsWithResponse(ctx)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	if r.JSON200.Degraded != 1 {
		t.Fatalf("degraded answers counted %d, want 1", r.JSON200.Degraded)
	}
}

func TestOnErrorFailAnswersTheStorageProblem(t *testing.T) {
	e := newEnv(t)
	e.brokenStore()
	status, h, body := e.raw("POST", userPath("default", "cold", "/filter"), "application/json",
		[]byte(`{"candidates":["a"],"on_error":"fail"}`))
	if status != http.StatusServiceUnavailable {
		t.Fatalf("status %d: %s", status, body)
	}
	if p := problem(t, status, h, body); p.Type != api.ProblemBase+"storage-unavailable" {
		t.Fatalf("type %s", p.Type)
	}
	if h.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
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
	r, err := c.FilterBatchWithResponse(ctx, "default", client.BatchFilterRequest{Requests: []client.BatchFilterEntry{
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
