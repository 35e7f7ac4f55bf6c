package api_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/http"
	"reflect"
	"runtime"
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

func withKey(key string) *client.FilterUserParams {
	return &client.FilterUserParams{IdempotencyKey: &key}
}

// unseenNow is what the user has not seen of items, recording nothing.
func unseenNow(t *testing.T, c *client.ClientWithResponses, ns, user string, items ...string) []string {
	t.Helper()
	return filter(t, c, ns, user, client.FilterRequest{Candidates: items, Record: ptr(client.None)}).Unseen
}

// A retry of the one call with the same Idempotency-Key gets the first
// answer again, marked as replayed, and records nothing: the items the
// first call did not return stay unseen. Without a key, the same retry
// records the next items.
func TestIdempotencyKeyMakesTheOneCallSafeToRetry(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	req := client.FilterRequest{Candidates: []string{"a", "b", "c", "d", "e"}, Limit: ptr(2)}
	first, err := c.FilterUserWithResponse(ctx, "default", "u", withKey("k-1"), req)
	if err != nil || first.JSON200 == nil {
		t.Fatalf("first call: %v %d %s", err, first.StatusCode(), first.Body)
	}
	if got := first.HTTPResponse.Header.Get("Idempotent-Replayed"); got != "" || first.Headers200 != nil && first.Headers200.IdempotentReplayed != nil {
		t.Errorf("a first answer says Idempotent-Replayed: %q", got)
	}
	for range 2 {
		retry, err := c.FilterUserWithResponse(ctx, "default", "u", withKey("k-1"), req)
		if err != nil || retry.JSON200 == nil {
			t.Fatalf("retry: %v %d %s", err, retry.StatusCode(), retry.Body)
		}
		if string(retry.Body) != string(first.Body) || retry.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry answered %s (Idempotent-Replayed %q), want %s again, replayed", retry.Body,
				retry.HTTPResponse.Header.Get("Idempotent-Replayed"), first.Body)
		}
		// The client reads the header as what it says, a boolean.
		if h := retry.Headers200; h == nil || h.IdempotentReplayed == nil || !*h.IdempotentReplayed {
			t.Fatalf("the generated client reads the replay's headers as %+v, want IdempotentReplayed true", h)
		}
	}
	if got := unseenNow(t, c, "default", "u", "a", "b", "c", "d", "e"); !slices.Equal(got, []string{"c", "d", "e"}) {
		t.Fatalf("after the call and two retries, unseen %v; want c, d and e (only a and b recorded)", got)
	}
	// The draft's quoted form names the same key.
	if r, _ := c.FilterUserWithResponse(ctx, "default", "u", withKey(`"k-1"`), req); r.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the quoted key was not the same key: %d %s", r.StatusCode(), r.Body)
	}
	// Another key, or another user, is another call.
	if got := filter(t, c, "default", "u", req).Unseen; !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("a call without a key: %v, want c and d", got)
	}
	r, err := c.FilterUserWithResponse(ctx, "default", "v", withKey("k-1"), req)
	if err != nil || r.JSON200 == nil || !slices.Equal(r.JSON200.Unseen, []string{"a", "b"}) {
		t.Fatalf("the same key for another user: %v %d %s", err, r.StatusCode(), r.Body)
	}
	st := e.srv.Stats()
	if st.IdempotentReplays != 3 || st.IdempotencyKept != 2 || st.IdempotencyBytes <= 0 {
		t.Errorf("stats: %d replays, %d kept in %d bytes; want 3 replays and 2 kept", st.IdempotentReplays, st.IdempotencyKept, st.IdempotencyBytes)
	}
	status, _, body := e.raw(http.MethodGet, "/metrics", "", nil)
	if status != http.StatusOK || !strings.Contains(string(body), "seenapi_idempotent_replays_total 3") {
		t.Errorf("metrics: %d, no seenapi_idempotent_replays_total 3", status)
	}
}

