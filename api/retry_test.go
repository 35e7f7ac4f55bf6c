package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/client"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
)

// cutProxy forwards loopback connections to the service. The first cut
// connections are closed as soon as the service's answer starts to come
// back: the service has answered (and recorded) a call whose caller gets
// no answer, as when a load balancer or a network drops it.
type cutProxy struct {
	ln       net.Listener
	cut      atomic.Int32 // connections still to cut
	cuts     atomic.Int32 // connections cut
	accepted atomic.Int32 // connections accepted
	wg       sync.WaitGroup
	mu       sync.Mutex
	open     map[net.Conn]bool // to close at the end: clients keep theirs idle
}

func newCutProxy(t *testing.T, target string, cut int32) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, open: map[net.Conn]bool{}}
	p.cut.Store(cut)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.serve(c, target) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for c := range p.open {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) serve(c net.Conn, target string) {
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	p.mu.Lock()
	p.open[c], p.open[s] = true, true
	p.mu.Unlock()
	go func() { io.Copy(s, c); s.Close() }()
	if p.cut.Add(-1) >= 0 {
		var b [1]byte
		if n, _ := s.Read(b[:]); n == 1 {
			p.cuts.Add(1)
		}
		return
	}
	io.Copy(c, s)
}

func (p *cutProxy) url() string { return "http://" + p.ln.Addr().String() }

