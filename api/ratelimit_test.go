package api_test

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/client"
)

// fakeClock is a Config.Now the test moves by hand, safe for concurrent use.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) add(d time.Duration) { c.ns.Add(int64(d)) }
func withRate(clock *fakeClock, limit float64, burst int) envOption {
	return func(c *api.Config) { c.RateLimit, c.RateBurst, c.Now = limit, burst, clock.now }
}

// A key past its rate is answered 429 rate-limited, with the seconds until
// its next token in Retry-After, and the refused call records nothing;
// another key has its own rate, a request with an unknown key takes no
// token, and the key is served again once a token is due.
func TestEachKeyHasItsOwnRate(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, withKeys, withRate(clock, 0.5, 2)) // a token every 2 s, bursts of 2
	w := e.client(writeKey)
	req := func(items ...string) client.FilterRequest { return client.FilterRequest{Candidates: items} }

	// Unknown keys are refused for their key and use up nobody's rate.
	for range 5 {
		status, h, body := e.raw(http.MethodPost, userPath("default", "u", "/filter"), "application/json",
			[]byte(`{"candidates":["x"]}`), "Authorization", "Bearer not-a-key-0123456789")
		wantProblem(t, status, h, body, http.StatusUnauthorized, "unauthorized")
	}
	filter(t, w, "default", "u", req("a"))
	filter(t, w, "default", "u", req("b"))

	r, err := w.FilterUserWithResponse(ctx, "default", "u", nil, req("c"))
	if err != nil {
		t.Fatal(err)
	}
	p := wantProblem(t, r.StatusCode(), r.HTTPResponse.Header, r.Body, http.StatusTooManyRequests, "rate-limited")
	if r.ApplicationproblemJSON429 == nil {
		t.Error("the generated client did not read the 429 as the documented RateLimited problem")
	}
	if got := r.HTTPResponse.Header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After %q, want 2 (a token every 2 s, none left)", got)
	}
	if !strings.Contains(p.Detail, "this API key") {
		t.Errorf("detail %q does not say which caller is limited", p.Detail)
	}

	// Another key has its whole burst; its stats show the refused call
	// recorded nothing.
	st := e.stateOf("default", "u")
	if st["items"] != 2.0 {
		t.Errorf("after two calls and a refused one: %v items, want 2", st["items"])
	}
	rd := e.client(readKey)
	for i := range 2 {
		if r, err := rd.GetStatsWithResponse(ctx); err != nil || r.JSON200 == nil {
			t.Fatalf("read key, call %d: %v %d %s", i, err, r.StatusCode(), r.Body)
		}
	}

	// Half the wait is not enough; the whole of it is.
	clock.add(time.Second)
	if r, err := w.FilterUserWithResponse(ctx, "default", "u", nil, req("c")); err != nil || r.StatusCode() != http.StatusTooManyRequests {
		t.Fatalf("a second later: %v %d, want 429", err, r.StatusCode())
	} else if got := r.HTTPResponse.Header.Get("Retry-After"); got != "1" {
		t.Errorf("a second later: Retry-After %q, want 1", got)
	}
	clock.add(time.Second)
	if got := filter(t, w, "default", "u", req("c", "a")); len(got.Unseen) != 1 || got.Unseen[0] != "c" {
		t.Fatalf("once a token is due: %+v, want c unseen (the refused call recorded nothing)", got)
	}

	// The refusals are counted by status.
	st2, err := e.client(adminKey).GetStatsWithResponse(ctx)
	if err != nil || st2.JSON200 == nil {
		t.Fatal(err, st2.StatusCode())
	}
	if n := st2.JSON200.Errors["429"]; n != 2 {
		t.Errorf("errors[429] = %d, want 2", n)
	}
}

// On an open server each client address has a rate; the health probes and
// the dashboard are outside it.
func TestOpenServerLimitsEachAddress(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, withRate(clock, 1, 1))
	c := e.client("")
	filter(t, c, "default", "u", client.FilterRequest{Candidates: []string{"a"}})
	status, h, body := e.raw(http.MethodGet, "/v1/namespaces", "", nil)
	p := wantProblem(t, status, h, body, http.StatusTooManyRequests, "rate-limited")
	if !strings.Contains(p.Detail, "this client address") || h.Get("Retry-After") != "1" {
		t.Errorf("detail %q, Retry-After %q: want the address named and 1", p.Detail, h.Get("Retry-After"))
	}
	for _, path := range []string{"/healthz", "/readyz", "/", "/openapi.yaml"} {
		if status, _, body := e.raw(http.MethodGet, path, "", nil); status != http.StatusOK {
			t.Errorf("GET %s past the rate: %d %s, want 200", path, status, body)
		}
	}
	clock.add(time.Second)
	filter(t, c, "default", "u", client.FilterRequest{Candidates: []string{"b"}})
}

