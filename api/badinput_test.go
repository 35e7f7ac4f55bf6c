package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/client"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
	"github.com/seenapi/seenapi/web"
)

func candidates(n int) string {
	var b strings.Builder
	b.WriteString(`{"candidates":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"i:%d"`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

func batchOf(n int) string {
	var b strings.Builder
	b.WriteString(`{"requests":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"user":"b%d","candidates":["a"]}`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// TestBadInputIsRejectedAndChangesNothing sends every kind of bad input and
// asserts the status, the problem type and its content type, and that
// neither the existing user nor a new one changed.
func TestBadInputIsRejectedAndChangesNothing(t *testing.T) {
	e := newEnv(t, func(c *api.Config) {
		c.MaxBodyBytes = 128 << 10
		c.MaxImportBytes = 256 << 10
	})
	c := e.client("")
	filter(t, c, "default", "victim", client.FilterRequest{Candidates: []string{"a", "b", "c"}})
	before := e.stateOf("default", "victim")
	if before == nil {
		t.Fatal("victim has no state")
	}

	const (
		victim   = "/v1/namespaces/default/users/victim"
		vFilter  = victim + "/filter"
		newcomer = "/v1/namespaces/default/users/newcomer"
		batch    = "/v1/namespaces/default/filter"
	)
	long := strings.Repeat("x", api.DefaultMaxItemBytes+1)
	// A Bloom filter of one item whose first layer is sized for a million:
	// a few dozen bytes encoded (60), 1.9 MB of bits once decoded, over the
	// 256 KiB this server imports. (A staged or compact filter's newest
	// layer grows with its items, so it cannot be made that wide.)
	wide, err := userfilter.New(userfilter.Profile{Kind: userfilter.KindBloom, FPRate: 0.01, InitialCapacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	wide.Add([]string{"a"}, time.Now())
	wideBytes, err := wide.MarshalBinary()
	if err != nil || len(wideBytes) > 1<<10 || wide.Stats(time.Now()).Bits <= 8*256<<10 {
		t.Fatalf("the wide filter: %d bytes, %d bits, %v", len(wideBytes), wide.Stats(time.Now()).Bits, err)
	}
	// An export of other items: imported into the victim, merged or not,
	// it would change it.
	other, err := userfilter.New(userfilter.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	other.Add([]string{"x", "y"}, time.Now())
	otherBytes, err := other.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		method string
		path   string
		body   string
		header []string
		status int
		typ    string
	}{
		{"malformed JSON", "POST", vFilter, `{"candidates":`, nil, 400, "invalid-json"},
		{"empty body", "POST", vFilter, ``, nil, 400, "invalid-json"},
		{"not JSON", "POST", vFilter, `candidates=a`, nil, 400, "invalid-json"},
		{"a byte order mark", "POST", vFilter, "\xef\xbb\xbf" + `{"candidates":["a"]}`, nil, 400, "invalid-json"},
		{"a trailing comma", "POST", vFilter, `{"candidates":["a",]}`, nil, 400, "invalid-json"},
		{"a bad last byte", "POST", vFilter, `{"candidates":["a",}`, nil, 400, "invalid-json"},
		{"trailing data", "POST", vFilter, `{"candidates":["a"]} {}`, nil, 400, "invalid-json"},
		{"array body", "POST", vFilter, `["a"]`, nil, 400, "bad-request"},
		{"null body", "POST", vFilter, `null`, nil, 400, "bad-request"},
		{"candidates a string", "POST", vFilter, `{"candidates":"a"}`, nil, 400, "bad-request"},
		{"candidates numbers", "POST", vFilter, `{"candidates":[1,2]}`, nil, 400, "bad-request"},
		{"candidates null items", "POST", vFilter, `{"candidates":[null]}`, nil, 400, "bad-request"},
		{"limit a string", "POST", vFilter, `{"candidates":["a"],"limit":"5"}`, nil, 400, "bad-request"},
		// No member is nullable in openapi.yaml: a null is not taken for
		// the member's default (no limit, record returned, on_error fail).
		{"limit null", "POST", vFilter, `{"candidates":["z"],"limit":null}`, nil, 400, "bad-request"},
		{"record null", "POST", vFilter, `{"candidates":["z"],"record":null}`, nil, 400, "bad-request"},
		{"on_error null", "POST", vFilter, `{"candidates":["z"],"on_error":null}`, nil, 400, "bad-request"},
		{"candidates null", "POST", vFilter, `{"candidates":null}`, nil, 400, "bad-request"},
		{"items null", "POST", newcomer + "/seen", `{"items":null}`, nil, 400, "bad-request"},
		{"batch limit null", "POST", batch, `{"requests":[{"user":"newcomer","candidates":["a"]},{"user":"victim","candidates":["z"],"limit":null}]}`, nil, 400, "bad-request"},
		{"batch record null", "POST", batch, `{"requests":[{"user":"newcomer","candidates":["a"]},{"user":"victim","candidates":["z"],"record":null}]}`, nil, 400, "bad-request"},
		{"batch on_error null", "POST", batch, `{"requests":[{"user":"newcomer","candidates":["a"]},{"user":"victim","candidates":["z"],"on_error":null}]}`, nil, 400, "bad-request"},
		{"batch user null", "POST", batch, `{"requests":[{"user":"newcomer","candidates":["a"]},{"user":null,"candidates":["z"]}]}`, nil, 400, "bad-request"},
		{"batch requests null", "POST", batch, `{"requests":null}`, nil, 400, "bad-request"},
		{"batch candidates null", "POST", batch, `{"requests":[{"user":"newcomer","candidates":["a"]},{"user":"victim","candidates":null}]}`, nil, 400, "bad-request"},
		{"batch request null", "POST", batch, `{"requests":[{"user":"newcomer","candidates":["a"]},null]}`, nil, 400, "bad-request"},
		{"limit a fraction", "POST", vFilter, `{"candidates":["a"],"limit":2.5}`, nil, 400, "bad-request"},
		{"limit negative", "POST", vFilter, `{"candidates":["a"],"limit":-1}`, nil, 400, "bad-request"},
		{"limit huge", "POST", vFilter, `{"candidates":["a"],"limit":1e30}`, nil, 400, "bad-request"},
		{"limit with a point", "POST", vFilter, `{"candidates":["a"],"limit":2.0}`, nil, 400, "bad-request"},
		{"limit with an exponent", "POST", vFilter, `{"candidates":["a"],"limit":1e2}`, nil, 400, "bad-request"},
		{"limit hugely negative", "POST", vFilter, `{"candidates":["a"],"limit":-1e30}`, nil, 400, "bad-request"},
		{"limit just past its range", "POST", vFilter, `{"candidates":["a"],"limit":9223372036854775808}`, nil, 400, "bad-request"},
		// A problem quotes the start of what it names, not all of it: a
		// body of 100,000 digits is not sent back twice.
		{"limit of 100,000 digits", "POST", vFilter, `{"candidates":["a"],"limit":1` + strings.Repeat("0", 99999) + `}`, nil, 400, "bad-request"},
		{"an unknown field of 100,000 bytes", "POST", vFilter, `{"candidates":["a"],"` + strings.Repeat("x", 100000) + `":1}`, nil, 400, "bad-request"},
		{"bad record mode", "POST", vFilter, `{"candidates":["a"],"record":"some"}`, nil, 400, "bad-request"},
		{"record not a string", "POST", vFilter, `{"candidates":["a"],"record":1}`, nil, 400, "bad-request"},
		{"bad on_error", "POST", vFilter, `{"candidates":["a"],"on_error":"ignore"}`, nil, 400, "bad-request"},
		{"unknown field", "POST", vFilter, `{"candidates":["a"],"candidate":["b"]}`, nil, 400, "bad-request"},
		{"field name in other case", "POST", vFilter, `{"Candidates":["a"]}`, nil, 400, "bad-request"},
		{"no candidates", "POST", vFilter, `{}`, nil, 400, "bad-request"},
		{"empty candidates", "POST", vFilter, `{"candidates":[]}`, nil, 400, "bad-request"},
		{"too many candidates", "POST", vFilter, candidates(api.DefaultMaxCandidates + 1), nil, 413, "too-many-candidates"},
		{"item too long", "POST", vFilter, `{"candidates":["a","` + long + `"]}`, nil, 400, "item-too-long"},
		{"empty item", "POST", vFilter, `{"candidates":["a",""]}`, nil, 400, "bad-request"},
		{"item with NUL", "POST", vFilter, `{"candidates":["a\u0000b"]}`, nil, 400, "bad-request"},
		{"item with control character", "POST", vFilter, `{"candidates":["a\u0007"]}`, nil, 400, "bad-request"},
		{"item with C1 control", "POST", vFilter, `{"candidates":["a\u0085"]}`, nil, 400, "bad-request"},
		{"item not UTF-8", "POST", vFilter, "{\"candidates\":[\"a\xff\xfe\"]}", nil, 400, "bad-request"},
		{"item an escaped lone surrogate", "POST", vFilter, `{"candidates":["a","\ud800"]}`, nil, 400, "bad-request"},
		{"body too large", "POST", vFilter, `{"candidates":["` + strings.Repeat("y", 200<<10) + `"]}`, nil, 413, "body-too-large"},
		{"body over every limit", "POST", vFilter, `{"candidates":["` + strings.Repeat("y", 300<<10) + `"]}`, nil, 413, "body-too-large"},
		{"import over every limit", "PUT", victim + "/export", strings.Repeat("y", 300<<10), nil, 413, "body-too-large"},
		// Any route refuses a body over the limit, one that takes no body
		// too: its default response in openapi.yaml names the type.
		{"body too large to a probe", "GET", "/healthz", strings.Repeat("y", 200<<10), nil, 413, "body-too-large"},
		{"compressed body", "POST", vFilter, `{"candidates":["a"]}`, []string{"Content-Encoding", "gzip"}, 415, "unsupported-media-type"},
		{"compressed import", "PUT", victim + "/export", "x", []string{"Content-Encoding", "br"}, 415, "unsupported-media-type"},
		{"user id too long", "POST", "/v1/namespaces/default/users/" + strings.Repeat("u", api.DefaultMaxUserBytes+1) + "/filter", `{"candidates":["a"]}`, nil, 400, "bad-request"},
		{"user id with control character", "POST", "/v1/namespaces/default/users/new%01comer/filter", `{"candidates":["a"]}`, nil, 400, "bad-request"},
		{"user id binary", "POST", "/v1/namespaces/default/users/%FF%FEnew/filter", `{"candidates":["a"]}`, nil, 400, "bad-request"},
		{"user id badly escaped", "POST", "/v1/namespaces/default/users/new%zzcomer/filter", `{"candidates":["a"]}`, nil, 400, "bad-request"},
		{"user id dot-dot", "POST", "/v1/namespaces/default/users/%2E%2E/filter", `{"candidates":["a"]}`, nil, 400, "bad-request"},
		{"unknown namespace", "POST", "/v1/namespaces/nope/users/victim/filter", `{"candidates":["a"]}`, nil, 404, "unknown-namespace"},
		{"bad namespace name", "POST", "/v1/namespaces/Default/users/victim/filter", `{"candidates":["a"]}`, nil, 400, "bad-request"},
		{"seen without items", "POST", victim + "/seen", `{"items":[]}`, nil, 400, "bad-request"},
		{"seen with candidates", "POST", victim + "/seen", `{"candidates":["z"]}`, nil, 400, "bad-request"},
		{"seen item too long", "POST", newcomer + "/seen", `{"items":["` + long + `"]}`, nil, 400, "item-too-long"},
		{"check too many", "POST", victim + "/check", strings.Replace(candidates(api.DefaultMaxCandidates+1), "candidates", "items", 1), nil, 413, "too-many-candidates"},
		{"forget items malformed", "DELETE", victim + "/items", `{"items":`, nil, 400, "invalid-json"},
		{"import bad mode", "PUT", victim + "/export?mode=overwrite", "x", nil, 400, "bad-request"},
		// A query parameter the route does not take is refused, not served
		// as if absent: a misspelt ?mode=replace would merge.
		{"import misspelt mode", "PUT", victim + "/export?mod=replace", string(otherBytes), nil, 400, "bad-request"},
		// Nor is one given twice served with either.
		{"import mode given twice", "PUT", victim + "/export?mode=merge&mode=replace", string(otherBytes), nil, 400, "bad-request"},
		{"users page limit given twice", "GET", "/v1/namespaces/default/users?limit=1&limit=2", "", nil, 400, "bad-request"},
		// .../users/newcomer/ is not newcomer: an unescaped id ending in
		// "/" finds no route rather than another user.
		{"trailing slash", "POST", newcomer + "/seen/", `{"items":["z"]}`, nil, 404, "not-found"},
		{"user path with a trailing slash", "PUT", victim + "/export/", string(otherBytes), nil, 404, "not-found"},
		{"import unknown query parameter", "PUT", newcomer + "/export?mode=replace&force=1", string(otherBytes), nil, 400, "bad-request"},
		{"seen misspelt bulk", "POST", victim + "/seen?buk=true", `{"items":["z"]}`, nil, 400, "bad-request"},
		{"query parameter of a route without any", "POST", vFilter + "?limit=5", `{"candidates":["a","z"]}`, nil, 400, "bad-request"},
		{"query parameter of another route", "POST", newcomer + "/seen?mode=replace", `{"items":["z"]}`, nil, 400, "bad-request"},
		{"batch with a query parameter", "POST", batch + "?on_error=open", `{"requests":[{"user":"newcomer","candidates":["a"]}]}`, nil, 400, "bad-request"},
		{"import empty", "PUT", victim + "/export", "", nil, 400, "bad-import"},
		{"import garbage", "PUT", victim + "/export", "garbage bytes", nil, 400, "bad-import"},
		{"import of a filter too large once decoded", "PUT", victim + "/export", string(wideBytes), nil, 413, "body-too-large"},
		{"stats of unknown namespace", "GET", "/v1/namespaces/nope/users/victim", "", nil, 404, "unknown-namespace"},
		{"batch empty", "POST", batch, `{"requests":[]}`, nil, 400, "bad-request"},
		{"batch not a list", "POST", batch, `{"requests":{}}`, nil, 400, "bad-request"},
		{"batch too many users", "POST", batch, batchOf(api.DefaultMaxBatchUsers + 1), nil, 413, "too-many-users"},
		{"batch with one bad limit", "POST", batch, `{"requests":[{"user":"newcomer","candidates":["a"]},{"user":"victim","candidates":["z"],"limit":-2}]}`, nil, 400, "bad-request"},
		{"batch with one bad user", "POST", batch, `{"requests":[{"user":"newcomer","candidates":["a"]},{"user":"","candidates":["z"]}]}`, nil, 400, "bad-request"},
		{"batch with unknown field", "POST", batch, `{"requests":[{"user":"newcomer","candidates":["a"],"x":1}]}`, nil, 400, "bad-request"},
		{"batch item too long", "POST", batch, `{"requests":[{"user":"newcomer","candidates":["a"]},{"user":"victim","candidates":["` + long + `"]}]}`, nil, 400, "item-too-long"},
		{"batch unknown namespace", "POST", "/v1/namespaces/nope/filter", `{"requests":[{"user":"victim","candidates":["z"]}]}`, nil, 404, "unknown-namespace"},
	}
	// The limits on counts name the count sent and the limit, alike.
	details := map[string]string{
		// Invalid JSON says what and where (the byte counted from 1).
		"malformed JSON":    "the body is not valid JSON: unexpected end of JSON input: it ends after byte 14",
		"not JSON":          "the body is not valid JSON: invalid character 'c' looking for beginning of value (at byte 1)",
		"a byte order mark": "the body is not valid JSON: it starts with a byte order mark (EF BB BF), which JSON does not take",
		// null is named for what it is, not as a member missing.
		"null body":             "the body is null; it must be a JSON object",
		"candidates null items": "item /candidates/0 is empty or null",
		"limit null":            "/limit is null; leave the member out for its default, or give it a value",
		"record null":           "/record is null; leave the member out for its default, or give it a value",
		"on_error null":         "/on_error is null; leave the member out for its default, or give it a value",
		"batch limit null":      "/requests/1/limit is null; leave the member out for its default, or give it a value",
		"batch record null":     "/requests/1/record is null; leave the member out for its default, or give it a value",
		"batch on_error null":   "/requests/1/on_error is null; leave the member out for its default, or give it a value",
		// A required member has no default to leave it out for.
		"candidates null":       "/candidates is null; the member is required: give it a value",
		"items null":            "/items is null; the member is required: give it a value",
		"batch user null":       "/requests/1/user is null; the member is required: give it a value",
		"batch requests null":   "/requests is null; the member is required: give it a value",
		"batch candidates null": "/requests/1/candidates is null; the member is required: give it a value",
		"batch request null":    "/requests/1 is null; each request is an object with a user and its candidates",
		"a trailing comma":      "the body is not valid JSON: invalid character ']' looking for beginning of value (at byte 20)",
		"a bad last byte":       "the body is not valid JSON: invalid character '}' looking for beginning of value (at byte 20)",
		"too many candidates":   fmt.Sprintf("%d items; at most %d per call", api.DefaultMaxCandidates+1, api.DefaultMaxCandidates),
		"batch too many users":  fmt.Sprintf("%d users; at most %d per batch", api.DefaultMaxBatchUsers+1, api.DefaultMaxBatchUsers),
		// So do the body's limits, whether the route's check or fiber's
		// (over every route's limit, before routing) refuses it.
		"body too large":          fmt.Sprintf("the body is %d bytes; at most %d", 200<<10+19, 128<<10),
		"body over every limit":   fmt.Sprintf("the body is %d bytes; at most %d", 300<<10+19, 128<<10),
		"import over every limit": fmt.Sprintf("the body is %d bytes; at most %d", 300<<10, 256<<10),
		// A value of the wrong kind says the kind wanted, and a whole
		// number out of range says so, not "in range" of an unnamed one.
		"limit a string":   "/limit is a JSON string; want an integer",
		"limit a fraction": "/limit is a JSON number 2.5; want an integer",
		"limit huge":       "/limit is a JSON number 1e30; want an integer; this one is too large",
		// A whole number in range, written with a point or an exponent (as
		// Python's json.dumps writes a float), is not too large: it is
		// refused for how it is written.
		"limit with a point":                "/limit is a JSON number 2.0; want an integer, written without a point or an exponent",
		"limit with an exponent":            "/limit is a JSON number 1e2; want an integer, written without a point or an exponent",
		"limit hugely negative":             "/limit is a JSON number -1e30; want an integer; this one is too small",
		"limit just past its range":         "/limit is a JSON number 9223372036854775808; want an integer; this one is too large",
		"limit of 100,000 digits":           "/limit is a JSON number 1" + strings.Repeat("0", 39) + "… (100000 characters); want an integer; this one is too large",
		"an unknown field of 100,000 bytes": "/" + strings.Repeat("x", 39) + "… (100001 characters) is an unknown field",
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body, err := e.rawErr(tc.method, tc.path, "application/json", []byte(tc.body), tc.header...)
			if err != nil && (tc.status == 413 && strings.HasPrefix(tc.typ, "body-too-large")) && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
				// A body over the server's own limit is refused (413) and
				// the connection closed before the rest is read; the
				// kernel may reset it before the client reads the 413.
				// Either way nothing was stored, which is checked below.
				t.Logf("connection reset instead of the 413: %v", err)
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if status != tc.status {
					t.Fatalf("status %d, want %d: %s", status, tc.status, truncate(body))
				}
				p := problem(t, status, h, body)
				if p.Type != api.ProblemBase+tc.typ {
					t.Fatalf("problem type %s, want %s: %s", p.Type, tc.typ, p.Detail)
				}
				if d, ok := details[tc.name]; ok && p.Detail != d {
					t.Fatalf("detail %q, want %q", p.Detail, d)
				}
			}
			if after := e.stateOf("default", "victim"); !reflect.DeepEqual(after, before) {
				t.Fatalf("the victim changed:\nbefore %v\nafter  %v", before, after)
			}
			if st := e.stateOf("default", "newcomer"); st != nil {
				t.Fatalf("a rejected request created a user: %v", st)
			}
		})
	}
}

// A body over its route's limit is refused from its header, before any of
// it is sent: the limit is the route's (--max-body-bytes), not the largest
// any route takes (--max-import-bytes), and neither the key nor the route
// is checked first, so a caller without a key cannot make the server read
// and hold an import's worth of bytes on any route.
func TestBodyOverItsRouteLimitIsRefusedBeforeItIsRead(t *testing.T) {
	e := newEnv(t, withKeys, func(c *api.Config) {
		c.MaxBodyBytes = 64 << 10
		c.MaxImportBytes = 32 << 20
	})
	addr := strings.TrimPrefix(e.base, "http://")
	for _, tc := range []struct {
		name, method, path string
		size, limit        int
		header             string
	}{
		{"one call, no key", "POST", "/v1/namespaces/default/users/u/filter", 1 << 20, 64 << 10, ""},
		{"a route of no body", "POST", "/healthz", 1 << 20, 64 << 10, ""},
		{"an import over its own limit", "PUT", "/v1/namespaces/default/users/u/export?mode=replace", 33 << 20, 32 << 20, ""},
		// Only the import's own path takes the import's limit.
		{"a made-up path ending in /export", "PUT", "/foo/export", 1 << 20, 64 << 10, ""},
		// A client that waits for "100 Continue" gets the 413 instead,
		// and never sends the body.
		{"one call expecting 100 Continue", "POST", "/v1/namespaces/default/users/u/filter", 1 << 20, 64 << 10, "Expect: 100-continue\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// The header only: a server waiting for the body never answers.
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n",
				tc.method, tc.path, addr, tc.size, tc.header)
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer before the body was sent: %v", err)
			}
			body := readAll(t, resp)
			p := wantProblem(t, resp.StatusCode, resp.Header, body, 413, "body-too-large")
			if want := fmt.Sprintf("the body is %d bytes; at most %d", tc.size, tc.limit); p.Detail != want {
				t.Fatalf("detail %q, want %q", p.Detail, want)
			}
		})
	}
}

