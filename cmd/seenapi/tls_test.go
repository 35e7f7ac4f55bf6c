package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/bench"
	"github.com/seenapi/seenapi/client"
)

// writeCert writes a self-signed certificate for 127.0.0.1 with the given
// serial number, and its key, as PEM files at certPath and keyPath, and
// returns a pool that trusts it.
func writeCert(t *testing.T, certPath, keyPath string, serial int64) *x509.CertPool {
	t.Helper()
	cert, err := bench.WriteSelfSignedCert(certPath, keyPath, serial)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// httpsOf is the https:// URL of a service s started with TLS.
func httpsOf(s *service) string { return "https://" + strings.TrimPrefix(s.url, "http://") }

// certFiles are a certificate's and its key's paths in a new directory.
func certFiles(t *testing.T) (certPath, keyPath string) {
	dir := t.TempDir()
	return filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
}

// With --tls-cert and --tls-key the service answers HTTPS only: the
// generated client makes the one call through it, a plain HTTP request to
// the port gets a 400 problem that says to use https, and a client that offers nothing newer than TLS
// 1.1 is refused.
func TestTLSServesTheAPI(t *testing.T) {
	certPath, keyPath := certFiles(t)
	pool := writeCert(t, certPath, keyPath, 1)
	s := startService(t, nil, "--data-dir", t.TempDir(), "--tls-cert", certPath, "--tls-key", keyPath)
	if !strings.Contains(s.out.String(), "url="+httpsOf(s)) {
		t.Errorf("the log does not give the https URL %s:\n%s", httpsOf(s), s.out.String())
	}
	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	c, err := client.NewClientWithResponses(httpsOf(s), client.WithHTTPClient(httpc))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.FilterUserWithResponse(context.Background(), "default", "u1", nil,
		client.FilterRequest{Candidates: []string{"a", "b", "c"}, Limit: ptr(2)})
	if err != nil {
		t.Fatal(err)
	}
	if r.JSON200 == nil || strings.Join(r.JSON200.Unseen, ",") != "a,b" {
		t.Fatalf("the one call over HTTPS: %d %s", r.StatusCode(), r.Body)
	}
	if r.HTTPResponse.TLS == nil || r.HTTPResponse.TLS.Version < tls.VersionTLS12 {
		t.Fatalf("the answer came over %+v, want TLS 1.2 or later", r.HTTPResponse.TLS)
	}

	plain := &http.Client{Timeout: 5 * time.Second}
	for _, method := range []string{"GET", "POST"} {
		req, _ := http.NewRequest(method, s.url+"/v1/namespaces/default/users/u1/filter", strings.NewReader(`{"candidates":["d"]}`))
		resp, err := plain.Do(req)
		if err != nil {
			t.Fatalf("plain HTTP %s to the HTTPS port: %v", method, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p api.Problem
		if err := json.Unmarshal(b, &p); err != nil || resp.StatusCode != 400 ||
			resp.Header.Get("Content-Type") != "application/problem+json" ||
			p.Type != api.ProblemBase+"bad-request" || !strings.Contains(p.Detail, httpsOf(s)) {
			t.Fatalf("plain HTTP %s to the HTTPS port answered %d %s %q, want a 400 problem naming %s",
				method, resp.StatusCode, resp.Header.Get("Content-Type"), b, httpsOf(s))
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Date") == "" ||
			resp.Header.Get("Content-Security-Policy") != "default-src 'none'; frame-ancestors 'none'" ||
			resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("plain HTTP %s to the HTTPS port: X-Content-Type-Options %q, Date %q, Content-Security-Policy %q, "+
				"X-Frame-Options %q, Referrer-Policy %q, want nosniff, a date, default-src 'none'; frame-ancestors 'none', "+
				"DENY and no-referrer, as every answer",
				method, resp.Header.Get("X-Content-Type-Options"), resp.Header.Get("Date"), resp.Header.Get("Content-Security-Policy"),
				resp.Header.Get("X-Frame-Options"), resp.Header.Get("Referrer-Policy"))
		}
	}
	if r, err := c.CheckSeenWithResponse(context.Background(), "default", "u1", client.ItemsRequest{Items: []string{"d"}}); err != nil ||
		r.JSON200 == nil || r.JSON200.SeenCount != 0 {
		t.Fatalf("the plain HTTP call recorded its item: %v %v", r, err)
	}

	old := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Get(httpsOf(s) + "/readyz"); err == nil {
		resp.Body.Close()
		t.Fatalf("a TLS 1.1 client was answered %d", resp.StatusCode)
	}
	if resp, err := httpc.Get(httpsOf(s) + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz over HTTPS after the refused clients: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

func ptr[T any](v T) *T { return &v }

// With --hsts-max-age an HTTPS service sends Strict-Transport-Security on
// every answer (the dashboard's, a probe's, a problem's, fasthttp's own
// 408, 431 and 400s, and those of a connection past --max-connections), and none
// on the plain HTTP refusal, which a browser would ignore; without the
// flag it sends none (a browser would apply it to the host name on every
// port). The flag is refused without TLS.
func TestHSTSIsSentOverHTTPSWhenAsked(t *testing.T) {
	certPath, keyPath := certFiles(t)
	pool := writeCert(t, certPath, keyPath, 1)
	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	hstsOf := func(url string) string {
		t.Helper()
		resp, err := httpc.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("Strict-Transport-Security")
	}
	s := startService(t, nil, "--data-dir", t.TempDir(), "--tls-cert", certPath, "--tls-key", keyPath, "--hsts-max-age", "8760h",
		"--read-timeout", "1s")
	for _, path := range []string{"/", "/readyz", "/v1/stats", "/no-such-route"} {
		if got := hstsOf(httpsOf(s) + path); got != "max-age=31536000" {
			t.Errorf("GET %s over HTTPS: Strict-Transport-Security %q, want max-age=31536000", path, got)
		}
	}
	// fasthttp's own refusals, before any route.
	for _, tc := range []struct {
		name, request string
		status        int
	}{
		{"headers that never end", "GET /healthz HTTP/1.1\r\nHost: x\r\n", 408},
		{"headers past the buffer", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("p", 8<<10) + "\r\n\r\n", 431},
		// Hosts fasthttp refuses, answered in the service's words.
		{"two Hosts", "GET /healthz HTTP/1.1\r\nHost: x\r\nHost: x\r\n\r\n", 400},
		{"an empty Host", "GET /healthz HTTP/1.1\r\nHost:\r\n\r\n", 400},
		{"a Host that is no host", "GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
	} {
		resp := tlsAnswer(t, s, pool, tc.request)
		if resp.StatusCode != tc.status || resp.Header.Get("Strict-Transport-Security") != "max-age=31536000" ||
			resp.Header.Get("Content-Type") != "application/problem+json" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s over HTTPS: %d %v, want %d with Strict-Transport-Security max-age=31536000 as every answer",
				tc.name, resp.StatusCode, resp.Header, tc.status)
		}
	}
	// Past --max-connections: the refusal and a probe's answer.
	full := startService(t, nil, "--data-dir", t.TempDir(), "--tls-cert", certPath, "--tls-key", keyPath, "--hsts-max-age", "8760h",
		"--max-connections", "1")
	held := tlsConn(t, full, pool)
	io.WriteString(held, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(held), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the connection under the cap: %v %v", resp, err)
	}
	for request, status := range map[string]int{"GET /v1/stats HTTP/1.1\r\nHost: x\r\n\r\n": 503, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n": 200} {
		resp := tlsAnswer(t, full, pool, request)
		if resp.StatusCode != status || resp.Header.Get("Strict-Transport-Security") != "max-age=31536000" {
			t.Errorf("%q past --max-connections over HTTPS: %d %v, want %d with Strict-Transport-Security max-age=31536000",
				request, resp.StatusCode, resp.Header, status)
		}
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(s.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("Strict-Transport-Security") != "" {
		t.Errorf("plain HTTP to the HTTPS port: %d with Strict-Transport-Security %q, want 400 and none",
			resp.StatusCode, resp.Header.Get("Strict-Transport-Security"))
	}

	s = startService(t, nil, "--data-dir", t.TempDir(), "--tls-cert", certPath, "--tls-key", keyPath)
	if got := hstsOf(httpsOf(s) + "/"); got != "" {
		t.Errorf("without --hsts-max-age: Strict-Transport-Security %q, want none", got)
	}
	if out := failedStart(t, "--hsts-max-age", "8760h"); !strings.Contains(out, "--hsts-max-age needs --tls-cert") {
		t.Errorf("--hsts-max-age without TLS:\n%s", out)
	}
}

// tlsConn is a new TLS connection to s, a service started with TLS whose
// certificate pool trusts, closed at the test's end.
func tlsConn(t *testing.T, s *service, pool *x509.CertPool) *tls.Conn {
	t.Helper()
	conn, err := tls.Dial("tcp", strings.TrimPrefix(s.url, "http://"), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn
}

// tlsAnswer sends request, hand-made, on a new TLS connection to s and
// returns its answer, the body read.
func tlsAnswer(t *testing.T, s *service, pool *x509.CertPool, request string) *http.Response {
	t.Helper()
	conn := tlsConn(t, s, pool)
	io.WriteString(conn, request)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%q: %v", request, err)
	}
	io.Copy(io.Discard, resp.Body)
	return resp
}

// servedSerial connects to addr and returns the serial number of the
// certificate the service presents, trusting any (the test checks which).
func servedSerial(t *testing.T, addr string) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// SIGHUP reads the certificate and key again, so a renewed certificate is
// served without a restart; a pair that does not load is reported and the
// one served stays.
func TestSIGHUPReloadsTheTLSCertificate(t *testing.T) {
	const key = "w-0123456789abcdef"
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("write:"+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := certFiles(t)
	writeCert(t, certPath, keyPath, 1)
	s := startService(t, nil, "--data-dir", t.TempDir(), "--keys-file", keys, "--tls-cert", certPath, "--tls-key", keyPath)
	addr := strings.TrimPrefix(s.url, "http://")
	if got := servedSerial(t, addr); got != 1 {
		t.Fatalf("serial %d served, want 1", got)
	}
	hup := func(want string) { t.Helper(); hupUntilLogged(t, s, want) }

	pool := writeCert(t, certPath, keyPath, 2)
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	// The log gives the date of the certificate served, which tells a
	// renewed one, and says when a SIGHUP found the same one again.
	notAfter := " not_after=" + pair.Leaf.NotAfter.UTC().Format(time.RFC3339) + "\n"
	hup(`msg="seenapi: SIGHUP: TLS certificate reloaded" cert=` + certPath + notAfter)
	if got := servedSerial(t, addr); got != 2 {
		t.Fatalf("after the reload, serial %d served, want 2", got)
	}
	hup(`msg="seenapi: SIGHUP: TLS certificate reloaded: the same certificate as before (to renew it, replace the files of --tls-cert and --tls-key, then send SIGHUP)" cert=` + certPath + notAfter)
	if !strings.Contains(s.out.String(), "API keys reloaded") {
		t.Errorf("the SIGHUP that reloaded the certificate did not reload the keys:\n%s", s.out.String())
	}

	if err := os.WriteFile(certPath, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hup("the TLS certificate was not reloaded; the old one stays")
	if got := servedSerial(t, addr); got != 2 {
		t.Fatalf("after a reload that failed, serial %d served, want 2", got)
	}
	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	c, _ := client.NewClientWithResponses(httpsOf(s), client.WithHTTPClient(httpc),
		client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+key)
			return nil
		}))
	r, err := c.RecordSeenWithResponse(context.Background(), "default", "u1", nil, client.ItemsRequest{Items: []string{"a"}})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("a call after the failed reload: %v %v", r, err)
	}
}

// A certificate past its date loads, and every client refuses it: the
// service serves it, as it serves a renewed one after a SIGHUP, and says so
// in its log at the start and at a reload that brings one back.
func TestAnExpiredTLSCertificateIsWarnedOf(t *testing.T) {
	const warning = "the TLS certificate is past its date: clients will refuse it"
	certPath, keyPath := certFiles(t)
	writeExpiredCert(t, certPath, keyPath)
	s := startService(t, nil, "--data-dir", t.TempDir(), "--tls-cert", certPath, "--tls-key", keyPath)
	if !strings.Contains(s.out.String(), "seenapi: "+warning) {
		t.Fatalf("the start does not warn of the expired certificate:\n%s", s.out.String())
	}
	writeCert(t, certPath, keyPath, 2)
	hupUntilLogged(t, s, "TLS certificate reloaded")
	if n := strings.Count(s.out.String(), warning); n != 1 {
		t.Fatalf("%d warnings after a renewed certificate was reloaded, want the start's only:\n%s", n, s.out.String())
	}
	writeExpiredCert(t, certPath, keyPath)
	hupUntilLogged(t, s, "SIGHUP: "+warning)
}

// --tls-cert and --tls-key come together, and a pair that does not load
// stops the start with an error that names both flags and the files,
// before a data directory is made.
func TestTLSFlagsAreCheckedBeforeAnythingStarts(t *testing.T) {
	certPath, keyPath := certFiles(t)
	writeCert(t, certPath, keyPath, 1)
	if out := failedStart(t, "--tls-cert", certPath); !strings.Contains(out, "--tls-cert and --tls-key go together") {
		t.Errorf("--tls-cert alone:\n%s", out)
	}
	if out := failedStart(t, "--tls-key", keyPath); !strings.Contains(out, "--tls-cert and --tls-key go together") {
		t.Errorf("--tls-key alone:\n%s", out)
	}
	otherCert, otherKey := certFiles(t)
	writeCert(t, otherCert, otherKey, 2)
	data := filepath.Join(t.TempDir(), "data")
	for name, args := range map[string][]string{
		"missing":        {"--tls-cert", certPath + ".missing", "--tls-key", keyPath},
		"not a cert":     {"--tls-cert", keyPath, "--tls-key", keyPath},
		"key of another": {"--tls-cert", certPath, "--tls-key", otherKey},
	} {
		out := failedStart(t, append([]string{"--data-dir", data}, args...)...)
		if !strings.Contains(out, "--tls-cert "+args[1]+", --tls-key "+args[3]+":") {
			t.Errorf("%s: the error does not name the flags and files:\n%s", name, out)
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: data directory after a failed start: %v, want none", name, err)
		}
	}
}

// Off loopback, keys sent over plain HTTP cross the network readable: the
// service says so, and says nothing of it when it serves HTTPS.
func TestKeysInClearTextOffLoopbackAreWarnedOf(t *testing.T) {
	env := map[string]string{"SEENAPI_KEYS": "write:w-0123456789abcdef"}
	const warning = "API keys cross the network in clear text"
	plain := startService(t, env, "--addr", "0.0.0.0:0", "--data-dir", t.TempDir())
	if !strings.Contains(plain.out.String(), warning) {
		t.Errorf("no warning for keys over plain HTTP on 0.0.0.0:\n%s", plain.out.String())
	}
	certPath, keyPath := certFiles(t)
	writeCert(t, certPath, keyPath, 1)
	secure := startService(t, env, "--addr", "0.0.0.0:0", "--data-dir", t.TempDir(), "--tls-cert", certPath, "--tls-key", keyPath)
	if out := secure.out.String(); strings.Contains(out, warning) || !strings.Contains(out, "url=https://0.0.0.0:") {
		t.Errorf("over HTTPS: want no warning and an https URL:\n%s", out)
	}
	loop := startService(t, env, "--data-dir", t.TempDir())
	if strings.Contains(loop.out.String(), warning) {
		t.Errorf("a warning on loopback:\n%s", loop.out.String())
	}
}

// The client commands reach a service that serves HTTPS with a
// certificate of its own through SSL_CERT_FILE, as the README says: the
// built binary backs it up.
func TestBackupOverHTTPSTrustsSSLCertFile(t *testing.T) {
	bin := buildBinary(t)
	certPath, keyPath := certFiles(t)
	writeCert(t, certPath, keyPath, 1)
	s := startService(t, nil, "--data-dir", t.TempDir(), "--tls-cert", certPath, "--tls-key", keyPath)
	out := filepath.Join(t.TempDir(), "seenapi.backup")
	backup := func(env ...string) ([]byte, error) {
		cmd := exec.Command(bin, "backup", "--url", httpsOf(s), "--out", out)
		cmd.Env = append(os.Environ(), env...)
		return cmd.CombinedOutput()
	}
	if log, err := backup("SSL_CERT_FILE=" + filepath.Join(t.TempDir(), "none.pem")); err == nil {
		t.Fatalf("a backup that does not trust the certificate succeeded:\n%s", log)
	}
	if log, err := backup("SSL_CERT_FILE=" + certPath); err != nil {
		t.Fatalf("backup over HTTPS: %v\n%s", err, log)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() == 0 {
		t.Fatalf("backup file: %v %v", fi, err)
	}
}

// The client commands trust the authorities of --ca-cert besides the
// system's: backup --url and import-redis --url reach a service with a
// self-signed certificate through it, and fail without it, saying to give
// --ca-cert; a file that holds no certificate is refused by name.
func TestClientCommandsTrustCACert(t *testing.T) {
	certPath, keyPath := certFiles(t)
	pool := writeCert(t, certPath, keyPath, 1)
	s := startService(t, nil, "--data-dir", t.TempDir(), "--tls-cert", certPath, "--tls-key", keyPath)
	dir := t.TempDir()
	if code, log := backupCmd(nil, "--url", httpsOf(s), "--out", filepath.Join(dir, "untrusted")); code == 0 || !strings.Contains(log, "certificate") ||
		!strings.Contains(log, "with --ca-cert") || strings.Contains(log, "plain HTTP") {
		t.Fatalf("a backup without --ca-cert: exit %d\n%s", code, log)
	}
	out := filepath.Join(dir, "seenapi.backup")
	if code, log := backupCmd(nil, "--url", httpsOf(s), "--ca-cert", certPath, "--out", out); code != 0 {
		t.Fatalf("a backup with --ca-cert: exit %d\n%s", code, log)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() == 0 {
		t.Fatalf("backup file: %v %v", fi, err)
	}
	if code, log := backupCmd(nil, "--url", httpsOf(s), "--ca-cert", keyPath, "--out", filepath.Join(dir, "bad")); code == 0 ||
		!strings.Contains(log, "--ca-cert "+keyPath+": no PEM certificate in it") {
		t.Fatalf("--ca-cert of a key: exit %d\n%s", code, log)
	}

	rdb := startRedis(t)
	if err := rdb.SAdd(context.Background(), "seen:u7", "i1", "i2").Err(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	args := []string{"import-redis", "--redis", rdb.Options().Addr, "--url", httpsOf(s)}
	if code := run(context.Background(), args, noEnv, &log, &log, nil); code == 0 || !strings.Contains(log.String(), "with --ca-cert") {
		t.Fatalf("import-redis without --ca-cert: exit %d\n%s", code, log.String())
	}
	log.Reset()
	args = append(args, "--ca-cert", certPath)
	if code := run(context.Background(), args, noEnv, &log, &log, nil); code != 0 {
		t.Fatalf("import-redis over HTTPS: exit %d\n%s", code, log.String())
	}
	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	c, _ := client.NewClientWithResponses(httpsOf(s), client.WithHTTPClient(httpc))
	r, err := c.CheckSeenWithResponse(context.Background(), "default", "u7", client.ItemsRequest{Items: []string{"i1", "i2", "i3"}})
	if err != nil || r.JSON200 == nil || fmt.Sprint(r.JSON200.Seen) != "[true true false]" {
		t.Fatalf("after the import over HTTPS: %v %v", r, err)
	}
}

// The client commands given https:// for a service serving plain HTTP
// fail at once, saying it answered plain HTTP and which --url to give,
// rather than waiting for the service to give up on the handshake and
// saying only "EOF"; the service answers the handshake so at once.
func TestClientCommandsSayToUseHTTPForAPlainService(t *testing.T) {
	s := startService(t, nil, "--data-dir", t.TempDir())
	plain := s.url
	tlsURL := "https://" + strings.TrimPrefix(plain, "http://")
	want := "the service answered plain HTTP, not HTTPS: give --url " + plain
	start := time.Now()
	code, log := backupCmd(nil, "--url", tlsURL, "--out", filepath.Join(t.TempDir(), "b"))
	if code != 1 || !strings.Contains(log, want) {
		t.Fatalf("backup --url %s: exit %d after %v, want 1 and %q:\n%s", tlsURL, code, time.Since(start), want, log)
	}

	rdb := startRedis(t)
	var out strings.Builder
	code = run(context.Background(), []string{"import-redis", "--redis", rdb.Options().Addr, "--url", tlsURL}, noEnv, &out, &out, nil)
	if code != 1 || !strings.Contains(out.String(), want) {
		t.Fatalf("import-redis --url %s: exit %d, want 1 and %q:\n%s", tlsURL, code, want, out.String())
	}

	// curl and other clients get the answer at once too: the handshake is
	// answered with a problem naming the URL to call.
	conn, err := tls.Dial("tcp", strings.TrimPrefix(plain, "http://"), &tls.Config{InsecureSkipVerify: true})
	var rhe tls.RecordHeaderError
	if err == nil || !errors.As(err, &rhe) || string(rhe.RecordHeader[:]) != "HTTP/" {
		if conn != nil {
			conn.Close()
		}
		t.Fatalf("a TLS handshake to the plain port: %v, want an HTTP answer", err)
	}

	// A server that ends the handshake without a word (a proxy, another
	// program on the port) leaves only "EOF": the error says TLS failed and
	// which --url to try.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Read(make([]byte, 512))
			c.Close()
		}
	}()
	want = "TLS failed: if the service serves plain HTTP, give --url http://" + ln.Addr().String()
	code, log = backupCmd(nil, "--url", "https://"+ln.Addr().String(), "--out", filepath.Join(t.TempDir(), "b"))
	if code != 1 || !strings.Contains(log, want) {
		t.Fatalf("backup of a server that closes the handshake: exit %d, want 1 and %q:\n%s", code, want, log)
	}
}

// Over TLS too, a connection that sends no request within --read-timeout,
// whether it made its handshake or not, is closed without an answer (a
// 408 on it could be read as the answer to a request sent later).
func TestASilentTLSConnectionIsClosedWithoutAnAnswer(t *testing.T) {
	certPath, keyPath := certFiles(t)
	pool := writeCert(t, certPath, keyPath, 1)
	s := startService(t, nil, "--data-dir", t.TempDir(), "--tls-cert", certPath, "--tls-key", keyPath, "--read-timeout", "300ms")
	addr := strings.TrimPrefix(s.url, "http://")
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.ReadAll(conn); err != nil || len(got) != 0 {
		t.Fatalf("a TLS connection silent after its handshake was answered %q (%v), want closed without an answer", got, err)
	}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.ReadAll(raw); err != nil || len(got) != 0 {
		t.Fatalf("a connection silent before its handshake was answered %q (%v), want closed without an answer", got, err)
	}
}
