package api

import (
	"bufio"
	"bytes"
	"container/list"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"
)

// acceptRetrying is the listener Serve accepts from: when an accept fails
// for want of a resource that comes back as connections close (the
// process's file descriptors, ulimit -n, or the system's, or the kernel's
// buffers), it waits and accepts again, as net/http does. fasthttp takes
// any accept error that is not a timeout for the listener's end and stops
// serving, which ended the process: thousands of clients holding
// connections open would take the service down for every caller, where it
// should serve again once some close (the idle and read timeouts close
// them). Meanwhile new connections wait in the kernel's queue.
//
// It also holds the connections open to max (Config.MaxConnections): one
// past it is answered 503 overloaded and closed, so that a client opening
// connections without end takes neither the descriptors the store needs
// nor the memory of their buffers.
type acceptRetrying struct {
	net.Listener
	logger  *slog.Logger
	spell   atomic.Bool // accepts are failing
	failLog logPace     // the lines saying accepts fail

	max  int64
	open *atomic.Int64 // the connections being served (Server.connState)
	// refusals are the refusals under way (see refuse).
	refusals refusals
	fullLog  logPace // the lines saying the cap was reached
	// refused counts each connection refused past the cap with the
	// service's 503 answers (counters.countError), so that the errors
	// in /v1/stats and /metrics show the refusals; nil: not counted.
	refused func()
	// probe answers a health probe (GET or HEAD of /healthz or /readyz,
	// whose path it is given) on a connection past the cap, counting it as
	// its route counts it: the whole response, or nil if it cannot (see
	// Server.probe).
	probe func(head bool, path string) []byte
	// hsts is the Strict-Transport-Security these answers carry over
	// TLS, as the service's do (Server.everyAnswer), or "" for none.
	hsts string
}

// Waits between accepts that fail for want of a resource: doubling from
// the first to the last.
const (
	firstAcceptWait = 5 * time.Millisecond
	lastAcceptWait  = time.Second
	// acceptLogEvery spaces the lines that say accepts fail.
	acceptLogEvery = time.Minute
)

func (l *acceptRetrying) Accept() (net.Conn, error) {
	var wait time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil && l.max > 0 && l.open.Load() >= l.max {
			l.refuse(c)
			continue
		}
		if err == nil || !outOfResources(err) {
			if err == nil && l.spell.Swap(false) {
				l.logger.Info("seenapi: accepting connections again")
			}
			if err == nil {
				c = heard(c)
			}
			return c, err
		}
		l.spell.Store(true)
		if l.failLog.due(acceptLogEvery) {
			l.logger.Error("seenapi: cannot accept connections; new ones wait until some close (raise ulimit -n, or lower --idle-timeout)",
				"err", err)
		}
		wait = min(max(2*wait, firstAcceptWait), lastAcceptWait)
		time.Sleep(wait)
	}
}

// outOfResources reports whether an accept failed for want of file
// descriptors or kernel memory, which connections closing give back.
func outOfResources(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// refuse answers c, a connection past the cap, 503 overloaded and closes
// it, in a goroutine of its own (the answer may wait for a TLS handshake)
// with a second for all of it. A health probe is answered as the service
// would answer it: a liveness probe failed for want of a connection would
// have an orchestrator restart a service that is only busy, emptying its
// hot set. At most maxRefusing refusals are under way at once, each
// holding a descriptor. Past that, the one that has waited longest for its
// request line is closed unanswered to make room: a probe sends its
// request as soon as it connects, so clients that connect and send
// nothing (or too slowly) cannot keep the probes from being answered, as
// they did when the newest connection was the one closed. Only when every
// refusal under way has its request is c closed unanswered.
func (l *acceptRetrying) refuse(c net.Conn) {
	if l.fullLog.due(acceptLogEvery) {
		l.logger.Warn("seenapi: connections refused: as many are open as --max-connections allows", "max_connections", l.max)
	}
	r, ok := l.refusals.start(c)
	if !ok {
		l.countRefused()
		c.Close()
		return
	}
	go func() {
		defer l.refusals.end(r)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		head, path, probe := l.probeRequest(c)
		if !l.refusals.read(r) {
			// Closed to make room for a newer one (start).
			l.countRefused()
			return
		}
		// Asked only once the probe is to be answered: l.probe counts
		// the answer as its route's.
		var answer []byte
		if probe {
			answer = l.probe(head, path)
		}
		if answer == nil {
			answer = connectionsFull
			l.countRefused()
		}
		// The headers the service's own answers carry besides (fasthttp's
		// and Server.everyAnswer's): Date, which an origin server with a
		// clock sends (RFC 9110, 6.6.1), and Strict-Transport-Security.
		lines := "Date: " + time.Now().UTC().Format(http.TimeFormat)
		if _, ok := c.(*tls.Conn); ok && l.hsts != "" {
			lines += "\r\n" + fiber.HeaderStrictTransportSecurity + ": " + l.hsts
		}
		answer = withHeader(answer, lines)
		if _, err := c.Write(answer); err != nil {
			return
		}
		// Read what the client sent until it closes, so that closing with
		// its request unread does not reset the connection before the
		// client has read the answer.
		if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
		}
	}()
}

