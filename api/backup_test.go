package api_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/client"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
)

// restored opens a fresh store in a temp dir, restores backup into it and
// returns a hot set over it, or the restore's error.
func restored(t *testing.T, backup []byte) (*eviction.HotSet, error) {
	t.Helper()
	st, err := storage.Open(storage.DefaultOptions(t.TempDir()).WithMinFreeBytes(-1).WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Restore(bytes.NewReader(backup), nil); err != nil {
		return nil, err
	}
	hot, err := eviction.New(st, testNamespaces(), eviction.Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hot.Close() })
	return hot, nil
}

// A backup taken from the running service through the generated client
// holds every answered call and restores into a store of its own; cut
// short, it is refused. It needs an admin key.
func TestBackupOfARunningService(t *testing.T) {
	e := newEnv(t, withKeys)
	w, a := e.client(writeKey), e.client(adminKey)
	filter(t, w, "default", "old", client.FilterRequest{Candidates: []string{"a", "b"}})
	if err := e.hot.Flush(); err != nil {
		t.Fatal(err)
	}
	filter(t, w, "default", "new", client.FilterRequest{Candidates: []string{"c"}})
	filter(t, w, "capped", "new", client.FilterRequest{Candidates: []string{"d"}})

	if r, err := w.GetBackupWithResponse(ctx); err != nil || r.ApplicationproblemJSON403 == nil {
		t.Fatalf("a write key's backup: %v %d", err, r.StatusCode())
	}
	r, err := a.GetBackupWithResponse(ctx)
	if err != nil || r.StatusCode() != http.StatusOK {
		t.Fatalf("backup: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if ct := r.HTTPResponse.Header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Errorf("content type %q", ct)
	}
	if cd := r.HTTPResponse.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, `attachment; filename="seenapi-`) {
		t.Errorf("content disposition %q", cd)
	}
	hot, err := restored(t, r.Body)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	for _, c := range []struct {
		ns, user string
		items    []string
		want     []bool
	}{
		{"default", "old", []string{"a", "b", "z"}, []bool{true, true, false}},
		{"default", "new", []string{"c", "a"}, []bool{true, false}},
		{"capped", "new", []string{"d", "c"}, []bool{true, false}},
	} {
		got, err := hot.Check(c.ns, c.user, c.items, nil)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s/%s after restore: %v %v, want %v", c.ns, c.user, got, err, c.want)
		}
	}
	if _, err := restored(t, r.Body[:len(r.Body)-16]); !errors.Is(err, storage.ErrBadBackup) {
		t.Fatalf("a backup without its end mark: %v, want ErrBadBackup", err)
	}
}

// slowBackupStore is a real store whose backups are written a little at a
// time, slowly: a backup that takes longer than the server's write timeout.
type slowBackupStore struct {
	*storage.Store
}

func (s slowBackupStore) Backup(w io.Writer) error { return s.Store.Backup(slowWriter{w}) }

type slowWriter struct{ w io.Writer }

func (s slowWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		time.Sleep(20 * time.Millisecond)
		m, err := s.w.Write(p[:min(len(p), 128)])
		n += m
		if err != nil {
			return n, err
		}
		p = p[m:]
	}
	return n, nil
}

// The server's write timeout bounds each write of a backup, not the whole
// stream: a backup streaming for several timeouts arrives whole.
func TestBackupOutlastsTheWriteTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	e := newEnvOver(t, func(st *storage.Store) eviction.Store { return slowBackupStore{st} },
		func(c *api.Config) { c.WriteTimeout = timeout })
	c := e.client("")
	for i := range 20 {
		filter(t, c, "default", "u"+strings.Repeat("x", i), client.FilterRequest{Candidates: []string{"a", "b", "c"}})
	}
	start := time.Now()
	r, err := c.GetBackupWithResponse(ctx)
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if r.StatusCode() != http.StatusOK {
		t.Fatalf("backup: %d", r.StatusCode())
	}
	if took := time.Since(start); took < 3*timeout {
		t.Fatalf("the backup took %v, not several write timeouts: the test proves nothing", took)
	}
	hot, err := restored(t, r.Body)
	if err != nil {
		t.Fatalf("restore of %d bytes: %v", len(r.Body), err)
	}
	if got, err := hot.Check("default", "u", []string{"a", "z"}, nil); err != nil || !slices.Equal(got, []bool{true, false}) {
		t.Fatalf("after restore: %v %v", got, err)
	}
}