// The same key with another body is refused and records nothing; an
// answer that was an error is not kept, so a corrected retry with the same
// key is served.
func TestIdempotencyKeyReusedOrAfterAnError(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	filter(t, c, "default", "u", client.FilterRequest{Candidates: []string{"a"}})
	if _, err := c.FilterUserWithResponse(ctx, "default", "u", withKey("k"), client.FilterRequest{Candidates: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	r, err := c.FilterUserWithResponse(ctx, "default", "u", withKey("k"), client.FilterRequest{Candidates: []string{"c"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.ApplicationproblemJSON422 == nil || r.ApplicationproblemJSON422.Type != "https://seenapi.dev/problems/idempotency-key-reused" {
		t.Fatalf("the key with another body: %d %s", r.StatusCode(), r.Body)
	}
	if got := unseenNow(t, c, "default", "u", "c"); len(got) != 1 {
		t.Fatalf("a refused call recorded c")
	}

	status, h, body := e.raw(http.MethodPost, userPath("default", "u", "/filter"), "application/json",
		[]byte(`{"candidates":["x"],"limit":-1}`), "Idempotency-Key", "k-2")
	wantProblem(t, status, h, body, http.StatusBadRequest, "bad-request")
	good := client.FilterRequest{Candidates: []string{"x"}}
	r, err = c.FilterUserWithResponse(ctx, "default", "u", withKey("k-2"), good)
	if err != nil || r.JSON200 == nil || !slices.Equal(r.JSON200.Unseen, []string{"x"}) || r.HTTPResponse.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("the corrected call with the key of a refused one: %v %d %s", err, r.StatusCode(), r.Body)
	}

	for _, key := range []string{"", strings.Repeat("k", 256), "tab\there", "é"} {
		status, h, body := e.raw(http.MethodPost, userPath("default", "u", "/filter"), "application/json",
			[]byte(`{"candidates":["y"]}`), "Idempotency-Key", key)
		p := wantProblem(t, status, h, body, http.StatusBadRequest, "bad-request")
		if len(p.Errors) != 1 || p.Errors[0].Parameter != "Idempotency-Key" {
			t.Errorf("key %q: errors %+v, want the Idempotency-Key named", key, p.Errors)
		}
	}
	if got := unseenNow(t, c, "default", "u", "y"); len(got) != 1 {
		t.Fatalf("a call with a bad key recorded y")
	}

	// The document's schema of the header admits no key the server
	// refuses, so a client that validates against it never sends one, and
	// the server takes none that it does not admit (a quoted key cut
	// short is no bare key that begins with a quote).
	schema := loadSpec(t).Components.Parameters["idempotencyKey"].Value.Schema.Value
	k255, q255 := strings.Repeat("k", 255), strings.Repeat("q", 255)
	for i, key := range []string{"fresh", "a b", "~", k255, k255 + "k", `"` + q255 + `"`, `"` + q255 + `q"`, `""`, "tab\there", "é",
		`"cut`, `"`, `a"b`, `"c"d"`, "a,b", "a, b", `"a", "b"`, `"a,b"`, `"a\"b"`, `"a\"`, `"a\\"`, `"a\\", "b"`, `"a\", "b"`} {
		specOK := schema.VisitJSON(key) == nil
		status, _, body := e.raw(http.MethodPost, userPath("default", "u", "/filter"), "application/json",
			fmt.Appendf(nil, `{"candidates":["z%d"]}`, i), "Idempotency-Key", key)
		if specOK && status != http.StatusOK {
			t.Errorf("key %q fits the document's schema, and the server answers %d %s", key, status, body)
		}
		if !specOK && status != http.StatusBadRequest {
			t.Errorf("key %q does not fit the document's schema, and the server answers %d %s, want 400", key, status, body)
		}
		if !specOK && (key == "fresh" || key == k255 || key == `"`+q255+`"`) {
			t.Errorf("key %q: a good key does not fit the document's schema", key)
		}
	}
}

// A request with two Idempotency-Key lines is refused and records
// nothing: taken as its first key, the same request sent on through a
// proxy that keeps the last was another call, which recorded the next
// items.
func TestTwoIdempotencyKeysAreRefused(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	conn, addr := e.dial(t)
	const body = `{"candidates":["a","b"],"limit":1}`
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nIdempotency-Key: k-1\r\nIdempotency-Key: k-2\r\nContent-Length: %d\r\n\r\n%s",
		userPath("default", "u", "/filter"), addr, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := readAll(t, resp)
	p := wantProblem(t, resp.StatusCode, resp.Header, b, http.StatusBadRequest, "bad-request")
	if len(p.Errors) != 1 || p.Errors[0].Parameter != "Idempotency-Key" {
		t.Errorf("errors %+v, want the Idempotency-Key named", p.Errors)
	}
	if got := unseenNow(t, c, "default", "u", "a", "b"); len(got) != 2 {
		t.Fatalf("a call with two keys recorded: unseen %v, want a and b", got)
	}
}

// One header line that lists keys is two keys, as a proxy joins two lines
// into one: refused as two lines are, recording nothing, while a quoted
// key with a comma inside is one key, whose retry is replayed.
func TestAListOfIdempotencyKeysIsRefused(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	// The document's schema refuses these keys: this client sends them
	// anyway, checking only the answers.
	loose, err := client.NewClientWithResponses(e.base, client.WithHTTPClient(e.val.doer(false)))
	if err != nil {
		t.Fatal(err)
	}
	req := client.FilterRequest{Candidates: []string{"a", "b"}, Limit: ptr(1)}
	for _, key := range []string{"k-1, k-2", "k-1,k-2", `"k-1", "k-2"`, `"k-1","k-2"`, `"k-1", k-2`, `k-1, "k-2"`, `"k\\", "2"`} {
		r, err := loose.FilterUserWithResponse(ctx, "default", "u", withKey(key), req)
		if err != nil {
			t.Fatal(err)
		}
		p := wantProblem(t, r.StatusCode(), r.HTTPResponse.Header, r.Body, http.StatusBadRequest, "bad-request")
		if len(p.Errors) != 1 || p.Errors[0].Parameter != "Idempotency-Key" {
			t.Errorf("key %s: errors %+v, want the Idempotency-Key named", key, p.Errors)
		}
	}
	if got := unseenNow(t, c, "default", "u", "a", "b"); len(got) != 2 {
		t.Fatalf("a call with a list of keys recorded: unseen %v, want a and b", got)
	}
	for _, key := range []string{`"k,1"`, `"k\"k, 2"`} {
		first, err := c.FilterUserWithResponse(ctx, "default", "u", withKey(key), req)
		if err != nil || first.JSON200 == nil {
			t.Fatalf("key %s: %v %d %s", key, err, first.StatusCode(), first.Body)
		}
		retry, err := c.FilterUserWithResponse(ctx, "default", "u", withKey(key), req)
		if err != nil || string(retry.Body) != string(first.Body) || retry.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("key %s: the retry answered %v %d %s, want %s replayed", key, err, retry.StatusCode(), retry.Body, first.Body)
		}
	}
}

// appendGate is the real store with the journal appends of one user held
// until release is closed: the one call of that user stays in flight.
type appendGate struct {
	*storage.Store
	user    string
	entered chan struct{}
	release chan struct{}
}

func (g *appendGate) Append(ns, user string, value []byte, ttl time.Duration) (uint64, error) {
	if user == g.user {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.Store.Append(ns, user, value, ttl)
}

// answer is what a one call made by filterAsync got.
type answer struct {
	r   *client.FilterUserResponse
	err error
}

// filterAsync makes a one call on a goroutine of its own.
func filterAsync(c *client.ClientWithResponses, ns, user string, params *client.FilterUserParams, req client.FilterRequest) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		r, err := c.FilterUserWithResponse(ctx, ns, user, params, req)
		ch <- answer{r, err}
	}()
	return ch
}

// While a keyed call is in flight, its twin is refused with 409 and
// changes nothing; once the first is answered, the twin gets its answer.
func TestIdempotencyKeyInFlight(t *testing.T) {
	g := &appendGate{user: "slow", entered: make(chan struct{}, 1), release: make(chan struct{})}
	e := newEnvOver(t, func(s *storage.Store) eviction.Store { g.Store = s; return g })
	c := e.client("")
	req := client.FilterRequest{Candidates: []string{"a", "b"}, Limit: ptr(1)}
	first := filterAsync(c, "default", "slow", withKey("k"), req)
	<-g.entered
	r, err := c.FilterUserWithResponse(ctx, "default", "slow", withKey("k"), req)
	if err != nil {
		close(g.release)
		t.Fatal(err)
	}
	if r.ApplicationproblemJSON409 == nil || r.ApplicationproblemJSON409.Type != "https://seenapi.dev/problems/idempotency-key-in-use" {
		close(g.release)
		t.Fatalf("the twin of a call in flight: %d %s", r.StatusCode(), r.Body)
	}
	// A client that knows nothing of the problem type knows when to retry.
	if r.Headers409 == nil || r.Headers409.RetryAfter == nil || *r.Headers409.RetryAfter != "1" {
		t.Errorf("the twin of a call in flight: Retry-After %q, want 1", r.HTTPResponse.Header.Get("Retry-After"))
	}
	close(g.release)
	a := <-first
	if a.err != nil || a.r.JSON200 == nil || !slices.Equal(a.r.JSON200.Unseen, []string{"a"}) {
		t.Fatalf("the first call: %v %d %s", a.err, a.r.StatusCode(), a.r.Body)
	}
	r, err = c.FilterUserWithResponse(ctx, "default", "slow", withKey("k"), req)
	if err != nil || string(r.Body) != string(a.r.Body) || r.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the twin once the first was answered: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if got := unseenNow(t, c, "default", "slow", "a", "b"); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("unseen %v, want b alone", got)
	}
}

// A batch is kept whole; keys are the caller's own: another API key's
// call with the same Idempotency-Key is another call.
func TestIdempotencyKeyOfABatchAndOfAnotherCaller(t *testing.T) {
	e := newEnv(t, withKeys)
	w, a := e.client(writeKey), e.client(adminKey)
	batch := client.BatchFilterRequest{Requests: []client.BatchFilterEntry{
		{User: "u1", Candidates: []string{"a", "b"}, Limit: ptr(1)},
		{User: "u2", Candidates: []string{"a", "b"}, Limit: ptr(1)},
	}}
	key := "batch-1"
	params := &client.FilterBatchParams{IdempotencyKey: &key}
	first, err := w.FilterBatchWithResponse(ctx, "default", params, batch)
	if err != nil || first.JSON200 == nil {
		t.Fatalf("batch: %v %d %s", err, first.StatusCode(), first.Body)
	}
	retry, err := w.FilterBatchWithResponse(ctx, "default", params, batch)
	if err != nil || string(retry.Body) != string(first.Body) || retry.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("batch retry: %v %d %s", err, retry.StatusCode(), retry.Body)
	}
	other, err := a.FilterBatchWithResponse(ctx, "default", params, batch)
	if err != nil || other.JSON200 == nil || other.HTTPResponse.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("the same key from another API key: %v %d %s", err, other.StatusCode(), other.Body)
	}
	for i, res := range other.JSON200.Results {
		if res.Unseen == nil || !slices.Equal(*res.Unseen, []string{"b"}) {
			t.Fatalf("another caller's batch, result %d: %+v; want b (a was recorded by the first)", i, res)
		}
	}
}