// maxRefusing bounds the refusals under way at once (see refuse).
const maxRefusing = 64

// refusals are the refusals under way of connections past the cap, and
// those of them still waiting for their request line, oldest first.
type refusals struct {
	mu      sync.Mutex
	n       int       // under way, at most maxRefusing
	waiting list.List // of *refusal
}

// refusal is one connection being refused.
type refusal struct {
	c       net.Conn
	at      *list.Element // in refusals.waiting while it waits for its request line
	evicted bool          // closed by start to make room; no longer counted in n
}

// start takes a place for a refusal of c, making room if need be by
// closing the refusal that has waited longest for its request line. It
// reports false when every place is taken by a refusal that has its
// request.
func (rs *refusals) start(c net.Conn) (*refusal, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.n >= maxRefusing {
		oldest := rs.waiting.Front()
		if oldest == nil {
			return nil, false
		}
		old := rs.waiting.Remove(oldest).(*refusal)
		old.at, old.evicted = nil, true
		rs.n--
		// Its read fails at once, and its goroutine ends; the descriptor
		// is given back here.
		old.c.Close()
	}
	r := &refusal{c: c}
	r.at = rs.waiting.PushBack(r)
	rs.n++
	return r, true
}

// read records that r has its request line (or gave up waiting for it),
// and reports whether r may still answer: false once start closed it.
func (rs *refusals) read(r *refusal) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r.at != nil {
		rs.waiting.Remove(r.at)
		r.at = nil
	}
	return !r.evicted
}

// end gives back r's place.
func (rs *refusals) end(r *refusal) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r.at != nil {
		rs.waiting.Remove(r.at)
		r.at = nil
	}
	if !r.evicted {
		rs.n--
	}
}

// countRefused counts a connection refused past the cap.
func (l *acceptRetrying) countRefused() {
	if l.refused != nil {
		l.refused()
	}
}

// probeRequest reads the request line of c, a connection past the cap, and
// reports whether it is a health probe that l.probe answers (GET or HEAD,
// when head, of path), false for any other request (or none within the
// deadline).
func (l *acceptRetrying) probeRequest(c net.Conn) (head bool, path string, ok bool) {
	if l.probe == nil {
		return false, "", false
	}
	line, err := bufio.NewReaderSize(c, probeLineBytes).ReadSlice('\n')
	if err != nil {
		return false, "", false
	}
	method, rest, _ := bytes.Cut(line, []byte(" "))
	target, _, _ := bytes.Cut(rest, []byte(" "))
	p, _, _ := bytes.Cut(target, []byte("?"))
	head = string(method) == "HEAD"
	if !head && string(method) != "GET" || string(p) != "/healthz" && string(p) != "/readyz" {
		return false, "", false
	}
	return head, string(p), true
}

// probeLineBytes is the longest request line probeAnswer reads: a probe's
// is short.
const probeLineBytes = 512

