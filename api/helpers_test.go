package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/client"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

func init() {
	// The dashboard's page is text/html; the validator reads it as text.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
}

// Keys of the tests' key-protected servers.
const (
	readKey  = "read-key-0123456789abcdef"
	writeKey = "write-key-0123456789abcdef"
	adminKey = "admin-key-0123456789abcdef"
)

var testKeys = []api.Key{
	{Role: api.RoleRead, Secret: readKey},
	{Role: api.RoleWrite, Secret: writeKey},
	{Role: api.RoleAdmin, Secret: adminKey},
}

// testNamespaces are "default" (the staged kind), "capped" (a user holds at
// most 5 items), "bloom", "compact" and "staged", one of each kind.
func testNamespaces() []eviction.Namespace {
	capped := userfilter.DefaultProfile()
	capped.MaxItems = 5
	return []eviction.Namespace{
		{Name: "default", Profile: userfilter.DefaultProfile()},
		{Name: "bloom", Profile: userfilter.Profile{Kind: userfilter.KindBloom}.WithDefaults()},
		{Name: "capped", Profile: capped},
		{Name: "compact", Profile: userfilter.Profile{Kind: userfilter.KindCompact}.WithDefaults()},
		{Name: "staged", Profile: userfilter.Profile{Kind: userfilter.KindStaged}.WithDefaults()},
	}
}

// loadSpec loads and validates openapi.yaml.
func loadSpec(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("openapi.yaml is not valid: %v", err)
	}
	return doc
}

// env is a real server on a loopback port over a real hot set over a real
// Badger store in a temp dir, with a generated client whose every request
// and answer is validated against openapi.yaml.
type env struct {
	t     testing.TB
	store *storage.Store
	hot   *eviction.HotSet
	srv   *api.Server
	base  string
	val   *validator
	done  chan error
	once  sync.Once
	// broken: the store was closed under the hot set on purpose; closing
	// then reports errors the test expects.
	broken bool
}

type envOption func(*api.Config)

func withKeys(c *api.Config) { c.Keys = testKeys }

// dial opens a raw connection to the env's server, closed when the test
// ends, for requests the client would not send; addr is the server's.
func (e *env) dial(t testing.TB) (conn net.Conn, addr string) {
	t.Helper()
	addr = strings.TrimPrefix(e.base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, addr
}

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	return newEnvOver(t, nil, opts...)
}

// newEnvOver is newEnv with the hot set over wrap(store) (the store itself
// when wrap is nil): a real store with a fault of the test's making.
func newEnvOver(t testing.TB, wrap func(*storage.Store) eviction.Store, opts ...envOption) *env {
	t.Helper()
	return newEnvIn(t, storage.DefaultOptions(t.TempDir()), wrap, opts...)
}