// The answers kept for retries move to another server (the same service
// after a graceful restart) through SaveReplays and LoadReplays: a retry
// there gets its answer again, a dry run's too, which no journal holds.
// Answers past their time to live stay behind, the budget keeps the most
// recently used, and bytes of another form are refused.
func TestKeptAnswersOutliveAGracefulRestart(t *testing.T) {
	now := time.Now()
	clock := func(c *api.Config) { c.Now = func() time.Time { return now }; c.IdempotencyTTL = time.Minute }
	before := newEnv(t, clock)
	c := before.client("")
	req := client.FilterRequest{Candidates: []string{"a", "b", "c", "d"}, Limit: ptr(2)}
	dry := client.FilterRequest{Candidates: []string{"x", "y"}, Record: ptr(client.None)}
	first, err := c.FilterUserWithResponse(ctx, "default", "u", withKey("k-1"), req)
	if err != nil || first.JSON200 == nil {
		t.Fatalf("first call: %v %s", err, first.Body)
	}
	firstDry, err := c.FilterUserWithResponse(ctx, "default", "v", withKey("k-2"), dry)
	if err != nil || firstDry.JSON200 == nil {
		t.Fatalf("first dry run: %v %s", err, firstDry.Body)
	}
	var saved bytes.Buffer
	if n, err := before.srv.SaveReplays(&saved); err != nil || n != 2 {
		t.Fatalf("SaveReplays: %d, %v; want 2", n, err)
	}

	after := newEnv(t, clock)
	if n, err := after.srv.LoadReplays(bytes.NewReader(saved.Bytes())); err != nil || n != 2 {
		t.Fatalf("LoadReplays: %d, %v; want 2", n, err)
	}
	c = after.client("")
	for _, call := range []struct {
		user, key string
		req       client.FilterRequest
		first     []byte
	}{{"u", "k-1", req, first.Body}, {"v", "k-2", dry, firstDry.Body}} {
		r, err := c.FilterUserWithResponse(ctx, "default", call.user, withKey(call.key), call.req)
		if err != nil || string(r.Body) != string(call.first) || r.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry of %s after the restart: %v %s (replayed %q), want %s", call.key, err, r.Body,
				r.HTTPResponse.Header.Get("Idempotent-Replayed"), call.first)
		}
	}
	// The retry recorded nothing in the second server's (empty) store.
	if got := unseenNow(t, c, "default", "u", "a", "b"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("after a retry answered again, unseen %v; want a and b", got)
	}

	now = now.Add(time.Minute)
	if n, err := newEnv(t, clock).srv.LoadReplays(bytes.NewReader(saved.Bytes())); err != nil || n != 0 {
		t.Errorf("LoadReplays past the time to live: %d, %v; want 0", n, err)
	}
	now = now.Add(-time.Minute)
	small := newEnv(t, clock, func(c *api.Config) { c.IdempotencyBytes = int64(len(firstDry.Body)) + 300 })
	if n, err := small.srv.LoadReplays(bytes.NewReader(saved.Bytes())); err != nil || n != 1 {
		t.Errorf("LoadReplays in a budget of one answer: %d, %v; want 1", n, err)
	}
	if r, _ := small.client("").FilterUserWithResponse(ctx, "default", "v", withKey("k-2"), dry); r.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the most recently used answer was not the one kept: %s", r.Body)
	}
	broken := slices.Clone(saved.Bytes())
	broken[3] ^= 1
	if _, err := small.srv.LoadReplays(bytes.NewReader(broken)); err == nil {
		t.Error("LoadReplays took bytes of another form")
	}
	if _, err := small.srv.LoadReplays(bytes.NewReader(saved.Bytes()[:saved.Len()-5])); err == nil {
		t.Error("LoadReplays took a cut file")
	}
}

