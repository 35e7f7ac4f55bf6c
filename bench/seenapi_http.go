package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// BuildSeenapi builds the seenapi server of the module in moduleDir into
// out (go build -o out ./cmd/seenapi).
func BuildSeenapi(ctx context.Context, moduleDir, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/seenapi")
	cmd.Dir = moduleDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: go build ./cmd/seenapi: %v: %s", ErrServer, err, lastLines(b, 10))
	}
	return nil
}

// SharedBuild is a seenapi server built once, on first use, into a
// temporary directory of its own: for the tests of a package that run the
// server, where each building its own spent seconds linking. Its zero
// value is ready; Remove, from TestMain, deletes what it built.
type SharedBuild struct {
	once sync.Once
	dir  string
	err  error
}

// Bin builds the server of the module in moduleDir the first time it is
// called and returns its path, or the error of that build.
func (b *SharedBuild) Bin(moduleDir string) (string, error) {
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "seenapi-test-bin-"); b.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		b.err = BuildSeenapi(ctx, moduleDir, filepath.Join(b.dir, "seenapi"))
	})
	return filepath.Join(b.dir, "seenapi"), b.err
}

// Remove deletes the server built, if any.
func (b *SharedBuild) Remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// HTTPOptions configure the seenapi-over-HTTP system.
type HTTPOptions struct {
	// Bin is the seenapi server binary (see BuildSeenapi). Required.
	Bin string
	// DataParent is where the fresh data directory is made. Default os.TempDir().
	DataParent string
	// CacheBytes is passed as --cache-bytes when non-zero. Default: the server's.
	CacheBytes int64
	// Args are extra server flags.
	Args []string
	// LogDir receives the server's output (seenapi-http.log). Default: discarded.
	LogDir string
	// Conns caps the client's connections. Default 64.
	Conns int
	// TLS serves HTTPS with a self-signed certificate the harness makes
	// (--tls-cert, --tls-key) and calls it over TLS: the system
	// seenapi-https, which measures what TLS costs against seenapi-http.
	TLS bool
}

// HTTPClient makes the one call of a seenapi server over keep-alive HTTP
// connections (fasthttp's HostClient), without per-call allocations but
// the answer's slice. Safe for concurrent use.
type HTTPClient struct {
	base   string // "http://addr" or "https://addr"
	client *fasthttp.HostClient
	uriPre []byte // base + "/v1/namespaces/default/users/"
}

// NewHTTPClient returns a client of the server at addr (host:port) with at
// most conns connections.
func NewHTTPClient(addr string, conns int) *HTTPClient { return newHTTPClient(addr, conns, nil) }

// newHTTPClient is NewHTTPClient, over TLS with tlsConfig when it is not nil.
func newHTTPClient(addr string, conns int, tlsConfig *tls.Config) *HTTPClient {
	base := "http://" + addr
	if tlsConfig != nil {
		base = "https://" + addr
	}
	return &HTTPClient{base: base,
		client: &fasthttp.HostClient{Addr: addr, IsTLS: tlsConfig != nil, TLSConfig: tlsConfig,
			MaxConns: conns, ReadTimeout: 60 * time.Second,
			WriteTimeout: 60 * time.Second, MaxIdleConnDuration: time.Minute, NoDefaultUserAgentHeader: true,
			DisableHeaderNamesNormalizing: true, DisablePathNormalizing: true,
			// A call of 200 candidates is about 3.8 KB; with fasthttp's
			// 4 KiB default, one in seventeen went out in two writes
			// (two system calls, two segments for the server to read).
			WriteBufferSize: writeBufferSize},
		uriPre: []byte(base + "/v1/namespaces/default/users/")}
}

// writeBufferSize is the client's write buffer: a whole request of the
// workload's calls.
const writeBufferSize = 16 << 10

// Ready reports whether GET /readyz answers 200.
func (c *HTTPClient) Ready() (bool, error) {
	code, _, err := c.client.GetTimeout(nil, c.base+"/readyz", time.Second)
	return err == nil && code == fasthttp.StatusOK, err
}

// CloseIdle closes the client's idle connections.
func (c *HTTPClient) CloseIdle() { c.client.CloseIdleConnections() }

