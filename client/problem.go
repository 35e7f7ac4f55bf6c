package client

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// ProblemOf returns the problem an answer carries, or nil for a success
// (2xx). It takes any answer of this package, as ProblemOf(r.HTTPResponse,
// r.Body), so that a caller need not look through one field a status
// (ApplicationproblemJSON400, ApplicationproblemJSON404, ...) for the
// problem of a call. An error answer that is not application/problem+json
// (a proxy's page, say) gets a problem made of its status, type
// about:blank as RFC 9457 has it, and the start of its body as the detail.
func ProblemOf(resp *http.Response, body []byte) *Problem {
	if resp == nil || resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && mt == "application/problem+json" {
		var p Problem
		if json.Unmarshal(body, &p) == nil && p.Status != 0 {
			return &p
		}
	}
	p := &Problem{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode), Type: ProblemTypeAboutBlank}
	if d := bodyStart(body); d != "" {
		p.Detail = &d
	}
	return p
}

// bodyStart is the start of a foreign body, as text, that ProblemOf keeps
// as a detail and a BodyError shows.
func bodyStart(body []byte) string {
	return strings.TrimSpace(strings.ToValidUTF8(string(body[:min(len(body), maxForeignDetail)]), ""))
}

// maxForeignDetail bounds the bytes of a foreign body bodyStart keeps.
const maxForeignDetail = 200

// Error gives the problem as an error's text: status, title, detail and
// type, e.g. `400 Bad request: item /candidates/0 is empty or null
// (https://seenapi.dev/problems/bad-request)`, so that a caller can return
// it as it is (see ProblemOf). The detail names the first of Errors.
func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(p.Status))
	if p.Title != "" {
		b.WriteString(" " + p.Title)
	}
	if p.Detail != nil && *p.Detail != "" {
		b.WriteString(": " + *p.Detail)
	}
	if p.Type != "" && p.Type != ProblemTypeAboutBlank {
		b.WriteString(" (" + string(p.Type) + ")")
	}
	return b.String()
}
