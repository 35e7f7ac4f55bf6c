package client

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// generator returns the `go run module@version` argument of the
// //go:generate line in doc.go, so the test runs exactly what go generate runs.
func generator(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^//go:generate go run (\S+@v\S+) -config oapi-codegen.yaml ../openapi.yaml$`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("doc.go has no //go:generate line running a pinned oapi-codegen on ../openapi.yaml")
	}
	return string(m[1])
}

func TestCommittedClientIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the code generator")
	}
	cfg, err := os.ReadFile("oapi-codegen.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "client.gen.go")
	tmpCfg := regexp.MustCompile(`(?m)^output: .*$`).ReplaceAll(cfg, []byte("output: "+out))
	if bytes.Equal(tmpCfg, cfg) {
		t.Fatal("oapi-codegen.yaml has no output line")
	}
	cfgPath := filepath.Join(dir, "oapi-codegen.yaml")
	if err := os.WriteFile(cfgPath, tmpCfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", generator(t), "-config", cfgPath, "../openapi.yaml")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator failed: %v\n%s", err, msg)
	}
	fresh, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, committed) {
		t.Fatalf("client.gen.go is stale (%d bytes committed, %d generated): run `go generate ./client` and commit it",
			len(committed), len(fresh))
	}
}

// TestTemplatesAreTheGeneratorsButForTheirChanges holds the templates of
// this package that oapi-codegen.yaml puts in place of oapi-codegen's own
// to the pinned oapi-codegen's text, but for the part each changes: a new
// version of the generator must have them copied again.
func TestTemplatesAreTheGeneratorsButForTheirChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads the code generator")
	}
	gen := generator(t)
	cmdPath, version, _ := strings.Cut(gen, "@")
	module, _, ok := strings.Cut(cmdPath, "/cmd/")
	if !ok {
		t.Fatalf("the generator %s is not a command of a module", gen)
	}
	out, err := exec.Command("go", "mod", "download", "-json", module+"@"+version).Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v", module, version, err)
	}
	var dl struct{ Dir string }
	if err := json.Unmarshal(out, &dl); err != nil || dl.Dir == "" {
		t.Fatalf("go mod download gave no directory: %v\n%s", err, out)
	}
	cfg, err := os.ReadFile("oapi-codegen.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// same gives the part of a template that must be the generator's.
		same func(tmpl []byte) []byte
	}{
		// The parse functions give the answer whatever its body (answer.go).
		{"client-with-responses.tmpl", func(tmpl []byte) []byte {
			before, _, ok := bytes.Cut(tmpl, []byte("{{/* Generate parse functions for responses*/}}"))
			if !ok {
				return nil
			}
			return before
		}},
		// The comment above the package clause is no package doc comment.
		{"imports.tmpl", func(tmpl []byte) []byte {
			i := bytes.Index(tmpl, []byte("\npackage {{.PackageName}}\n"))
			if i < 0 {
				return nil
			}
			return tmpl[i:]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(cfg, []byte("    "+tc.name+": "+tc.name+"\n")) {
				t.Errorf("oapi-codegen.yaml does not put %s in place of the generator's", tc.name)
			}
			ours, err := os.ReadFile(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			header, body, ok := bytes.Cut(ours, []byte("*/ -}}\n"))
			if !ok || !bytes.Contains(header, []byte("oapi-codegen "+version+"'s "+tc.name)) {
				t.Fatalf("%s does not open with a comment naming oapi-codegen %s's as its source", tc.name, version)
			}
			theirs, err := os.ReadFile(filepath.Join(dl.Dir, "pkg", "codegen", "templates", tc.name))
			if err != nil {
				t.Fatal(err)
			}
			o, g := tc.same(body), tc.same(theirs)
			if o == nil || g == nil || !bytes.Equal(o, g) {
				t.Errorf("%s differs from oapi-codegen %s's beyond its change: copy the new one and make the change again", tc.name, version)
			}
		})
	}
}

// The package's doc is doc.go's, what `go doc` and pkg.go.dev show first,
// not a generator's line above the generated file's package clause; that
// file still says it is generated, for the tools that leave such files be.
func TestThePackageDocIsDocGosAlone(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		if (f.Doc != nil) != (name == "doc.go") {
			t.Errorf("%s has a package doc comment: %v; want doc.go alone to have one", name, f.Doc != nil)
		}
		if name == "doc.go" && !strings.HasPrefix(f.Doc.Text(), "Package client is the Go client of the seenapi REST API") {
			t.Errorf("doc.go's package doc reads %q", f.Doc.Text())
		}
		if name == "client.gen.go" && !ast.IsGenerated(f) {
			t.Errorf("client.gen.go does not say it is generated")
		}
	}
}

func TestGeneratedClientCoversEveryOperation(t *testing.T) {
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gen, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	ops := regexp.MustCompile(`(?m)^\s+operationId: (\w+)$`).FindAllSubmatch(spec, -1)
	if len(ops) < 15 {
		t.Fatalf("found %d operationIds in openapi.yaml, want at least 15", len(ops))
	}
	for _, op := range ops {
		name := strings.ToUpper(string(op[1][:1])) + string(op[1][1:])
		if !bytes.Contains(gen, []byte("func (c *ClientWithResponses) "+name+"WithResponse(")) &&
			!bytes.Contains(gen, []byte("func (c *ClientWithResponses) "+name+"WithBodyWithResponse(")) {
			t.Errorf("client has no method for operation %s", op[1])
		}
	}
}
