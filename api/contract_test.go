package api_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/userfilter"
)

// TestServedRoutesAreTheDocumentedRoutes holds the server to openapi.yaml in
// both directions.
func TestServedRoutesAreTheDocumentedRoutes(t *testing.T) {
	doc := loadSpec(t)
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	srv, err := api.New(nil, api.Config{})
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, r := range srv.App().GetRoutes(true) {
		parts := strings.Split(r.Path, "/")
		for i, p := range parts {
			if strings.HasPrefix(p, ":") {
				parts[i] = "{" + p[1:] + "}"
			}
		}
		served[r.Method+" "+strings.Join(parts, "/")] = true
	}
	for _, r := range slices.Sorted(maps.Keys(served)) {
		// HEAD answers every GET route (openapi.yaml's description says
		// so; TestHEADAnswersAsGETDoes holds each to its GET).
		if path, ok := strings.CutPrefix(r, http.MethodHead+" "); ok && documented[http.MethodGet+" "+path] {
			continue
		}
		if !documented[r] {
			t.Errorf("served but not in openapi.yaml: %s", r)
		}
	}
	for _, r := range slices.Sorted(maps.Keys(documented)) {
		if !served[r] {
			t.Errorf("in openapi.yaml but not served: %s", r)
		}
	}
	if len(served) < 17 {
		t.Errorf("only %d routes served", len(served))
	}
}

// TestExamplesHoldOnlyDocumentedMembers holds every example of
// openapi.yaml (bodies, answers, problems, parameters) to its schema
// closed as the validator closes the server's answers (closeObjects):
// loadSpec validates them against the document as written, whose objects
// take any member besides theirs, so an example could show a member no
// schema documents (misspelt, or one the server no longer sends) and a
// reader would look for it in vain.
func TestExamplesHoldOnlyDocumentedMembers(t *testing.T) {
	doc := loadSpec(t)
	closeObjects(doc)
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("an example of openapi.yaml has a member its schema does not document: %v", err)
	}
}

// TestDefaultNamespaceExamplesAreWhatTheServerAnswers holds openapi.yaml's
// examples of the "default" namespace to the profile the server answers
// for it (userfilter.DefaultProfile), so they cannot go stale again.
func TestDefaultNamespaceExamplesAreWhatTheServerAnswers(t *testing.T) {
	doc := loadSpec(t)
	example := func(path string) any {
		t.Helper()
		resp := doc.Paths.Value(path).Get.Responses.Status(200)
		if resp == nil || resp.Value.Content.Get("application/json") == nil {
			t.Fatalf("%s has no 200 application/json answer", path)
		}
		return resp.Value.Content.Get("application/json").Example
	}
	asJSON := func(v any) map[string]any {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	var inList map[string]any
	list, _ := example("/v1/namespaces").(map[string]any)
	nss, _ := list["namespaces"].([]any)
	for _, n := range nss {
		if m := asJSON(n); m["name"] == "default" {
			inList = m
		}
	}
	if inList == nil {
		t.Fatal("the example of GET /v1/namespaces has no namespace named default")
	}

	e := newEnv(t)
	status, _, body := e.raw(http.MethodGet, "/v1/namespaces/default", "", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /v1/namespaces/default: %d %s", status, body)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if want := asJSON(example("/v1/namespaces/{ns}")); !reflect.DeepEqual(want, got) {
		t.Errorf("the example of GET /v1/namespaces/{ns} is\n%v\nthe server answers\n%v", want, got)
	}
	if !reflect.DeepEqual(inList, got) {
		t.Errorf("the default namespace in the example of GET /v1/namespaces is\n%v\nthe server answers\n%v", inList, got)
	}
}

// TestAuthExamplesAreWhatTheServerAnswers holds the examples of GET
// /v1/auth to the fields the server answers in each case: a client written
// from the "key" example must find the key_id a keyed service always sends.
func TestAuthExamplesAreWhatTheServerAnswers(t *testing.T) {
	doc := loadSpec(t)
	examples := doc.Paths.Value("/v1/auth").Get.Responses.Status(200).Value.Content.Get("application/json").Examples
	for _, c := range []struct {
		example string
		opts    []envOption
		key     string
	}{
		{"key", []envOption{withKeys}, writeKey},
		{"limited", []envOption{func(c *api.Config) {
			c.Keys = []api.Key{{Role: api.RoleRead, Secret: readKey, Rate: 200, Burst: 400, Namespaces: []string{"bloom", "compact"}}}
		}}, readKey},
		{"open", nil, ""},
	} {
		ex := examples[c.example]
		if ex == nil {
			t.Fatalf("GET /v1/auth has no example %q", c.example)
		}
		want, _ := ex.Value.Value.(map[string]any)
		var header []string
		if c.key != "" {
			header = []string{"Authorization", "Bearer " + c.key}
		}
		status, _, body := newEnv(t, c.opts...).raw(http.MethodGet, "/v1/auth", "", nil, header...)
		if status != http.StatusOK {
			t.Fatalf("%s: GET /v1/auth: %d %s", c.example, status, body)
		}
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if w, g := slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)); !slices.Equal(w, g) {
			t.Errorf("the example %q of GET /v1/auth has the fields %q; the server answers %q", c.example, w, g)
		}
		for _, f := range []string{"role", "open"} {
			if want[f] != got[f] {
				t.Errorf("the example %q of GET /v1/auth says %s %v; the server answers %v", c.example, f, want[f], got[f])
			}
		}
	}
}

