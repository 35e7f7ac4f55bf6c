package client

import (
	"bytes"
	"encoding/json"
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

// parseFunctions starts the part of client-with-responses.tmpl that this
// package's copy changes (answer.go).
const parseFunctions = "{{/* Generate parse functions for responses*/}}"

// TestTemplateIsTheGeneratorsButForItsParseFunctions holds the copy of
// client-with-responses.tmpl to the pinned oapi-codegen's own, but for its
// parse functions: a new version of the generator must have its template
// copied again.
func TestTemplateIsTheGeneratorsButForItsParseFunctions(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads the code generator")
	}
	gen := generator(t)
	cmdPath, version, _ := strings.Cut(gen, "@")
	module, _, ok := strings.Cut(cmdPath, "/cmd/")
	if !ok {
		t.Fatalf("the generator %s is not a command of a module", gen)
	}
	ours, err := os.ReadFile("client-with-responses.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	header, body, ok := bytes.Cut(ours, []byte("*/ -}}\n"))
	if !ok || !bytes.Contains(header, []byte("oapi-codegen "+version+"'s client-with-responses.tmpl")) {
		t.Fatalf("client-with-responses.tmpl does not open with a comment naming oapi-codegen %s's template as its source", version)
	}
	out, err := exec.Command("go", "mod", "download", "-json", module+"@"+version).Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v", module, version, err)
	}
	var dl struct{ Dir string }
	if err := json.Unmarshal(out, &dl); err != nil || dl.Dir == "" {
		t.Fatalf("go mod download gave no directory: %v\n%s", err, out)
	}
	theirs, err := os.ReadFile(filepath.Join(dl.Dir, "pkg", "codegen", "templates", "client-with-responses.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(body, []byte(parseFunctions)), bytes.Index(theirs, []byte(parseFunctions))
	if i < 0 || j < 0 {
		t.Fatalf("%q is missing from one of the templates (ours at %d, theirs at %d)", parseFunctions, i, j)
	}
	if !bytes.Equal(body[:i], theirs[:j]) {
		t.Errorf("client-with-responses.tmpl differs from oapi-codegen %s's before its parse functions: copy the new one and keep our parse functions", version)
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
