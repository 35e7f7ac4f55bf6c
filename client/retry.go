package client

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// Retry configures WithRetries. The zero value is the default.
type Retry struct {
	// Max is how many times a call is sent again at most: none when
	// negative; when 0, 4, or with For set as many as fit in For.
	Max int
	// For bounds the time a call spends retrying: no retry is sent whose
	// wait would end more than For after the call's first attempt was
	// sent, and the call returns what its last attempt got. 0: no bound
	// but Max. An attempt's own time is its HTTP client's to bound
	// (http.Client.Timeout) and the call's context bounds the whole.
	For time.Duration
	// WaitMin and WaitMax bound the wait before a retry (50 ms and 2 s when
	// 0): it doubles at each retry, less a random part of up to half (so
	// that clients cut off together do not come back together), unless the
	// answer's Retry-After gives it. The call's context bounds every wait.
	WaitMin, WaitMax time.Duration
	// OnRetry, when set, is called before each retry is waited for, with
	// what the attempt got: the answer that asks to retry (whose body is
	// discarded after), or the error when no answer came (resp nil). It
	// may count or log the retries. Returning false sends no retry: the
	// call returns that answer or that error; false for a nil resp, say,
	// retries only the service's answers, so that a call to a service that
	// is not there fails at once. Called from the call's goroutine.
	OnRetry func(resp *http.Response, err error) bool
	// HTTPClient sends each attempt; when nil, a pooled client of its own
	// (WithHTTPClient would replace the retrying one: set this instead).
	// A call that fails leaves its idle connections to the other calls.
	HTTPClient *http.Client
}

// WithRetries makes a client send a call again when it gets no answer (a
// connection refused, reset or cut before the answer came: a restart, a
// deploy, a load balancer) and when the service asks to retry: 429
// rate-limited, 503 (overloaded, unavailable, storage-unavailable) and 409
// idempotency-key-in-use (the first of two identical calls is still being
// answered) after their Retry-After, and 502 and 504 from a proxy in front.
// A batch answered 200 is not sent again, whatever its users' results: a
// user's error in it (503 storage-unavailable too) is the caller's to send
// again, in a call of its own, or with the batch again under the
// Idempotency-Key the caller set for it, whose retry gives the other users
// their first results again and serves the failed ones anew.
// When the retries run out (Max, For, OnRetry), the call returns the last
// answer (its problem, read as any other) or the last error. When the
// call's context ends first, its error holds the context's and what the
// attempt before got, its answer's problem or its error (a
// *RetryCutError): a call cut short after a minute of 503s says so.
//
// Every route but the one call and its batch is safe to send twice: reads,
// recording impressions (a set: twice is once), forgetting, imports (a
// merge or a replacement by the same filter). The one call is not: its
// answer's items are recorded, so a call sent again after a lost answer
// would get and record the next ones, and the first would never be shown.
// So WithRetries gives each one call and batch call without an
// Idempotency-Key a fresh random one, kept for its retries: a retry of a
// call the service did answer gets that answer again (with the header
// Idempotent-Replayed: true) and records nothing. The service keeps such
// answers for --idempotency-ttl within --idempotency-bytes, across a
// graceful restart and a crash too (see the README's "Retries"): a
// call retried after its answer left them is served anew. A call that sets
// its own key keeps it.
func WithRetries(r Retry) ClientOption {
	switch {
	case r.Max < 0:
		r.Max = 0
	case r.Max == 0 && r.For > 0:
		r.Max = math.MaxInt
	case r.Max == 0:
		r.Max = 4
	}
	if r.WaitMin <= 0 {
		r.WaitMin = 50 * time.Millisecond
	}
	if r.WaitMax <= 0 {
		r.WaitMax = 2 * time.Second
	}
	r.WaitMax = max(r.WaitMax, r.WaitMin)
	if r.HTTPClient == nil {
		r.HTTPClient = retryablehttp.NewClient().HTTPClient // pooled, as retryablehttp's own
	}
	// retryablehttp closes its HTTP client's idle connections whenever a
	// call ends in an error (its context ended, no answer), made for a
	// client of a call's own: this one is every call's, and a caller's
	// (import-redis's workers), and each would dial again. The copy it
	// gets has a transport without CloseIdleConnections; the caller's own
	// still closes them.
	hc := *r.HTTPClient
	if hc.Transport == nil {
		hc.Transport = http.DefaultTransport
	}
	hc.Transport = idleKept{hc.Transport}
	r.HTTPClient = &hc
	return func(c *Client) error {
		c.Client = retrier(r)
		c.RequestEditors = append(c.RequestEditors, keyEachCall)
		return nil
	}
}

// retrier sends a call with its retries (see WithRetries), r's defaults
// set.
type retrier Retry