func retrying(t *testing.T, base string, r client.Retry) *client.ClientWithResponses {
	t.Helper()
	c, err := client.NewClientWithResponses(base, client.WithRetries(r))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func items(prefix string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return s
}

// A one call whose answer is lost is sent again with the key WithRetries
// gave it, and gets the first answer: its items are recorded once and are
// the ones the caller shows. Without retries the caller gets an error
// while the service recorded the items, which are then never shown.
func TestRetriesGiveTheAnswerOfACallWhoseAnswerWasLost(t *testing.T) {
	e := newEnv(t)
	cands := items("i", 200)
	req := client.FilterRequest{Candidates: cands, Limit: ptr(20)}

	p := newCutProxy(t, e.base[len("http://"):], 1)
	c := retrying(t, p.url(), client.Retry{WaitMin: 10 * time.Millisecond})
	r, err := c.FilterUserWithResponse(ctx, "default", "u1", nil, req)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("a call whose first answer was cut: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if p.cuts.Load() != 1 {
		t.Fatalf("%d answers cut, want 1", p.cuts.Load())
	}
	if !slices.Equal(r.JSON200.Unseen, cands[:20]) || r.HTTPResponse.Header.Get(api.HeaderReplayed) != "true" {
		t.Fatalf("the retry answered %v (replayed %q), want the first answer, %v", r.JSON200.Unseen,
			r.HTTPResponse.Header.Get(api.HeaderReplayed), cands[:20])
	}
	if st := e.stateOf("default", "u1"); st["items"] != 20.0 {
		t.Fatalf("%v items recorded, want 20: the retry recorded again", st["items"])
	}

	// The next call is another call: a key of its own, the next items.
	r, err = c.FilterUserWithResponse(ctx, "default", "u1", nil, req)
	if err != nil || r.JSON200 == nil || !slices.Equal(r.JSON200.Unseen, cands[20:40]) ||
		r.HTTPResponse.Header.Get(api.HeaderReplayed) != "" {
		t.Fatalf("the next call: %v %d %s", err, r.StatusCode(), r.Body)
	}

	// What the retries spare: the same cut without them.
	p = newCutProxy(t, e.base[len("http://"):], 1)
	plain, err := client.NewClientWithResponses(p.url())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.FilterUserWithResponse(ctx, "default", "u2", withKey("k2"), req); err == nil {
		t.Fatal("without retries, a call whose answer was cut did not fail")
	}
	if st := e.stateOf("default", "u2"); st["items"] != 20.0 {
		t.Fatalf("the cut call recorded %v items, want 20", st["items"])
	}
}

// A batch call gets a key too, and a call's own key is kept.
func TestRetriesKeyTheBatchAndKeepTheCallersKey(t *testing.T) {
	e := newEnv(t)
	p := newCutProxy(t, e.base[len("http://"):], 1)
	c := retrying(t, p.url(), client.Retry{WaitMin: 10 * time.Millisecond})
	batch := client.BatchFilterRequest{Requests: []client.BatchFilterEntry{{User: "a", Candidates: []string{"x", "y"}, Limit: ptr(1)},
		{User: "b", Candidates: []string{"x", "y"}, Limit: ptr(1)}}}
	r, err := c.FilterBatchWithResponse(ctx, "default", nil, batch)
	if err != nil || r.JSON200 == nil || r.HTTPResponse.Header.Get(api.HeaderReplayed) != "true" || p.cuts.Load() != 1 {
		t.Fatalf("a batch whose first answer was cut: %v %d %s (%d cut)", err, r.StatusCode(), r.Body, p.cuts.Load())
	}
	for _, u := range []string{"a", "b"} {
		if st := e.stateOf("default", u); st["items"] != 1.0 {
			t.Errorf("user %s: %v items, want 1", u, st["items"])
		}
	}

	req := client.FilterRequest{Candidates: []string{"x", "y"}, Limit: ptr(1)}
	first, err := c.FilterUserWithResponse(ctx, "default", "own", withKey("mine"), req)
	if err != nil || first.JSON200 == nil {
		t.Fatal(err, first.StatusCode())
	}
	again, err := c.FilterUserWithResponse(ctx, "default", "own", withKey("mine"), req)
	if err != nil || string(again.Body) != string(first.Body) || again.HTTPResponse.Header.Get(api.HeaderReplayed) != "true" {
		t.Fatalf("the caller's own key sent twice: %v %d %s, want %s replayed", err, again.StatusCode(), again.Body, first.Body)
	}
}

// A 429 is retried after its Retry-After; with retries off it reaches the
// caller.
func TestRetriesWaitOutTheRateLimit(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.RateLimit, c.RateBurst = 1, 1 })
	req := client.FilterRequest{Candidates: []string{"x"}}
	never := retrying(t, e.base, client.Retry{Max: -1})
	filter(t, never, "default", "u", req)
	r, err := never.FilterUserWithResponse(ctx, "default", "u", nil, req)
	if err != nil || r.ApplicationproblemJSON429 == nil {
		t.Fatalf("with retries off, a call past the rate: %v %d %s", err, r.StatusCode(), r.Body)
	}

	c := retrying(t, e.base, client.Retry{})
	start := time.Now()
	r, err = c.FilterUserWithResponse(ctx, "default", "u", nil, req)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("with retries, a call past the rate: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Errorf("answered after %v: the retry did not wait for a token (one a second)", took)
	}
}

// statusTap is a transport that reports each status it passes on.
type statusTap struct {
	next   http.RoundTripper
	status chan int
	// sent, when not nil, gets the time each attempt is sent.
	sent chan time.Time
}

func (s statusTap) RoundTrip(r *http.Request) (*http.Response, error) {
	if s.sent != nil {
		select {
		case s.sent <- time.Now():
		default:
		}
	}
	resp, err := s.next.RoundTrip(r)
	if err == nil {
		select {
		case s.status <- resp.StatusCode:
		default:
		}
	}
	return resp, err
}

