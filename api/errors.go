package api

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/userfilter"
)

// Sentinel errors of the API's own configuration.
var (
	// ErrBadConfig is returned by New for a Config that cannot serve.
	ErrBadConfig = errors.New("api: bad config")
	// ErrBadKeys is returned for a keys file or SEENAPI_KEYS value that cannot be parsed.
	ErrBadKeys = errors.New("api: bad API keys")
)

// ProblemBase prefixes every problem type URI.
const ProblemBase = "https://seenapi.dev/problems/"

// problemKind is one documented problem type: its URI suffix, title and
// HTTP status. Every error the API answers is one of these (openapi.yaml
// lists them).
type problemKind struct {
	slug   string
	title  string
	status int
}

var (
	pBadRequest       = problemKind{"bad-request", "Bad request", fiber.StatusBadRequest}
	pInvalidJSON      = problemKind{"invalid-json", "Invalid JSON", fiber.StatusBadRequest}
	pItemTooLong      = problemKind{"item-too-long", "Item too long", fiber.StatusBadRequest}
	pBadImport        = problemKind{"bad-import", "Bad import", fiber.StatusBadRequest}
	pUnauthorized     = problemKind{"unauthorized", "Unauthorized", fiber.StatusUnauthorized}
	pForbidden        = problemKind{"forbidden", "Forbidden", fiber.StatusForbidden}
	pUnknownNamespace = problemKind{"unknown-namespace", "Unknown namespace", fiber.StatusNotFound}
	pUserNotFound     = problemKind{"user-not-found", "User not found", fiber.StatusNotFound}
	pNotFound         = problemKind{"not-found", "Not found", fiber.StatusNotFound}
	pMethodNotAllowed = problemKind{"method-not-allowed", "Method not allowed", fiber.StatusMethodNotAllowed}
	// fasthttp's own refusals, before any route: a request not read whole
	// within --read-timeout, and headers past its read buffer.
	pRequestTimeout  = problemKind{"request-timeout", "Request timeout", fiber.StatusRequestTimeout}
	pHeadersTooLarge = problemKind{"headers-too-large", "Request headers too large", fiber.StatusRequestHeaderFieldsTooLarge}
	pUnsupported     = problemKind{"unsupported", "Unsupported by this filter kind", fiber.StatusConflict}
	pNamespaceServed = problemKind{"namespace-served", "Namespace served", fiber.StatusConflict}
	// The Idempotency-Key draft's statuses: 409 for a twin in flight, 422
	// for a key sent with another request.
	pIdempotencyKeyInUse  = problemKind{"idempotency-key-in-use", "Idempotency key in use", fiber.StatusConflict}
	pIdempotencyKeyReused = problemKind{"idempotency-key-reused", "Idempotency key reused", fiber.StatusUnprocessableEntity}
	pBodyTooLarge         = problemKind{"body-too-large", "Body too large", fiber.StatusRequestEntityTooLarge}
	// A JSON route's body sent as something else (a form, text, none).
	pUnsupportedMediaType = problemKind{"unsupported-media-type", "Unsupported media type", fiber.StatusUnsupportedMediaType}
	pTooManyCandidates    = problemKind{"too-many-candidates", "Too many candidates", fiber.StatusRequestEntityTooLarge}
	pTooManyUsers         = problemKind{"too-many-users", "Too many users", fiber.StatusRequestEntityTooLarge}
	pCorruptFilter        = problemKind{"corrupt-filter", "Corrupt filter", fiber.StatusInternalServerError}
	pInternal             = problemKind{"internal", "Internal error", fiber.StatusInternalServerError}
	pStorageUnavailable   = problemKind{"storage-unavailable", "Storage unavailable", fiber.StatusServiceUnavailable}
	pRateLimited          = problemKind{"rate-limited", "Too many requests", fiber.StatusTooManyRequests}
	pOverloaded           = problemKind{"overloaded", "Overloaded", fiber.StatusServiceUnavailable}
	pUnavailable          = problemKind{"unavailable", "Unavailable", fiber.StatusServiceUnavailable}
	pStorageFull          = problemKind{"storage-full", "Storage full", fiber.StatusInsufficientStorage}
)

