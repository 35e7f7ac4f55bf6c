package api_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	if err := st.Restore(bytes.NewReader(backup), nil, nil); err != nil {
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

	if r, err := w.GetBackupWithResponse(ctx, nil); err != nil || r.ApplicationproblemJSON403 == nil {
		t.Fatalf("a write key's backup: %v %d", err, r.StatusCode())
	}
	r, err := a.GetBackupWithResponse(ctx, nil)
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
	r, err := c.GetBackupWithResponse(ctx, nil)
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

// slowBackupClient asks the server of e for a backup over a connection
// with a receive buffer of rcvbuf bytes and reads at most chunk bytes every pause;
// after stopAfter bytes (when not 0) it stops reading for stopFor. It
// returns the body read and the error that ended it (nil: the chunked
// stream's end came).
func slowBackupClient(t *testing.T, e *env, rcvbuf, chunk int, pause time.Duration, stopAfter int, stopFor time.Duration) ([]byte, error) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) })
		return errors.Join(err, serr)
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /v1/backup HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, chunk), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body []byte
	buf := make([]byte, chunk)
	for {
		if stopAfter > 0 && len(body) >= stopAfter {
			time.Sleep(stopFor)
			stopAfter = 0
		}
		n, err := resp.Body.Read(buf)
		body = append(body, buf[:n]...)
		if err == io.EOF {
			return body, nil
		}
		if err != nil {
			return body, err
		}
		time.Sleep(pause)
	}
}