// A compressed body is refused with an Idempotency-Key as without one, and
// before anything reads it: never inflated (a gzip of 300 KB stands for
// 300 MB, which hashing the body for the key made the server allocate and
// inflate before the route refused it). The refusal is RFC 9110's for a
// content coding the server does not take: 415, with Accept-Encoding
// naming the one it takes, identity.
func TestCompressedBodyWithAnIdempotencyKeyIsNeverInflated(t *testing.T) {
	e := newEnv(t, withKeys)
	gz := bytes.NewBuffer(gzipOfZeros(300))
	for _, path := range []string{userPath("default", "u", "/filter"), "/v1/namespaces/default/filter"} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		status, h, b := e.raw("POST", path, "application/json", gz.Bytes(),
			"Authorization", "Bearer "+writeKey, "Idempotency-Key", "bomb-1", "Content-Encoding", "gzip")
		runtime.ReadMemStats(&after)
		p := wantProblem(t, status, h, b, 415, "unsupported-media-type")
		if len(p.Errors) != 1 || p.Errors[0].Parameter != "Content-Encoding" || h.Get("Accept-Encoding") != "identity" {
			t.Errorf("%s: %+v, Accept-Encoding %q, want the Content-Encoding named and identity accepted", path, p, h.Get("Accept-Encoding"))
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Errorf("%s: the server allocated %d MiB for a body of %d KiB", path, grew>>20, gz.Len()>>10)
		}
	}
}

// gzipOfZeros returns a gzip member that inflates to mib MiB of zeros
// (mib 2 or more), made without compressing them all: compressing 300 MiB
// at the best level took minutes under the race detector. The second MiB
// is compressed after the first, which leaves the window zeros alone, and
// ends on a flush, at a byte: its blocks inflate to a MiB of zeros after
// any MiB of zeros, so they are repeated for the MiBs after it, before the
// end and a trailer (CRC-32 and length) for mib MiB.
func gzipOfZeros(mib int) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zero := make([]byte, 1<<20)
	zw.Write(zero)
	zw.Flush()
	first := b.Len()
	zw.Write(zero)
	zw.Flush()
	second := b.Len()
	zw.Close()
	end := b.Bytes()[second : b.Len()-8] // the last block; the trailer is the 2 MiB's
	out := slices.Clone(b.Bytes()[:second])
	for range mib - 2 {
		out = append(out, b.Bytes()[first:second]...)
	}
	out = append(out, end...)
	crc := uint32(0)
	for range mib {
		crc = crc32.Update(crc, crc32.IEEETable, zero)
	}
	out = binary.LittleEndian.AppendUint32(out, crc)
	return binary.LittleEndian.AppendUint32(out, uint32(mib<<20))
}