// Without a rate limit (the default) a caller is never answered 429.
func TestNoRateLimitByDefault(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	for i := range 200 {
		r, err := c.ListNamespacesWithResponse(ctx)
		if err != nil || r.StatusCode() != http.StatusOK {
			t.Fatalf("call %d: %v %d", i, err, r.StatusCode())
		}
	}
}

// A key's own rate takes the place of the server's: a key with rate=0.5
// is limited on a server without --rate-limit, one with rate=off is not
// limited on a server with one, and the others keep the server's. Keys
// reloaded with other rates take effect on the keys' buckets at once.
// GET /v1/auth tells each caller its rate.
func TestAKeysOwnRateTakesThePlaceOfTheServers(t *testing.T) {
	clock := newFakeClock()
	keys := []api.Key{
		{Role: api.RoleWrite, Secret: writeKey, Rate: 0.5, Burst: 1}, // its own, stricter
		{Role: api.RoleAdmin, Secret: adminKey, Rate: math.Inf(1)},   // none
		{Role: api.RoleRead, Secret: readKey},                        // the server's
	}
	e := newEnv(t, func(c *api.Config) { c.Keys = keys }, withRate(clock, 2, 2))
	call := func(key string) int {
		t.Helper()
		r, err := e.client(key).GetAuthWithResponse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return r.StatusCode()
	}
	auth := func(key string) client.Auth {
		t.Helper()
		clock.add(time.Hour) // a full bucket for the question
		r, err := e.client(key).GetAuthWithResponse(ctx)
		if err != nil || r.JSON200 == nil {
			t.Fatalf("auth: %v %d %s", err, r.StatusCode(), r.Body)
		}
		return *r.JSON200
	}
	if a := auth(writeKey); a.RateLimit == nil || *a.RateLimit != 0.5 || *a.RateBurst != 1 {
		t.Errorf("the write key's auth %+v, want its own rate 0.5 in bursts of 1", a)
	}
	if a := auth(adminKey); a.RateLimit != nil || a.RateBurst != nil {
		t.Errorf("the admin key's auth %+v, want no rate", a)
	}
	if a := auth(readKey); a.RateLimit == nil || *a.RateLimit != 2 || *a.RateBurst != 2 {
		t.Errorf("the read key's auth %+v, want the server's 2 in bursts of 2", a)
	}

	clock.add(time.Hour)
	if got := []int{call(writeKey), call(writeKey)}; got[0] != 200 || got[1] != 429 {
		t.Errorf("the write key's two calls: %v, want 200 then 429 (a burst of 1)", got)
	}
	for i := range 50 {
		if got := call(adminKey); got != 200 {
			t.Fatalf("the admin key's call %d: %d, want 200 (rate=off)", i, got)
		}
	}
	if got := []int{call(readKey), call(readKey), call(readKey)}; got[2] != 429 || got[0] != 200 || got[1] != 200 {
		t.Errorf("the read key's three calls: %v, want 200, 200, 429 (the server's burst of 2)", got)
	}

	// Reloaded: the write key without a limit, the admin key with one.
	keys[0].Rate, keys[0].Burst = math.Inf(1), 0
	keys[1].Rate, keys[1].Burst = 1, 1
	if err := e.srv.SetKeys(keys); err != nil {
		t.Fatal(err)
	}
	if got := call(writeKey); got != 200 {
		t.Errorf("the write key after its limit was lifted: %d, want 200 at once", got)
	}
	if got := []int{call(adminKey), call(adminKey)}; got[0] != 200 || got[1] != 429 {
		t.Errorf("the admin key after a limit was set: %v, want 200 then 429", got)
	}
}

