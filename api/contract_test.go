package api_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/seenapi/seenapi/api"
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