// An import's body may be as large as --max-import-bytes only for a key
// that may import there: without one the import is held to
// --max-body-bytes like any route, and a body over that is answered with
// the key's problem (401, 403) from its header, before any of it is sent.
// Otherwise a caller without a key could make the server read and hold an
// import's worth of bytes on each of its connections.
func TestImportWithoutAnAdminKeyIsRefusedBeforeItsBodyIsRead(t *testing.T) {
	e := newEnv(t, func(c *api.Config) {
		c.Keys = append(slices.Clone(testKeys), api.Key{Role: api.RoleAdmin, Secret: "admin-of-bloom-0123456789", Namespaces: []string{"bloom"}})
		c.MaxBodyBytes = 64 << 10
		c.MaxImportBytes = 32 << 20
	})
	addr := strings.TrimPrefix(e.base, "http://")
	const size = 8 << 20 // under the import's limit, over the body's
	for _, tc := range []struct {
		name, auth string
		status     int
		slug       string
	}{
		{"no key", "", 401, "unauthorized"},
		{"an unknown key", "Authorization: Bearer not-a-key-0123456789abcdef\r\n", 401, "unauthorized"},
		{"a read key", "Authorization: Bearer " + readKey + "\r\n", 403, "forbidden"},
		{"a write key", "Authorization: Bearer " + writeKey + "\r\n", 403, "forbidden"},
		{"an admin key of another namespace", "Authorization: Bearer admin-of-bloom-0123456789\r\n", 403, "forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// The header only: a server waiting for the body never answers.
			fmt.Fprintf(conn, "PUT /v1/namespaces/default/users/u/export?mode=replace HTTP/1.1\r\nHost: %s\r\n"+
				"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n%s\r\n", addr, size, tc.auth)
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer before the body was sent: %v", err)
			}
			wantProblem(t, resp.StatusCode, resp.Header, readAll(t, resp), tc.status, tc.slug)
		})
	}
	// An admin key still imports up to the import's limit: the server waits
	// for such a body, and reads it.
	t.Run("an admin key", func(t *testing.T) {
		body := bytes.Repeat([]byte{0xff}, size)
		status, h, b := e.raw("PUT", "/v1/namespaces/default/users/u/export?mode=replace", "application/octet-stream", body,
			"Authorization", "Bearer "+adminKey)
		p := wantProblem(t, status, h, b, 400, "bad-import") // read whole, then refused for what it holds
		// The detail speaks of the filter, not of the server's packages.
		if !strings.Contains(p.Detail, "not a filter exported by seenapi") || strings.Contains(p.Detail, "userfilter") {
			t.Fatalf("detail %q", p.Detail)
		}
	})
}

