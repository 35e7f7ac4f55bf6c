package web_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/seenapi/seenapi/client"
)

// The dashboard tests build the real seenapi binary (or take $SEENAPI_BIN),
// run it on a loopback port with a temporary data directory and a keys file,
// and drive Debian's chromium headless through chromedp. One service and one browser serve every test
// (each test has its own tab, so its own sessionStorage, and its own users);
// TestMain stops them.

// chromiumPath is Debian's chromium, or $SEENAPI_CHROMIUM.
var chromiumPath = cmp.Or(os.Getenv("SEENAPI_CHROMIUM"), "/usr/bin/chromium")

// waitFor bounds every wait on the page; the dashboard refreshes every 2 s.
const waitFor = 15 * time.Second

// stepLimit bounds each step of a test in its tab (opening the tab, a page
// load, a wait, an evaluation): a browser starved on a loaded machine fails
// the test saying so, instead of holding it until go test's own timeout.
const stepLimit = time.Minute

// service is one running seenapi process.
type service struct {
	base string // http://127.0.0.1:PORT
	cmd  *exec.Cmd
	logs *logBuffer
	done chan struct{} // closed when the process exits
	// notReady counts the 503s /readyz answered the harness while the
	// service folded in its journal: the service counts them apart from
	// its errors, in not_ready.
	notReady int64
}

// suite is what the tests share: the built binary, a service, a browser.
type suite struct {
	dir           string // temp dir: binary, keys file, data dirs, browser profile
	bin           string
	keysArg       string
	namespacesArg string
	keys          struct{ read, write, admin, limited string } // limited: a read key with its own rate, limited to the namespace default
	svc           *service
	browser       context.Context
	spec          *openapi3.T
	err           error
	stops         []func()
}

var (
	once   sync.Once
	shared suite
)

// namespacesYAML adds windowed namespaces (push with the default
// granularity, a quarter of its window), a compact one and a Bloom one to
// "default" (staged).
const namespacesYAML = `classic:
  kind: bloom
feed:
  fp_rate: 0.01
  window: 30d
  granularity: 7.5d
  max_items: 100000
push:
  window: 7d
small:
  kind: compact
`

func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(shared.stops) - 1; i >= 0; i-- {
		shared.stops[i]()
	}
	os.Exit(code)
}

// setup returns the shared suite, starting it on first use. Without chromium
// the test skips, unless CI=true, where a missing browser fails the run.
func setup(t *testing.T) *suite {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s is missing (apt-get install chromium): %v", chromiumPath, err)
		}
		t.Skipf("%s is missing (apt-get install chromium; CI=true makes this a failure)", chromiumPath)
	}
	if testing.Short() {
		t.Skip("builds the binary and drives a browser")
	}
	once.Do(shared.start)
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return &shared
}

func (s *suite) start() {
	s.err = s.startErr()
}

func (s *suite) startErr() error {
	dir, err := os.MkdirTemp("", "seenapi-web-test-")
	if err != nil {
		return err
	}
	s.dir = dir
	s.stops = append(s.stops, func() { os.RemoveAll(dir) })

	if s.bin = os.Getenv("SEENAPI_BIN"); s.bin == "" {
		s.bin = filepath.Join(dir, "seenapi")
		build := exec.Command("go", "build", "-o", s.bin, "../cmd/seenapi")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ../cmd/seenapi: %v\n%s", err, out)
		}
	}

	s.keys.read, s.keys.write, s.keys.admin, s.keys.limited = newKey(), newKey(), newKey(), newKey()
	s.keysArg = filepath.Join(dir, "keys")
	keys := fmt.Sprintf("read:%s\nwrite:%s\nadmin:%s\nread:%s rate=1000 namespaces=default\n", s.keys.read, s.keys.write, s.keys.admin, s.keys.limited)
	if err := os.WriteFile(s.keysArg, []byte(keys), 0o600); err != nil {
		return err
	}

	s.namespacesArg = filepath.Join(dir, "namespaces.yaml")
	if err := os.WriteFile(s.namespacesArg, []byte(namespacesYAML), 0o600); err != nil {
		return err
	}

	spec, err := openapi3.NewLoader().LoadFromFile("../openapi.yaml")
	if err != nil {
		return fmt.Errorf("openapi.yaml: %w", err)
	}
	s.spec = spec

	svc, err := s.startService("data")
	if err != nil {
		return err
	}
	s.svc = svc
	s.stops = append(s.stops, func() { svc.stop() })

	profile := filepath.Join(dir, "chromium-profile")
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		// seen.test names 127.0.0.1 as a proxy's host name would: a page
		// served by plain HTTP under a name other than localhost's gets no
		// Sec-Fetch-Site from the browser (TestTheDashboardWritesBehindNginxUnderAName).
		chromedp.Flag("host-resolver-rules", "MAP seen.test 127.0.0.1"),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	s.stops = append(s.stops, cancelAlloc, cancelBrowser)
	if err := chromedp.Do(browser); err != nil { // starts the browser, with no timeout
		return fmt.Errorf("start %s: %w", chromiumPath, err)
	}
	s.browser = browser
	return nil
}

