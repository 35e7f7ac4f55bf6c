package api

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/gofiber/fiber/v2/middleware/filesystem"
	fiberrecover "github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"

	"github.com/seenapi/seenapi/web"
)

// gcMetrics adds the collector's own figures from runtime/metrics to the
// Go collector's defaults: with millions of users hot, every collection
// marks all of them (about a second of CPU at a million), so its cycles
// (go_gc_cycles_total_gc_cycles_total), its CPU
// (go_cpu_classes_gc_total_cpu_seconds_total) and the allocation rate that
// paces it (go_gc_heap_allocs_bytes_total) are what explain a latency tail.
var gcMetrics = []collectors.GoRuntimeMetricsRule{
	collectors.MetricsGC, {Matcher: regexp.MustCompile(`^/cpu/classes/gc/`)}}

// Server is the REST API over a hot set. Its methods are safe for
// concurrent use.
type Server struct {
	app      *fiber.App
	hot      HotSet
	cfg      Config
	keys     atomic.Pointer[keyring] // swapped whole by SetKeys
	rate     *rateLimiter            // the buckets of the callers limited
	guesses  *keyGuesses             // the buckets of the addresses whose keys were refused
	replays  *replays                // answers kept for Idempotency-Key retries
	k        counters
	started  time.Time
	inFlight atomic.Int64
	bodies   *bodyBudget // the bodies being read (Config.MaxBodyBytesInFlight)
	draining atomic.Bool
	// delivering counts the backups whose last bytes the kernel still
	// holds for a client (awaitDelivery): Shutdown waits for them, since
	// fiber counts such a connection idle and closes it.
	delivering atomic.Int64
	// backingUp is set while a backup streams: one at a time (see backup).
	backingUp atomic.Bool
	// failLog paces the log lines of failed requests (errorHandler) and of
	// the answers degraded by on_error open (call).
	failLog lineRate
	// conns counts the client connections open (connState).
	conns atomic.Int64
	// hsts is the Strict-Transport-Security of every answer over TLS
	// (Config.HSTSMaxAge), or "" for none.
	hsts string
	// allow is the Allow of "OPTIONS *" (serverOptions).
	allow string
	// keyedPaths are the paths of the routes that take a key, split at
	// "/" ({param} for a parameter), for keyedPath.
	keyedPaths [][]string
	// logStop stops the answers log's writer (OpenAnswerLog).
	logStop func()
}

// New returns the API over hot, configured by cfg (zero fields take their
// defaults). It fails with ErrBadConfig for a config that cannot serve.
func New(hot HotSet, cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{hot: hot, cfg: cfg, started: cfg.Now(),
		k: counters{duration: newDurationHistogram()}}
	s.k.lastReloadOK.Store(s.started.UnixNano())
	s.keys.Store(newKeyring(cfg.Keys, serverRate(cfg)))
	if cfg.HSTSMaxAge > 0 {
		s.hsts = "max-age=" + strconv.FormatInt(int64(cfg.HSTSMaxAge/time.Second), 10)
	}
	s.rate = newRateLimiter(cfg.Now)
	s.guesses = newKeyGuesses(cfg.Now)
	s.replays = newReplays(cfg.IdempotencyBytes, cfg.IdempotencyTTL, cfg.Now)
	// The journal's answers age as the others do, across restarts too: in
	// a time that never goes back (a start reads the log's back first).
	if hot != nil { // none: a server for its spec and problems alone
		hot.SetReplyClock(s.replays.life)
	}
	s.bodies = newBodyBudget(cfg.MaxBodyBytesInFlight, cfg.ReadTimeout)
	s.app = fiber.New(fiber.Config{
		AppName:               "seenapi",
		DisableStartupMessage: true,
		CaseSensitive:         true, // user ids and items are case-sensitive
		// .../users/u/ is not user u: a client that joins an id ending in
		// "/" without escaping it gets 404, not another user's data.
		StrictRouting: true,
		BodyLimit:     max(cfg.MaxBodyBytes, cfg.MaxImportBytes),
		ReadTimeout:   cfg.ReadTimeout,
		WriteTimeout:  cfg.WriteTimeout,
		IdleTimeout:   cfg.IdleTimeout,
		// The service takes no forms: a multipart/form-data body is read
		// as any other, not parsed (before the key is checked, its files
		// past 16 MiB written to temporary files) by fasthttp.
		DisablePreParseMultipartForm: true,
		JSONEncoder:                  encode,
		JSONDecoder:                  decodeStrict,
		ErrorHandler:                 s.errorHandler,
		// Prefork stays off: one process owns the store and the hot set.
	})
	// The body's limit is set for each request from its header, before
	// fasthttp reads the body: one limit for the whole app would have to be
	// the import's (64 MiB by default), read in full for any route, before
	// the key or even the route was checked.
	// fasthttp's errors for a request it cannot parse would quote the
	// bytes it read, which the problem's detail passes on: the request's
	// own Authorization header, and those of the requests pipelined after
	// it on the connection (another client's, behind a proxy that shares
	// connections).
	s.app.Server().SecureErrorLogMessage = true
	s.app.Server().ErrorHandler = s.unreadable
	s.app.Server().ConnState = s.connState
	s.app.Server().HeaderReceived = func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
		// What the connection's last request held, should no answer have
		// given it back.
		s.bodies.release(h)
		if !h.IsHTTP11() || framedBodyless(h) {
			// HTTP/1.0 has no 1xx answers: a server MUST ignore its
			// "Expect: 100-continue" (RFC 9110, 10.1.1), where fasthttp
			// would answer "100 Continue", which its client reads as the
			// answer to its request, and wait for the body. Nor has a
			// request whose framing says it has no body any to wait for
			// (a server may then omit "100 Continue", 10.1.1): it is
			// answered as without the expectation, its connection kept,
			// where the checks below took it for a body refused for its
			// type (a GET has none) or its key, and closed the
			// connection, the requests pipelined after it unanswered.
			h.Del(fiber.HeaderExpect)
		}
		if s.draining.Load() {
			// Each answer closes its connection from the drain on: a
			// client on a kept-alive one dials again, while the listener
			// still takes it (to another instance once /readyz has taken
			// this one out), instead of sending its next request on a
			// connection that the shutdown closes unanswered.
			h.SetConnectionClose()
		}
		if connect := h.IsConnect(); connect || !knownMethod(h.Method()) {
			// fiber answers a method it does not know with a text/plain
			// 400 before any handler runs, and after reading its body.
			// As TRACE, which no route takes, it is answered 405 as
			// problem+json like any other method a route does not take;
			// its body is not read, and the connection is closed.
			// CONNECT, whose target is no path, is answered 405 by the
			// first handler (noTunnel); what its client sends after the
			// head is for the tunnel it asked for, not a request.
			if !connect {
				h.SetMethod(fiber.MethodTrace)
			}
			h.SetContentLength(0)
			h.Del(fiber.HeaderExpect)
			h.SetConnectionClose()
			return fasthttp.RequestConfig{MaxRequestBodySize: s.cfg.MaxBodyBytes}
		}
		if p, _ := requestProblem(h); p != "" {
			// Read no body and close the connection after the answer
			// (400, see the first handler): the bytes that follow may be
			// this body or another request, and which one a proxy in
			// front took them for is unknown.
			h.SetContentLength(0)
			h.Del(fiber.HeaderExpect)
			h.SetConnectionClose()
			return fasthttp.RequestConfig{MaxRequestBodySize: s.cfg.MaxBodyBytes}
		}
		limit := s.bodyLimit(h)
		if h.ContentLength() <= limit && s.readsNoBody(h) {
			h.SetContentLength(0)
			h.Del(fiber.HeaderExpect)
			h.SetConnectionClose()
			return fasthttp.RequestConfig{MaxRequestBodySize: limit}
		}
		if expectsContinue(h) && typeRefused(h, s.importRequest(h)) {
			// Its route refuses the body for its type (415) whatever it
			// holds: the client, waiting for "100 Continue" before it
			// sends the body, gets the 415 instead, and sends none. The
			// connection is closed after it, as the client may send the
			// body all the same (RFC 9110, 10.1.1). A route that reads
			// no body answers as it would have.
			h.SetContentLength(0)
			h.Del(fiber.HeaderExpect)
			h.SetConnectionClose()
			return fasthttp.RequestConfig{MaxRequestBodySize: limit}
		}
		if h.ContentLength() > limit && len(h.Peek(fiber.HeaderExpect)) > 0 {
			// fasthttp would answer "100 Continue" and let the client send
			// the body before refusing it: without the expectation it
			// refuses it from its length, at once.
			h.Del(fiber.HeaderExpect)
		}
		// A body in chunks (length -1) takes nothing: fasthttp grows its
		// buffer with the chunks as they come.
		if n := h.ContentLength(); n > budgetFreeBytes && n <= limit {
			if !s.bodies.take(h, n) {
				// The first middleware answers 503 overloaded.
				h.SetContentLength(0)
				h.Del(fiber.HeaderExpect)
				h.SetConnectionClose()
			}
		}
		return fasthttp.RequestConfig{MaxRequestBodySize: limit}
	}
	s.routes()
	return s, nil
}

