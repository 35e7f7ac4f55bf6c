package api

import (
	"crypto/subtle"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
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

// Requests refused for their key (401: none, or one not known) are limited
// by client address whatever --rate-limit says (it is off by default, and
// limits callers by key): a client guessing keys makes refusedKeyBurst
// guesses, then one every 1/refusedKeyRate seconds.
const (
	refusedKeyRate  = 1
	refusedKeyBurst = 20
)

// keyGuesses limits the requests refused for their key, by client address
// (IPv6 ones by their /64, which one host commonly has whole). An address
// out of tokens is answered 429 before its key counts, whatever key it
// sends, but for the keys admitted from it since its first refused one:
// were any known key let through, its answer would tell a guess right and
// the limit would bound nothing, while a key already admitted from the
// address tells a guesser nothing new. So behind a proxy (one address for
// every client) the clients that were calling keep calling while another
// sends wrong keys; a key not yet used from there waits for a token. Safe
// for concurrent use.
type keyGuesses struct {
	now   func() time.Time
	addrs *lru.Cache[string, *guessBucket]
	// lastRefused is when a key was last refused (unix ns): until every
	// bucket could be full again since, requests look theirs up, and
	// after it none does (no address to format, no lock taken).
	lastRefused atomic.Int64
}

// guessBucket is one address's refused keys, and the keys admitted from
// it since the first.
type guessBucket struct {
	lim *rate.Limiter
	mu  sync.Mutex
	// admitted are the digests of the keys admitted, the last
	// maxAdmitted of them.
	admitted [maxAdmitted][32]byte
	filled   int // of admitted
	next     int
}

// maxAdmitted bounds the keys an address keeps as admitted.
const maxAdmitted = 16

// refusedKeys is the rate of the requests refused for their key.
var refusedKeys = callerRate{limit: refusedKeyRate, burst: refusedKeyBurst}

// refill is how long an emptied bucket of refusedKeys takes to be full.
const refill = time.Duration(refusedKeyBurst * float64(time.Second) / refusedKeyRate)

func newKeyGuesses(now func() time.Time) *keyGuesses {
	addrs, err := lru.New[string, *guessBucket](maxRateCallers)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &keyGuesses{now: now, addrs: addrs}
}

// bucket returns the bucket of the address of c, or nil if it has none
// that is not full (no key refused from it within refill).
func (g *keyGuesses) bucket(c *fiber.Ctx) *guessBucket {
	// No key refused yet (the common case): not even the clock is read.
	last := g.lastRefused.Load()
	if last == 0 || g.now().UnixNano()-last > int64(refill) {
		return nil
	}
	b, _ := g.addrs.Get(guessAddr(c))
	return b
}

// check returns the rate-limited problem if b (nil: none) has no refused
// key left and the key of digest d (ok false: no key) was not admitted
// from its address, taking nothing. Every digest kept is compared, in
// constant time.
func (g *keyGuesses) check(b *guessBucket, d [32]byte, ok bool) error {
	if b == nil {
		return nil
	}
	now := g.now()
	tokens := b.lim.TokensAt(now)
	if tokens >= 1 {
		return nil
	}
	b.mu.Lock()
	known := 0
	for i := range b.admitted[:b.filled] {
		known |= subtle.ConstantTimeCompare(d[:], b.admitted[i][:])
	}
	b.mu.Unlock()
	if ok && known == 1 {
		return nil
	}
	wait := time.Duration((1 - tokens) / float64(refusedKeys.limit) * float64(time.Second))
	return &apiError{kind: pRateLimited, retry: wait, detail: "this client address sent a missing or unknown API key more than " +
		strconv.Itoa(refusedKeys.burst) + " times, then more than " + refusedKeys.per() +
		"; only the keys admitted from it since are checked meanwhile: retry after " +
		strconv.FormatFloat(math.Ceil(wait.Seconds()*10)/10, 'f', 1, 64) + "s"}
}

// admit records that the key of digest d was admitted from b's address
// (b nil: one with no refused key, which keeps none).
func (b *guessBucket) admit(d [32]byte) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.admitted[:b.filled] {
		if b.admitted[i] == d {
			return
		}
	}
	b.admitted[b.next] = d
	b.next = (b.next + 1) % maxAdmitted
	b.filled = max(b.filled, b.next)
	if b.next == 0 {
		b.filled = maxAdmitted
	}
}

// refused takes a token of the address of c, whose key was refused.
func (g *keyGuesses) refused(c *fiber.Ctx) {
	now := g.now()
	g.lastRefused.Store(now.UnixNano())
	addr := guessAddr(c)
	b, ok := g.addrs.Get(addr)
	if !ok {
		b = &guessBucket{lim: rate.NewLimiter(refusedKeys.limit, refusedKeys.burst)}
		if prev, found, _ := g.addrs.PeekOrAdd(addr, b); found {
			b = prev
		}
	}
	b.lim.AllowN(now, 1)
}

// guessAddr is the bucket's name of the address of c: an IPv4 address, or
// the /64 of an IPv6 one.
func guessAddr(c *fiber.Ctx) string {
	ip := c.Context().RemoteIP()
	if v4 := ip.To4(); v4 != nil {
		return string(v4)
	}
	if ip = ip.To16(); ip == nil {
		return ""
	}
	return string(ip[:8])
}
