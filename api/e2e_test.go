package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/client"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/storage/storagetest"
	"github.com/seenapi/seenapi/userfilter"
	"github.com/seenapi/seenapi/web"
)

var ctx = context.Background()

func ptr[T any](v T) *T { return &v }

// filter is the one call through the generated client; it fails the test
// unless the answer is 200.
func filter(t *testing.T, c *client.ClientWithResponses, ns, user string, req client.FilterRequest) client.FilterResponse {
	t.Helper()
	r, err := c.FilterUserWithResponse(ctx, ns, user, nil, req)
	if err != nil {
		t.Fatal(err)
	}
	if r.JSON200 == nil {
		t.Fatalf("filter: %d %s", r.StatusCode(), r.Body)
	}
	return *r.JSON200
}

func TestOneCallReturnsUnseenInOrderOnceAndRecordsThem(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	got := filter(t, c, "default", "u:1", client.FilterRequest{Candidates: []string{"a", "b", "a", "c", "d"}, Limit: ptr(2)})
	if !slices.Equal(got.Unseen, []string{"a", "b"}) || got.SeenCount != 0 || got.Recorded != 2 {
		t.Fatalf("first call: %+v, want unseen [a b], seen 0, recorded 2", got)
	}
	got = filter(t, c, "default", "u:1", client.FilterRequest{Candidates: []string{"d", "a", "b", "c"}})
	if !slices.Equal(got.Unseen, []string{"d", "c"}) || got.SeenCount != 2 || got.Recorded != 2 {
		t.Fatalf("second call: %+v, want unseen [d c], seen 2, recorded 2", got)
	}
	got = filter(t, c, "default", "u:1", client.FilterRequest{Candidates: []string{"a", "b", "c", "d"}})
	if len(got.Unseen) != 0 || got.Unseen == nil || got.SeenCount != 4 {
		t.Fatalf("third call: %+v, want unseen [] (not null), seen 4", got)
	}
}

func TestRecordNoneIsADryRun(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	got := filter(t, c, "default", "u", client.FilterRequest{Candidates: []string{"a", "b"}, Record: ptr(client.None)})
	if got.Recorded != 0 || len(got.Unseen) != 2 {
		t.Fatalf("dry run: %+v", got)
	}
	if st := e.stateOf("default", "u"); st != nil && st["items"].(float64) != 0 {
		t.Fatalf("a dry run recorded items: %v", st["items"])
	}
	got = filter(t, c, "default", "u", client.FilterRequest{Candidates: []string{"a", "b"}})
	if len(got.Unseen) != 2 {
		t.Fatalf("after a dry run the items must still be unseen: %+v", got)
	}
}

func TestRecordAllRecordsEveryCandidate(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	got := filter(t, c, "default", "u", client.FilterRequest{Candidates: []string{"a", "b", "c"}, Limit: ptr(1), Record: ptr(client.All)})
	if !slices.Equal(got.Unseen, []string{"a"}) || got.Recorded != 3 {
		t.Fatalf("record all: %+v, want unseen [a], recorded 3", got)
	}
	got = filter(t, c, "default", "u", client.FilterRequest{Candidates: []string{"a", "b", "c", "z"}})
	if !slices.Equal(got.Unseen, []string{"z"}) {
		t.Fatalf("after record all: %+v, want unseen [z]", got)
	}
}

// A bulk recording leaves a user the service does not hold out of memory.
func TestSeenInBulk(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	r, err := c.RecordSeenWithResponse(ctx, "default", "bulk", &client.RecordSeenParams{Bulk: ptr(true)},
		client.ItemsRequest{Items: []string{"x", "y"}})
	if err != nil || r.JSON200 == nil || r.JSON200.Recorded != 2 {
		t.Fatalf("seen in bulk: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if n := e.hot.Stats().HotUsers; n != 0 {
		t.Fatalf("%d hot users after a bulk recording, want 0", n)
	}
	u, err := c.GetUserWithResponse(ctx, "default", "bulk")
	if err != nil || u.JSON200 == nil || u.JSON200.Hot || u.JSON200.Items != 2 {
		t.Fatalf("stats after a bulk recording: %v %d %s", err, u.StatusCode(), u.Body)
	}
	status, h, body := e.raw("POST", userPath("default", "bulk", "/seen?bulk=maybe"), "application/json", []byte(`{"items":["z"]}`))
	if p := problem(t, status, h, body); status != 400 || len(p.Errors) != 1 || p.Errors[0].Parameter != "bulk" {
		t.Fatalf("bulk=maybe: %d %+v", status, p)
	}
}

func TestSeenThenCheck(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	r, err := c.RecordSeenWithResponse(ctx, "default", "u", nil, client.ItemsRequest{Items: []string{"x", "y"}})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("seen: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if r.JSON200.Recorded != 2 || r.JSON200.SeenCount != 0 {
		t.Fatalf("seen: %+v", r.JSON200)
	}
	ch, err := c.CheckSeenWithResponse(ctx, "default", "u", client.ItemsRequest{Items: []string{"x", "q", "y"}})
	if err != nil || ch.JSON200 == nil {
		t.Fatalf("check: %v %d %s", err, ch.StatusCode(), ch.Body)
	}
	if !slices.Equal(ch.JSON200.Seen, []bool{true, false, true}) || ch.JSON200.SeenCount != 2 {
		t.Fatalf("check: %+v, want [true false true], 2", ch.JSON200)
	}
	ch, _ = c.CheckSeenWithResponse(ctx, "default", "nobody", client.ItemsRequest{Items: []string{"x"}})
	if ch.JSON200 == nil || ch.JSON200.Seen[0] {
		t.Fatalf("an unknown user has seen nothing: %d %s", ch.StatusCode(), ch.Body)
	}
}

func TestUserStats(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	filter(t, c, "default", "u", client.FilterRequest{Candidates: []string{"a", "b", "c"}})
	r, err := c.GetUserWithResponse(ctx, "default", "u")
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v %d %s", err, r.StatusCode(), r.Body)
	}
	st := r.JSON200
	if st.Items != 3 || st.Kind != "staged" || !st.Hot || st.Bits == 0 || st.TargetFpRate != 0.01 || st.LastSeen.IsZero() {
		t.Fatalf("stats: %+v", st)
	}
	// A dry run does not make a user of a stranger.
	got := filter(t, c, "default", "stranger", client.FilterRequest{Candidates: []string{"a", "b"}, Record: ptr(client.None)})
	if !slices.Equal(got.Unseen, []string{"a", "b"}) || got.Recorded != 0 {
		t.Fatalf("dry run of a stranger: %+v", got)
	}
	r, _ = c.GetUserWithResponse(ctx, "default", "stranger")
	if r.ApplicationproblemJSON404 == nil || r.ApplicationproblemJSON404.Type != "https://seenapi.dev/problems/user-not-found" {
		t.Fatalf("unknown user: %d %s", r.StatusCode(), r.Body)
	}
}

