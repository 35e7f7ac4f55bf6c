package client

import (
	"net/http"
	"strconv"
)

// Every call of ClientWithResponses gives its answer, status, headers and
// body, whatever the body: the parse functions are oapi-codegen's with a
// template of this package (client-with-responses.tmpl) in place of its
// own, since oapi-codegen's return no response at all for a body that
// does not decode as the JSON the document gives its status (a proxy's
// page sent as application/json, a HEAD's empty body under a JSON type).
//
// An error answer (not 2xx) whose body is not the documented problem is a
// foreign one: the call returns no error, its typed field
// (ApplicationproblemJSON503, ...) is nil, and ProblemOf makes a problem
// of its status and body as of any other. A success whose body is not
// the documented JSON is an error, a *BodyError, given with the response,
// so that a caller never finds JSON200 nil without one.

// A BodyError is the error of a call answered with a success (2xx) whose
// body is not the JSON the document gives that answer: a body that does
// not decode, or one of another media type (a proxy's or a captive
// portal's page). The call's response is returned with it.
type BodyError struct {
	// Status and ContentType are the answer's.
	Status      int
	ContentType string
	// Err is the decoding's error; nil when the body was not decoded, its
	// Content-Type not being the documented one (JSON; YAML for
	// GetOpenAPI).
	Err error
	// Start is the start of the body, as ProblemOf keeps a foreign one's.
	Start string
}

func (e *BodyError) Error() string {
	s := strconv.Itoa(e.Status) + " answer's body is not the documented JSON"
	if e.ContentType == "" {
		s += " (no Content-Type)"
	} else {
		s += " (Content-Type " + e.ContentType + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Start != "" {
		s += ": " + e.Start
	}
	return s
}

// Unwrap gives the decoding's error.
func (e *BodyError) Unwrap() error { return e.Err }

// answerError is the error a parse function returns with its response:
// nil for an error answer (ProblemOf reads it), for a success whose
// documented body was decoded and for an answer to HEAD, which has no body
// (a GET route's, sent as HEAD by a request editor); else a *BodyError.
// decodeErr is the decoding's, missing says the success has no documented
// body decoded.
func answerError(rsp *http.Response, body []byte, decodeErr error, missing bool) error {
	if rsp.StatusCode < 200 || rsp.StatusCode > 299 || decodeErr == nil && !missing ||
		rsp.Request != nil && rsp.Request.Method == http.MethodHead {
		return nil
	}
	return &BodyError{Status: rsp.StatusCode, ContentType: rsp.Header.Get("Content-Type"), Err: decodeErr, Start: bodyStart(body)}
}
