package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gofiber/fiber/v2"
	"go.yaml.in/yaml/v3"

	"github.com/seenapi/seenapi/eviction"
)

func TestEmbeddedSpecIsTheContract(t *testing.T) {
	want, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(openAPISpec, want) {
		t.Fatal("api/openapi.yaml differs from openapi.yaml: run `go generate ./api`")
	}
}

func TestEveryProblemTypeIsDocumented(t *testing.T) {
	spec := string(openAPISpec)
	known := map[string]bool{}
	for _, k := range problemKinds {
		known[k.slug] = true
		if !regexp.MustCompile("`" + k.slug + "`").MatchString(spec) {
			t.Errorf("problem type %s is not listed in openapi.yaml", k.slug)
		}
	}
	for _, m := range regexp.MustCompile(`https://seenapi\.dev/problems/([a-z-]+)`).FindAllStringSubmatch(spec, -1) {
		if !known[m[1]] {
			t.Errorf("openapi.yaml shows problem type %s, which the server never answers", m[1])
		}
	}
	// The Problem schema's type lists them, so that a generated client
	// has them (the Go client as ProblemType constants).
	doc, err := openapi3.NewLoader().LoadFromData(openAPISpec)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, v := range doc.Components.Schemas["Problem"].Value.Properties["type"].Value.Enum {
		listed = append(listed, strings.TrimPrefix(v.(string), ProblemBase))
	}
	for _, k := range problemKinds {
		if !slices.Contains(listed, k.slug) {
			t.Errorf("problem type %s is not in the enum of Problem's type in openapi.yaml", k.slug)
		}
	}
}

// Each problem type is named by a response of the status the server
// answers it with (or by a default response, the refusals any route may
// answer), and a response of a status names no type answered with
// another: a client reads a type's status from the response that names it.
func TestEveryProblemTypeIsDocumentedWithItsStatus(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openAPISpec)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]problemKind{}
	for _, k := range problemKinds {
		kinds[k.slug] = k
	}
	named := map[string]bool{}
	slug := regexp.MustCompile("`([a-z-]+)`")
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, r := range op.Responses.Map() {
				for _, m := range slug.FindAllStringSubmatch(*r.Value.Description, -1) {
					k, ok := kinds[m[1]]
					if !ok {
						continue
					}
					if status != "default" && status != strconv.Itoa(k.status) {
						t.Errorf("%s %s: its %s response names %s, which the server answers with %d", method, path, status, k.slug, k.status)
						continue
					}
					named[k.slug] = true
				}
			}
		}
	}
	for _, k := range problemKinds {
		if !named[k.slug] {
			t.Errorf("no response of status %d (nor a default one) in openapi.yaml names %s", k.status, k.slug)
		}
	}
}

// Health's status lists the words the probes answer, and only those: a
// generated client has them as constants (the Go client's HealthStatus).
func TestHealthStatusesAreDocumented(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openAPISpec)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, v := range doc.Components.Schemas["Health"].Value.Properties["status"].Value.Enum {
		listed = append(listed, v.(string))
	}
	if want := []string{healthOK, healthReady}; !slices.Equal(listed, want) {
		t.Errorf("Health's status in openapi.yaml lists %q; the probes answer %q", listed, want)
	}
}

// Every error of fiber's, whatever its status, is answered as a documented
// problem type with that type's status (and title): openapi.yaml documents
// each type with one status, and a client reads one from the other. Those
// fiber raises today are 404, 405, 408, 413 and 431; any other would
// have been answered bad-request with its own status (a 416 or 417).
func TestEveryFiberErrorIsADocumentedProblem(t *testing.T) {
	kinds := map[string]problemKind{}
	for _, k := range problemKinds {
		kinds[ProblemBase+k.slug] = k
	}
	for code := 100; code < 600; code++ {
		p := problemFor(fiber.NewError(code, "fiber's words"))
		k, ok := kinds[p.Type]
		switch {
		case !ok:
			t.Errorf("fiber's %d is answered as %s, no documented problem type", code, p.Type)
		case p.Status != k.status || p.Title != k.title:
			t.Errorf("fiber's %d is answered %d %q %s; the type is documented as %d %q", code, p.Status, p.Title, p.Type, k.status, k.title)
		}
	}
}

