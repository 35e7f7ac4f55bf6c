package api

import (
	"fmt"
	"log/slog"
	"math"
	"time"
)

// Config configures a Server. The zero value of each field means its default.
type Config struct {
	// Keys are the API keys and their roles. None means the API is open:
	// every caller has every role (the command then listens on loopback only).
	Keys []Key
	// MaxBodyBytes caps a JSON request body. Default 1 MiB.
	MaxBodyBytes int
	// MaxImportBytes caps an import: its body (an encoded filter) and the
	// filter's bits once decoded. Default 64 MiB.
	MaxImportBytes int
	// MaxBodyBytesInFlight caps the bytes of the request bodies read at
	// once: a body is allocated whole from its Content-Length when its
	// header is read. A body over 16 KiB (not in chunks) that it cannot
	// hold is not read, and its request is answered 503 overloaded with
	// Retry-After. Default 256 MiB, or MaxBodyBytes or MaxImportBytes if
	// larger; less than the larger of the two is refused.
	MaxBodyBytesInFlight int
	// MaxCandidates caps the candidates (or items) of one call, and of each
	// user of a batch. Default 10000.
	MaxCandidates int
	// MaxItemBytes caps the bytes of one item id. Default 256.
	MaxItemBytes int
	// MaxUserBytes caps the bytes of one user id. Default 256.
	MaxUserBytes int
	// MaxBatchUsers caps the users of one batch call. Default 100.
	MaxBatchUsers int
	// MaxInFlight caps the requests served at once, /healthz, /readyz and
	// /metrics aside; beyond it the API answers 503 overloaded with
	// Retry-After.
	// Default 4096.
	MaxInFlight int
	// MaxConnections caps the client connections open at once; one past it
	// is answered 503 overloaded with Retry-After and closed. Each holds a
	// file descriptor, which the store needs too, and buffers of its own.
	// Default 10000.
	MaxConnections int
	// RateLimit caps the requests a second each caller makes to the API
	// (the routes that take a key, /metrics among them): a caller is an API
	// key or, on an open server, a client address. Beyond it, and past
	// RateBurst requests at once, the API answers 429 rate-limited with
	// Retry-After. A batch call takes one request a user (at most the
	// burst). A key's own Key.Rate takes
	// its place for that key. Default 0: no limit; else at least MinRate.
	RateLimit float64
	// RateBurst is how many requests a caller may make at once before
	// RateLimit applies. Default: one second's worth (RateLimit rounded up).
	RateBurst int
	// IdempotencyBytes is the budget of the answers kept for retries of
	// calls sent with an Idempotency-Key (the least recently used leave
	// first). Default 32 MiB.
	IdempotencyBytes int64
	// IdempotencyTTL is how long such an answer is given again. Default 5m.
	IdempotencyTTL time.Duration
	// HSTSMaxAge, over zero, sends Strict-Transport-Security with this
	// max-age (whole seconds) on every answer over TLS, none over plain
	// HTTP. Zero, the default, sends none: a browser applies it to the
	// host name on every port, and would refuse plain HTTP to any other
	// service there (a metrics exporter, another dashboard) for max-age.
	HSTSMaxAge time.Duration
	// ReadTimeout bounds reading one request, headers and body. Default 10s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response; a backup's stream may take
	// longer (see IdleTimeout). Default 10s.
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long, and cuts
	// off a backup's client that acknowledges no byte this long. Default 2m.
	IdleTimeout time.Duration
	// LocalOnly refuses every request whose Host is not a loopback name or
	// address, for a service open to every caller (no keys) on loopback: a
	// web page whose own name resolves to 127.0.0.1 (DNS rebinding) is
	// same-origin with it in the browser, and would otherwise read and
	// change everything.
	LocalOnly bool
	// Ready reports whether the service can serve (store open, journal
	// replayed); /readyz answers 503 while it returns an error. Default: ready.
	Ready func() error
	// Logger receives server errors and the auth warning. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of the uptime figure and of RateLimit. Default time.Now.
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes   = 1 << 20
	DefaultMaxImportBytes = 64 << 20
	DefaultMaxCandidates  = 10000
	DefaultMaxItemBytes   = 256
	DefaultMaxUserBytes   = 256
	DefaultMaxBatchUsers  = 100
	DefaultMaxInFlight    = 4096
	DefaultMaxConnections = 10000
	DefaultReadTimeout    = 10 * time.Second
	DefaultWriteTimeout   = 10 * time.Second
	DefaultIdleTimeout    = 2 * time.Minute
	// DefaultIdempotencyBytes keeps about 52,000 answers of 20 items (645 B
	// each with 12-byte items and a UUID for a key, in /v1/stats).
	DefaultIdempotencyBytes = 32 << 20
	DefaultIdempotencyTTL   = 5 * time.Minute
	// DefaultMaxBodyBytesInFlight holds 256 bodies of DefaultMaxBodyBytes,
	// or 4 imports of DefaultMaxImportBytes.
	DefaultMaxBodyBytesInFlight = 256 << 20
)