// SeenapiHTTP is seenapi over HTTP: a server process started from Bin on a
// free loopback port with a fresh data directory, called through one
// keep-alive fasthttp client. It can flush (a SIGTERM: the server writes
// back on shutdown) and restart on the same data. With HTTPOptions.TLS it
// is seenapi-https.
type SeenapiHTTP struct {
	opts    HTTPOptions
	dataDir string
	certDir string      // with TLS: the certificate and its key
	tls     *tls.Config // with TLS: the client's, trusting the certificate
	addr    string
	cmd     *exec.Cmd
	done    chan error
	client  *HTTPClient
}

// NewSeenapiHTTP returns the seenapi-over-HTTP system.
func NewSeenapiHTTP(opts HTTPOptions) *SeenapiHTTP {
	if opts.Conns == 0 {
		opts.Conns = 64
	}
	return &SeenapiHTTP{opts: opts}
}

// Name returns "seenapi-http", or "seenapi-https" with HTTPOptions.TLS.
func (s *SeenapiHTTP) Name() string {
	if s.opts.TLS {
		return "seenapi-https"
	}
	return "seenapi-http"
}

// Setup makes a fresh data directory and starts the server on it.
func (s *SeenapiHTTP) Setup(ctx context.Context) error {
	if s.opts.Bin == "" {
		return fmt.Errorf("%w: no seenapi binary", ErrBadConfig)
	}
	dir, err := os.MkdirTemp(s.opts.DataParent, "seenbench-seenapi-")
	if err != nil {
		return err
	}
	s.dataDir = dir
	if s.opts.TLS {
		if s.certDir, err = os.MkdirTemp(s.opts.DataParent, "seenbench-cert-"); err != nil {
			return err
		}
		cert, err := WriteSelfSignedCert(filepath.Join(s.certDir, "cert.pem"), filepath.Join(s.certDir, "key.pem"), 1)
		if err != nil {
			return fmt.Errorf("%w: a certificate for seenapi-https: %v", ErrServer, err)
		}
		s.tls = trusting(cert)
	}
	return s.start(ctx)
}

func (s *SeenapiHTTP) start(ctx context.Context) error {
	// The server picks its own port (port 0) and names it in its log: a
	// port picked here and passed to it could be given to another test's
	// server meanwhile, which would then answer this one's readiness
	// probe while this one exited on its bind error.
	args := []string{"--addr", "127.0.0.1:0", "--data-dir", s.dataDir}
	if s.opts.CacheBytes > 0 {
		args = append(args, "--cache-bytes", strconv.FormatInt(s.opts.CacheBytes, 10))
	}
	if s.tls != nil {
		args = append(args, "--tls-cert", filepath.Join(s.certDir, "cert.pem"), "--tls-key", filepath.Join(s.certDir, "key.pem"))
	}
	args = append(args, s.opts.Args...)
	cmd := exec.Command(s.opts.Bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// The log is copied to its file for the server's whole life: the file
	// is closed once the server's end of the pipe is (it exited).
	var logTo io.WriteCloser = nopCloser{io.Discard}
	logPath := ""
	if s.opts.LogDir != "" {
		logPath = filepath.Join(s.opts.LogDir, s.Name()+".log")
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		logTo = f
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logTo.Close()
		return err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		logTo.Close()
		return fmt.Errorf("%w: start %s: %v", ErrServer, s.opts.Bin, err)
	}
	pw.Close()
	addr := make(chan string, 1)
	logged := make(chan struct{})
	tail := &logTail{}
	go func() {
		defer close(logged)
		defer logTo.Close()
		defer pr.Close()
		scanLog(pr, io.MultiWriter(logTo, tail), addr)
	}()
	s.cmd, s.done = cmd, make(chan error, 1)
	go func() {
		err := cmd.Wait()
		<-logged // its whole log copied before anyone reads it
		s.done <- err
	}()
	deadline := time.Now().Add(60 * time.Second)
	select {
	case s.addr = <-addr:
	case werr := <-s.done:
		s.cmd = nil
		return fmt.Errorf("%w: seenapi exited before serving: %v: %s (log: %s)", ErrServer, werr, tail, logPath)
	case <-ctx.Done():
		s.stop()
		return ctx.Err()
	case <-time.After(time.Until(deadline)):
		s.stop()
		return fmt.Errorf("%w: seenapi did not say where it serves within 60s (log: %s)", ErrServer, logPath)
	}
	s.client = newHTTPClient(s.addr, s.opts.Conns, s.tls)
	for {
		ok, err := s.client.Ready()
		if ok {
			return nil
		}
		select {
		case werr := <-s.done:
			s.cmd = nil
			return fmt.Errorf("%w: seenapi exited before ready: %v: %s (log: %s)", ErrServer, werr, tail, logPath)
		case <-ctx.Done():
			s.stop()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return fmt.Errorf("%w: seenapi on %s not ready after 60s (last: %v; log: %s)", ErrServer, s.addr, err, logPath)
		}
	}
}

// logTail keeps the last lines written to it: why a server that exited at
// start did, in the error itself (its log file may be discarded or far).
type logTail struct {
	mu    sync.Mutex
	lines []string
}

// logTailLines is how many lines a logTail keeps.
const logTailLines = 3

func (t *logTail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" {
			t.lines = append(t.lines, line)
		}
	}
	if n := len(t.lines); n > logTailLines {
		t.lines = slices.Delete(t.lines, 0, n-logTailLines)
	}
	return len(b), nil
}