// connectionsFull is the answer to a connection past the cap.
var connectionsFull = func() []byte {
	body, err := encode(&Problem{Type: ProblemBase + pOverloaded.slug, Title: pOverloaded.title, Status: pOverloaded.status,
		Detail: "the service has as many connections open as it allows (--max-connections); retry, or reuse a connection"})
	if err != nil {
		panic(err)
	}
	return append([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nRetry-After: 1\r\n"+
		RawAnswerHeaders+"Connection: close\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"), body...)
}()

// withHeader returns a copy of answer, a whole HTTP answer, with the
// header lines (CRLF between them) added after its status line.
func withHeader(answer []byte, lines string) []byte {
	status, rest, _ := bytes.Cut(answer, []byte("\r\n"))
	return slices.Concat(status, []byte("\r\n"+lines+"\r\n"), rest)
}

// logPace spaces the lines of one kind: due says whether one may be
// logged now, at most one every period, whichever goroutine asks.
type logPace struct{ last atomic.Int64 } // unix ns of the last line

func (p *logPace) due(every time.Duration) bool {
	now, last := time.Now().UnixNano(), p.last.Load()
	return now-last >= int64(every) && p.last.CompareAndSwap(last, now)
}

// heardConn is a connection being served that notes whether its client
// has sent a byte: one that sent none within the read timeout, opened
// ahead of use by a client's pool or a balancer, is closed without the
// 408 fasthttp answers, which such a client could read as the answer to
// the request it sends on it next (see Server.errorHandler). Only the
// connection's serving goroutine reads it.
//
// It also closes, when told to (lingerOnClose), the way net/http does a
// connection whose request body was not read: a refusal from the header
// (a body over its limit, or past the bytes in flight) closes the
// connection while the client may still be sending, and a socket closed
// with bytes unread is reset, which can take the refusal's answer from
// the client before it reads it ("connection reset by peer" instead of
// the 413). Close then ends the server's side of the stream and reads
// what still comes, for up to lingerTime or lingerBytes, before closing.
type heardConn struct {
	net.Conn
	heard  bool
	linger atomic.Bool
}

// The most a closing connection reads of what its client still sends.
const (
	lingerTime  = time.Second
	lingerBytes = 16 << 20
)

func (c *heardConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.heard = true
	}
	return n, err
}

// NetConn returns the connection c wraps, as tls.Conn's does (see
// watchSocket).
func (c *heardConn) NetConn() net.Conn { return c.Conn }

func (c *heardConn) heardNothing() bool { return !c.heard }

func (c *heardConn) lingerOnClose(on bool) { c.linger.Store(on) }

func (c *heardConn) Close() error {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !c.linger.Swap(false) || !ok || cw.CloseWrite() != nil {
		return c.Conn.Close()
	}
	go func() {
		_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTime))
		_, _ = io.CopyN(io.Discard, c.Conn, lingerBytes)
		_ = c.Conn.Close()
	}()
	return nil
}

// heardTLSConn is a heardConn over TLS: fasthttp tells a TLS connection by
// these two methods (RequestCtx.IsTLS).
type heardTLSConn struct {
	*heardConn
	tls *tls.Conn
}

func (c heardTLSConn) Handshake() error                     { return c.tls.Handshake() }
func (c heardTLSConn) ConnectionState() tls.ConnectionState { return c.tls.ConnectionState() }

func heard(c net.Conn) net.Conn {
	h := &heardConn{Conn: c}
	if tc, ok := c.(*tls.Conn); ok {
		return heardTLSConn{heardConn: h, tls: tc}
	}
	return h
}

// lingerOnClose sets whether the server's close of conn reads what its
// client still sends for a while (see heardConn).
func lingerOnClose(conn net.Conn, on bool) {
	if h, ok := conn.(interface{ lingerOnClose(bool) }); ok {
		h.lingerOnClose(on)
	}
}

// heardNothing reports whether conn's client has sent no byte yet.
func heardNothing(conn net.Conn) bool {
	h, ok := conn.(interface{ heardNothing() bool })
	return ok && h.heardNothing()
}