// expectsContinue reports whether the request of header h waits for
// "100 Continue" before it sends its body (RFC 9110, 10.1.1), as fasthttp
// reads it (Request.MayContinue).
func expectsContinue(h *fasthttp.RequestHeader) bool {
	return bytes.EqualFold(h.Peek(fiber.HeaderExpect), []byte("100-continue"))
}

// framedBodyless reports whether the framing of the request of header h says it
// has no body: a Content-Length of 0, or neither Content-Length nor
// Transfer-Encoding (RFC 9112, 6.3).
func framedBodyless(h *fasthttp.RequestHeader) bool {
	n := h.ContentLength()
	return n == 0 || n == -2
}

// bodyLimit is the largest body a request may send: --max-import-bytes
// for an import (PUT /v1/namespaces/{ns}/users/{user}/export),
// --max-body-bytes for the rest.
func (s *Server) bodyLimit(h *fasthttp.RequestHeader) int {
	if s.importRequest(h) {
		return s.cfg.MaxImportBytes
	}
	return s.cfg.MaxBodyBytes
}

// readsNoBody reports whether the body of the request of header h is left
// unread: on a service with keys, a body past keylessBodyBytes (or in
// chunks) of a request whose key will be refused (none, unknown, or for an
// import one that may not import there). The key is checked only once the
// body is read, and fasthttp allocates a body's whole
// Content-Length as soon as the header is read: a header of a hundred
// bytes without a key held a megabyte of the server's memory (64 MiB for
// an import) until the read timeout, on each of as many connections as a
// client cared to open. The route then answers the key's problem, and the
// connection is closed.
//
// Nor is the body of any size of such a request that expects "100
// Continue": its client waits for it before sending the body, and gets
// the key's problem instead.
func (s *Server) readsNoBody(h *fasthttp.RequestHeader) bool {
	n := h.ContentLength()
	return (n > keylessBodyBytes || n == -1 || expectsContinue(h)) && s.keyRefused(h, s.importRequest(h)) != nil
}

// keylessBodyBytes is the largest body read of a request whose key will
// be refused (see readsNoBody).
const keylessBodyBytes = 4 << 10

// importRequest reports whether h is an import's: the one request that
// takes --max-import-bytes.
func (s *Server) importRequest(h *fasthttp.RequestHeader) bool {
	uri := h.RequestURI()
	if i := bytes.IndexByte(uri, '?'); i >= 0 {
		uri = uri[:i]
	}
	return string(h.Method()) == fiber.MethodPut && importPath.Match(uri)
}

// keyRefused is the problem a request with header h will meet for its
// key, as far as the header tells: 401 without a known key, and for an
// import (imp) 403 for a key that is not admin or not of the path's
// namespace. It is nil on an open service, and for a key the route may
// still refuse for its role once read. The routes that take no key (the
// probes, the document, the dashboard's files) take no body either: theirs
// is not read.
func (s *Server) keyRefused(h *fasthttp.RequestHeader, imp bool) error {
	kr := s.keys.Load()
	if kr.open() {
		return nil
	}
	m, err := bearerKey(string(h.Peek(fiber.HeaderAuthorization)), kr)
	if err != nil || !imp {
		return err
	}
	if m.role < RoleAdmin {
		return roleError(RoleAdmin, m.role)
	}
	if m.scope != nil {
		if sub := importPath.FindSubmatch(h.RequestURI()); sub != nil && !m.allows(string(sub[1])) {
			return s.scopeError(*m, string(sub[1]))
		}
	}
	return nil
}

// headerProblem says why the header block raw (a request's, without its
// request line; http11 unless the request is HTTP/1.0) is refused, as the
// detail of a 400, with the header to name in the problem (Host), or ""
// when it is not. One pass over the lines serves
// every check, at one byte's cost for most lines: this runs on every
// request.
//
// The length of its body is ambiguous: Transfer-Encoding given with
// Content-Length, or more than once, or other than chunked, or in an
// HTTP/1.0 request, which has no chunked coding; Content-Length given twice
// with different values; or a bare CR, which ends a line for some proxies,
// while fasthttp keeps it in the header's value (a Transfer-Encoding after
// one is a header of its own to them, and none to the service). fasthttp
// would take the chunked coding over Content-Length (and any coding for
// chunked) and keep the connection (two lengths, and a chunk's size line
// not ended by CRLF, it refuses itself, closing the connection); a proxy
// in front that read the same bytes otherwise would pass on what it took
// for a body as a request of its own (request smuggling). RFC 9112, 2.2,
// 6.1 and 6.3: such a request is answered 400 and its connection closed.
//
// Or its Host is missing from an HTTP/1.1 request, or given twice (in any
// version), or is empty or no host (validHost): a proxy in front may have
// routed or checked another host than the one the service reads (the
// loopback-name check of an open service reads it). RFC 9112, 3.2, and
// RFC 9110, 7.2: such a request is answered 400. fasthttp refuses most of
// these itself before the service sees the request, in words of its own;
// unreadable answers them in these (hostReadErrors). An HTTP/1.0 request
// may leave Host out (its Host is then empty, which the loopback-name
// check refuses).
//
// Or a header's name is no token (RFC 9110, 5.1: a space, as in
// "Bad Key: 1", or any other byte outside tchar), or a line continues the
// one before it (obs-fold: it begins with a space or tab, RFC 9112, 5.2):
// fasthttp takes "Bad Key" for a header of that name and joins a folded
// line to the value before it, where a proxy in front may have dropped
// either line, or taken it for a header of its own ("Transfer-Encoding
// : chunked" or " Transfer-Encoding: chunked" read as one, by a proxy or
// by the service, is request smuggling). RFC 9112, 5.1 and 5.2: such a
// request is answered 400. These name the header at fault.
func headerProblem(raw []byte, http11 bool) (detail, header string) {
	var length, coding, badHost, last []byte
	lengths, codings, hosts, emptyHost := 0, 0, 0, false
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if i := bytes.IndexByte(line, '\r'); i >= 0 && i < len(line)-1 {
			return "the length of the request's body is ambiguous: a header holds a bare CR (a CR not followed by LF)", ""
		}
		if len(line) == 0 || line[0] == '\r' {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last == nil {
				return "the header block begins with a space or tab, which would continue a header before it (obs-fold, RFC 9112, 5.2)", ""
			}
			return "a line of header " + strconv.Quote(string(last)) + " continues on the next, which begins with a space or tab " +
				"(obs-fold); send each header on one line (RFC 9112, 5.2)", string(last)
		}
		name, value, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue // fasthttp refuses a line without a colon itself
		}
		for _, c := range name {
			if !tchar[c] {
				return "the header name " + strconv.Quote(string(name)) + " holds " + strconv.QuoteRune(rune(c)) +
					", which a header name may not (a token: letters, digits and !#$%&'*+-.^_`|~; RFC 9110, 5.1)", string(name)
			}
		}
		last = name
		switch line[0] | 0x20 {
		case 'c', 't', 'h':
		default:
			continue // the common case
		}
		switch {
		case bytes.EqualFold(name, []byte(fiber.HeaderHost)):
			hosts++
			if value = bytes.Trim(value, " \t\r"); len(value) == 0 {
				emptyHost = true
			} else if badHost == nil && !validHost(value) {
				badHost = value
			}
		case bytes.EqualFold(name, []byte(fiber.HeaderContentLength)):
			value = bytes.TrimSpace(value)
			if lengths > 0 && !bytes.Equal(value, length) {
				return "the length of the request's body is ambiguous: Content-Length is given twice, with different values", ""
			}
			length, lengths = value, lengths+1
		case bytes.EqualFold(name, []byte(fiber.HeaderTransferEncoding)):
			coding, codings = bytes.TrimSpace(value), codings+1
		}
	}
	const ambiguous = "the length of the request's body is ambiguous: "
	switch {
	case hosts > 1:
		return hostTwice, fiber.HeaderHost
	case badHost != nil:
		return "Host " + strconv.Quote(string(badHost)) + notAHost, fiber.HeaderHost
	case emptyHost || hosts == 0 && http11:
		return hostMissing, fiber.HeaderHost
	case codings == 0:
		return "", ""
	case !http11:
		return ambiguous + "Transfer-Encoding is given in an HTTP/1.0 request, which has no chunked coding", ""
	case codings > 1:
		return ambiguous + "Transfer-Encoding is given more than once", ""
	case !bytes.EqualFold(coding, []byte("chunked")):
		return ambiguous + "Transfer-Encoding is " + strconv.Quote(string(coding)) + "; the service takes chunked only", ""
	case lengths > 0:
		return ambiguous + "Transfer-Encoding and Content-Length are both given", ""
	}
	return "", ""
}