// The twin of a call in flight (409 idempotency-key-in-use) is retried
// after the 409's Retry-After (1 s) until the first is answered, then gets
// its answer.
func TestRetriesWaitForTheTwinInFlight(t *testing.T) {
	g := &appendGate{user: "slow", entered: make(chan struct{}, 1), release: make(chan struct{})}
	e := newEnvOver(t, func(s *storage.Store) eviction.Store { g.Store = s; return g })
	req := client.FilterRequest{Candidates: []string{"a", "b"}, Limit: ptr(1)}
	first := filterAsync(e.client(""), "default", "slow", withKey("k"), req)
	<-g.entered

	tap := statusTap{next: http.DefaultTransport, status: make(chan int, 16)}
	c := retrying(t, e.base, client.Retry{Max: 20, WaitMin: 10 * time.Millisecond, WaitMax: 100 * time.Millisecond,
		HTTPClient: &http.Client{Transport: tap}})
	twin := filterAsync(c, "default", "slow", withKey("k"), req)
	if got := <-tap.status; got != http.StatusConflict {
		close(g.release)
		t.Fatalf("the twin's first attempt: %d, want 409", got)
	}
	refused := time.Now()
	close(g.release)
	a, b := <-first, <-twin
	// Its own backoff (10 ms) would have sent it again at once.
	if waited := time.Since(refused); waited < 900*time.Millisecond {
		t.Errorf("the twin was sent again %v after its 409, not after its Retry-After (1 s)", waited)
	}
	if a.err != nil || a.r.JSON200 == nil {
		t.Fatalf("the first call: %v %d", a.err, a.r.StatusCode())
	}
	if b.err != nil || string(b.r.Body) != string(a.r.Body) || b.r.HTTPResponse.Header.Get(api.HeaderReplayed) != "true" {
		t.Fatalf("the twin: %v %d %s, want %s replayed", b.err, b.r.StatusCode(), b.r.Body, a.r.Body)
	}
}

// A 409 that is not idempotency-key-in-use is not retried, and the caller
// reads its problem whole.
func TestRetriesLeaveOtherConflicts(t *testing.T) {
	e := newEnv(t)
	tap := statusTap{next: http.DefaultTransport, status: make(chan int, 16)}
	c := retrying(t, e.base, client.Retry{WaitMin: 10 * time.Millisecond, HTTPClient: &http.Client{Transport: tap}})
	filter(t, c, "default", "u", client.FilterRequest{Candidates: []string{"x"}})
	<-tap.status
	r, err := c.FilterUserWithResponse(ctx, "default", "u", withKey("k"), client.FilterRequest{Candidates: []string{"x"}})
	if err != nil || r.JSON200 == nil {
		t.Fatal(err)
	}
	<-tap.status
	// The same key with another body: 422, not retried.
	r, err = c.FilterUserWithResponse(ctx, "default", "u", withKey("k"), client.FilterRequest{Candidates: []string{"y"}})
	if err != nil || r.ApplicationproblemJSON422 == nil {
		t.Fatalf("a reused key: %v %d %s", err, r.StatusCode(), r.Body)
	}
	// A served namespace cannot be purged: 409 namespace-served, read
	// whole after the policy looked at its type, and sent once.
	<-tap.status
	pr, err := c.PurgeNamespaceWithResponse(ctx, "default")
	if err != nil || pr.ApplicationproblemJSON409 == nil || pr.ApplicationproblemJSON409.Type != api.ProblemBase+"namespace-served" {
		t.Fatalf("purging a served namespace: %v %d %s", err, pr.StatusCode(), pr.Body)
	}
	<-tap.status
	select {
	case s := <-tap.status:
		t.Fatalf("a 409 namespace-served was sent again (%d)", s)
	case <-time.After(200 * time.Millisecond):
	}
}