func TestForgetUserErasesHistory(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	filter(t, c, "default", "u", client.FilterRequest{Candidates: []string{"a", "b"}})
	r, err := c.ForgetUserWithResponse(ctx, "default", "u")
	if err != nil || r.StatusCode() != http.StatusNoContent {
		t.Fatalf("forget: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if st := e.stateOf("default", "u"); st != nil {
		t.Fatalf("forgotten user still has stats: %v", st)
	}
	got := filter(t, c, "default", "u", client.FilterRequest{Candidates: []string{"a", "b"}})
	if len(got.Unseen) != 2 {
		t.Fatalf("a forgotten user has seen nothing: %+v", got)
	}
}

// A filter that never recorded an item makes no user: imported for a user
// never seen, the user stays never seen (no stats, not listed), as a call
// that records nothing leaves it, rather than a user of no history whose
// first and last seen are the zero time. Merged into a user, it changes
// nothing; replacing a user's filter, it is refused, and changes nothing.
func TestAnImportThatNeverRecordedMakesNoUser(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	empty := storagetest.NoHistory(t, userfilter.DefaultProfile())
	imp := func(user string, mode client.ImportMode) *client.ImportUserResponse {
		t.Helper()
		r, err := c.ImportUserWithBodyWithResponse(ctx, "default", user, &client.ImportUserParams{Mode: &mode},
			"application/octet-stream", bytes.NewReader(empty))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, mode := range []client.ImportMode{client.Merge, client.Replace} {
		if r := imp("none", mode); r.StatusCode() != http.StatusNoContent {
			t.Fatalf("import %s of an empty filter: %d %s", mode, r.StatusCode(), r.Body)
		}
		if r, err := c.GetUserWithResponse(ctx, "default", "none"); err != nil || r.ApplicationproblemJSON404 == nil {
			t.Fatalf("after an import %s of an empty filter, the user's stats: %v %d %s, want 404 as for a user never seen", mode, err, r.StatusCode(), r.Body)
		}
	}
	filter(t, c, "default", "seen", client.FilterRequest{Candidates: []string{"a"}})
	before, err := c.GetUserWithResponse(ctx, "default", "seen")
	if err != nil || before.JSON200 == nil || before.JSON200.FirstSeen.IsZero() {
		t.Fatalf("stats: %v %d %s", err, before.StatusCode(), before.Body)
	}
	if r := imp("seen", client.Replace); r.ApplicationproblemJSON400 == nil || r.ApplicationproblemJSON400.Type != "https://seenapi.dev/problems/bad-import" {
		t.Fatalf("a replace by an empty filter: %d %s, want 400 bad-import", r.StatusCode(), r.Body)
	}
	if r := imp("seen", client.Merge); r.StatusCode() != http.StatusNoContent {
		t.Fatalf("a merge of an empty filter: %d %s", r.StatusCode(), r.Body)
	}
	after, err := c.GetUserWithResponse(ctx, "default", "seen")
	if err != nil || after.JSON200 == nil || after.JSON200.Items != 1 || !after.JSON200.FirstSeen.Equal(before.JSON200.FirstSeen) ||
		!after.JSON200.LastSeen.Equal(before.JSON200.LastSeen) {
		t.Fatalf("after imports of an empty filter: %v %s, want the stats of before, %s", err, after.Body, before.Body)
	}
	l, err := c.ListUsersWithResponse(ctx, "default", &client.ListUsersParams{Details: ptr(true)})
	if err != nil || l.JSON200 == nil {
		t.Fatalf("list: %v %d %s", err, l.StatusCode(), l.Body)
	}
	if !slices.Equal(l.JSON200.Users, []string{"seen"}) || l.JSON200.Details == nil || len(*l.JSON200.Details) != 1 {
		t.Fatalf("users listed %s, want seen alone", l.Body)
	}
	if d := (*l.JSON200.Details)[0]; d.LastSeen == nil || d.LastSeen.IsZero() {
		t.Errorf("seen's last_seen in the list: %v", d.LastSeen)
	}
}

func TestExportImportMergeAndReplace(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	filter(t, c, "default", "src", client.FilterRequest{Candidates: []string{"a", "b"}})
	filter(t, c, "default", "dst", client.FilterRequest{Candidates: []string{"z"}})
	ex, err := c.ExportUserWithResponse(ctx, "default", "src")
	if err != nil || ex.StatusCode() != http.StatusOK || len(ex.Body) == 0 {
		t.Fatalf("export: %v %d", err, ex.StatusCode())
	}
	if ct := ex.HTTPResponse.Header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Fatalf("export content type %q", ct)
	}
	check := func(user string, items ...string) []bool {
		t.Helper()
		r, err := c.CheckSeenWithResponse(ctx, "default", user, client.ItemsRequest{Items: items})
		if err != nil || r.JSON200 == nil {
			t.Fatalf("check: %v %d %s", err, r.StatusCode(), r.Body)
		}
		return r.JSON200.Seen
	}
	im, err := c.ImportUserWithBodyWithResponse(ctx, "default", "dst", nil, "application/octet-stream", bytes.NewReader(ex.Body))
	if err != nil || im.StatusCode() != http.StatusNoContent {
		t.Fatalf("import merge: %v %d %s", err, im.StatusCode(), im.Body)
	}
	if got := check("dst", "a", "b", "z"); !slices.Equal(got, []bool{true, true, true}) {
		t.Fatalf("after merge dst saw %v, want all", got)
	}
	im, err = c.ImportUserWithBodyWithResponse(ctx, "default", "dst", &client.ImportUserParams{Mode: ptr(client.Replace)},
		"application/octet-stream", bytes.NewReader(ex.Body))
	if err != nil || im.StatusCode() != http.StatusNoContent {
		t.Fatalf("import replace: %v %d %s", err, im.StatusCode(), im.Body)
	}
	if got := check("dst", "a", "b", "z"); !slices.Equal(got, []bool{true, true, false}) {
		t.Fatalf("after replace dst saw %v, want a and b only", got)
	}
	im, _ = c.ImportUserWithBodyWithResponse(ctx, "default", "dst", nil, "application/octet-stream", strings.NewReader("not a filter"))
	if im.ApplicationproblemJSON400 == nil || im.ApplicationproblemJSON400.Type != "https://seenapi.dev/problems/bad-import" {
		t.Fatalf("bad import: %d %s", im.StatusCode(), im.Body)
	}
	if got := check("dst", "a", "b", "z"); !slices.Equal(got, []bool{true, true, false}) {
		t.Fatalf("a bad import changed dst: %v", got)
	}
	// Another namespace's export is refused, by replace too: its cap would
	// come with it. The detail says what differs.
	if r, err := c.RecordSeenWithResponse(ctx, "capped", "other", nil, client.ItemsRequest{Items: []string{"q"}}); err != nil || r.JSON200 == nil {
		t.Fatalf("record in capped: %v", err)
	}
	capped, err := c.ExportUserWithResponse(ctx, "capped", "other")
	if err != nil || capped.StatusCode() != http.StatusOK {
		t.Fatalf("export from capped: %v %d", err, capped.StatusCode())
	}
	im, _ = c.ImportUserWithBodyWithResponse(ctx, "default", "dst", &client.ImportUserParams{Mode: ptr(client.Replace)},
		"application/octet-stream", bytes.NewReader(capped.Body))
	if p := im.ApplicationproblemJSON400; p == nil || p.Type != "https://seenapi.dev/problems/bad-import" ||
		p.Detail == nil || !strings.HasSuffix(*p.Detail, `than namespace "default"'s profile (the namespace's against the filter's): max_items 0 against 5`) {
		t.Fatalf("replace with another namespace's export: %d %s", im.StatusCode(), im.Body)
	}
	if got := check("dst", "a", "b", "q"); !slices.Equal(got, []bool{true, true, false}) {
		t.Fatalf("a refused import changed dst: %v", got)
	}
}

func TestBatchAnswersEachUserInOrder(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	filter(t, c, "default", "u2", client.FilterRequest{Candidates: []string{"a"}})
	r, err := c.FilterBatchWithResponse(ctx, "default", nil, client.BatchFilterRequest{Requests: []client.BatchFilterEntry{
		{User: "u1", Candidates: []string{"a", "b"}, Limit: ptr(1)},
		{User: "u2", Candidates: []string{"a", "b"}, Record: ptr(client.None)},
	}})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("batch: %v %d %s", err, r.StatusCode(), r.Body)
	}
	res := r.JSON200.Results
	if len(res) != 2 || res[0].User != "u1" || res[1].User != "u2" {
		t.Fatalf("batch results: %+v", res)
	}
	if res[0].Error != nil || !slices.Equal(*res[0].Unseen, []string{"a"}) || *res[0].Recorded != 1 {
		t.Fatalf("u1: %+v", res[0])
	}
	if res[1].Error != nil || !slices.Equal(*res[1].Unseen, []string{"b"}) || *res[1].SeenCount != 1 || *res[1].Recorded != 0 {
		t.Fatalf("u2: %+v", res[1])
	}
}