// newEnvIn is newEnvOver with a store of the given options (its directory
// kept by the caller, for a restart, say).
func newEnvIn(t testing.TB, so storage.Options, wrap func(*storage.Store) eviction.Store, opts ...envOption) *env {
	t.Helper()
	store, err := storage.Open(so.WithMinFreeBytes(-1).WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	var hotStore eviction.Store = store
	if wrap != nil {
		hotStore = wrap(store)
	}
	hot, err := eviction.New(hotStore, testNamespaces(), eviction.Options{FlushInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	cfg := api.Config{Logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := api.New(hot, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: store, hot: hot, srv: srv, base: "http://" + ln.Addr().String(), done: make(chan error, 1)}
	go func() { e.done <- srv.Serve(ln) }()
	e.val = newValidator(t, e.base)
	t.Cleanup(e.close)
	return e
}

// as returns e reporting to t: a fuzz target's env is made once, with the
// *testing.F, and each input must report to its own *testing.T. Close it
// through e, not through what as returns.
func (e *env) as(t testing.TB) *env {
	return &env{t: t, store: e.store, hot: e.hot, srv: e.srv, base: e.base,
		val: &validator{t: t, router: e.val.router, hc: e.val.hc}, broken: e.broken}
}

// close shuts the server down, then the hot set (writing back), then the
// store; once.
func (e *env) close() { e.once.Do(e.shutdown) }

func (e *env) shutdown() {
	// Go's transport may dial a connection it then never sends a request
	// on (another became free first) and keep it idle. fasthttp counts such
	// a connection active from its accept, so Shutdown waits for it until
	// the server's ReadTimeout (10 s): as long as the wait below, which a
	// test under the race detector once lost. Close those first.
	e.val.hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		e.t.Errorf("shutdown: %v", err)
	}
	if err := <-e.done; err != nil {
		e.t.Errorf("serve: %v", err)
	}
	if err := e.hot.Close(); err != nil && !e.broken {
		e.t.Errorf("hot set close: %v", err)
	}
	if err := e.store.Close(); err != nil {
		e.t.Errorf("store close: %v", err)
	}
}

// client returns a generated client sending key (none if ""), validating
// every request and answer.
func (e *env) client(key string) *client.ClientWithResponses {
	e.t.Helper()
	c, err := client.NewClientWithResponses(e.base, client.WithHTTPClient(e.val.doer(true)),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if key != "" {
				r.Header.Set("Authorization", "Bearer "+key)
			}
			return nil
		}))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// raw sends a hand-made request (validating only the answer against the
// document) and returns the status, headers and body.
func (e *env) raw(method, path, contentType string, body []byte, header ...string) (int, http.Header, []byte) {
	e.t.Helper()
	status, h, b, err := e.rawErr(method, path, contentType, body, header...)
	if err != nil {
		e.t.Fatal(err)
	}
	return status, h, b
}

// rawErr is raw returning the transport's error instead of failing.
func (e *env) rawErr(method, path, contentType string, body []byte, header ...string) (int, http.Header, []byte, error) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.base+"/", bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	// Send the path exactly as given, even when it is not a valid escaping.
	req.URL.Opaque, req.URL.RawQuery, _ = strings.Cut(path, "?")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" { // net/http sends req.Host, not a Host header
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.val.doer(false).Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, b, nil
}

// validator checks requests and answers against openapi.yaml.
type validator struct {
	t      testing.TB
	router routers.Router
	hc     *http.Client
}

func newValidator(t testing.TB, base string) *validator {
	doc := loadSpec(t)
	closeObjects(doc)
	doc.Servers = openapi3.Servers{{URL: base}}
	r, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &validator{t: t, router: r, hc: &http.Client{Timeout: 30 * time.Second}}
}

// closeObjects makes every object schema of doc that lists its members
// and says nothing of others refuse others (additionalProperties: false),
// so that an answer carrying a member openapi.yaml does not document fails
// its validation: a client generated from the document would drop it
// unseen.
func closeObjects(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var walk func(s *openapi3.SchemaRef)
	walk = func(s *openapi3.SchemaRef) {
		if s == nil || s.Value == nil || seen[s.Value] {
			return
		}
		v := s.Value
		seen[v] = true
		if len(v.Properties) > 0 && v.AdditionalProperties.Has == nil && v.AdditionalProperties.Schema == nil {
			v.AdditionalProperties.Has = openapi3.Ptr(false)
		}
		for _, p := range v.Properties {
			walk(p)
		}
		walk(v.Items)
		walk(v.AdditionalProperties.Schema)
	}
	for _, s := range doc.Components.Schemas {
		walk(s)
	}
}

type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

// doer returns an HTTP client that validates each answer, and each request
// too when checkRequest is set.
func (v *validator) doer(checkRequest bool) doerFunc {
	return func(req *http.Request) (*http.Response, error) {
		v.t.Helper()
		var body []byte
		if req.Body != nil {
			var err error
			if body, err = io.ReadAll(req.Body); err != nil {
				return nil, err
			}
			req.Body.Close()
		}
		reset := func() { req.Body = io.NopCloser(bytes.NewReader(body)) }
		// Route on the escaped path so that a user id holding "%2F" stays one
		// segment, then decode the parameters.
		find := req.Clone(req.Context())
		find.URL.Path = req.URL.EscapedPath()
		if req.URL.Opaque != "" {
			find.URL.Path, find.URL.Opaque = req.URL.Opaque, ""
		}
		route, params, err := v.router.FindRoute(find)
		if err != nil {
			v.t.Errorf("%s %s is not in openapi.yaml: %v", req.Method, req.URL.Path, err)
			reset()
			return v.hc.Do(req)
		}
		for k, p := range params {
			if u, err := url.PathUnescape(p); err == nil {
				params[k] = u
			}
		}
		opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
			IncludeResponseStatus: true, MultiError: true}
		// Validate a copy: the validator rewrites the body it reads (filling defaults).
		vreq := req.Clone(req.Context())
		vreq.Body = io.NopCloser(bytes.NewReader(body))
		in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: opts}
		if checkRequest {
			if err := openapi3filter.ValidateRequest(req.Context(), in); err != nil {
				v.t.Errorf("request %s %s does not fit openapi.yaml: %v", req.Method, req.URL.Path, err)
			}
		}
		reset()
		resp, err := v.hc.Do(req)
		if err != nil {
			return nil, err
		}
		rb, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(rb))
		if req.Method == http.MethodHead {
			return resp, nil
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode,
			Header: resp.Header, Options: opts}
		out.SetBodyBytes(rb)
		if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
			v.t.Errorf("answer %d to %s %s does not fit openapi.yaml: %v\n%s", resp.StatusCode, req.Method,
				req.URL.Path, err, truncate(rb))
		}
		v.checkParameters(route, find.URL.Path, resp, rb)
		// A problem's type is named by the response openapi.yaml gives its
		// status for the operation or, for a status the operation does not
		// list, by its default response (the types any route may answer).
		if resp.StatusCode >= 400 {
			var p struct{ Type string }
			_ = json.Unmarshal(rb, &p)
			slug := strings.TrimPrefix(p.Type, api.ProblemBase)
			r := route.Operation.Responses.Status(resp.StatusCode)
			if r == nil {
				r = route.Operation.Responses.Default()
			}
			if r == nil || !strings.Contains(*r.Value.Description, "`"+slug+"`") {
				v.t.Errorf("answer %d %s to %s %s: openapi.yaml's response for it does not name the type",
					resp.StatusCode, slug, req.Method, route.Path)
			}
		}
		// The validator checks the headers a response declares, not that
		// the headers sent are declared: a client generated from the
		// document would not know to read an undeclared Retry-After, or
		// the Allow of a 405.
		for _, h := range []string{"Retry-After", "Allow", "WWW-Authenticate", "Idempotent-Replayed", "Content-Disposition"} {
			if resp.Header.Get(h) != "" && !declaresHeader(route.Operation, resp.StatusCode, h) {
				v.t.Errorf("answer %d to %s %s carries %s, which its response in openapi.yaml does not declare",
					resp.StatusCode, req.Method, find.URL.Path, h)
			}
		}
		return resp, nil
	}
}