func newKey() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// keyedService starts a service of the test's own, with the keys file
// keys, a data directory of its own and the flags extra, stopped when the
// test ends.
func (s *suite) keyedService(t *testing.T, keys string, extra ...string) *service {
	t.Helper()
	file := filepath.Join(s.dir, "keys-"+userID(t))
	if err := os.WriteFile(file, []byte(keys), 0o600); err != nil {
		t.Fatal(err)
	}
	svc, err := s.startServiceWith("data-"+userID(t), file, "", extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	return svc
}

// startService runs the binary with the suite's keys and its own data
// directory under s.dir on a loopback port and waits for /readyz.
func (s *suite) startService(data string) (*service, error) {
	return s.startServiceWith(data, s.keysArg, "")
}

// startServiceWith runs the binary with the keys file keys (none, an open
// service, when "") and the data directory data under s.dir, on addr (when
// "", a loopback port the service picks itself), and the flags extra; it
// waits for the service to log the URL it serves at, then for /readyz.
// A port picked here and passed on could be taken by another process
// meanwhile, which would then answer the readiness probe while the service
// exited on its bind error; only the service's own word says where it is.
func (s *suite) startServiceWith(data, keys, addr string, extra ...string) (*service, error) {
	args := []string{"serve", "--addr", cmp.Or(addr, "127.0.0.1:0"), "--data-dir", filepath.Join(s.dir, data),
		"--namespaces", s.namespacesArg, "--min-free-bytes=-1"}
	if keys != "" {
		args = append(args, "--keys-file", keys)
	}
	args = append(args, extra...)
	svc := &service{logs: new(logBuffer), done: make(chan struct{})}
	svc.cmd = exec.Command(s.bin, args...)
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	svc.cmd.Stdout, svc.cmd.Stderr = pw, pw
	err = svc.cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, err
	}
	serving := make(chan string, 1)
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		defer pr.Close()
		svc.logs.copy(pr, serving)
	}()
	go func() {
		svc.cmd.Wait()
		<-logged // the whole log read before anyone is told it exited
		close(svc.done)
	}()

	deadline := time.After(30 * time.Second)
	select {
	case u := <-serving:
		svc.base = u
	case <-svc.done:
		return nil, fmt.Errorf("seenapi exited before serving: %v\n%s", svc.cmd.ProcessState, svc.logs)
	case <-deadline:
		svc.stop()
		return nil, fmt.Errorf("seenapi did not say where it serves within 30s:\n%s", svc.logs)
	}
	for {
		resp, err := http.Get(svc.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return svc, nil
			}
			if resp.StatusCode == http.StatusServiceUnavailable {
				svc.notReady++
			}
		}
		select {
		case <-svc.done:
			return nil, fmt.Errorf("seenapi exited before it was ready: %v\n%s", svc.cmd.ProcessState, svc.logs)
		case <-deadline:
			svc.stop()
			return nil, fmt.Errorf("seenapi not ready after 30s:\n%s", svc.logs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logBuffer is a service's log, read while the service writes it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// servingURL matches the URL of the service's "seenapi: serving" log line.
var servingURL = regexp.MustCompile(`msg="seenapi: serving" .*\burl=(http://\S+)`)

// copy reads the log from r to its end, and sends on serving the URL the
// service logs it serves at.
func (l *logBuffer) copy(r io.Reader, serving chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l.mu.Lock()
		l.b.Write(sc.Bytes())
		l.b.WriteByte('\n')
		l.mu.Unlock()
		if m := servingURL.FindSubmatch(sc.Bytes()); m != nil {
			select {
			case serving <- string(m[1]):
			default: // logged once; a second would be no one's to read
			}
		}
	}
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stop ends the process: SIGTERM, then SIGKILL after 10 s.
func (svc *service) stop() {
	select {
	case <-svc.done:
		return
	default:
	}
	svc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-svc.done:
	case <-time.After(10 * time.Second):
		svc.cmd.Process.Kill()
		<-svc.done
	}
}

// pause stops the process (SIGSTOP), standing for a stalled service, and
// returns the function that resumes it (SIGCONT), called also when the test
// ends, before the service's stop if that was registered earlier. It returns
// once every thread of the process is stopped: the kernel stops them only as
// each next runs, and on a loaded machine a thread not stopped yet answers a
// request sent after the signal (a purge then answered at once, not held).
func (svc *service) pause(t *testing.T) (resume func()) {
	t.Helper()
	if err := svc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume = func() { once.Do(func() { svc.cmd.Process.Signal(syscall.SIGCONT) }) }
	t.Cleanup(resume)
	for deadline := time.Now().Add(waitFor); ; time.Sleep(5 * time.Millisecond) {
		running, err := svc.runningThreads()
		if err == nil && running == 0 {
			return resume
		}
		select {
		case <-svc.done:
			t.Fatalf("seenapi exited instead of stopping: %v\n%s", svc.cmd.ProcessState, svc.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d threads of seenapi still not stopped %s after SIGSTOP (%v)", running, waitFor, err)
		}
	}
}

// runningThreads counts the process's threads not stopped, from the state
// in /proc/PID/task/TID/stat (the field after the command's closing paren).
func (svc *service) runningThreads() (int, error) {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", svc.cmd.Process.Pid))
	if err != nil || len(stats) == 0 {
		return -1, cmp.Or(err, errors.New("no threads listed in /proc"))
	}
	running := 0
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread has exited
		}
		if err != nil {
			return -1, err
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return -1, fmt.Errorf("%s: unexpected %q", f, b)
		}
		if state := b[i+2]; state != 'T' && state != 'Z' && state != 'X' {
			running++
		}
	}
	return running, nil
}