// Every number is a double: a generator reads a bare number as a 32-bit
// float (oapi-codegen does), and a client would get 0.0099999998 for the
// service's 0.01.
func TestEveryNumberIsADouble(t *testing.T) {
	lines := strings.Split(string(openAPISpec), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == "type: number" && (i+1 == len(lines) || strings.TrimSpace(lines[i+1]) != "format: double") {
			t.Errorf("openapi.yaml:%d: a number without format: double", i+1)
		}
	}
}

// The server takes exactly the query parameters openapi.yaml documents,
// route by route: queryParams, which it refuses the others by, is the
// document's list (a parameter documented but not listed would be refused,
// one listed but not documented taken unseen by clients).
func TestQueryParamsAreTheDocumentedOnes(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openAPISpec)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			route := method + " " + path
			documented[route] = true
			var want []string
			for _, p := range slices.Concat(item.Parameters, op.Parameters) {
				if p.Value.In == openapi3.ParameterInQuery {
					want = append(want, p.Value.Name)
				}
			}
			if got := queryParams[route]; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
				t.Errorf("%s: the server takes the query parameters %q, openapi.yaml documents %q", route, got, want)
			}
		}
	}
	for route := range queryParams {
		if !documented[route] {
			t.Errorf("queryParams lists %s, which openapi.yaml does not document", route)
		}
	}
}

// The problems openapi.yaml shows as examples are the server's: their
// type's title and status, and the detail where the server's is always the
// same (an example once said "eviction: storage failure", the hot set's own
// words, which the server keeps to its log). The examples of a refused one
// call (too many candidates, a bad limit) are what the server answers the
// request they describe.
func TestProblemExamplesAreWhatTheServerAnswers(t *testing.T) {
	var doc any
	if err := yaml.Unmarshal(openAPISpec, &doc); err != nil {
		t.Fatal(err)
	}
	var examples []map[string]any
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if typ, ok := v["type"].(string); ok && strings.HasPrefix(typ, ProblemBase) {
				examples = append(examples, v)
				return
			}
			for _, w := range v {
				walk(w)
			}
		case []any:
			for _, w := range v {
				walk(w)
			}
		}
	}
	walk(doc)
	if len(examples) < 15 {
		t.Fatalf("only %d problem examples found in openapi.yaml", len(examples))
	}

	kinds := map[string]problemKind{}
	for _, k := range problemKinds {
		kinds[k.slug] = k
	}
	fixed := map[string]string{}
	for _, err := range []error{eviction.ErrUserNotFound, eviction.ErrCorrupt, eviction.ErrStorageFull, eviction.ErrStorage,
		fiber.ErrNotFound, fiber.ErrMethodNotAllowed, errors.New("a bug")} {
		p := problemFor(err)
		fixed[strings.TrimPrefix(p.Type, ProblemBase)] = p.Detail
	}
	for _, ex := range examples {
		slug := strings.TrimPrefix(ex["type"].(string), ProblemBase)
		k, ok := kinds[slug]
		if !ok {
			t.Errorf("an example of the problem type %s, which the server never answers", slug)
			continue
		}
		if ex["title"] != k.title || ex["status"] != k.status {
			t.Errorf("the example of %s has the title %q and status %v; the server answers %q and %d", slug, ex["title"], ex["status"], k.title, k.status)
		}
		if want, ok := fixed[slug]; ok && ex["detail"] != want {
			t.Errorf("the example of %s says %q; the server says %q", slug, ex["detail"], want)
		}
	}

	s, err := New(nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	responses := doc.(map[string]any)["components"].(map[string]any)["responses"].(map[string]any)
	for name, candidates := range map[string][]string{"TooLarge": make([]string, 12000), "BadRequest": {"i:1"}} {
		ex := responses[name].(map[string]any)["content"].(map[string]any)["application/problem+json"].(map[string]any)["example"].(map[string]any)
		_, err := s.filterCall(candidates, "", -1, "", "", nil)
		p := problemFor(err)
		got, _ := json.Marshal(map[string]any{"type": p.Type, "title": p.Title, "status": p.Status, "detail": p.Detail, "errors": p.Errors})
		delete(ex, "instance")
		want, _ := json.Marshal(ex)
		if !bytes.Equal(normalize(t, got), normalize(t, want)) {
			t.Errorf("the example of %s is\n%s\nthe server answers\n%s", name, want, got)
		}
	}
}

// normalize returns JSON b decoded and encoded again, its members sorted.
func normalize(t *testing.T, b []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