func (t *logTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return "no output"
	}
	return strings.Join(t.lines, " | ")
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// scanLog copies the server's log from r to w, and sends on addr the
// HOST:PORT of its "seenapi: serving" line's url (text or JSON log).
func scanLog(r io.Reader, w io.Writer, addr chan<- string) {
	br := bufio.NewReader(r)
	found := false
	for {
		line, err := br.ReadString('\n')
		_, _ = io.WriteString(w, line)
		if !found && strings.Contains(line, "seenapi: serving") {
			if a := servingAddr(line); a != "" {
				found = true
				addr <- a
			}
		}
		if err != nil {
			return
		}
	}
}

// servingAddr is the HOST:PORT of the url in a "seenapi: serving" log
// line, text (url=http://HOST:PORT) or JSON ("url":"http://HOST:PORT").
func servingAddr(line string) string {
	for _, key := range []string{"url=", `"url":"`} {
		_, rest, ok := strings.Cut(line, key)
		if !ok {
			continue
		}
		_, rest, ok = strings.Cut(rest, "://")
		if !ok {
			return ""
		}
		if end := strings.IndexAny(rest, " \"\n"); end >= 0 {
			rest = rest[:end]
		}
		return rest
	}
	return ""
}

// stop sends SIGTERM and waits for the server to write back and exit (SIGKILL after 5 minutes).
func (s *SeenapiHTTP) stop() error {
	if s.cmd == nil {
		return nil
	}
	defer func() { s.cmd = nil }()
	if s.client != nil {
		s.client.CloseIdle()
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			return fmt.Errorf("%w: seenapi exited with %v after SIGTERM", ErrServer, err)
		}
		return nil
	case <-time.After(5 * time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("%w: seenapi did not exit within 5 minutes of SIGTERM", ErrServer)
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 8192); return &b }}

// appendJSONString appends s as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	i := plainPrefix(s)
	dst = append(dst, '"')
	dst = append(dst, s[:i]...)
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, `\u00`...)
			dst = append(dst, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// plainPrefix returns the length of s's longest prefix that a JSON string
// holds as it is (no control character, quote or backslash). It looks at 8
// bytes at a time: encoding the candidates was a quarter of the harness's
// CPU when it went byte by byte, CPU taken from the server on a shared
// machine.
func plainPrefix(s string) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if needsEscape(binary.LittleEndian.Uint64([]byte(s[i : i+8]))) {
			return i + bytePrefix(s[i:])
		}
	}
	// The last 8 bytes, overlapping the words already seen, cover the tail.
	if len(s) >= 8 && !needsEscape(binary.LittleEndian.Uint64([]byte(s[len(s)-8:]))) {
		return len(s)
	}
	return i + bytePrefix(s[i:])
}

