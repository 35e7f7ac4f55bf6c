package bench

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var seenapiBuild SharedBuild

func TestMain(m *testing.M) {
	code := m.Run()
	seenapiBuild.Remove()
	os.Exit(code)
}

// seenapiBin builds the module's server once for the package's tests.
func seenapiBin(t *testing.T) string {
	t.Helper()
	bin, err := seenapiBuild.Bin("..")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// seenapi-https starts the real server with a certificate of the
// harness's own and makes the one call, the stats and the metrics reads
// over TLS; the certificate it serves is that one.
func TestSeenapiHTTPSServesOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := seenapiBin(t)
	logDir := t.TempDir()
	s := NewSeenapiHTTP(HTTPOptions{Bin: bin, DataParent: t.TempDir(), TLS: true, Conns: 4, LogDir: logDir})
	if s.Name() != "seenapi-https" {
		t.Fatalf("name %q", s.Name())
	}
	if err := s.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.client.base, "https://") {
		t.Fatalf("the client calls %s", s.client.base)
	}
	cands := []string{"a", "b", "c"}
	got, err := s.Call(ctx, "u1", cands, 2)
	if err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("first call: %v %v", got, err)
	}
	if got, err = s.Call(ctx, "u1", cands, 0); err != nil || !slices.Equal(got, []string{"c"}) {
		t.Fatalf("second call: %v %v", got, err)
	}
	if gc, err := s.ServerGC(ctx); err != nil || gc.Allocated == 0 {
		t.Fatalf("stats over TLS: %+v %v", gc, err)
	}
	if h, err := s.CallDurations(ctx); err != nil || h.Latency().Count == 0 {
		t.Fatalf("metrics over TLS: %+v %v", h, err)
	}
	conn, err := tls.Dial("tcp", s.addr, s.tls)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; got != "seenapi self-signed" {
		t.Fatalf("served certificate %q", got)
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err = s.Call(ctx, "u1", cands, 0); err != nil || len(got) != 0 {
		t.Fatalf("after a restart: %v %v", got, err)
	}
	// The server's whole log reaches its file, its stops included, after
	// the harness read where it serves from it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join(logDir, "seenapi-https.log"))
	if n := strings.Count(string(log), "seenapi: stopped; every change is written back"); err != nil || n != 2 {
		t.Fatalf("the log holds %d lines of a stop, want 2 (a restart, then the close), %v:\n%s", n, err, log)
	}
}