// On a service with keys, a request to the API with a body past a few KiB
// and no known key is answered 401 from its header, before its body is
// read: fasthttp allocates the whole Content-Length as soon as it reads
// the header, so a header of a hundred bytes held a megabyte of the
// server's memory until the read timeout, on as many connections as a
// client without a key cared to open.
func TestRequestWithoutAKnownKeyIsRefusedBeforeItsBodyIsRead(t *testing.T) {
	e := newEnv(t, withKeys)
	addr := strings.TrimPrefix(e.base, "http://")
	const size = 512 << 10 // under --max-body-bytes
	for _, tc := range []struct{ name, header string }{
		{"no key", ""},
		{"an unknown key", "Authorization: Bearer not-a-key-0123456789abcdef\r\n"},
		{"chunked, no key", "Transfer-Encoding: chunked\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			length := fmt.Sprintf("Content-Length: %d\r\n", size)
			if strings.Contains(tc.header, "chunked") {
				length = ""
			}
			fmt.Fprintf(conn, "POST /v1/namespaces/default/users/u/seen HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s%s\r\n",
				addr, length, tc.header)
			if length == "" { // a first chunk past the few KiB, and no end
				fmt.Fprintf(conn, "%x\r\n%s\r\n", 16<<10, strings.Repeat(" ", 16<<10))
			}
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer before the body was sent: %v", err)
			}
			wantProblem(t, resp.StatusCode, resp.Header, readAll(t, resp), 401, "unauthorized")
		})
	}
	// A small body without a key is answered so too; one with a key is
	// read whole up to the route's limit.
	status, h, b := e.raw("POST", userPath("default", "u", "/seen"), "application/json", []byte(`{"items":["x"]}`))
	wantProblem(t, status, h, b, 401, "unauthorized")
	items := strings.Repeat(`"item-0123456789",`, 10000)
	body := []byte(`{"items":[` + items[:len(items)-1] + `]}`)
	if status, _, b := e.raw("POST", userPath("default", "u", "/seen"), "application/json", body,
		"Authorization", "Bearer "+writeKey); status != 200 {
		t.Fatalf("a body of %d KiB with a key: %d %s", len(body)>>10, status, truncate(b))
	}
}

// A request whose body's length is ambiguous (Transfer-Encoding with
// Content-Length, two different lengths, a coding other than chunked) is
// answered 400 and its connection closed, as RFC 9112 asks: the bytes after
// its header may be its body or a request of their own, and a proxy in front
// that took them otherwise than the service would pass on a request no one
// sent it (request smuggling). Such a request changes nothing.
func TestRequestOfAmbiguousLengthIsRefusedAndItsConnectionClosed(t *testing.T) {
	e := newEnv(t, withKeys)
	addr := strings.TrimPrefix(e.base, "http://")
	auth := "Authorization: Bearer " + writeKey + "\r\n"
	body := `{"items":["x"]}`
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	// What a proxy may have taken for part of a body.
	smuggled := "POST /v1/namespaces/default/users/smuggled/seen HTTP/1.1\r\nHost: x\r\n" + auth +
		"Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	head := "POST /v1/namespaces/default/users/u/seen HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\n"
	for _, tc := range []struct{ name, request string }{
		{"chunked and a length", head + "Content-Length: " + strconv.Itoa(len(chunked)) + "\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked},
		{"a length and chunked", head + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n" + chunked},
		{"two lengths", head + fmt.Sprintf("Content-Length: %d\r\nContent-Length: %d\r\n\r\n", len(body), len(body)+len(smuggled)) + body},
		{"the same length twice", head + fmt.Sprintf("Content-Length: %d\r\nContent-Length: %d\r\n\r\n", len(body), len(body)) + body},
		{"a coding other than chunked", head + "Transfer-Encoding: gzip\r\n\r\n" + chunked},
		{"chunked twice", head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked},
		// A bare CR ends a line for some proxies: for them chunked is a
		// header of its own.
		{"a bare CR before chunked", head + "X-Note: a\rTransfer-Encoding: chunked\r\nContent-Length: " + strconv.Itoa(len(chunked)) + "\r\n\r\n" + chunked},
		// A chunk's size line ends with CRLF (RFC 9112, 7.1): a proxy
		// that ends it at a bare LF takes what follows for the chunk's
		// data, where an extension's bytes were skipped up to the CR.
		{"a bare LF in a chunk extension", head + "Transfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x;a\n%s\r\n%s\r\n0\r\n\r\n", len(body), strings.Repeat("b", 3), body)},
		{"a chunk size ended by a bare LF", head + "Transfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\n%s\r\n0\r\n\r\n", len(body), body)},
		// Nor is a chunk's size followed by bytes that are no extension
		// (RFC 9112, 7.1: an extension begins with ";"): a proxy that
		// reads "fxyz" otherwise (as no size, or a size of its own
		// digits) frames the chunks otherwise.
		{"bytes after a chunk's size", head + "Transfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%xxyz\r\n%s\r\n0\r\n\r\n", len(body), body)},
		{"bytes after the last chunk's size", head + "Transfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0x\r\n\r\n", len(body), body)},
		// HTTP/1.0 has no chunked coding (RFC 9112, 6.1).
		{"chunked in HTTP/1.0", strings.Replace(head, "HTTP/1.1", "HTTP/1.0", 1) + "Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			io.WriteString(conn, tc.request+smuggled)
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Refused for its head, whoever found it: no instance.
			if p := wantProblem(t, resp.StatusCode, resp.Header, readAll(t, resp), 400, "bad-request"); p.Instance != "" {
				t.Errorf("instance %q, want none", p.Instance)
			}
			wantNotRendered(t, "the refusal", resp.Header)
			if !resp.Close {
				t.Errorf("the connection is kept open after the refusal")
			}
			if next, err := http.ReadResponse(br, nil); err == nil {
				t.Errorf("the bytes after the request were served too: %d %s", next.StatusCode, readAll(t, next))
			}
		})
	}
	for _, user := range []string{"u", "smuggled"} {
		code, h, b := e.raw("GET", userPath("default", user, ""), "", nil, "Authorization", "Bearer "+readKey)
		wantProblem(t, code, h, b, 404, "user-not-found")
	}
	// The unambiguous forms are served: chunked alone, with an extension
	// (ignored), and a length alone.
	for name, request := range map[string]string{
		"chunked":               head + "Transfer-Encoding: chunked\r\n\r\n" + chunked,
		"chunked, an extension": head + "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x;a=b\r\n%s\r\n0\r\n\r\n", len(body), body),
		"a length":              head + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body,
	} {
		wantServed(t, addr, name, request)
	}
}

// wantServed sends request, a hand-made one named name, on a connection of
// its own to addr and wants it answered 200.
func wantServed(t *testing.T, addr, name, request string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, request)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if b := readAll(t, resp); resp.StatusCode != 200 {
		t.Errorf("%s: %d %s", name, resp.StatusCode, b)
	}
}