// problemKinds lists every kind, for the test that holds openapi.yaml to them.
var problemKinds = []problemKind{
	pBadRequest, pInvalidJSON, pItemTooLong, pBadImport, pUnauthorized, pForbidden,
	pUnknownNamespace, pUserNotFound, pNotFound, pMethodNotAllowed, pRequestTimeout, pHeadersTooLarge,
	pUnsupported, pNamespaceServed,
	pIdempotencyKeyInUse, pIdempotencyKeyReused,
	pBodyTooLarge, pUnsupportedMediaType, pTooManyCandidates, pTooManyUsers, pCorruptFilter, pInternal,
	pRateLimited, pStorageUnavailable, pOverloaded, pUnavailable, pStorageFull,
}

// FieldError names one offending member of the body (Pointer, a JSON
// pointer) or one parameter (Parameter), with what is wrong with it.
type FieldError struct {
	Pointer   string `json:"pointer,omitempty"`
	Parameter string `json:"parameter,omitempty"`
	Detail    string `json:"detail"`
}

// Problem is an RFC 9457 problem detail, the body of every error answer.
type Problem struct {
	Type     string       `json:"type"`
	Title    string       `json:"title"`
	Status   int          `json:"status"`
	Detail   string       `json:"detail,omitempty"`
	Instance string       `json:"instance,omitempty"`
	Errors   []FieldError `json:"errors,omitempty"`
}

// apiError is an error the handlers return for a problem they recognised.
type apiError struct {
	kind   problemKind
	detail string
	fields []FieldError
	cause  error         // the underlying error, if any, for errors.Is and logs
	retry  time.Duration // when to retry, for Retry-After; 0: by the status
	// The request is refused for its head (headerRefusal): its path is
	// no more to be trusted than the rest, and its problem has no instance.
	unread bool
	// The answer of /readyz while the service is not ready (readiness):
	// the probe's designed 503, no fault, so counted apart from the errors.
	notReady bool
}

func (e *apiError) Error() string { return e.kind.slug + ": " + e.detail }
func (e *apiError) Unwrap() error { return e.cause }

// newError returns an apiError of kind with a formatted detail.
func newError(kind problemKind, format string, a ...any) *apiError {
	return &apiError{kind: kind, detail: fmt.Sprintf(format, a...)}
}

// fieldError returns a bad-request apiError naming one field.
func fieldError(kind problemKind, pointer, param, detail string) *apiError {
	return &apiError{kind: kind, detail: detail, fields: []FieldError{{Pointer: pointer, Parameter: param, Detail: detail}}}
}