// A request is validated before its Idempotency-Key is looked up: a bad
// request gets its own problem (a batch over its users, a bad limit, a
// call over its candidates) whatever key it carries, not 422 for a key
// used before with another body, and leaves the answer kept under the key
// for the retries of the request that made it.
func TestABadRequestGetsItsOwnProblemWhateverIdempotencyKeyItCarries(t *testing.T) {
	e := newEnv(t)
	const batch = "/v1/namespaces/default/filter"
	one := userPath("default", "u", "/filter")
	keyed := func(k string) []string { return []string{"Idempotency-Key", k} }
	status, _, first := e.raw(http.MethodPost, batch, "application/json", []byte(batchOf(1)), keyed("k-batch")...)
	if status != http.StatusOK {
		t.Fatalf("the first batch: %d %s", status, first)
	}
	status, _, firstOne := e.raw(http.MethodPost, one, "application/json", []byte(`{"candidates":["a","b"],"limit":1}`), keyed("k-one")...)
	if status != http.StatusOK {
		t.Fatalf("the first call: %d %s", status, firstOne)
	}
	before := e.stateOf("default", "u")
	for _, tc := range []struct {
		name, path, body, key string
		status                int
		slug                  string
	}{
		{"a batch of too many users", batch, batchOf(api.DefaultMaxBatchUsers + 1), "k-batch", 413, "too-many-users"},
		{"a batch with a bad limit", batch, `{"requests":[{"user":"u","candidates":["c"],"limit":-1}]}`, "k-batch", 400, "bad-request"},
		{"a call with a bad limit", one, `{"candidates":["c"],"limit":-1}`, "k-one", 400, "bad-request"},
		{"a call of too many candidates", one, candidates(api.DefaultMaxCandidates + 1), "k-one", 413, "too-many-candidates"},
		{"a call of malformed JSON", one, `{"candidates":`, "k-one", 400, "invalid-json"},
	} {
		status, h, body := e.raw(http.MethodPost, tc.path, "application/json", []byte(tc.body), keyed(tc.key)...)
		if status != tc.status {
			t.Errorf("%s with a key used before: %d %s, want %d %s", tc.name, status, truncate(body), tc.status, tc.slug)
			continue
		}
		wantProblem(t, status, h, body, tc.status, tc.slug)
	}
	if st := e.stateOf("default", "b5"); st != nil {
		t.Errorf("the refused batch created a user: %v", st)
	}
	if after := e.stateOf("default", "u"); !reflect.DeepEqual(after, before) {
		t.Errorf("the refused requests changed the user:\nbefore %v\nafter  %v", before, after)
	}
	// The answers kept under the keys are given again to their retries.
	for _, tc := range []struct{ path, body, key, want string }{
		{batch, batchOf(1), "k-batch", string(first)},
		{one, `{"candidates":["a","b"],"limit":1}`, "k-one", string(firstOne)},
	} {
		status, h, body := e.raw(http.MethodPost, tc.path, "application/json", []byte(tc.body), keyed(tc.key)...)
		if status != http.StatusOK || string(body) != tc.want || h.Get("Idempotent-Replayed") != "true" {
			t.Errorf("the retry of %s: %d %s (Idempotent-Replayed %q), want %s again", tc.path, status, body,
				h.Get("Idempotent-Replayed"), tc.want)
		}
	}
}

// A call in flight keeps its key however many answers are given meanwhile:
// the budget trims answers given, never a call in flight, whose twin would
// otherwise be served anew and record the next items while the first call
// records its own.
func TestIdempotencyKeyInFlightOutlivesTheBudget(t *testing.T) {
	g := &appendGate{user: "slow", entered: make(chan struct{}, 2), release: make(chan struct{})}
	e := newEnvOver(t, func(s *storage.Store) eviction.Store { g.Store = s; return g },
		func(c *api.Config) { c.IdempotencyBytes = 2 << 10 })
	c := e.client("")
	req := client.FilterRequest{Candidates: []string{"a", "b"}, Limit: ptr(1)}
	first := filterAsync(c, "default", "slow", withKey("k"), req)
	<-g.entered
	// Other callers' keyed calls, more than the budget holds.
	for i := range 20 {
		if r, err := c.FilterUserWithResponse(ctx, "default", fmt.Sprintf("u%d", i), withKey(fmt.Sprintf("other-%d", i)), req); err != nil || r.JSON200 == nil {
			close(g.release)
			t.Fatalf("another call: %v", err)
		}
	}
	twin := filterAsync(c, "default", "slow", withKey("k"), req)
	var tw answer
	select {
	case tw = <-twin: // 409: the first is in flight
		close(g.release)
	case <-time.After(2 * time.Second): // held behind the first (its user is busy)
		close(g.release)
		tw = <-twin
	}
	a := <-first
	if a.err != nil || a.r.JSON200 == nil || !slices.Equal(a.r.JSON200.Unseen, []string{"a"}) {
		t.Fatalf("the first call: %v %d %s", a.err, a.r.StatusCode(), a.r.Body)
	}
	if tw.err != nil || (tw.r.StatusCode() != http.StatusConflict && string(tw.r.Body) != string(a.r.Body)) {
		t.Errorf("the twin of a call in flight, its key's room trimmed: %v %d %s; want 409 or the first answer %s",
			tw.err, tw.r.StatusCode(), tw.r.Body, a.r.Body)
	}
	if got := unseenNow(t, c, "default", "slow", "a", "b"); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("unseen %v, want b alone: the twin recorded again", got)
	}
}

// eraseGate is the real store with the erase and the journal appends of
// one user held until released, once on is set.
type eraseGate struct {
	*storage.Store
	user          string
	on            atomic.Bool
	delEntered    chan struct{}
	delRelease    chan struct{}
	appendEntered chan struct{}
	appendRelease chan struct{}
}

func (g *eraseGate) Delete(ns, user string) error {
	if g.on.Load() && user == g.user {
		g.delEntered <- struct{}{}
		<-g.delRelease
	}
	return g.Store.Delete(ns, user)
}