// needsEscape reports whether a byte of x is below 0x20 or is '"' or '\\'
// (or, at times, at or above 0x80: bytePrefix settles those exactly).
func needsEscape(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, b := x^('"'*ones), x^('\\'*ones)
	return ((x-0x20*ones)&^x|(q-ones)&^q|(b-ones)&^b)&highs != 0
}

// bytePrefix is plainPrefix a byte at a time.
func bytePrefix(s string) int {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' {
		i++
	}
	return i
}

// Call posts the one call. Safe for concurrent use.
func (s *SeenapiHTTP) Call(ctx context.Context, user string, candidates []string, limit int) ([]string, error) {
	return s.client.Call(ctx, user, candidates, limit)
}

// Call posts the one call for user. Safe for concurrent use.
func (s *HTTPClient) Call(ctx context.Context, user string, candidates []string, limit int) ([]string, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	b := append((*bp)[:0], s.uriPre...)
	b = append(b, user...) // user ids are URL-safe
	b = append(b, "/filter"...)
	req.SetRequestURIBytes(b)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	b = append(b[:0], `{"candidates":[`...)
	for i, c := range candidates {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, c)
	}
	b = append(b, `],"limit":`...)
	b = strconv.AppendInt(b, int64(limit), 10)
	b = append(b, `,"record":"returned"}`...)
	req.SetBodyRaw(b)
	var err error
	if dl, ok := ctx.Deadline(); ok {
		err = s.client.DoDeadline(req, resp, dl)
	} else {
		err = s.client.Do(req, resp)
	}
	*bp = b[:0]
	if err != nil {
		return nil, err
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		body := resp.Body()
		return nil, fmt.Errorf("%w: HTTP %d: %.300s", ErrServer, resp.StatusCode(), body)
	}
	return parseUnseen(resp.Body(), candidates, limit)
}