// notAHost says, after the value quoted, why a Host or the authority of a
// request's target is refused (validHost).
const notAHost = " is not a host: a name, an IPv4 address or an IPv6 address in brackets (without a zone), " +
	"optionally with a colon and a port; an escape (%XX) stands for a byte beyond ASCII only (RFC 9110, 7.2)"

// requestProblem is what the service refuses in the head of a request
// (h): headerProblem's finding in its header, else targetProblem's in its
// target.
func requestProblem(h *fasthttp.RequestHeader) (detail, header string) {
	if p, header := headerProblem(h.RawHeaders(), h.IsHTTP11()); p != "" {
		return p, header
	}
	return targetProblem(h.RequestURI()), ""
}

// targetProblem says why target, a request's target, is refused, as the
// detail of a 400, or "" when it is not. A target of absolute form
// ("http://host:port/path", RFC 9112, 3.2.2, which a client sends to a
// proxy, and a server takes too) names the host the request is for, and
// Host is then ignored. Its scheme is http or https, on either port: a
// proxy in front that ends TLS may pass an https target on as it is, and
// a client may send an http one over TLS (curl -x https://...). Any other
// (ftp://) names a resource no HTTP server has: fasthttp would serve its
// path as if it were http's. 400, not 421 (RFC 9110, 15.5.20), which has
// a client retry on another connection: none would answer it. Its
// authority is held to what Host is (validHost), and holds no user
// information ("user:password@", which RFC 9110, 4.2.4 has a recipient
// treat as an error; the detail does not quote it back). fasthttp parses the authority after this check: it
// refuses some that are no host in words of its own, which name neither
// the target nor what is wrong with it ("invalid url escape"), and takes
// others (an IPv6 zone, "a<b", none at all, or user information, which it
// drops), where the loopback-name check of an open service reads the host.
// It refuses others in the request line, before the service sees the
// request (no scheme before "://", a scheme not of its grammar, "*" of a
// method but OPTIONS, a target of no form, a control byte): unreadable
// answers them with this detail too, or badTargetForm (refusedTarget).
func targetProblem(target []byte) string {
	if len(target) == 0 || target[0] == '/' {
		return "" // origin form, the common case
	}
	scheme, rest, ok := bytes.Cut(target, []byte("://"))
	switch {
	case !ok:
		return "" // "*" of OPTIONS, or CONNECT's host:port, which no route takes; fasthttp refuses other forms
	case len(scheme) == 0:
		return "the request target has no scheme before \"://\"; an absolute-form target is an http or https URI " +
			"(RFC 9112, 3.2.2)"
	case !bytes.EqualFold(scheme, []byte("http")) && !bytes.EqualFold(scheme, []byte("https")):
		return "the request target's scheme " + strconv.Quote(string(scheme)) + " is not http or https, " +
			"the only ones the service serves (RFC 9112, 3.2.2)"
	}
	authority := rest
	if i := bytes.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	switch {
	case bytes.IndexByte(authority, '@') >= 0:
		return "the request target's authority holds user information (before an \"@\"), which an http or https URI may not " +
			"hold (RFC 9110, 4.2.4)"
	case len(authority) == 0:
		return "the request target has no host, which an http or https URI always has (RFC 9110, 4.2.1)"
	case !validHost(authority):
		return "the request target's authority " + strconv.Quote(string(authority)) + notAHost
	}
	return ""
}

// The details of a request refused for its Host, which fasthttp's own
// refusals of the same requests are answered with too (hostReadErrors).
const (
	hostTwice = "Host is given more than once; a request names one host (RFC 9112, 3.2)"
	// An empty Host is what a client sends for a target URI without an
	// authority (RFC 9112, 3.2); the service's are http or https URIs,
	// which always have a host (RFC 9110, 4.2.1), and RFC 9112, 3.3 lets
	// a server refuse a request whose Host leaves it empty.
	hostMissing = "a request must give Host, with the host it is sent to, which an http or https URI always has " +
		"(RFC 9112, 3.2 and 3.3; RFC 9110, 4.2.1); only an HTTP/1.0 request may leave Host out"
)

// hostReadErrors maps the words of each error fasthttp refuses a request's
// header with for its Host (none in HTTP/1.1, or empty; two Host lines) to
// the detail the service's own check gives the same request. fasthttp
// refuses these before the service sees the request, and keeps nothing of
// the header it refused: the error is all that is left, and it is told by
// what the error wraps. The words are fasthttp's own, learnt here by
// reading such headers with it: they quote none of the request, and a
// version of fasthttp that words them otherwise, or refuses other Hosts,
// is learnt as it is (one that lets them through leaves them to
// headerProblem).
var hostReadErrors = func() map[string]string {
	m := map[string]string{}
	for header, detail := range map[string]string{
		"GET / HTTP/1.1\r\n\r\n":                       hostMissing,
		"GET / HTTP/1.1\r\nHost:\r\n\r\n":              hostMissing,
		"GET / HTTP/1.0\r\nHost:\r\n\r\n":              hostMissing,
		"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n": hostTwice,
		"GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n": hostTwice,
	} {
		var h fasthttp.RequestHeader
		if in := errors.Unwrap(h.Read(bufio.NewReader(strings.NewReader(header)))); in != nil {
			m[in.Error()] = detail
		}
	}
	return m
}()

// badTargetForm is the detail of a target fasthttp refuses in the request
// line that targetProblem finds nothing wrong with (refusedTarget).
const badTargetForm = "the request target is none of the forms the service takes: a path beginning with \"/\", " +
	"an http or https URI, or \"*\" of OPTIONS, without control bytes (RFC 9112, 3.2)"

// targetReadWords are the words fasthttp refuses a request line with for
// its target, up to the target it quotes after them (as %q): learnt here,
// as hostReadErrors are, by reading such a line with it, and "" should a
// version of fasthttp not refuse it, or word it otherwise.
var targetReadWords = func() string {
	const target = "no-form"
	var h fasthttp.RequestHeader
	in := errors.Unwrap(h.Read(bufio.NewReader(strings.NewReader("GET " + target + " HTTP/1.1\r\nHost: a\r\n\r\n"))))
	if in == nil {
		return ""
	}
	words, _, ok := strings.Cut(in.Error(), strconv.Quote(target))
	if !ok {
		return ""
	}
	return words
}()

// refusedTarget returns the target of a request line fasthttp refused for
// it with err (in targetReadWords), or false: fasthttp keeps nothing of
// such a request but its error, which quotes the target.
func refusedTarget(err error) ([]byte, bool) {
	in := errors.Unwrap(err)
	if in == nil || targetReadWords == "" {
		return nil, false
	}
	rest, ok := strings.CutPrefix(in.Error(), targetReadWords)
	if !ok {
		return nil, false
	}
	q, qerr := strconv.QuotedPrefix(rest)
	if qerr != nil {
		return nil, false
	}
	target, qerr := strconv.Unquote(q)
	return []byte(target), qerr == nil
}

