package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/zeebo/xxh3"

	"github.com/seenapi/seenapi/client"
)

// importOptions are the flags of import-redis.
type importOptions struct {
	redis     string // address or redis:// URL
	match     string // SCAN pattern whose one '*' is the user id
	url       string // the seenapi service
	key       string // its API key (write role)
	caCert    string // --ca-cert: a PEM file of authorities to trust for an https url
	namespace string
	workers   int
	batch     int           // items a call
	redisWait time.Duration // --redis-wait: how long a Redis that stops answering is waited for (0: not)
}

// importRedis copies "already seen" histories kept in Redis, one SET (or
// sorted set) of item ids a user, into a running seenapi service through
// its API (POST .../seen), so a recommender can move over without showing
// its users what they have already seen. It talks to the service rather
// than to the data directory so that it can run while the service serves,
// with the service's limits and keys; recording is idempotent, so an
// interrupted import is finished by running it again.
func importRedis(ctx context.Context, o *importOptions, logger *slog.Logger) error {
	pre, post, err := splitMatch(o.match)
	if err != nil {
		return err
	}
	// go-redis logs its connection retries itself; the errors that matter
	// come back to us, so its lines go to the log's debug level.
	redis.SetLogger(redisLogger{logger})
	rdb, err := redisClient(o.redis)
	if err != nil {
		return err
	}
	defer rdb.Close()
	watch := &redisWatch{wait: o.redisWait, logger: logger}
	rdb.Options().OnConnect = watch.onConnect
	// A Redis started with the import may not listen yet: it is waited
	// for as one that stops answering meanwhile is.
	if err := watch.do(ctx, func() error { return rdb.Ping(ctx).Err() }); err != nil {
		return fmt.Errorf("redis at %s: %w", shownURL(o.redis), passwordHint(err, rdb.Options().Addr))
	}
	// One keep-alive connection a worker (Go's default keeps two idle), a
	// bound on a call that hangs, and no connections left behind.
	transport, err := serviceTransport(o.caCert)
	if err != nil {
		return err
	}
	transport.MaxIdleConnsPerHost = o.workers
	httpc := &http.Client{Transport: transport, Timeout: time.Minute}
	defer httpc.CloseIdleConnections()
	// The checks retry the service's answers only: a --url where nothing
	// answers fails at once rather than after a minute of retries.
	checks, err := serviceClient(o, httpc, func(resp *http.Response, _ error) bool { return resp != nil })
	if err != nil {
		return err
	}
	maxItems, err := checkService(ctx, checks, o)
	if err != nil {
		return err
	}
	// The service says how many items it takes a call: a larger --batch
	// (the default 1000 against a lowered --max-candidates) would fail
	// every user of more items than that.
	batch := o.batch
	if maxItems > 0 && batch > maxItems {
		batch = maxItems
		logger.Info("seenapi: --batch lowered to the most items the service takes a call (its --max-candidates)", "batch", batch)
	}
	im := &importer{rdb: rdb, watch: watch, ns: o.namespace, pre: pre, post: post, batch: batch,
		logger: logger, start: time.Now(), skippedTypes: map[string]bool{}}
	// A recording rides out a restart of the service too (no answer
	// while it is down), and each retry is counted for the log.
	if im.api, err = serviceClient(o, httpc, func(*http.Response, error) bool { im.retries.Add(1); return true }); err != nil {
		return err
	}
	// As given (a redis:// URL's database included), but for a password.
	logger.Info("seenapi: importing from redis", "redis", shownURL(o.redis), "match", o.match, "url", shownURL(o.url), "ns", o.namespace)

	// Work ends on an interruption, or when Redis stops answering.
	work, stopWork := context.WithCancelCause(ctx)
	defer stopWork(nil)
	im.stop = stopWork
	keys := make(chan string, 4*o.workers)
	var wg sync.WaitGroup
	for range o.workers {
		wg.Go(func() {
			for k := range keys {
				im.importKey(work, k)
			}
		})
	}
	stopProgress := im.logProgress(5 * time.Second)
	scanErr := im.scan(work, o.match, keys)
	close(keys)
	wg.Wait()
	stopProgress()
	if work.Err() != nil || scanErr != nil {
		im.log("seenapi: import stopped")
	} else {
		im.log("seenapi: import done")
	}
	if err := ctx.Err(); err != nil {
		if cut := im.retryCut(); cut != nil {
			// Say why calls were still waiting: a service that kept
			// refusing them, or that did not answer.
			err = cut
		}
		return fmt.Errorf("import interrupted (run it again to finish it): %w", err)
	}
	if work.Err() != nil {
		return fmt.Errorf("redis at %s: %w; the import stopped (run it again to finish it)", shownURL(o.redis), clause{context.Cause(work)})
	}
	if scanErr != nil {
		return fmt.Errorf("redis SCAN: %w (run the import again to finish it)", clause{scanErr})
	}
	if im.listed.Load() == 0 {
		// Most likely a --match that does not fit the keys, or another
		// database: how many keys this one holds tells which.
		n, err := rdb.DBSize(ctx).Result()
		if err != nil {
			return fmt.Errorf("redis DBSIZE: %w", err)
		}
		logger.Warn("seenapi: no key matched --match; nothing was imported", "match", o.match, "keys_in_database", n)
	}
	if n := im.failed.Load(); n > 0 {
		if n == 1 {
			return errors.New("1 user was not imported (it is in the log)")
		}
		return fmt.Errorf("%d users were not imported (each is in the log)", n)
	}
	return nil
}

