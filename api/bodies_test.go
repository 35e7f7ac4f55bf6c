package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
)

// The request bodies read at once are bounded by MaxBodyBytesInFlight:
// fasthttp allocates a body's whole Content-Length when it reads the
// header, so clients sending headers and then their bodies slowly could
// otherwise make every connection hold MaxBodyBytes. A body the budget
// cannot hold is not read and its request is answered 503 overloaded; a
// body is given back to the budget once read, and when it is cut short or
// too slow; a small body takes nothing from it.
func TestBodiesBeyondTheirBudgetAreRefusedUnread(t *testing.T) {
	const size = 200 << 10
	e := newEnv(t, func(c *api.Config) {
		c.MaxBodyBytes, c.MaxImportBytes, c.MaxBodyBytesInFlight = 256<<10, 256<<10, 2*size+size/2
		c.ReadTimeout = 3 * time.Second
	})
	addr := strings.TrimPrefix(e.base, "http://")
	body := `{"items":["slow"]` + strings.Repeat(" ", size-len(`{"items":["slow"]}`)) + `}`
	start := func(user string) (net.Conn, *bufio.Reader) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST /v1/namespaces/default/users/%s/seen HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			user, addr, len(body), body[:1<<10])
		return conn, bufio.NewReader(conn)
	}
	reserved := func(want int) { t.Helper(); e.waitReserved(t, want) }
	answer := func(br *bufio.Reader, conn net.Conn) (*http.Response, []byte) {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		return resp, readAll(t, resp)
	}

	a, aBr := start("a")
	b, _ := start("b")
	reserved(2 * size)
	c, cBr := start("c") // the budget holds two such bodies
	resp, got := answer(cBr, c)
	p := wantProblem(t, resp.StatusCode, resp.Header, got, 503, "overloaded")
	if resp.Header.Get("Retry-After") == "" || !resp.Close {
		t.Fatalf("refused without Retry-After (%q) or with its connection kept open (%v)", resp.Header.Get("Retry-After"), !resp.Close)
	}
	if !strings.Contains(p.Detail, "bytes of request bodies") {
		t.Fatalf("detail %q", p.Detail)
	}
	// A small body goes through meanwhile, and so does one in chunks,
	// whose buffer grows with what has come.
	if status, _, b := e.raw("POST", userPath("default", "small", "/seen"), "application/json", []byte(`{"items":["x"]}`)); status != 200 {
		t.Fatalf("a small body while the budget is full: %d %s", status, truncate(b))
	}
	chunked, chunkedBr := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST /v1/namespaces/default/users/chunked/seen HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n",
			addr, 64<<10, body[:64<<10-1]+"}")
		return conn, bufio.NewReader(conn)
	}()
	if resp, got := answer(chunkedBr, chunked); resp.StatusCode != 200 {
		t.Fatalf("a body in chunks while the budget is full: %d %s", resp.StatusCode, truncate(got))
	}

	// a's body comes whole: it is served and gives its share back.
	io.WriteString(a, body[1<<10:])
	if resp, got := answer(aBr, a); resp.StatusCode != 200 {
		t.Fatalf("a: %d %s", resp.StatusCode, truncate(got))
	}
	reserved(size)
	d, dBr := start("d")
	io.WriteString(d, body[1<<10:])
	if resp, got := answer(dBr, d); resp.StatusCode != 200 {
		t.Fatalf("d: %d %s", resp.StatusCode, truncate(got))
	}
	// b is cut short, and e sends too slowly: both give their share back.
	b.Close()
	reserved(0)
	slow, slowBr := start("e")
	reserved(size)
	resp, got = answer(slowBr, slow)
	wantProblem(t, resp.StatusCode, resp.Header, got, 408, "request-timeout")
	reserved(0)
	for _, user := range []string{"b", "c", "e"} {
		code, h, b := e.raw("GET", userPath("default", user, ""), "", nil)
		wantProblem(t, code, h, b, 404, "user-not-found")
	}
}

// A request of a method fiber does not know (a made-up one, or a known
// one spelt in lower case: methods are case-sensitive) is answered 405 as
// problem+json, like a method its route does not take, without its body
// being read; fiber answered it with a text/plain 400 after reading it.
func TestUnknownMethodIsAProblem(t *testing.T) {
	e := newEnv(t)
	addr := strings.TrimPrefix(e.base, "http://")
	for _, method := range []string{"FOO", "get", "PROPFIND"} {
		t.Run(method, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// A body announced and never sent: the answer does not wait for it.
			fmt.Fprintf(conn, "%s /v1/stats HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n", method, addr)
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			wantProblem(t, resp.StatusCode, resp.Header, readAll(t, resp), 405, "method-not-allowed")
			if !resp.Close {
				t.Fatalf("the connection is kept open with a body unread")
			}
		})
	}
}

