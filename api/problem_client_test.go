package api_test

import (
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/client"
)

func TestTheClientGivesAnyAnswersProblemAsAnError(t *testing.T) {
	e := newEnv(t)
	c := e.client("")

	ok, err := c.FilterUserWithResponse(ctx, "default", "u1", nil, client.FilterRequest{Candidates: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := client.ProblemOf(ok.HTTPResponse, ok.Body); p != nil {
		t.Errorf("a 200 gives the problem %v; want none", p)
	}

	// A request the document refuses, sent as a careless caller would:
	// the validating client of these tests would not send it.
	plain, err := client.NewClientWithResponses(e.base)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := plain.FilterUserWithResponse(ctx, "default", "u1", nil, client.FilterRequest{Candidates: []string{""}})
	if err != nil {
		t.Fatal(err)
	}
	got := client.ProblemOf(bad.HTTPResponse, bad.Body)
	if got == nil {
		t.Fatalf("a 400 gives no problem: %s", bad.Body)
	}
	var asErr error = got
	const want400 = "400 Bad request: item /candidates/0 is empty or null (https://seenapi.dev/problems/bad-request)"
	if asErr.Error() != want400 {
		t.Errorf("a refused call's problem reads %v; want %q", asErr, want400)
	}
	var p *client.Problem
	if !errors.As(asErr, &p) || bad.ApplicationproblemJSON400 == nil || *p.Detail != *bad.ApplicationproblemJSON400.Detail {
		t.Errorf("the problem %+v is not the answer's %+v", p, bad.ApplicationproblemJSON400)
	}

	missing, err := c.GetUserWithResponse(ctx, "nosuch", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if p := client.ProblemOf(missing.HTTPResponse, missing.Body); p == nil || p.Status != http.StatusNotFound ||
		p.Type != "https://seenapi.dev/problems/unknown-namespace" {
		t.Errorf("an unknown namespace's problem is %v; want a 404 unknown-namespace", p)
	}

	// A proxy in front of the service answers with a page of its own.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxy := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte("  <html>upstream gone</html>\n"))
	})}
	go proxy.Serve(ln)
	t.Cleanup(func() { proxy.Close() })
	pc, err := client.NewClientWithResponses("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	gw, err := pc.FilterUserWithResponse(ctx, "default", "u1", nil, client.FilterRequest{Candidates: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	const want502 = "502 Bad Gateway: <html>upstream gone</html>"
	if p := client.ProblemOf(gw.HTTPResponse, gw.Body); p == nil || p.Error() != want502 || p.Type != "about:blank" {
		t.Errorf("a proxy's 502 page gives the problem %+v; want %q, type about:blank", p, want502)
	}
}

// A proxy or load balancer in front of the service may answer 503 or 429
// with Retry-After as an HTTP date, which HTTP allows beside seconds (RFC
// 9110, 10.2.3): the generated client still gives the answer, for
// ProblemOf, instead of failing to read the header; WithRetries waits for
// the date and gives the last answer once its retries run out.
func TestTheClientTakesARetryAfterDateFromAProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	proxy := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", time.Now().UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Type", "text/html")
		status := http.StatusServiceUnavailable
		if r.URL.Path == "/v1/stats" {
			status = http.StatusTooManyRequests
		}
		w.WriteHeader(status)
		w.Write([]byte("<html>down for maintenance</html>"))
	})}
	go proxy.Serve(ln)
	t.Cleanup(func() { proxy.Close() })
	base := "http://" + ln.Addr().String()

	plain, err := client.NewClientWithResponses(base)
	if err != nil {
		t.Fatal(err)
	}
	f, err := plain.FilterUserWithResponse(ctx, "default", "u1", nil, client.FilterRequest{Candidates: []string{"a"}})
	if err != nil {
		t.Fatalf("a proxy's 503 with a Retry-After date: %v", err)
	}
	if p := client.ProblemOf(f.HTTPResponse, f.Body); p == nil || p.Status != http.StatusServiceUnavailable {
		t.Errorf("a proxy's 503 gives the problem %v", p)
	}
	if f.Headers503 == nil || f.Headers503.RetryAfter == nil || *f.Headers503.RetryAfter != f.HTTPResponse.Header.Get("Retry-After") {
		t.Errorf("a proxy's 503: Retry-After %v, want the header's %q", f.Headers503, f.HTTPResponse.Header.Get("Retry-After"))
	}
	s, err := plain.GetStatsWithResponse(ctx)
	if err != nil {
		t.Fatalf("a proxy's 429 with a Retry-After date: %v", err)
	}
	if s.StatusCode() != http.StatusTooManyRequests || s.Headers429 == nil || s.Headers429.RetryAfter == nil {
		t.Errorf("a proxy's 429: %d, headers %+v", s.StatusCode(), s.Headers429)
	}

	retrying, err := client.NewClientWithResponses(base, client.WithRetries(client.Retry{Max: 1}))
	if err != nil {
		t.Fatal(err)
	}
	calls.Store(0)
	f, err = retrying.FilterUserWithResponse(ctx, "default", "u1", nil, client.FilterRequest{Candidates: []string{"a"}})
	if err != nil {
		t.Fatalf("retries of a proxy's 503 with a Retry-After date: %v", err)
	}
	if f.StatusCode() != http.StatusServiceUnavailable || calls.Load() != 2 {
		t.Errorf("retries of a proxy's 503: the last answer %d after %d attempts; want 503 after 2", f.StatusCode(), calls.Load())
	}
}
