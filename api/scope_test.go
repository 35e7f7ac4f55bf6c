package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/client"
)

const (
	feedWriteKey    = "feed-write-key-0123456789abcdef"
	compactAdminKey = "compact-admin-key-0123456789abcdef"
)

// withScopedKeys adds to the test keys a write key limited to "default"
// and an admin key limited to "compact" and "bloom".
func withScopedKeys(c *api.Config) {
	c.Keys = append(slices.Clone(testKeys),
		api.Key{Role: api.RoleWrite, Secret: feedWriteKey, Namespaces: []string{"default"}},
		api.Key{Role: api.RoleAdmin, Secret: compactAdminKey, Namespaces: []string{"bloom", "compact"}})
}

// A key limited to some namespaces calls their routes as its role allows,
// and is refused (403 forbidden, changing nothing) the routes of any other
// namespace and the backup; the routes of no namespace (figures, the list
// of namespaces, its role) answer it.
func TestAKeyLimitedToNamespacesCallsOnlyTheirRoutes(t *testing.T) {
	e := newEnv(t, withScopedKeys)
	feed, compact, admin := e.client(feedWriteKey), e.client(compactAdminKey), e.client(adminKey)
	req := client.FilterRequest{Candidates: []string{"a", "b"}}

	filter(t, feed, "default", "u1", req)
	filter(t, compact, "compact", "u1", req)
	refused := func(what string, status int, h http.Header, body []byte, detail string) {
		t.Helper()
		p := wantProblem(t, status, h, body, http.StatusForbidden, "forbidden")
		if !strings.Contains(p.Detail, detail) {
			t.Errorf("%s: detail %q, want %q", what, p.Detail, detail)
		}
	}
	limitedToDefault := `limited to the namespaces default, not "compact"`
	r, err := feed.FilterUserWithResponse(ctx, "compact", "u2", nil, req)
	if err != nil {
		t.Fatal(err)
	}
	refused("the one call", r.StatusCode(), r.HTTPResponse.Header, r.Body, limitedToDefault)
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, userPath("compact", "u1", "/seen"), `{"items":["c"]}`},
		{http.MethodPost, userPath("compact", "u1", "/check"), `{"items":["a"]}`},
		{http.MethodDelete, userPath("compact", "u1", "/items"), `{"items":["a"]}`},
		{http.MethodGet, userPath("compact", "u1", ""), ""},
		{http.MethodGet, "/v1/namespaces/compact", ""},
		{http.MethodGet, "/v1/namespaces/compact/users", ""},
		{http.MethodPost, "/v1/namespaces/compact/filter", `{"requests":[{"user":"u1","candidates":["c"]}]}`},
		{http.MethodGet, "/v1/namespaces/nope", ""}, // unknown: refused for the key all the same
	} {
		ct := ""
		if c.body != "" {
			ct = "application/json"
		}
		status, h, body := e.raw(c.method, c.path, ct, []byte(c.body), "Authorization", "Bearer "+feedWriteKey)
		want := limitedToDefault
		if strings.Contains(c.path, "nope") {
			want = `not "nope"`
		}
		refused(c.method+" "+c.path, status, h, body, want)
	}
	// What the refused calls would have changed, unchanged.
	if st := e.stateOf("compact", "u1"); st["items"] != 2.0 {
		t.Errorf("compact/u1 after refused calls: %v items, want 2", st["items"])
	}
	if u, _ := admin.GetUserWithResponse(ctx, "compact", "u2"); u.StatusCode() != http.StatusNotFound {
		t.Errorf("compact/u2 after a refused one call: %d", u.StatusCode())
	}

	// The routes of no namespace answer it, showing its namespaces only
	// (the service's totals stay whole).
	names := func(c *client.ClientWithResponses) []string {
		t.Helper()
		l, err := c.ListNamespacesWithResponse(ctx)
		if err != nil || l.JSON200 == nil {
			t.Fatalf("list namespaces: %v %d", err, l.StatusCode())
		}
		var out []string
		for _, n := range l.JSON200.Namespaces {
			out = append(out, n.Name)
		}
		return out
	}
	if got := names(feed); !slices.Equal(got, []string{"default"}) {
		t.Errorf("the namespaces listed to the key limited to default: %v", got)
	}
	if got := names(admin); len(got) != len(testNamespaces()) {
		t.Errorf("the namespaces listed to a key of every namespace: %v", got)
	}
	figures := func(c *client.ClientWithResponses) (shares []string, calls int64) {
		t.Helper()
		st, err := c.GetStatsWithResponse(ctx)
		if err != nil || st.JSON200 == nil {
			t.Fatalf("stats: %v %d", err, st.StatusCode())
		}
		for ns := range st.JSON200.Namespaces {
			shares = append(shares, ns)
		}
		slices.Sort(shares)
		return shares, st.JSON200.Calls["POST /v1/namespaces/{ns}/users/{user}/filter"]
	}
	limited, limitedCalls := figures(feed)
	all, allCalls := figures(admin)
	if !slices.Equal(limited, []string{"default"}) || !slices.Contains(all, "compact") {
		t.Errorf("the namespaces' figures: %v to the limited key, %v to the admin key", limited, all)
	}
	if limitedCalls != allCalls || allCalls < 3 {
		t.Errorf("the service's calls: %d to the limited key, %d to the admin key; want the same, at least 3", limitedCalls, allCalls)
	}
	// /metrics likewise: each namespace's series for its namespaces only,
	// the service's totals whole.
	scrape := func(key string) string {
		t.Helper()
		status, _, body := e.raw(http.MethodGet, "/metrics", "", nil, "Authorization", "Bearer "+key)
		if status != http.StatusOK {
			t.Fatalf("/metrics: %d %s", status, body)
		}
		return string(body)
	}
	limitedMetrics, allMetrics := scrape(feedWriteKey), scrape(adminKey)
	for _, want := range []string{`seenapi_namespace_hot_users{namespace="default"}`, "seenapi_hot_users ", "go_goroutines "} {
		if !strings.Contains(limitedMetrics, want) {
			t.Errorf("/metrics to the key limited to default lacks %s", want)
		}
	}
	if strings.Contains(limitedMetrics, `namespace="compact"`) || !strings.Contains(allMetrics, `seenapi_namespace_hot_users{namespace="compact"}`) {
		t.Errorf(`namespace="compact" in /metrics: %v to the limited key, %v to the admin key; want false, true`,
			strings.Contains(limitedMetrics, `namespace="compact"`), strings.Contains(allMetrics, `namespace="compact"`))
	}
	a, err := feed.GetAuthWithResponse(ctx)
	if err != nil || a.JSON200 == nil || a.JSON200.Namespaces == nil || !slices.Equal(*a.JSON200.Namespaces, []string{"default"}) {
		t.Fatalf("GET /v1/auth: %v %s, want namespaces [default]", err, a.Body)
	}
	if a, _ := admin.GetAuthWithResponse(ctx); a.JSON200 == nil || a.JSON200.Namespaces != nil {
		t.Fatalf("GET /v1/auth of a key of every namespace: %s", a.Body)
	}

	// An admin key limited to compact and bloom erases there only, and
	// takes no backup.
	if r, err := compact.ForgetUserWithResponse(ctx, "default", "u1"); err != nil || r.StatusCode() != http.StatusForbidden {
		t.Fatalf("erase in default with the compact admin key: %v %d", err, r.StatusCode())
	}
	if st := e.stateOf("default", "u1"); st["items"] != 2.0 {
		t.Errorf("default/u1 after a refused erase: %v items", st["items"])
	}
	if r, err := compact.ForgetUserWithResponse(ctx, "compact", "u1"); err != nil || r.StatusCode() != http.StatusNoContent {
		t.Fatalf("erase in compact with its admin key: %v %d", err, r.StatusCode())
	}
	status, h, body := e.raw(http.MethodGet, "/v1/backup", "", nil, "Authorization", "Bearer "+compactAdminKey)
	refused("the backup", status, h, body, "a backup holds every namespace")
	status, h, body = e.raw(http.MethodDelete, "/v1/namespaces/default", "", nil, "Authorization", "Bearer "+compactAdminKey)
	refused("a purge", status, h, body, `limited to the namespaces bloom, compact, not "default"`)
	if status, _, _ := e.raw(http.MethodGet, "/v1/backup", "", nil, "Authorization", "Bearer "+adminKey); status != http.StatusOK {
		t.Fatalf("backup with the admin key of every namespace: %d", status)
	}
}

