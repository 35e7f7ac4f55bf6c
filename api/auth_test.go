package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/client"
)

func TestNoKeyIs401WithChallenge(t *testing.T) {
	e := newEnv(t, withKeys)
	for _, path := range []string{"/v1/stats", "/v1/namespaces", "/metrics", userPath("default", "u", "")} {
		status, h, body := e.raw("GET", path, "", nil)
		if status != http.StatusUnauthorized {
			t.Fatalf("GET %s without a key: %d", path, status)
		}
		if p := problem(t, status, h, body); p.Type != api.ProblemBase+"unauthorized" {
			t.Fatalf("type %s", p.Type)
		}
		if h.Get("WWW-Authenticate") == "" {
			t.Fatalf("401 without WWW-Authenticate")
		}
	}
}

func TestUnknownKeyOrSchemeIs401(t *testing.T) {
	e := newEnv(t, withKeys)
	for _, auth := range []string{"Bearer nope-nope-nope-nope-nope", "Bearer " + adminKey + "x", "Basic " + adminKey, adminKey, "Bearer "} {
		status, h, body := e.raw("GET", "/v1/stats", "", nil, "Authorization", auth)
		if status != http.StatusUnauthorized {
			t.Fatalf("%q: %d, want 401", auth, status)
		}
		problem(t, status, h, body)
	}
}