// A user named twice in a batch is served twice, in order, each request
// with its own limit and record: the second sees what the first recorded,
// and a dry run between them records nothing.
func TestBatchServesAUserNamedTwiceInOrder(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	r, err := c.FilterBatchWithResponse(ctx, "default", nil, client.BatchFilterRequest{Requests: []client.BatchFilterEntry{
		{User: "u", Candidates: []string{"a", "b", "c"}, Limit: ptr(1)},
		{User: "u", Candidates: []string{"a", "b", "c"}, Record: ptr(client.None)},
		{User: "u", Candidates: []string{"a", "b", "c", "d"}, Limit: ptr(2)},
	}})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("batch: %v %d %s", err, r.StatusCode(), r.Body)
	}
	want := []struct {
		unseen         []string
		seen, recorded int
	}{{[]string{"a"}, 0, 1}, {[]string{"b", "c"}, 1, 0}, {[]string{"b", "c"}, 1, 2}}
	for i, w := range want {
		got := r.JSON200.Results[i]
		if got.Error != nil || !slices.Equal(*got.Unseen, w.unseen) || *got.SeenCount != w.seen || *got.Recorded != w.recorded {
			t.Errorf("request %d: %+v, want unseen %v, seen_count %d, recorded %d", i, got, w.unseen, w.seen, w.recorded)
		}
	}
}

// reloadOnAppend is the real store that, at the first journal append of
// one user, runs reload: a SIGHUP met in the middle of a call.
type reloadOnAppend struct {
	*storage.Store
	user   string
	reload func()
}

func (r *reloadOnAppend) Append(ns, user string, value []byte, ttl time.Duration) (uint64, error) {
	if user == r.user && r.reload != nil {
		r.reload()
		r.reload = nil
	}
	return r.Store.Append(ns, user, value, ttl)
}

// A namespace taken out (SIGHUP) while a batch of it is served fails the
// users after that moment, each with its unknown-namespace problem: the
// users before were served and recorded, and a 404 for the whole batch
// would lose their answers.
func TestBatchKeepsTheAnswersServedBeforeItsNamespaceWasTakenOut(t *testing.T) {
	ro := &reloadOnAppend{user: "first"}
	e := newEnvOver(t, func(s *storage.Store) eviction.Store { ro.Store = s; return ro })
	ro.reload = func() {
		served := slices.DeleteFunc(testNamespaces(), func(n eviction.Namespace) bool { return n.Name == "capped" })
		if _, err := e.hot.SetNamespaces(served); err != nil {
			t.Error(err)
		}
	}
	r, err := e.client("").FilterBatchWithResponse(ctx, "capped", nil, client.BatchFilterRequest{Requests: []client.BatchFilterEntry{
		{User: "first", Candidates: []string{"a", "b"}, Limit: ptr(1)},
		{User: "second", Candidates: []string{"a"}},
	}})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("a batch whose namespace was taken out after its first user: %v %d %s, want 200", err, r.StatusCode(), r.Body)
	}
	res := r.JSON200.Results
	if res[0].Error != nil || !slices.Equal(*res[0].Unseen, []string{"a"}) || *res[0].Recorded != 1 {
		t.Errorf("the user served before: %+v", res[0])
	}
	if res[1].Error == nil || res[1].Error.Type != api.ProblemBase+"unknown-namespace" {
		t.Errorf("the user after: %+v, want unknown-namespace", res[1])
	}
	// Before any user is served, the batch is the namespace's 404.
	r, err = e.client("").FilterBatchWithResponse(ctx, "capped", nil, client.BatchFilterRequest{Requests: []client.BatchFilterEntry{
		{User: "first", Candidates: []string{"b"}},
	}})
	if err != nil || r.ApplicationproblemJSON404 == nil {
		t.Fatalf("a batch of a namespace taken out: %v %d %s, want 404", err, r.StatusCode(), r.Body)
	}
}

