package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/seenapi/seenapi/client"
)

// proxyAnswering serves every request with status, Content-Type ct and
// body, as a proxy or load balancer in front of the service may, and
// returns its base URL.
func proxyAnswering(t *testing.T, status int, ct, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Via", "1.1 lb")
		w.WriteHeader(status)
		w.Write([]byte(body))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// An error answer whose body is not the documented problem (a JSON array
// or string, an HTML page under a JSON type, a HEAD's empty body) still
// gives the caller its status, headers and body, and ProblemOf its problem.
func TestAnErrorAnswerThatDoesNotDecodeIsStillGiven(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		status   int
		ct, body string
		head     bool
	}{
		{"a JSON array", http.StatusBadGateway, "application/json", `["upstream","gone"]`, false},
		{"a JSON string", http.StatusServiceUnavailable, "application/json", `"down for maintenance"`, false},
		{"an HTML page labelled JSON", http.StatusBadGateway, "application/json; charset=utf-8", "<html>bad gateway</html>", false},
		{"a problem that is not one", http.StatusBadRequest, "application/problem+json", `{"status":"bad"}`, false},
		{"a HEAD's empty body", http.StatusBadGateway, "application/problem+json", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.NewClientWithResponses(proxyAnswering(t, tc.status, tc.ct, tc.body))
			if err != nil {
				t.Fatal(err)
			}
			var resp *http.Response
			var body []byte
			if tc.head {
				r, err := c.HeadHealthWithResponse(ctx)
				if err != nil {
					t.Fatalf("HeadHealthWithResponse: %v; want the answer", err)
				}
				if r.ApplicationproblemJSONDefault != nil {
					t.Errorf("an empty body decoded as %+v", r.ApplicationproblemJSONDefault)
				}
				resp, body = r.HTTPResponse, r.Body
			} else {
				r, err := c.FilterUserWithResponse(ctx, "default", "u1", nil, client.FilterRequest{Candidates: []string{"a"}})
				if err != nil {
					t.Fatalf("FilterUserWithResponse: %v; want the answer", err)
				}
				if r.ApplicationproblemJSON400 != nil || r.ApplicationproblemJSON503 != nil || r.ApplicationproblemJSONDefault != nil {
					t.Errorf("a foreign body filled a typed field: %+v", r)
				}
				if tc.status == http.StatusServiceUnavailable && (r.Headers503 == nil || r.Headers503.RetryAfter == nil || *r.Headers503.RetryAfter != "7") {
					t.Errorf("a 503's Retry-After is %+v; want 7", r.Headers503)
				}
				resp, body = r.HTTPResponse, r.Body
			}
			if resp == nil || resp.StatusCode != tc.status || resp.Header.Get("Via") != "1.1 lb" || string(body) != tc.body {
				t.Fatalf("got %v with body %q; want %d with Via and body %q", resp, body, tc.status, tc.body)
			}
			p := client.ProblemOf(resp, body)
			if p == nil || p.Status != tc.status || p.Type != "about:blank" {
				t.Errorf("ProblemOf gives %+v; want a %d about:blank", p, tc.status)
			}
		})
	}
}

// A success whose body is not the documented JSON is an error, given with
// the answer, so that a caller never meets a nil JSON200 without one.
func TestASuccessWithoutItsDocumentedBodyIsAnErrorWithTheAnswer(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, ct, body string
		decodeErr      bool
	}{
		{"a JSON array", "application/json", `["not","an","object"]`, true},
		{"a cut JSON object", "application/json", `{"unseen":["a"`, true},
		{"a captive portal's page", "text/html", "<html>sign in</html>", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.NewClientWithResponses(proxyAnswering(t, http.StatusOK, tc.ct, tc.body))
			if err != nil {
				t.Fatal(err)
			}
			r, err := c.FilterUserWithResponse(ctx, "default", "u1", nil, client.FilterRequest{Candidates: []string{"a"}})
			var be *client.BodyError
			if !errors.As(err, &be) {
				t.Fatalf("FilterUserWithResponse: error %v; want a *client.BodyError", err)
			}
			if r == nil || r.StatusCode() != http.StatusOK || r.JSON200 != nil || string(r.Body) != tc.body || r.HTTPResponse.Header.Get("Via") != "1.1 lb" {
				t.Fatalf("the answer with the error is %+v; want the 200 with its headers and body, JSON200 nil", r)
			}
			if be.Status != http.StatusOK || be.ContentType != tc.ct || !strings.Contains(err.Error(), tc.body[:5]) {
				t.Errorf("the error %+v reads %q", be, err)
			}
			var syntax *json.SyntaxError
			var typ *json.UnmarshalTypeError
			if decoded := errors.As(err, &syntax) || errors.As(err, &typ) || strings.Contains(err.Error(), "unexpected end of JSON"); decoded != tc.decodeErr {
				t.Errorf("the error %q carries a decoding error: %v; want %v", err, decoded, tc.decodeErr)
			}
		})
	}

	// A success without a documented body (an erase's 204) is no error.
	c, err := client.NewClientWithResponses(proxyAnswering(t, http.StatusNoContent, "text/plain", ""))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.ForgetUserWithResponse(ctx, "default", "u1"); err != nil || r.StatusCode() != http.StatusNoContent {
		t.Errorf("a 204: %v, %v", r, err)
	}

	// Nor is a GET route's 200 to HEAD, which has no body whatever its
	// Content-Type.
	c, err = client.NewClientWithResponses(proxyAnswering(t, http.StatusOK, "application/json", ""))
	if err != nil {
		t.Fatal(err)
	}
	head := func(_ context.Context, r *http.Request) error { r.Method = http.MethodHead; return nil }
	if r, err := c.GetStatsWithResponse(ctx, head); err != nil || r.StatusCode() != http.StatusOK || r.JSON200 != nil {
		t.Errorf("a HEAD's 200: %+v, %v; want the 200 and no error", r, err)
	}
}

