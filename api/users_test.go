package api_test

import (
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/client"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/storage/storagetest"
	"github.com/seenapi/seenapi/userfilter"
)

// GET /v1/namespaces/{ns}/users pages through every user with a history,
// in byte order, through the generated client: a full page says where the
// next starts, the last does not; a user only checked is not listed, a
// forgotten one no longer is.
func TestListUsersPagesThroughEveryUser(t *testing.T) {
	e := newEnv(t, withKeys)
	w, rd := e.client(writeKey), e.client(readKey)
	users := []string{"u:3", "u:1", "a b+c/ü", "u:2", "u:10"}
	for _, u := range users {
		filter(t, w, "default", u, client.FilterRequest{Candidates: []string{"x"}})
	}
	filter(t, w, "bloom", "elsewhere", client.FilterRequest{Candidates: []string{"x"}})
	if r, err := rd.CheckSeenWithResponse(ctx, "default", "asked", client.ItemsRequest{Items: []string{"x"}}); err != nil || r.JSON200 == nil {
		t.Fatalf("check: %v %d", err, r.StatusCode())
	}
	if r, err := e.client(adminKey).ForgetUserWithResponse(ctx, "default", "u:2"); err != nil || r.StatusCode() != http.StatusNoContent {
		t.Fatalf("forget: %v %d", err, r.StatusCode())
	}
	want := []string{"a b+c/ü", "u:1", "u:10", "u:3"}

	var got []string
	var pages [][]string
	params := client.ListUsersParams{Limit: ptr(1)} // each id an after: "a b+c/ü" too, escaped in the query
	for range 10 {
		r, err := rd.ListUsersWithResponse(ctx, "default", &params)
		if err != nil || r.JSON200 == nil {
			t.Fatalf("list: %v %d %s", err, r.StatusCode(), r.Body)
		}
		pages = append(pages, r.JSON200.Users)
		got = append(got, r.JSON200.Users...)
		if r.JSON200.Next == nil {
			break
		}
		params.After = r.JSON200.Next
	}
	if !slices.Equal(got, want) || len(pages) != len(want) {
		t.Fatalf("pages %q, want %q one a page, the fourth the last", pages, want)
	}

	// The default page holds them all, and a page after the last is empty
	// and the last one.
	r, err := rd.ListUsersWithResponse(ctx, "default", nil)
	if err != nil || r.JSON200 == nil || !slices.Equal(r.JSON200.Users, want) || r.JSON200.Next != nil {
		t.Fatalf("default page: %v %d %s", err, r.StatusCode(), r.Body)
	}
	r, err = rd.ListUsersWithResponse(ctx, "default", &client.ListUsersParams{After: ptr("u:3")})
	if err != nil || r.JSON200 == nil || r.JSON200.Users == nil || len(r.JSON200.Users) != 0 || r.JSON200.Next != nil {
		t.Fatalf("after the last: %v %d %s, want an empty list (not null) and no next", err, r.StatusCode(), r.Body)
	}
}

// Bad paging parameters are refused naming the parameter; an unknown
// namespace is a 404; without a key a 401.
func TestListUsersRefusesBadParameters(t *testing.T) {
	e := newEnv(t, withKeys)
	base := "/v1/namespaces/default/users"
	for _, tc := range []struct {
		query string
		param string
	}{
		{"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=x", "limit"}, {"limit=-1", "limit"},
		{"after=" + url.QueryEscape("a\x00b"), "after"}, {"after=" + url.QueryEscape(string(make([]byte, 300))), "after"},
		{"page=2", "page"},
	} {
		status, h, body := e.raw(http.MethodGet, base+"?"+tc.query, "", nil, "Authorization", "Bearer "+readKey)
		p := wantProblem(t, status, h, body, http.StatusBadRequest, "bad-request")
		if len(p.Errors) != 1 || p.Errors[0].Parameter != tc.param {
			t.Errorf("?%s: errors %+v, want one naming %s", tc.query, p.Errors, tc.param)
		}
	}
	status, h, body := e.raw(http.MethodGet, "/v1/namespaces/nope/users", "", nil, "Authorization", "Bearer "+readKey)
	wantProblem(t, status, h, body, http.StatusNotFound, "unknown-namespace")
	status, h, body = e.raw(http.MethodGet, base, "", nil)
	wantProblem(t, status, h, body, http.StatusUnauthorized, "unauthorized")
}