func TestNamespaces(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	l, err := c.ListNamespacesWithResponse(ctx)
	if err != nil || l.JSON200 == nil {
		t.Fatalf("list: %v %d %s", err, l.StatusCode(), l.Body)
	}
	var names []string
	for _, n := range l.JSON200.Namespaces {
		names = append(names, n.Name)
	}
	if !slices.Equal(names, []string{"bloom", "capped", "compact", "default", "staged"}) {
		t.Fatalf("namespaces %v", names)
	}
	g, err := c.GetNamespaceWithResponse(ctx, "capped")
	if err != nil || g.JSON200 == nil {
		t.Fatalf("get: %v %d %s", err, g.StatusCode(), g.Body)
	}
	if n := g.JSON200; n.MaxItems != 5 || n.FpRate != 0.01 || n.Kind != "staged" || n.Window != 0 || n.InitialCapacity == 0 {
		t.Fatalf("capped: %+v", n)
	}
	g, _ = c.GetNamespaceWithResponse(ctx, "nope")
	// The client names the problem types (ProblemType), so that a caller
	// need not spell their URIs.
	if g.ApplicationproblemJSON404 == nil || g.ApplicationproblemJSON404.Type != client.ProblemTypeUnknownNamespace {
		t.Fatalf("unknown namespace: %d %s", g.StatusCode(), g.Body)
	}
}

// A compact or staged namespace serves the one call, its stats, the
// write-back and export and import like a Bloom one: 700 items take its
// first layer (512) and open a second, and a written-back user answers the
// same.
func TestCompactAndStagedNamespacesEndToEnd(t *testing.T) {
	for _, kind := range []userfilter.Kind{userfilter.KindCompact, userfilter.KindStaged} {
		t.Run(kind.String(), func(t *testing.T) { testKindEndToEnd(t, kind) })
	}
}

func testKindEndToEnd(t *testing.T, kind userfilter.Kind) {
	ns := kind.String() // the namespace of that kind (testNamespaces)
	e := newEnv(t)
	c := e.client("")
	items := make([]string, 700)
	for i := range items {
		items[i] = fmt.Sprintf("item-%d", i)
	}
	for i := 0; i < len(items); i += 100 {
		got := filter(t, c, ns, "u", client.FilterRequest{Candidates: items[i : i+100], Limit: ptr(0)})
		if len(got.Unseen) < 95 || got.Recorded != len(got.Unseen) {
			t.Fatalf("calls with new items: %+v", got)
		}
	}
	got := filter(t, c, ns, "u", client.FilterRequest{Candidates: items[:300], Record: ptr(client.None)})
	if len(got.Unseen) != 0 || got.SeenCount != 300 {
		t.Fatalf("items recorded test unseen: %+v", got)
	}
	r, err := c.GetUserWithResponse(ctx, ns, "u")
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if st := r.JSON200; string(st.Kind) != ns || st.Layers != 2 || st.Items < 690 || st.Items > 700 || st.Bits == 0 || st.FpRate > 0.01 {
		t.Fatalf("stats: %+v", st)
	}
	// A user's kind and its namespace's are one type to the client: the
	// dashboard, say, asks the user's filter, else its namespace, whether
	// it can forget items.
	n, err := c.GetNamespaceWithResponse(ctx, ns)
	if err != nil || n.JSON200 == nil {
		t.Fatalf("namespace: %v %d %s", err, n.StatusCode(), n.Body)
	}
	if r.JSON200.Kind != n.JSON200.Kind {
		t.Fatalf("the user's filter is %s, its namespace's %s", r.JSON200.Kind, n.JSON200.Kind)
	}
	if err := e.hot.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := e.stateOf(ns, "u"); st == nil || st["dirty"] == true {
		t.Fatalf("after a write-back: %v", st)
	}
	ex, err := c.ExportUserWithResponse(ctx, ns, "u")
	if err != nil || ex.StatusCode() != http.StatusOK {
		t.Fatalf("export: %v %d", err, ex.StatusCode())
	}
	if f, err := userfilter.Decode(ex.Body); err != nil || f.Profile().Kind != kind {
		t.Fatalf("the export does not decode to a %v filter: %v", kind, err)
	}
	filter(t, c, ns, "v", client.FilterRequest{Candidates: []string{"own"}})
	im, err := c.ImportUserWithBodyWithResponse(ctx, ns, "v", nil, "application/octet-stream", bytes.NewReader(ex.Body))
	if err != nil || im.StatusCode() != http.StatusNoContent {
		t.Fatalf("import: %v %d %s", err, im.StatusCode(), im.Body)
	}
	got = filter(t, c, ns, "v", client.FilterRequest{Candidates: append([]string{"own", "new"}, items...), Record: ptr(client.None)})
	if !slices.Equal(got.Unseen, []string{"new"}) {
		t.Fatalf("after a merged import v has not seen %v", got.Unseen)
	}
	// A namespace of another kind refuses the export: the profiles differ.
	im, _ = c.ImportUserWithBodyWithResponse(ctx, "bloom", "w", nil, "application/octet-stream", bytes.NewReader(ex.Body))
	if im.ApplicationproblemJSON400 == nil || im.ApplicationproblemJSON400.Type != "https://seenapi.dev/problems/bad-import" {
		t.Fatalf("%v export into a Bloom namespace: %d %s", kind, im.StatusCode(), im.Body)
	}
}

func TestSaturatedUserSaysSo(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	items := []string{"1", "2", "3", "4", "5", "6", "7", "8"}
	got := filter(t, c, "capped", "u", client.FilterRequest{Candidates: items})
	if got.Saturated == nil || !*got.Saturated || got.Recorded > 5 {
		t.Fatalf("capped at 5 items: %+v", got)
	}
}

func TestForgetItemsIsUnsupportedForBloomAndStaged(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	for ns, kind := range map[string]string{"bloom": "bloom", "default": "staged"} {
		filter(t, c, ns, "u", client.FilterRequest{Candidates: []string{"a"}})
		r, err := c.ForgetItemsWithResponse(ctx, ns, "u", client.ItemsRequest{Items: []string{"a"}})
		if err != nil {
			t.Fatal(err)
		}
		if r.ApplicationproblemJSON409 == nil || r.ApplicationproblemJSON409.Type != "https://seenapi.dev/problems/unsupported" {
			t.Fatalf("%s: forget items: %d %s", ns, r.StatusCode(), r.Body)
		}
		if d := r.ApplicationproblemJSON409.Detail; d == nil || !strings.Contains(*d, kind+" filters, which cannot forget items") {
			t.Errorf("%s: detail = %v, want the kind in words", ns, d)
		}
		// Nothing was forgotten.
		if got := filter(t, c, ns, "u", client.FilterRequest{Candidates: []string{"a"}, Record: ptr(client.None)}); len(got.Unseen) != 0 {
			t.Fatalf("%s: a refused forget made %v unseen", ns, got.Unseen)
		}
	}
}