// splitMatch returns what comes before and after the one '*' of pattern.
func splitMatch(pattern string) (pre, post string, err error) {
	if strings.Count(pattern, "*") != 1 || strings.ContainsAny(pattern, `?[]\`) {
		return "", "", fmt.Errorf("--match %q: want one * standing for the user id (e.g. seen:* or user:*:seen) and no other ?, [, ] or \\", pattern)
	}
	pre, post, _ = strings.Cut(pattern, "*")
	return pre, post, nil
}

// passwordHint adds to Redis's NOAUTH, which --redis without a password
// meets, how to give one: a redis:// URL is the only way, and its password
// is better kept out of the process list.
func passwordHint(err error, addr string) error {
	var re redis.Error
	if !errors.As(err, &re) || !strings.HasPrefix(re.Error(), "NOAUTH") {
		return err
	}
	return fmt.Errorf("%w (give its password in a redis:// URL, --redis redis://:PASSWORD@%s or redis://USER:PASSWORD@..., better set as SEENAPI_REDIS)", clause{err}, addr)
}

// redisClient connects to addr: host:port, or a redis:// or rediss:// URL
// (which may carry a user, a password and a database number).
func redisClient(addr string) (*redis.Client, error) {
	if !strings.Contains(addr, "://") {
		return redis.NewClient(&redis.Options{Addr: addr}), nil
	}
	opts, err := redis.ParseURL(addr)
	if err != nil {
		return nil, fmt.Errorf("--redis: %w", err)
	}
	return redis.NewClient(opts), nil
}

// serviceClient is a client of the service at --url with --key, sending
// each call again while the service is overloaded (503, 429, after their
// Retry-After) or, as onRetry allows, does not answer, for up to
// retryFor, each attempt through httpc (see client.WithRetries).
func serviceClient(o *importOptions, httpc *http.Client, onRetry func(*http.Response, error) bool) (*client.ClientWithResponses, error) {
	c, err := client.NewClientWithResponses(strings.TrimRight(o.url, "/"),
		client.WithRetries(client.Retry{For: retryFor, WaitMin: 100 * time.Millisecond, WaitMax: 5 * time.Second,
			HTTPClient: httpc, OnRetry: onRetry}),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if o.key != "" {
				r.Header.Set("Authorization", "Bearer "+o.key)
			}
			return nil
		}))
	if err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	return c, nil
}

// retryFor is how long one call is retried before it is given up.
const retryFor = time.Minute

// checkService fails early on what would fail every user: a service that
// does not answer, a key that may not record, an unknown namespace. It
// returns the most items the service takes in one call (GET /v1/auth's
// max_candidates).
func checkService(ctx context.Context, api *client.ClientWithResponses, o *importOptions) (maxItems int, err error) {
	traced, handshakeFailed := watchHandshake(ctx)
	auth, err := api.GetAuthWithResponse(traced)
	if auth != nil {
		err = outcome(auth.HTTPResponse, auth.Body, err)
	}
	if err != nil {
		return 0, fmt.Errorf("seenapi at %s: %w", shownURL(o.url), schemeHint(trustHint(routeHint(keyHint(err, "write", ""), o.url)), o.url, handshakeFailed()))
	}
	switch role := auth.JSON200.Role; {
	case role == client.Write || role == client.Admin:
	case !role.Valid():
		// seenapi answers every key's role: a JSON answer without one
		// is another server's, in front of it or in its place.
		what := "no role"
		if role != "" {
			what = "a role seenapi does not have, " + string(role)
		}
		return 0, fmt.Errorf("seenapi at %s: GET /v1/auth was answered 200 with %s (%.200s): not by seenapi, most likely, but by a proxy or a load balancer in front of it, or another service at that address; check --url",
			shownURL(o.url), what, bytes.TrimSpace(auth.Body))
	default:
		return 0, fmt.Errorf("seenapi at %s: the key's role is %s; recording needs write (--key or SEENAPI_KEY)", shownURL(o.url), role)
	}
	ns, err := api.GetNamespaceWithResponse(ctx, o.namespace)
	if ns != nil {
		err = outcome(ns.HTTPResponse, ns.Body, err)
	}
	if err != nil {
		return 0, fmt.Errorf("namespace %q: %w", o.namespace, err)
	}
	return auth.JSON200.MaxCandidates, nil
}

// outcome returns the error of a generated client's call, whose answer is
// resp and body (nil when none came) and whose error is err: the answer's
// problem (client.ProblemOf) unless it is a success, else err (no answer,
// or a success of a body other than the documented one: a
// *client.BodyError).
func outcome(resp *http.Response, body []byte, err error) error {
	if resp == nil {
		return err
	}
	if p := client.ProblemOf(resp, body); p != nil {
		return p
	}
	return err
}

// importer imports keys; its methods are safe for concurrent use.
type importer struct {
	rdb       *redis.Client
	watch     *redisWatch
	api       *client.ClientWithResponses
	ns        string
	pre, post string
	batch     int
	logger    *slog.Logger
	start     time.Time
	stop      context.CancelCauseFunc // ends the import: Redis went away

	// listed counts the keys SCAN listed; the log's keys are those gone
	// through (imported, skipped or failed), fewer when the import stops.
	listed, users, items, recorded, skipped, failed, retries atomic.Int64

	mu           sync.Mutex
	skippedTypes map[string]bool // types already logged as skipped
	cut          error           // the first call interrupted while it was retried
}

// scan sends to keys each key of Redis that matches match, once, until
// SCAN is done or ctx ends; it returns SCAN's error.
//
// A cursor of SCAN is a position in one server's hash table, whose hash
// seed each redis-server process draws at its start: the cursor of a
// Redis that restarted, or of the one failed over from, would list some
// keys again and never list others in the new one. So on another server
// the scan starts over, and skips the keys already listed (remembered by
// a 128-bit hash in listedKeys, while --redis-wait lets the import wait
// for Redis, or Redis refuses INFO: see redisWatch.unknownServer).
func (im *importer) scan(ctx context.Context, match string, keys chan<- string) error {
	var listed *listedKeys
	if im.watch.wait > 0 || im.watch.isBlind() {
		listed = newListedKeys()
	}
	gen := im.watch.gen.Load()
	for cursor := uint64(0); ctx.Err() == nil; {
		var page []string
		var next uint64
		err := im.watch.do(ctx, func() (err error) {
			page, next, err = im.rdb.Scan(ctx, cursor, match, 1000).Result()
			return err
		})
		if err != nil {
			return err
		}
		if g := im.watch.gen.Load(); g != gen {
			gen, cursor = g, 0
			continue
		}
		for _, k := range page {
			if listed != nil && !listed.add(k) {
				continue
			}
			if ctx.Err() != nil {
				return nil
			}
			im.listed.Add(1)
			keys <- k
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
	return nil
}

// listedKeys is the set of keys SCAN listed (see importer.scan), by
// xxh3's 128-bit hash: 64 bits would risk a collision skipping a key. It
// takes little more than the hashes' 16 bytes a key (18 to 19, measured
// at one to ten million keys), where a map of them took 37 to 56 (its
// free slots, and its doubling): the hashes are kept in sorted slices,
// one for each value of their top 16 bits, short enough (some 150 hashes
// at ten million keys) that adding one moves little. Not safe for
// concurrent use.
type listedKeys struct {
	shards [][]xxh3.Uint128 // by the hash's top 16 bits, each sorted
}

func newListedKeys() *listedKeys {
	return &listedKeys{shards: make([][]xxh3.Uint128, 1<<16)}
}

// add adds key, and reports whether it was not there yet.
func (l *listedKeys) add(key string) bool {
	h := xxh3.HashString128(key)
	s := &l.shards[h.Hi>>48]
	i, found := slices.BinarySearchFunc(*s, h, func(a, b xxh3.Uint128) int {
		if c := cmp.Compare(a.Hi, b.Hi); c != 0 {
			return c
		}
		return cmp.Compare(a.Lo, b.Lo)
	})
	if found {
		return false
	}
	if len(*s) == cap(*s) {
		// By an eighth: append's doubling would leave a third of the
		// slices' room unused, on average.
		grown := make([]xxh3.Uint128, len(*s), len(*s)+len(*s)/8+2)
		copy(grown, *s)
		*s = grown
	}
	*s = slices.Insert(*s, i, h)
	return true
}

// importKey records every member of key as seen by the user the key names.
func (im *importer) importKey(ctx context.Context, key string) {
	// Redis answering as another server meanwhile: the key's SSCAN cursor
	// was the last one's (see scan), so the key is gone through again.
	for ctx.Err() == nil && im.tryKey(ctx, key) {
	}
}

// tryKey is importKey's one pass through key; again is true when Redis
// came back as another server meanwhile, its items then not counted.
func (im *importer) tryKey(ctx context.Context, key string) (again bool) {
	gen := im.watch.gen.Load()
	user := key[len(im.pre) : len(key)-len(im.post)]
	var typ string
	err := im.watch.do(ctx, func() (err error) {
		typ, err = im.rdb.Type(ctx, key).Result()
		return err
	})
	if err != nil {
		im.redisFailed(ctx, key, user, "TYPE", err)
		return false
	}
	if im.watch.gen.Load() != gen {
		return true
	}
	// Each scan returns a page of members and the next cursor (0: done).
	var scan func(cursor uint64) ([]string, uint64, error)
	switch typ {
	case "set":
		scan = func(cursor uint64) (page []string, next uint64, err error) {
			err = im.watch.do(ctx, func() (err error) {
				page, next, err = im.rdb.SScan(ctx, key, cursor, "", int64(im.batch)).Result()
				return err
			})
			return page, next, err
		}
	case "zset":
		scan = func(cursor uint64) (members []string, next uint64, err error) {
			var page []string
			err = im.watch.do(ctx, func() (err error) {
				page, next, err = im.rdb.ZScan(ctx, key, cursor, "", int64(im.batch)).Result()
				return err
			})
			for i := 0; i < len(page); i += 2 { // member, score, member, score...
				members = append(members, page[i])
			}
			return members, next, err
		}
	case "none": // deleted since SCAN listed it
		im.skipped.Add(1)
		return false
	default:
		im.skipped.Add(1)
		im.mu.Lock()
		first := !im.skippedTypes[typ]
		im.skippedTypes[typ] = true
		im.mu.Unlock()
		if first {
			im.logger.Warn("seenapi: skipping keys that are neither a set nor a sorted set", "type", typ, "key", key)
		}
		return false
	}
	if user == "" {
		im.fail(ctx, key, user, errors.New("the key names no user (its * matched nothing)"))
		return false
	}
	// A URL path resolves "." and ".." segments, so the service cannot
	// take these ids: its answer (404 or 405) would not say why.
	if user == "." || user == ".." {
		im.fail(ctx, key, user, fmt.Errorf("the service does not accept the user id %q (a URL path cannot carry it)", user))
		return false
	}
	var pending []string
	var sent int64 // items counted so far
	for cursor := uint64(0); ; {
		page, next, err := scan(cursor)
		if err != nil {
			im.redisFailed(ctx, key, user, "scan of "+typ, err)
			return false
		}
		if im.watch.gen.Load() != gen {
			im.items.Add(-sent) // counted again on the next pass
			return true
		}
		pending = append(pending, page...)
		for len(pending) >= im.batch || (next == 0 && len(pending) > 0) {
			n := min(len(pending), im.batch)
			if err := im.record(ctx, user, pending[:n]); err != nil {
				im.fail(ctx, key, user, err)
				return false
			}
			sent += int64(n)
			pending = pending[n:]
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	im.users.Add(1)
	return false
}

// record records items as seen by user, in bulk: a user the service does
// not hold in memory is written to its store and left there, so the import
// does not push out the users being served.
func (im *importer) record(ctx context.Context, user string, items []string) error {
	bulk := true
	r, err := im.api.RecordSeenWithResponse(ctx, im.ns, user, &client.RecordSeenParams{Bulk: &bulk}, client.ItemsRequest{Items: items})
	if r != nil {
		if r.JSON200 != nil {
			im.items.Add(int64(len(items)))
			im.recorded.Add(int64(r.JSON200.Recorded))
		}
		err = outcome(r.HTTPResponse, r.Body, err)
	}
	// The service takes fewer bytes a call than --batch makes (long items),
	// or fewer items than it took at the start (restarted with a lower
	// --max-candidates meanwhile): say what to change.
	if p := (*client.Problem)(nil); errors.As(err, &p) {
		switch p.Type {
		case client.ProblemTypeTooManyCandidates:
			return fmt.Errorf("%w; import again with --batch at most the service's --max-candidates", err)
		case client.ProblemTypeBodyTooLarge:
			return fmt.Errorf("%w; import again with a smaller --batch (the user's items are long), or raise the service's --max-body-bytes", err)
		}
	}
	return err
}

func (im *importer) fail(ctx context.Context, key, user string, err error) {
	if ctx.Err() != nil { // interrupted: not the user's fault
		if errors.As(err, new(*client.RetryCutError)) {
			im.mu.Lock()
			if im.cut == nil {
				im.cut = err
			}
			im.mu.Unlock()
		}
		return
	}
	im.failed.Add(1)
	im.logger.Error("seenapi: user not imported", "key", key, "user", user, "err", err)
}

// redisFailed takes the error of a Redis command (cmd) on key. Redis's
// refusal of that key (WRONGTYPE: it changed type since TYPE; NOPERM: an
// ACL) fails that user alone. Anything else would fail every key left in
// turn, one line of log a key, each after go-redis's own retries: no
// answer (Redis went away, or the network) or one of the whole server's
// (BUSY running a script, LOADING, MASTERDOWN, ...), once --redis-wait
// has been waited out (see redisWatch). It stops the import, whose error
// says so once.
func (im *importer) redisFailed(ctx context.Context, key, user, cmd string, err error) {
	var re redis.Error
	if errors.As(err, &re) && (strings.HasPrefix(re.Error(), "WRONGTYPE") || strings.HasPrefix(re.Error(), "NOPERM")) {
		im.fail(ctx, key, user, fmt.Errorf("redis %s: %w", cmd, err))
		return
	}
	im.stop(fmt.Errorf("%s %s: %w", cmd, key, err))
}

// retryCut returns the error of the first call interrupted while it was
// retried (a *client.RetryCutError's, which names the answer that asked
// for the retry), or nil.
func (im *importer) retryCut() error {
	im.mu.Lock()
	defer im.mu.Unlock()
	return im.cut
}

// logProgress logs the counts every period until the returned func is called.
func (im *importer) logProgress(period time.Duration) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				im.log("seenapi: importing")
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); <-stopped }
}

func (im *importer) log(msg string) {
	elapsed := time.Since(im.start)
	users, skipped, failed := im.users.Load(), im.skipped.Load(), im.failed.Load()
	im.logger.Info(msg, "keys", users+skipped+failed, "users", users, "items", im.items.Load(),
		"newly_seen", im.recorded.Load(), "skipped", skipped, "failed", failed, "retries", im.retries.Load(),
		"elapsed", elapsed.Round(time.Millisecond),
		"users_per_s", usersPerSecond(users, elapsed))
}

// usersPerSecond is the import's rate as the log gives it: a whole number,
// or to a tenth under 10, so that a slow import (a rate-limited key, long
// retries) does not read as 0 users a second.
func usersPerSecond(users int64, elapsed time.Duration) float64 {
	r := float64(users) / max(elapsed.Seconds(), 1e-3)
	if r < 10 {
		return math.Round(r*10) / 10
	}
	return math.Round(r)
}

// keyHint adds to a refusal of the key (401, 403) how a command gives one:
// the service's own words speak of a request header.
//
// forbidden, when not empty, qualifies the key a 403 asks for beyond its
// role: an admin key limited to some namespaces is refused a backup, and
// "give a key of the admin role" alone would puzzle its holder.
func keyHint(err error, role, forbidden string) error {
	var p *client.Problem
	if errors.As(err, &p) && (p.Status == http.StatusUnauthorized || p.Status == http.StatusForbidden) {
		if p.Status == http.StatusForbidden && forbidden != "" {
			role += " role, " + forbidden + ","
		} else {
			role += " role"
		}
		return fmt.Errorf("%w; give a key of the %s with --key or SEENAPI_KEY", err, role)
	}
	return err
}

// routeHint adds to a 404 of a route that does not exist (the service's
// not-found, or another server's page) that --url is the service's root: a
// --url with a path of the API's own (http://host:8080/v1) sends every
// call to no route, and the service's "no such route" does not say why.
func routeHint(err error, serviceURL string) error {
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != http.StatusNotFound || p.Type != client.ProblemTypeNotFound && p.Type != client.ProblemTypeAboutBlank {
		return err
	}
	hint := "is --url a seenapi service?"
	if u, perr := url.Parse(serviceURL); perr == nil && strings.Trim(u.Path, "/") != "" {
		hint = "give --url the service's root, e.g. " + shownURL((&url.URL{Scheme: u.Scheme, User: u.User, Host: u.Host}).String())
	}
	if p.Instance != nil {
		return fmt.Errorf("%w; the call went to %s: %s", err, *p.Instance, hint)
	}
	return fmt.Errorf("%w; %s", err, hint)
}

// clause is an error put inside a sentence of ours: Redis's own messages
// may end in a period ("... SCRIPT KILL or SHUTDOWN NOSAVE."), which
// would read ".;" before what follows.
type clause struct{ error }

func (c clause) Error() string { return strings.TrimSuffix(c.error.Error(), ".") }
func (c clause) Unwrap() error { return c.error }

// redisLogger takes go-redis's log lines.
type redisLogger struct{ *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

// redisWatch waits out a Redis that stops answering for a while (a
// restart, a failover, a LOADING after a restart, a script running BUSY)
// rather than stop an import of millions of keys at the first blip, and
// tells when Redis answers again as another server (see importer.scan).
// Its methods are safe for concurrent use.
type redisWatch struct {
	wait   time.Duration // --redis-wait; 0: an outage stops the import at once
	logger *slog.Logger

	// gen counts the times Redis answered as another server than before:
	// a cursor of SCAN or SSCAN is good only with the gen it began in.
	gen atomic.Int64

	answered atomic.Bool // Redis has answered a command: an error waited out says "again"
	down     atomic.Bool // since is set: the fast path of a command that succeeds
	mu       sync.Mutex
	runID    string    // the server's, of INFO server
	blind    bool      // INFO was refused: every new connection counts as another server
	since    time.Time // when the outage began; zero while Redis answers
}

// onConnect, go-redis's OnConnect, learns which server each new connection
// reaches. Every command after a restart or a failover runs on a new
// connection, so gen has changed before its answer comes back, even when
// go-redis's own retries hid the outage from the import. With --redis-wait
// 0 the connection fails instead, and so the import stops, as at an outage
// that go-redis's retries do not hide: with no keys kept to skip, SCAN
// listing from the start again would import keys twice.
func (w *redisWatch) onConnect(ctx context.Context, cn *redis.Conn) error {
	info, err := cn.Info(ctx, "server").Result()
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOPERM") {
			w.unknownServer(err)
			return nil
		}
		return err // LOADING, BUSY, ...: the command that asked waits
	}
	var id string
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			id = v
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.runID != "" && id != w.runID {
		if w.wait == 0 {
			// runID is kept: every connection to the new server fails alike.
			return fmt.Errorf("redis restarted, or failed over, meanwhile (it answers as another server, run_id %s), and with --redis-wait 0 the import does not list its keys again", id)
		}
		w.gen.Add(1)
		w.logger.Warn("seenapi: redis answers as another server (restarted, or failed over): listing its keys from the start again, skipping those already listed", "run_id", id)
	}
	w.runID = id
	return nil
}

// unknownServer takes a new connection whose server cannot be told (an ACL
// refusing INFO, err): it may reach a restarted Redis as well as the one
// before, and the restart go-redis's own retries hide leaves no other
// trace, so it is taken for one (a SCAN listing from the start again,
// skipping the keys listed, and a key read again). The first says why.
// So too with --redis-wait 0: such a restart cannot stop the import as one
// told by run_id does (see onConnect), and the old server's cursor would
// leave keys unlisted; the first PING's connection, before SCAN, makes
// scan keep the listed keys (isBlind).
func (w *redisWatch) unknownServer(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.blind {
		w.blind = true
		w.logger.Warn("seenapi: redis refuses INFO to the import's user, so a restart cannot be told: each new connection is taken for one, listing keys from the start again (skipping those already listed)", "err", err)
	}
	w.gen.Add(1)
}

// isBlind reports whether Redis refused INFO, so that every new connection
// counts as another server.
func (w *redisWatch) isBlind() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.blind
}

// do runs f, a Redis command, and while it fails as a Redis that does not
// answer does (redisOutage), runs it again until it succeeds or --redis-wait
// has passed since the outage began; then it returns f's error, which says
// how long it waited. The first command to fail logs that the import waits,
// the first to succeed after it that Redis answers again.
func (w *redisWatch) do(ctx context.Context, f func() error) error {
	for pause := 100 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		sent := time.Now()
		err := f()
		if err == nil {
			w.up(sent)
			return nil
		}
		if w.wait == 0 || ctx.Err() != nil || !redisOutage(err) {
			return err
		}
		left := w.wait - time.Since(w.outage(err))
		if left <= 0 {
			again := ""
			if w.answered.Load() {
				again = " again"
			}
			return fmt.Errorf("%w; waited %s (--redis-wait) for it to answer%s", clause{err}, shortDuration(w.wait), again)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(min(pause, left)):
		}
	}
}

// outage returns when the outage err belongs to began, now if it is the
// first error of one.
func (w *redisWatch) outage(err error) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since.IsZero() {
		w.since = time.Now()
		w.down.Store(true)
		w.logger.Warn("seenapi: redis does not answer; waiting for it", "err", err, "redis_wait", shortDuration(w.wait))
	}
	return w.since
}

// up ends the outage, if any, that began before sent: Redis answered a
// command sent then. The answer to one sent before it (answered before
// Redis ran BUSY, but back after another command's BUSY) says nothing of
// Redis now: it would log that Redis answers again, and the next error
// that it does not, twice over.
func (w *redisWatch) up(sent time.Time) {
	if !w.answered.Load() {
		w.answered.Store(true)
	}
	if !w.down.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.since.IsZero() && !sent.Before(w.since) {
		w.logger.Info("seenapi: redis answers again", "waited", time.Since(w.since).Round(time.Millisecond))
		w.since = time.Time{}
		w.down.Store(false)
	}
}

// redisOutage reports whether err is a Redis that does not answer (gone,
// refusing connections, the network, or a pool of connections that all
// hang) or answers every command with an error of the whole server's:
// BUSY running a script, LOADING its data, MASTERDOWN (a replica that
// lost its master). Those pass; others (WRONGTYPE, NOPERM, NOAUTH, ...)
// would be answered again.
func redisOutage(err error) bool {
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		return strings.HasPrefix(msg, "BUSY") || strings.HasPrefix(msg, "LOADING") || strings.HasPrefix(msg, "MASTERDOWN")
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, redis.ErrPoolTimeout)
}