// api returns a client of the generated Go client package sending key.
func (svc *service) api(t *testing.T, key string) *client.ClientWithResponses {
	t.Helper()
	c, err := client.NewClientWithResponses(svc.base, client.WithRequestEditorFn(
		func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+key)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// record makes items seen for user through the API, as a recommender would.
func (svc *service) record(t *testing.T, key, ns, user string, items ...string) {
	t.Helper()
	resp, err := svc.api(t, key).RecordSeenWithResponse(context.Background(), ns, user, nil, client.ItemsRequest{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	if resp.JSON200 == nil {
		t.Fatalf("record: HTTP %d: %s", resp.StatusCode(), resp.Body)
	}
}

// userID returns a user id no other test uses.
func userID(t *testing.T) string {
	return fmt.Sprintf("web-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
}

// ---------- tabs ----------

// exchange is one API call the page made, as the browser saw it.
type exchange struct {
	method      string
	url         string
	reqHeaders  network.Headers
	reqBody     []byte
	status      int
	respHeaders network.Headers
	respBody    []byte
	done        bool
	bodyErr     error
	page        int // tab.pages when sent: a body is gone once the page is left
}

// tab is one browser tab on the dashboard, recording what the page does:
// uncaught exceptions, Content-Security-Policy violations, requests leaving
// the service's origin, and every API exchange, validated against
// openapi.yaml when the test ends. Each of the first three fails the test.
type tab struct {
	t      *testing.T
	s      *suite
	base   string
	prefix string          // base's path: the prefix a proxy serves the service under ("" at its root)
	ctx    context.Context // the tab, with the test's deadline
	tabc   context.Context // the tab, without deadline (screenshots on failure)
	stop   func()          // closes the tab
	nth    int             // 1 for the test's first tab, 2 for its second...

	mu         sync.Mutex
	closed     bool // finish has begun: later events are ignored
	pages      int  // page loads by open
	exchanges  map[network.RequestID]*exchange
	order      []network.RequestID
	exceptions []string
	violations []string
	foreign    []string
	bodies     sync.WaitGroup
}

// newTab opens a tab for svc (the shared service when nil). svc's base may
// have a path: the prefix a proxy serves the service under (e.g.
// http://127.0.0.1:PORT/seen for one passing /seen/ on as /).
func (s *suite) newTab(t *testing.T, svc *service) *tab {
	t.Helper()
	if svc == nil {
		svc = s.svc
	}
	tb := &tab{t: t, s: s, base: svc.base, nth: tabsOpened.next(t), exchanges: map[network.RequestID]*exchange{}}
	if u, err := url.Parse(svc.base); err == nil {
		tb.prefix = u.Path
	}
	tabCtx, cancelTab := chromedp.NewContext(s.browser, chromedp.WithListener(tb.onEvent))
	tb.tabc, tb.stop = tabCtx, cancelTab
	// The tab's first run opens it and may not have a deadline (chromedp ties the tab's life
	// to that context): it is bounded from outside, closing the tab when it is late.
	if _, err := bounded(tabCtx, cancelTab, stepLimit, func() (struct{}, error) { return struct{}{}, chromedp.Do(tabCtx) }); err != nil {
		cancelTab()
		t.Fatalf("open a tab: %v", err)
	}
	cspCtx, cancelCSP := context.WithTimeout(tabCtx, stepLimit)
	err := watchCSP(cspCtx)
	cancelCSP()
	if err != nil {
		cancelTab()
		t.Fatalf("watch for Content-Security-Policy violations: %v", err)
	}
	ctx, cancelCtx := context.WithTimeout(tabCtx, 2*time.Minute)
	tb.ctx = ctx
	t.Cleanup(cancelTab)
	t.Cleanup(cancelCtx)
	t.Cleanup(tb.finish)
	return tb
}

// The page's Content-Security-Policy violations reach the test through a
// binding called from a listener of securitypolicyviolation events, which
// runs in an isolated world of every document before the page's own scripts
// (so it sees violations while the page loads, and the page cannot see it).
const (
	cspWorld   = "seenapi-test-csp"
	cspBinding = "seenapiTestCSPViolation"
	cspWatcher = `document.addEventListener('securitypolicyviolation', (e) => ` + cspBinding + `(JSON.stringify({
	directive: e.effectiveDirective, blocked: e.blockedURI, sample: e.sample,
	source: e.sourceFile, line: e.lineNumber, column: e.columnNumber })), true);`
)

// cspViolation is what cspWatcher reports of one violation.
type cspViolation struct {
	Directive string `json:"directive"`
	Blocked   string `json:"blocked"`
	Sample    string `json:"sample"`
	Source    string `json:"source"`
	Line      int    `json:"line"`
	Column    int    `json:"column"`
}

func (v cspViolation) String() string {
	return fmt.Sprintf("%s blocked %q (sample %q) at %s:%d:%d", v.Directive, v.Blocked, v.Sample, v.Source, v.Line, v.Column)
}

// watchCSP installs cspWatcher in every document the tab loads from now on.
func watchCSP(ctx context.Context) error {
	if _, err := chromedp.Call(ctx, runtime.AddBinding, runtime.AddBindingParams{Name: cspBinding, ExecutionContextName: cspWorld}); err != nil {
		return err
	}
	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: cspWatcher, WorldName: cspWorld})
	return err
}

// takeViolations returns the Content-Security-Policy violations recorded so
// far and forgets them, so that finish does not report them.
func (tb *tab) takeViolations() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	v := tb.violations
	tb.violations = nil
	return v
}

// onEvent runs in the tab's event loop: it records and returns at once.
func (tb *tab) onEvent(ev any) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.closed {
		return
	}
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		tb.exceptions = append(tb.exceptions, exceptionText(e.ExceptionDetails))
	case *runtime.EventBindingCalled:
		if e.Name == cspBinding {
			var v cspViolation
			if err := json.Unmarshal([]byte(e.Payload), &v); err != nil {
				tb.violations = append(tb.violations, e.Payload)
			} else {
				tb.violations = append(tb.violations, v.String())
			}
		}
	case *network.EventRequestWillBeSent:
		u := e.Request.URL
		if !strings.HasPrefix(u, tb.base+"/") && u != tb.base && !strings.HasPrefix(u, "data:") && u != "about:blank" {
			tb.foreign = append(tb.foreign, u)
		}
		if p, err := url.Parse(u); err == nil && strings.HasPrefix(u, tb.base) && (strings.HasPrefix(p.Path, tb.prefix+"/v1/") || p.Path == tb.prefix+"/healthz") {
			var body []byte
			for _, d := range e.Request.PostDataEntries {
				body = append(body, d.Bytes...)
			}
			tb.exchanges[e.RequestID] = &exchange{method: e.Request.Method, url: u, reqHeaders: e.Request.Headers, reqBody: body, page: tb.pages}
			tb.order = append(tb.order, e.RequestID)
		}
	case *network.EventResponseReceived:
		if x := tb.exchanges[e.RequestID]; x != nil {
			x.status = int(e.Response.Status)
			x.respHeaders = e.Response.Headers
		}
	case *network.EventLoadingFinished:
		if x := tb.exchanges[e.RequestID]; x != nil {
			id := e.RequestID
			tb.bodies.Add(1)
			go func() { // a command cannot run in the event loop
				defer tb.bodies.Done()
				res, err := chromedp.Call(tb.tabc, network.GetResponseBody, network.GetResponseBodyParams{RequestID: id})
				tb.mu.Lock()
				defer tb.mu.Unlock()
				x.respBody, x.bodyErr, x.done = res.Body, err, true
			}()
		}
	}
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d == nil {
		return "exception"
	}
	msg := d.Text
	if d.Exception != nil && d.Exception.Description != "" {
		msg += " " + d.Exception.Description
	}
	return fmt.Sprintf("%s (%s:%d:%d)", msg, d.URL, d.LineNumber+1, d.ColumnNumber+1)
}

