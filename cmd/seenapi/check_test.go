package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/storage/storagetest"
	"github.com/seenapi/seenapi/userfilter"
)

// runCheck runs seenapi check with args and env and returns its exit code,
// what it printed and what it logged.
func runCheck(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	code := run(context.Background(), append([]string{"check"}, args...), mapEnv(env), &out, &errs, nil)
	return code, out.String(), errs.String()
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// seenapi check says what the service would serve: each namespace's
// profile, the keys by role (never a secret), and the certificate's date;
// it creates no data directory.
func TestCheckSaysWhatTheServiceWouldLoad(t *testing.T) {
	dir := t.TempDir()
	ns := writeFile(t, dir, "ns.yaml", "feed:\n  window: 30d\n  max_items: 100000\npush:\n  kind: compact\n  window: 6h\n")
	keys := writeFile(t, dir, "keys", "write:w-0123456789abcdef rate=5\nread:r-0123456789abcdef namespaces=feed,fed\n")
	cert, key := certFiles(t)
	writeCert(t, cert, key, 1)
	data := filepath.Join(dir, "data")
	code, out, logged := runCheck(t, map[string]string{"SEENAPI_KEYS": "admin:a-0123456789abcdef"},
		"--namespaces", ns, "--keys-file", keys, "--tls-cert", cert, "--tls-key", key, "--data-dir", data)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, logged)
	}
	for _, want := range []string{
		"namespaces (" + ns + "): 3\n",
		"  default: staged, fp_rate 0.01, no window, no cap\n",
		"  feed: staged, fp_rate 0.01, window 30d in buckets of 7.5d, max_items 100000\n",
		"  push: compact, fp_rate 0.01, window 6h in buckets of 90m, no cap\n",
		"keys: 3 (1 read, 1 write, 1 admin); 1 with a rate of its own; 1 limited to some namespaces\n",
		// Each key by its id, not by itself.
		"  key " + api.Key{Secret: "w-0123456789abcdef"}.ID() + ": write, rate 5/s\n",
		"  key " + api.Key{Secret: "r-0123456789abcdef"}.ID() + ": read, namespaces fed, feed only\n",
		"  key " + api.Key{Secret: "a-0123456789abcdef"}.ID() + ": admin\n",
		// A key's namespace that is not served: misspelt, most likely.
		"warning: key " + api.Key{Secret: "r-0123456789abcdef"}.ID() + ` is limited to the namespace "fed", which is not served` + "\n",
		"tls: " + cert + ", valid until ",
		"seenapi check: the configuration loads\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0123456789abcdef") {
		t.Errorf("the output shows a key:\n%s", out)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("check touched the data directory: %v", err)
	}
}

// In SEENAPI_KEYS a piece without a colon after namespaces= continues the
// list, so a second key whose role was left out reads as a namespace: a
// name as long as a key may be is never shown, neither when it is no
// namespace name (a key of new-key, in capitals) nor when it is one that
// is not served (a key in lowercase hex), in check's output or in the
// service's log; a served namespace is shown, however long.
func TestAKeyReadAsANamespaceIsNotShown(t *testing.T) {
	dir := t.TempDir()
	ns := writeFile(t, dir, "ns.yaml", "recommendations_feed: {}\n")
	const upper, lower = "KQ3VZB7XWPLM2RT4HNE6YCJD5A", "9f2c0e6d1a7b4c38a1e5"
	code, out, logged := runCheck(t, map[string]string{"SEENAPI_KEYS": "write:w-0123456789abcdef namespaces=default," + upper},
		"--namespaces", ns)
	if code != 1 || strings.Contains(out+logged, upper) || !strings.Contains(out+logged, "not shown") {
		t.Errorf("a key in capitals after namespaces=: exit %d, want 1, the name not shown:\n%s%s", code, out, logged)
	}
	code, out, logged = runCheck(t, map[string]string{"SEENAPI_KEYS": "write:w-0123456789abcdef namespaces=recommendations_feed,fed," + lower},
		"--namespaces", ns)
	if code != 0 || strings.Contains(out+logged, lower) || !strings.Contains(out, ", fed, recommendations_feed only") ||
		!strings.Contains(out, `limited to the namespace "fed", which is not served`) || !strings.Contains(out, "of 20 characters") {
		t.Errorf("a key in lowercase hex after namespaces=: exit %d, want 0, the name not shown:\n%s%s", code, out, logged)
	}
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	k, err := api.ParseKeysList("write:w-0123456789abcdef namespaces=default," + lower)
	if err != nil {
		t.Fatal(err)
	}
	warnUnservedScopes(k, []eviction.Namespace{{Name: "default"}}, "seenapi: ", logger)
	if strings.Contains(log.String(), lower) || !strings.Contains(log.String(), "not served") {
		t.Errorf("the service's log shows the name:\n%s", log.String())
	}
}