// checkParameters checks that each parameter a problem answer names in its
// errors is one a client can look up: a parameter of the operation (path,
// query or header), one the description of FieldError's parameter names
// (a header such as Content-Type), or a query parameter the route does not
// take, refused as such.
func (v *validator) checkParameters(route *routers.Route, path string, resp *http.Response, body []byte) {
	v.t.Helper()
	if resp.Header.Get("Content-Type") != "application/problem+json" {
		return
	}
	var p struct {
		Errors []struct{ Parameter, Detail string }
	}
	if json.Unmarshal(body, &p) != nil {
		return
	}
	named := route.Spec.Components.Schemas["FieldError"].Value.Properties["parameter"].Value.Description
	for _, fe := range p.Errors {
		if fe.Parameter == "" || strings.HasPrefix(fe.Detail, "not a query parameter of this route") ||
			strings.Contains(named, "`"+fe.Parameter+"`") {
			continue
		}
		declared := false
		for _, ps := range []openapi3.Parameters{route.PathItem.Parameters, route.Operation.Parameters} {
			declared = declared || ps.GetByInAndName(openapi3.ParameterInPath, fe.Parameter) != nil ||
				ps.GetByInAndName(openapi3.ParameterInQuery, fe.Parameter) != nil ||
				ps.GetByInAndName(openapi3.ParameterInHeader, fe.Parameter) != nil
		}
		if !declared {
			v.t.Errorf("answer %d to %s names the parameter %q, which neither its operation nor FieldError's parameter in openapi.yaml documents",
				resp.StatusCode, path, fe.Parameter)
		}
	}
}