// headerRefusal is the bad-request problem of a request refused for its
// head (requestProblem's detail p), naming the header at fault if any,
// without an instance; its connection is closed after the answer.
func headerRefusal(p, header string) *apiError {
	err := newError(pBadRequest, "%s; the connection is closed", p)
	err.unread = true
	if header != "" {
		err.fields = []FieldError{{Parameter: header, Detail: p}}
	}
	return err
}

// tchar holds the bytes a header's name may hold (RFC 9110, 5.6.2).
var tchar = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0
	}
	return t
}()

// validHost reports whether v, a Host header's value, is uri-host
// [":" port] (RFC 9110, 7.2; RFC 3986, 3.2.2): a registered name (letters,
// digits, -._~!$&'()*+,;= and %XX escapes; an IPv4 address is one too) or
// an IPv6 address in brackets, without a zone (validIPLiteral), then a
// colon and the port's digits, or neither. Stricter than RFC 3986 where
// fasthttp is (it refuses these itself, after the service's check): an
// escape stands for a byte beyond ASCII only (a name's UTF-8; an ASCII
// byte is sent as itself), and the IPvFuture form ("[v1.fe]") is no host,
// as RFC 3986, 3.2.2 has a server that knows no such version answer, and
// none is defined, and a port without a host (":8080") is no host either
// (an http URI's is never empty). An empty Host is for headerProblem to
// refuse.
func validHost(v []byte) bool {
	host, port := v, []byte(nil)
	if len(v) > 0 && v[0] == '[' {
		end := bytes.IndexByte(v, ']')
		if end < 0 || !validIPLiteral(v[1:end]) {
			return false
		}
		host, port = nil, v[end+1:]
		if len(port) > 0 {
			if port[0] != ':' {
				return false
			}
			port = port[1:]
		}
	} else if host, port, _ = bytes.Cut(v, []byte{':'}); len(host) == 0 {
		return false // a port of no host (":8080"): an http URI's host is never empty (RFC 9110, 4.2.1)
	}
	for i := 0; i < len(host); i++ {
		switch c := host[i]; {
		case c == '%' && i+2 < len(host) && escapesNonASCII(host[i+1], host[i+2]):
			i += 2
		case !hostByte(c):
			return false
		}
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// validIPLiteral reports whether b, what a Host holds in brackets, is an
// IPv6 address without a zone. A zone ("fe80::1%25eth0", RFC 6874) names
// an interface of the client's own host: RFC 6874, 4 has a client remove
// it from a URI it sends, and Host's grammar (RFC 9110, 7.2, after RFC
// 3986) has none. fasthttp takes one escaped as %25 and refuses one
// unescaped, as a bad escape in its own words.
func validIPLiteral(b []byte) bool {
	a, err := netip.ParseAddr(string(b))
	return err == nil && a.Is6() && a.Zone() == ""
}

// hostByte reports whether c may stand unescaped in a registered name:
// unreserved or a sub-delimiter (RFC 3986, 3.2.2).
func hostByte(c byte) bool {
	return 'a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-._~!$&'()*+,;=", c) >= 0
}

// escapesNonASCII reports whether %hi lo is an escape of a byte beyond
// ASCII.
func escapesNonASCII(hi, lo byte) bool { return isHex(hi) && hi > '7' && isHex(lo) }

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'f' }

// importPath is the import's path: no other takes its limit.
var importPath = regexp.MustCompile(`^/v1/namespaces/([^/?]+)/users/[^/?]+/export(?:$|\?)`)

// App returns the fiber app, for app.Test and for listing routes.
func (s *Server) App() *fiber.App { return s.app }

// Serve serves on ln until Shutdown. An accept that fails for want of file
// descriptors or kernel memory is tried again (acceptRetrying): it does not
// end Serve.
func (s *Server) Serve(ln net.Listener) error {
	return s.app.Listener(&acceptRetrying{Listener: ln, logger: s.cfg.Logger,
		max: int64(s.cfg.MaxConnections), open: &s.conns,
		refused: func() { s.k.countError(fiber.StatusServiceUnavailable) }, probe: s.probe, hsts: s.hsts})
}

// connState counts the connections being served, for the cap of
// acceptRetrying, and gives each request's "100 Continue", and the 408 of
// one not read in time, a write deadline of their own.
func (s *Server) connState(c net.Conn, state fasthttp.ConnState) {
	switch state {
	case fasthttp.StateNew:
		s.conns.Add(1)
	case fasthttp.StateActive:
		// A request begins. fasthttp sets a write deadline before each
		// answer only, and writes the "100 Continue" of a request that
		// expects one under the last answer's: on a connection idle longer
		// than WriteTimeout since, long past, so the write failed and the
		// connection was closed unanswered, with the share of
		// MaxBodyBytesInFlight its header had taken. The deadline counts
		// the read timeout too: fasthttp writes the 408 of a request not
		// read within it under this deadline as well, once the read
		// timeout is over, and a write timeout no longer than the read
		// timeout (the defaults are equal) would have closed the
		// connection unanswered. Answers get their own deadline.
		_ = c.SetWriteDeadline(time.Now().Add(s.cfg.ReadTimeout + s.cfg.WriteTimeout))
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		s.conns.Add(-1)
	}
}

// Drain makes /readyz answer 503 from now on, while requests are still
// served: before Shutdown, for a load balancer to stop sending new ones.
func (s *Server) Drain() { s.draining.Store(true) }

// Shutdown marks the service not ready, waits for backups still on their
// way to their clients, stops accepting connections, and waits for
// in-flight requests to finish (or ctx to end). It does not close
// the hot set: the caller does that after Shutdown returns.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	for s.delivering.Load() > 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	return s.app.ShutdownWithContext(ctx)
}

// Open reports whether the API has no keys (every caller has every role).
func (s *Server) Open() bool { return s.keys.Load().open() }

// SetKeys replaces the API keys, for rotating them while the service runs:
// calls already past the key check finish, later ones meet the new keys. A
// service that requires keys keeps requiring them (an empty set is
// refused), and an open one stays open: whether it needs keys decided
// where it may listen.
func (s *Server) SetKeys(keys []Key) error {
	if err := validateKeys(keys); err != nil {
		return fmt.Errorf("%w: %w", ErrBadKeys, err)
	}
	switch {
	case s.Open():
		return fmt.Errorf("%w: the service was started without keys and stays open; restart it with keys", ErrBadKeys)
	case len(keys) == 0:
		return fmt.Errorf("%w: no key: a service started with keys keeps requiring them", ErrBadKeys)
	}
	s.keys.Store(newKeyring(keys, serverRate(s.cfg)))
	return nil
}