// TestForgetItemsInACompactNamespace: a compact namespace forgets items,
// counting those that were seen, and the one call returns them again.
func TestForgetItemsInACompactNamespace(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	filter(t, c, "compact", "u", client.FilterRequest{Candidates: []string{"a", "b", "c"}})
	r, err := c.ForgetItemsWithResponse(ctx, "compact", "u", client.ItemsRequest{Items: []string{"a", "never", "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.JSON200 == nil || r.JSON200.Forgotten != 1 {
		t.Fatalf("forget items: %d %s, want forgotten 1", r.StatusCode(), r.Body)
	}
	got := filter(t, c, "compact", "u", client.FilterRequest{Candidates: []string{"a", "b", "c"}, Record: ptr(client.None)})
	if !slices.Equal(got.Unseen, []string{"a"}) || got.SeenCount != 2 {
		t.Fatalf("after forgetting a: %+v", got)
	}
}

func TestUserIDsArePercentDecodedAndExact(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	ids := []string{"a/b", "a", "A", "ü ☃ x", "a%2Fb", "...", "a b?c#d", "%"}
	for i, id := range ids {
		filter(t, c, "default", id, client.FilterRequest{Candidates: []string{"item-" + string(rune('0'+i))}})
	}
	for i, id := range ids {
		r, err := c.CheckSeenWithResponse(ctx, "default", id, client.ItemsRequest{Items: []string{"item-0", "item-" + string(rune('0'+i))}})
		if err != nil || r.JSON200 == nil {
			t.Fatalf("%q: %v %d %s", id, err, r.StatusCode(), r.Body)
		}
		if want := []bool{i == 0, true}; !slices.Equal(r.JSON200.Seen, want) {
			t.Errorf("user %q saw %v, want %v: ids must map to distinct users", id, r.JSON200.Seen, want)
		}
	}
}

func TestStatsCountCallsAndErrors(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	for range 3 {
		filter(t, c, "default", "u", client.FilterRequest{Candidates: []string{"a"}})
	}
	e.raw(http.MethodPost, userPath("default", "u", "/filter"), "application/json", []byte(`{`))
	r, err := c.GetStatsWithResponse(ctx)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v %d %s", err, r.StatusCode(), r.Body)
	}
	st := r.JSON200
	if n := st.Calls["POST /v1/namespaces/{ns}/users/{user}/filter"]; n != 4 {
		t.Errorf("filter calls %d, want 4", n)
	}
	if n := st.Errors["400"]; n != 1 {
		t.Errorf("400 errors %d, want 1", n)
	}
	if st.HotUsers != 1 || st.NewUsers != 1 || st.Loads != 1 || st.UptimeSeconds <= 0 || st.Degraded != 0 || st.Panics != 0 {
		t.Errorf("stats: %+v", st)
	}
}

// /v1/stats and /metrics give each namespace's share of the hot set.
func TestStatsByNamespace(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	for _, u := range []string{"u1", "u2"} {
		filter(t, c, "compact", u, client.FilterRequest{Candidates: []string{"a", "b"}})
	}
	filter(t, c, "compact", "u1", client.FilterRequest{Candidates: []string{"c"}})
	filter(t, c, "bloom", "u1", client.FilterRequest{Candidates: []string{"a"}})
	r, err := c.GetStatsWithResponse(ctx)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v %d %s", err, r.StatusCode(), r.Body)
	}
	st := r.JSON200
	ns, err := c.ListNamespacesWithResponse(ctx)
	if err != nil || ns.JSON200 == nil {
		t.Fatalf("namespaces: %v %d %s", err, ns.StatusCode(), ns.Body)
	}
	if len(st.Namespaces) != len(ns.JSON200.Namespaces) {
		t.Fatalf("stats of %d namespaces, %d configured", len(st.Namespaces), len(ns.JSON200.Namespaces))
	}
	var users, bytes int64
	for _, n := range ns.JSON200.Namespaces {
		got, ok := st.Namespaces[n.Name]
		if !ok {
			t.Fatalf("no stats for namespace %s", n.Name)
		}
		users, bytes = users+got.HotUsers, bytes+got.CacheBytes
	}
	if users != st.HotUsers || bytes != st.CacheBytes {
		t.Errorf("namespaces sum to %d users and %d bytes, the service has %d and %d", users, bytes, st.HotUsers, st.CacheBytes)
	}
	cp, bl, df := st.Namespaces["compact"], st.Namespaces["bloom"], st.Namespaces["default"]
	// A new user's first call is no miss: no cache could have held it.
	if cp.HotUsers != 2 || cp.Hits != 1 || cp.Misses != 0 || cp.NoHistoryCalls != 2 || cp.NewUsers != 2 || cp.HitRatio != 1 || cp.CacheBytes <= 0 {
		t.Errorf("compact: %+v", cp)
	}
	if bl.HotUsers != 1 || bl.Misses != 0 || bl.NoHistoryCalls != 1 || bl.CacheBytes <= 0 || df.HotUsers != 0 || df.CacheBytes != 0 || df.Misses != 0 {
		t.Errorf("bloom: %+v; default: %+v", bl, df)
	}
	// Five distinct candidates in compact, none seen, all recorded; the
	// service's figures are the namespaces' sums.
	if cp.Candidates != 5 || cp.SeenCandidates != 0 || cp.Recorded != 5 || st.Candidates != 6 || st.Recorded != 6 {
		t.Errorf("candidates: compact %+v, service %d candidates, %d recorded", cp, st.Candidates, st.Recorded)
	}

	m, err := c.GetMetricsWithResponse(ctx)
	if err != nil || m.StatusCode() != http.StatusOK {
		t.Fatalf("metrics: %v %d", err, m.StatusCode())
	}
	for _, want := range []string{
		`seenapi_namespace_hot_users{namespace="compact"} 2`,
		`seenapi_namespace_hot_users{namespace="default"} 0`,
		`seenapi_namespace_cache_bytes{namespace="compact"} ` + strconv.FormatInt(cp.CacheBytes, 10),
		`seenapi_namespace_cache_hits_total{namespace="compact"} 1`,
		`seenapi_namespace_cache_misses_total{namespace="compact"} 0`,
		`seenapi_namespace_cache_no_history_total{namespace="compact"} 2`,
		`seenapi_namespace_loads_total{namespace="bloom"} 1`,
		`seenapi_namespace_new_users_total{namespace="compact"} 2`,
		`seenapi_namespace_evictions_total{namespace="compact"} 0`,
		`seenapi_namespace_candidates_total{namespace="compact"} 5`,
		`seenapi_namespace_candidates_seen_total{namespace="compact"} 0`,
		`seenapi_namespace_items_recorded_total{namespace="bloom"} 1`,
		`seenapi_candidates_total 6`,
	} {
		if !strings.Contains(string(m.Body), want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}

	// The store's LSM levels, from 0, in both.
	if len(st.StorageLevels) == 0 {
		t.Fatal("stats give no storage levels")
	}
	for i, l := range st.StorageLevels {
		if l.Level != i {
			t.Fatalf("storage levels %+v: level %d at index %d", st.StorageLevels, l.Level, i)
		}
		for _, want := range []string{
			fmt.Sprintf(`seenapi_storage_level_tables{level="%d"} `, i),
			fmt.Sprintf(`seenapi_storage_level_bytes{level="%d"} `, i),
		} {
			if !strings.Contains(string(m.Body), want) {
				t.Errorf("metrics lack %q", want)
			}
		}
	}
}

func TestMetricsInPrometheusFormat(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	filter(t, c, "default", "u", client.FilterRequest{Candidates: []string{"a"}})
	r, err := c.GetMetricsWithResponse(ctx)
	if err != nil || r.StatusCode() != http.StatusOK {
		t.Fatalf("metrics: %v %d", err, r.StatusCode())
	}
	body := string(r.Body)
	for _, want := range []string{
		`seenapi_http_requests_total{route="POST /v1/namespaces/{ns}/users/{user}/filter"} 1`,
		`seenapi_http_request_duration_seconds_count{route="POST /v1/namespaces/{ns}/users/{user}/filter"} 1`,
		`seenapi_http_request_duration_seconds_bucket{route="POST /v1/namespaces/{ns}/users/{user}/filter",le="+Inf"} 1`,
		"seenapi_hot_users 1", "seenapi_new_users_total 1", "seenapi_degraded_total 0", "seenapi_panics_total 0", "go_goroutines", `go_build_info{checksum="`,
		"go_gc_cycles_total_gc_cycles_total ", "go_cpu_classes_gc_total_cpu_seconds_total ", "go_gc_heap_allocs_bytes_total ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestHealthReadyOpenAPIAndDashboard(t *testing.T) {
	e := newEnv(t, withKeys)
	c := e.client("") // these routes need no key
	h, err := c.GetHealthWithResponse(ctx)
	if err != nil || h.JSON200 == nil || h.JSON200.Status != client.Ok || !h.JSON200.KeyRequired {
		t.Fatalf("healthz: %v %d %s, want ok and key_required true", err, h.StatusCode(), h.Body)
	}
	r, err := c.GetReadyWithResponse(ctx)
	if err != nil || r.JSON200 == nil || r.JSON200.Status != client.Ready || !r.JSON200.KeyRequired {
		t.Fatalf("readyz: %v %d %s, want ready and key_required true", err, r.StatusCode(), r.Body)
	}
	o, err := c.GetOpenAPIWithResponse(ctx)
	if err != nil || o.StatusCode() != http.StatusOK {
		t.Fatalf("openapi.yaml: %v %d", err, o.StatusCode())
	}
	want, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(o.Body, want) {
		t.Fatal("/openapi.yaml differs from openapi.yaml")
	}
	d, err := c.GetDashboardWithResponse(ctx)
	if err != nil || d.StatusCode() != http.StatusOK || !strings.HasPrefix(d.HTTPResponse.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("dashboard: %v %d", err, d.StatusCode())
	}
	if !bytes.Contains(bytes.ToLower(d.Body), []byte("<html")) {
		t.Fatalf("dashboard is not HTML: %.200s", d.Body)
	}
}

// TestHealthAndReadyAnswerHEAD: load balancers often probe with HEAD, which
// gets GET's status without a body, ready or not.
func TestHealthAndReadyAnswerHEAD(t *testing.T) {
	var notReady atomic.Bool
	e := newEnv(t, withKeys, func(c *api.Config) {
		c.Ready = func() error {
			if notReady.Load() {
				return errors.New("the store is closed")
			}
			return nil
		}
	})
	c := e.client("") // these routes need no key
	if h, err := c.HeadHealthWithResponse(ctx); err != nil || h.StatusCode() != http.StatusOK {
		t.Fatalf("HEAD /healthz: %v %d", err, h.StatusCode())
	}
	if r, err := c.HeadReadyWithResponse(ctx); err != nil || r.StatusCode() != http.StatusOK {
		t.Fatalf("HEAD /readyz: %v %d", err, r.StatusCode())
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if rest := afterHeadersOfHEAD(t, e, path); rest != "" {
			t.Errorf("HEAD %s sent a body: %q", path, rest)
		}
	}
	notReady.Store(true)
	if r, err := c.HeadReadyWithResponse(ctx); err != nil || r.StatusCode() != http.StatusServiceUnavailable {
		t.Fatalf("HEAD /readyz, not ready: %v %d", err, r.StatusCode())
	}
	if rest := afterHeadersOfHEAD(t, e, "/readyz"); rest != "" {
		t.Errorf("HEAD /readyz, not ready, sent a body: %q", rest)
	}
}

// afterHeadersOfHEAD sends HEAD path on a connection of its own and returns
// whatever the server sent after the answer's headers (Go's client would
// drop a body a HEAD answer should not have).
func afterHeadersOfHEAD(t *testing.T, e *env, path string) string {
	t.Helper()
	_, _, rest := rawHEAD(t, e, path)
	return rest
}

// rawHEAD sends HEAD path with the header lines given ("Name: value") on a
// connection of its own and returns the answer's status, its headers and
// whatever the server sent after them.
func rawHEAD(t *testing.T, e *env, path string, header ...string) (int, http.Header, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	req := "HEAD " + path + " HTTP/1.1\r\nHost: seenapi\r\nConnection: close\r\n"
	for _, h := range header {
		req += h + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, ok := strings.Cut(string(b), "\r\n\r\n")
	if !ok {
		t.Fatalf("HEAD %s: no end of headers in %q", path, b)
	}
	lines := strings.Split(head, "\r\n")
	var status int
	if _, err := fmt.Sscanf(lines[0], "HTTP/1.1 %d", &status); err != nil {
		t.Fatalf("HEAD %s: status line %q", path, lines[0])
	}
	h := http.Header{}
	for _, l := range lines[1:] {
		if k, v, ok := strings.Cut(l, ":"); ok {
			h.Add(k, strings.TrimSpace(v))
		}
	}
	return status, h, rest
}

// TestHEADAnswersAsGETDoes holds every GET route of openapi.yaml to its
// HEAD: GET's status, Content-Type and (where the body does not change
// between two calls) Content-Length, without the body, after the same role
// check; HEAD /v1/backup makes no backup.
func TestHEADAnswersAsGETDoes(t *testing.T) {
	e := newEnv(t, withKeys)
	filter(t, e.client(writeKey), "default", "u1", client.FilterRequest{Candidates: []string{"a", "b"}})
	// The user's stats say whether it is written back ("dirty"), which
	// would change its length between the GET and the HEAD: wait for it.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		u, err := e.client(readKey).GetUserWithResponse(ctx, "default", "u1")
		if err != nil || u.JSON200 == nil {
			t.Fatalf("GET u1: %v", err)
		}
		if !u.JSON200.Dirty {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("u1 not written back within a minute")
		}
	}
	params := strings.NewReplacer("{ns}", "default", "{user}", "u1")
	// Bodies that change from one call to the next (figures, a backup's
	// stream), whose lengths are not compared.
	changing := map[string]bool{"/metrics": true, "/v1/stats": true, "/v1/backup": true}
	n := 0
	for path, item := range loadSpec(t).Paths.Map() {
		if item.Get == nil {
			continue
		}
		p := params.Replace(path)
		for _, key := range []string{adminKey, readKey} {
			auth := "Authorization: Bearer " + key
			status, h, body := e.raw(http.MethodGet, p, "", nil, "Authorization", "Bearer "+key)
			hs, hh, rest := rawHEAD(t, e, p, auth)
			if hs != status || hh.Get("Content-Type") != h.Get("Content-Type") || rest != "" {
				t.Errorf("HEAD %s (%s): %d %q and %d bytes after the headers; GET: %d %q", p, key[:4], hs,
					hh.Get("Content-Type"), len(rest), status, h.Get("Content-Type"))
			}
			if !changing[path] && hh.Get("Content-Length") != strconv.Itoa(len(body)) {
				t.Errorf("HEAD %s (%s): Content-Length %q, GET's body is %d bytes", p, key[:4], hh.Get("Content-Length"), len(body))
			}
			n++
		}
	}
	if n < 2*10 {
		t.Fatalf("only %d GET routes tried", n/2)
	}
}

func TestDashboardFilesAreServed(t *testing.T) {
	e := newEnv(t)
	files, err := fs.Glob(web.FS(), "*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboard files: %v", err)
	}
	for _, name := range files {
		want, err := fs.ReadFile(web.FS(), name)
		if err != nil {
			continue // a directory
		}
		resp, err := http.Get(e.base + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, resp)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
			t.Errorf("/%s: %d, %d bytes, want %d", name, resp.StatusCode, len(got), len(want))
		}
	}
}