// A batch answered 200 is sent once, whatever its users' results: a user
// the store failed is the caller's to send again (the batch with its
// Idempotency-Key, whose retry serves that user anew, or a call of its own).
func TestRetriesLeaveABatchsUserErrorsToTheCaller(t *testing.T) {
	e := newEnv(t)
	tap := statusTap{next: http.DefaultTransport, status: make(chan int, 16)}
	c := retrying(t, e.base, client.Retry{WaitMin: 10 * time.Millisecond, HTTPClient: &http.Client{Transport: tap}})
	e.brokenStore()
	r, err := c.FilterBatchWithResponse(ctx, "default", nil, client.BatchFilterRequest{Requests: []client.BatchFilterEntry{
		{User: "cold", Candidates: []string{"a"}},
	}})
	if err != nil || r.JSON200 == nil || r.JSON200.Results[0].Error == nil ||
		r.JSON200.Results[0].Error.Type != api.ProblemBase+"storage-unavailable" {
		t.Fatalf("a batch whose user the store fails: %v %d %s", err, r.StatusCode(), r.Body)
	}
	<-tap.status
	select {
	case s := <-tap.status:
		t.Fatalf("the batch was sent again (%d)", s)
	case <-time.After(200 * time.Millisecond):
	}
	// A user's failure is not kept: the same key serves the user anew,
	// which the store still fails.
	body := []byte(`{"requests":[{"user":"cold","candidates":["a"]}]}`)
	first, _, _ := e.raw(http.MethodPost, "/v1/namespaces/default/filter", "application/json", body, "Idempotency-Key", "k")
	status, h, again := e.raw(http.MethodPost, "/v1/namespaces/default/filter", "application/json", body, "Idempotency-Key", "k")
	if first != http.StatusOK || status != http.StatusOK || h.Get(api.HeaderReplayed) != "" ||
		!strings.Contains(string(again), "storage-unavailable") {
		t.Fatalf("the keyed batch sent again: %d %d %s (replayed %q), want its user served anew, and failed again", first, status, again,
			h.Get(api.HeaderReplayed))
	}
}

// A service that keeps refusing (its store failed: 503
// storage-unavailable, Retry-After: 1) is retried within Retry.For only,
// each retry told to OnRetry: the call returns the last refusal, read as
// any answer, before For is out. OnRetry's false ends the retries: here
// those of a call that got no answer, which then fails at once.
func TestRetriesStopAtTheirBoundAndAreTold(t *testing.T) {
	e := newEnv(t)
	e.brokenStore()
	tap := statusTap{next: http.DefaultTransport, status: make(chan int, 16), sent: make(chan time.Time, 16)}
	var told []int
	c := retrying(t, e.base, client.Retry{For: 2500 * time.Millisecond, HTTPClient: &http.Client{Transport: tap},
		OnRetry: func(resp *http.Response, err error) bool {
			told = append(told, resp.StatusCode)
			return true
		}})
	// Unbounded, the retries would go on; the context ends the test.
	bounded, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	r, err := c.GetUserWithResponse(bounded, "default", "cold")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("a call the service kept refusing: %v after %v (OnRetry told of %d retries), want its 503 storage-unavailable", err, took, len(told))
	}
	if r.ApplicationproblemJSON503 == nil || r.ApplicationproblemJSON503.Type != api.ProblemBase+"storage-unavailable" {
		t.Fatalf("a call the service kept refusing: %v %d %s, want its 503 storage-unavailable", err, r.StatusCode(), r.Body)
	}
	// Sent at 0, 1 and 2 s (Retry-After: 1) on a quiet machine; a late
	// answer can leave room for one retry fewer. For bounds when the last
	// attempt is sent, not how long its answer takes (that is the HTTP
	// client's to bound), and the retries stop only when the next wait
	// would end past For.
	const retryAfter, bound = time.Second, 2500 * time.Millisecond
	var last time.Time
	for len(tap.sent) > 0 {
		last = <-tap.sent
	}
	sent := len(tap.status)
	if sent < 2 || sent > 3 || len(told) != sent-1 || slices.ContainsFunc(told, func(s int) bool { return s != 503 }) {
		t.Errorf("%d attempts sent, OnRetry told of %v; want 2 or 3, each retry told of its 503", sent, told)
	}
	if last.Sub(start) > bound {
		t.Errorf("the last attempt was sent %v after the call's start, past For (%v)", last.Sub(start), bound)
	}
	if took+retryAfter <= bound {
		t.Errorf("the call returned after %v, when another retry's wait (%v) would have ended within For (%v)", took, retryAfter, bound)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	var errs []error
	c = retrying(t, closed, client.Retry{For: time.Minute, OnRetry: func(resp *http.Response, err error) bool {
		errs = append(errs, err)
		return resp != nil
	}})
	if _, err := c.GetUserWithResponse(ctx, "default", "cold"); err == nil || len(errs) != 1 || errs[0] == nil {
		t.Fatalf("a call to a closed port, answered ones only retried: %v, OnRetry told of %v; want the error, told once", err, errs)
	}
}

