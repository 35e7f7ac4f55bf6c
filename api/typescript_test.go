package api_test

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A client generated from openapi.yaml in another language works: the
// TypeScript types of openapi-typescript and the calls of openapi-fetch
// (testdata/typescript, versions pinned by its package-lock.json), checked
// by tsc against the document as it is now, drive every kind of call
// against a real server, keys and refusals included. Without node and npm
// the test skips, unless CI=true (apt-get install nodejs npm).
func TestTypeScriptClientGeneratedFromTheDocument(t *testing.T) {
	node, npm := nodeTool(t, "node"), nodeTool(t, "npm")
	if testing.Short() {
		t.Skip("installs npm packages and compiles TypeScript")
	}
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "tsconfig.json", "main.ts"} {
		copyFile(t, filepath.Join("testdata", "typescript", f), filepath.Join(dir, f))
	}
	copyFile(t, filepath.Join("..", "openapi.yaml"), filepath.Join(dir, "openapi.yaml"))
	inDir(t, dir, npm, "ci", "--no-audit", "--no-fund", "--loglevel", "error")
	inDir(t, dir, npm, "run", "--silent", "generate")
	// A document that makes types the program's calls do not fit (a field
	// made required, a route renamed, a schema changed) fails here.
	inDir(t, dir, npm, "run", "--silent", "build")

	e := newEnv(t, withKeys)
	// A proxy's page in place of the service's answers, as the README says
	// such a client meets it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	page := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte("<html>bad gateway</html>"))
			return
		}
		w.Write([]byte("<html>sign in to the network</html>"))
	})}
	go page.Serve(ln)
	t.Cleanup(func() { page.Close() })
	out := inDir(t, dir, node, filepath.Join("dist", "main.js"), e.base, adminKey, readKey, "http://"+ln.Addr().String())
	var report struct {
		Checks   int      `json:"checks"`
		Failures []string `json:"failures"`
	}
	if err := json.Unmarshal([]byte(lastLine(out)), &report); err != nil {
		t.Fatalf("the program's report: %v\n%s", err, out)
	}
	if report.Checks != 25 || len(report.Failures) > 0 {
		t.Fatalf("the TypeScript client made %d checks (want 25), failed %q", report.Checks, report.Failures)
	}
	// What it did is what the server holds.
	if st := e.stateOf("default", "ts:1"); st == nil || st["items"] != float64(5) {
		t.Errorf("the TypeScript client's user: %v, want 5 items", st)
	}
	if st := e.stateOf("default", "ts:copy"); st != nil {
		t.Errorf("the user the TypeScript client forgot: %v, want none", st)
	}
}

// nodeTool returns the path of a Node.js command, or skips the test (fails
// it when CI=true) if it is missing.
func nodeTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s is missing (apt-get install nodejs npm): %v", name, err)
		}
		t.Skipf("%s is missing (apt-get install nodejs npm; CI=true makes this a failure)", name)
	}
	return p
}

// inDir runs a command in dir and returns its output, failing the test
// with that output if it fails.
func inDir(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}