// A request names one host (RFC 9112, 3.2): an HTTP/1.1 request without
// Host, or any with two, or with one empty or no host (RFC 9110, 7.2), is
// refused with 400 naming Host and its connection closed, in the service's
// words whether the service or fasthttp (which refuses most of these
// itself, first, in its own) found it. HTTP/1.0 may leave Host out.
func TestRequestWithoutOrWithTwoHostsIsRefusedAndItsConnectionClosed(t *testing.T) {
	e := newEnv(t, withKeys)
	body := `{"items":["x"]}`
	seen := func(version, hosts string) string {
		return "POST /v1/namespaces/default/users/u/seen " + version + "\r\n" + hosts +
			"Authorization: Bearer " + writeKey + "\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	for _, tc := range []struct{ name, request, detail string }{
		{"HTTP/1.1 without Host", seen("HTTP/1.1", ""), "must give Host"},
		// The service's targets are http URIs, which always have a host
		// (RFC 9110, 4.2.1; RFC 9112, 3.3 lets a server refuse it).
		{"HTTP/1.1 with Host empty", seen("HTTP/1.1", "Host:\r\n"), "must give Host"},
		{"HTTP/1.1 with Host blank", seen("HTTP/1.1", "Host: \t \r\n"), "must give Host"},
		{"HTTP/1.0 with Host empty", seen("HTTP/1.0", "Host:\r\n"), "must give Host"},
		{"two Hosts", seen("HTTP/1.1", "Host: localhost\r\nHost: evil.example\r\n"), "Host is given more than once"},
		{"the same Host twice", seen("HTTP/1.1", "Host: x\r\nhost: x\r\n"), "Host is given more than once"},
		{"two Hosts in HTTP/1.0", seen("HTTP/1.0", "Host: x\r\nHost: y\r\nConnection: keep-alive\r\n"), "Host is given more than once"},
		{"a space in Host", seen("HTTP/1.1", "Host: a b\r\n"), `Host "a b" is not a host`},
		{"a tab in Host", seen("HTTP/1.1", "Host: a\tb\r\n"), "is not a host"},
		{"a path in Host", seen("HTTP/1.1", "Host: a/b\r\n"), `Host "a/b" is not a host`},
		{"a byte no host holds", seen("HTTP/1.1", "Host: a<b\r\n"), `Host "a<b" is not a host`},
		{"user info in Host", seen("HTTP/1.1", "Host: u@a\r\n"), "is not a host"},
		{"an unclosed bracket", seen("HTTP/1.1", "Host: [::1\r\n"), "is not a host"},
		{"bytes after the bracket", seen("HTTP/1.1", "Host: [::1]x\r\n"), "is not a host"},
		{"an IPv4 address in brackets", seen("HTTP/1.1", "Host: [127.0.0.1]\r\n"), "is not a host"},
		{"two ports", seen("HTTP/1.1", "Host: x:80:90\r\n"), "is not a host"},
		{"a port not a number", seen("HTTP/1.1", "Host: x:http\r\n"), "is not a host"},
		{"a bad escape", seen("HTTP/1.1", "Host: a%zz\r\n"), "is not a host"},
		{"a cut escape", seen("HTTP/1.1", "Host: a%c\r\n"), "is not a host"},
		// An ASCII byte is sent as itself, not escaped.
		{"an escaped ASCII letter", seen("HTTP/1.1", "Host: %41.example\r\n"), `Host "%41.example" is not a host`},
		{"an escaped percent", seen("HTTP/1.1", "Host: a%25b\r\n"), "is not a host"},
		// No IPvFuture version is defined (RFC 3986, 3.2.2).
		{"an IPvFuture literal", seen("HTTP/1.1", "Host: [v1.fe:80]\r\n"), `Host "[v1.fe:80]" is not a host`},
		{"an IPvFuture literal with a port", seen("HTTP/1.1", "Host: [v1.fe]:8080\r\n"), "is not a host"},
		{"empty brackets", seen("HTTP/1.1", "Host: []\r\n"), "is not a host"},
		// An http URI's host is never empty (RFC 9110, 4.2.1).
		{"a port of no host", seen("HTTP/1.1", "Host: :8080\r\n"), `Host ":8080" is not a host`},
		{"an empty IPv6 zone", seen("HTTP/1.1", "Host: [fe80::1%]\r\n"), "is not a host"},
		// A zone names an interface of the client's host (RFC 6874, 4:
		// a client removes it), and Host's grammar has none.
		{"an IPv6 zone", seen("HTTP/1.1", "Host: [fe80::1%25eth0]:8080\r\n"), `Host "[fe80::1%25eth0]:8080" is not a host`},
		{"an IPv6 zone unescaped", seen("HTTP/1.1", "Host: [fe80::1%eth0]\r\n"), `Host "[fe80::1%eth0]" is not a host`},
		{"UTF-8 unescaped", seen("HTTP/1.1", "Host: b\u00fccher.example\r\n"), "is not a host"},
		{"no host in HTTP/1.0", seen("HTTP/1.0", "Host: a b\r\n"), "is not a host"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantHeadRefused(t, e, tc.request, tc.detail, "Host") })
	}
	if st := e.stateOf("default", "u"); st != nil {
		t.Fatalf("a refused request recorded the user: %v", st)
	}
	// Served: HTTP/1.0 without Host, HTTP/1.1 with one Host, and each
	// form of host, with a port or without, and a target of absolute form.
	served := map[string]string{
		"HTTP/1.0 without Host": seen("HTTP/1.0", ""),
		"absolute form": strings.Replace(seen("HTTP/1.1", "Host: seen.example:8080\r\n"),
			" /v1/", " http://seen.example:8080/v1/", 1),
		"Host between spaces": seen("HTTP/1.1", "Host: \t localhost:8080 \t\r\n"),
	}
	for _, host := range []string{"localhost", "seen.example.", "Seen-API_1.example", "xn--bcher-kva.example", "b%C3%BCcher.example",
		"a!$&'()*+,;=~", "127.0.0.1", "[::1]", "[2001:db8::7]", "[::ffff:127.0.0.1]", "[fe80::1]"} {
		served["Host "+host] = seen("HTTP/1.1", "Host: "+host+"\r\n")
		served["Host "+host+" with a port"] = seen("HTTP/1.1", "Host: "+host+":8080\r\n")
	}
	for name, request := range served {
		wantServed(t, strings.TrimPrefix(e.base, "http://"), name, request)
	}
}

// wantHeadRefused sends request, then a request for /healthz, on a
// connection of its own, and wants request refused for its head (Host,
// target): a 400 bad-request whose detail says detail, naming param in its
// errors (none when param is ""), without an instance, with the headers
// every answer carries, and its connection closed, the request after it
// unserved. It returns the problem.
func wantHeadRefused(t *testing.T, e *env, request, detail, param string) api.Problem {
	t.Helper()
	conn, _ := e.dial(t)
	io.WriteString(conn, request+"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := wantProblem(t, resp.StatusCode, resp.Header, readAll(t, resp), 400, "bad-request")
	if !strings.Contains(p.Detail, detail) {
		t.Errorf("detail %q, want it to say %q", p.Detail, detail)
	}
	// Refused for its head, the request has no path to be trusted, and
	// fasthttp's refusals of the same requests keep none.
	if p.Instance != "" {
		t.Errorf("instance %q, want none", p.Instance)
	}
	if param == "" && len(p.Errors) > 0 {
		t.Errorf("errors %+v, want none", p.Errors)
	} else if param != "" && (len(p.Errors) != 1 || p.Errors[0].Parameter != param) {
		t.Errorf("errors %+v, want one naming the parameter %s", p.Errors, param)
	}
	// The headers every answer carries, fasthttp's refusals too.
	if resp.Header.Get("Date") == "" {
		t.Errorf("no Date, as every answer has")
	}
	wantNotRendered(t, "the refusal", resp.Header)
	if !resp.Close {
		t.Errorf("the connection is kept open after the refusal")
	}
	if next, err := http.ReadResponse(br, nil); err == nil {
		t.Errorf("the request after it was served too: %d %s", next.StatusCode, readAll(t, next))
	}
	return p
}

// A target of absolute form ("http://host/path", RFC 9112, 3.2.2) names
// the host the request is for, in place of Host: one whose authority is
// no host, or holds user information (RFC 9110, 4.2.4), or whose scheme is
// not http or https (on either port) or is missing, or a target of no form
// the service takes, is refused as a bad Host is, with 400 and its
// connection closed, in the service's words naming the target, whether
// fasthttp (which refuses some itself, in its own words, some in the
// request line, keeping nothing of the request) or the service found it.
func TestRequestTargetOfNoHostIsRefusedAndItsConnectionClosed(t *testing.T) {
	e := newEnv(t, withKeys)
	body := `{"items":["x"]}`
	seen := func(origin string) string {
		return "POST " + origin + "/v1/namespaces/default/users/u/seen HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writeKey +
			"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	const notAHost = " is not a host"
	for _, tc := range []struct{ name, request, detail string }{
		// fasthttp refuses these itself, after the service has seen them.
		{"an escaped ASCII letter", seen("http://a%41"), `the request target's authority "a%41"` + notAHost},
		{"a bad escape", seen("http://a%zz"), `the request target's authority "a%zz"` + notAHost},
		{"a port not a number", seen("http://localhost:x"), `the request target's authority "localhost:x"` + notAHost},
		{"two ports", seen("http://localhost:80:90"), notAHost},
		{"an unclosed bracket", seen("http://[::1"), notAHost},
		{"bytes after the bracket", seen("http://[::1]x"), notAHost},
		{"an IPv4 address in brackets", seen("http://[127.0.0.1]"), notAHost},
		// fasthttp takes these.
		{"a byte no host holds", seen("http://a<b"), `the request target's authority "a<b"` + notAHost},
		{"an IPv6 zone", seen("https://[fe80::1%25eth0]:8080"), `the request target's authority "[fe80::1%25eth0]:8080"` + notAHost},
		{"no host", seen("http://"), "the request target has no host"},
		{"no host before a query", "GET http://?x HTTP/1.1\r\nHost: x\r\n\r\n", "the request target has no host"},
		{"a port of no host", seen("http://:8080"), `the request target's authority ":8080"` + notAHost},
		{"user information", seen("http://user:secret@localhost"), "holds user information"},
		{"user information alone", seen("http://user@"), "holds user information"},
		// fasthttp served these as http.
		{"an ftp scheme", seen("ftp://localhost"), `the request target's scheme "ftp" is not http or https`},
		{"a proxy's scheme", seen("socks5://localhost"), `the request target's scheme "socks5" is not http or https`},
		// fasthttp refuses these in the request line, in its own words
		// ("invalid request uri"), keeping nothing of the request.
		{"no scheme", seen("://localhost"), `the request target has no scheme before "://"`},
		{"no scheme nor host", seen("://"), `the request target has no scheme before "://"`},
		{"a scheme of no grammar", seen("1http://localhost"), `the request target's scheme "1http" is not http or https`},
		{"a target of no form", "GET healthz HTTP/1.1\r\nHost: x\r\n\r\n", "the request target is none of the forms the service takes"},
		{"the asterisk of GET", "GET * HTTP/1.1\r\nHost: x\r\n\r\n", "the request target is none of the forms the service takes"},
		{"a control byte", "GET /healthz\x01 HTTP/1.1\r\nHost: x\r\n\r\n", "the request target is none of the forms the service takes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// User information may hold a password: not sent back.
			if p := wantHeadRefused(t, e, tc.request, tc.detail, ""); strings.Contains(p.Detail, "secret") {
				t.Errorf("detail %q quotes the user information", p.Detail)
			}
		})
	}
	if st := e.stateOf("default", "u"); st != nil {
		t.Fatalf("a refused request recorded the user: %v", st)
	}
	addr := strings.TrimPrefix(e.base, "http://")
	for _, origin := range []string{"http://localhost", "HTTP://LOCALHOST:8080", "https://seen.example", "http://[::1]:8080",
		"http://b%C3%BCcher.example", "http://127.0.0.1"} {
		wantServed(t, addr, origin, seen(origin))
	}
}

// A header line the service cannot read as one header is refused with 400
// and its connection closed, at once: a line without a colon (which
// fasthttp waited on until the read timeout, then answered 408), a name
// that is no token ("Bad Key", a space before the colon), and a line
// folded onto the one before it (obs-fold), which fasthttp would take for
// a header named "Bad Key", or join to the value before it, where a proxy
// in front may have read them otherwise (RFC 9112, 5.1 and 5.2). Those
// the service's own pass refuses name the header at fault; fasthttp
// refuses a space before the colon itself, keeping none of the header.
func TestMalformedHeaderLineIsRefusedAtOnceAndItsConnectionClosed(t *testing.T) {
	// A read timeout far longer than the client waits: an answer only
	// once it is over fails the test.
	e := newEnv(t, withKeys, func(c *api.Config) { c.ReadTimeout = time.Minute })
	addr := strings.TrimPrefix(e.base, "http://")
	body := `{"items":["x"]}`
	seen := func(headers string) string {
		return "POST /v1/namespaces/default/users/u/seen HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writeKey +
			"\r\nContent-Type: application/json\r\n" + headers + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	next := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tc := range []struct{ name, request, header, detail string }{
		// Alone on its connection: fasthttp 1.58 waited for a colon,
		// which the next request's "Host:" would have given it.
		{"a line without a colon", "GET /healthz HTTP/1.1\r\nHost: x\r\nBad\r\n\r\n", "", ""},
		{"a line without a colon in a request with a body", seen("Bad\r\n"), "", ""},
		// Nor is a request line of more than three parts (RFC 9112, 3):
		// fasthttp 1.65 served "/healthz /x" as the path, which a cache
		// in front may have keyed as "/healthz".
		{"a space in the request target", "GET /healthz /x HTTP/1.1\r\nHost: x\r\n\r\n", "", ""},
		{"a space in a name", seen("Bad Key: 1\r\n"), "Bad Key", `the header name "Bad Key" holds ' '`},
		// fasthttp refuses a space before the colon itself, as it reads
		// the header, keeping none of it: in its words, without the name.
		{"a space before the colon", seen("X-Seen : 1\r\n"), "", "invalid header key (bytes left out)"},
		{"a space before the colon of Transfer-Encoding", seen("Transfer-Encoding : chunked\r\n"), "", "invalid header key"},
		{"a folded header", seen("X-A: 1\r\n folded: yes\r\n"), "X-A", `a line of header "X-A" continues on the next`},
		{"a header folded with a tab", seen("X-A: 1\r\n\tTransfer-Encoding: chunked\r\n"), "X-A", "(obs-fold)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, _ := e.dial(t)
			if tc.detail == "" {
				io.WriteString(conn, tc.request)
			} else {
				io.WriteString(conn, tc.request+next)
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer within 10s (read timeout 1m): %v", err)
			}
			p := wantProblem(t, resp.StatusCode, resp.Header, readAll(t, resp), 400, "bad-request")
			if !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("detail %q, want it to say %q", p.Detail, tc.detail)
			}
			if tc.header != "" && (len(p.Errors) != 1 || p.Errors[0].Parameter != tc.header) {
				t.Errorf("errors %+v, want one naming the parameter %q", p.Errors, tc.header)
			}
			if p.Instance != "" {
				t.Errorf("instance %q, want none", p.Instance)
			}
			wantNotRendered(t, "the refusal", resp.Header)
			if !resp.Close {
				t.Errorf("the connection is kept open after the refusal")
			}
			if next, err := http.ReadResponse(br, nil); err == nil {
				t.Errorf("the request after it was served too: %d %s", next.StatusCode, readAll(t, next))
			} else if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("the connection is still open 10s after the refusal")
			}
		})
	}
	if st := e.stateOf("default", "u"); st != nil {
		t.Fatalf("a refused request recorded the user: %v", st)
	}
	wantServed(t, addr, "a well-formed header", seen("X-Seen: 1\r\n"))
}