// A request that expects "100 Continue" on a connection kept open longer
// than the write timeout since its last answer is answered: fasthttp
// wrote the "100 Continue" under the last answer's write deadline, long
// past, and closed the connection unanswered (its body's share of the
// budget was never given back either).
func TestContinueAfterAnIdleSpellIsAnswered(t *testing.T) {
	const size = 32 << 10
	e := newEnv(t, func(c *api.Config) {
		c.MaxBodyBytes, c.MaxImportBytes, c.MaxBodyBytesInFlight = 64<<10, 64<<10, 64<<10
		c.WriteTimeout = 500 * time.Millisecond
	})
	conn, addr := e.dial(t)
	br := bufio.NewReader(conn)
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	time.Sleep(time.Second) // past the write timeout
	body := `{"items":["late"]` + strings.Repeat(" ", size-len(`{"items":["late"]}`)) + `}`
	fmt.Fprintf(conn, "POST /v1/namespaces/default/users/u/seen HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n", addr, len(body))
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("no 100 Continue: %q %v (%d bytes of bodies reserved)", line, err, api.BodyBytesReserved(e.srv))
	}
	if blank, err := br.ReadString('\n'); err != nil || blank != "\r\n" {
		t.Fatalf("after the 100 Continue: %q %v", blank, err)
	}
	io.WriteString(conn, body)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, truncate(got))
	}
	if n := api.BodyBytesReserved(e.srv); n != 0 {
		t.Fatalf("%d bytes of bodies reserved after the answer", n)
	}
}

// An HTTP/1.0 request that expects "100 Continue" is served without one:
// HTTP/1.0 has no 1xx answers, and a server MUST ignore the expectation
// in such a request (RFC 9110, 10.1.1). Its client, sending the body with
// the header, would read the "HTTP/1.1 100 Continue" as its answer.
func TestAnHTTP10RequestIsNotAnswered100Continue(t *testing.T) {
	e := newEnv(t)
	conn, addr := e.dial(t)
	body := `{"items":["a"]}`
	fmt.Fprintf(conn, "POST /v1/namespaces/default/users/u/seen HTTP/1.0\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("an HTTP/1.0 request expecting 100-continue: %d %s, want 200", resp.StatusCode, truncate(got))
	}
}

// A body's share of the budget comes back even when its request meets
// neither the first middleware nor the error handler: a client that resets
// its connection after a header expecting "100 Continue" fails fasthttp's
// write of the "100 Continue", and fasthttp closes the connection without
// an answer. The share was given back only when another connection reused
// the request's pooled context, which a garbage collection empties: each
// such reset then kept its share for good, and once they filled the
// budget every body over 16KiB was refused 503.
func TestBodyOfAResetConnectionGivesItsShareBack(t *testing.T) {
	const size = 32 << 10
	const readTimeout = time.Second
	e := newEnv(t, func(c *api.Config) {
		c.MaxBodyBytes, c.MaxImportBytes, c.MaxBodyBytesInFlight = size, size, size // one body at a time
		c.ReadTimeout = readTimeout
	})
	addr := strings.TrimPrefix(e.base, "http://")
	// A reset that leaves the share taken: most of them do (the reset comes
	// before the "100 Continue" is written); one that comes after, the
	// body's read fails and the error handler gives the share back.
	leaked := false
	for try := 0; try < 50 && !leaked; try++ {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.(*net.TCPConn).SetLinger(0) // Close resets the connection
		fmt.Fprintf(conn, "POST /v1/namespaces/default/users/reset/seen HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
			"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n", addr, size)
		conn.Close()
		time.Sleep(200 * time.Millisecond) // the server meets the reset
		leaked = api.BodyBytesReserved(e.srv) == size
	}
	if !leaked {
		t.Fatal("no reset in 50 left its body's share taken: the case this test is about did not happen")
	}
	start := time.Now()
	// A collection empties fasthttp's pool of contexts: the one whose
	// header holds the share is not reused.
	runtime.GC()
	runtime.GC()
	time.Sleep(readTimeout - time.Since(start) + 100*time.Millisecond) // no body can be still being read
	body := `{"items":["x"]` + strings.Repeat(" ", size-len(`{"items":["x"]}`)) + `}`
	if status, _, b := e.raw("POST", userPath("default", "after", "/seen"), "application/json", []byte(body)); status != 200 {
		t.Fatalf("a body after a reset connection: %d %s (%d bytes of bodies reserved)", status, truncate(b), api.BodyBytesReserved(e.srv))
	}
	if n := api.BodyBytesReserved(e.srv); n != 0 {
		t.Fatalf("%d bytes of bodies reserved after the answers", n)
	}
}

// waitReserved waits until the bodies being read hold want bytes of the
// budget: a body of more than 16 KiB and a stated length holds its length
// from when its header is read until the body has come, so a request is
// known to be under way, its body being read.
func (e *env) waitReserved(t testing.TB, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for api.BodyBytesReserved(e.srv) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of bodies reserved, want %d", api.BodyBytesReserved(e.srv), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