// Whatever the service would refuse at its start or on a SIGHUP, check
// refuses with exit status 1 and says why.
// seenapi check prints the warnings serve would log at its start (a keys
// file others can read, keys in clear text off loopback, a free-space
// minimum under what the store takes at once), so that they are seen
// before the restart; the configuration still loads.
func TestCheckSaysWhatTheServiceWouldWarnOf(t *testing.T) {
	keys := writeFile(t, t.TempDir(), "keys", "admin:a-0123456789abcdef\n")
	if err := os.Chmod(keys, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, logged := runCheck(t, nil, "--keys-file", keys, "--addr", "0.0.0.0:8080", "--min-free-bytes", "4MiB")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, logged)
	}
	for _, want := range []string{
		"warning: the keys file can be read by other users of this machine; chmod 600 it file=" + keys + " mode=-rw-r--r--\n",
		"warning: API keys cross the network in clear text on 0.0.0.0:8080",
		"warning: --min-free-bytes is under what the store may take at once",
		"seenapi check: the configuration loads\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	// Sane settings warn of nothing.
	if err := os.Chmod(keys, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, out, _ := runCheck(t, nil, "--keys-file", keys); strings.Contains(out, "warning") {
		t.Errorf("check warns of sane settings:\n%s", out)
	}
}

// GOMEMLIMIT takes the place of --memory-limit as it is: one under what
// --memory-limit may be (--cache-bytes + 48MiB) is warned of, as the
// start warns of it, since the collector would then run all the time once
// the hot set fills. GOMEMLIMIT=0 too, a limit of no bytes (not "no
// limit"), under which the collector runs all the time from the start.
func TestCheckWarnsOfAGOMEMLIMITUnderTheBudget(t *testing.T) {
	for _, under := range []string{"256MiB", "0"} {
		code, out, logged := runCheck(t, map[string]string{"GOMEMLIMIT": under}, "--cache-bytes", "512MiB")
		if code != 0 {
			t.Fatalf("exit %d: %s%s", code, out, logged)
		}
		if want := "warning: GOMEMLIMIT, which takes the place of --memory-limit, is under --cache-bytes + 48MiB"; !strings.Contains(out, want) {
			t.Errorf("GOMEMLIMIT=%s: the output lacks %q:\n%s", under, want, out)
		}
	}
	for _, roomy := range []string{"1GiB", "off"} {
		if _, out, _ := runCheck(t, map[string]string{"GOMEMLIMIT": roomy}, "--cache-bytes", "512MiB"); strings.Contains(out, "GOMEMLIMIT") {
			t.Errorf("GOMEMLIMIT=%s warned of:\n%s", roomy, out)
		}
	}
}

func TestCheckRefusesWhatTheServiceWould(t *testing.T) {
	dir := t.TempDir()
	cert, key := certFiles(t)
	writeCert(t, cert, key, 1)
	expired, expiredKey := certFiles(t)
	writeExpiredCert(t, expired, expiredKey)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a bad profile", []string{"--namespaces", writeFile(t, dir, "bad.yaml", "feed:\n  fp_rate: 2\n")}, "fp_rate 2 outside"},
		{"a namespace twice", []string{"--namespaces", writeFile(t, dir, "twice.yaml", "feed:\nfeed:\n")}, "feed"},
		{"no namespaces file", []string{"--namespaces", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{"a key twice", []string{"--keys-file", writeFile(t, dir, "keys2", "read:r-0123456789abcdef\nwrite:r-0123456789abcdef\n")}, "line 2: the same key as line 1"},
		{"a short key", []string{"--keys-file", writeFile(t, dir, "short", "read:short\n")}, "16"},
		{"a public address without keys", []string{"--addr", "0.0.0.0:8080"}, "without API keys"},
		{"a key that is not the certificate's", []string{"--tls-cert", cert, "--tls-key", writeFile(t, dir, "k.pem", "no key")}, "--tls-key"},
		{"an expired certificate", []string{"--tls-cert", expired, "--tls-key", expiredKey}, "expired"},
	} {
		code, out, logged := runCheck(t, nil, tc.args...)
		if code != 1 || !strings.Contains(logged, tc.want) || strings.Contains(out, "the configuration loads") {
			t.Errorf("%s: exit %d, logged %q, printed %q; want 1 and %q", tc.name, code, logged, out, tc.want)
		}
	}
	// A bad flag is a usage error, as for serve.
	if code, _, logged := runCheck(t, nil, "--rate-burst", "5"); code != 2 || !strings.Contains(logged, "--rate-burst needs --rate-limit") {
		t.Errorf("--rate-burst alone: exit %d, %q", code, logged)
	}
}

// writeExpiredCert writes a self-signed certificate that expired an hour
// ago, and its key.
func writeExpiredCert(t *testing.T, certPath, keyPath string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "expired"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// seenapi check warns about the namespaces whose users the store holds
// but the namespaces file no longer lists, with their users counted (those
// the users route lists) and what to do; while the service has the store
// open, it says it did not read it, and exits 0 either way.
func TestCheckWarnsAboutStoredNamespacesNotServed(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	store, err := storage.Open(storage.DefaultOptions(data).WithMinFreeBytes(-1).WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	writes := []storage.Write{{NS: "feed", User: "f", Value: []byte("filter")}}
	for _, u := range []string{"a", "b", "c"} {
		writes = append(writes, storage.Write{NS: "push", User: u, Value: []byte("filter")})
	}
	// Users that never recorded an item, which earlier builds stored: not
	// listed, and not counted.
	raw := storagetest.NoHistory(t, userfilter.DefaultProfile())
	writes = append(writes, storage.Write{NS: "push", User: "never", Value: raw}, storage.Write{NS: "old", User: "never", Value: raw})
	if err := store.WriteBack(writes, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append("email", "e", []byte("item"), 0); err != nil { // in the journal alone
		t.Fatal(err)
	}
	ns := writeFile(t, dir, "ns.yaml", "feed:\n")

	code, out, logged := runCheck(t, nil, "--namespaces", ns, "--data-dir", data)
	if code != 0 || !strings.Contains(out, "store: --data-dir "+data+" is in use (by the service, most likely) and was not read") ||
		strings.Contains(out, "warning") {
		t.Errorf("check beside the service: exit %d:\n%s%s", code, out, logged)
	}
	// What a crash leaves (the files as they are, without the lock):
	// Badger reads it only once the service's start has recovered it.
	crashed := filepath.Join(dir, "crashed")
	storagetest.CopyAsACrashLeaves(t, data, crashed)
	code, out, logged = runCheck(t, nil, "--namespaces", ns, "--data-dir", crashed)
	if code != 0 || !strings.Contains(out, "store: --data-dir "+crashed+" was left open by a crash and was not read; "+
		"the service's next start recovers it") || strings.Contains(out, "warning") {
		t.Errorf("check after a crash: exit %d:\n%s%s", code, out, logged)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	code, out, logged = runCheck(t, nil, "--namespaces", ns, "--data-dir", data)
	want := "warning: the store in " + data + " holds users of namespaces that are not served (not in the namespaces file): " +
		"email (1 user), push (3 users); they stay until the namespace is served again (put back in the file) or erased " +
		"(DELETE /v1/namespaces/{ns}, role admin)\n"
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "seenapi check: the configuration loads\n") {
		t.Errorf("exit %d, want 0 and %q:\n%s%s", code, want, out, logged)
	}
	// check read it without taking it: the service opens it after.
	store, err = storage.Open(storage.DefaultOptions(data).WithMinFreeBytes(-1).WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("the store after check: %v", err)
	}
	store.Close()

	// Served again: no warning.
	code, out, _ = runCheck(t, nil, "--namespaces", writeFile(t, dir, "all.yaml", "feed:\npush:\nemail:\n"), "--data-dir", data)
	if code != 0 || strings.Contains(out, "warning") {
		t.Errorf("every stored namespace served: exit %d:\n%s", code, out)
	}
}