// A Range, and an expectation other than 100-continue (which RFC 9110,
// 10.1.1 lets a server ignore), are ignored by the dashboard's files and
// the API alike: the whole answer, 200, never a 206, 416 or 417, which
// openapi.yaml documents for no route.
func TestRangeAndExpectationsAreIgnored(t *testing.T) {
	e := newEnv(t)
	get := func(path string, header ...string) (int, http.Header, []byte) {
		req, err := http.NewRequest("GET", e.base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, readAll(t, resp)
	}
	for _, path := range []string{"/", "/app.js", "/v1/stats"} {
		_, _, whole := get(path)
		for _, h := range [][]string{{"Range", "bytes=999999-"}, {"Range", "bytes=0-9"}, {"Expect", "foo"}, {"Expect", "100-continue"}} {
			code, hdr, b := get(path, h...)
			if code != http.StatusOK || hdr.Get("Content-Range") != "" || path != "/v1/stats" && !bytes.Equal(b, whole) {
				t.Errorf("GET %s with %s: %s: %d, Content-Range %q, %d bytes of %d: %s",
					path, h[0], h[1], code, hdr.Get("Content-Range"), len(b), len(whole), truncate(b))
			}
		}
	}
}

func TestDashboardIsServedUnderAContentSecurityPolicy(t *testing.T) {
	const want = "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	e := newEnv(t, withKeys)
	d, err := e.client("").GetDashboardWithResponse(ctx)
	if err != nil || d.StatusCode() != http.StatusOK {
		t.Fatalf("dashboard: %v %d", err, d.StatusCode())
	}
	if got := d.HTTPResponse.Header.Get("Content-Security-Policy"); got != want {
		t.Errorf("/: Content-Security-Policy %q, want %q", got, want)
	}
	files, err := fs.Glob(web.FS(), "*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboard files: %v", err)
	}
	for _, name := range files {
		resp, err := http.Get(e.base + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if got := resp.Header.Get("Content-Security-Policy"); resp.StatusCode != http.StatusOK || got != want {
			t.Errorf("/%s: %d, Content-Security-Policy %q, want 200 and %q", name, resp.StatusCode, got, want)
		}
	}
}

// Every answer says its type is not to be guessed (nosniff), the answers
// of the routes that take a key, their refusals before the route runs
// included, are kept by no cache (a shared proxy's
// would give a user's filter, the figures or a backup to the next caller,
// key or not), and the dashboard may not be framed (for browsers without
// CSP's frame-ancestors too) and sends no Referer. Every other answer,
// refusals made before any route included, may load and run nothing nor
// be framed, should a browser render it (wantNotRendered).
func TestAnswersCarryTheirSecurityHeaders(t *testing.T) {
	e := newEnv(t, withKeys)
	if code, _, b := e.raw("POST", userPath("default", "<script>", "/seen"), "application/json",
		[]byte(`{"items":["<img src=x onerror=alert(1)>"]}`), "Authorization", "Bearer "+writeKey); code != 200 {
		t.Fatalf("seen: %d %s", code, b)
	}
	const dashboard, keyed = 1, 2
	for _, tc := range []struct {
		name, method, path, key string
		status, kind            int
	}{
		{"the dashboard", "GET", "/", "", 200, dashboard},
		{"a dashboard file", "GET", "/app.js", "", 200, dashboard},
		{"a user", "GET", userPath("default", "<script>", ""), readKey, 200, keyed},
		{"an export", "GET", userPath("default", "<script>", "/export"), adminKey, 200, keyed},
		{"the figures", "GET", "/v1/stats", readKey, 200, keyed},
		{"the metrics", "GET", "/metrics", readKey, 200, keyed},
		{"a backup's headers", "HEAD", "/v1/backup", adminKey, 200, keyed},
		{"no key", "GET", userPath("default", "<script>", ""), "", 401, keyed},
		{"a problem of the user id", "GET", userPath("default", "..", ""), readKey, 400, keyed},
		{"no route", "GET", "/v1/<script>", "", 404, 0},
		{"no dashboard file", "GET", "/<script>.js", "", 404, 0},
		{"a method the route does not take", "PATCH", "/v1/stats", readKey, 405, keyed},
		{"a method a user's route does not take", "GET", userPath("default", "<script>", "/filter"), readKey, 405, keyed},
		{"a method a probe does not take", "POST", "/healthz", "", 405, 0},
		{"a body over the limit", "POST", userPath("default", "u", "/seen"), writeKey, 413, keyed},
		{"a probe", "GET", "/healthz", "", 200, 0},
		{"readiness", "HEAD", "/readyz", "", 200, 0},
		{"the document", "GET", "/openapi.yaml", "", 200, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.status == http.StatusRequestEntityTooLarge {
				body = bytes.NewReader(make([]byte, api.DefaultMaxBodyBytes+1))
			}
			req, err := http.NewRequest(tc.method, e.base+"/", body)
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Opaque = tc.path // as given, escapes and all
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, h := readAll(t, resp), resp.Header
			if resp.StatusCode != tc.status {
				t.Fatalf("%d, want %d: %s", resp.StatusCode, tc.status, truncate(b))
			}
			want := map[string]string{"X-Content-Type-Options": "nosniff"}
			if tc.kind == keyed {
				want["Cache-Control"] = "no-store"
			}
			if tc.kind == dashboard {
				want["X-Frame-Options"] = "DENY"
				want["Referrer-Policy"] = "no-referrer"
			} else {
				wantNotRendered(t, tc.name, h)
			}
			for name, v := range want {
				if got := h.Get(name); got != v {
					t.Errorf("%s: %q, want %q", name, got, v)
				}
			}
		})
	}
	// A request fasthttp refuses before any route (headers past its
	// buffer) is answered by the error handler alone.
	conn, _ := e.dial(t)
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: %s\r\n\r\n", strings.Repeat("p", 8<<10))
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != 431 {
		t.Errorf("headers too large: %d, want 431", resp.StatusCode)
	}
	wantNotRendered(t, "headers too large", resp.Header)
}

