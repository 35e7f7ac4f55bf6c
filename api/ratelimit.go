package api

import (
	"math"
	"strconv"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
)

// maxRateCallers bounds the token buckets kept for an open server's client
// addresses: a caller forgotten past it starts again with a full burst. A
// server with keys keeps one bucket a key, far fewer.
const maxRateCallers = 1 << 16

// rateLimiter is Config.RateLimit: a token bucket for each caller, an API
// key (by its digest) or, on an open server, a client address. Each request
// to the API takes a token; a caller out of tokens is answered 429
// rate-limited with the seconds until its next token. Safe for concurrent
// use: the cache is locked and each bucket is.
type rateLimiter struct {
	limit   rate.Limit
	burst   int
	now     func() time.Time
	callers *lru.Cache[string, *rate.Limiter]
}

// newRateLimiter returns the limiter of cfg, or nil when it sets no limit.
func newRateLimiter(cfg Config) *rateLimiter {
	if cfg.RateLimit == 0 {
		return nil
	}
	callers, err := lru.New[string, *rate.Limiter](maxRateCallers)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &rateLimiter{limit: rate.Limit(cfg.RateLimit), burst: cfg.RateBurst, now: cfg.Now, callers: callers}
}

// rateBurst is the default burst of a rate: one second's worth, at least 1
// (and at most 2^30, which a rate that high never needs).
func rateBurst(limit float64) int { return int(max(1, min(math.Ceil(limit), 1<<30))) }

// take takes a token of caller's bucket, or returns the rate-limited
// problem, which says when to retry, and takes nothing.
func (r *rateLimiter) take(caller, who string) error {
	lim, ok := r.callers.Get(caller)
	if !ok {
		// Two first requests at once may both get here: the one added first
		// is the bucket both take from. The key is cloned: the caller may
		// alias a request's buffer.
		lim = rate.NewLimiter(r.limit, r.burst)
		if prev, found, _ := r.callers.PeekOrAdd(strings.Clone(caller), lim); found {
			lim = prev
		}
	}
	now := r.now()
	res := lim.ReserveN(now, 1)
	wait := res.DelayFrom(now)
	if wait == 0 {
		return nil
	}
	res.CancelAt(now)
	return &apiError{kind: pRateLimited, retry: wait, detail: who + " is past its rate limit of " + r.per() +
		" (bursts of " + strconv.Itoa(r.burst) + "); retry after " + strconv.FormatFloat(math.Ceil(wait.Seconds()*10)/10, 'f', 1, 64) + "s"}
}

// per says the rate in words: "1 request a second", "0.5 requests a second".
func (r *rateLimiter) per() string {
	if r.limit == 1 {
		return "1 request a second"
	}
	return strconv.FormatFloat(float64(r.limit), 'g', -1, 64) + " requests a second"
}