// finish checks what the tab recorded and saves a screenshot when the test failed.
func (tb *tab) finish() {
	t := tb.t
	tb.mu.Lock()
	tb.closed = true
	tb.mu.Unlock()
	waited := make(chan struct{})
	go func() { tb.bodies.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Errorf("response bodies still unread after 10 s")
	}
	tb.mu.Lock()
	exceptions, violations, foreign, pages := tb.exceptions, tb.violations, tb.foreign, tb.pages
	var xs []exchange
	for _, id := range tb.order {
		xs = append(xs, *tb.exchanges[id])
	}
	tb.mu.Unlock()
	for _, e := range exceptions {
		t.Errorf("uncaught exception in the page: %s", e)
	}
	for _, v := range violations {
		t.Errorf("Content-Security-Policy violation in the page: %s", v)
	}
	for _, u := range foreign {
		t.Errorf("the page requested %s, outside the service (every asset must be embedded)", u)
	}
	tb.checkContract(xs, pages)
	if t.Failed() {
		tb.screenshot()
	}
}

// checkContract validates every API request the page sent and every answer
// it got against openapi.yaml.
func (tb *tab) checkContract(xs []exchange, pages int) {
	t := tb.t
	doc := *tb.s.spec
	doc.Servers = openapi3.Servers{{URL: tb.base}}
	router, err := legacy.NewRouter(&doc)
	if err != nil {
		t.Errorf("openapi.yaml router: %v", err)
		return
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
	for _, x := range xs {
		if !x.done || x.status == 0 {
			continue // cancelled or still in flight when the test ended
		}
		what := fmt.Sprintf("%s %s -> %d", x.method, strings.TrimPrefix(x.url, tb.base), x.status)
		if x.bodyErr != nil && x.page < pages {
			continue // the browser drops a page's bodies when it leaves the page
		}
		if x.bodyErr != nil {
			t.Errorf("%s: read the response body: %v", what, x.bodyErr)
			continue
		}
		req, err := http.NewRequest(x.method, x.url, bytes.NewReader(x.reqBody))
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		for k, v := range x.reqHeaders {
			req.Header.Set(k, fmt.Sprint(v))
		}
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Errorf("%s: no operation of openapi.yaml matches: %v", what, err)
			continue
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("%s: the request breaks openapi.yaml: %v", what, err)
		}
		h := http.Header{}
		for k, v := range x.respHeaders {
			h.Set(k, fmt.Sprint(v))
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: x.status, Header: h, Options: opts}
		out.SetBodyBytes(x.respBody)
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Errorf("%s: the answer breaks openapi.yaml: %v", what, err)
		}
	}
}

