package api_test

import (
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/userfilter"
)

// fuzzRoutes are the routes FuzzRequestBody sends its bodies to: every route
// that reads a body, on an existing user (the victim) and on one that does
// not exist yet (the newcomer).
var fuzzRoutes = []struct {
	method, path, contentType string
	named                     witness // the user it names; none for the batch, which names its own
	reads                     bool    // changes nothing even when it succeeds
}{
	{http.MethodPost, "/v1/namespaces/default/users/victim/filter", "application/json", witness{"default", "victim"}, false},
	{http.MethodPost, "/v1/namespaces/default/users/newcomer/filter", "application/json", witness{"default", "newcomer"}, false},
	{http.MethodPost, "/v1/namespaces/capped/users/victim/filter", "application/json", witness{"capped", "victim"}, false},
	{http.MethodPost, "/v1/namespaces/default/users/victim/seen", "application/json", witness{"default", "victim"}, false},
	{http.MethodPost, "/v1/namespaces/default/users/victim/check", "application/json", witness{"default", "victim"}, true},
	{http.MethodPost, "/v1/namespaces/default/filter", "application/json", witness{}, false},
	{http.MethodPut, "/v1/namespaces/default/users/victim/export?mode=merge", "application/octet-stream", witness{"default", "victim"}, false},
	{http.MethodPut, "/v1/namespaces/default/users/newcomer/export?mode=replace", "application/octet-stream", witness{"default", "newcomer"}, false},
}

// witness is a user whose state FuzzRequestBody compares before and after
// each request.
type witness struct{ ns, user string }

// witnesses: two users with a history, one in each namespace of the
// victim's id, a bystander whom no route names, and the newcomer, who has
// none between inputs.
var witnesses = []witness{{"default", "victim"}, {"capped", "victim"}, {"default", "bystander"}, {"default", "newcomer"}}

// FuzzRequestBody sends arbitrary bodies to the real server: every answer
// fits openapi.yaml, none is a server error, and a refused request is a
// problem+json that changed nothing, neither the user it named nor another
// one (DESIGN: bad input changes nothing; a fault in one user's data never
// hurts another).
func FuzzRequestBody(f *testing.F) {
	e := newEnv(f, withKeys)
	exported := func() []byte {
		g, err := userfilter.New(userfilter.DefaultProfile())
		if err != nil {
			f.Fatal(err)
		}
		g.Add([]string{"x", "y"}, time.Now())
		b, err := g.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		return b
	}()
	for _, seed := range []struct {
		route int
		body  string
	}{
		{0, `{"candidates":["a","b","a","c"],"limit":2}`},
		{0, `{"candidates":["a"],"record":"all","on_error":"open"}`},
		{0, `{"candidates":["\u00e9t\u00e9","\ud83d\ude00"],"limit":0,"record":"none"}`},
		{0, `{"candidates":["a\u0000b"]}`},
		{0, `{"candidates":["a"],"limit":-1}`},
		{0, `{"candidates":["a"],"limit":1e3}`},
		{0, `{"candidates":["a"],"limit":99999999999999999999}`},
		{0, `{"candidates":["a"],"Candidates":["b"]}`},
		{0, `{"candidates":["a"],"candidates":["b"]}`},
		{0, `{"candidates":null}`},
		{0, `{"candidates":[1,2]}`},
		{0, `{"candidates":["a"]} {}`},
		{0, "\xef\xbb\xbf{\"candidates\":[\"a\"]}"},
		{0, `{"candidates":["\xff"]}`},
		{0, `[]`},
		{0, `"x"`},
		{1, `{"candidates":["n"],"limit":1}`},
		{2, `{"candidates":["1","2","3","4","5","6"],"record":"all"}`},
		{3, `{"items":["s","t"]}`},
		{3, `{"items":[]}`},
		{4, `{"items":["a","zz"]}`},
		{5, `{"requests":[{"user":"b1","candidates":["a"]},{"user":"","candidates":["a"]}]}`},
		{5, `{"requests":[{"user":"b2","candidates":["a"],"limit":1,"record":"none","on_error":"fail"}]}`},
		{5, `{"requests":[]}`},
		{6, string(exported)},
		{6, string(exported[:len(exported)-1])},
		{7, string(exported)},
		{7, "seen"},
	} {
		f.Add(uint8(seed.route), []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		e := e.as(t)
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		auth := []string{"Authorization", "Bearer " + adminKey}
		for _, w := range witnesses[:3] {
			if userState(t, e, w) == nil {
				status, _, b := e.raw(http.MethodPost, userPath(w.ns, w.user, "/filter"), "application/json",
					[]byte(`{"candidates":["a","b","c"]}`), auth...)
				if status != http.StatusOK {
					t.Fatalf("recording %v: %d %s", w, status, b)
				}
			}
		}
		before := make([]*eviction.UserStats, len(witnesses))
		for i, w := range witnesses {
			before[i] = userState(t, e, w)
		}
		status, h, answer := e.raw(r.method, r.path, r.contentType, body, auth...)
		if status >= 500 {
			t.Fatalf("%s %s answered %d to %q: %s", r.method, r.path, status, body, answer)
		}
		if status >= 400 {
			problem(t, status, h, answer)
		}
		for i, w := range witnesses {
			// A refused request changes nothing; an accepted one changes at
			// most the user it names, or those its batch names.
			if status < 400 && !r.reads && (w == r.named || r.named == witness{}) {
				continue
			}
			if after := userState(t, e, w); !reflect.DeepEqual(before[i], after) {
				t.Fatalf("%s %s answered %d to %q and changed %v:\nbefore %v\nafter  %v",
					r.method, r.path, status, body, w, before[i], after)
			}
		}
		if userState(t, e, witness{"default", "newcomer"}) != nil {
			// Start the next input without the newcomer.
			if s, _, b := e.raw(http.MethodDelete, userPath("default", "newcomer", ""), "", nil, auth...); s != http.StatusNoContent {
				t.Fatalf("forgetting the newcomer: %d %s", s, b)
			}
		}
	})
}

// userState is w's filter as the hot set holds it (nil: none), without
// what eviction and write-back change by themselves. Read from the hot set
// rather than through GET .../users/{user}: eight fewer requests an input.
func userState(t *testing.T, e *env, w witness) *eviction.UserStats {
	t.Helper()
	st, err := e.hot.User(w.ns, w.user)
	if errors.Is(err, eviction.ErrUserNotFound) {
		return nil
	}
	if err != nil {
		t.Fatalf("%v: %v", w, err)
	}
	st.Hot, st.Dirty = false, false
	return &st
}