func (g *eraseGate) Append(ns, user string, value []byte, ttl time.Duration) (uint64, error) {
	if g.on.Load() && user == g.user {
		g.appendEntered <- struct{}{}
		<-g.appendRelease
	}
	return g.Store.Append(ns, user, value, ttl)
}

// A keyed call in flight when its user is erased keeps its answer if it
// makes its call on the user the erase leaves (it waited for the erase to
// load the user): its retry gets that answer and records nothing. Dropped,
// the retry would be served anew and record the next items.
func TestAKeyedCallMadeOnTheUserAnEraseLeavesKeepsItsAnswer(t *testing.T) {
	g := &eraseGate{user: "u", delEntered: make(chan struct{}, 1), delRelease: make(chan struct{}),
		appendEntered: make(chan struct{}, 1), appendRelease: make(chan struct{})}
	e := newEnvOver(t, func(s *storage.Store) eviction.Store { g.Store = s; return g })
	c := e.client("")
	filter(t, c, "default", "u", client.FilterRequest{Candidates: []string{"old"}})
	g.on.Store(true)
	erased := make(chan int, 1)
	go func() {
		status, _, _ := e.raw(http.MethodDelete, userPath("default", "u", ""), "", nil)
		erased <- status
	}()
	<-g.delEntered
	req := client.FilterRequest{Candidates: []string{"a", "b"}, Limit: ptr(1)}
	first := filterAsync(c, "default", "u", withKey("k"), req)
	// The keyed call is begun (in flight) before the erase's load slot goes.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, _, body := e.raw(http.MethodGet, "/v1/stats", "", nil)
		var st struct {
			Kept int `json:"idempotency_kept"`
		}
		json.Unmarshal(body, &st)
		if st.Kept == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the keyed call never began")
		}
	}
	close(g.delRelease)
	<-g.appendEntered // the call records into the user the erase left
	if status := <-erased; status != http.StatusNoContent {
		t.Fatalf("erase: %d", status)
	}
	g.on.Store(false)
	close(g.appendRelease)
	a := <-first
	if a.err != nil || a.r.JSON200 == nil {
		t.Fatalf("the call: %v", a.err)
	}
	r, err := c.FilterUserWithResponse(ctx, "default", "u", withKey("k"), req)
	if err != nil || string(r.Body) != string(a.r.Body) {
		t.Errorf("the retry of a call made on the user an erase left: %v %d %s; want the first answer %s", err, r.StatusCode(), r.Body, a.r.Body)
	}
	if got := unseenNow(t, c, "default", "u", "a", "b"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("unseen %v, want b: the retry recorded again", got)
	}
}

// An answer past its time to live is no longer kept: no retry gets it, and
// it leaves idempotency_kept, idempotency_bytes and the memory they count,
// whether keyed calls go on or not. It stayed, counted, until a call with
// its key or the budget pushed it out: after a burst, the figures kept its
// level for good, answers no retry would get.
func TestAnAnswerPastItsTimeToLiveIsNoLongerKept(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, func(c *api.Config) {
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		c.IdempotencyTTL = time.Minute
	})
	c := e.client("")
	for _, key := range []string{"k-1", "k-2"} {
		if r, err := c.FilterUserWithResponse(ctx, "default", "u", withKey(key), client.FilterRequest{Candidates: []string{key}}); err != nil || r.JSON200 == nil {
			t.Fatalf("%s: %v", key, err)
		}
		mu.Lock()
		now = now.Add(40 * time.Second)
		mu.Unlock()
	}
	// k-1's answer is 80 s old, k-2's 40 s.
	if st := e.srv.Stats(); st.IdempotencyKept != 1 {
		t.Fatalf("%d answers kept, want k-2's only (k-1's is past its time to live)", st.IdempotencyKept)
	}
	mu.Lock()
	now = now.Add(40 * time.Second)
	mu.Unlock()
	if st := e.srv.Stats(); st.IdempotencyKept != 0 || st.IdempotencyBytes != 0 {
		t.Fatalf("%d answers kept in %d bytes, want none: both are past their time to live", st.IdempotencyKept, st.IdempotencyBytes)
	}
}

// flakyLoadStore is the real store whose Load of one user fails while
// armed: a read error that passes, on that user's data only.
type flakyLoadStore struct {
	*storage.Store
	user  string
	armed atomic.Bool
}

func (s *flakyLoadStore) Load(ns, user string) ([]byte, []storage.JournalEntry, error) {
	if user == s.user && s.armed.Load() {
		return nil, nil, fmt.Errorf("flakyLoadStore: cannot read %s", user)
	}
	return s.Store.Load(ns, user)
}