// MinRate is the least rate, in requests a second, a caller may be
// limited to (Config.RateLimit, Key.Rate): one request every 1000 s, whose
// Retry-After is at most that. A rate near zero would make a Retry-After
// of years, telling a client nothing it could act on.
const MinRate = 0.001

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setInt(&c.MaxBodyBytes, DefaultMaxBodyBytes)
	setInt(&c.MaxImportBytes, DefaultMaxImportBytes)
	setInt(&c.MaxBodyBytesInFlight, max(DefaultMaxBodyBytesInFlight, c.MaxBodyBytes, c.MaxImportBytes))
	setInt(&c.MaxCandidates, DefaultMaxCandidates)
	setInt(&c.MaxItemBytes, DefaultMaxItemBytes)
	setInt(&c.MaxUserBytes, DefaultMaxUserBytes)
	setInt(&c.MaxBatchUsers, DefaultMaxBatchUsers)
	setInt(&c.MaxInFlight, DefaultMaxInFlight)
	setInt(&c.MaxConnections, DefaultMaxConnections)
	setDur(&c.ReadTimeout, DefaultReadTimeout)
	setDur(&c.WriteTimeout, DefaultWriteTimeout)
	setDur(&c.IdleTimeout, DefaultIdleTimeout)
	setDur(&c.IdempotencyTTL, DefaultIdempotencyTTL)
	if c.IdempotencyBytes == 0 {
		c.IdempotencyBytes = DefaultIdempotencyBytes
	}
	if c.RateBurst == 0 && c.RateLimit > 0 && !math.IsInf(c.RateLimit, 1) {
		c.RateBurst = rateBurst(c.RateLimit)
	}
	if c.Ready == nil {
		c.Ready = func() error { return nil }
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports whether c (after WithDefaults) can serve.
func (c Config) Validate() error {
	for _, l := range []struct {
		name string
		v    int
	}{
		{"MaxBodyBytes", c.MaxBodyBytes}, {"MaxImportBytes", c.MaxImportBytes},
		{"MaxCandidates", c.MaxCandidates}, {"MaxItemBytes", c.MaxItemBytes},
		{"MaxUserBytes", c.MaxUserBytes}, {"MaxBatchUsers", c.MaxBatchUsers},
		{"MaxInFlight", c.MaxInFlight}, {"MaxConnections", c.MaxConnections},
	} {
		if l.v < 1 {
			return fmt.Errorf("%w: %s must be at least 1, got %d", ErrBadConfig, l.name, l.v)
		}
	}
	if largest := max(c.MaxBodyBytes, c.MaxImportBytes); c.MaxBodyBytesInFlight < largest {
		return fmt.Errorf("%w: MaxBodyBytesInFlight must hold the largest body a route takes (%d bytes), got %d", ErrBadConfig, largest, c.MaxBodyBytesInFlight)
	}
	if c.RateLimit < 0 || math.IsNaN(c.RateLimit) || math.IsInf(c.RateLimit, 0) || (c.RateLimit > 0 && c.RateLimit < MinRate) {
		return fmt.Errorf("%w: RateLimit must be a finite number of requests a second, at least %g, 0 for none, got %v", ErrBadConfig, MinRate, c.RateLimit)
	}
	if c.RateBurst < 0 || (c.RateLimit > 0 && c.RateBurst < 1) || (c.RateLimit == 0 && c.RateBurst != 0) {
		return fmt.Errorf("%w: RateBurst must be at least 1, with a RateLimit; got %d", ErrBadConfig, c.RateBurst)
	}
	if c.IdempotencyBytes < 1 {
		return fmt.Errorf("%w: IdempotencyBytes must be at least 1, got %d", ErrBadConfig, c.IdempotencyBytes)
	}
	if c.IdempotencyTTL < time.Second {
		return fmt.Errorf("%w: IdempotencyTTL must be at least 1s, got %v", ErrBadConfig, c.IdempotencyTTL)
	}
	if c.ReadTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0 {
		return fmt.Errorf("%w: negative timeout", ErrBadConfig)
	}
	if err := validateKeys(c.Keys); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	return nil
}

// validateKeys checks each key and that no secret appears twice.
func validateKeys(keys []Key) error {
	seen := map[[32]byte]bool{}
	for i, k := range keys {
		if err := k.Validate(); err != nil {
			return fmt.Errorf("key %d: %w", i+1, err)
		}
		d := digest(k.Secret)
		if seen[d] {
			return fmt.Errorf("key %d appears twice", i+1)
		}
		seen[d] = true
	}
	return nil
}