// A batch takes from its caller's rate one request a user, not one a
// batch: a rate bounds the users served whether they come one a call or
// many at a time. A batch refused for the rate records nothing and says
// when its users' tokens are due; one of more users than the burst takes
// the whole burst; one refused before its users are known takes one.
func TestABatchTakesOneRequestOfTheRateAUser(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, withKeys, withRate(clock, 1, 4)) // a token a second, bursts of 4
	w := e.client(writeKey)
	batch := func(users ...string) client.BatchFilterRequest {
		var b client.BatchFilterRequest
		for _, u := range users {
			b.Requests = append(b.Requests, client.BatchFilterEntry{User: u, Candidates: []string{"a"}})
		}
		return b
	}
	one := func(user string) int {
		t.Helper()
		r, err := w.FilterUserWithResponse(ctx, "default", user, nil, client.FilterRequest{Candidates: []string{"a"}})
		if err != nil {
			t.Fatal(err)
		}
		return r.StatusCode()
	}

	if r, err := w.FilterBatchWithResponse(ctx, "default", nil, batch("u1", "u2", "u3")); err != nil || r.JSON200 == nil {
		t.Fatalf("a batch of 3 with 4 tokens: %v %d %s, want 200", err, r.StatusCode(), r.Body)
	}
	if got := []int{one("u4"), one("u5")}; got[0] != 200 || got[1] != 429 {
		t.Fatalf("two calls after a batch of 3 with a burst of 4: %v, want 200 then 429", got)
	}

	clock.add(time.Second) // one token
	r, err := w.FilterBatchWithResponse(ctx, "default", nil, batch("v1", "v2", "v3"))
	if err != nil {
		t.Fatal(err)
	}
	p := wantProblem(t, r.StatusCode(), r.HTTPResponse.Header, r.Body, http.StatusTooManyRequests, "rate-limited")
	if got := r.HTTPResponse.Header.Get("Retry-After"); got != "2" {
		t.Errorf("a batch of 3 with 1 token: Retry-After %q, want 2 (its other two tokens, one a second)", got)
	}
	if !strings.Contains(p.Detail, "a batch takes one request of the rate a user, this one 3") {
		t.Errorf("detail %q does not say a batch takes one a user", p.Detail)
	}
	for _, u := range []string{"v1", "v2", "v3"} {
		if st := e.stateOf("default", u); st != nil {
			t.Errorf("user %s of the refused batch: %v, want none (nothing recorded)", u, st)
		}
	}
	clock.add(2 * time.Second) // as Retry-After said
	if r, err := w.FilterBatchWithResponse(ctx, "default", nil, batch("v1", "v2", "v3")); err != nil || r.JSON200 == nil {
		t.Fatalf("the batch retried after Retry-After: %v %d %s, want 200", err, r.StatusCode(), r.Body)
	}

	// Past the burst, a batch takes the whole bucket once it is full.
	clock.add(time.Hour)
	if r, err := w.FilterBatchWithResponse(ctx, "default", nil, batch("w1", "w2", "w3", "w4", "w5", "w6")); err != nil || r.JSON200 == nil {
		t.Fatalf("a batch of 6 users with a full bucket of 4: %v %d %s, want 200", err, r.StatusCode(), r.Body)
	}
	if got := one("u4"); got != http.StatusTooManyRequests {
		t.Fatalf("a call right after a batch that took the whole burst: %d, want 429", got)
	}

	// A batch refused as malformed takes one request, as any request does.
	clock.add(time.Hour)
	for range 4 {
		status, h, body := e.raw(http.MethodPost, "/v1/namespaces/default/filter", "application/json",
			[]byte(`{"requests":`), "Authorization", "Bearer "+writeKey)
		wantProblem(t, status, h, body, http.StatusBadRequest, "invalid-json")
	}
	if got := one("u6"); got != http.StatusTooManyRequests {
		t.Fatalf("a call after four malformed batches with a burst of 4: %d, want 429", got)
	}
}