// A keyed batch whose answer holds a user's failure keeps the others'
// results for its retries, but not the failure, which changed nothing (an
// error answer of the one call is not kept either): the retry with the
// same key and body gives the users that were served their first results
// again, recording nothing for them, and serves the failed user anew. Once
// every user is served, the retry is the answer given again whole, across
// a crash too (the answers log).
func TestIdempotencyKeyOfABatchServesItsFailedUsersAnew(t *testing.T) {
	fs := &flakyLoadStore{user: "flaky"}
	e := newEnvOver(t, func(st *storage.Store) eviction.Store { fs.Store = st; return fs })
	dir := t.TempDir()
	if _, err := e.srv.OpenAnswerLog(dir, false, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.srv.CloseAnswerLog(false) })
	fs.armed.Store(true)
	body := []byte(`{"requests":[{"user":"ok","candidates":["a","b","c"],"limit":1},` +
		`{"user":"flaky","candidates":["a","b","c"],"limit":1}]}`)
	send := func(e *env) (client.BatchFilterResponse, bool) {
		t.Helper()
		return sendKeyedBatch(t, e, body, "k-flaky")
	}
	first, _ := send(e)
	if first.Results[0].Unseen == nil || !slices.Equal(*first.Results[0].Unseen, []string{"a"}) ||
		first.Results[1].Error == nil || first.Results[1].Error.Type != api.ProblemBase+"storage-unavailable" {
		t.Fatalf("the first batch: %+v, want a for ok and flaky's storage-unavailable", first.Results)
	}
	fs.armed.Store(false) // the store reads flaky's data again
	retry, replayed := send(e)
	if retry.Results[0].Unseen == nil || !slices.Equal(*retry.Results[0].Unseen, []string{"a"}) {
		t.Fatalf("the retry gave ok %+v, want its first answer (a) again", retry.Results[0])
	}
	if retry.Results[1].Error != nil || retry.Results[1].Unseen == nil || !slices.Equal(*retry.Results[1].Unseen, []string{"a"}) {
		t.Fatalf("the retry gave flaky %+v, want it served anew now that its data reads (a)", retry.Results[1])
	}
	if replayed {
		t.Errorf("the retry that served a user anew says Idempotent-Replayed: true")
	}
	c := e.client("")
	if got := unseenNow(t, c, "default", "ok", "a", "b", "c"); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("ok's unseen after the retry: %v, want b c (the retry recorded nothing for ok)", got)
	}
	again, replayed := send(e)
	if !replayed || !reflect.DeepEqual(again, retry) {
		t.Fatalf("the next retry: %+v (replayed %v), want the retry's answer given again whole", again.Results, replayed)
	}
	api.AnswersLogged(t, e.srv)
	// A crash: another server reads the log back.
	after := newEnv(t)
	if _, err := after.srv.OpenAnswerLog(dir, false, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { after.srv.CloseAnswerLog(true) })
	if got, replayed := send(after); !replayed || !reflect.DeepEqual(got, retry) {
		gotJSON, _ := json.Marshal(got)
		wantJSON, _ := json.Marshal(retry)
		t.Fatalf("after a crash, the retry: %s (replayed %v), want the last answer %s given again whole", gotJSON, replayed, wantJSON)
	}
}

// The answer a batch's retry keeps once it served its failed users anew
// gives the others' first results again: it lives no longer than the first
// answer, whose time to live counts from when it was given, in memory and
// across a crash (the answers log). Kept as a new answer, those results
// were given again for a whole time to live after the retry: past the
// first answer's, a retry recorded nothing and got them again. A retry
// that gives no first result again (every user had failed) is a new
// answer, and lives its whole time to live.
func TestABatchsRetryKeepsItsFirstAnswersAge(t *testing.T) {
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	withClock := func(c *api.Config) { c.Now, c.IdempotencyTTL = clock, time.Minute }
	fs := &flakyLoadStore{user: "flaky"}
	e := newEnvOver(t, func(st *storage.Store) eviction.Store { fs.Store = st; return fs }, withClock)
	dir := t.TempDir()
	if _, err := e.srv.OpenAnswerLog(dir, false, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.srv.CloseAnswerLog(false) })
	// One user fails (key), or both (allKey).
	body := []byte(`{"requests":[{"user":"ok","candidates":["a","b","c"],"limit":1},` +
		`{"user":"flaky","candidates":["a","b","c"],"limit":1}]}`)
	allBody := []byte(`{"requests":[{"user":"flaky","candidates":["p","q","r"],"limit":1},` +
		`{"user":"flaky","candidates":["p","q","r"],"limit":1}]}`)
	const key, allKey = "k-age", "k-all-failed"
	fs.armed.Store(true)
	if first, _ := sendKeyedBatch(t, e, body, key); first.Results[0].Error != nil || first.Results[1].Error == nil {
		t.Fatalf("the first batch: %s, want ok served and flaky's failure", resultsJSON(first))
	}
	if first, _ := sendKeyedBatch(t, e, allBody, allKey); first.Results[0].Error == nil || first.Results[1].Error == nil {
		t.Fatalf("the first batch of flaky alone: %s, want its failures", resultsJSON(first))
	}
	fs.armed.Store(false)
	offset.Store(int64(40 * time.Second))
	retry, _ := sendKeyedBatch(t, e, body, key)
	if retry.Results[1].Error != nil {
		t.Fatalf("the retry 40 s on: %s, want flaky served", resultsJSON(retry))
	}
	allRetry, _ := sendKeyedBatch(t, e, allBody, allKey)
	if allRetry.Results[0].Error != nil || allRetry.Results[1].Error != nil {
		t.Fatalf("the retry of flaky alone 40 s on: %s, want flaky served", resultsJSON(allRetry))
	}
	offset.Store(int64(50 * time.Second))
	if again, replayed := sendKeyedBatch(t, e, body, key); !replayed || !reflect.DeepEqual(again, retry) {
		t.Fatalf("50 s on: %s (replayed %v), want the retry's answer %s given again", resultsJSON(again), replayed, resultsJSON(retry))
	}
	api.AnswersLogged(t, e.srv)

	// 61 s after the first answers, 21 s after the retries.
	offset.Store(int64(61 * time.Second))
	after := newEnv(t, withClock) // a crash: another server reads the log back
	if _, err := after.srv.OpenAnswerLog(dir, false, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { after.srv.CloseAnswerLog(true) })
	if got, replayed := sendKeyedBatch(t, after, body, key); replayed {
		t.Errorf("after a crash, 61 s after the first answer: %s given again, past the first answer's minute", resultsJSON(got))
	}
	if got, replayed := sendKeyedBatch(t, after, allBody, allKey); !replayed || !reflect.DeepEqual(got, allRetry) {
		t.Errorf("after a crash, 21 s after the retry that served every user anew: %s (replayed %v), want %s given again",
			resultsJSON(got), replayed, resultsJSON(allRetry))
	}
	got, replayed := sendKeyedBatch(t, e, body, key)
	if replayed || got.Results[0].Unseen == nil || !slices.Equal(*got.Results[0].Unseen, []string{"b"}) {
		t.Errorf("61 s after the first answer: %s (replayed %v), want the batch served anew (b for ok), past the first answer's minute", resultsJSON(got), replayed)
	}
	if got, replayed := sendKeyedBatch(t, e, allBody, allKey); !replayed || !reflect.DeepEqual(got, allRetry) {
		t.Errorf("21 s after the retry that served every user anew: %s (replayed %v), want %s given again",
			resultsJSON(got), replayed, resultsJSON(allRetry))
	}
}

