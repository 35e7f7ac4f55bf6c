// Package client is the Go client of the seenapi REST API, generated from
// openapi.yaml by oapi-codegen (client and models). client.gen.go is
// generated: edit openapi.yaml and run `go generate ./client`; a test fails
// when the committed file is not what the generator makes of the document.
//
// Use NewClientWithResponses with the server's base URL; pass the API key
// with a request editor that sets "Authorization: Bearer KEY":
//
//	c, err := client.NewClientWithResponses("http://127.0.0.1:8080",
//		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
//			r.Header.Set("Authorization", "Bearer "+key)
//			return nil
//		}))
//	resp, err := c.FilterUserWithResponse(ctx, "default", "u:1001", nil,
//		client.FilterRequest{Candidates: []string{"i:1", "i:2"}})
//	if err != nil {
//		return err // no answer, or a success without its JSON (below)
//	}
//	if p := client.ProblemOf(resp.HTTPResponse, resp.Body); p != nil {
//		return p // any error answer, as an error (problem.go)
//	}
//	// resp.JSON200.Unseen; resp.ApplicationproblemJSON400 etc. hold the problems
//
// A problem's Type is a ProblemType, whose constants name the service's
// problem types (ProblemTypeRateLimited, ...), and about:blank
// (ProblemTypeAboutBlank: a proxy's, or ProblemOf's for a foreign body), so
// that a caller tells them apart without spelling their URIs; one it does
// not know (of a later service) it takes by its status.
//
// A call that got an answer returns it, with its status, headers and body,
// whatever its body: an error answer whose body is not the documented
// problem (a proxy's page, even one labelled JSON; a HEAD's empty body)
// leaves its typed field nil and is no error, ProblemOf reading it as any
// other; a success of another media type than the documented one (a
// captive portal's page in place of an export's application/octet-stream)
// or without its documented JSON is a *BodyError, returned with the
// answer. So a call with no error and no problem has its JSON200, or the
// bytes the document gives it in Body (answer.go; the parse functions come
// from client-with-responses.tmpl, oapi-codegen's own template but for
// them).
//
// A ...WithResponse call reads the whole body into Body. A backup is the
// size of the store: stream it with GetBackup (of the embedded
// ClientInterface), whose *http.Response body is read as it comes, as
// `seenapi backup --url` does; MediaTypeError(resp,
// "application/octet-stream") holds its type as the parse functions would.
//
// WithRetries sends a call again when it gets no answer or an answer that
// asks to retry, and gives each one call and batch call an Idempotency-Key
// so that a retry after a lost answer gets that answer instead of
// recording the next items (retry.go):
//
//	c, err := client.NewClientWithResponses("http://127.0.0.1:8080",
//		client.WithRetries(client.Retry{}))
//
// Retry bounds the retries by count (Max) or by time (For), and tells
// OnRetry of each, which may count them or end them: seenapi import-redis
// retries a recording for up to a minute and counts the retries for its
// log.
//
// The user ids "." and ".." are not taken by the service (400 bad-request
// from a client that sends them as they are), and this client cannot send
// them: it resolves each route's path as a URL, which takes them for the
// path's "this" and "parent" segments, so a call for one reaches another
// route (a 405, a 404 or a 400 that does not name the id). Refuse them
// before calling.
//
// A Client is safe for concurrent use when its HTTP client is (the default is).
package client

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml ../openapi.yaml