func TestReadKeyCannotWrite(t *testing.T) {
	e := newEnv(t, withKeys)
	filter(t, e.client(writeKey), "default", "u", client.FilterRequest{Candidates: []string{"a"}})
	before := e.stateOf("default", "u")
	r := e.client(readKey)
	f, err := r.FilterUserWithResponse(ctx, "default", "u", nil, client.FilterRequest{Candidates: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	if f.ApplicationproblemJSON403 == nil || f.ApplicationproblemJSON403.Type != api.ProblemBase+"forbidden" {
		t.Fatalf("read key on the one call: %d %s", f.StatusCode(), f.Body)
	}
	if after := e.stateOf("default", "u"); !reflect.DeepEqual(before, after) {
		t.Fatalf("a forbidden call changed the user: %v -> %v", before, after)
	}
	if s, _ := r.GetStatsWithResponse(ctx); s.JSON200 == nil {
		t.Fatalf("read key on stats: %d", s.StatusCode())
	}
	if c, _ := r.CheckSeenWithResponse(ctx, "default", "u", client.ItemsRequest{Items: []string{"a"}}); c.JSON200 == nil || !c.JSON200.Seen[0] {
		t.Fatalf("read key on check: %d %s", c.StatusCode(), c.Body)
	}
}

func TestWriteImpliesReadButNotAdmin(t *testing.T) {
	e := newEnv(t, withKeys)
	w := e.client(writeKey)
	filter(t, w, "default", "u", client.FilterRequest{Candidates: []string{"a"}})
	if u, _ := w.GetUserWithResponse(ctx, "default", "u"); u.JSON200 == nil {
		t.Fatalf("write key reading stats: %d", u.StatusCode())
	}
	if d, _ := w.ForgetUserWithResponse(ctx, "default", "u"); d.ApplicationproblemJSON403 == nil {
		t.Fatalf("write key erasing a user: %d", d.StatusCode())
	}
	if x, _ := w.ExportUserWithResponse(ctx, "default", "u"); x.ApplicationproblemJSON403 == nil {
		t.Fatalf("write key exporting: %d", x.StatusCode())
	}
	before := e.stateOf("default", "u")
	if before == nil {
		t.Fatal("a forbidden erase erased the user")
	}
	// Importing over a user, which replaces its history, is an admin's too.
	a := e.client(adminKey)
	filter(t, a, "default", "other", client.FilterRequest{Candidates: []string{"z"}})
	other, err := a.ExportUserWithResponse(ctx, "default", "other")
	if err != nil || other.StatusCode() != http.StatusOK {
		t.Fatalf("admin export: %v %d", err, other.StatusCode())
	}
	im, err := w.ImportUserWithBodyWithResponse(ctx, "default", "u", &client.ImportUserParams{Mode: ptr(client.Replace)},
		"application/octet-stream", bytes.NewReader(other.Body))
	if err != nil || im.ApplicationproblemJSON403 == nil || im.ApplicationproblemJSON403.Type != api.ProblemBase+"forbidden" {
		t.Fatalf("write key importing: %v %d %s", err, im.StatusCode(), im.Body)
	}
	if after := e.stateOf("default", "u"); !reflect.DeepEqual(before, after) {
		t.Fatalf("a forbidden import changed the user: %v -> %v", before, after)
	}
}

func TestAdminCanDoEverything(t *testing.T) {
	e := newEnv(t, withKeys)
	a := e.client(adminKey)
	filter(t, a, "default", "u", client.FilterRequest{Candidates: []string{"a"}})
	if s, _ := a.GetStatsWithResponse(ctx); s.JSON200 == nil {
		t.Fatalf("admin stats: %d", s.StatusCode())
	}
	if x, _ := a.ExportUserWithResponse(ctx, "default", "u"); x.StatusCode() != http.StatusOK {
		t.Fatalf("admin export: %d", x.StatusCode())
	}
	if d, _ := a.ForgetUserWithResponse(ctx, "default", "u"); d.StatusCode() != http.StatusNoContent {
		t.Fatalf("admin erase: %d %s", d.StatusCode(), d.Body)
	}
}

func TestOpenServerNeedsNoKey(t *testing.T) {
	e := newEnv(t)
	if !e.srv.Open() {
		t.Fatal("a server without keys must say it is open")
	}
	if d, _ := e.client("").ForgetUserWithResponse(ctx, "default", "u"); d.StatusCode() != http.StatusNoContent {
		t.Fatalf("open server erase: %d %s", d.StatusCode(), d.Body)
	}
}

// A client without a key (the dashboard, at its load) learns from GET
// /healthz whether it needs one, and that answer is no error of the
// service's: a keyless GET /v1/auth, its 401 counted in errors, would add
// one for every such load. It says nothing else of the keys.
func TestHealthSaysWhetherAKeyIsNeeded(t *testing.T) {
	for name, c := range map[string]struct {
		opts []envOption
		want bool
	}{"keys": {[]envOption{withKeys}, true}, "open": {nil, false}} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, c.opts...)
			for _, path := range []string{"/healthz", "/readyz"} {
				status, _, body := e.raw("GET", path, "", nil)
				var got map[string]any
				if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil || got["key_required"] != c.want || len(got) != 2 {
					t.Errorf("GET %s without a key: %d %s, want 200 with key_required %v beside its status alone", path, status, body, c.want)
				}
			}
			st, err := e.client(adminKey).GetStatsWithResponse(ctx)
			if err != nil || st.JSON200 == nil {
				t.Fatalf("stats: %v", err)
			}
			if len(st.JSON200.Errors) != 0 {
				t.Errorf("the service counts errors %v", st.JSON200.Errors)
			}
		})
	}
}