// parseUnseen reads the "unseen" array of a filter answer and returns its
// items as the candidates they equal (no copy), checking on the way that
// they are candidates in candidate order. Escaped strings are decoded with
// encoding/json.
func parseUnseen(body []byte, candidates []string, limit int) ([]string, error) {
	bad := func(what string) error {
		return fmt.Errorf("%w: %s in %.200s", ErrBadAnswer, what, body)
	}
	i := bytes.Index(body, []byte(`"unseen"`))
	if i < 0 {
		return nil, bad("no unseen")
	}
	p := body[i+len(`"unseen"`):]
	p = bytes.TrimLeft(p, " \t\r\n")
	if len(p) == 0 || p[0] != ':' {
		return nil, bad("no ':' after unseen")
	}
	p = bytes.TrimLeft(p[1:], " \t\r\n")
	if bytes.HasPrefix(p, []byte("null")) {
		return nil, nil
	}
	if len(p) == 0 || p[0] != '[' {
		return nil, bad("unseen is not an array")
	}
	p = p[1:]
	out := make([]string, 0, min(limit, len(candidates)))
	ci := 0
	for {
		p = bytes.TrimLeft(p, " \t\r\n")
		if len(p) == 0 {
			return nil, bad("unterminated unseen")
		}
		if p[0] == ']' {
			return out, nil
		}
		if p[0] == ',' && len(out) > 0 {
			p = bytes.TrimLeft(p[1:], " \t\r\n")
		}
		if len(p) == 0 || p[0] != '"' {
			return nil, bad("unseen item is not a string")
		}
		end := bytes.IndexByte(p[1:], '"')
		if end < 0 {
			return nil, bad("unterminated string")
		}
		raw := p[1 : 1+end]
		var item []byte
		if bytes.IndexByte(raw, '\\') < 0 {
			item = raw
			p = p[2+end:]
		} else {
			// An escaped string: find its real end and decode it.
			j := 1
			for j < len(p) && p[j] != '"' {
				if p[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(p) {
				return nil, bad("unterminated string")
			}
			var str string
			if err := json.Unmarshal(p[:j+1], &str); err != nil {
				return nil, bad("bad string")
			}
			item = []byte(str)
			p = p[j+1:]
		}
		for ci < len(candidates) && candidates[ci] != string(item) {
			ci++
		}
		if ci == len(candidates) {
			return nil, bad(fmt.Sprintf("item %q is not a candidate or is out of order", item))
		}
		out = append(out, candidates[ci])
		ci++
	}
}

// Memory returns the server's resident set size.
func (s *SeenapiHTTP) Memory(context.Context) (Memory, error) {
	if s.cmd == nil {
		return Memory{}, fmt.Errorf("%w: not running", ErrServer)
	}
	n, anon, err := ProcRSS(s.cmd.Process.Pid)
	return Memory{Bytes: n, Kind: "rss", Anon: anon}, err
}

// CPU returns the server's CPU time.
func (s *SeenapiHTTP) CPU() (CPU, error) {
	if s.cmd == nil {
		return CPU{}, fmt.Errorf("%w: not running", ErrServer)
	}
	return ProcessCPU(s.cmd.Process.Pid)
}

// CacheStats reads hits and misses from GET /v1/stats.
func (s *SeenapiHTTP) CacheStats(ctx context.Context) (hits, misses uint64, err error) {
	return s.client.CacheStats(ctx)
}

// CacheStats reads hits and misses from GET /v1/stats.
func (s *HTTPClient) CacheStats(context.Context) (hits, misses uint64, err error) {
	st, err := s.stats()
	return st.Hits, st.Misses, err
}

// serverStats is what the harness reads of GET /v1/stats.
type serverStats struct {
	Hits       uint64 `json:"hits"`
	Misses     uint64 `json:"misses"`
	DirtyUsers int64  `json:"dirty_users"`
	FlushLag   int64  `json:"flush_lag_ns"`
	Collector  struct {
		Cycles         uint64  `json:"cycles"`
		CPUSeconds     float64 `json:"cpu_seconds"`
		AllocatedBytes uint64  `json:"allocated_bytes"`
	} `json:"collector"`
}

// stats reads GET /v1/stats.
func (s *HTTPClient) stats() (serverStats, error) {
	var st serverStats
	code, body, err := s.client.GetTimeout(nil, s.base+"/v1/stats", 10*time.Second)
	if err != nil {
		return st, err
	}
	if code != fasthttp.StatusOK {
		return st, fmt.Errorf("%w: GET /v1/stats: HTTP %d", ErrServer, code)
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("%w: GET /v1/stats: %v", ErrServer, err)
	}
	return st, nil
}

// Backlog returns the server's dirty users and flush lag (GET /v1/stats).
func (s *HTTPClient) Backlog(context.Context) (Backlog, error) {
	st, err := s.stats()
	return Backlog{Users: st.DirtyUsers, Lag: time.Duration(st.FlushLag)}, err
}

// ServerGC reads the collector's cycles and CPU and what the server
// allocated from GET /v1/stats.
func (s *HTTPClient) ServerGC(context.Context) (Collected, error) {
	st, err := s.stats()
	return Collected{Cycles: st.Collector.Cycles, CPU: seconds(st.Collector.CPUSeconds),
		Allocated: st.Collector.AllocatedBytes}, err
}

// ServerGC reads the server's collector's work.
func (s *SeenapiHTTP) ServerGC(ctx context.Context) (Collected, error) { return s.client.ServerGC(ctx) }

// Backlog returns the server's dirty users and flush lag.
func (s *SeenapiHTTP) Backlog(ctx context.Context) (Backlog, error) { return s.client.Backlog(ctx) }

// FlushDisk stops the server (it writes every dirty filter back on
// SIGTERM) and returns the data directory's size.
func (s *SeenapiHTTP) FlushDisk(context.Context) (int64, error) {
	if err := s.stop(); err != nil {
		return 0, err
	}
	return DiskUsage(s.dataDir)
}

// Restart stops the server if it runs and starts it again on the same data.
func (s *SeenapiHTTP) Restart(ctx context.Context) error {
	if err := s.stop(); err != nil {
		return err
	}
	return s.start(ctx)
}

// Close stops the server and removes its data directory (and its
// certificate).
func (s *SeenapiHTTP) Close() error {
	err := s.stop()
	for _, dir := range []*string{&s.dataDir, &s.certDir} {
		if *dir != "" {
			if e := os.RemoveAll(*dir); err == nil {
				err = e
			}
			*dir = ""
		}
	}
	return err
}