// routes registers every route. Each documented route is in openapi.yaml
// with the same path (fiber's :param written {param}).
func (s *Server) routes() {
	// A panic in a handler (a bug) answers its request with a 500 and is
	// logged with its stack: fasthttp does not recover panics, so without
	// this one request could take the service down for every user. The hot
	// set releases a user's lock on the way out (eviction.HotSet.FilterAppend).
	s.app.Use(func(c *fiber.Ctx) error {
		s.everyAnswer(c)
		h := &c.Request().Header
		// HeaderReceived's refusals leave the body unread, and their
		// answer closes the connection. Set for each request, so that an
		// error answer on a connection kept alive (errorHandler) leaves
		// no mark on the next request's close.
		lingerOnClose(c.Context().Conn(), h.ConnectionClose())
		// The body has been read: its share of the budget is given back.
		if s.bodies.release(h) {
			return newError(pOverloaded, "more than %d bytes of request bodies are being read; retry shortly", s.cfg.MaxBodyBytesInFlight)
		}
		// A request of ambiguous framing, Host or target is refused
		// (HeaderReceived read none of its body and marked its connection
		// to close).
		if h.ConnectionClose() {
			if p, header := requestProblem(h); p != "" {
				return headerRefusal(p, header)
			}
		}
		if h.IsOptions() && string(h.RequestURI()) == "*" {
			return s.serverOptions(c)
		}
		if h.IsConnect() {
			return s.noTunnel(c)
		}
		return c.Next()
	})
	s.app.Use(fiberrecover.New(fiberrecover.Config{EnableStackTrace: true,
		StackTraceHandler: func(c *fiber.Ctx, r any) {
			s.k.panics.Add(1)
			s.cfg.Logger.Error("seenapi: panic serving a request", "method", c.Method(), "path", c.Path(),
				"panic", r, "stack", string(debug.Stack()))
		}}))
	const user = "/v1/namespaces/:ns/users/:user"
	s.handle(fiber.MethodPost, user+"/filter", RoleWrite, s.idempotent(s.filterUser))
	s.handle(fiber.MethodPost, user+"/seen", RoleWrite, s.recordSeen)
	s.handle(fiber.MethodPost, user+"/check", RoleRead, s.checkSeen)
	s.handle(fiber.MethodDelete, user+"/items", RoleWrite, s.forgetItems)
	s.handle(fiber.MethodGet, user, RoleRead, s.getUser)
	s.handle(fiber.MethodDelete, user, RoleAdmin, s.forgetUser)
	s.handle(fiber.MethodGet, user+"/export", RoleAdmin, s.exportUser)
	s.handle(fiber.MethodPut, user+"/export", RoleAdmin, s.importUser)
	s.handle(fiber.MethodPost, "/v1/namespaces/:ns/filter", RoleWrite, s.idempotent(s.filterBatch))
	s.handle(fiber.MethodGet, "/v1/namespaces", RoleRead, s.listNamespaces)
	s.handle(fiber.MethodGet, "/v1/namespaces/:ns", RoleRead, s.getNamespace)
	s.handle(fiber.MethodDelete, "/v1/namespaces/:ns", RoleAdmin, s.purgeNamespace)
	s.handle(fiber.MethodGet, "/v1/namespaces/:ns/users", RoleRead, s.listUsers)
	s.handle(fiber.MethodGet, "/v1/stats", RoleRead, s.getStats)
	s.handle(fiber.MethodGet, "/v1/auth", RoleRead, s.getAuth)
	s.handle(fiber.MethodGet, "/v1/backup", RoleAdmin, s.backup)

	// The routes below are outside the API and registered with route, not
	// handle: they ignore query parameters instead of refusing them. Their
	// callers may add some of their own (a load balancer's probe, a
	// Prometheus scrape config's params, a cache-busting client; the
	// dashboard's page and files may be linked with some for its script),
	// none of these routes changes anything, and a probe or scrape refused
	// for a parameter would look like a service down.
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(s), s.k.duration, collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(gcMetrics...)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewBuildInfoCollector())
	metrics := adaptor.HTTPHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: nil}))
	// Outside the in-flight cap, as the probes are: an overloaded service
	// is when its figures are wanted, and a scrape refused then would show
	// it down instead (Prometheus's up == 0), its 503s unseen.
	s.route(fiber.MethodGet, "/metrics", RoleRead, uncapped, func(c *fiber.Ctx) error {
		// A key limited to some namespaces sees their series only, as in
		// /v1/stats; the service's totals stay whole.
		if _, m := s.caller(c); m.scope != nil {
			return adaptor.HTTPHandler(promhttp.HandlerFor(namespaceGatherer{reg, m}, promhttp.HandlerOpts{}))(c)
		}
		return metrics(c)
	})

	// Load balancers often probe with HEAD, which route answers.
	s.route(fiber.MethodGet, "/healthz", RoleNone, uncapped, s.health)
	s.route(fiber.MethodGet, "/readyz", RoleNone, uncapped, s.ready)
	s.route(fiber.MethodGet, "/openapi.yaml", RoleNone, capped, s.openAPI)
	dashboard := http.FS(web.FS())
	s.route(fiber.MethodGet, "/", RoleNone, capped, func(c *fiber.Ctx) error {
		dashboardHeaders(c)
		return filesystem.SendFile(c, dashboard, "/index.html")
	})
	// The dashboard's other files, each at its own path only, answered
	// as / is: by GET and HEAD, 405 with the same Allow for any other
	// method. Anything else falls through to 404, or 405 for a method a
	// route's path does not take: an error, whose answer, a problem, is
	// the API's (errorHandler), so the dashboard's headers go on a file
	// served alone. fiber's file server took any path it could open: "/."
	// (a directory, 403 forbidden), "/app.js/" (the file, though
	// StrictRouting makes that another path).
	// Each file is counted as a route of its own ("GET /app.js", HEAD with
	// it) and held to the in-flight cap, as / is: a browser loading the
	// dashboard is load like any other. The lookup is the one this
	// middleware made before, for every request.
	files := map[string]fiber.Handler{}
	for _, p := range dashboardFiles() {
		files[p] = s.counted(fiber.MethodGet+" "+p, RoleNone, capped, func(c *fiber.Ctx) error {
			dashboardHeaders(c)
			return filesystem.SendFile(c, dashboard, p)
		})
	}
	s.app.Use(func(c *fiber.Ctx) error {
		file := files[c.Path()]
		if file == nil {
			return c.Next()
		}
		if m := c.Method(); m != fiber.MethodGet && m != fiber.MethodHead {
			c.Set(fiber.HeaderAllow, dashboardAllow)
			return fiber.ErrMethodNotAllowed
		}
		return file(c)
	})
	s.allow = serverMethods(s.k.routes)
}

// dashboardAllow is the Allow of a dashboard file's 405, that of / (a GET
// route, which answers HEAD too).
const dashboardAllow = fiber.MethodGet + ", " + fiber.MethodHead

// dashboardFiles are the paths the dashboard's files are served at
// ("/app.js"): those of package web's regular files, in lexical order.
func dashboardFiles() []string {
	var files []string
	err := fs.WalkDir(web.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, "/"+p)
		}
		return err
	})
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return files
}

// serverOptions answers "OPTIONS *", which asks what the server as a whole
// supports rather than a resource (RFC 9110, 9.3.7; the asterisk form,
// RFC 9112, 3.2.4): 200 with Allow, the methods some route takes, and no
// content. Not a 204: an answer to OPTIONS without content must carry
// Content-Length: 0 (9.3.7), which a 204 may not (8.6). It takes no key
// and tells nothing of the data, as the probes.
func (s *Server) serverOptions(c *fiber.Ctx) error {
	c.Set(fiber.HeaderAllow, s.allow)
	c.Status(fiber.StatusOK) // not SendStatus, which would send "OK" as the content
	return nil
}

// noTunnel answers CONNECT, which asks for a tunnel to the host:port its
// target names (RFC 9110, 9.3.6): the service is no proxy, and takes
// CONNECT for no target, so it is a method no route takes, 405 with the
// server's Allow as any other such method gets, rather than a 404 of
// the target taken for a path. Its problem has no instance: the target is
// no path of the service.
func (s *Server) noTunnel(c *fiber.Ctx) error {
	c.Set(fiber.HeaderAllow, s.allow)
	err := newError(pMethodNotAllowed, "the service is no proxy and opens no tunnel (CONNECT); its routes take %s", s.allow)
	err.unread = true
	return err
}

// serverMethods is the Allow of "OPTIONS *": the methods of routes
// ("METHOD /path", as Server.route names them), HEAD with GET, and
// OPTIONS, in fiber's order of methods.
func serverMethods(routes []string) string {
	taken := map[string]bool{fiber.MethodOptions: true}
	for _, r := range routes {
		m, _, _ := strings.Cut(r, " ")
		taken[m] = true
		if m == fiber.MethodGet {
			taken[fiber.MethodHead] = true
		}
	}
	var allow []string
	for _, m := range fiber.DefaultMethods {
		if taken[m] {
			allow = append(allow, m)
		}
	}
	return strings.Join(allow, ", ")
}

// everyAnswer sets the headers every answer carries, those of fasthttp's
// own refusals (errorHandler) included: those of answers not meant to
// render (notRendered; the dashboard's files set their own
// Content-Security-Policy over its) and, over TLS,
// Strict-Transport-Security when asked for. A browser that has met the
// service over HTTPS once calls it by HTTPS only: a network between it
// and the service cannot serve it a page of its own under the service's
// name over plain HTTP, where the dashboard's key is typed.
func (s *Server) everyAnswer(c *fiber.Ctx) {
	notRendered(c)
	if s.hsts != "" && c.Context().IsTLS() {
		c.Response().Header.Set(fiber.HeaderStrictTransportSecurity, s.hsts)
	}
}