// An answer degraded by on_error open changed nothing (the store failed:
// nothing was tested or recorded), so it is not what a retry should get
// once the store recovers: the one call's is not kept, as an error answer
// is not, and a batch's degraded user is served anew by its retry, as a
// failed one, in memory and after a crash (the answers log).
func TestIdempotencyKeyOfADegradedAnswerIsServedAnew(t *testing.T) {
	// flakyEnv is a server whose store cannot read the user flaky while
	// armed, with its answers log in dir.
	flakyEnv := func(dir string) (*env, *flakyLoadStore) {
		fs := &flakyLoadStore{user: "flaky"}
		e := newEnvOver(t, func(st *storage.Store) eviction.Store { fs.Store = st; return fs })
		if _, err := e.srv.OpenAnswerLog(dir, false, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.srv.CloseAnswerLog(false) })
		return e, fs
	}

	// The one call.
	e, fs := flakyEnv(t.TempDir())
	const one = "/v1/namespaces/default/users/flaky/filter"
	oneBody := []byte(`{"candidates":["a","b","c"],"limit":1,"on_error":"open"}`)
	fs.armed.Store(true)
	status, _, b := e.raw(http.MethodPost, one, "application/json", oneBody, api.HeaderIdempotencyKey, "k-one")
	if status != http.StatusOK || !strings.Contains(string(b), `"degraded":true`) {
		t.Fatalf("the first call: %d %s, want a degraded answer", status, b)
	}
	fs.armed.Store(false)
	status, h, b := e.raw(http.MethodPost, one, "application/json", oneBody, api.HeaderIdempotencyKey, "k-one")
	if status != http.StatusOK || h.Get(api.HeaderReplayed) == "true" || strings.Contains(string(b), "degraded") ||
		!strings.Contains(string(b), `"recorded":1`) {
		t.Fatalf("the retry once the store reads: %d %s (replayed %q), want the call served anew, recording a", status, b, h.Get(api.HeaderReplayed))
	}
	if got := unseenNow(t, e.client(""), "default", "flaky", "a", "b", "c"); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("flaky's unseen after the retry: %v, want b c", got)
	}

	// The batch, in memory and after a crash.
	body := []byte(`{"requests":[{"user":"ok","candidates":["a","b","c"],"limit":1,"on_error":"open"},` +
		`{"user":"flaky","candidates":["x","y","z"],"limit":1,"on_error":"open"}]}`)
	send := func(e *env) (client.BatchFilterResponse, bool) {
		t.Helper()
		return sendKeyedBatch(t, e, body, "k-batch")
	}
	degraded := func(r client.BatchFilterResult) bool { return r.Degraded != nil && *r.Degraded }
	for _, crash := range []bool{false, true} {
		dir := t.TempDir()
		e, fs := flakyEnv(dir)
		fs.armed.Store(true)
		first, _ := send(e)
		if degraded(first.Results[0]) || !degraded(first.Results[1]) {
			t.Fatalf("the first batch: %+v, want ok served and flaky degraded", first.Results)
		}
		fs.armed.Store(false)
		if crash {
			api.AnswersLogged(t, e.srv) // the answer is in the log's file
			e, _ = flakyEnv(dir)
		}
		retry, replayed := send(e)
		if !reflect.DeepEqual(retry.Results[0], first.Results[0]) {
			t.Errorf("crash %v: the retry gave ok %+v, want its first result again", crash, retry.Results[0])
		}
		if degraded(retry.Results[1]) || retry.Results[1].Recorded == nil || *retry.Results[1].Recorded != 1 {
			t.Errorf("crash %v: the retry gave flaky %+v, want it served anew now that its data reads", crash, retry.Results[1])
		}
		if replayed {
			t.Errorf("crash %v: the retry that served a user anew says Idempotent-Replayed: true", crash)
		}
	}
}

// sendKeyedBatch sends body, a batch of two users, to e's namespace
// default with the Idempotency-Key key, and returns its answer and whether
// it was given again.
func sendKeyedBatch(t *testing.T, e *env, body []byte, key string) (client.BatchFilterResponse, bool) {
	t.Helper()
	status, h, b := e.raw(http.MethodPost, "/v1/namespaces/default/filter", "application/json", body, api.HeaderIdempotencyKey, key)
	var out client.BatchFilterResponse
	if status != http.StatusOK || json.Unmarshal(b, &out) != nil || len(out.Results) != 2 {
		t.Fatalf("the keyed batch: %d %s", status, b)
	}
	return out, h.Get(api.HeaderReplayed) == "true"
}

// resultsJSON is a batch's answer as JSON, for a test's message.
func resultsJSON(r client.BatchFilterResponse) string {
	b, _ := json.Marshal(r)
	return string(b)
}