func TestAuthAnswersTheRoleOfEachKey(t *testing.T) {
	e := newEnv(t, withKeys)
	for _, k := range []struct {
		key  string
		want client.Role
	}{{readKey, client.Read}, {writeKey, client.Write}, {adminKey, client.Admin}} {
		t.Run(string(k.want), func(t *testing.T) {
			r, err := e.client(k.key).GetAuthWithResponse(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r.JSON200 == nil {
				t.Fatalf("auth with a %s key: %d %s", k.want, r.StatusCode(), r.Body)
			}
			if r.JSON200.Role != k.want || r.JSON200.Open {
				t.Fatalf("auth with a %s key: %+v, want role %s, open false", k.want, *r.JSON200, k.want)
			}
		})
	}
}

// GET /v1/auth says the longest user id the service takes, so that a client
// (the dashboard's look-up) refuses a longer one before it is sent: an id of
// that many bytes is taken, one more byte is refused.
func TestAuthSaysTheLongestUserID(t *testing.T) {
	e := newEnv(t, withKeys, func(c *api.Config) { c.MaxUserBytes = 20 })
	n := authOf(t, e, readKey).MaxUserBytes
	if n != 20 {
		t.Fatalf("auth says max_user_bytes %d, want 20", n)
	}
	for _, c := range []struct {
		user string
		want int
	}{{strings.Repeat("é", n/2), http.StatusNotFound}, {strings.Repeat("é", n/2) + "x", http.StatusBadRequest}} {
		if status, _, body := e.raw("GET", userPath("default", c.user, ""), "", nil, "Authorization", "Bearer "+readKey); status != c.want {
			t.Errorf("a user id of %d bytes: %d %s, want %d", len(c.user), status, body, c.want)
		}
	}
}

// GET /v1/auth says the most users a batch call may name, so that a
// recommender splits a page of users into batches before one is refused:
// a batch of that many (a user named twice counting twice) is served, one
// more user refused.
func TestAuthSaysTheUsersABatchTakes(t *testing.T) {
	e := newEnv(t, withKeys, func(c *api.Config) { c.MaxBatchUsers = 3 })
	n := authOf(t, e, writeKey).MaxBatchUsers
	if n != 3 {
		t.Fatalf("auth says max_batch_users %d, want 3", n)
	}
	page := []client.BatchFilterEntry{{User: "a", Candidates: []string{"x"}}, {User: "b", Candidates: []string{"x"}},
		{User: "a", Candidates: []string{"y"}}, {User: "c", Candidates: []string{"x"}}}
	b, err := e.client(writeKey).FilterBatchWithResponse(ctx, "default", nil, client.BatchFilterRequest{Requests: page[:n]})
	if err != nil || b.JSON200 == nil || len(b.JSON200.Results) != n {
		t.Fatalf("a batch of %d users: %v %d %s, want their results", n, err, b.StatusCode(), b.Body)
	}
	body, _ := json.Marshal(client.BatchFilterRequest{Requests: page[:n+1]})
	status, h, raw := e.raw(http.MethodPost, "/v1/namespaces/default/filter", "application/json", body, "Authorization", "Bearer "+writeKey)
	wantProblem(t, status, h, raw, http.StatusRequestEntityTooLarge, "too-many-users")
}

// authOf is GET /v1/auth's answer to key.
func authOf(t *testing.T, e *env, key string) *client.Auth {
	t.Helper()
	r, err := e.client(key).GetAuthWithResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.JSON200 == nil {
		t.Fatalf("auth: %d %s", r.StatusCode(), r.Body)
	}
	return r.JSON200
}

// The auth answer says the service's limits on the body of one call and
// on each item, so that a client (the dashboard) can refuse a list of many
// long items before the service refuses it whole: the defaults, and those
// configured, keyed or open. A body at the limit it says is taken, one a
// byte over it refused.
func TestAuthSaysTheBodyAndItemLimits(t *testing.T) {
	for _, c := range []struct {
		name           string
		key            string
		opts           []envOption
		wantBody, item int
	}{
		{"default", readKey, []envOption{withKeys}, api.DefaultMaxBodyBytes, api.DefaultMaxItemBytes},
		{"configured", writeKey, []envOption{withKeys, func(c *api.Config) { c.MaxBodyBytes, c.MaxItemBytes = 300, 20 }}, 300, 20},
		{"open", "", []envOption{func(c *api.Config) { c.MaxBodyBytes, c.MaxItemBytes = 400, 30 }}, 400, 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.opts...)
			if a := authOf(t, e, c.key); a.MaxBodyBytes != c.wantBody || a.MaxItemBytes != c.item {
				t.Fatalf("auth says max_body_bytes %d, max_item_bytes %d; want %d, %d",
					a.MaxBodyBytes, a.MaxItemBytes, c.wantBody, c.item)
			}
			// Items of the most bytes the answer allows, until the body
			// is of size bytes to the byte.
			body := func(size int) []byte {
				var items []string
				total := len(`{"items":[]}`)
				for total < size {
					over := 2 // its quotes, and a comma before all but the first
					if len(items) > 0 {
						over++
					}
					n := min(c.item, size-total-over)
					if left := size - total - over - n; left > 0 && left < 4 {
						n -= 4 // the next item, of at least one byte, takes the rest
					}
					items = append(items, strings.Repeat("x", n))
					total += over + n
				}
				b, err := json.Marshal(map[string][]string{"items": items})
				if err != nil || len(b) != size {
					t.Fatalf("made a body of %d bytes (%v), want %d", len(b), err, size)
				}
				return b
			}
			for _, size := range []int{c.wantBody, c.wantBody + 1} {
				if size > c.wantBody && size > 64<<10 {
					// Refused from its Content-Length, before it is read: the
					// client, still writing a large one, may find the
					// connection reset before it reads the 413.
					continue
				}
				s, err := e.client(c.key).CheckSeenWithBodyWithResponse(ctx, "default", "u", "application/json", bytes.NewReader(body(size)))
				if err != nil {
					t.Fatal(err)
				}
				if want := map[bool]int{true: http.StatusOK, false: http.StatusRequestEntityTooLarge}[size <= c.wantBody]; s.StatusCode() != want {
					t.Errorf("a check of a %d-byte body: %d %s, want %d", size, s.StatusCode(), s.Body, want)
				}
			}
		})
	}
}