// notRendered sets the headers of an answer that is never to be rendered
// (JSON, a problem, the metrics, the document, an export): browsers take
// it for the type it names (nosniff), so that a user id or item an answer
// echoes is never run as a script or a page whatever a browser would guess
// from its bytes; and should one render it all the same (opened as a
// document, or in a frame), it may load and run nothing and may not be
// framed (apiCSP, and X-Frame-Options for browsers that do not know CSP's
// frame-ancestors: a page of another site cannot lay an answer under its
// own), nor send a Referer. Those of the dashboard's page and files are
// these but the Content-Security-Policy (dashboardHeaders). Constant
// bytes, set in place: no allocation a call.
func notRendered(c *fiber.Ctx) {
	h := &c.Response().Header
	for _, kv := range answerHeaders {
		h.SetCanonical(kv[0], kv[1])
	}
}

// answerHeaders are the headers notRendered sets, name and value: the one
// list of them, which RawAnswerHeaders writes out too.
var answerHeaders = [...][2][]byte{
	{[]byte(fiber.HeaderXContentTypeOptions), []byte("nosniff")},
	{[]byte(headerCSP), []byte(apiCSP)},
	{[]byte(fiber.HeaderXFrameOptions), []byte("DENY")},
	{[]byte(fiber.HeaderReferrerPolicy), []byte("no-referrer")},
}

// RawAnswerHeaders are notRendered's header lines, CRLF-terminated, for
// the answers written as bytes without fiber: a connection past
// --max-connections, plain HTTP spoken to the HTTPS port.
var RawAnswerHeaders = func() string {
	var b strings.Builder
	for _, kv := range answerHeaders {
		b.Write(kv[0])
		b.WriteString(": ")
		b.Write(kv[1])
		b.WriteString("\r\n")
	}
	return b.String()
}()

// apiCSP is the Content-Security-Policy of every answer but the
// dashboard's page and files: nothing may be loaded or run, nor the
// answer framed.
const apiCSP = "default-src 'none'; frame-ancestors 'none'"

// dashboardHeaders sets the headers of the dashboard's page and files:
// notRendered's, set on every answer, but for its Content-Security-Policy
// (dashboardCSP), which lets the page run its own script. Their no framing
// (X-Frame-Options too) matters most here: a page of another site cannot
// lay the dashboard under its own, clickjacking its buttons that erase.
func dashboardHeaders(c *fiber.Ctx) {
	c.Response().Header.Set(headerCSP, dashboardCSP)
}

const headerCSP = "Content-Security-Policy"

// dashboardCSP is the Content-Security-Policy of the dashboard's page and
// files: scripts, styles and fetches from the service's own origin only (no
// inline script or style attribute, no eval), images from it or data: URIs
// (the page's empty icon is "data:,"), no <base>, no form submission (every
// form is handled by the page's script; a key must never end up in a URL),
// and no framing.
const dashboardCSP = "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// handle registers h as an API route: as route does, behind the in-flight
// cap, and refusing the query parameters the route does not take
// (queryParams) before h runs.
func (s *Server) handle(method, path string, role Role, h fiber.Handler) {
	taken := queryParams[method+" "+docPath(path)]
	s.route(method, path, role, capped, func(c *fiber.Ctx) error {
		if err := unknownQuery(c, taken); err != nil {
			return err
		}
		return h(c)
	})
}

// queryParams are the query parameters of each API route that takes any,
// by route as openapi.yaml names it; every other API route takes none. It
// is the one list the server refuses other parameters by, and a test holds
// it to openapi.yaml, so that a parameter documented there is one the
// server takes.
var queryParams = map[string][]string{
	"POST /v1/namespaces/{ns}/users/{user}/seen":  {"bulk"},
	"PUT /v1/namespaces/{ns}/users/{user}/export": {"mode"},
	"GET /v1/namespaces/{ns}/users":               {"after", "limit", "details"},
	"GET /v1/backup":                              {"skip_damaged"},
}

// unknownQuery is the bad-request problem of the request's query
// parameters that are not in taken, naming each, or of one given twice, or
// nil if there is none: a misspelt parameter (?mod=replace) would otherwise
// be served as if it were absent (an import merging instead of replacing).
func unknownQuery(c *fiber.Ctx, taken []string) error {
	args := c.Context().QueryArgs()
	if args.Len() == 0 {
		return nil
	}
	var unknown []string
	var twice []string
	for key := range args.All() {
		name := string(key)
		switch {
		case !slices.Contains(taken, name):
			if !slices.Contains(unknown, name) {
				unknown = append(unknown, name)
			}
		case len(args.PeekMulti(name)) > 1 && !slices.Contains(twice, name):
			twice = append(twice, name)
		}
	}
	if len(unknown) == 0 && len(twice) > 0 {
		// ?limit=1&limit=2 would be served with one of them, silently.
		fields := make([]FieldError, len(twice))
		for i, name := range twice {
			fields[i] = FieldError{Parameter: name, Detail: "given more than once"}
		}
		return &apiError{kind: pBadRequest, detail: "query parameter " + strconv.Quote(twice[0]) + " given more than once; give each once",
			fields: fields}
	}
	if len(unknown) == 0 {
		return nil
	}
	takes := "none"
	if len(taken) > 0 {
		takes = strings.Join(taken, ", ")
	}
	quoted := make([]string, len(unknown))
	fields := make([]FieldError, len(unknown))
	for i, name := range unknown {
		quoted[i] = strconv.Quote(name)
		fields[i] = FieldError{Parameter: strings.ToValidUTF8(name, "\uFFFD"),
			Detail: "not a query parameter of this route, which takes " + takes}
	}
	what := "unknown query parameter "
	if len(unknown) > 1 {
		what = "unknown query parameters "
	}
	return &apiError{kind: pBadRequest, detail: what + strings.Join(quoted, ", ") + "; this route takes " + takes,
		fields: fields}
}

// Whether a route is held to the in-flight cap. The health probes are not:
// a busy service is alive and ready, and a liveness probe answered 503
// would have an orchestrator restart it just when it has the most to do.
// Nor is /metrics, which tells how busy.
const (
	capped   = true
	uncapped = false
)

// route registers h for method and path, with the in-flight cap applied or
// not (inCap), behind the route's call counter, the role check and the
// route's duration histogram (which every answer counts, refusals too). It
// takes any query parameter: the API's routes are registered with handle.
//
// A GET route answers HEAD too, as HTTP asks of every server (RFC 9110,
// 9.3.2): the same handler, checks and counters, and fasthttp drops the
// body of a HEAD answer, keeping its Content-Length. A handler whose work
// is its body alone (the backup) skips it for HEAD.
func (s *Server) route(method, path string, role Role, inCap bool, h fiber.Handler) {
	handler := s.counted(method+" "+docPath(path), role, inCap, h)
	s.app.Add(method, path, handler)
	if method == fiber.MethodGet {
		s.app.Add(fiber.MethodHead, path, handler)
	}
}

// counted returns h behind what route puts before it, counted under
// route's name ("METHOD /path/{param}") in the calls per route and the
// duration histogram: for route, and for the dashboard's files, which are
// served by exact path without a fiber route of their own.
func (s *Server) counted(route string, role Role, inCap bool, h fiber.Handler) fiber.Handler {
	s.k.routes = append(s.k.routes, route)
	if _, path, _ := strings.Cut(route, " "); role != RoleNone {
		s.keyedPaths = append(s.keyedPaths, strings.Split(path, "/"))
	}
	calls := new(atomic.Uint64)
	s.k.calls = append(s.k.calls, calls)
	duration := s.k.duration.WithLabelValues(route)
	rated := !selfRated[route]
	return func(c *fiber.Ctx) error {
		defer observeSince(duration, time.Now())
		calls.Add(1)
		if inCap {
			n := s.inFlight.Add(1)
			defer s.inFlight.Add(-1)
			if n > int64(s.cfg.MaxInFlight) {
				return newError(pOverloaded, "more than %d requests in flight; retry shortly", s.cfg.MaxInFlight)
			}
		}
		if err := crossOrigin(c); err != nil {
			return err
		}
		if role != RoleNone {
			// What a key may read (a user's filter, the figures, a backup)
			// is kept by no cache: a shared proxy's or the browser's
			// would give it to whoever asks next, key or not.
			c.Response().Header.Set(fiber.HeaderCacheControl, "no-store")
			// The routes of no role (the probes, the document, the
			// dashboard's files) tell a page nothing of the data.
			if s.cfg.LocalOnly && !LoopbackHost(string(c.Request().Host())) {
				return newError(pForbidden, "this service has no API keys and answers to loopback names only (localhost, 127.0.0.1, [::1]), "+
					"not Host %q: a web page could reach it through that name (DNS rebinding)", strings.ToValidUTF8(string(c.Request().Host()), "\uFFFD"))
			}
			if err := s.admit(c, role, rated); err != nil {
				return err
			}
		}
		return h(c)
	}
}