// The server sends Retry-After on every 429 and 503 (retryAfter), and
// any route may answer 503 (past --max-connections, or beyond the bodies
// being read at once) whether its operation lists 503 or not: every
// operation's 429, 503 and default responses declare the header.
func TestRetryAfterIsDeclaredWhereverItMayBeSent(t *testing.T) {
	doc := loadSpec(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for _, status := range []string{"429", "503", "default"} {
				r := op.Responses.Value(status)
				if r == nil {
					continue
				}
				if _, ok := r.Value.Headers["Retry-After"]; !ok {
					t.Errorf("%s %s: its %s response does not declare Retry-After", method, path, status)
				}
			}
		}
	}
}

// TestRequestExamplesAreAnsweredAsDocumented sends every operation of
// openapi.yaml as its examples make it (the path and query parameters',
// the headers', the JSON body's, each body example once) and holds the
// answer to the operation's documented success: its status, and no member
// that the operation's answer examples do not show. A reader (or a "try it
// out" page) sends the examples as they are; examples once named a
// namespace whose filters cannot do what they asked (answered 409
// unsupported), and one always served, which no purge erases (409
// namespace-served). The operations that record come first, so that the
// users the examples name have a history when they are read, and the
// erasures last; the namespaces the example of GET /v1/namespaces shows
// as not served are stored and not served.
func TestRequestExamplesAreAnsweredAsDocumented(t *testing.T) {
	doc := loadSpec(t)
	e := newEnv(t, withKeys)
	notServed, _ := doc.Paths.Value("/v1/namespaces").Get.Responses.Status(200).Value.
		Content.Get("application/json").Example.(map[string]any)["not_served"].([]any)
	for _, ns := range notServed {
		e.storeUnserved(ns.(string))
	}
	order := map[string]int{http.MethodPost: 0, http.MethodPut: 1, http.MethodGet: 2, http.MethodHead: 3, http.MethodDelete: 4}
	type call struct {
		method, path string
		op           *openapi3.Operation
		item         *openapi3.PathItem
	}
	var calls []call
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			calls = append(calls, call{method, path, op, item})
		}
	}
	slices.SortFunc(calls, func(a, b call) int {
		if c := order[a.method] - order[b.method]; c != 0 {
			return c
		}
		return strings.Compare(a.path, b.path)
	})
	sent := 0
	for _, c := range calls {
		bodies := map[string]any{"": nil}
		if c.op.RequestBody != nil {
			media := c.op.RequestBody.Value.Content.Get("application/json")
			if media == nil {
				continue // an import takes an export's bytes, which no example shows
			}
			bodies = map[string]any{}
			if media.Example != nil {
				bodies["example"] = media.Example
			}
			for name, ex := range media.Examples {
				bodies[name] = ex.Value.Value
			}
			if len(bodies) == 0 {
				t.Errorf("%s %s takes JSON but shows no example of it", c.method, c.path)
				continue
			}
		}
		target, header := exampleRequest(t, c.item, c.op, c.path)
		success, schema, shown := documentedSuccess(t, c.op)
		for _, name := range slices.Sorted(maps.Keys(bodies)) {
			var body []byte
			contentType := ""
			if bodies[name] != nil {
				var err error
				if body, err = json.Marshal(bodies[name]); err != nil {
					t.Fatal(err)
				}
				contentType = "application/json"
			}
			status, h, got := e.raw(c.method, target, contentType, body, header...)
			sent++
			if status != success {
				t.Errorf("%s %s, example %q: %d, documented %d: %s", c.method, target, name, status, success, truncate(got))
				continue
			}
			if schema == nil || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
				continue
			}
			var answer any
			if err := json.Unmarshal(got, &answer); err != nil {
				t.Fatalf("%s %s: %v: %s", c.method, target, err, got)
			}
			for _, m := range slices.Sorted(maps.Keys(members(answer, schema, ""))) {
				if !shown[m] {
					t.Errorf("%s %s, example %q: the answer has %s, which no answer example of the operation shows", c.method, c.path, name, m)
				}
			}
		}
	}
	if sent < 20 {
		t.Errorf("only %d example requests sent", sent)
	}
}