// tabsOpened counts the tabs each test has opened.
var tabsOpened = tabCounts{n: map[*testing.T]int{}}

type tabCounts struct {
	mu sync.Mutex
	n  map[*testing.T]int
}

// next returns the number of t's tab being opened: 1 for its first.
func (c *tabCounts) next(t *testing.T) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[t] == 0 {
		t.Cleanup(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			delete(c.n, t)
		})
	}
	c.n[t]++
	return c.n[t]
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// artifactName is the name, without extension, of the tab's screenshot and
// page: the test's, and for a test's second tab on, the tab's number after
// it, so that each tab of a failed test keeps its own.
func (tb *tab) artifactName() string {
	name := unsafeName.ReplaceAllString(tb.t.Name(), "_")
	if tb.nth > 1 {
		name += fmt.Sprintf("-tab%d", tb.nth)
	}
	return name
}

// artifacts is where screenshots of failed tests go: $SEENAPI_ARTIFACTS, or
// a directory kept under the system's temp dir.
var artifacts = sync.OnceValues(func() (string, error) {
	if d := os.Getenv("SEENAPI_ARTIFACTS"); d != "" {
		d = filepath.Join(d, "web")
		return d, os.MkdirAll(d, 0o755)
	}
	return os.MkdirTemp("", "seenapi-web-artifacts-")
})

