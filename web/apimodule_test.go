package web_test

import (
	"bytes"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/seenapi/seenapi/web"
	"github.com/seenapi/seenapi/web/internal/jsclient"
)

func TestCommittedAPIModuleIsCurrent(t *testing.T) {
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := jsclient.Generate(spec)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("static/api.js")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, committed) {
		t.Fatalf("static/api.js is stale (%d bytes committed, %d generated from openapi.yaml): run `go generate ./web` and commit it",
			len(committed), len(fresh))
	}
}

func TestDashboardCallsOnlyOperationsOfTheContract(t *testing.T) {
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsclient.Load(spec)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := jsclient.Operations(doc)
	if err != nil {
		t.Fatal(err)
	}
	app, err := fs.ReadFile(web.FS(), "app.js")
	if err != nil {
		t.Fatal(err)
	}
	calls := regexp.MustCompile(`\bcall\('(\w+)'`).FindAllSubmatch(app, -1)
	if len(calls) < 6 {
		t.Fatalf("found %d API calls in app.js; the pattern no longer matches how the page calls the API", len(calls))
	}
	for _, c := range calls {
		id := string(c[1])
		if !slices.ContainsFunc(ops, func(o jsclient.Operation) bool { return o.ID == id }) {
			t.Errorf("app.js calls %s, which openapi.yaml does not define", id)
		}
	}
}

func TestOperationRolesComeFromTheContract(t *testing.T) {
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsclient.Load(spec)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := jsclient.Operations(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"getStats": "read", "checkSeen": "read", "recordSeen": "write", "forgetUser": "admin", "getHealth": "none"}
	for _, o := range ops {
		if r, ok := want[o.ID]; ok && o.Role != r {
			t.Errorf("%s needs role %q, want %q", o.ID, o.Role, r)
		}
		delete(want, o.ID)
	}
	for id := range want {
		t.Errorf("openapi.yaml has no operation %s", id)
	}
}

func TestEveryEmbeddedAssetIsLocal(t *testing.T) {
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import\s+url\(\s*["']?(https?:)?//|\bfrom\s+["'](https?:)?//|fetch\(\s*["'](https?:)?//`)
	err := fs.WalkDir(web.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(web.FS(), path)
		if err != nil {
			return err
		}
		if m := external.Find(b); m != nil {
			t.Errorf("%s loads %q from another origin; every asset must be embedded", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"index.html", "boot.js", "app.js", "api.js", "style.css"} {
		if _, err := fs.Stat(web.FS(), f); err != nil {
			t.Errorf("%s is not embedded: %v", f, err)
		}
	}
}