// The service takes no forms: a body sent as multipart/form-data is not
// parsed as one before the route and the key are (fasthttp's default,
// which writes a form's files past 16 MiB to temporary files, for any
// caller), but refused by the route as any body not sent as JSON is.
func TestMultipartBodyIsNotParsedAsAForm(t *testing.T) {
	e := newEnv(t, withKeys)
	const form = "multipart/form-data; boundary=xyz"
	status, h, b := e.raw("POST", userPath("default", "u", "/seen"), form, []byte("not a form"))
	wantProblem(t, status, h, b, 401, "unauthorized")
	status, h, b = e.raw("POST", userPath("default", "u", "/seen"), form, []byte(`{"items":["x"]}`),
		"Authorization", "Bearer "+writeKey)
	wantProblem(t, status, h, b, 415, "unsupported-media-type")
	if st := e.stateOf("default", "u"); st != nil {
		t.Fatalf("a JSON body sent as a form created the user: %v", st)
	}
}

// A request the server cannot parse is answered 400 without the bytes it
// read: they hold its own Authorization header and those of the requests
// pipelined after it on the connection, another client's behind a proxy
// that shares its connections to the service. A malformed header whose
// name says "timeout" is no timeout either (fiber took any error whose
// words held one for a 408).
func TestUnparsableRequestIsAnsweredWithoutTheBytesItRead(t *testing.T) {
	e := newEnv(t, withKeys)
	addr := strings.TrimPrefix(e.base, "http://")
	next := "GET /v1/auth HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + adminKey + "\r\n\r\n"
	for name, bad := range map[string]string{
		"a folded header":                    "GET /v1/auth HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writeKey + "\r\nX-A: 1\r\n folded: yes\r\n\r\n",
		"no method":                          " /v1/auth HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writeKey + "\r\n\r\n",
		"a bad length":                       "POST /v1/auth HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writeKey + "\r\nContent-Length: x1\r\n\r\n",
		"a space in a key":                   "GET /v1/auth HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writeKey + "\r\nBad Key: 1\r\n\r\n",
		"a control byte in the key's header": "GET /v1/auth HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writeKey + "\x01\r\n\r\n",
		"a header named timeout":             "GET /v1/auth HTTP/1.1\r\nHost: x\r\nSession timeout: 1\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			io.WriteString(conn, bad+next)
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			wantProblem(t, resp.StatusCode, resp.Header, body, 400, "bad-request")
			for _, key := range []string{writeKey, adminKey} {
				if strings.Contains(string(body), key) {
					t.Errorf("the answer quotes a key: %s", body)
				}
			}
		})
	}
}

// fasthttp's own refusals, before any route, are problems of their own
// kind: a request not received whole within the read timeout (408) and
// headers past the read buffer (431), not a 400 bad-request's type with
// another status. The 408 reaches its client with the write timeout as
// long as the read timeout, as the defaults are: the answer is written
// once the read timeout is over, so a write deadline from the request's
// start would be over too, and the connection closed unanswered. (A new
// connection that sends nothing is closed without an answer: see
// TestASilentConnectionIsClosedWithoutAnAnswer.)
func TestRefusalsBeforeAnyRouteHaveTheirOwnType(t *testing.T) {
	e := newEnv(t, func(c *api.Config) {
		// A second each: the 408 is written once the read timeout is
		// over, by a goroutine that a loaded machine may hold up.
		c.ReadTimeout = time.Second
		c.WriteTimeout = c.ReadTimeout
	})
	addr := strings.TrimPrefix(e.base, "http://")
	for _, tc := range []struct {
		name, request string
		status        int
		typ           string
	}{
		{"a body that never comes", "POST /v1/namespaces/default/users/u/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n{", 408, "request-timeout"},
		{"headers that never end", "GET /healthz HTTP/1.1\r\nHost: x\r\n", 408, "request-timeout"},
		{"headers past the buffer", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("p", 8<<10) + "\r\n\r\n", 431, "headers-too-large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			io.WriteString(conn, tc.request)
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			// fasthttp has dropped the request by then: no instance
			// rather than "/", which is not the request's path.
			if p := wantProblem(t, resp.StatusCode, resp.Header, readAll(t, resp), tc.status, tc.typ); p.Instance != "" {
				t.Errorf("instance %q, want none", p.Instance)
			}
		})
	}
}

// A connection that sends nothing within the read timeout, as one a
// client's pool or a balancer opens ahead of use, is closed without an
// answer: a 408 on it could be read as the answer to the first request
// the client sends on it later. One that sent part of a request still
// gets its 408 (above).
func TestASilentConnectionIsClosedWithoutAnAnswer(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.ReadTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("the silent connection was not closed within 10s (read %q): %v", got, err)
	}
	if len(got) != 0 {
		t.Fatalf("the silent connection was answered:\n%s", got)
	}
}

// A client that resets its connection while sending its request (a
// timeout of its own, its process killed) is gone: there is no one to
// answer, and nothing failed in the service. fiber takes the failed read
// for a 502, which was answered as a 500 internal error, counted with the
// server's errors, where an alert on 5xx looks, and logged as one.
func TestAClientThatResetsItsRequestIsNoServerError(t *testing.T) {
	logs := &logLines{}
	e := newEnv(t, withLog(logs))
	stats := func() (st struct {
		Connections int64             `json:"connections"`
		Errors      map[string]uint64 `json:"errors"`
	}) {
		t.Helper()
		status, _, body := e.raw(http.MethodGet, "/v1/stats", "", nil)
		if err := json.Unmarshal(body, &st); status != http.StatusOK || err != nil {
			t.Fatalf("stats: %d %v %s", status, err, body)
		}
		return st
	}
	before := stats().Connections
	for _, request := range []string{
		"POST /v1/namespaces/default/users/u/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"candidates\"",
		"GET /v1/stats HTTP/1.1\r\nHost: x\r\nX-Half",
	} {
		conn, _ := e.dial(t)
		io.WriteString(conn, request)
		time.Sleep(100 * time.Millisecond) // for the server to be reading it
		conn.(*net.TCPConn).SetLinger(0)   // close with a reset
		conn.Close()
	}
	for deadline := time.Now().Add(10 * time.Second); stats().Connections > before; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connections reset were not closed within 10s")
		}
	}
	if st := stats(); len(st.Errors) > 0 {
		t.Errorf("errors %v after two clients reset their requests, want none: no answer was given", st.Errors)
	}
	if failed := logs.find(t, "seenapi: request failed"); len(failed) > 0 {
		t.Errorf("the resets were logged as failures: %v", failed)
	}
}

// A body refused from its Content-Length is not read, and the connection
// closes after the 413 while the client may still be sending it: the
// client still reads the 413, not a reset connection, however long it
// goes on sending before it reads (within a second and 16 MiB). A socket
// closed with bytes unread is reset, and the reset takes the answer from
// the client's side.
func TestARefusalFromTheHeaderReachesAClientStillSendingTheBody(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.MaxBodyBytes = 1000 })
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const size = 4 << 20
	fmt.Fprintf(conn, "POST /v1/namespaces/default/users/u/seen HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = ' '
	}
	for sent := 0; sent < size; sent += len(chunk) {
		if sent == 4*len(chunk) {
			time.Sleep(200 * time.Millisecond) // the server has answered and closed by now
		}
		conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write(chunk); err != nil {
			// A careful client reads the answer still (Go's does).
			t.Errorf("sending the body after %d bytes: %v", sent, err)
			break
		}
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the refusal's answer is lost: %v", err)
	}
	wantProblem(t, resp.StatusCode, resp.Header, readAll(t, resp), 413, "body-too-large")
}

// A body in chunks over its route's limit is refused as it is read, with
// both limits named: the request it belonged to is gone by then.
func TestChunkedBodyOverTheLimitNamesTheLimits(t *testing.T) {
	e := newEnv(t, func(c *api.Config) {
		c.MaxBodyBytes = 1000
		c.MaxImportBytes = 5000
	})
	conn, _ := e.dial(t)
	chunk := strings.Repeat("x", 3000)
	fmt.Fprintf(conn, "POST /v1/namespaces/default/users/u/seen HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(chunk), chunk)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := wantProblem(t, resp.StatusCode, resp.Header, readAll(t, resp), 413, "body-too-large")
	if p.Instance != "" {
		t.Errorf("instance %q, want none", p.Instance)
	}
	if want := "the body is over its route's limit (1000 bytes, or 5000 for an import)"; p.Detail != want {
		t.Errorf("detail %q, want %q", p.Detail, want)
	}
}

// A configured limit admits a request at exactly the limit and refuses
// one more.
func TestLimitsAdmitExactlyTheirMaximum(t *testing.T) {
	const maxBody = 200
	e := newEnv(t, func(c *api.Config) {
		c.MaxCandidates = 3
		c.MaxBatchUsers = 2
		c.MaxBodyBytes = maxBody
	})
	const batch = "/v1/namespaces/default/filter"
	// A body of n bytes: one call's request padded with spaces.
	body := func(n int) string {
		b := `{"candidates":["a"]}`
		return b + strings.Repeat(" ", n-len(b))
	}
	for _, tc := range []struct {
		name   string
		path   string
		body   string
		status int
		typ    string
	}{
		{"candidates at the limit", userPath("default", "u", "/filter"), candidates(3), 200, ""},
		{"candidates over the limit", userPath("default", "u", "/filter"), candidates(4), 413, "too-many-candidates"},
		{"users at the limit", batch, batchOf(2), 200, ""},
		{"users over the limit", batch, batchOf(3), 413, "too-many-users"},
		{"body at the limit", userPath("default", "u", "/filter"), body(maxBody), 200, ""},
		{"body over the limit", userPath("default", "u", "/filter"), body(maxBody + 1), 413, "body-too-large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := e.as(t).raw(http.MethodPost, tc.path, "application/json", []byte(tc.body))
			if tc.typ != "" {
				wantProblem(t, status, h, body, tc.status, tc.typ)
			} else if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
		})
	}
}

// holdingStore is the real store whose Load of user, once entered (it
// closes loading), waits until release is closed: a call held in flight.
type holdingStore struct {
	*storage.Store
	user             string
	loading, release chan struct{}
}

func (s *holdingStore) Load(ns, user string) ([]byte, []storage.JournalEntry, error) {
	if user == s.user {
		close(s.loading)
		<-s.release
	}
	return s.Store.Load(ns, user)
}

