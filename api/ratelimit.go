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
// server with keys keeps one bucket a limited key, far fewer.
const maxRateCallers = 1 << 16

// callerRate is one caller's rate limit: requests a second and the burst
// above it. A zero limit (or rate.Inf) is no limit.
type callerRate struct {
	limit rate.Limit
	burst int
}

// serverRate is the rate of Config: that of every caller without one of
// its own.
func serverRate(cfg Config) callerRate {
	return callerRate{limit: rate.Limit(cfg.RateLimit), burst: cfg.RateBurst}
}

// of returns k's rate: its own if it has one (its burst defaulting to one
// second's worth), else r.
func (r callerRate) of(k Key) callerRate {
	switch {
	case k.Rate == 0:
		return r
	case math.IsInf(k.Rate, 1):
		return callerRate{limit: rate.Inf}
	case k.Burst > 0:
		return callerRate{limit: rate.Limit(k.Rate), burst: k.Burst}
	}
	return callerRate{limit: rate.Limit(k.Rate), burst: rateBurst(k.Rate)}
}

// limited reports whether r limits anything.
func (r callerRate) limited() bool { return r.limit > 0 && r.limit != rate.Inf }

// per says the rate in words: "1 request a second", "0.5 requests a second".
func (r callerRate) per() string {
	if r.limit == 1 {
		return "1 request a second"
	}
	return strconv.FormatFloat(float64(r.limit), 'g', -1, 64) + " requests a second"
}

// rateLimiter holds a token bucket for each limited caller, an API key (by
// its digest) or, on an open server, a client address. Each request to the
// API takes a token; a caller out of tokens is answered 429 rate-limited
// with the seconds until its next token. Safe for concurrent use: the cache
// is locked and each bucket is.
type rateLimiter struct {
	now     func() time.Time
	callers *lru.Cache[string, *rate.Limiter]
}

func newRateLimiter(now func() time.Time) *rateLimiter {
	callers, err := lru.New[string, *rate.Limiter](maxRateCallers)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &rateLimiter{now: now, callers: callers}
}

// rateBurst is the default burst of a rate: one second's worth, at least 1
// (and at most 2^30, which a rate that high never needs).
func rateBurst(limit float64) int { return int(max(1, min(math.Ceil(limit), 1<<30))) }

// take takes n tokens of caller's bucket, limited to r, or returns the
// rate-limited problem, which says when to retry, and takes nothing. n is
// at most the burst: more could never be taken at once, and a call that
// asks for more (a batch of more users than the burst) takes the whole
// burst. who names the caller in the problem. A caller whose rate changed
// (keys reloaded with another) keeps its bucket at the new rate.
func (l *rateLimiter) take(caller string, r callerRate, who string, n int) error {
	if !r.limited() || n < 1 {
		return nil
	}
	n = min(n, r.burst)
	now := l.now()
	lim, ok := l.callers.Get(caller)
	if !ok {
		// Two first requests at once may both get here: the one added first
		// is the bucket both take from. The key is cloned: the caller may
		// alias a request's buffer.
		lim = rate.NewLimiter(r.limit, r.burst)
		if prev, found, _ := l.callers.PeekOrAdd(strings.Clone(caller), lim); found {
			lim = prev
		}
	}
	if lim.Limit() != r.limit || lim.Burst() != r.burst {
		lim.SetLimitAt(now, r.limit)
		lim.SetBurstAt(now, r.burst)
	}
	res := lim.ReserveN(now, n)
	wait := res.DelayFrom(now)
	if wait == 0 {
		return nil
	}
	res.CancelAt(now)
	return &apiError{kind: pRateLimited, retry: wait, detail: who + " is past its rate limit of " + r.per() +
		" (bursts of " + strconv.Itoa(r.burst) + "); retry after " + strconv.FormatFloat(math.Ceil(wait.Seconds()*10)/10, 'f', 1, 64) + "s"}
}