// A call whose context ends while it waits to be retried returns the
// context's error and the answer that asked for the retry, not the
// context's error alone: a service whose store failed (503
// storage-unavailable) or a caller past its rate (429 rate-limited), each
// with a Retry-After of 1 s, longer than the context.
func TestRetriesCutByTheContextNameTheLastAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []envOption
		refuse func(*testing.T, *env, *client.ClientWithResponses) // so that the call is answered so
		want   string                                              // the answer's status, title and detail
		typ    string
	}{
		{"503", nil, func(_ *testing.T, e *env, _ *client.ClientWithResponses) { e.brokenStore() },
			"503 Storage unavailable: the store failed to read or write", api.ProblemBase + "storage-unavailable"},
		{"429", []envOption{func(c *api.Config) { c.RateLimit, c.RateBurst = 0.5, 1 }},
			func(t *testing.T, _ *env, c *client.ClientWithResponses) {
				if r, err := c.GetUserWithResponse(ctx, "default", "cold"); err != nil || r.StatusCode() != http.StatusNotFound {
					t.Fatalf("the call that takes the one token: %v %d %s", err, r.StatusCode(), r.Body)
				}
			},
			"429 Too many requests: ", api.ProblemBase + "rate-limited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts...)
			c := retrying(t, e.base, client.Retry{})
			tc.refuse(t, e, c)
			short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			_, err := c.GetUserWithResponse(short, "default", "cold")
			var cut *client.RetryCutError
			var p *client.Problem
			if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &cut) || !errors.As(err, &p) || string(p.Type) != tc.typ ||
				!strings.Contains(err.Error(), "context deadline exceeded, while retrying after "+tc.want) ||
				!strings.Contains(err.Error(), "("+tc.typ+")") {
				t.Fatalf("a call cut by its context while retrying a %s: %v\nwant the context's error and the answer: %s... (%s)", tc.name, err, tc.want, tc.typ)
			}
			if ue := (*url.Error)(nil); !errors.As(err, &ue) || !ue.Timeout() {
				t.Errorf("%v: not a *url.Error that says it timed out", err)
			}
		})
	}
}

// So does one whose attempts got no answer: its error names the last
// attempt's.
func TestRetriesCutByTheContextNameTheLastError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = retrying(t, closed, client.Retry{For: time.Minute}).GetUserWithResponse(short, "default", "cold")
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, new(*client.RetryCutError)) ||
		!strings.Contains(err.Error(), "context deadline exceeded, while retrying after no answer: dial tcp") ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("a call to a closed port cut by its context: %v\nwant the context's error and the last attempt's, connection refused", err)
	}
}

// A call that ends in an error (its context ended before it was sent, or
// while it waited to be retried) leaves the client's other connections
// open: a client shared by many callers, each with its own deadline, would
// otherwise dial again after every call whose deadline passed.
func TestRetriesEndedByTheContextKeepTheIdleConnections(t *testing.T) {
	e := newEnv(t)
	p := newCutProxy(t, e.base[len("http://"):], 0)
	c := retrying(t, p.url(), client.Retry{})
	answered := func(when string) {
		t.Helper()
		if r, err := c.GetAuthWithResponse(ctx); err != nil || r.JSON200 == nil {
			t.Fatalf("%s: %v %d %s", when, err, r.StatusCode(), r.Body)
		}
		if n := p.accepted.Load(); n != 1 {
			t.Fatalf("%s: %d connections made, want the first one only, kept idle", when, n)
		}
	}
	answered("the first call")

	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.GetAuthWithResponse(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("a call whose context had ended: %v", err)
	}
	answered("a call after one whose context had ended")

	e.brokenStore()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := c.GetUserWithResponse(short, "default", "cold"); !errors.As(err, new(*client.RetryCutError)) {
		t.Fatalf("a call cut in the wait after its 503: %v", err)
	}
	answered("a call after one cut while it waited to be retried")
}