// Requests beyond MaxInFlight are answered 503 overloaded, with a
// Retry-After, while the others are served; a request that ends frees its
// place.
func TestRequestsBeyondMaxInFlightAreOverloaded(t *testing.T) {
	hs := &holdingStore{user: "held", loading: make(chan struct{}), release: make(chan struct{})}
	e := newEnvOver(t, func(st *storage.Store) eviction.Store { hs.Store = st; return hs },
		func(c *api.Config) { c.MaxInFlight = 1 })
	release := sync.OnceFunc(func() { close(hs.release) })
	t.Cleanup(release) // before the server's shutdown, which waits for the held call
	held := make(chan int, 1)
	go func() {
		status, _, body, err := e.rawErr(http.MethodPost, userPath("default", "held", "/filter"), "application/json",
			[]byte(`{"candidates":["a"]}`))
		if err != nil || status != http.StatusOK {
			t.Errorf("the held call: %d %v %s", status, err, body)
		}
		held <- status
	}()
	<-hs.loading
	other := userPath("default", "other", "/filter")
	status, h, body := e.raw(http.MethodPost, other, "application/json", []byte(`{"candidates":["a"]}`))
	wantProblem(t, status, h, body, http.StatusServiceUnavailable, "overloaded")
	if h.Get("Retry-After") == "" {
		t.Fatal("a request beyond the one in flight: overloaded without a Retry-After")
	}
	// The probes answer meanwhile: a busy service is alive and ready. So
	// does /metrics: a scrape refused while the service is overloaded would
	// hide the overload (and its 503s) from its monitoring.
	for _, probe := range []string{"/healthz", "/readyz", "/metrics"} {
		if status, _, body := e.raw(http.MethodGet, probe, "", nil); status != http.StatusOK {
			t.Errorf("GET %s while the cap is reached: %d %s, want 200", probe, status, body)
		}
	}
	// The dashboard's page and files are load like any call: a browser
	// loading them waits its turn. (Plain GETs: the files' paths are not in
	// openapi.yaml, which e.raw holds answers to.)
	for _, path := range []string{"/", "/app.js", "/style.css", "/openapi.yaml"} {
		resp, err := http.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s while the cap is reached: %d (%d bytes), want 503 with Retry-After", path, resp.StatusCode, len(body))
		}
	}
	release()
	<-held
	if status, _, body := e.raw(http.MethodPost, other, "application/json", []byte(`{"candidates":["a"]}`)); status != http.StatusOK {
		t.Fatalf("once the held call ended: %d %s, want 200", status, body)
	}
}

// TestFieldErrorsPointAtTheField checks each field error's pointer is the
// RFC 6901 pointer of the offending member, array indexes included, for
// the one call, the items routes and the batch.
func TestFieldErrorsPointAtTheField(t *testing.T) {
	e := newEnv(t)
	var (
		one   = userPath("default", "u", "/filter")
		seen  = userPath("default", "u", "/seen")
		batch = "/v1/namespaces/default/filter"
	)
	for _, tc := range []struct {
		path, body string
		status     int
		typ        string
		pointer    string
	}{
		{one, `{"candidates":["a"],"limit":-1}`, 400, "bad-request", "/limit"},
		{one, `{"candidates":["a"],"limit":"x"}`, 400, "bad-request", "/limit"},
		{one, `{"candidates":["a"],"limit":2.5}`, 400, "bad-request", "/limit"},
		{one, `{"candidates":["a","b\u0001"]}`, 400, "bad-request", "/candidates/1"},
		{one, `{"candidates":["a","b\u007f"]}`, 400, "bad-request", "/candidates/1"},           // an escaped DEL in an ASCII body
		{one, "{\"candidates\":[\"a\",\"b\",\"c\x7f\"]}", 400, "bad-request", "/candidates/2"}, // a raw DEL: valid JSON
		{one, `{"candidates":["ü","a\u0085"]}`, 400, "bad-request", "/candidates/1"},           // C1 control in a UTF-8 body
		{one, `{"candidates":["a","\udfffx"]}`, 400, "bad-request", "/candidates/1"},           // a lone surrogate, escaped
		{batch, `{"requests":[{"user":"bb1","candidates":["\ud800"]}]}`, 400, "bad-request", "/requests/0/candidates/0"},
		{one, `{"candidates":["a"],"record":"x"}`, 400, "bad-request", "/record"},
		{one, `{"candidates":["a"],"zzz":1}`, 400, "bad-request", "/zzz"},
		{one, `{"candidates":"a"}`, 400, "bad-request", "/candidates"},
		{one, `{"candidates":["a",5,null]}`, 400, "bad-request", "/candidates/1"},
		{one, `{"candidates":["a","b",["c"]]}`, 400, "bad-request", "/candidates/2"},
		{one, `{"limt":3}`, 400, "bad-request", "/limt"},
		{one, `{"CANDIDATES":["a"]}`, 400, "bad-request", "/CANDIDATES"}, // names match exactly
		{one, `{"candidates":["a"],"Candidates":["b"]}`, 400, "bad-request", "/Candidates"},
		{one, `{"candidates":["a"],"a/b~c":1}`, 400, "bad-request", "/a~1b~0c"}, // escaped per RFC 6901
		{seen, `{"items":["a",{}]}`, 400, "bad-request", "/items/1"},
		{batch, `{"requests":{}}`, 400, "bad-request", "/requests"},
		{batch, `{"requests":[{"user":"bb1","candidates":["a",3]}]}`, 400, "bad-request", "/requests/0/candidates/1"},
		{batch, `{"requests":[{"user":"bb1","candidates":["a"],"x":1}]}`, 400, "bad-request", "/requests/0/x"},
		{batch, `{"requests":[{"user":"bb1","candidates":["a"]},{"user":"bb2","candidates":["a"],"limit":"3"}]}`, 400, "bad-request", "/requests/1/limit"},
		{batch, `{"requests":[{"user":"bb1","candidates":["a"]},{"user":7,"candidates":["a"]}]}`, 400, "bad-request", "/requests/1/user"},
		{batch, `{"requests":[{"user":"bb1","candidates":["a"]},{"user":"bb2","candidates":["a"],"USER":"c"}]}`, 400, "bad-request", "/requests/1/USER"},
		{batch, `{"requests":[{"user":"bb1","candidates":["a"]},{"user":"","candidates":["a"]}]}`, 400, "bad-request", "/requests/1/user"},
		{batch, `{"requests":[{"user":"bb1","candidates":["a","b\u0001"]}]}`, 400, "bad-request", "/requests/0/candidates/1"},
		{batch, `{"requests":[{"user":"bb1","candidates":["a"]}],"x":[]}`, 400, "bad-request", "/x"},
	} {
		status, h, body := e.raw("POST", tc.path, "application/json", []byte(tc.body))
		if status != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.body, status, tc.status, truncate(body))
			continue
		}
		p := problem(t, status, h, body)
		if p.Type != api.ProblemBase+tc.typ {
			t.Errorf("%s: problem type %s, want %s", tc.body, p.Type, tc.typ)
		}
		if len(p.Errors) != 1 || p.Errors[0].Pointer != tc.pointer {
			t.Errorf("%s: errors %+v, want one with pointer %s", tc.body, p.Errors, tc.pointer)
		}
	}
	status, h, body := e.raw("POST", "/v1/namespaces/default/users/%01/filter", "application/json", []byte(`{"candidates":["a"]}`))
	if p := problem(t, status, h, body); len(p.Errors) == 0 || p.Errors[0].Parameter != "user" {
		t.Errorf("bad user id: errors %+v, want parameter user", p.Errors)
	}
}

// A route that does not take the method is 405 with the route's Allow,
// and so is a method the service does not know at all (WebDAV's PROPFIND,
// a cache's PURGE), which was a plain-text 400 "Invalid http method".
func TestUnknownRouteAndMethodAreProblems(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		method, path string
		status       int
		typ, allow   string
	}{
		{"GET", "/v1/nothing", 404, "not-found", ""},
		{"POST", "/v1/stats", 405, "method-not-allowed", "GET, HEAD"},
		{"PATCH", userPath("default", "u", "/filter"), 405, "method-not-allowed", "POST"},
		{"PROPFIND", "/v1/stats", 405, "method-not-allowed", "GET, HEAD"},
		{"PURGE", userPath("default", "u", ""), 405, "method-not-allowed", "GET, HEAD, DELETE"},
		{"BREW", "/v1/nothing", 404, "not-found", ""},
	} {
		req, _ := http.NewRequest(tc.method, e.base+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
			continue
		}
		if p := problem(t, resp.StatusCode, resp.Header, body); p.Type != api.ProblemBase+tc.typ || p.Instance != tc.path {
			t.Errorf("%s %s: type %s at %s, want %s", tc.method, tc.path, p.Type, p.Instance, tc.typ)
		}
		if got := resp.Header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}
	// The dashboard's files are served at their own paths, by GET and
	// HEAD, as its page at / is: any other method is 405 with the same
	// Allow as /, and a path that names no file (a directory, a file's
	// path with a trailing slash, which StrictRouting makes another path)
	// is 404 not-found, as any path no route takes.
	files, err := fs.Glob(web.FS(), "*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboard files: %v", err)
	}
	for _, name := range append(files, "") {
		for _, m := range []string{"OPTIONS", "POST", "PUT", "DELETE", "PATCH"} {
			wantAnswer(t, e, m, "/"+name, 405, "method-not-allowed", "GET, HEAD")
		}
	}
	for _, name := range files {
		for _, m := range []string{"GET", "HEAD"} {
			wantAnswer(t, e, m, "/"+name+"/", 404, "not-found", "")
			wantAnswer(t, e, m, "/"+name+"//", 404, "not-found", "")
		}
	}
	for _, path := range []string{"/.", "/./", "/..", "//", "/nope.js", "/App.js"} {
		wantAnswer(t, e, "GET", path, 404, "not-found", "")
		wantAnswer(t, e, "OPTIONS", path, 404, "not-found", "")
	}
	// A 405 is any route's default response in openapi.yaml, whose Allow a
	// generated client reads only if the response declares it.
	if def := loadSpec(t).Components.Responses["Default"]; def == nil || def.Value.Headers["Allow"] == nil {
		t.Error("openapi.yaml's Default response, which a 405 is, does not declare its Allow header")
	}
}

// wantAnswer sends method path on a connection of its own, the path as
// is, and wants the problem status slug at path, with Allow allow.
func wantAnswer(t *testing.T, e *env, method, path string, status int, slug, allow string) {
	t.Helper()
	conn, _ := e.dial(t)
	defer conn.Close()
	io.WriteString(conn, method+" "+path+" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != status {
		t.Errorf("%s %s: %d %s, want %d %s", method, path, resp.StatusCode, truncate(body), status, slug)
		return
	}
	if got := resp.Header.Get("Allow"); got != allow {
		t.Errorf("%s %s: Allow %q, want %q", method, path, got, allow)
	}
	if method == "HEAD" {
		return
	}
	if p := problem(t, resp.StatusCode, resp.Header, body); p.Type != api.ProblemBase+slug || p.Instance != path {
		t.Errorf("%s %s: type %s at %s, want %s at %s", method, path, p.Type, p.Instance, slug, path)
	}
}