// problemFor maps any error a handler, the hot set or fiber returns to its
// problem. This is the one place errors become statuses and problem types.
func problemFor(err error) Problem {
	var (
		ae *apiError
		fe *fiber.Error
		ie *eviction.ImportError
	)
	k, detail := pInternal, "internal error"
	var fields []FieldError
	switch {
	case errors.As(err, &ae):
		k, detail, fields = ae.kind, ae.detail, ae.fields
	case errors.Is(err, eviction.ErrUnknownNamespace):
		// The hot set's words after its sentinel's, which names the package.
		k, detail = pUnknownNamespace, "namespace "+strings.TrimPrefix(err.Error(), eviction.ErrUnknownNamespace.Error()+": ")
	case errors.Is(err, eviction.ErrNamespaceServed):
		k, detail = pNamespaceServed, "namespace "+strings.TrimPrefix(err.Error(), eviction.ErrNamespaceServed.Error()+": ")+
			"; take it out of the namespaces file and reload (SIGHUP) before erasing its data"
	case errors.Is(err, eviction.ErrUnsupported):
		// The hot set's words after its sentinel's, which names the package.
		k, detail = pUnsupported, strings.TrimPrefix(err.Error(), eviction.ErrUnsupported.Error()+": ")
	case errors.Is(err, eviction.ErrCallKeyReused):
		k, detail = pIdempotencyKeyReused, "this Idempotency-Key was used for another request to this route before the service restarted; a retry must send the same body"
	case errors.Is(err, eviction.ErrUserNotFound):
		k, detail = pUserNotFound, "the user has no filter in this namespace"
	case errors.Is(err, eviction.ErrCorrupt):
		k, detail = pCorruptFilter, "the user's stored filter is corrupt: each call for the user fails until it is replaced by an export of it kept earlier (PUT on the user's export with mode=replace, role admin), or erased (DELETE on the user) if none is kept; other users are unaffected"
	case errors.Is(err, eviction.ErrBelowMinFree):
		// Which limit refused, so that an operator knows what to change.
		k, detail = pStorageFull, "the store refused a write: the free space of its disk is below the floor set by --min-free-bytes "+
			"(the server's log says how much is free); free space on the disk, or lower --min-free-bytes"
	case errors.Is(err, eviction.ErrStorageFull):
		k, detail = pStorageFull, "the store refused a write: its disk is full (no space left on the device); free space on the disk"
	case errors.Is(err, eviction.ErrStorage):
		// The store's own words name files and offsets of the server's
		// disk: they go to the server's log, not to the caller.
		k, detail = pStorageUnavailable, "the store failed to read or write; the server's log has the error"
	case errors.Is(err, userfilter.ErrTooLarge):
		why := err.Error()
		if errors.As(err, &ie) {
			why = ie.Reason // the hot set's words, without its sentinel's
		}
		k, detail = pBodyTooLarge, "the imported filter is larger than the server accepts: "+why
	case errors.As(err, &ie):
		k, detail = pBadImport, ie.Reason
	case errors.Is(err, eviction.ErrClosed):
		k, detail = pUnavailable, "the service is shutting down"
	case errors.As(err, &fe):
		switch fe.Code {
		case fiber.StatusNotFound:
			k, detail = pNotFound, "no such route"
		case fiber.StatusMethodNotAllowed:
			k, detail = pMethodNotAllowed, "the route does not take this method"
		case fiber.StatusRequestTimeout:
			k, detail = pRequestTimeout, "the request was not received whole within the server's read timeout"
		case fiber.StatusRequestHeaderFieldsTooLarge:
			k, detail = pHeadersTooLarge, "the request's headers are larger than the server reads"
		case fiber.StatusRequestEntityTooLarge:
			k, detail = pBodyTooLarge, "the request body is larger than the server accepts"
		case fiber.StatusForbidden:
			k, detail = pForbidden, fe.Message
		case fiber.StatusServiceUnavailable:
			k, detail = pUnavailable, fe.Message
		default:
			// Any other client error of fiber's is a bad request, with
			// that type's status: openapi.yaml documents each type with
			// one status, and a client reads one from the other. None is
			// raised today (fiber's router raises 404 and 405, its
			// SendFile 403 only for a directory, which no dashboard file
			// is; Range and any Expect but 100-continue are ignored); any
			// other status of fiber's is an internal error.
			if fe.Code >= 400 && fe.Code < 500 {
				k, detail = pBadRequest, fe.Message
			}
		}
	}
	return Problem{Type: ProblemBase + k.slug, Title: k.title, Status: k.status, Detail: detail, Errors: fields}
}

// retryAfter returns the Retry-After seconds of err, answered as p, or "":
// the error's own wait (whole seconds, rounded up) if it has one, else one
// second for any 503.
func retryAfter(err error, p Problem) string {
	if ae := (*apiError)(nil); errors.As(err, &ae) && ae.retry > 0 {
		return strconv.FormatInt(int64(math.Ceil(ae.retry.Seconds())), 10)
	}
	if p.Status == fiber.StatusServiceUnavailable {
		return strconv.Itoa(1)
	}
	return ""
}
