package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestShutdownFinishesInFlightRequests starts a request, shuts down while
// its body is still arriving, and checks that the request is answered, that
// new connections are refused, that Shutdown returned only after the answer,
// and that /readyz no longer says ready.
func TestShutdownFinishesInFlightRequests(t *testing.T) {
	e := newEnv(t)
	conn, addr := e.dial(t)
	// Past 16 KiB, the body takes its share of the bodies' budget while it
	// is read: the sign that the server has begun the request.
	body := `{"candidates":["a","b","c"],"limit":2` + strings.Repeat(" ", 20<<10) + `}`
	head := fmt.Sprintf("POST /v1/namespaces/default/users/inflight/filter HTTP/1.1\r\nHost: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, len(body))
	if _, err := io.WriteString(conn, head+body[:10]); err != nil {
		t.Fatal(err)
	}
	e.waitReserved(t, len(body))

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shut <- e.srv.Shutdown(ctx)
	}()
	// Connections are refused once the listener is closed, while
	// Shutdown waits for the request in flight.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("new connections still accepted 20 s into the shutdown")
		}
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with a request in flight", err)
	default:
	}

	if _, err := io.WriteString(conn, body[10:]); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), `"unseen":["a","b"]`) {
		t.Fatalf("in-flight request: %d %s", resp.StatusCode, got)
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Shutdown did not return after the last request")
	}
	r, err := e.srv.App().Test(httptest.NewRequest(http.MethodGet, "/readyz", nil), -1)
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz after shutdown: %d", r.StatusCode)
	}
	// What the in-flight request recorded is in the hot set, to be written back on Close.
	seen, err := e.hot.Check("default", "inflight", []string{"a", "b", "c"}, nil)
	if err != nil || !seen[0] || !seen[1] || seen[2] {
		t.Fatalf("after shutdown: %v %v", seen, err)
	}
}

// From the drain on, each answer closes its connection: a client on a
// kept-alive one dials again while the listener still takes it, instead of
// sending its next request on a connection the shutdown then closes
// unanswered (under load, one request of every kept-alive connection was
// cut off so, --drain-delay or not).
func TestDrainClosesEachConnectionAfterItsAnswer(t *testing.T) {
	e := newEnv(t)
	conn, addr := e.dial(t)
	br := bufio.NewReader(conn)
	get := func() *http.Response {
		t.Helper()
		if _, err := fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := get(); resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("before the drain: %d, connection closed %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	e.srv.Drain()
	if resp := get(); resp.StatusCode != http.StatusOK || !resp.Close {
		t.Fatalf("draining: %d, Connection: %q; want 200 and the connection closed", resp.StatusCode, resp.Header.Get("Connection"))
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("draining: the connection stays open after its answer (read %d bytes, %v)", n, err)
	}
}