// filled puts users users of 20,000 items each in e (32 KB each in a
// backup): one recorded, the others imported from its export.
func filled(t *testing.T, e *env, users int) {
	t.Helper()
	items := make([]string, 20000)
	for i := range items {
		items[i] = fmt.Sprintf("item-%d", i)
	}
	if _, err := e.hot.Record("default", "u0", items); err != nil {
		t.Fatal(err)
	}
	x, err := e.hot.Export("default", "u0")
	if err != nil {
		t.Fatal(err)
	}
	for u := 1; u < users; u++ {
		if _, err := e.hot.Import("default", fmt.Sprintf("u%d", u), x, true, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.hot.Flush(); err != nil {
		t.Fatal(err)
	}
}

// A client that reads a backup of 5.8 MB at about 2 MB/s, with a write
// timeout of 100 ms, gets it whole: the stream's large writes and its last
// bytes, which the kernel buffers after the server's last write, take
// longer than the timeout to reach it, but the client never stops taking
// bytes. The log says the backup was taken once the client acknowledged
// its end.
func TestBackupReachesASlowClientWhole(t *testing.T) {
	var l logLines
	e := newEnv(t, withLog(&l), func(c *api.Config) { c.WriteTimeout = 100 * time.Millisecond })
	filled(t, e, 180)
	body, err := slowBackupClient(t, e, 256<<10, 32<<10, 16*time.Millisecond, 0, 0)
	if err != nil {
		t.Fatalf("the backup stream ended after %d bytes: %v", len(body), err)
	}
	if _, err := restored(t, body); err != nil {
		t.Fatalf("restore of %d bytes: %v", len(body), err)
	}
	e.close()
	if recs := l.find(t, "seenapi: backup taken"); len(recs) != 1 || recs[0]["bytes"] != float64(len(body)) {
		t.Fatalf("backup taken logged %v, want once with %d bytes", recs, len(body))
	}
}

// A client that stops reading a backup for longer than the idle timeout
// is cut off, and the log says so instead of calling the backup taken.
func TestBackupCutsOffAClientThatStopsReading(t *testing.T) {
	var l logLines
	e := newEnv(t, withLog(&l), func(c *api.Config) { c.IdleTimeout = 200 * time.Millisecond })
	// 8 MB: far more than the kernels' buffers can take while the client
	// stops (a backup of 760 KB was once acknowledged whole meanwhile).
	filled(t, e, 250)
	body, err := slowBackupClient(t, e, 8<<10, 4<<10, 0, 64<<10, 2*time.Second)
	if err == nil {
		e.close()
		l.mu.Lock()
		defer l.mu.Unlock()
		t.Fatalf("a client that stopped reading for 10 idle timeouts got the whole backup (%d bytes); the log:\n%s", len(body), l.buf.String())
	}
	e.close()
	if recs := l.find(t, "seenapi: backup taken"); len(recs) != 0 {
		t.Fatalf("a backup cut off was logged taken: %v", recs)
	}
	if recs := l.find(t, "seenapi: a backup stream failed; the client got a backup without its end mark"); len(recs) != 1 {
		t.Fatalf("the cut backup was logged %d times as failed, want once", len(recs))
	}
}

// heldBackupStore is a real store whose first backup, once begun (it
// closes started), waits until release is closed: a backup held streaming,
// as one to a client that stops reading is.
type heldBackupStore struct {
	*storage.Store
	first            atomic.Bool
	started, release chan struct{}
}

func (s *heldBackupStore) Backup(w io.Writer) error {
	if s.first.CompareAndSwap(false, true) {
		close(s.started)
		<-s.release
	}
	return s.Store.Backup(w)
}

// One backup streams at a time: each holds a snapshot of the store and
// buffers of its own (hundreds of MB for a store of a hundred), so backups
// asked for at once, by clients that do not read them, took the process's
// memory past gigabytes. Another backup asked for meanwhile is answered 503
// overloaded with a Retry-After, and is served once the first has ended.
func TestOneBackupAtATime(t *testing.T) {
	hs := &heldBackupStore{started: make(chan struct{}), release: make(chan struct{})}
	e := newEnvOver(t, func(st *storage.Store) eviction.Store { hs.Store = st; return hs })
	release := sync.OnceFunc(func() { close(hs.release) })
	t.Cleanup(release) // before the server's shutdown, which waits for the held backup
	held := make(chan int, 1)
	go func() {
		status, _, body, err := e.rawErr(http.MethodGet, "/v1/backup", "", nil)
		if err != nil || status != http.StatusOK {
			t.Errorf("the held backup: %d %v %.200s", status, err, body)
		}
		held <- status
	}()
	<-hs.started
	status, h, body := e.raw(http.MethodGet, "/v1/backup", "", nil)
	wantProblem(t, status, h, body, http.StatusServiceUnavailable, "overloaded")
	if h.Get("Retry-After") == "" {
		t.Fatal("a backup asked for while another streams: overloaded without a Retry-After")
	}
	// The refusal is no backup: a browser or curl -OJ would save it as one.
	if cd := h.Get("Content-Disposition"); cd != "" {
		t.Errorf("a backup asked for while another streams: its 503 carries Content-Disposition %q", cd)
	}
	// A HEAD makes no backup: it is answered meanwhile.
	if resp, err := http.Head(e.base + "/v1/backup"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /v1/backup while a backup streams: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}
	release()
	<-held
	if status, _, body := e.raw(http.MethodGet, "/v1/backup", "", nil); status != http.StatusOK {
		t.Fatalf("once the first backup ended: %d %.200s, want 200", status, body)
	}
}

// A user whose stored filter is damaged stops a backup, whose stream says
// so, unless skip_damaged asks for one without such users: the stream
// then names them in its skip mark, which a reader returns, and restores
// every other user. The service logs each user left out.
func TestBackupSkippingDamagedUsers(t *testing.T) {
	var l logLines
	e := damagedVictimEnv(t, withLog(&l))
	c := e.client("")
	r, err := c.GetBackupWithResponse(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stopped *storage.BackupStoppedError
	if _, err := storage.VerifyBackup(bytes.NewReader(r.Body), storage.Hidden{}); !errors.As(err, &stopped) || stopped.User != "victim" {
		t.Fatalf("a backup without skip_damaged: %v, want it stopped by victim", err)
	}

	r, err = c.GetBackupWithResponse(ctx, &client.GetBackupParams{SkipDamaged: ptr(true)})
	if err != nil || r.StatusCode() != http.StatusOK {
		t.Fatalf("GET /v1/backup?skip_damaged=true: %v %d", err, r.StatusCode())
	}
	held, err := storage.VerifyBackup(bytes.NewReader(r.Body), storage.Hidden{})
	if err != nil || held.Filters != 2 || len(held.Skipped) != 1 || held.Skipped[0].NS != "default" ||
		held.Skipped[0].User != "victim" || !strings.Contains(held.Skipped[0].Reason, "corrupt") {
		t.Fatalf("a backup skipping damaged users: %+v, %v; want 2 filters, default/victim skipped for its damage", held, err)
	}
	hot, err := restored(t, r.Body)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	for u, want := range map[string]bool{"before": true, "after": true, "victim": false} {
		if seen, err := hot.Check("default", u, []string{"item-7"}, nil); err != nil || seen[0] != want {
			t.Errorf("restored %s: item-7 seen %v, %v; want %v", u, seen, err, want)
		}
	}
	status, h, body := e.raw(http.MethodGet, "/v1/backup?skip_damaged=yes", "", nil)
	if p := wantProblem(t, status, h, body, http.StatusBadRequest, "bad-request"); len(p.Errors) != 1 || p.Errors[0].Parameter != "skip_damaged" {
		t.Errorf("skip_damaged=yes: %+v, want the parameter named", p)
	}
	e.close() // once the backup's writer has logged
	recs := l.find(t, "seenapi: a backup leaves out a user whose stored filter is damaged (skip_damaged)")
	if len(recs) != 1 || recs[0]["level"] != "WARN" || recs[0]["ns"] != "default" || recs[0]["user"] != "victim" {
		t.Errorf("the service logged %v, want one warning naming default/victim", recs)
	}
}