// originCheck refuses what a browser sends from a page of another origin to
// change something (Go's CSRF protection, by Sec-Fetch-Site or else by
// Origin against Host). A browser sends a cross-origin POST of text/plain
// without asking first; the JSON routes refuse that type (415), and this
// check refuses such writes whatever a route takes, so that no web page
// open beside an open service (no keys: every caller is admin) records
// impressions or erases. The dashboard's own
// requests are same-origin, or preflighted behind a proxy; clients that are
// not browsers send neither header and are not concerned.
var originCheck = http.NewCrossOriginProtection()

// crossOrigin is the forbidden problem of a cross-origin browser write,
// or nil. A request without either header costs no more than two lookups.
func crossOrigin(c *fiber.Ctx) error {
	site, origin := c.Get("Sec-Fetch-Site"), c.Get(fiber.HeaderOrigin)
	if site == "" && origin == "" {
		return nil
	}
	r := &http.Request{Method: c.Method(), Host: string(c.Request().Host()), Header: http.Header{}}
	if site != "" {
		r.Header.Set("Sec-Fetch-Site", site)
	}
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	if originCheck.Check(r) != nil && (site != "" || !preflighted(c)) {
		return newError(pForbidden, "a browser sent this %s from a page of another origin (%s); the service takes "+
			"changes from its own dashboard and from clients that are not browsers", c.Method(), cmp.Or(origin, "Sec-Fetch-Site: "+site))
	}
	return nil
}

// preflighted reports whether a browser sends request c from a page of
// another origin only once a CORS preflight has allowed it, which the
// service never does (it answers no preflight with Access-Control-Allow-*):
// a method other than GET, HEAD and POST, an Authorization header, or a
// Content-Type other than the three a form may send (absent, or not
// understood, counts as one of them). Such a request without
// Sec-Fetch-Site is the dashboard's own, behind a proxy that passes on a
// Host of its own upstream (nginx's proxy_pass does), which the Origin of
// the proxy's page never matches; browsers send no Sec-Fetch-Site to a
// page served by plain HTTP under a name other than localhost's.
func preflighted(c *fiber.Ctx) bool {
	switch c.Method() {
	case fiber.MethodGet, fiber.MethodHead, fiber.MethodPost:
	default:
		return true
	}
	if len(c.Request().Header.Peek(fiber.HeaderAuthorization)) > 0 {
		return true
	}
	ct := c.Get(fiber.HeaderContentType)
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch mt {
	case "application/x-www-form-urlencoded", "multipart/form-data", "text/plain":
		return false
	}
	return true
}

// LoopbackHost reports whether hostport (a Host header, a port optional) is
// localhost, a name under .localhost, or a loopback address. An empty Host
// is not: it names no host (an HTTP/1.0 request without one, or an
// HTTP/1.1 one with an empty value, or a target of absolute form with an
// empty authority), and the check would be one a request could skip.
func LoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// observeSince records the seconds since start in o.
func observeSince(o prometheus.Observer, start time.Time) { o.Observe(time.Since(start).Seconds()) }

