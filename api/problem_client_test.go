package api_test

import (
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/seenapi/seenapi/client"
)

func TestTheClientGivesAnyAnswersProblemAsAnError(t *testing.T) {
	e := newEnv(t)
	c := e.client("")

	ok, err := c.FilterUserWithResponse(ctx, "default", "u1", nil, client.FilterRequest{Candidates: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := client.ProblemOf(ok.HTTPResponse, ok.Body); p != nil {
		t.Errorf("a 200 gives the problem %v; want none", p)
	}

	// A request the document refuses, sent as a careless caller would:
	// the validating client of these tests would not send it.
	plain, err := client.NewClientWithResponses(e.base)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := plain.FilterUserWithResponse(ctx, "default", "u1", nil, client.FilterRequest{Candidates: []string{""}})
	if err != nil {
		t.Fatal(err)
	}
	got := client.ProblemOf(bad.HTTPResponse, bad.Body)
	if got == nil {
		t.Fatalf("a 400 gives no problem: %s", bad.Body)
	}
	var asErr error = got
	const want400 = "400 Bad request: item /candidates/0 is empty or null (https://seenapi.dev/problems/bad-request)"
	if asErr.Error() != want400 {
		t.Errorf("a refused call's problem reads %v; want %q", asErr, want400)
	}
	var p *client.Problem
	if !errors.As(asErr, &p) || bad.ApplicationproblemJSON400 == nil || *p.Detail != *bad.ApplicationproblemJSON400.Detail {
		t.Errorf("the problem %+v is not the answer's %+v", p, bad.ApplicationproblemJSON400)
	}

	missing, err := c.GetUserWithResponse(ctx, "nosuch", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if p := client.ProblemOf(missing.HTTPResponse, missing.Body); p == nil || p.Status != http.StatusNotFound ||
		p.Type != "https://seenapi.dev/problems/unknown-namespace" {
		t.Errorf("an unknown namespace's problem is %v; want a 404 unknown-namespace", p)
	}

	// A proxy in front of the service answers with a page of its own.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxy := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte("  <html>upstream gone</html>\n"))
	})}
	go proxy.Serve(ln)
	t.Cleanup(func() { proxy.Close() })
	pc, err := client.NewClientWithResponses("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	gw, err := pc.FilterUserWithResponse(ctx, "default", "u1", nil, client.FilterRequest{Candidates: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	const want502 = "502 Bad Gateway: <html>upstream gone</html>"
	if p := client.ProblemOf(gw.HTTPResponse, gw.Body); p == nil || p.Error() != want502 || p.Type != "about:blank" {
		t.Errorf("a proxy's 502 page gives the problem %+v; want %q, type about:blank", p, want502)
	}
}