// A request no route or dashboard file takes (a path of neither, a method
// the path does not take, by GET, HEAD, OPTIONS or another method) is
// answered with the headers of the API's own problems, as a route's is:
// not the dashboard's X-Frame-Options and Referrer-Policy, which were set
// on whatever reached the dashboard's files, nor its policy. The page and
// its files keep theirs.
func TestNoRouteIsAnsweredWithTheHeadersOfTheAPI(t *testing.T) {
	e := newEnv(t)
	security := []string{"X-Content-Type-Options", "Content-Security-Policy", "X-Frame-Options", "Referrer-Policy",
		"Strict-Transport-Security"}
	answer := func(method, path string) (int, http.Header) {
		t.Helper()
		conn, _ := e.dial(t)
		io.WriteString(conn, method+" "+path+" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		readAll(t, resp)
		return resp.StatusCode, resp.Header
	}
	wantLike := func(what string, h, like http.Header) {
		t.Helper()
		for _, name := range security {
			if got, want := h.Values(name), like.Values(name); !slices.Equal(got, want) {
				t.Errorf("%s: %s %q, want %q", what, name, got, want)
			}
		}
	}
	// A route's own problem, which never reaches the dashboard's files.
	code, route := answer("GET", userPath("default", "nobody", ""))
	if code != 404 {
		t.Fatalf("a user of no filter: %d, want 404", code)
	}
	wantNotRendered(t, "a route's problem", route)
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/nope", 404}, {"HEAD", "/v1/nope", 404}, {"OPTIONS", "/v1/nope", 404}, {"DELETE", "/v1/nope", 404},
		{"GET", "/nope.html", 404}, {"HEAD", "/nope.html", 404}, {"OPTIONS", "/nope.html", 404},
		{"GET", "/static/app.js", 404},
		{"POST", "/v1/stats", 405}, {"OPTIONS", "/v1/stats", 405}, {"PROPFIND", "/v1/stats", 405},
		{"POST", "/app.js", 405}, {"OPTIONS", "/app.js", 405}, {"OPTIONS", "/", 405}, {"GET", "/.", 404}, {"GET", "/app.js/", 404},
	} {
		what := tc.method + " " + tc.path
		code, h := answer(tc.method, tc.path)
		if code != tc.status {
			t.Errorf("%s: %d, want %d", what, code, tc.status)
		}
		wantLike(what, h, route)
	}
	// The dashboard's page and files, by GET and HEAD, keep its headers.
	code, page := answer("GET", "/")
	if code != 200 || page.Get("Content-Security-Policy") == route.Get("Content-Security-Policy") ||
		page.Get("X-Frame-Options") != "DENY" || page.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("GET /: %d %v, want 200 with the dashboard's policy, X-Frame-Options DENY and no Referer", code, page)
	}
	for _, tc := range [][2]string{{"HEAD", "/"}, {"GET", "/app.js"}, {"HEAD", "/app.js"}, {"GET", "/style.css"}} {
		what := tc[0] + " " + tc[1]
		if code, h := answer(tc[0], tc[1]); code != 200 {
			t.Errorf("%s: %d, want 200", what, code)
		} else {
			wantLike(what, h, page)
		}
	}
}

// CONNECT asks for a tunnel to the host:port its target names (RFC 9110,
// 9.3.6), which the service, no proxy, opens to none: it is a method no
// route takes, 405 with the server's Allow (that of "OPTIONS *"), where it
// was a 404 whose instance was its target taken for a path. Its problem
// has no instance, and its connection is closed (what its client sends
// next is meant for the tunnel), whatever the key.
func TestConnectIsAMethodNoRouteTakes(t *testing.T) {
	e := newEnv(t, withKeys)
	for _, target := range []string{"localhost:443", "seen.example:80", "[::1]:8080"} {
		conn, _ := e.dial(t)
		io.WriteString(conn, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
		if err != nil {
			t.Fatal(err)
		}
		p := wantProblem(t, resp.StatusCode, resp.Header, readAll(t, resp), 405, "method-not-allowed")
		if p.Instance != "" {
			t.Errorf("CONNECT %s: instance %q, want none: the target is no path", target, p.Instance)
		}
		if got := resp.Header.Get("Allow"); got != "GET, HEAD, POST, PUT, DELETE, OPTIONS" {
			t.Errorf("CONNECT %s: Allow %q, want the server's, GET, HEAD, POST, PUT, DELETE, OPTIONS", target, got)
		}
		wantNotRendered(t, "CONNECT "+target, resp.Header)
		if !resp.Close {
			t.Errorf("CONNECT %s: the connection is kept open after the refusal", target)
		}
		if next, err := http.ReadResponse(br, nil); err == nil {
			t.Errorf("CONNECT %s: the request after it was served too: %d %s", target, next.StatusCode, readAll(t, next))
		}
	}
}

// "OPTIONS *" asks what the server as a whole supports (RFC 9110, 9.3.7;
// the asterisk form, RFC 9112, 3.2.4): it is answered 200 with Allow, the
// methods some route takes, and no content (Content-Length: 0, which a
// 204 may not carry), whatever the key, where it was a 404 for a path
// "*". Its connection stays open.
func TestOptionsAsteriskDescribesTheServer(t *testing.T) {
	e := newEnv(t, withKeys)
	conn, _ := e.dial(t)
	br := bufio.NewReader(conn)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("Content-Length") != "0" {
		t.Fatalf("OPTIONS *: %d, Content-Length %q, %q; want 200 without content", resp.StatusCode, resp.Header.Get("Content-Length"), truncate(body))
	}
	if got := resp.Header.Get("Allow"); got != "GET, HEAD, POST, PUT, DELETE, OPTIONS" {
		t.Errorf("OPTIONS *: Allow %q, want GET, HEAD, POST, PUT, DELETE, OPTIONS", got)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Date") == "" {
		t.Errorf("OPTIONS *: %v, want nosniff and a Date as every answer", resp.Header)
	}
	if resp.Close {
		t.Errorf("OPTIONS *: the connection is closed")
	}
	io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the request after OPTIONS * on its connection: %v %v", resp, err)
	}
	// A path is no asterisk: OPTIONS of a route is a method it does not
	// take, and the asterisk is for OPTIONS only (fasthttp refuses it).
	req, _ := http.NewRequest("OPTIONS", e.base+"/v1/stats", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if b := readAll(t, resp); resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("OPTIONS /v1/stats: %d Allow %q %s, want 405 with Allow GET, HEAD", resp.StatusCode, resp.Header.Get("Allow"), b)
	}
	conn, _ = e.dial(t)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "GET * HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil {
		t.Fatal(err)
	} else {
		wantProblem(t, resp.StatusCode, resp.Header, readAll(t, resp), 400, "bad-request")
	}
}

// Every API route refuses a query parameter it does not document, naming
// it, before any work (TestBadInputIsRejectedAndChangesNothing checks that
// nothing changed); the probes, the metrics, the contract and the dashboard
// ignore query parameters.
func TestUnknownQueryParametersAreRefused(t *testing.T) {
	e := newEnv(t)
	ignoring := map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true, "/openapi.yaml": true, "/": true}
	doc := loadSpec(t)
	for _, path := range doc.Paths.InMatchingOrder() {
		for method := range doc.Paths.Value(path).Operations() {
			// A user that does not exist: were the parameter ignored, a
			// DELETE would erase no one.
			target := strings.NewReplacer("{ns}", "default", "{user}", "nobody").Replace(path) + "?zzz=1"
			status, h, body := e.raw(method, target, "application/json", []byte(`{}`))
			if ignoring[path] {
				if status != http.StatusOK {
					t.Errorf("%s %s: %d, want 200: %s", method, target, status, truncate(body))
				}
				continue
			}
			if status != http.StatusBadRequest {
				t.Errorf("%s %s: %d, want 400: %s", method, target, status, truncate(body))
				continue
			}
			p := problem(t, status, h, body)
			if p.Type != api.ProblemBase+"bad-request" || len(p.Errors) != 1 || p.Errors[0].Parameter != "zzz" ||
				!strings.HasPrefix(p.Detail, `unknown query parameter "zzz"; this route takes `) {
				t.Errorf("%s %s: %+v, want bad-request naming the parameter zzz", method, target, p)
			}
		}
	}
	// Each parameter not taken is named once; the one taken is not.
	status, h, body := e.raw(http.MethodPut, userPath("default", "nobody", "/export?mode=replace&mod=merge&x=1&x=2"),
		"application/octet-stream", []byte("x"))
	p := wantProblem(t, status, h, body, http.StatusBadRequest, "bad-request")
	if want := `unknown query parameters "mod", "x"; this route takes mode`; p.Detail != want || len(p.Errors) != 2 ||
		p.Errors[0].Parameter != "mod" || p.Errors[1].Parameter != "x" {
		t.Errorf("two unknown parameters: %+v, want detail %q and each named", p, want)
	}
	// An empty query is no parameter.
	for _, path := range []string{"/v1/stats?", "/v1/stats?&"} {
		if status, _, body := e.raw(http.MethodGet, path, "", nil); status != http.StatusOK {
			t.Errorf("GET %s: %d, want 200: %s", path, status, truncate(body))
		}
	}
	// The dashboard's files (not in openapi.yaml) take any.
	resp, err := http.Get(e.base + "/app.js?v=1")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /app.js?v=1: %d, want 200: %s", resp.StatusCode, truncate(body))
	}
}

// JSON is UTF-8 (RFC 8259, 8.1): a body sent as JSON in another charset,
// in any case, quoted or not, is refused with 415 unsupported-media-type
// naming that charset, and changes nothing: read as UTF-8, the Latin-1
// bytes of "cafÃ©" are "café", an id its sender never meant, and other
// Latin-1 bytes are no UTF-8 at all. charset=utf-8, in any case and quoted, is still JSON, and so is
// a charset=latin1 inside another parameter's quoted value.
func TestAJSONBodyInACharsetOtherThanUTF8IsRefused(t *testing.T) {
	e := newEnv(t)
	seen := userPath("default", "u", "/seen")
	latin1 := []byte("{\"items\":[\"caf\xc3\xa9\"]}") // "cafÃ©" in Latin-1
	for _, tc := range []struct{ ct, charset string }{
		{"application/json; charset=latin1", `"latin1"`},
		{"application/json;charset=ISO-8859-1", `"ISO-8859-1"`},
		{`application/json; charset="iso-8859-1"`, `"\"iso-8859-1\""`},
		{"application/json; charset = utf-16", `"utf-16"`},
		{"application/json; charset=utf-8; charset=latin1", `"latin1"`},
		{"application/json; CHARSET=utf-8x", `"utf-8x"`},
		{`application/json; charset="utf-8`, `"\"utf-8"`},
		{"application/vnd.seenapi+json; charset=windows-1252", `"windows-1252"`},
	} {
		status, h, body := e.raw("POST", seen, tc.ct, latin1)
		if status != http.StatusUnsupportedMediaType {
			t.Errorf("a body sent as %q: %d %s, want 415", tc.ct, status, truncate(body))
			continue
		}
		p := wantProblem(t, status, h, body, http.StatusUnsupportedMediaType, "unsupported-media-type")
		if !strings.Contains(p.Detail, "charset "+tc.charset) || !strings.Contains(p.Detail, "JSON is UTF-8") {
			t.Errorf("a body sent as %q: detail %q, want it to name charset %s and say JSON is UTF-8", tc.ct, p.Detail, tc.charset)
		}
		if len(p.Errors) != 1 || p.Errors[0].Parameter != "Content-Type" {
			t.Errorf("a body sent as %q: errors %+v, want one naming Content-Type", tc.ct, p.Errors)
		}
	}
	if st := e.stateOf("default", "u"); st != nil {
		t.Fatalf("a refused body recorded the user: %v", st)
	}
	for i, ct := range []string{"application/json; charset=utf-8", "application/json; Charset=UTF-8",
		`application/json; charset="utf-8"`, `application/json; charset="UTF\-8"`, "application/json ; charset=utf-8 ",
		`application/json; profile="x;charset=latin1"; charset=utf-8`, "application/json; charset",
		"application/json; charset=utf8", `application/json; charset="UTF8"`} {
		item := fmt.Sprintf(`{"items":["caf\u00e9-%d"]}`, i)
		if status, _, body := e.raw("POST", seen, ct, []byte(item)); status != http.StatusOK {
			t.Errorf("a body sent as %q: %d %s, want 200", ct, status, truncate(body))
		}
	}
}