// declaresHeader reports whether op's response for status (or its
// default, when it lists none for status) declares the header name.
func declaresHeader(op *openapi3.Operation, status int, name string) bool {
	r := op.Responses.Status(status)
	if r == nil {
		r = op.Responses.Default()
	}
	if r == nil || r.Value == nil {
		return false
	}
	_, ok := r.Value.Headers[name]
	return ok
}

func truncate(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "..."
	}
	return string(b)
}

// problem decodes a problem body and checks its content type and status.
func problem(t testing.TB, status int, h http.Header, body []byte) api.Problem {
	t.Helper()
	if ct := h.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("content type %q, want application/problem+json", ct)
	}
	var p api.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("problem body %q: %v", body, err)
	}
	if p.Status != status {
		t.Errorf("problem status %d, HTTP status %d", p.Status, status)
	}
	if !strings.HasPrefix(p.Type, api.ProblemBase) || p.Title == "" || p.Detail == "" {
		t.Errorf("problem lacks type, title or detail: %+v", p)
	}
	return p
}

// wantProblem checks that an answer is the problem of type slug (after
// api.ProblemBase) with status want.
func wantProblem(t testing.TB, status int, h http.Header, body []byte, want int, slug string) api.Problem {
	t.Helper()
	if status != want {
		t.Fatalf("status %d, want %d: %s", status, want, truncate(body))
	}
	p := problem(t, status, h, body)
	if p.Type != api.ProblemBase+slug {
		t.Fatalf("problem type %s, want %s%s", p.Type, api.ProblemBase, slug)
	}
	return p
}

// userPath is the path of a user's resource, the id percent-encoded.
func userPath(ns, user, suffix string) string {
	return "/v1/namespaces/" + ns + "/users/" + url.PathEscape(user) + suffix
}

// stateOf returns the user's stats as the API shows them, or nil if the
// user has no filter: the witness that a request changed nothing.
func (e *env) stateOf(ns, user string) map[string]any {
	e.t.Helper()
	status, _, body := e.raw(http.MethodGet, userPath(ns, user, ""), "", nil, "Authorization", "Bearer "+adminKey)
	if status == http.StatusNotFound {
		return nil
	}
	if status != http.StatusOK {
		e.t.Fatalf("user stats: %d %s", status, body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		e.t.Fatal(err)
	}
	delete(m, "hot") // may change with eviction, not with a request
	delete(m, "dirty")
	return m
}

func readAll(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantNotRendered fails t unless h, the headers of the answer named what,
// carries once each the headers of every answer but the dashboard's:
// nosniff, a Content-Security-Policy under which a browser that renders
// it anyway loads and runs nothing and frames it nowhere, X-Frame-Options
// for browsers that do not know CSP's frame-ancestors, and no Referer.
func wantNotRendered(t *testing.T, what string, h http.Header) {
	t.Helper()
	for name, want := range map[string]string{
		"X-Content-Type-Options":  "nosniff",
		"Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "no-referrer",
	} {
		if got := h.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s: %s %q, want %q once", what, name, got, want)
		}
	}
}
