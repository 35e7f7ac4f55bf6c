package api_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/client"
	"github.com/seenapi/seenapi/storage/storagetest"
	"github.com/seenapi/seenapi/userfilter"
)

// logLines is a slog JSON sink safe for the server's goroutines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// find returns the logged records with message msg.
func (l *logLines) find(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

func withLog(l *logLines) envOption {
	return func(c *api.Config) { c.Logger = slog.New(slog.NewJSONHandler(l, nil)) }
}

// sha8 is a key's id worked out as the README says: the first 8 hex digits
// of its SHA-256.
func sha8(key string) string {
	d := sha256.Sum256([]byte(key))
	return hex.EncodeToString(d[:])[:8]
}

// wantAudit checks that msg was logged once, with the fields given and by.
func wantAudit(t *testing.T, l *logLines, msg, by string, fields map[string]any) {
	t.Helper()
	recs := l.find(t, msg)
	if len(recs) != 1 {
		t.Fatalf("%q logged %d times, want once", msg, len(recs))
	}
	if recs[0]["level"] != "INFO" || recs[0]["by"] != by {
		t.Errorf("%q: level %v, by %v; want INFO, by %q", msg, recs[0]["level"], recs[0]["by"], by)
	}
	for k, v := range fields {
		if recs[0][k] != v {
			t.Errorf("%q: %s = %v, want %v", msg, k, recs[0][k], v)
		}
	}
}

// The admin actions that erase, replace or take out data are logged with
// the key that asked, by its id (which GET /v1/auth gives its caller), and
// never with the key itself; reads and refusals are not logged.
func TestAdminActionsAreLoggedWithTheirKey(t *testing.T) {
	var l logLines
	e := newEnv(t, withKeys, withLog(&l))
	admin := e.client(adminKey)
	by := "key " + sha8(adminKey)

	a, err := admin.GetAuthWithResponse(ctx)
	if err != nil || a.JSON200 == nil || a.JSON200.KeyId == nil || *a.JSON200.KeyId != sha8(adminKey) {
		t.Fatalf("GET /v1/auth: %v %d %s, want key_id %s", err, a.StatusCode(), a.Body, sha8(adminKey))
	}
	if a, _ := e.client(readKey).GetAuthWithResponse(ctx); a.JSON200 == nil || *a.JSON200.KeyId != sha8(readKey) {
		t.Fatalf("GET /v1/auth with the read key: %s", a.Body)
	}

	filter(t, e.client(writeKey), "default", "u1", client.FilterRequest{Candidates: []string{"a", "b"}})
	x, err := admin.ExportUserWithResponse(ctx, "default", "u1")
	if err != nil || x.StatusCode() != http.StatusOK {
		t.Fatal(err, x.StatusCode())
	}
	// Refused: below admin. Nothing is logged for it.
	if r, _ := e.client(writeKey).ForgetUserWithResponse(ctx, "default", "u1"); r.StatusCode() != http.StatusForbidden {
		t.Fatalf("erase with the write key: %d", r.StatusCode())
	}
	im, err := admin.ImportUserWithBodyWithResponse(ctx, "default", "u2", &client.ImportUserParams{Mode: ptr(client.Replace)},
		"application/octet-stream", bytes.NewReader(x.Body))
	if err != nil || im.StatusCode() != http.StatusNoContent {
		t.Fatal(err, im.StatusCode(), string(im.Body))
	}
	if r, err := admin.ForgetUserWithResponse(ctx, "default", "u1"); err != nil || r.StatusCode() != http.StatusNoContent {
		t.Fatal(err, r.StatusCode())
	}
	status, _, backup := e.raw(http.MethodGet, "/v1/backup", "", nil, "Authorization", "Bearer "+adminKey)
	if status != http.StatusOK || len(backup) == 0 {
		t.Fatalf("backup: %d, %d bytes", status, len(backup))
	}
	e.close() // the backup's last line is logged after its stream ends

	wantAudit(t, &l, "seenapi: user erased", by, map[string]any{"namespace": "default", "user": "u1", "had_data": true})
	wantAudit(t, &l, "seenapi: filter imported", by, map[string]any{"namespace": "default", "user": "u2",
		"mode": "replace", "bytes": float64(len(x.Body))})
	wantAudit(t, &l, "seenapi: backup started", by, nil)
	wantAudit(t, &l, "seenapi: backup taken", by, map[string]any{"bytes": float64(len(backup))})
	l.mu.Lock()
	logged := l.buf.String()
	l.mu.Unlock()
	for _, key := range []string{adminKey, writeKey, readKey} {
		if strings.Contains(logged, key) {
			t.Errorf("the log holds a key: %s", key)
		}
	}
}

// On an open service the caller is its address, and GET /v1/auth gives no
// key id.
func TestAdminActionsOnAnOpenServiceAreLoggedWithTheAddress(t *testing.T) {
	var l logLines
	e := newEnv(t, withLog(&l))
	c := e.client("")
	if a, err := c.GetAuthWithResponse(ctx); err != nil || a.JSON200 == nil || a.JSON200.KeyId != nil {
		t.Fatalf("GET /v1/auth on an open service: %v %s", err, a.Body)
	}
	filter(t, c, "default", "u1", client.FilterRequest{Candidates: []string{"a"}})
	if r, err := c.ForgetUserWithResponse(ctx, "default", "u1"); err != nil || r.StatusCode() != http.StatusNoContent {
		t.Fatal(err, r.StatusCode())
	}
	wantAudit(t, &l, "seenapi: user erased", "address 127.0.0.1", map[string]any{"namespace": "default", "user": "u1"})
}

// An import of a filter that never recorded an item, for a user never
// seen, writes nothing (answered 204 all the same): the log says so, and
// does not tell an operator that a filter was imported. One merged into a
// user with a history is written, and logged as imported.
func TestAnImportThatWritesNothingIsNotLoggedAsImported(t *testing.T) {
	var l logLines
	e := newEnv(t, withLog(&l))
	c := e.client("")
	empty := storagetest.NoHistory(t, userfilter.DefaultProfile())
	r, err := c.ImportUserWithBodyWithResponse(ctx, "default", "none", &client.ImportUserParams{Mode: ptr(client.Replace)},
		"application/octet-stream", bytes.NewReader(empty))
	if err != nil || r.StatusCode() != http.StatusNoContent {
		t.Fatal(err, r.StatusCode(), string(r.Body))
	}
	if recs := l.find(t, "seenapi: filter imported"); len(recs) != 0 {
		t.Fatalf("an import that wrote nothing is logged as imported: %v", recs)
	}
	wantAudit(t, &l, "seenapi: filter import wrote nothing", "address 127.0.0.1", map[string]any{"namespace": "default",
		"user": "none", "mode": "replace", "bytes": float64(len(empty))})

	filter(t, c, "default", "seen", client.FilterRequest{Candidates: []string{"a"}})
	r, err = c.ImportUserWithBodyWithResponse(ctx, "default", "seen", nil, "application/octet-stream", bytes.NewReader(empty))
	if err != nil || r.StatusCode() != http.StatusNoContent {
		t.Fatal(err, r.StatusCode(), string(r.Body))
	}
	wantAudit(t, &l, "seenapi: filter imported", "address 127.0.0.1", map[string]any{"namespace": "default", "user": "seen",
		"mode": "merge"})
}