// A request that expects "100 Continue" (RFC 9110, 10.1.1) with a body its
// route refuses for its type (415: not JSON, or compressed) is answered
// 415 at once: no "100 Continue", so its client never sends the body,
// which the service does not read, and the connection is closed (the
// client may send it all the same). fasthttp sent "100 Continue", read the
// body, and only then did the route refuse it. A JSON body, and an import
// (which takes any type), still get their "100 Continue".
func TestARequestExpectingContinueIsRefusedForItsTypeBeforeItsBody(t *testing.T) {
	e := newEnv(t, withKeys)
	body := `{"items":["x"]}`
	head := func(method, path, key, headers string) string {
		return method + " " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key + "\r\n" + headers +
			"Expect: 100-continue\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	}
	seen := userPath("default", "u", "/seen")
	// first sends header, waits for the first answer to it and returns it.
	first := func(t *testing.T, header string) (*http.Response, *bufio.Reader, net.Conn) {
		conn, _ := e.dial(t)
		io.WriteString(conn, header)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer to the header: %v", err)
		}
		return resp, br, conn
	}
	for _, tc := range []struct{ name, headers, detail string }{
		{"text", "Content-Type: text/plain\r\n", `Content-Type "text/plain"`},
		{"a form", "Content-Type: application/x-www-form-urlencoded\r\n", "send Content-Type: application/json"},
		{"no type", "", "no Content-Type"},
		{"JSON in Latin-1", "Content-Type: application/json; charset=latin1\r\n", `charset "latin1"`},
		{"compressed JSON", "Content-Type: application/json\r\nContent-Encoding: gzip\r\n", `Content-Encoding "gzip"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, br, conn := first(t, head("POST", seen, writeKey, tc.headers))
			b := readAll(t, resp)
			if resp.StatusCode == http.StatusContinue {
				t.Fatalf("the first answer is %q, want the 415 before any body", resp.Status)
			}
			p := wantProblem(t, resp.StatusCode, resp.Header, b, 415, "unsupported-media-type")
			if !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("detail %q, want it to say %q", p.Detail, tc.detail)
			}
			if !resp.Close {
				t.Errorf("the connection is kept open after a refusal whose body is unread")
			}
			// A client that sends the body anyway: it is no request.
			io.WriteString(conn, body)
			if next, err := http.ReadResponse(br, nil); err == nil {
				t.Errorf("another answer after the 415: %d %s", next.StatusCode, readAll(t, next))
			}
		})
	}
	// Nor does a request whose key is refused, whatever its body's size
	// (one past 4 KiB was not read already: readsNoBody).
	resp, _, _ := first(t, head("POST", seen, "unknown-key-0123456789abcdef", "Content-Type: application/json\r\n"))
	if b := readAll(t, resp); resp.StatusCode != 401 || !resp.Close {
		t.Errorf("an unknown key expecting 100-continue: the first answer is %d %s (closing: %v), want 401",
			resp.StatusCode, truncate(b), resp.Close)
	}
	if st := e.stateOf("default", "u"); st != nil {
		t.Fatalf("a refused request recorded the user: %v", st)
	}
	// A JSON body gets its "100 Continue", and is served.
	resp, br, conn := first(t, head("POST", seen, writeKey, "Content-Type: application/json\r\n"))
	if resp.StatusCode != http.StatusContinue {
		t.Fatalf("a JSON body expecting 100-continue: %d, want 100", resp.StatusCode)
	}
	io.WriteString(conn, body)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a JSON body after its 100 Continue: %v %v", resp, err)
	}
	// An import takes any type: its body is read (and refused here as no
	// export, which it is not).
	resp, br, conn = first(t, head("PUT", userPath("default", "v", "/export"), adminKey, "Content-Type: application/octet-stream\r\n"))
	if resp.StatusCode != http.StatusContinue {
		t.Fatalf("an import expecting 100-continue: %d, want 100", resp.StatusCode)
	}
	io.WriteString(conn, body)
	if resp, err := http.ReadResponse(br, nil); err != nil {
		t.Fatal(err)
	} else {
		wantProblem(t, resp.StatusCode, resp.Header, readAll(t, resp), 400, "bad-import")
	}
}

// A request whose framing says it has no body (neither Content-Length nor
// Transfer-Encoding, or a length of 0) has none to wait for: its
// "Expect: 100-continue" is ignored (RFC 9110, 10.1.1 lets a server omit
// the "100 Continue" then), and it is answered as without it, its
// connection kept, so that the requests pipelined after it are answered
// too. It was taken for a body its route refuses for its type (none
// given), or, on a service with keys, for one of a request whose key will
// be refused: answered, and the connection closed with the requests after
// it unanswered.
func TestABodylessRequestExpectingContinueKeepsItsConnection(t *testing.T) {
	const expect = "Expect: 100-continue\r\n"
	for _, tc := range []struct {
		name     string
		opts     []envOption
		requests []string
		want     []int
	}{
		{"open", nil, []string{
			"GET /healthz HTTP/1.1\r\nHost: x\r\n" + expect + "\r\n",
			"GET /v1/stats HTTP/1.1\r\nHost: x\r\n" + expect + "\r\n",
			"GET /app.js HTTP/1.1\r\nHost: x\r\n" + expect + "\r\n",
			"HEAD / HTTP/1.1\r\nHost: x\r\n" + expect + "\r\n",
			"POST " + userPath("default", "u", "/seen") + " HTTP/1.1\r\nHost: x\r\n" + expect + "Content-Length: 0\r\n\r\n",
			"POST " + userPath("default", "u", "/seen") + " HTTP/1.1\r\nHost: x\r\n" + expect +
				"Content-Type: application/json\r\nContent-Length: 0\r\n\r\n",
			"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n",
		}, []int{200, 200, 200, 200, 415, 400, 200}},
		{"with keys", []envOption{withKeys}, []string{
			"GET /v1/stats HTTP/1.1\r\nHost: x\r\n" + expect + "\r\n",
			"GET /v1/stats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + readKey + "\r\n" + expect + "\r\n",
			"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
		}, []int{401, 200, 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts...)
			conn, _ := e.dial(t)
			io.WriteString(conn, strings.Join(tc.requests, ""))
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(conn)
			for i, request := range tc.requests {
				line, _, _ := strings.Cut(request, "\r\n")
				method, _, _ := strings.Cut(line, " ")
				resp, err := http.ReadResponse(br, &http.Request{Method: method})
				if err != nil {
					t.Fatalf("%s: no answer: %v", line, err)
				}
				b := readAll(t, resp)
				if resp.StatusCode != tc.want[i] {
					t.Errorf("%s: %d %s, want %d", line, resp.StatusCode, truncate(b), tc.want[i])
				}
				if resp.Close && i < len(tc.requests)-1 {
					t.Fatalf("%s: %d with Connection: close, the requests after it unanswered", line, resp.StatusCode)
				}
			}
		})
	}
}

// TestBatchRefusesUserIDsNoPathReaches holds the batch's user field to the
// rules of the {user} path parameter: a user the batch stored under "." or
// ".." could never be read, exported or erased. The whole batch is refused,
// its good entries too, like a batch with any other bad entry.
func TestBatchRefusesUserIDsNoPathReaches(t *testing.T) {
	e := newEnv(t)
	for _, bad := range []string{".", ".."} {
		body := fmt.Sprintf(`{"requests":[{"user":"b0","candidates":["a"]},{"user":"b1","candidates":["a"]},`+
			`{"user":"b2","candidates":["a"]},{"user":%q,"candidates":["a","b"]}]}`, bad)
		status, h, b := e.raw("POST", "/v1/namespaces/default/filter", "application/json", []byte(body))
		if status != http.StatusBadRequest {
			t.Fatalf("user %q: status %d, want 400: %s", bad, status, truncate(b))
		}
		p := problem(t, status, h, b)
		if p.Type != api.ProblemBase+"bad-request" || len(p.Errors) != 1 || p.Errors[0].Pointer != "/requests/3/user" {
			t.Errorf("user %q: %s %+v, want bad-request at /requests/3/user", bad, p.Type, p.Errors)
		}
		for _, u := range []string{"b0", "b1", "b2", bad} {
			if _, err := e.hot.User("default", u); !errors.Is(err, eviction.ErrUserNotFound) {
				t.Errorf("after the refused batch with %q, user %q: %v, want not found", bad, u, err)
			}
		}
	}
}

// Every route that takes a JSON body takes it as JSON only: sent as a
// form (curl's default), as text (what a page of any site may send
// without asking first), or without a Content-Type, it is refused with 415
// unsupported-media-type saying what to send, and changes nothing.
// application/json with parameters, in any case, and application/*+json
// are JSON; an import still takes its bytes as application/octet-stream.
func TestABodyNotSentAsJSONIsRefused(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	filter(t, c, "compact", "victim", client.FilterRequest{Candidates: []string{"a", "b", "c"}})
	before := e.stateOf("compact", "victim")
	victim := userPath("compact", "victim", "")
	routes := []struct{ method, path, body string }{
		{"POST", victim + "/filter", `{"candidates":["z"]}`},
		{"POST", victim + "/seen", `{"items":["z"]}`},
		{"POST", victim + "/check", `{"items":["z"]}`},
		{"DELETE", victim + "/items", `{"items":["a"]}`},
		{"POST", "/v1/namespaces/compact/filter", `{"requests":[{"user":"newcomer","candidates":["z"]},{"user":"victim","candidates":["z"]}]}`},
	}
	for _, ct := range []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/octet-stream", "application/jsonp", "json", "application/"} {
		for _, r := range routes {
			status, h, body := e.raw(r.method, r.path, ct, []byte(r.body))
			if status != http.StatusUnsupportedMediaType {
				t.Errorf("%s %s sent as %q: %d %s, want 415", r.method, r.path, ct, status, truncate(body))
				continue
			}
			p := wantProblem(t, status, h, body, http.StatusUnsupportedMediaType, "unsupported-media-type")
			if !strings.Contains(p.Detail, "send Content-Type: application/json") {
				t.Errorf("%s %s sent as %q: detail %q does not say what to send", r.method, r.path, ct, p.Detail)
			}
		}
	}
	if after := e.stateOf("compact", "victim"); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused body changed the victim:\nbefore %v\nafter  %v", before, after)
	}
	if st := e.stateOf("compact", "newcomer"); st != nil {
		t.Fatalf("a refused batch created a user: %v", st)
	}
	for i, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8",
		"application/vnd.seenapi+json"} {
		item := fmt.Sprintf(`{"items":["ok-%d"]}`, i)
		if status, _, body := e.raw("POST", victim+"/seen", ct, []byte(item)); status != http.StatusOK {
			t.Errorf("a body sent as %q: %d %s, want 200", ct, status, truncate(body))
		}
	}
	exported, err := c.ExportUserWithResponse(ctx, "compact", "victim")
	if err != nil || exported.StatusCode() != http.StatusOK {
		t.Fatalf("export: %v %d", err, exported.StatusCode())
	}
	if status, _, body := e.raw("PUT", victim+"/export", "application/octet-stream", exported.Body); status != http.StatusNoContent {
		t.Fatalf("an import as application/octet-stream: %d %s, want 204", status, truncate(body))
	}
}
