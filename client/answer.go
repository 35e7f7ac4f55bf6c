package client

import (
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
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
// of its status and body as of any other. A success whose body is not of
// the media type the document gives it, or does not decode as its JSON, is
// an error, a *BodyError, given with the response: so that a caller never
// finds JSON200 nil without one, and never takes a captive portal's page
// for an export's bytes (application/octet-stream, which has no typed
// field to stay nil).

// A BodyError is the error of a call answered with a success (2xx) whose
// body is not what the document gives that answer: one of another media
// type (a proxy's or a captive portal's page), or JSON that does not
// decode. The call's response is returned with it.
type BodyError struct {
	// Status and ContentType are the answer's.
	Status      int
	ContentType string
	// Documented are the media types the document gives the answer, e.g.
	// application/json or, for ExportUser, application/octet-stream.
	Documented []string
	// Err is the decoding's error; nil when the body was not decoded, its
	// media type not being a documented one.
	Err error
	// Start is the start of the body, as ProblemOf keeps a foreign one's.
	Start string
}

func (e *BodyError) Error() string {
	s := strconv.Itoa(e.Status) + " answer's body "
	switch {
	case e.Err != nil:
		s += "is not the documented " + strings.Join(e.Documented, " or ") + ": " + e.Err.Error()
	case e.ContentType == "":
		s += "has no Content-Type; the documented one is " + strings.Join(e.Documented, " or ")
	default:
		s += "is " + e.ContentType + ", not the documented " + strings.Join(e.Documented, " or ")
	}
	if e.Start != "" {
		s += ": " + e.Start
	}
	return s
}

// Unwrap gives the decoding's error.
func (e *BodyError) Unwrap() error { return e.Err }

// answerError is the error a parse function returns with its response:
// nil for an error answer (ProblemOf reads it), for a success of a
// documented media type whose body, if JSON, was decoded, and for an
// answer to HEAD, which has no body (a GET route's, sent as HEAD by a
// request editor); else a *BodyError. decodeErr is the decoding's,
// documented the media types the document gives the answer's status (none:
// it has no body, and any body is left alone).
func answerError(rsp *http.Response, body []byte, decodeErr error, documented []string) error {
	if rsp.StatusCode < 200 || rsp.StatusCode > 299 || rsp.Request != nil && rsp.Request.Method == http.MethodHead {
		return nil
	}
	ct := rsp.Header.Get("Content-Type")
	switch {
	case len(documented) == 0: // a success without a body, such as a 204
		return nil
	case !ofMediaType(ct, documented):
		decodeErr = nil // of a body of another type, if any: beside the point
	case decodeErr == nil:
		return nil
	}
	return &BodyError{Status: rsp.StatusCode, ContentType: ct, Documented: documented, Err: decodeErr, Start: bodyStart(body)}
}

// MediaTypeError is answerError for an answer whose body the caller reads
// itself, as it comes (GetBackup's, say, of ClientInterface, whose parse
// function does not run): a *BodyError when rsp is a success (2xx, not to
// HEAD) whose Content-Type is not one of documented, nil otherwise. It
// reads the start of such an answer's body, for the error to show.
func MediaTypeError(rsp *http.Response, documented ...string) error {
	if rsp.StatusCode < 200 || rsp.StatusCode > 299 || rsp.Request != nil && rsp.Request.Method == http.MethodHead ||
		ofMediaType(rsp.Header.Get("Content-Type"), documented) {
		return nil
	}
	start, _ := io.ReadAll(io.LimitReader(rsp.Body, maxForeignDetail))
	return &BodyError{Status: rsp.StatusCode, ContentType: rsp.Header.Get("Content-Type"), Documented: documented, Start: bodyStart(start)}
}

// ofMediaType says whether the Content-Type ct is of one of the media
// types (or ranges, such as text/*) of documented, parameters aside.
func ofMediaType(ct string, documented []string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	typ, _, _ := strings.Cut(mt, "/")
	for _, d := range documented {
		d = strings.ToLower(d)
		if d == mt || d == "*/*" || d == typ+"/*" {
			return true
		}
	}
	return false
}