func (tb *tab) screenshot() {
	t := tb.t
	dir, err := artifacts()
	if err != nil {
		t.Logf("no screenshot: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(tb.tabc, 10*time.Second)
	defer cancel()
	name := filepath.Join(dir, tb.artifactName())
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err != nil {
		t.Logf("no screenshot: %v", err)
	} else if err := os.WriteFile(name+".png", png, 0o644); err == nil {
		t.Logf("screenshot of the failed page: %s.png", name)
	}
	if html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`)); err == nil {
		os.WriteFile(name+".html", []byte(html), 0o644)
	}
}

// ---------- page actions ----------

// errStuck is the error of a step the browser did not finish in its time.
var errStuck = errors.New("the browser did not answer")

// bounded runs f, a step in the tab of ctx, and waits for it until ctx's
// deadline or limit, whichever comes first, and a grace after. A step that
// is still running then (chromedp can wait on a stalled browser where its
// context does not reach: a tab being opened, a lock of its event loop)
// is left, the tab closed with stop, and errStuck answered.
func bounded[T any](ctx context.Context, stop func(), limit time.Duration, f func() (T, error)) (T, error) {
	d := limit
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	timer := time.NewTimer(d + 5*time.Second)
	defer timer.Stop()
	select {
	case r := <-done:
		if r.err != nil && errors.Is(r.err, context.DeadlineExceeded) {
			r.err = fmt.Errorf("%w: not done within %s (a stalled or starved browser)", r.err, d.Round(time.Second))
		}
		return r.v, r.err
	case <-timer.C:
		stop()
		var zero T
		return zero, fmt.Errorf("%w: still running %s after its deadline; its tab is closed", errStuck, (d + 5*time.Second).Round(time.Second))
	}
}

// run runs a in the tab within stepLimit (and the test's deadline).
func run[T any](tb *tab, a chromedp.Action[T]) (T, error) {
	return runWithin(tb, a, stepLimit)
}

// runWithin runs a in the tab, giving it up after limit (see bounded).
func runWithin[T any](tb *tab, a chromedp.Action[T], limit time.Duration) (T, error) {
	ctx, cancel := context.WithTimeout(tb.ctx, limit)
	defer cancel()
	return bounded(ctx, tb.stop, limit, func() (T, error) { return chromedp.Run(ctx, a) })
}

// do runs steps in the tab and fails the test on error.
func (tb *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if _, err := run(tb, chromedp.Steps(steps...)); err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// open loads the dashboard at fragment (e.g. "#/ns/default/users/42") as a
// fresh page load; sessionStorage survives, as in a real tab.
func (tb *tab) open(fragment string) {
	tb.t.Helper()
	tb.mu.Lock()
	tb.pages++
	tb.mu.Unlock()
	tb.do("open "+fragment, chromedp.Navigate("about:blank"), chromedp.Navigate(tb.base+"/"+fragment),
		chromedp.WaitReady(chromedp.CSS("#view")))
}

// roleSettled is true once no check of the key's role is in flight.
const roleSettled = `!document.querySelector('#role').textContent.includes('checking')`

// roleAnswered is true once a check of the role has been answered: the
// role no longer reads "checking", nor "role: unknown", the page's text
// before its script runs.
const roleAnswered = roleSettled + ` && document.querySelector('#role').textContent !== 'role: unknown'`

// useKey enters key in the page's key form and waits for the key's first
// check. It first waits for the check the page made before (at its load),
// as a person reads the page before typing: its answer draws the rest of
// the page, and on the inspector's page moves the focus to the user id's
// field, where the key's last keys would then go (on a loaded machine the
// answer came while the key was typed: the form sent part of the key, or
// none). A key not wholly in the field fails the test, saying so.
func (tb *tab) useKey(key string) {
	tb.t.Helper()
	tb.waitJS(roleAnswered, "the answer to the page's own check of the role, before the key is typed")
	tb.do("type the key", chromedp.SendKeys(chromedp.CSS("#key-input"), key))
	if got := eval[string](tb, `document.querySelector('#key-input').value`); got != key {
		tb.t.Fatalf("the key's field holds %q after the key %q was typed (the focus left it)", got, key)
	}
	tb.click(`#key-form button[type="submit"]`)
	tb.waitJS(roleSettled, "the key to be checked")
}

// apiCalls counts the requests for method path (without its query, nor the
// prefix a proxy serves the service under) the page has sent so far.
func (tb *tab) apiCalls(method, path string) int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	n := 0
	for _, id := range tb.order {
		x := tb.exchanges[id]
		if u, err := url.Parse(x.url); err == nil && x.method == method && u.Path == tb.prefix+path {
			n++
		}
	}
	return n
}

// eval returns the value of a JavaScript expression in the page.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	v, err := run(tb, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until the expression is truthy.
func (tb *tab) waitJS(expr, what string) {
	tb.t.Helper()
	tb.waitJSWithin(expr, what, waitFor)
}

// waitJSWithin waits up to d until the expression is truthy.
func (tb *tab) waitJSWithin(expr, what string, d time.Duration) {
	tb.t.Helper()
	if _, err := runWithin(tb, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(d),
		chromedp.WithPollingInterval(50*time.Millisecond)), max(stepLimit, d+10*time.Second)); err != nil {
		view, _ := runWithin(tb, chromedp.Evaluate[string](`document.body.innerText`), 10*time.Second)
		tb.t.Fatalf("waiting for %s: %v\npage text:\n%s", what, err, view)
	}
}