// Answers of the one call are encoded into recycled buffers and their
// unseen lists into recycled slices: concurrent calls of different users
// must each get exactly their own answer, as JSON.
func TestConcurrentOneCallsGetTheirOwnAnswers(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	var offered, missing atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				user := fmt.Sprintf("u:%d", g)
				items := make([]string, 1+(g+i)%7)
				for j := range items {
					items[j] = fmt.Sprintf("g%d-c%d-%d", g, i, j)
				}
				body, _ := json.Marshal(map[string]any{"candidates": items})
				status, h, raw, err := e.rawErr("POST", userPath("default", user, "/filter"), "application/json", body)
				var got struct {
					Unseen []string `json:"unseen"`
				}
				if err != nil || status != 200 || h.Get("Content-Type") != "application/json" || json.Unmarshal(raw, &got) != nil {
					t.Errorf("%s call %d: %v %d %s %s", user, i, err, status, h.Get("Content-Type"), raw)
					return
				}
				// Every item is new: all come back, in order, but for the
				// filter's false positives.
				if !isSubsequence(got.Unseen, items) {
					t.Errorf("%s call %d: unseen %v, want (a subsequence of) %v", user, i, got.Unseen, items)
					return
				}
				offered.Add(int64(len(items)))
				missing.Add(int64(len(items) - len(got.Unseen)))
			}
		}()
	}
	wg.Wait()
	if m, o := missing.Load(), offered.Load(); m*100 > 2*o {
		t.Errorf("%d of %d new items reported seen, want at most 2%% (the profile's false-positive rate is 1%%)", m, o)
	}
}