// storeUnserved makes ns a namespace whose users are stored but that is
// not served, as one taken out of the namespaces file.
func (e *env) storeUnserved(ns string) {
	e.t.Helper()
	all := testNamespaces()
	if _, err := e.hot.SetNamespaces(append(slices.Clone(all), eviction.Namespace{Name: ns, Profile: userfilter.DefaultProfile()})); err != nil {
		e.t.Fatal(err)
	}
	e.recordItems(ns, "u:1", 1)
	if _, err := e.hot.SetNamespaces(all); err != nil {
		e.t.Fatal(err)
	}
}

// exampleRequest returns the path and query of op made of its parameters'
// examples (the operation's own taking the place of the path's), and the
// headers of the examples of its header parameters with an admin key.
func exampleRequest(t *testing.T, item *openapi3.PathItem, op *openapi3.Operation, path string) (string, []string) {
	t.Helper()
	header := []string{"Authorization", "Bearer " + adminKey}
	query := url.Values{}
	target := path
	for _, ps := range []openapi3.Parameters{op.Parameters, item.Parameters} {
		for _, p := range ps {
			ex, ok := p.Value.Example.(string)
			switch {
			case p.Value.In == openapi3.ParameterInPath && !ok:
				t.Fatalf("%s: the path parameter %s has no example", path, p.Value.Name)
			case !ok:
			case p.Value.In == openapi3.ParameterInPath:
				target = strings.ReplaceAll(target, "{"+p.Value.Name+"}", url.PathEscape(ex))
			case p.Value.In == openapi3.ParameterInQuery:
				query.Set(p.Value.Name, ex)
			case p.Value.In == openapi3.ParameterInHeader:
				header = append(header, p.Value.Name, ex)
			}
		}
	}
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	return target, header
}

// documentedSuccess returns op's success status, the schema of its JSON
// answer (nil if it has none) and the members its answer examples show.
func documentedSuccess(t *testing.T, op *openapi3.Operation) (int, *openapi3.Schema, map[string]bool) {
	t.Helper()
	for status := 200; status < 300; status++ {
		r := op.Responses.Status(status)
		if r == nil {
			continue
		}
		media := r.Value.Content.Get("application/json")
		if media == nil {
			return status, nil, nil
		}
		shown := map[string]bool{}
		examples := []any{media.Example}
		for _, ex := range media.Examples {
			examples = append(examples, ex.Value.Value)
		}
		for _, ex := range examples {
			maps.Copy(shown, members(ex, media.Schema.Value, ""))
		}
		return status, media.Schema.Value, shown
	}
	t.Fatalf("%s has no success answer", op.OperationID)
	return 0, nil, nil
}