// The auth answer says the service's limit on the items of one call, so
// that a client (the dashboard) can split a longer list before it is
// refused: the default, and one configured, keyed or open.
func TestAuthSaysTheItemsOneCallMaySend(t *testing.T) {
	for _, c := range []struct {
		name string
		key  string
		opts []envOption
		want int
	}{
		{"default", readKey, []envOption{withKeys}, api.DefaultMaxCandidates},
		{"configured", writeKey, []envOption{withKeys, func(c *api.Config) { c.MaxCandidates = 3 }}, 3},
		{"open", "", []envOption{func(c *api.Config) { c.MaxCandidates = 7 }}, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.opts...)
			r, err := e.client(c.key).GetAuthWithResponse(ctx)
			if err != nil || r.JSON200 == nil {
				t.Fatalf("auth: %v %s", err, r.Body)
			}
			if r.JSON200.MaxCandidates != c.want {
				t.Errorf("auth says max_candidates %d, want %d", r.JSON200.MaxCandidates, c.want)
			}
			if c.want >= api.DefaultMaxCandidates {
				return // more is outside the contract's maxItems, which the test's client refuses to send
			}
			items := make([]string, c.want+1)
			for i := range items {
				items[i] = fmt.Sprint("i", i)
			}
			if s, _ := e.client(c.key).CheckSeenWithResponse(ctx, "default", "u", client.ItemsRequest{Items: items}); s.StatusCode() != http.StatusRequestEntityTooLarge {
				t.Errorf("a check of %d items: %d %s, want 413", len(items), s.StatusCode(), s.Body)
			}
		})
	}
}

func TestAuthRefusesAWrongKeyOrNone(t *testing.T) {
	e := newEnv(t, withKeys)
	for _, key := range []string{"wrong-key-0123456789abcdef", adminKey + "x", ""} {
		r, err := e.client(key).GetAuthWithResponse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.ApplicationproblemJSON401 == nil || r.ApplicationproblemJSON401.Type != api.ProblemBase+"unauthorized" {
			t.Fatalf("auth with key %q: %d %s, want 401 unauthorized", key, r.StatusCode(), r.Body)
		}
		if r.HTTPResponse.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("auth with key %q: 401 without WWW-Authenticate", key)
		}
	}
}

func TestAuthOnAnOpenServerIsAdmin(t *testing.T) {
	e := newEnv(t)
	for _, key := range []string{"", "any-key-0123456789abcdef"} {
		r, err := e.client(key).GetAuthWithResponse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.JSON200 == nil || r.JSON200.Role != client.Admin || !r.JSON200.Open {
			t.Fatalf("auth on an open server with key %q: %d %s, want role admin, open true", key, r.StatusCode(), r.Body)
		}
	}
}