// docPath writes a fiber path the way openapi.yaml does: :param as {param}.
func docPath(p string) string {
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if strings.HasPrefix(part, ":") {
			parts[i] = "{" + part[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}

// admit lets a request to a route of role through, or returns why not: on
// a server with keys, the bearer key must have at least role; then the
// caller (the key, or on an open server the client's address) must have a
// token left of its rate limit, if it has one (Config.RateLimit, or the
// key's own), unless the route is not rated here (selfRated: its handler
// takes what it costs). A request refused for its key takes no token, so a caller's
// mistakes do not use up its rate; it takes one of its address's refused
// keys instead (keyGuesses), and an address with none left is refused
// before its key is checked.
func (s *Server) admit(c *fiber.Ctx, role Role, rated bool) error {
	kr := s.keys.Load()
	if kr.open() {
		r := serverRate(s.cfg)
		if !r.limited() || !rated {
			return nil // before c.IP(), which formats the address
		}
		return s.rate.take(c.IP(), r, "this client address", 1)
	}
	// Refused keys are limited by address (keyGuesses); the buckets are
	// looked at only while some address has one that is not full.
	b := s.guesses.bucket(c)
	if b != nil {
		d, ok := presentedKey(c.Get(fiber.HeaderAuthorization))
		if err := s.guesses.check(b, d, ok); err != nil {
			return err
		}
	}
	m, err := s.keyRole(c, kr)
	if err != nil {
		s.guesses.refused(c)
		return err
	}
	b.admit(m.id)
	// The handler and what it logs go by the key admitted here, not by
	// the keys at the time they look: a SIGHUP in between must not make a
	// key limited to some namespaces, or a caller's Idempotency-Key, those
	// of no key. A pointer into the keyring: no allocation.
	c.Locals(keyLocal, m)
	if m.role < role {
		return roleError(role, m.role)
	}
	// The routes of a namespace are those with {ns}; a key limited to some
	// may call only theirs, and the routes of none (figures, the list of
	// namespaces, its own role) but the backup (see backup).
	if m.scope != nil {
		if ns := c.Params("ns"); ns != "" && !m.allows(ns) {
			return s.scopeError(*m, ns)
		}
	}
	if !m.rate.limited() || !rated {
		return nil
	}
	return s.rate.take(string(m.id[:]), m.rate, "this API key", 1)
}

// selfRated are the routes whose handler takes from the caller's rate
// itself (takeRate), not admit: a batch takes one request a user, known
// once its body is read, so that a rate bounds the users served whether
// they come one a call or many at a time.
var selfRated = map[string]bool{"POST /v1/namespaces/{ns}/filter": true}

// takeRate takes n requests of the rate of the caller admit let through
// (up to its burst), or returns the rate-limited problem and takes none.
func (s *Server) takeRate(c *fiber.Ctx, n int) error {
	if s.keys.Load().open() {
		r := serverRate(s.cfg)
		if !r.limited() {
			return nil
		}
		return s.rate.take(c.IP(), r, "this client address", n)
	}
	m, ok := c.Locals(keyLocal).(*keyMatch)
	if !ok || !m.rate.limited() {
		return nil
	}
	return s.rate.take(string(m.id[:]), m.rate, "this API key", n)
}

// keyRole returns the key in kr the request's bearer key is (its role,
// digest, rate limit and namespaces), or an unauthorized error when there
// is no key or it is not known.
func (s *Server) keyRole(c *fiber.Ctx, kr *keyring) (*keyMatch, error) {
	return bearerKey(c.Get(fiber.HeaderAuthorization), kr)
}

// keyLocal is the fiber local under which admit keeps the key it admitted
// (a *keyMatch) for the handler.
const keyLocal = "seenapi.key"

// admitted returns the key admit admitted the request with. On a server
// with keys every route of a role has one; should one be missing, the key
// returned may call no namespace's routes and take no backup.
func admitted(c *fiber.Ctx) keyMatch {
	if m, ok := c.Locals(keyLocal).(*keyMatch); ok {
		return *m
	}
	return keyMatch{scope: []string{}}
}

// roleError is the forbidden problem of a key of role has on a route that
// needs role need.
func roleError(need, has Role) error {
	return newError(pForbidden, "this route needs role %v; the key has role %v", need, has)
}

// bearerKey returns the key in kr that the Authorization header h bears,
// or the unauthorized problem when it bears none or one not known.
func bearerKey(h string, kr *keyring) (*keyMatch, error) {
	d, ok := presentedKey(h)
	if !ok {
		return nil, newError(pUnauthorized, `send an API key as "Authorization: Bearer KEY"`)
	}
	at := kr.find(d)
	if at < 0 {
		return nil, newError(pUnauthorized, "the API key is not known")
	}
	return &kr.keys[at], nil
}

// presentedKey returns the digest of the key the Authorization header h
// bears, or false when it bears none.
func presentedKey(h string) ([32]byte, bool) {
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		return [32]byte{}, false
	}
	return digest(strings.TrimSpace(key)), true
}

// bodyOverLimit is the problem of a body over its request's limit
// (bodyLimit), refused before it is read and before its route is found: it
// names the limit and the declared size, as the routes' own checks do.
func (s *Server) bodyOverLimit(c *fiber.Ctx) error {
	if n := c.Request().Header.ContentLength(); n > 0 {
		return bodyTooLarge(n, s.bodyLimit(&c.Request().Header))
	}
	// A body sent in chunks, refused as it was read: fasthttp does not
	// keep which route it was for, so both limits are named.
	return newError(pBodyTooLarge, "the body is over its route's limit (%d bytes, or %d for an import)",
		s.cfg.MaxBodyBytes, s.cfg.MaxImportBytes)
}

// unreadable answers a request fasthttp could not read (fasthttp's
// Server.ErrorHandler), through errorHandler as fiber would, but telling
// the errors apart by their kind alone. fiber's own mapping also took any
// error whose words hold "timeout" for one: fasthttp's words quote the
// bytes at fault, so a malformed header named "Session timeout" was
// answered 408 request-timeout at once. And it took a connection reset by
// its client for a 502 Bad Gateway, answered as a 500 internal error:
// counted and logged with the server's errors, where an alert on 5xx
// looks, though nothing failed in the service and no one was left to
// read the answer; such a connection is closed, unanswered and uncounted.
// A malformed request's 400 says what fasthttp found wrong without the
// bytes it quotes (SecureErrorLogMessage keeps out the rest of what it
// read, not these): a bad Authorization value would be sent back. Unless
// the service's own pass over its head refuses it too (fasthttp refuses a
// bad Host or target itself, first): that refusal is answered as the
// service's own (ownRefusal).
func (s *Server) unreadable(ctx *fasthttp.RequestCtx, err error) {
	var (
		netErr net.Error
		fe     error
	)
	switch own := ownRefusal(&ctx.Request.Header, err); {
	case own != nil:
		fe = own
	case errors.As(err, new(*fasthttp.ErrSmallBuffer)):
		fe = fiber.ErrRequestHeaderFieldsTooLarge
	case errors.As(err, &netErr) && netErr.Timeout():
		fe = fiber.ErrRequestTimeout
	case netErr != nil:
		s.bodies.release(&ctx.Request.Header)
		_ = ctx.Conn().Close()
		return
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		fe = fiber.ErrRequestEntityTooLarge
	default:
		fe = fiber.NewError(fiber.StatusBadRequest, quoted.ReplaceAllLiteralString(err.Error(), "(bytes left out)"))
	}
	c := s.app.AcquireCtx(ctx)
	defer s.app.ReleaseCtx(c)
	if s.errorHandler(c, fe) != nil {
		_ = c.SendStatus(fiber.StatusInternalServerError)
	}
}

// ownRefusal is the service's own refusal of a request that fasthttp
// refused with err while reading its header h, or nil: what
// requestProblem finds in a head read whole (fasthttp refused the
// request's Host or target once the service had seen it, parsing the
// URI), or the Host refusal err is (hostReadErrors), or the target's
// (refusedTarget), when fasthttp refused the header as it read it,
// keeping none of it.
func ownRefusal(h *fasthttp.RequestHeader, err error) error {
	if len(h.RawHeaders()) > 0 {
		if p, header := requestProblem(h); p != "" {
			return headerRefusal(p, header)
		}
		return nil
	}
	if in := errors.Unwrap(err); in != nil {
		if p, ok := hostReadErrors[in.Error()]; ok {
			return headerRefusal(p, fiber.HeaderHost)
		}
	}
	if target, ok := refusedTarget(err); ok {
		return headerRefusal(cmp.Or(targetProblem(target), badTargetForm), "")
	}
	return nil
}

// quoted matches what fasthttp's errors quote (Go's %q) of a request.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// errorHandler answers every error as problem+json; fiber calls it for
// errors returned by handlers and for its own (no route, body too large).
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	// A body fasthttp failed to read (too slow, cut short) gives back its
	// share of the budget here: no handler runs for it.
	s.bodies.release(&c.Request().Header)
	fe := (*fiber.Error)(nil)
	if errors.As(err, &fe) && fe.Code == fiber.StatusRequestTimeout && heardNothing(c.Context().Conn()) {
		// A connection opened ahead of use and left silent: no request
		// to answer, and a 408 written to it could be read as the
		// answer to the client's first request on it. fasthttp's write
		// of what follows fails on the closed connection, unseen.
		_ = c.Context().Conn().Close()
		return nil
	}
	// fasthttp refused the request while reading it and closes the
	// connection after this answer, the rest of the request unread.
	lingerOnClose(c.Context().Conn(), true)
	if fe != nil && fe.Code == fiber.StatusRequestEntityTooLarge {
		err = s.bodyOverLimit(c)
	}
	p := problemFor(err)
	// A request fasthttp refused while reading it (408, 431, a chunked
	// 413) has been dropped by now: its path is unknown, not "/". One
	// refused for its head (its framing, Host, target or a header line)
	// has a path, but one read from a request the service will not read:
	// none either, as fasthttp's refusals of the same requests have
	// none, having kept no path or failed to parse it.
	if ae := (*apiError)(nil); len(c.Request().Header.RawHeaders()) > 0 && !(errors.As(err, &ae) && ae.unread) {
		p.Instance = c.Path()
	}
	s.k.countProblem(err, p)
	s.logFailure("seenapi: request failed", p, err, "method", c.Method(), "path", c.Path())
	body, merr := encode(&p)
	if merr != nil {
		return merr
	}
	s.everyAnswer(c) // fasthttp's own refusals come here without the middleware
	if s.keyedPath(c.Path()) {
		// A refusal made before the route ran (a method its path does not
		// take, a body over the limit) is an answer of the route too, kept
		// by no cache as its others are (counted).
		c.Response().Header.Set(fiber.HeaderCacheControl, "no-store")
	}
	c.Status(p.Status)
	c.Set(fiber.HeaderContentType, "application/problem+json")
	if ra := retryAfter(err, p); ra != "" {
		c.Set(fiber.HeaderRetryAfter, ra)
	}
	if p.Status == fiber.StatusUnauthorized {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="seenapi"`)
	}
	return c.Send(body)
}

// keyedPath reports whether path is that of a route that takes a key,
// whatever the method: a {param} segment matches any segment but an empty
// one, as fiber's router matches it. It runs for errors only (errorHandler).
func (s *Server) keyedPath(path string) bool {
	segs := strings.Split(path, "/")
	return slices.ContainsFunc(s.keyedPaths, func(route []string) bool {
		return slices.EqualFunc(route, segs, func(r, seg string) bool {
			return r == seg || seg != "" && strings.HasPrefix(r, "{")
		})
	})
}

// logFailure logs err, answered as the server's failure p (a 5xx), with
// msg and args: the problem's detail is generic, and the error's own words
// (the store's, which name files of the server) are for the log only.
// Refusals that say the service's state, which is logged where it changes
// (overloaded, shutting down, the disk full), take no line each. A store
// that fails fails every call that reaches it: a line a second for each
// problem type says so without filling the disk.
func (s *Server) logFailure(msg string, p Problem, err error, args ...any) {
	if p.Status < 500 || p.Type == ProblemBase+pOverloaded.slug || p.Type == ProblemBase+pUnavailable.slug ||
		p.Type == ProblemBase+pStorageFull.slug {
		return
	}
	if ok, dropped := s.failLog.allow(p.Type, time.Now()); ok {
		s.cfg.Logger.Error(msg, append(args, "status", p.Status, "err", err, "held_back", dropped)...)
	}
}

// lineRate lets one log line a second through for each kind, and counts
// the ones it holds back meanwhile.
type lineRate struct {
	mu   sync.Mutex
	last map[string]lineCount
}

type lineCount struct {
	at      time.Time
	dropped int
}

// allow reports whether a line of kind may be logged at now, and how many
// of its kind were held back since the last one logged.
func (l *lineRate) allow(kind string, now time.Time) (ok bool, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]lineCount{}
	}
	c, seen := l.last[kind]
	if seen && now.Sub(c.at) < time.Second {
		c.dropped++
		l.last[kind] = c
		return false, 0
	}
	l.last[kind] = lineCount{at: now}
	return true, c.dropped
}