// A request goes by the key it was admitted with to its end: keys reloaded
// while it is served (a SIGHUP that takes the key out) must not make a key
// limited to some namespaces one of no limit, for the figures by namespace
// or a backup that holds every namespace.
//
// The requests run for 2 s and until enough of them were served with the
// key and refused without it, that is, interleaved with the reloads: a
// loaded machine (the race detector, other tests beside) makes far fewer
// of either in 2 s.
func TestAKeyLimitedToNamespacesStaysLimitedWhileTheKeysAreReloaded(t *testing.T) {
	e := newEnv(t, withScopedKeys)
	var with, without []api.Key
	cfg := api.Config{}
	withScopedKeys(&cfg)
	with = cfg.Keys
	for _, k := range with {
		if k.Secret != compactAdminKey {
			without = append(without, k)
		}
	}
	var served, refused, leaked atomic.Int64
	stop := make(chan struct{})
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		for i := 0; ; i++ {
			select {
			case <-stop:
				e.srv.SetKeys(with)
				return
			default:
			}
			keys := with
			if i%2 == 1 {
				keys = without
			}
			if err := e.srv.SetKeys(keys); err != nil {
				t.Error(err)
				return
			}
			runtime.Gosched()
		}
	}()
	const enough = 20
	start := time.Now()
	more := func() bool {
		since := time.Since(start)
		return since < 2*time.Second || since < time.Minute && (served.Load() < enough || refused.Load() < enough)
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{}
			for more() && leaked.Load() == 0 {
				for _, path := range []string{"/v1/stats", "/v1/backup"} {
					req, _ := http.NewRequest(http.MethodHead, e.base+path, nil)
					if path == "/v1/stats" {
						req.Method = http.MethodGet
					}
					req.Header.Set("Authorization", "Bearer "+compactAdminKey)
					resp, err := hc.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusUnauthorized {
						refused.Add(1) // the key is out
					}
					if resp.StatusCode != http.StatusOK {
						continue // 401 while the key is out; 403 for the backup
					}
					served.Add(1)
					if path == "/v1/backup" {
						leaked.Add(1)
						t.Errorf("a key limited to bloom, compact was given a backup")
						continue
					}
					var st struct {
						Namespaces map[string]any `json:"namespaces"`
					}
					if err := json.Unmarshal(b, &st); err != nil {
						t.Error(err)
						return
					}
					for ns := range st.Namespaces {
						if ns != "bloom" && ns != "compact" {
							leaked.Add(1)
							t.Errorf("a key limited to bloom, compact was shown the figures of %q", ns)
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-reloaded
	if leaked.Load() == 0 && (served.Load() < enough || refused.Load() < enough) {
		t.Fatalf("%d requests served with the key and %d refused without it in %v, want %d of each",
			served.Load(), refused.Load(), time.Since(start).Round(time.Second), enough)
	}
}

// A second key given without its role after namespaces= in SEENAPI_KEYS
// reads as a namespace name of the first key. Its holder is not shown that
// name, in a 403's detail nor in GET /v1/auth, unless a namespace is served
// under it; a short name not served (misspelt, most likely) is shown.
func TestAKeyIsNotShownANameAsLongAsAKeyThatIsNoServedNamespace(t *testing.T) {
	const swallowed = "second0key0given0without0its0role"
	keys, err := api.ParseKeysList("write:" + feedWriteKey + " namespaces=default,emial," + swallowed)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *api.Config) { c.Keys = append(slices.Clone(testKeys), keys...) })
	feed := e.client(feedWriteKey)

	a, err := feed.GetAuthWithResponse(ctx)
	if err != nil || a.JSON200 == nil {
		t.Fatalf("GET /v1/auth: %v, %d %s", err, a.StatusCode(), a.Body)
	}
	if got := a.JSON200.Namespaces; got == nil || !slices.Equal(*got, []string{"default", "emial"}) {
		t.Errorf("GET /v1/auth's namespaces %v, want [default emial]", got)
	}
	if strings.Contains(string(a.Body), swallowed) {
		t.Errorf("GET /v1/auth shows the swallowed key: %s", a.Body)
	}

	r, err := feed.FilterUserWithResponse(ctx, "compact", "u1", nil, client.FilterRequest{Candidates: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	p := wantProblem(t, r.StatusCode(), r.HTTPResponse.Header, r.Body, http.StatusForbidden, "forbidden")
	if want := `limited to the namespaces default, emial and 1 more not served (not shown), not "compact"`; !strings.Contains(p.Detail, want) {
		t.Errorf("detail %q, want %q", p.Detail, want)
	}
	if strings.Contains(string(r.Body), swallowed) {
		t.Errorf("the 403 shows the swallowed key: %s", r.Body)
	}
}