// Requests refused for their key are limited by client address, with no
// --rate-limit set: past 20, an address is answered 429 rate-limited with
// Retry-After before its key counts, a known key too (a 200 among 429s
// would tell a guess right), but for the keys admitted from it since its
// first refused one (a client behind the same proxy as the guesser, which
// tell the guesser nothing); one refused key more a second is let through
// after.
func TestRefusedKeysAreLimitedByAddress(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, withKeys, func(c *api.Config) { c.Now = clock.now })
	guess := func(key string) (int, http.Header, []byte) {
		return e.raw(http.MethodGet, "/v1/auth", "", nil, "Authorization", "Bearer "+key)
	}
	for i := range 20 {
		status, h, body := guess("not-a-key-0123456789-" + strconv.Itoa(i))
		wantProblem(t, status, h, body, http.StatusUnauthorized, "unauthorized")
		if i == 0 {
			if status, _, body := guess(readKey); status != http.StatusOK {
				t.Fatalf("a known key after one refused: %d %s, want 200", status, body)
			}
		}
	}
	// No key at all is a refused key too.
	status, h, body := e.raw(http.MethodGet, "/v1/auth", "", nil)
	p := wantProblem(t, status, h, body, http.StatusTooManyRequests, "rate-limited")
	if h.Get("Retry-After") != "1" || !strings.Contains(p.Detail, "client address") {
		t.Errorf("the 21st refused key: Retry-After %q, %q; want 1 and the address named", h.Get("Retry-After"), p.Detail)
	}
	for _, key := range []string{"not-a-key-0123456789-x", writeKey} {
		status, h, body := guess(key)
		wantProblem(t, status, h, body, http.StatusTooManyRequests, "rate-limited")
	}
	if status, _, body := guess(readKey); status != http.StatusOK {
		t.Errorf("the key admitted from the address before it was limited: %d %s, want 200", status, body)
	}
	clock.add(time.Second)
	if status, _, body := guess(writeKey); status != http.StatusOK {
		t.Fatalf("a known key a second later: %d %s, want 200", status, body)
	}
	status, h, body = guess("not-a-key-0123456789-y")
	wantProblem(t, status, h, body, http.StatusUnauthorized, "unauthorized")
	status, h, body = guess("not-a-key-0123456789-z")
	wantProblem(t, status, h, body, http.StatusTooManyRequests, "rate-limited")
	if status, _, body := guess(writeKey); status != http.StatusOK {
		t.Errorf("the key admitted a second later, limited again: %d %s, want 200", status, body)
	}
	// Once the address has waited out its burst, it may be wrong again.
	clock.add(20 * time.Second)
	for i := range 20 {
		status, h, body := guess("not-a-key-0123456789-again-" + strconv.Itoa(i))
		wantProblem(t, status, h, body, http.StatusUnauthorized, "unauthorized")
	}
}

// A batch refused for its input takes one request of its caller's rate,
// as any refused request does, not one a user: a batch refused for one bad
// user, or for having too many, must not empty its key's burst and have
// the key's other calls refused.
func TestABatchRefusedForItsInputTakesOneRequestOfTheRate(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, withKeys, withRate(clock, 1, 4), func(c *api.Config) { c.MaxBatchUsers = 4 })
	w := e.client(writeKey)
	for _, bad := range []struct {
		body   string
		status int
		slug   string
	}{
		{`{"requests":[{"user":"a","candidates":["x"]},{"user":"b","candidates":["x"]},{"user":"c","candidates":["x"]},{"user":"","candidates":["x"]}]}`,
			http.StatusBadRequest, "bad-request"},
		{`{"requests":[{"user":"a","candidates":["x"]},{"user":"b","candidates":["x"]},{"user":"c","candidates":["x"]},{"user":"d","candidates":["x"]},{"user":"e","candidates":["x"]}]}`,
			http.StatusRequestEntityTooLarge, "too-many-users"},
	} {
		clock.add(time.Hour) // a full bucket of 4
		status, h, body := e.raw(http.MethodPost, "/v1/namespaces/default/filter", "application/json",
			[]byte(bad.body), "Authorization", "Bearer "+writeKey)
		wantProblem(t, status, h, body, bad.status, bad.slug)
		for i := range 3 {
			r, err := w.FilterUserWithResponse(ctx, "default", "u", nil, client.FilterRequest{Candidates: []string{"a"}})
			if err != nil || r.StatusCode() != http.StatusOK {
				t.Fatalf("call %d after a batch refused %d, with a burst of 4: %v %d %s, want 200 (the batch took one token)",
					i+1, bad.status, err, r.StatusCode(), r.Body)
			}
		}
		for _, u := range []string{"a", "b", "c", "d"} {
			if st := e.stateOf("default", u); st != nil {
				t.Errorf("user %s of the refused batch: %v, want none", u, st)
			}
		}
	}
}