// passTime moves the tab's clock on by d at once, on the browser's virtual
// time (CDP Emulation.setVirtualTimePolicy): every timer the page set that
// falls due within d runs, in order, as in d of real time, so a test of what
// the page does not do within d needs not wait d. With answered, the clock
// stands still while a request is in flight, as if the service answered at
// once: the requests the timers send are answered, and what their answers
// start runs, within d. Without, it moves on while requests go unanswered,
// as for a stalled service.
//
// The clock then stays stopped: the page's timers no longer fire, nor do the
// waits polled in the page (waitJS, waitText: use waitGo), and a page load
// does not finish; only another passTime moves the page on.
func (tb *tab) passTime(d time.Duration, answered bool) {
	tb.t.Helper()
	policy := emulation.VirtualTimePolicyAdvance
	if answered {
		policy = emulation.VirtualTimePolicyPauseIfNetworkFetchesPending
	}
	expired := make(chan struct{})
	ctx, cancel := context.WithCancel(tb.ctx)
	defer cancel()
	var once sync.Once
	if err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*emulation.EventVirtualTimeBudgetExpired); ok {
			once.Do(func() { close(expired) })
		}
	}); err != nil {
		tb.t.Fatalf("listen for the end of %s of the page's time: %v", d, err)
	}
	budget := float64(d.Milliseconds())
	if _, err := bounded(ctx, tb.stop, stepLimit, func() (emulation.SetVirtualTimePolicyResult, error) {
		return chromedp.Call(ctx, emulation.SetVirtualTimePolicy, emulation.SetVirtualTimePolicyParams{Policy: policy, Budget: &budget})
	}); err != nil {
		tb.t.Fatalf("move the page's clock on by %s: %v", d, err)
	}
	select {
	case <-expired:
	case <-time.After(stepLimit):
		tb.t.Fatalf("the page's clock not moved on by %s within %s", d, stepLimit)
	}
}

// passTimeUntil moves the tab's clock on, its requests answered, by steps
// of a quarter of a second until the expression is truthy, and fails the
// test when it is not within limit of the page's time: waitJS on the
// page's clock, for what the page does at its refreshes, without waiting
// for them. The clock then stays stopped, as after passTime.
func (tb *tab) passTimeUntil(expr, what string, limit time.Duration) {
	tb.t.Helper()
	const step = 250 * time.Millisecond
	for passed := time.Duration(0); !eval[bool](tb, expr); passed += step {
		if passed >= limit {
			view, _ := runWithin(tb, chromedp.Evaluate[string](`document.body.innerText`), 10*time.Second)
			tb.t.Fatalf("waiting for %s: not within %s of the page's time\npage text:\n%s", what, limit, view)
		}
		tb.passTime(step, true)
	}
}

// waitGo waits until the expression is truthy, evaluating it from the test
// (waitJS polls in the page, on the page's clock, which passTime stops).
func (tb *tab) waitGo(expr, what string) {
	tb.t.Helper()
	for deadline := time.Now().Add(waitFor); !eval[bool](tb, expr); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			view, _ := runWithin(tb, chromedp.Evaluate[string](`document.body.innerText`), 10*time.Second)
			tb.t.Fatalf("waiting for %s: not within %s\npage text:\n%s", what, waitFor, view)
		}
	}
}

// waitText waits until the element sel exists and its text contains want, and returns the text.
func (tb *tab) waitText(sel, want string) string {
	tb.t.Helper()
	tb.waitJS(fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.includes(%q); })()`, sel, want),
		fmt.Sprintf("%s to contain %q", sel, want))
	return tb.text(sel)
}

// text returns the text of the first element matching sel ("" when none).
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return eval[string](tb, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.textContent.trim() : ''; })()`, sel))
}

// axNode is a node of the page's accessibility tree: what a screen reader
// is told of an element.
type axNode struct {
	role, name, description string
	props                   map[string]string // its properties (invalid, required, ...), each value as JSON
}

// axTree returns the page's accessibility tree as the browser exposes it
// (CDP Accessibility.getFullAXTree), without the nodes it leaves out of it.
func (tb *tab) axTree() []axNode {
	tb.t.Helper()
	r, err := run(tb, chromedp.Action[accessibility.GetFullAXTreeResult](
		func(ctx context.Context, _ *chromedp.Target) (accessibility.GetFullAXTreeResult, error) {
			return chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
		}))
	if err != nil {
		tb.t.Fatalf("the page's accessibility tree: %v", err)
	}
	var nodes []axNode
	for _, n := range r.Nodes {
		if !n.Ignored {
			nodes = append(nodes, toAXNode(n))
		}
	}
	return nodes
}

// wantTied fails the test unless the field sel is said invalid and is
// described by errText: an error of what was typed there, tied to it.
// what says when.
func (tb *tab) wantTied(sel, what, errText string) {
	tb.t.Helper()
	if n := tb.ax(sel); n.props["invalid"] != `"true"` || !strings.Contains(n.description, errText) {
		tb.t.Errorf("%s: %s is said invalid=%s and described %q, want invalid and described by %q",
			what, sel, n.props["invalid"], n.description, errText)
	}
}

