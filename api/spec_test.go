package api

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
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
