package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/seenapi/seenapi/client"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
)

// A namespace taken out of the list is listed as stored and not served,
// and DELETE /v1/namespaces/{ns} erases its users for good; while it is
// served the purge is refused and nothing changes.
func TestPurgeNamespaceThroughTheClient(t *testing.T) {
	var l logLines
	e := newEnv(t, withKeys, withLog(&l))
	c := e.client(adminKey)
	for _, user := range []string{"u1", "u2", "u3"} {
		filter(t, c, "compact", user, client.FilterRequest{Candidates: []string{"a", "b"}})
	}
	filter(t, c, "default", "kept", client.FilterRequest{Candidates: []string{"a"}})

	r, err := c.PurgeNamespaceWithResponse(ctx, "compact")
	if err != nil {
		t.Fatal(err)
	}
	if r.ApplicationproblemJSON409 == nil || r.ApplicationproblemJSON409.Type != "https://seenapi.dev/problems/namespace-served" {
		t.Fatalf("purging a served namespace: %d %s", r.StatusCode(), r.Body)
	}
	if d := r.ApplicationproblemJSON409.Detail; d == nil || !strings.Contains(*d, `namespace "compact" is served; take it out of the namespaces file`) {
		t.Errorf("detail %v, want the namespace and what to do", d)
	}
	if got := filter(t, c, "compact", "u1", client.FilterRequest{Candidates: []string{"a"}, Record: ptr(client.None)}); len(got.Unseen) != 0 {
		t.Fatalf("a refused purge made %v unseen", got.Unseen)
	}

	list := func() []string {
		t.Helper()
		l, err := c.ListNamespacesWithResponse(ctx)
		if err != nil || l.JSON200 == nil {
			t.Fatalf("list namespaces: %v %d %s", err, l.StatusCode(), l.Body)
		}
		return l.JSON200.NotServed
	}
	if ns := list(); len(ns) != 0 {
		t.Fatalf("not served while every namespace is: %v", ns)
	}
	all := testNamespaces()
	if _, err := e.hot.SetNamespaces(slices.DeleteFunc(slices.Clone(all), func(n eviction.Namespace) bool { return n.Name == "compact" })); err != nil {
		t.Fatal(err)
	}
	if ns := list(); !slices.Equal(ns, []string{"compact"}) {
		t.Fatalf("not served after compact was taken out: %v", ns)
	}

	for _, key := range []string{readKey, writeKey} {
		if r, _ := e.client(key).PurgeNamespaceWithResponse(ctx, "compact"); r.ApplicationproblemJSON403 == nil {
			t.Fatalf("purge with a key below admin: %d %s", r.StatusCode(), r.Body)
		}
	}
	r, err = c.PurgeNamespaceWithResponse(ctx, "compact")
	if err != nil || r.JSON200 == nil {
		t.Fatalf("purge: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if r.JSON200.Namespace != "compact" || r.JSON200.UsersErased != 3 {
		t.Fatalf("purge answered %+v, want compact and 3 users", *r.JSON200)
	}
	wantAudit(t, &l, "seenapi: namespace purged", "key "+sha8(adminKey), map[string]any{"namespace": "compact", "users_erased": 3.0})
	if ns := list(); len(ns) != 0 {
		t.Fatalf("not served after the purge: %v", ns)
	}

	// Served again, it starts empty; the namespace that stayed is whole.
	if _, err := e.hot.SetNamespaces(all); err != nil {
		t.Fatal(err)
	}
	if u, _ := c.GetUserWithResponse(ctx, "compact", "u1"); u.StatusCode() != http.StatusNotFound {
		t.Fatalf("a purged user served again: %d %s", u.StatusCode(), u.Body)
	}
	if got := filter(t, c, "default", "kept", client.FilterRequest{Candidates: []string{"a"}, Record: ptr(client.None)}); len(got.Unseen) != 0 {
		t.Fatalf("default/kept after compact's purge: %v unseen", got.Unseen)
	}
}

func TestPurgeNamespaceBadOrUnknownName(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		path   string
		status int
		slug   string
	}{
		{"/v1/namespaces/never", http.StatusNotFound, "unknown-namespace"},
		{"/v1/namespaces/Bad%20Name", http.StatusBadRequest, "bad-request"},
		{"/v1/namespaces/default?force=true", http.StatusBadRequest, "bad-request"},
		{"/v1/namespaces/default", http.StatusConflict, "namespace-served"},
	} {
		status, h, body := e.raw(http.MethodDelete, tc.path, "", nil)
		wantProblem(t, status, h, body, tc.status, tc.slug)
	}
	// "default" cannot be taken out of the namespaces file, as the others'
	// 409 asks: its own says so, and what can be done instead.
	status, h, body := e.raw(http.MethodDelete, "/v1/namespaces/default", "", nil)
	p := wantProblem(t, status, h, body, http.StatusConflict, "namespace-served")
	if !strings.Contains(p.Detail, `namespace "default" is always served`) || !strings.Contains(p.Detail, "erase its users one by one") {
		t.Errorf("the purge of default: detail %q, want it to say default is always served and what to do", p.Detail)
	}
}

// fullPurgeStore is the real store whose purges meet a full disk, as a
// purge's deletes do when the disk fills under them.
type fullPurgeStore struct{ *storage.Store }

func (fullPurgeStore) PurgeNamespace(ns string) (int, error) {
	return 0, fmt.Errorf("purge namespace %s: %w", ns, storage.ErrFull)
}

// A purge whose deletes meet a full disk answers 507 storage-full, as an
// erase of one user does, and its operation lists 507, so that a
// generated client decodes it as the problem it is (as the erase's, the
// one call's) rather than as an answer it was not told of.
func TestAPurgeOnAFullDiskAnswers507ItsOperationLists(t *testing.T) {
	e := newEnvOver(t, func(st *storage.Store) eviction.Store { return fullPurgeStore{st} })
	filter(t, e.client(""), "compact", "u1", client.FilterRequest{Candidates: []string{"a"}})
	if _, err := e.hot.SetNamespaces(slices.DeleteFunc(testNamespaces(), func(n eviction.Namespace) bool { return n.Name == "compact" })); err != nil {
		t.Fatal(err)
	}
	status, h, body := e.raw(http.MethodDelete, "/v1/namespaces/compact", "", nil)
	wantProblem(t, status, h, body, http.StatusInsufficientStorage, "storage-full")
	if loadSpec(t).Paths.Value("/v1/namespaces/{ns}").Delete.Responses.Status(http.StatusInsufficientStorage) == nil {
		t.Error("DELETE /v1/namespaces/{ns} answers 507 storage-full; its operation in openapi.yaml does not list 507")
	}
}