// Do sends req and its retries through retryablehttp, whose loop takes
// the decisions of each call's own state: its start (For) and retries
// (Max) so far.
func (r retrier) Do(req *http.Request) (*http.Response, error) {
	rreq, err := retryablehttp.FromRequest(req)
	if err != nil {
		return nil, err
	}
	start, retries, wait := time.Now(), 0, time.Duration(0)
	var last error // what the attempt before the last retry got
	rc := &retryablehttp.Client{
		HTTPClient: r.HTTPClient,
		RetryMax:   math.MaxInt, // CheckRetry counts
		CheckRetry: func(ctx context.Context, resp *http.Response, err error) (bool, error) {
			if again, perr := retryPolicy(ctx, resp, err); !again || perr != nil {
				return again, perr
			}
			if retries >= r.Max {
				return false, nil
			}
			wait = retryWait(r.WaitMin, r.WaitMax, retries, resp)
			if r.For > 0 && time.Since(start)+wait > r.For {
				return false, nil
			}
			// Read now: retryablehttp discards the body before the wait.
			var got error = err
			if resp != nil {
				got = peekProblem(resp)
			} else if ue, ok := err.(*url.Error); ok {
				got = ue.Err // the call's own error names its method and URL
			}
			if r.OnRetry != nil && !r.OnRetry(resp, err) {
				return false, nil
			}
			retries++
			last = got
			return true, nil
		},
		Backoff: func(time.Duration, time.Duration, int, *http.Response) time.Duration { return wait },
		// A call that is not retried gets the last answer (its problem)
		// or the last error, not retryablehttp's "giving up" error.
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	resp, err := rc.Do(rreq)
	if err != nil && !errors.As(err, new(*url.Error)) {
		// The context ended in a wait or in the attempt after it, and
		// retryablehttp gives its error alone: an error as http.Client
		// gives it, naming what asked for the retry.
		if last != nil {
			err = &RetryCutError{Err: err, Last: last}
		}
		err = &url.Error{Op: req.Method[:1] + strings.ToLower(req.Method[1:]), URL: req.URL.String(), Err: err}
	}
	return resp, err
}

// A RetryCutError is the error of a call of WithRetries whose context ended
// while it was being retried, in a wait or in the attempt after it (as
// the Err of the call's *url.Error): the context's error, and what the
// attempt before got, so that the caller sees why the call had not been
// answered yet (a service that kept answering 503, say). errors.Is finds
// the context's error in it, errors.As the last answer's *Problem.
type RetryCutError struct {
	// Err is the context's error: context.Canceled or
	// context.DeadlineExceeded.
	Err error
	// Last is what the attempt whose retry was cut got: its answer's
	// problem (a *Problem, as ProblemOf reads it), or, when it got no
	// answer, its error.
	Last error
}

func (e *RetryCutError) Error() string {
	if _, ok := e.Last.(*Problem); ok {
		return e.Err.Error() + ", while retrying after " + e.Last.Error()
	}
	return e.Err.Error() + ", while retrying after no answer: " + e.Last.Error()
}

// Unwrap gives the context's error and the last attempt's.
func (e *RetryCutError) Unwrap() []error { return []error{e.Err, e.Last} }

// Timeout says whether the context's deadline ended the call, as
// (*url.Error).Timeout reads the error it holds.
func (e *RetryCutError) Timeout() bool { return errors.Is(e.Err, context.DeadlineExceeded) }

// idleKept sends a request through its RoundTripper, and has no
// CloseIdleConnections for an http.Client to call.
type idleKept struct{ http.RoundTripper }

// keyEachCall gives a one call or a batch call (POST .../filter) a random
// Idempotency-Key unless it has one. Request editors run once a call,
// before its first attempt, so its retries send the same key.
func keyEachCall(_ context.Context, req *http.Request) error {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/filter") && req.Header.Get(idempotencyHeader) == "" {
		// 128 random bits (crypto/rand.Text), as a quoted string, the form
		// draft-ietf-httpapi-idempotency-key-header gives the key.
		req.Header.Set(idempotencyHeader, `"`+cryptorand.Text()+`"`)
	}
	return nil
}

const (
	idempotencyHeader = "Idempotency-Key"
	// maxProblemBytes bounds what peekProblem reads of an answer's body.
	maxProblemBytes = 64 << 10
)

// retryPolicy says whether an attempt is sent again: see WithRetries. An
// attempt that got an answer never returns an error, so that the last
// answer reaches the caller when the retries run out.
func retryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if err != nil {
		// No answer: retried unless the call was cancelled or could never
		// succeed (a bad URL or certificate, retryablehttp's list).
		return retryablehttp.ErrorPropagatedRetryPolicy(ctx, nil, err)
	}
	if ctx.Err() != nil {
		return false, nil
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true, nil
	case http.StatusConflict:
		return peekProblem(resp).Type == ProblemTypeIdempotencyKeyInUse, nil
	}
	return false, nil
}

// peekProblem returns the problem of an error answer (ProblemOf's: one of
// type about:blank for a foreign one, or a body it could not read whole),
// leaving resp's body to be read again; nil for no answer.
func peekProblem(resp *http.Response) *Problem {
	if resp == nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return ProblemOf(resp, b)
}

// retryWait is the wait before retry number n+1: the answer's Retry-After
// on a 429, a 503 or a 409 (retryPolicy sends a 409 again only for
// idempotency-key-in-use), else WaitMin doubled n times, up to WaitMax,
// less a random part of up to half.
func retryWait(lo, hi time.Duration, n int, resp *http.Response) time.Duration {
	if resp != nil {
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusConflict:
			if d, ok := RetryAfter(resp.Header.Get("Retry-After")); ok {
				return d
			}
		}
	}
	d := retryablehttp.DefaultBackoff(lo, hi, n, nil)
	return d - rand.N(d/2+1)
}

// RetryAfter returns the wait a Retry-After header value gives: seconds,
// or an HTTP date (no wait once past), as a proxy may send it. WithRetries
// waits it out; it is exported for a caller that retries by itself.
func RetryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 || s > math.MaxInt64/int64(time.Second) {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(time.Until(t), 0), true
}