// wantUntied fails the test if the field sel is still said invalid, or is
// still described by errText, or is not described by help ("": any).
func (tb *tab) wantUntied(sel, what, errText, help string) {
	tb.t.Helper()
	n := tb.ax(sel)
	if n.props["invalid"] == `"true"` || (errText != "" && strings.Contains(n.description, errText)) {
		tb.t.Errorf("%s: %s is still said invalid=%s, described %q", what, sel, n.props["invalid"], n.description)
	}
	if !strings.Contains(n.description, help) {
		tb.t.Errorf("%s: %s is described %q, want its help %q", what, sel, n.description, help)
	}
}

// ax returns the accessibility node of the first element matching sel.
func (tb *tab) ax(sel string) axNode {
	tb.t.Helper()
	n, err := run(tb, chromedp.Action[*accessibility.Node](func(ctx context.Context, _ *chromedp.Target) (*accessibility.Node, error) {
		els, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS(sel)))
		if err != nil {
			return nil, err
		}
		fetchRelatives := false
		r, err := chromedp.Call(ctx, accessibility.GetPartialAXTree, accessibility.GetPartialAXTreeParams{
			BackendNodeID: els[0].BackendNodeID, FetchRelatives: &fetchRelatives})
		if err != nil {
			return nil, err
		}
		for _, n := range r.Nodes {
			if n.BackendDOMNodeID == els[0].BackendNodeID {
				return n, nil
			}
		}
		return nil, fmt.Errorf("no node of the accessibility tree is %s's", sel)
	}))
	if err != nil {
		tb.t.Fatalf("the accessibility node of %s: %v", sel, err)
	}
	return toAXNode(n)
}

func toAXNode(n *accessibility.Node) axNode {
	text := func(v *accessibility.Value) string {
		if v == nil {
			return ""
		}
		var s string
		if json.Unmarshal(v.Value, &s) != nil {
			return string(v.Value)
		}
		return s
	}
	a := axNode{role: text(n.Role), name: text(n.Name), description: text(n.Description), props: map[string]string{}}
	for _, p := range n.Properties {
		a.props[string(p.Name)] = string(p.Value.Value)
	}
	return a
}

// fill replaces the value of the field sel.
func (tb *tab) fill(sel, value string) {
	tb.t.Helper()
	tb.do("fill "+sel, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).value = ''`, sel)),
		chromedp.SendKeys(chromedp.CSS(sel), value))
}

func (tb *tab) click(sel string) {
	tb.t.Helper()
	tb.do("click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// problemDetail returns the detail of the problem+json the API answers
// method path with key, for comparing with what the page shows.
func (svc *service) problemDetail(t *testing.T, method, path, key, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, svc.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p struct {
		Detail string `json:"detail"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &p); err != nil || p.Detail == "" {
		t.Fatalf("%s %s: HTTP %d without a problem detail: %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, p.Detail
}

// A step the browser never finishes, one that does not heed its context as
// chromedp waiting on a stalled browser may not, fails within its bound,
// saying so, instead of holding the test until go test's timeout.
func TestAStuckStepFailsWithinItsBound(t *testing.T) {
	s := setup(t)
	tb := s.newTab(t, nil)
	tb.open("")
	stuck := make(chan struct{})
	defer close(stuck)
	never := func(context.Context, *chromedp.Target) (chromedp.Void, error) {
		<-stuck
		return chromedp.Void{}, nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := runWithin(tb, chromedp.Action[chromedp.Void](never), time.Second)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errStuck) {
			t.Errorf("the stuck step answered %v, want errStuck", err)
		}
		// The tab is closed: a step after it fails at once.
		if _, err := runWithin(tb, chromedp.Evaluate[int](`1`), 10*time.Second); err == nil {
			t.Errorf("the tab of the stuck step still runs steps")
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("a stuck step still held the test after 30 s (its bound: 1 s and a grace of 5 s)")
	}
}

// Each tab of a test keeps its screenshot and page of a failure under a
// name of its own: a test's second tab saved its own over its first's.
func TestEachTabOfATestSavesItsFailureApart(t *testing.T) {
	s := setup(t)
	first, second := s.newTab(t, nil), s.newTab(t, nil)
	if a, b := first.artifactName(), second.artifactName(); a == b {
		t.Errorf("two tabs of one test save their failures both as %q", a)
	}
	if got, want := first.artifactName(), "TestEachTabOfATestSavesItsFailureApart"; got != want {
		t.Errorf("the first tab saves its failure as %q, want the test's name %q", got, want)
	}
}

// A service that cannot take its address, another server's, fails to
// start saying why: the other server's answer to /readyz is not taken for
// the service's own (the tests would then call a server that is not
// seenapi, or another test's).
func TestAServiceIsReadyOnlyWhereItSaysItServes(t *testing.T) {
	s := setup(t)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer other.Close()
	svc, err := s.startServiceWith("data-"+userID(t), s.keysArg, other.Listener.Addr().String())
	if err == nil {
		svc.stop()
		t.Fatalf("started on %s, where another server answers", svc.base)
	}
	if !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("want the service's own reason: %v", err)
	}
}