// Keys rotate while the service runs: the replaced key is refused at once,
// the new one works; a keyed service cannot be made open, nor an open one
// keyed, and bad keys leave the old ones in place.
func TestSetKeysRotatesWhileServing(t *testing.T) {
	e := newEnv(t, withKeys)
	const newWrite = "w-rotated-0123456789"
	if err := e.srv.SetKeys([]api.Key{{Role: api.RoleWrite, Secret: newWrite}, {Role: api.RoleAdmin, Secret: adminKey}}); err != nil {
		t.Fatal(err)
	}
	f, err := e.client(writeKey).FilterUserWithResponse(ctx, "default", "u", nil, client.FilterRequest{Candidates: []string{"a"}})
	if err != nil || f.ApplicationproblemJSON401 == nil {
		t.Fatalf("the replaced write key: %v %d", err, f.StatusCode())
	}
	filter(t, e.client(newWrite), "default", "u", client.FilterRequest{Candidates: []string{"a"}})
	for name, keys := range map[string][]api.Key{
		"none":  nil,
		"short": {{Role: api.RoleWrite, Secret: "short"}},
		"twice": {{Role: api.RoleWrite, Secret: newWrite}, {Role: api.RoleRead, Secret: newWrite}},
	} {
		if err := e.srv.SetKeys(keys); !errors.Is(err, api.ErrBadKeys) {
			t.Errorf("%s: SetKeys %v, want ErrBadKeys", name, err)
		}
	}
	filter(t, e.client(newWrite), "default", "u", client.FilterRequest{Candidates: []string{"b"}})

	open := newEnv(t)
	if err := open.srv.SetKeys(testKeys); !errors.Is(err, api.ErrBadKeys) || !open.srv.Open() {
		t.Fatalf("an open service given keys: %v, open %v", err, open.srv.Open())
	}
}

// A browser's write from a page of another origin is refused before it
// changes anything, on an open service too (where every caller is admin):
// a POST of text/plain needs no preflight, so any web page could otherwise
// record impressions. Reads, same-origin writes (the dashboard's) and
// clients that are not browsers (neither header) are served, and so are
// writes a browser sends another origin only after a CORS preflight, which
// the service never allows: without Sec-Fetch-Site, which browsers do not
// send to a page served by plain HTTP under a name, those are the
// dashboard's own behind a proxy passing on its upstream's Host (nginx's
// proxy_pass), which the Origin of the proxy's page never matches.
func TestCrossOriginBrowserWritesAreRefused(t *testing.T) {
	e := newEnv(t)
	self := e.base // the Origin of the service's own pages
	seen := userPath("default", "victim", "/seen")
	body := []byte(`{"items":["evil-item"]}`)
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   []byte
		header []string
		status int
	}{
		{"another site", "POST", seen, body, []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}, 403},
		{"another port of the same host", "POST", seen, body, []string{"Origin", "http://127.0.0.1:1", "Sec-Fetch-Site", "same-site"}, 403},
		{"another origin, no Sec-Fetch-Site", "POST", seen, body, []string{"Origin", "http://evil.example"}, 403},
		{"an erase from another origin", "DELETE", userPath("default", "victim", ""), nil, []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"a read from another origin", "GET", userPath("default", "victim", ""), nil, []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, b := e.raw(tc.method, tc.path, "text/plain", tc.body, tc.header...)
			if tc.status != 403 {
				if status != tc.status {
					t.Fatalf("status %d, want %d: %s", status, tc.status, b)
				}
				return
			}
			p := wantProblem(t, status, h, b, 403, "forbidden")
			if !strings.Contains(p.Detail, "another origin") {
				t.Fatalf("detail %q", p.Detail)
			}
			if st := e.stateOf("default", "victim"); st != nil {
				t.Fatalf("a refused write created the user: %v", st)
			}
		})
	}
	// The service's own page, the dashboard behind a proxy (a JSON body),
	// and a client that is no browser, may write.
	proxied := "http://seen.example"
	for i, header := range [][]string{
		{"Origin", self, "Sec-Fetch-Site", "same-origin"},
		{"Origin", self},
		{"Origin", proxied},
		nil,
	} {
		item := fmt.Sprintf(`{"items":["ok-%d"]}`, i)
		if status, _, b := e.raw("POST", seen, "application/json", []byte(item), header...); status != 200 {
			t.Fatalf("write %d with %v: status %d: %s", i, header, status, b)
		}
	}
	if st := e.stateOf("default", "victim"); st == nil || st["items"] != float64(4) {
		t.Fatalf("the allowed writes: %v", st)
	}
}

