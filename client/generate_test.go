package client

import (
	"bytes"
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