// A success of another media type than the document gives it (a captive
// portal's or a proxy's sign-in page, answered 200 text/html) is a
// *BodyError on the routes whose body is not JSON too, where no typed field
// stays nil to tell: an export's bytes, a backup, the metrics and the
// document itself. The answer comes with it, for the caller to look at.
func TestASuccessOfAnotherMediaTypeIsABodyErrorOnEveryRoute(t *testing.T) {
	ctx := context.Background()
	const page = "<html>sign in to the network</html>"
	c, err := client.NewClientWithResponses(proxyAnswering(t, http.StatusOK, "text/html; charset=utf-8", page))
	if err != nil {
		t.Fatal(err)
	}
	type answer interface {
		StatusCode() int
		GetBody() []byte
	}
	for _, tc := range []struct {
		route, documented string
		call              func() (answer, error)
	}{
		{"export", "application/octet-stream", func() (answer, error) { return c.ExportUserWithResponse(ctx, "default", "u1") }},
		{"backup", "application/octet-stream", func() (answer, error) { return c.GetBackupWithResponse(ctx, nil) }},
		{"metrics", "text/plain", func() (answer, error) { return c.GetMetricsWithResponse(ctx) }},
		{"openapi.yaml", "application/yaml", func() (answer, error) { return c.GetOpenAPIWithResponse(ctx) }},
	} {
		t.Run(tc.route, func(t *testing.T) {
			r, err := tc.call()
			var be *client.BodyError
			if !errors.As(err, &be) {
				t.Fatalf("error %v; want a *client.BodyError", err)
			}
			if r.StatusCode() != http.StatusOK || string(r.GetBody()) != page {
				t.Errorf("the answer with the error is %d %q; want the 200 and its page", r.StatusCode(), r.GetBody())
			}
			want := "200 answer's body is text/html; charset=utf-8, not the documented " + tc.documented + ": " + page
			if be.Err != nil || be.ContentType != "text/html; charset=utf-8" || err.Error() != want {
				t.Errorf("the error %+v reads %q; want %q", be, err, want)
			}
		})
	}

	// The dashboard's page is HTML, whatever its parameters.
	if r, err := c.GetDashboardWithResponse(ctx); err != nil || string(r.Body) != page {
		t.Errorf("the dashboard: %v, %v", r, err)
	}

	// A backup read as it comes is held to its type by MediaTypeError.
	resp, err := c.GetBackup(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	err = client.MediaTypeError(resp, "application/octet-stream")
	if want := "200 answer's body is text/html; charset=utf-8, not the documented application/octet-stream: " + page; err == nil || err.Error() != want {
		t.Errorf("MediaTypeError: %v; want %q", err, want)
	}
}

// The documented media type is taken with any parameters and in any case,
// and an answer with no Content-Type is not taken for one.
func TestASuccessOfItsDocumentedMediaTypeIsNoError(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		ct      string
		noError bool
	}{
		{"application/octet-stream", true},
		{"Application/Octet-Stream; foo=bar", true},
		{"application/octet-streams", false},
		{"", false},
		{"application/json", false},
	} {
		c, err := client.NewClientWithResponses(proxyAnswering(t, http.StatusOK, tc.ct, "\x00\x01"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.ExportUserWithResponse(ctx, "default", "u1")
		if (err == nil) != tc.noError || r == nil || string(r.Body) != "\x00\x01" {
			t.Errorf("an export of Content-Type %q: %v, %v; want an error: %v", tc.ct, r, err, !tc.noError)
		}
	}
}
