package api_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/client"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
)

// /metrics is read as Prometheus reads it: its own text parser takes every
// family, its linter finds nothing to say (counters end in _total, units
// in their base, seconds and bytes), each family has its help, no series
// comes twice, the service's series carry bounded labels only (no user, no
// item), and their figures are those of /v1/stats.
func TestMetricsParseAndLintAndAgreeWithStats(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	filter(t, c, "default", "u1", client.FilterRequest{Candidates: []string{"a", "b"}})
	filter(t, c, "default", "u1", client.FilterRequest{Candidates: []string{"a", "c"}})
	filter(t, c, "compact", "u2", client.FilterRequest{Candidates: []string{"a"}})
	if status, _, _ := e.raw(http.MethodPost, "/v1/namespaces/nope/users/u/filter", "application/json", []byte(`{"candidates":["a"]}`)); status != http.StatusNotFound {
		t.Fatalf("a call to an unknown namespace: %d", status)
	}
	r, err := c.GetStatsWithResponse(ctx)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	st := r.JSON200
	mfs, body := scrapeMetrics(t, e)
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	bounded := map[string]bool{"namespace": true, "route": true, "status": true, "level": true, "result": true}
	for name, mf := range mfs {
		if mf.GetHelp() == "" {
			t.Errorf("%s has no HELP", name)
		}
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			key := fmt.Sprint(m.GetLabel())
			if seen[key] {
				t.Errorf("%s has the series %s twice", name, key)
			}
			seen[key] = true
			if !strings.HasPrefix(name, "seenapi_") {
				continue
			}
			for _, l := range m.GetLabel() {
				if !bounded[l.GetName()] {
					t.Errorf("%s has the label %s=%q: want only namespace, route, status, level or result", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
	value := func(name string, labels ...string) float64 { return metricValue(t, mfs, name, labels...) }
	for name, want := range map[string]int64{
		"seenapi_hot_users":                st.HotUsers,
		"seenapi_cache_bytes":              st.CacheBytes,
		"seenapi_cache_budget_bytes":       st.CacheBudgetBytes,
		"seenapi_cache_hits_total":         st.Hits,
		"seenapi_cache_misses_total":       st.Misses,
		"seenapi_cache_no_history_total":   st.NoHistoryCalls,
		"seenapi_loads_total":              st.Loads,
		"seenapi_new_users_total":          st.NewUsers,
		"seenapi_evictions_total":          st.Evictions,
		"seenapi_candidates_total":         st.Candidates,
		"seenapi_candidates_seen_total":    st.SeenCandidates,
		"seenapi_items_recorded_total":     st.Recorded,
		"seenapi_journal_appends_total":    st.JournalAppends,
		"seenapi_degraded_total":           st.Degraded,
		"seenapi_panics_total":             st.Panics,
		"seenapi_idempotent_replays_total": st.IdempotentReplays,
	} {
		if got := value(name); got != float64(want) {
			t.Errorf("%s %v, /v1/stats %d", name, got, want)
		}
	}
	if st.Candidates != 5 || st.SeenCandidates != 1 || st.Recorded != 4 {
		t.Errorf("stats: %d candidates, %d seen, %d recorded; want 5, 1, 4", st.Candidates, st.SeenCandidates, st.Recorded)
	}
	for ns, n := range st.Namespaces {
		if got := value("seenapi_namespace_items_recorded_total", "namespace", ns); got != float64(n.Recorded) {
			t.Errorf("seenapi_namespace_items_recorded_total{namespace=%q} %v, /v1/stats %d", ns, got, n.Recorded)
		}
		if got := value("seenapi_namespace_hot_users", "namespace", ns); got != float64(n.HotUsers) {
			t.Errorf("seenapi_namespace_hot_users{namespace=%q} %v, /v1/stats %d", ns, got, n.HotUsers)
		}
	}
	for code, n := range st.Errors {
		if got := value("seenapi_http_errors_total", "status", code); got != float64(n) {
			t.Errorf("seenapi_http_errors_total{status=%q} %v, /v1/stats %d", code, got, n)
		}
	}
	if got := value("seenapi_http_requests_total", "route", "POST /v1/namespaces/{ns}/users/{user}/filter"); got != 4 {
		t.Errorf("one calls counted %v, want 4", got)
	}
}

// The error counters have their series from the start, at 0: one that
// appears at its first error has no rate before, and an alert on its
// increase misses that first error. seenapi_http_errors_total has one for
// each status the service answers, seenapi_batch_user_errors_total for
// each a batch's user can meet alone.
func TestErrorCountersHaveTheirSeriesFromTheStart(t *testing.T) {
	e := newEnv(t)
	status, _, body := e.raw(http.MethodGet, "/metrics", "", nil)
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d", status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for name, statuses := range map[string][]string{
		"seenapi_http_errors_total":       {"400", "401", "403", "404", "405", "408", "409", "413", "415", "422", "429", "431", "500", "503", "507"},
		"seenapi_batch_user_errors_total": {"404", "500", "503", "507"},
	} {
		got := map[string]float64{}
		for _, m := range mfs[name].GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
		for _, code := range statuses {
			if n, ok := got[code]; !ok || n != 0 {
				t.Errorf("%s{status=%q} at the start: %v (present %v), want 0", name, code, n, ok)
			}
		}
	}
}

// Each user of a batch counts one hit, miss or call for a user with no
// history, a batch sent with an Idempotency-Key (as client.WithRetries
// sends every batch) too: it looks at its users before it calls them, and
// counted each twice.
func TestAKeyedBatchCountsEachUsersHitOrMissOnce(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	filter(t, c, "default", "hot", client.FilterRequest{Candidates: []string{"a"}}) // a user with no history
	status, _, body := e.raw(http.MethodPost, "/v1/namespaces/default/filter", "application/json",
		[]byte(`{"requests":[{"user":"hot","candidates":["b"]},{"user":"new","candidates":["b"]}]}`), "Idempotency-Key", "batch-1")
	if status != http.StatusOK {
		t.Fatalf("keyed batch: %d %s", status, body)
	}
	r, err := c.GetStatsWithResponse(ctx)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	if st := r.JSON200; st.Hits != 1 || st.Misses != 0 || st.NoHistoryCalls != 2 {
		t.Fatalf("a one call and a keyed batch of its user and a new one: %d hits, %d misses, %d calls for users with no history; want 1, 0 and 2",
			st.Hits, st.Misses, st.NoHistoryCalls)
	}
}

// A write-back round counts in flushes when it has a user to write: one
// that finds only users stored since they were listed, erased or their
// items forgotten (both written at once), is none. Counted, flushes grew
// past flushed_users, and the users a round writes read as fewer than one.
func TestAWriteBackRoundWithNothingToWriteIsNotCounted(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	for i := range 4 {
		u := fmt.Sprint("u", i)
		filter(t, c, "default", u, client.FilterRequest{Candidates: []string{"a"}})
		if r, err := c.ForgetUserWithResponse(ctx, "default", u); err != nil || r.StatusCode() != http.StatusNoContent {
			t.Fatalf("erasing %s: %v", u, err)
		}
		filter(t, c, "compact", u, client.FilterRequest{Candidates: []string{"a"}})
		if r, err := c.ForgetItemsWithResponse(ctx, "compact", u, client.ItemsRequest{Items: []string{"a"}}); err != nil || r.JSON200 == nil {
			t.Fatalf("forgetting %s's item: %v", u, err)
		}
	}
	if err := e.hot.Flush(); err != nil { // the round that finds them listed, if the loop's has not
		t.Fatal(err)
	}
	r, err := c.GetStatsWithResponse(ctx)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	if st := r.JSON200; st.DirtyUsers != 0 || st.Flushes > st.FlushedUsers {
		t.Fatalf("%d write-back rounds counted for %d users written (%d dirty); want no more rounds than users",
			st.Flushes, st.FlushedUsers, st.DirtyUsers)
	}
}

// A 404 user-not-found answers a question about a user with no history (its
// stats or its export): no fault of the service or of the
// request, so it is counted in users_not_found, not in errors, which an
// operator watches for faults (a user looked up in the dashboard would
// raise them). An unknown namespace is still an error.
func TestAUserWithNoHistoryIsNoError(t *testing.T) {
	e := newEnv(t)
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1/namespaces/default/users/nobody"},
		{http.MethodGet, "/v1/namespaces/default/users/nobody-else"},
		{http.MethodGet, "/v1/namespaces/default/users/nobody/export"},
		{http.MethodGet, "/v1/namespaces/nope/users/nobody"},
	} {
		if status, _, _ := e.raw(r.method, r.path, "", nil); status != http.StatusNotFound {
			t.Fatalf("%s %s: %d, want 404", r.method, r.path, status)
		}
	}
	r, err := e.client("").GetStatsWithResponse(ctx)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	if got := r.JSON200.Errors["404"]; got != 1 {
		t.Errorf("errors[404] = %d after three answers of users with no history and one of an unknown namespace, want 1 (the namespace's)", got)
	}
	if got := r.JSON200.UsersNotFound; got != 3 {
		t.Errorf("users_not_found = %d, want 3", got)
	}
	_, _, body := e.raw(http.MethodGet, "/metrics", "", nil)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if got := mfs["seenapi_users_not_found_total"].GetMetric(); len(got) != 1 || got[0].GetCounter().GetValue() != 3 {
		t.Errorf("seenapi_users_not_found_total: %v, want 3", got)
	}
	for _, m := range mfs["seenapi_http_errors_total"].GetMetric() {
		if m.GetLabel()[0].GetValue() == "404" && m.GetCounter().GetValue() != 1 {
			t.Errorf(`seenapi_http_errors_total{status="404"} = %v, want 1`, m.GetCounter().GetValue())
		}
	}
}

// /readyz answers 503 while the service is not ready: starting (its
// journal not yet folded in) or draining. That is the probe working as
// designed, which an orchestrator polls every few seconds through a long
// start, so those answers are counted in not_ready, not in errors, which
// an operator watches for faults. A 503 of any other route (the store
// failing, the service overloaded) is still an error.
func TestAServiceNotReadyIsNoError(t *testing.T) {
	var starting atomic.Bool
	starting.Store(true)
	hs := &holdingStore{user: "held", loading: make(chan struct{}), release: make(chan struct{})}
	e := newEnvOver(t, func(st *storage.Store) eviction.Store { hs.Store = st; return hs }, func(c *api.Config) {
		c.MaxInFlight = 1
		c.Ready = func() error {
			if starting.Load() {
				return errors.New("the journal is being folded in")
			}
			return nil
		}
	})
	probe := func(method string) {
		t.Helper()
		if status, _, _ := e.raw(method, "/readyz", "", nil); status != http.StatusServiceUnavailable {
			t.Fatalf("%s /readyz while not ready: %d, want 503", method, status)
		}
	}
	probe(http.MethodGet)
	probe(http.MethodHead)
	starting.Store(false)

	// A 503 overloaded: a call beyond --max-in-flight.
	release := sync.OnceFunc(func() { close(hs.release) })
	t.Cleanup(release) // before the server's shutdown, which waits for the held call
	held := make(chan struct{})
	go func() {
		defer close(held)
		e.rawErr(http.MethodPost, userPath("default", "held", "/filter"), "application/json", []byte(`{"candidates":["a"]}`))
	}()
	<-hs.loading
	status, h, body := e.raw(http.MethodPost, userPath("default", "other", "/filter"), "application/json", []byte(`{"candidates":["a"]}`))
	wantProblem(t, status, h, body, http.StatusServiceUnavailable, "overloaded")
	release()
	<-held
	// A 503 storage-unavailable.
	e.brokenStore()
	status, h, body = e.raw(http.MethodPost, userPath("default", "cold", "/filter"), "application/json",
		[]byte(`{"candidates":["a"],"on_error":"fail"}`))
	wantProblem(t, status, h, body, http.StatusServiceUnavailable, "storage-unavailable")
	// Draining, as on SIGTERM with --drain-delay.
	e.srv.Drain()
	probe(http.MethodGet)

	r, err := e.client("").GetStatsWithResponse(ctx)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	if got := r.JSON200.Errors["503"]; got != 2 {
		t.Errorf("errors[503] = %d after 3 answers of /readyz not ready, one overloaded and one storage-unavailable, want 2", got)
	}
	if got := r.JSON200.NotReady; got != 3 {
		t.Errorf("not_ready = %d, want 3", got)
	}
	mfs, _ := scrapeMetrics(t, e)
	if got := metricValue(t, mfs, "seenapi_not_ready_total"); got != 3 {
		t.Errorf("seenapi_not_ready_total = %v, want 3", got)
	}
	if got := metricValue(t, mfs, "seenapi_http_errors_total", "status", "503"); got != 2 {
		t.Errorf(`seenapi_http_errors_total{status="503"} = %v, want 2`, got)
	}
}

// scrapeMetrics reads /metrics as Prometheus does: its families, and the
// text they were parsed from.
func scrapeMetrics(t *testing.T, e *env) (map[string]*dto.MetricFamily, []byte) {
	t.Helper()
	status, h, body := e.raw(http.MethodGet, "/metrics", "", nil)
	return parseMetrics(t, status, h, body), body
}

// parseMetrics parses an answer of /metrics (status, headers and body) as
// Prometheus does.
func parseMetrics(t *testing.T, status int, h http.Header, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("/metrics: %d %q", status, h.Get("Content-Type"))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return mfs
}

// metricValue is the value of the counter or gauge name whose labels are
// the name, value pairs labels, in order; a series /metrics lacks fails t.
func metricValue(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok {
		t.Fatalf("/metrics lacks %s", name)
	}
	for _, m := range mf.GetMetric() {
		var got []string
		for _, l := range m.GetLabel() {
			got = append(got, l.GetName(), l.GetValue())
		}
		if fmt.Sprint(got) != fmt.Sprint(labels) {
			continue
		}
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("/metrics lacks %s%v", name, labels)
	return 0
}

// The hit ratio tells whether the cache budget holds the users the
// recommender calls: it counts the calls of the filter, seen and check
// routes and of batches (and the imports and forgotten items that change a
// user), not a person or a tool reading a user (its stats, as the
// dashboard's user look-up asks, or its export), so that looking users up
// moves neither /v1/stats nor /metrics. Such a read still brings a cold
// user into memory (a storage read, among loads), so the user's next call
// is a hit.
func TestReadingAUserCountsNoHitOrMiss(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	filter(t, c, "default", "hot", client.FilterRequest{Candidates: []string{"a", "b"}}) // a user with no history
	raw, err := e.hot.Export("default", "hot")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.WriteBack([]storage.Write{{NS: "default", User: "cold", Value: raw}}, nil); err != nil {
		t.Fatal(err)
	}
	before, err := c.GetStatsWithResponse(ctx)
	if err != nil || before.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	for _, r := range []struct {
		path string
		want int
	}{
		{"/v1/namespaces/default/users/hot", http.StatusOK},
		{"/v1/namespaces/default/users/cold", http.StatusOK},
		{"/v1/namespaces/default/users/nobody", http.StatusNotFound},
		{"/v1/namespaces/default/users/hot/export", http.StatusOK},
		{"/v1/namespaces/default/users/nobody/export", http.StatusNotFound},
	} {
		if status, _, body := e.raw(http.MethodGet, r.path, "", nil); status != r.want {
			t.Fatalf("GET %s: %d %s, want %d", r.path, status, body, r.want)
		}
	}
	r, err := c.GetStatsWithResponse(ctx)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	b, st, d := before.JSON200, r.JSON200, r.JSON200.Namespaces["default"]
	if st.Hits != b.Hits || st.Misses != b.Misses || st.NoHistoryCalls != b.NoHistoryCalls || st.HitRatio != b.HitRatio ||
		d.Hits != st.Hits || d.Misses != st.Misses || d.NoHistoryCalls != st.NoHistoryCalls {
		t.Fatalf("after reading users: %d hits, %d misses, %d calls for no history, hit ratio %v (default: %d, %d, %d); want %d, %d, %d, %v as before",
			st.Hits, st.Misses, st.NoHistoryCalls, st.HitRatio, d.Hits, d.Misses, d.NoHistoryCalls, b.Hits, b.Misses, b.NoHistoryCalls, b.HitRatio)
	}
	if st.Loads <= b.Loads || st.HotUsers != 2 {
		t.Errorf("the cold user read: %d loads (%d before), %d hot users; want it read from the store into memory", st.Loads, b.Loads, st.HotUsers)
	}
	mfs, _ := scrapeMetrics(t, e)
	for name, want := range map[string]float64{
		"seenapi_cache_hits_total":       float64(st.Hits),
		"seenapi_cache_misses_total":     float64(st.Misses),
		"seenapi_cache_no_history_total": float64(st.NoHistoryCalls),
		"seenapi_cache_hit_ratio":        st.HitRatio,
	} {
		if got := metricValue(t, mfs, name); got != want {
			t.Errorf("%s %v, /v1/stats %v", name, got, want)
		}
	}
	if got := metricValue(t, mfs, "seenapi_namespace_cache_hits_total", "namespace", "default"); got != float64(d.Hits) {
		t.Errorf(`seenapi_namespace_cache_hits_total{namespace="default"} %v, /v1/stats %d`, got, d.Hits)
	}

	// The cold user read is in memory now: its next call is a hit.
	filter(t, c, "default", "cold", client.FilterRequest{Candidates: []string{"a", "c"}})
	if r, err := c.GetStatsWithResponse(ctx); err != nil || r.JSON200 == nil || r.JSON200.Hits != st.Hits+1 || r.JSON200.Misses != st.Misses {
		t.Fatalf("a call for the user read: %v %s; want one hit more and no miss", err, r.Body)
	}
}

// A browser loading the dashboard is load: its page, each of its files
// (served by exact path, without a route in openapi.yaml) and the document
// are counted in the calls per route, a HEAD with its GET, in /v1/stats and
// in /metrics' requests and durations alike, each file under its own path.
func TestTheDashboardsFilesAreCountedPerRoute(t *testing.T) {
	e := newEnv(t)
	for _, r := range [][2]string{{"GET", "/"}, {"GET", "/app.js"}, {"HEAD", "/app.js"}, {"GET", "/style.css?v=1"},
		{"GET", "/index.html"}, {"GET", "/openapi.yaml"}} {
		req, err := http.NewRequest(r[0], e.base+r[1], nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if readAll(t, resp); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d", r[0], r[1], resp.StatusCode)
		}
	}
	want := map[string]int64{"GET /": 1, "GET /app.js": 2, "GET /style.css": 1, "GET /index.html": 1, "GET /api.js": 0, "GET /openapi.yaml": 1}
	r, err := e.client("").GetStatsWithResponse(ctx)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	mfs, _ := scrapeMetrics(t, e)
	for route, n := range want {
		if got, ok := r.JSON200.Calls[route]; !ok || got != n {
			t.Errorf("calls[%q] = %d (listed %v), want %d", route, got, ok, n)
		}
		if got := metricValue(t, mfs, "seenapi_http_requests_total", "route", route); got != float64(n) {
			t.Errorf(`seenapi_http_requests_total{route=%q} = %v, want %d`, route, got, n)
		}
		if got := histogramCount(mfs, "seenapi_http_request_duration_seconds", route); got != uint64(n) {
			t.Errorf(`seenapi_http_request_duration_seconds_count{route=%q} = %d, want %d`, route, got, n)
		}
	}
}

// histogramCount is the sample count of histogram name's series for
// route, 0 if it has none.
func histogramCount(mfs map[string]*dto.MetricFamily, name, route string) uint64 {
	for _, m := range mfs[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "route" && l.GetValue() == route {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}