// isSubsequence reports whether sub is s with some elements left out.
func isSubsequence(sub, s []string) bool {
	for _, x := range s {
		if len(sub) > 0 && sub[0] == x {
			sub = sub[1:]
		}
	}
	return len(sub) == 0
}

// sink keeps an allocation from being optimized away.
var sink []byte

func TestStatsGiveTheCollectorsWork(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	stats := func() *client.ServiceStats {
		r, err := c.GetStatsWithResponse(ctx)
		if err != nil || r.JSON200 == nil {
			t.Fatalf("stats: %v %d %s", err, r.StatusCode(), r.Body)
		}
		return r.JSON200
	}
	before := stats().Collector
	runtime.GC() // the server runs in this process
	runtime.GC()
	sink = make([]byte, 1<<20) // allocated between the two readings
	after := stats().Collector
	if after.AllocatedBytes < before.AllocatedBytes+1<<20 {
		t.Errorf("allocated %d then %d bytes across an allocation of 1 MiB", before.AllocatedBytes, after.AllocatedBytes)
	}
	if after.Cycles < before.Cycles+2 {
		t.Errorf("collections %d then %d after two forced ones", before.Cycles, after.Cycles)
	}
	if after.CpuSeconds <= 0 || after.CpuSeconds < before.CpuSeconds || after.BusyCpuSeconds < after.CpuSeconds {
		t.Errorf("collector CPU %v of %v busy, before %v", after.CpuSeconds, after.BusyCpuSeconds, before.CpuSeconds)
	}
	if after.HeapLiveBytes <= 0 || after.HeapGoalBytes < after.HeapLiveBytes {
		t.Errorf("heap %d live, goal %d", after.HeapLiveBytes, after.HeapGoalBytes)
	}
}

// gcCPU reads this process's collector CPU and the part of it spent marking
// on otherwise idle cores, as the Go runtime estimates them.
func gcCPU() (total, idleMark float64) {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/gc/mark/idle:cpu-seconds"}}
	metrics.Read(s)
	return s[0].Value.Float64(), s[1].Value.Float64()
}

// keepLive is a heap for the collector to mark.
var keepLive [][]byte

func TestStatsLeaveOutTheCollectorsIdleMarking(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	keepLive = make([][]byte, 200_000)
	for i := range keepLive {
		keepLive[i] = make([]byte, 64)
	}
	defer func() { keepLive = nil }()
	// Collections forced while the other cores are idle give the runtime
	// idle marking to count.
	for i := 0; i < 50; i++ {
		if _, idle := gcCPU(); idle > 0 {
			break
		}
		runtime.GC()
	}
	total0, idle0 := gcCPU()
	if idle0 == 0 {
		t.Fatalf("50 collections of a 12 MiB heap and the runtime counts no idle marking (GOMAXPROCS %d)", runtime.GOMAXPROCS(0))
	}
	r, err := c.GetStatsWithResponse(ctx) // the server runs in this process
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v %d %s", err, r.StatusCode(), r.Body)
	}
	total1, idle1 := gcCPU()
	got := r.JSON200.Collector.CpuSeconds
	// The server read the runtime between the two readings here.
	if lo, hi := total0-idle1, total1-idle0; got < lo-1e-9 || got > hi+1e-9 {
		t.Errorf("collector CPU %.6f s; want the runtime's %.6f to %.6f s less its idle marking (%.6f to %.6f s)",
			got, total0, total1, idle0, idle1)
	}
}