// members returns the JSON pointers of the members of v, of schema s,
// under prefix, without array indices (an array's elements share theirs)
// and with "*" for the keys of a map (additionalProperties), which are
// data, not members.
func members(v any, s *openapi3.Schema, prefix string) map[string]bool {
	m := map[string]bool{}
	switch v := v.(type) {
	case map[string]any:
		for k, w := range v {
			name, sub := k, (*openapi3.Schema)(nil)
			if s != nil {
				if p := s.Properties[k]; p != nil {
					sub = p.Value
				} else if a := s.AdditionalProperties.Schema; a != nil {
					name, sub = "*", a.Value
				}
			}
			m[prefix+"/"+name] = true
			maps.Copy(m, members(w, sub, prefix+"/"+name))
		}
	case []any:
		var items *openapi3.Schema
		if s != nil && s.Items != nil {
			items = s.Items.Value
		}
		for _, w := range v {
			maps.Copy(m, members(w, items, prefix))
		}
	}
	return m
}

// TestUserStatsExampleIsWhatTheServerAnswers holds the example of a
// user's stats to what the server answers for a user of a namespace of
// the example's kind and default profile who recorded the example's count
// of items, i:0, i:1 and so on (item hashes are stable, so every figure
// is): an example once showed a Bloom layer of 32 items in 256 bits with
// 7 hashes, which no filter with a 1% target has.
func TestUserStatsExampleIsWhatTheServerAnswers(t *testing.T) {
	doc := loadSpec(t)
	want, _ := doc.Paths.Value("/v1/namespaces/{ns}/users/{user}").Get.Responses.Status(200).Value.
		Content.Get("application/json").Example.(map[string]any)
	n, _ := want["items"].(float64)
	if want["kind"] != "bloom" || want["window"] != 0.0 || want["max_items"] != 0.0 || n < 1 {
		t.Fatalf("the example of GET /v1/namespaces/{ns}/users/{user} is no longer a Bloom filter of the default profile: %v", want)
	}
	e := newEnv(t, withKeys)
	e.recordItems("bloom", "u:1001", int(n))
	status, _, b := e.raw(http.MethodGet, userPath("bloom", "u:1001", ""), "", nil, "Authorization", "Bearer "+readKey)
	if status != http.StatusOK {
		t.Fatalf("stats: %d %s", status, b)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	// The times are the call's, and dirty depends on the write-back's.
	for _, m := range []string{"first_seen", "last_seen", "dirty"} {
		delete(got, m)
		delete(want, m)
	}
	if w, g := normalizeValue(t, want), normalizeValue(t, got); w != g {
		t.Errorf("the example of GET /v1/namespaces/{ns}/users/{user} is\n%s\nthe server answers\n%s", w, g)
	}
}

// normalizeValue returns v as JSON, its members sorted.
func normalizeValue(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUserSummaryExampleIsWhatTheServerAnswers holds the example of a
// page of users with details to what the server answers for a user of
// the default namespace who recorded the example's count of items, i:0,
// i:1 and so on: an example once showed a false-positive rate 250 times
// below the filter's.
func TestUserSummaryExampleIsWhatTheServerAnswers(t *testing.T) {
	doc := loadSpec(t)
	page, _ := doc.Paths.Value("/v1/namespaces/{ns}/users").Get.Responses.Status(200).Value.
		Content.Get("application/json").Examples["details"].Value.Value.(map[string]any)
	details, _ := page["details"].([]any)
	if len(details) == 0 {
		t.Fatal("the example details of GET /v1/namespaces/{ns}/users shows no user")
	}
	want, _ := details[0].(map[string]any)
	n, _ := want["items"].(float64)
	user, _ := want["user"].(string)
	e := newEnv(t, withKeys)
	e.recordItems("default", user, int(n))
	status, _, b := e.raw(http.MethodGet, "/v1/namespaces/default/users?details=true", "", nil, "Authorization", "Bearer "+readKey)
	if status != http.StatusOK {
		t.Fatalf("users: %d %s", status, b)
	}
	var got struct{ Details []map[string]any }
	if err := json.Unmarshal(b, &got); err != nil || len(got.Details) != 1 {
		t.Fatalf("users: %v %s", err, b)
	}
	delete(got.Details[0], "last_seen") // the call's time
	delete(want, "last_seen")
	if w, g := normalizeValue(t, want), normalizeValue(t, got.Details[0]); w != g {
		t.Errorf("the example details of GET /v1/namespaces/{ns}/users shows\n%s\nthe server answers\n%s", w, g)
	}
}

// recordItems records the items i:0 to i:n-1 for the user.
func (e *env) recordItems(ns, user string, n int) {
	e.t.Helper()
	items := make([]string, n)
	for i := range items {
		items[i] = "i:" + strconv.Itoa(i)
	}
	body, _ := json.Marshal(map[string]any{"items": items})
	if status, _, b := e.raw(http.MethodPost, userPath(ns, user, "/seen"), "application/json", body,
		"Authorization", "Bearer "+writeKey); status != http.StatusOK {
		e.t.Fatalf("recording: %d %s", status, b)
	}
}

// TestDocumentedLimitsAreTheDefaults holds the limits openapi.yaml states
// (the schemas' maxItems, the users page's bounds, the examples of
// GET /v1/auth) to the server's defaults, which `seenapi --help` and README
// give: a default changed in the code alone would leave a generated
// client's validation, and a reader, with the old one.
func TestDocumentedLimitsAreTheDefaults(t *testing.T) {
	doc := loadSpec(t)
	schemas := doc.Components.Schemas
	maxItems := func(schema, member string) int {
		t.Helper()
		s := schemas[schema]
		if s == nil || s.Value.Properties[member] == nil || s.Value.Properties[member].Value.MaxItems == nil {
			t.Fatalf("openapi.yaml: %s.%s has no maxItems", schema, member)
		}
		return int(*s.Value.Properties[member].Value.MaxItems)
	}
	for _, c := range []struct {
		schema, member string
		want           int
	}{
		{"FilterRequest", "candidates", api.DefaultMaxCandidates},
		{"ItemsRequest", "items", api.DefaultMaxCandidates},
		{"BatchFilterEntry", "candidates", api.DefaultMaxCandidates},
		{"BatchFilterRequest", "requests", api.DefaultMaxBatchUsers},
	} {
		if got := maxItems(c.schema, c.member); got != c.want {
			t.Errorf("openapi.yaml: %s.%s takes at most %d, the server %d by default", c.schema, c.member, got, c.want)
		}
	}
	var limit *openapi3.Schema
	for _, p := range doc.Paths.Value("/v1/namespaces/{ns}/users").Get.Parameters {
		if p.Value.Name == "limit" {
			limit = p.Value.Schema.Value
		}
	}
	if limit == nil || limit.Max == nil || limit.Min == nil {
		t.Fatal("openapi.yaml: the users page's limit has no bounds")
	}
	if *limit.Min != 1 || int(*limit.Max) != api.MaxUsersPage || limit.Default != float64(api.DefaultUsersPage) {
		t.Errorf("openapi.yaml: the users page's limit is %v to %v, %v by default; the server takes 1 to %d, %d by default",
			*limit.Min, *limit.Max, limit.Default, api.MaxUsersPage, api.DefaultUsersPage)
	}
	want := map[string]float64{
		"max_candidates":  api.DefaultMaxCandidates,
		"max_body_bytes":  api.DefaultMaxBodyBytes,
		"max_item_bytes":  api.DefaultMaxItemBytes,
		"max_user_bytes":  api.DefaultMaxUserBytes,
		"max_batch_users": api.DefaultMaxBatchUsers,
	}
	examples := doc.Paths.Value("/v1/auth").Get.Responses.Status(200).Value.Content.Get("application/json").Examples
	if len(examples) == 0 {
		t.Fatal("openapi.yaml: GET /v1/auth shows no example")
	}
	for name, ex := range examples {
		v, _ := ex.Value.Value.(map[string]any)
		for member, w := range want {
			if v[member] != w {
				t.Errorf("openapi.yaml: the example %q of GET /v1/auth gives %s %v, the server %v by default", name, member, v[member], w)
			}
		}
	}
}
