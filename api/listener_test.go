package api_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
)

// exhaustedListener is a loopback listener whose first accepts fail as
// accept4 does when the process has no file descriptor left (EMFILE).
type exhaustedListener struct {
	net.Listener
	fail atomic.Int32 // accepts still to fail
}

func (l *exhaustedListener) Accept() (net.Conn, error) {
	if l.fail.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestServeOutlivesRunningOutOfFileDescriptors: a process with as many
// connections open as its descriptor limit (ulimit -n) fails its accepts
// with EMFILE until some close. The service waits and accepts again; it
// does not stop serving, which would end the process for every caller.
func TestServeOutlivesRunningOutOfFileDescriptors(t *testing.T) {
	store, err := storage.Open(storage.DefaultOptions(t.TempDir()).WithMinFreeBytes(-1).
		WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	hot, err := eviction.New(store, nil, eviction.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer hot.Close()
	srv, err := api.New(hot, api.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &exhaustedListener{Listener: inner}
	ln.fail.Store(5)
	var serveErr error
	served := make(chan struct{})
	go func() { serveErr = srv.Serve(ln); close(served) }()
	defer func() {
		if err := srv.Shutdown(t.Context()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		inner.Close() // Serve may have returned without closing it
		<-served
	}()

	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + inner.Addr().String() + "/healthz")
	if err != nil {
		select {
		case <-served:
			t.Fatalf("the server stopped serving at an accept out of file descriptors: %v (the probe: %v)", serveErr, err)
		default:
		}
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d, want 200", resp.StatusCode)
	}
	select {
	case <-served:
		t.Fatalf("Serve returned: %v", serveErr)
	default:
	}
}

// getOn sends GET path on conn (keep-alive) and reads the answer.
func getOn(t *testing.T, conn net.Conn, path string) (int, http.Header, []byte) {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

// Past --max-connections a new connection is answered 503 overloaded,
// with Retry-After, and closed; the connections open are served on, and
// once one closes a new one is served. The figures count them.
func TestConnectionsPastTheCapAreOverloaded(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.MaxConnections = 3 })
	addr := strings.TrimPrefix(e.base, "http://")
	var open []net.Conn
	for range 3 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if status, _, body := getOn(t, conn, "/healthz"); status != http.StatusOK {
			t.Fatalf("a connection within the cap: %d %s", status, body)
		}
		open = append(open, conn)
	}
	past, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer past.Close()
	status, h, body := getOn(t, past, "/v1/namespaces")
	wantProblem(t, status, h, body, http.StatusServiceUnavailable, "overloaded")
	if h.Get("Retry-After") == "" || !strings.Contains(string(body), "--max-connections") {
		t.Fatalf("the connection past the cap: Retry-After %q, %s", h.Get("Retry-After"), body)
	}
	// Every answer of the service says so, this one too, and when.
	wantNotRendered(t, "the connection past the cap", h)
	if d, err := http.ParseTime(h.Get("Date")); err != nil || time.Since(d).Abs() > time.Minute {
		t.Errorf("the connection past the cap: Date %q (%v), want now, as every answer", h.Get("Date"), err)
	}
	if n, err := past.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the connection past the cap stayed open (read %d bytes)", n)
	}
	// The health probes are answered as their routes would answer them:
	// a liveness probe refused for want of a connection would have an
	// orchestrator restart a service that is only busy.
	for _, path := range []string{"/healthz", "/readyz", "/readyz?verbose=1"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		status, h, body := getOn(t, conn, path)
		want := map[bool]string{true: `{"status":"ok","key_required":false}`, false: `{"status":"ready","key_required":false}`}[path == "/healthz"]
		if status != http.StatusOK || string(body) != want || h.Get("Date") == "" {
			t.Errorf("GET %s past the cap: %d %q %v, want 200 %s with Date", path, status, body, h, want)
		}
		wantNotRendered(t, "GET "+path+" past the cap", h)
		if n, err := conn.Read(make([]byte, 1)); err == nil {
			t.Errorf("GET %s past the cap: the connection stayed open (read %d bytes)", path, n)
		}
		conn.Close()
	}
	head, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer head.Close()
	_ = head.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(head, "HEAD /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if got, err := io.ReadAll(head); err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(string(got), "\r\n\r\n") ||
		!strings.Contains(string(got), "Content-Length: 39\r\n") {
		t.Errorf("HEAD /readyz past the cap: %q %v, want 200, GET's length and no body", got, err)
	}
	status, _, body = getOn(t, open[0], "/v1/stats")
	var st struct {
		Connections int64             `json:"connections"`
		Errors      map[string]uint64 `json:"errors"`
	}
	if err := json.Unmarshal(body, &st); status != http.StatusOK || err != nil || st.Connections != 3 {
		t.Fatalf("stats on a connection within the cap: %d %v %s, want 3 connections", status, err, body)
	}
	// The refusal counts with the other 503s, where an operator's alert
	// on the errors looks.
	if st.Errors["503"] != 1 {
		t.Errorf("stats count %d answers 503 after one connection past the cap, want 1: %s", st.Errors["503"], body)
	}
	open[2].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		status, _, body := getOn(t, conn, "/healthz")
		conn.Close()
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("once a connection closed, a new one still got %d %s", status, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A route whose operation lists no 503 answers one too past
// --max-connections, with Retry-After: its default response declares the
// header, so that a client generated from the document reads when to retry.
func TestRetryAfterOfAnAnswerByDefaultIsDeclared(t *testing.T) {
	e, _, _ := envAtItsCap(t)
	// GET /openapi.yaml lists 200 and default only; the validator of
	// e.raw fails an answer whose Retry-After its response does not declare.
	status, h, body := e.raw(http.MethodGet, "/openapi.yaml", "", nil)
	wantProblem(t, status, h, body, http.StatusServiceUnavailable, "overloaded")
	if h.Get("Retry-After") == "" {
		t.Fatalf("503 past the cap without Retry-After: %v", h)
	}
}

// Clients that connect past --max-connections and send nothing take the
// places of the refusals under way, each for up to a second: more of them
// than there are places must not keep a load balancer's probe, which sends
// its request at once, from being answered.
func TestProbesPastTheCapOutliveSilentConnections(t *testing.T) {
	_, addr, held := envAtItsCap(t)
	// Twice as many as the refusals let under way at once (64).
	for range 128 {
		silent, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		status, _, body := getOn(t, conn, path)
		conn.Close()
		if status != http.StatusOK {
			t.Errorf("GET %s past the cap behind silent connections: %d %s, want 200", path, status, body)
		}
	}
	// The connection within the cap is served on.
	if status, _, body := getOn(t, held, "/healthz"); status != http.StatusOK {
		t.Errorf("the connection within the cap after: %d %s", status, body)
	}
}

// A health probe answered past --max-connections is counted as its route
// counts it: in the calls per route and the duration histogram, and a
// /readyz not ready in not_ready, not among the errors, in /v1/stats and
// /metrics alike (read on the connection within the cap).
func TestProbesPastTheCapAreCounted(t *testing.T) {
	var starting atomic.Bool
	_, addr, held := envAtItsCap(t, func(c *api.Config) {
		c.Ready = func() error {
			if starting.Load() {
				return errors.New("the journal is being folded in")
			}
			return nil
		}
	})
	past := func(method, path string, want int) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(conn, method+" "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
		if err != nil || resp.StatusCode != want {
			t.Fatalf("%s %s past the cap: %v %v, want %d", method, path, resp, err, want)
		}
		resp.Body.Close()
	}
	past(http.MethodGet, "/healthz", http.StatusOK)
	past(http.MethodHead, "/healthz", http.StatusOK)
	past(http.MethodGet, "/readyz", http.StatusOK)
	starting.Store(true)
	past(http.MethodGet, "/readyz", http.StatusServiceUnavailable)
	starting.Store(false)

	// The held connection's own GET /healthz counts once more.
	want := map[string]int64{"GET /healthz": 3, "GET /readyz": 2}
	status, _, body := getOn(t, held, "/v1/stats")
	var st struct {
		Calls    map[string]int64  `json:"calls"`
		Errors   map[string]uint64 `json:"errors"`
		NotReady uint64            `json:"not_ready"`
	}
	if err := json.Unmarshal(body, &st); status != http.StatusOK || err != nil {
		t.Fatalf("stats on the connection within the cap: %d %v %s", status, err, body)
	}
	for route, n := range want {
		if st.Calls[route] != n {
			t.Errorf("calls[%q] = %d, want %d", route, st.Calls[route], n)
		}
	}
	if st.NotReady != 1 || st.Errors["503"] != 0 {
		t.Errorf("not_ready = %d, errors[503] = %d after one /readyz not ready past the cap, want 1 and 0", st.NotReady, st.Errors["503"])
	}
	status, h, body := getOn(t, held, "/metrics")
	mfs := parseMetrics(t, status, h, body)
	for route, n := range want {
		if got := metricValue(t, mfs, "seenapi_http_requests_total", "route", route); got != float64(n) {
			t.Errorf(`seenapi_http_requests_total{route=%q} = %v, want %d`, route, got, n)
		}
		if got := histogramCount(mfs, "seenapi_http_request_duration_seconds", route); got != uint64(n) {
			t.Errorf(`seenapi_http_request_duration_seconds_count{route=%q} = %d, want %d`, route, got, n)
		}
	}
	if got := metricValue(t, mfs, "seenapi_not_ready_total"); got != 1 {
		t.Errorf("seenapi_not_ready_total = %v, want 1", got)
	}
}

// envAtItsCap starts a service of --max-connections 1 (and opts) and holds
// its one connection, held (answered, so counted), until the test ends;
// addr is where it listens.
func envAtItsCap(t *testing.T, opts ...envOption) (e *env, addr string, held net.Conn) {
	t.Helper()
	e = newEnv(t, append(opts, func(c *api.Config) { c.MaxConnections = 1 })...)
	addr = strings.TrimPrefix(e.base, "http://")
	held, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	if status, _, body := getOn(t, held, "/healthz"); status != http.StatusOK {
		t.Fatalf("the connection within the cap: %d %s", status, body)
	}
	return e, addr, held
}