// With ?details=true a page gives each user's summary: a hot user's from
// memory, a cold one's read from the store and left out of memory, and a
// corrupt one's error beside the others'.
func TestListUsersWithDetails(t *testing.T) {
	e := newEnv(t, withKeys)
	w, rd := e.client(writeKey), e.client(readKey)
	filter(t, w, "default", "hot", client.FilterRequest{Candidates: []string{"a", "b", "c"}})
	raw, err := e.hot.Export("default", "hot")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.WriteBack([]storage.Write{{NS: "default", User: "cold", Value: raw},
		{NS: "default", User: "corrupt", Value: []byte("not a filter at all")}}, nil); err != nil {
		t.Fatal(err)
	}

	hot, err := e.hot.User("default", "hot")
	if err != nil {
		t.Fatal(err)
	}
	before := e.hot.Stats()

	r, err := rd.ListUsersWithResponse(ctx, "default", &client.ListUsersParams{Details: ptr(true)})
	if err != nil || r.JSON200 == nil || r.JSON200.Details == nil {
		t.Fatalf("list with details: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if want := []string{"cold", "corrupt", "hot"}; !slices.Equal(r.JSON200.Users, want) {
		t.Fatalf("users %q, want %q", r.JSON200.Users, want)
	}
	d := *r.JSON200.Details
	if len(d) != 3 {
		t.Fatalf("%d summaries for 3 users: %s", len(d), r.Body)
	}
	for i, want := range []bool{false, true} {
		s := d[2*i]
		if s.Items == nil || *s.Items != 3 || s.Hot == nil || *s.Hot != want || s.LastSeen == nil ||
			!s.LastSeen.Equal(hot.LastSeen) || s.MemoryBytes == nil || *s.MemoryBytes <= 0 || s.FpRate == nil || s.Error != nil {
			t.Errorf("%s: %s", s.User, r.Body)
		}
	}
	if s := d[1]; s.User != "corrupt" || s.Error == nil || s.Error.Type != api.ProblemBase+"corrupt-filter" || s.Items != nil {
		t.Errorf("corrupt: %s", r.Body)
	}
	if after := e.hot.Stats(); after.HotUsers != 1 || after.Hits != before.Hits || after.Misses != before.Misses {
		t.Errorf("after the listing: %d hot users, %d hits, %d misses; want the one hot user and %d, %d as before",
			after.HotUsers, after.Hits, after.Misses, before.Hits, before.Misses)
	}

	// Without it, no details; a value other than true or false is refused.
	if r, err := rd.ListUsersWithResponse(ctx, "default", nil); err != nil || r.JSON200 == nil || r.JSON200.Details != nil {
		t.Fatalf("list without details: %v %s", err, r.Body)
	}
	status, h, body := e.raw(http.MethodGet, "/v1/namespaces/default/users?details=yes", "", nil, "Authorization", "Bearer "+readKey)
	if p := wantProblem(t, status, h, body, http.StatusBadRequest, "bad-request"); len(p.Errors) != 1 || p.Errors[0].Parameter != "details" {
		t.Errorf("?details=yes: errors %+v, want one naming details", p.Errors)
	}
}

// withoutTimes is the encoded filter raw with its first and last seen
// cleared, as a filter made by hand may be: items, but no times (see the
// encoding in userfilter/encode.go: they follow two bytes and seven
// uvarints, and a CRC-32C ends it).
func withoutTimes(t *testing.T, raw []byte) []byte {
	t.Helper()
	at := 2
	for range 7 {
		_, n := binary.Uvarint(raw[at:])
		if n <= 0 {
			t.Fatalf("not an encoded filter: %x", raw)
		}
		at += n
	}
	_, n1 := binary.Uvarint(raw[at:])
	_, n2 := binary.Uvarint(raw[at+n1:])
	out := append(append(append([]byte(nil), raw[:at]...), 0, 0), raw[at+n1+n2:len(raw)-4]...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, crc32.MakeTable(crc32.Castagnoli)))
}

// A user's summary in a page with details leaves last_seen out when the
// filter holds no time (made by hand: items, but no times) rather than
// giving the zero time, 0001-01-01T00:00:00Z. A user whose stored filter
// never recorded an item (written by builds that made a user of an import
// of such a filter) answers as a user never seen: 404 for its stats and
// export, not listed, and no summary.
func TestListUsersDetailsOfFiltersWithoutTimes(t *testing.T) {
	e := newEnv(t)
	c := e.client("")
	f, err := userfilter.New(userfilter.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	never := storagetest.NoHistory(t, userfilter.DefaultProfile())
	f.Add([]string{"a"}, time.Now())
	raw, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.WriteBack([]storage.Write{{NS: "default", User: "made", Value: withoutTimes(t, raw)},
		{NS: "default", User: "never", Value: never}}, nil); err != nil {
		t.Fatal(err)
	}
	if st, err := c.GetUserWithResponse(ctx, "default", "made"); err != nil || st.JSON200 == nil || st.JSON200.Items != 1 || !st.JSON200.LastSeen.IsZero() {
		t.Fatalf("made's stats: %v %d %s, want one item and no time", err, st.StatusCode(), st.Body)
	}
	if r, err := c.GetUserWithResponse(ctx, "default", "never"); err != nil || r.ApplicationproblemJSON404 == nil ||
		r.ApplicationproblemJSON404.Type != api.ProblemBase+"user-not-found" {
		t.Errorf("never's stats: %v %d %s, want 404 user-not-found", err, r.StatusCode(), r.Body)
	}
	if r, err := c.ExportUserWithResponse(ctx, "default", "never"); err != nil || r.StatusCode() != http.StatusNotFound {
		t.Errorf("never's export: %v %d %s, want 404", err, r.StatusCode(), r.Body)
	}
	status, _, body := e.raw(http.MethodGet, "/v1/namespaces/default/users?details=true", "", nil)
	var page struct {
		Users   []string         `json:"users"`
		Details []map[string]any `json:"details"`
	}
	if err := json.Unmarshal(body, &page); status != http.StatusOK || err != nil {
		t.Fatalf("list with details: %d %v %s", status, err, body)
	}
	if !slices.Equal(page.Users, []string{"made"}) {
		t.Errorf("users %q, want [made]: never answers as a user never seen", page.Users)
	}
	if len(page.Details) != 1 || page.Details[0]["user"] != "made" || page.Details[0]["items"] != 1.0 {
		t.Fatalf("details %s, want made's alone", body)
	}
	if v, ok := page.Details[0]["last_seen"]; ok {
		t.Errorf("made's last_seen: %v, want none", v)
	}
}
