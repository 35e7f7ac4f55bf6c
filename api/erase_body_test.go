package api_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/client"
	"github.com/seenapi/seenapi/eviction"
)

// The routes that erase take no body, and one that comes with a body was
// meant for another route: DELETE .../users/{user} with {"items": [...]}
// is a forget-items call without its /items, and a generated client asked
// to forget items of the user "." sends it too, to the user "items" (a
// client resolves the dot segment away: .../users/./items is
// .../users/items). Served, it would erase that whole user. It is refused
// with 400 and erases nothing; the same for a namespace's purge. Without a
// body (or with an empty one) both erase as before.
func TestAnEraseWithABodyIsRefusedAndErasesNothing(t *testing.T) {
	e := newEnv(t) // open: every caller is admin, as by default
	c := e.client("")
	for _, user := range []string{"u1", "items"} {
		filter(t, c, "compact", user, client.FilterRequest{Candidates: []string{"a", "b"}})
	}
	for _, body := range []string{`{"items":["a"]}`, `{}`} {
		status, h, b := e.raw(http.MethodDelete, userPath("compact", "u1", ""), "application/json", []byte(body))
		p := wantProblem(t, status, h, b, http.StatusBadRequest, "bad-request")
		if want := "DELETE /v1/namespaces/{ns}/users/{user} takes no body: it erases the whole user; to forget some of its items, " +
			"DELETE .../users/{user}/items (a client sends this for the user \".\" of .../users/./items: \".\" and \"..\" cannot be user ids); " +
			"nothing was erased"; p.Detail != want {
			t.Errorf("detail %q, want %q", p.Detail, want)
		}
		if e.stateOf("compact", "u1") == nil {
			t.Fatalf("DELETE of the user with the body %q erased it", body)
		}
	}

	// A generated client's forget-items of the user ".": the request it
	// sends is not the one asked for, so its client does not validate it.
	plain, err := client.NewClientWithResponses(e.base)
	if err != nil {
		t.Fatal(err)
	}
	r, err := plain.ForgetItemsWithResponse(ctx, "compact", ".", client.ItemsRequest{Items: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode() != http.StatusBadRequest {
		t.Errorf("forget-items of the user %q through the client: %d %s, want 400", ".", r.StatusCode(), r.Body)
	}
	if e.stateOf("compact", "items") == nil {
		t.Fatalf("forget-items of the user %q erased the user %q", ".", "items")
	}

	// A namespace not served, purged with a body: refused, then purged.
	if _, err := e.hot.SetNamespaces(slices.DeleteFunc(testNamespaces(), func(n eviction.Namespace) bool { return n.Name == "compact" })); err != nil {
		t.Fatal(err)
	}
	status, h, b := e.raw(http.MethodDelete, "/v1/namespaces/compact", "application/json", []byte(`{"users":["u1"]}`))
	wantProblem(t, status, h, b, http.StatusBadRequest, "bad-request")
	if _, err := e.hot.SetNamespaces(testNamespaces()); err != nil {
		t.Fatal(err)
	}
	if e.stateOf("compact", "u1") == nil || e.stateOf("compact", "items") == nil {
		t.Fatal("a purge with a body erased the namespace's users")
	}

	// Without a body, the erase erases.
	if d, err := c.ForgetUserWithResponse(ctx, "compact", "u1"); err != nil || d.StatusCode() != http.StatusNoContent {
		t.Fatalf("forget: %v %d %s", err, d.StatusCode(), d.Body)
	}
	if e.stateOf("compact", "u1") != nil {
		t.Fatal("the user is still there after its erase")
	}
	if status, _, b := e.raw(http.MethodDelete, userPath("compact", "items", ""), "application/json", nil); status != http.StatusNoContent {
		t.Fatalf("DELETE with an empty body: %d %s", status, b)
	}
}

// The erase's answer says whether there was anything of the user to
// erase (Data-Erased), as the erase itself found it: a look before it
// that found no user is out of date once the user is recorded meanwhile.
// A user never seen, and one erased already, had nothing.
func TestAnEraseSaysWhetherTheUserHadData(t *testing.T) {
	e := newEnv(t, withKeys)
	admin := e.client(adminKey)
	erase := func(user, want, when string) {
		t.Helper()
		r, err := admin.ForgetUserWithResponse(ctx, "default", user)
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode() != http.StatusNoContent {
			t.Fatalf("%s: erase: %d %s, want 204", when, r.StatusCode(), r.Body)
		}
		if got := r.HTTPResponse.Header.Get(api.HeaderDataErased); got != want {
			t.Errorf("%s: the erase answers %s: %q, want %q", when, api.HeaderDataErased, got, want)
		}
		// The client reads the header as what it says, a boolean.
		if r.Headers204 == nil || r.Headers204.DataErased != (want == "true") {
			t.Errorf("%s: the generated client reads %+v, want DataErased %s", when, r.Headers204, want)
		}
	}
	erase("never", "false", "a user never seen")

	if r, err := admin.GetUserWithResponse(ctx, "default", "late"); err != nil || r.StatusCode() != http.StatusNotFound {
		t.Fatalf("look-up of a user not yet recorded: %v %d, want 404", err, r.StatusCode())
	}
	filter(t, e.client(writeKey), "default", "late", client.FilterRequest{Candidates: []string{"a", "b"}})
	erase("late", "true", "a user recorded after a look-up found none")
	erase("late", "false", "a user erased already")
}