// A service open to every caller on loopback (LocalOnly) answers loopback
// names only: a page whose own name resolves to 127.0.0.1 (DNS rebinding)
// is same-origin in the browser, and the Host it sends is that name.
func TestLocalOnlyRefusesOtherHostNames(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.LocalOnly = true })
	port := e.base[strings.LastIndex(e.base, ":")+1:]
	seen := userPath("default", "victim", "/seen")
	for host, want := range map[string]int{
		"evil.example:" + port: 403, "evil.example": 403, "127.0.0.1.nip.io:" + port: 403,
		"localhost:" + port: 200, "127.0.0.1:" + port: 200, "[::1]:" + port: 200, "app.localhost:" + port: 200,
	} {
		item := fmt.Sprintf(`{"items":[%q]}`, host)
		status, h, b := e.raw("POST", seen, "application/json", []byte(item), "Host", host, "Origin", "http://"+host)
		if status != want {
			t.Errorf("Host %s: %d, want %d: %s", host, status, want, b)
			continue
		}
		if want == 403 {
			if p := wantProblem(t, status, h, b, 403, "forbidden"); !strings.Contains(p.Detail, "DNS rebinding") {
				t.Errorf("Host %s: detail %q", host, p.Detail)
			}
		}
	}
	if st := e.stateOf("default", "victim"); st == nil || st["items"] != float64(4) {
		t.Errorf("the loopback names' writes: %v, want 4 items", st)
	}
	// Reads by another name are refused too; the probes are not (they
	// tell a page nothing of the data).
	if status, _, _ := e.raw("GET", "/v1/stats", "", nil, "Host", "evil.example"); status != 403 {
		t.Errorf("GET /v1/stats by another name: %d, want 403", status)
	}
	if status, _, _ := e.raw("GET", "/healthz", "", nil, "Host", "evil.example"); status != 200 {
		t.Errorf("GET /healthz by another name: %d, want 200", status)
	}
	// A request that names no host (HTTP/1.0 without Host) is refused
	// too: empty is no loopback name. (A Host given empty is refused 400
	// before any route: TestRequestWithoutOrWithTwoHostsIsRefusedAndItsConnectionClosed.)
	for _, request := range []string{
		"GET /v1/stats HTTP/1.0\r\n\r\n",
	} {
		conn, _ := e.dial(t)
		io.WriteString(conn, request)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%q: %v", request, err)
		}
		if p := wantProblem(t, resp.StatusCode, resp.Header, readAll(t, resp), 403, "forbidden"); !strings.Contains(p.Detail, "DNS rebinding") {
			t.Errorf("%q: detail %q", request, p.Detail)
		}
	}
	// Every operation but the probes, the document and the dashboard is
	// refused by another name, with a 403 its operation lists (raw checks
	// the answer against the document).
	open := map[string]bool{"/healthz": true, "/readyz": true, "/openapi.yaml": true, "/": true}
	for path, item := range loadSpec(t).Paths.Map() {
		for method := range item.Operations() {
			if open[path] {
				continue
			}
			p := strings.NewReplacer("{ns}", "default", "{user}", "victim").Replace(path)
			if status, _, b := e.raw(method, p, "application/json", []byte(`{}`), "Host", "evil.example"); status != 403 {
				t.Errorf("%s %s by another name: %d %s, want 403", method, path, status, b)
			}
		}
	}
}
