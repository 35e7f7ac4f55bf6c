package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/bytedance/sonic"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/seenapi/seenapi/eviction"
)

// itemsRequest is the body of /seen, /check and DELETE /items.
type itemsRequest struct {
	Items []string `json:"items"`
}

type seenResponse struct {
	Recorded  int  `json:"recorded"`
	SeenCount int  `json:"seen_count"`
	Saturated bool `json:"saturated,omitempty"`
}

type forgetItemsResponse struct {
	Forgotten int `json:"forgotten"`
}

type checkResponse struct {
	Seen      []bool `json:"seen"`
	SeenCount int    `json:"seen_count"`
}

type batchEntry struct {
	User       string   `json:"user"`
	Candidates []string `json:"candidates"`
	Record     string   `json:"record"`
	Limit      int64    `json:"limit"`
	OnError    string   `json:"on_error"`
}

type batchRequest struct {
	Requests []batchEntry `json:"requests"`
}

type batchAnswer struct {
	User string `json:"user"`
	filterResponse
}

type batchFailure struct {
	User  string  `json:"user"`
	Error Problem `json:"error"`
}

type batchResponse struct {
	Results []any `json:"results"`
}

// namespaceJSON is a namespace as the API shows it.
type namespaceJSON struct {
	Name            string  `json:"name"`
	Kind            string  `json:"kind"`
	FPRate          float64 `json:"fp_rate"`
	InitialCapacity uint32  `json:"initial_capacity"`
	Growth          float64 `json:"growth"`
	Tightening      float64 `json:"tightening"`
	Window          int64   `json:"window"`      // seconds
	Granularity     int64   `json:"granularity"` // seconds
	MaxItems        uint64  `json:"max_items"`
}

// The statuses of the health probes' answers (openapi.yaml's Health
// enum): /healthz's and /readyz's.
const (
	healthOK    = "ok"
	healthReady = "ready"
)

type healthJSON struct {
	Status string `json:"status"` // healthOK or healthReady
	// KeyRequired is whether the service has API keys, fixed for its life
	// (SetKeys): a client without a key (the dashboard) learns from it that
	// it needs one, where a keyless GET /v1/auth would be one more 401 in
	// the service's errors. A keyless caller learns nothing more from it
	// than from any 401.
	KeyRequired bool `json:"key_required"`
}

func toNamespaceJSON(n eviction.Namespace) namespaceJSON {
	p := n.Profile.WithDefaults()
	return namespaceJSON{Name: n.Name, Kind: p.Kind.String(), FPRate: p.FPRate,
		InitialCapacity: p.InitialCapacity, Growth: p.Growth, Tightening: p.Tightening,
		Window: int64(p.Window / time.Second), Granularity: int64(p.Granularity / time.Second),
		MaxItems: p.MaxItems}
}

// degradable reports whether an error of the hot set is one on_error=open
// answers unfiltered: the user's filter could not be read or written.
// Errors about the request itself are never degraded.
func degradable(err error) bool {
	return !errors.Is(err, eviction.ErrUnknownNamespace) && !errors.Is(err, eviction.ErrUserNotFound) &&
		!errors.Is(err, eviction.ErrBadImport) && !errors.Is(err, eviction.ErrCallKeyReused)
}

// unfiltered is the degraded answer: the candidates in order, each once, at
// most limit (0: all).
func unfiltered(candidates []string, limit int) []string {
	n := len(candidates)
	if limit > 0 {
		n = min(n, limit)
	}
	out := make([]string, 0, n)
	seen := make(map[string]struct{}, len(candidates))
	for _, c := range candidates {
		if limit > 0 && len(out) == limit {
			break
		}
		if _, dup := seen[c]; dup {
			continue
		}
		seen[c] = struct{}{}
		out = append(out, c)
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// call runs the one call for one user and builds its answer, degrading per
// on_error. The answer's strings alias candidates.
// The unseen candidates are appended to dst[:0].
func (s *Server) call(dst []string, ns, user string, candidates []string, a filterArgs, k eviction.CallKey) (filterResponse, error) {
	res, err := s.hot.FilterKeyed(dst, ns, user, candidates, a.limit, a.mode, k)
	if err != nil {
		if !a.open || !degradable(err) {
			return filterResponse{}, err
		}
		s.k.degraded.Add(1)
		// A store that fails degrades every such call: a line a second
		// for each kind of failure, as for the calls that fail
		// (errorHandler), counting those held back.
		if ok, dropped := s.failLog.allow("degraded "+problemFor(err).Type, time.Now()); ok {
			s.cfg.Logger.Warn("seenapi: answering unfiltered (on_error open)", "ns", ns, "err", err, "held_back", dropped)
		}
		return filterResponse{Unseen: unfiltered(candidates, a.limit), Degraded: true}, nil
	}
	if res.Unseen == nil {
		res.Unseen = []string{}
	}
	return filterResponse{Unseen: res.Unseen, SeenCount: res.SeenCount, Recorded: res.Recorded,
		Saturated: res.Saturated, replayed: res.Replayed, born: res.Born}, nil
}

// filterUser is the one call.
func (s *Server) filterUser(c *fiber.Ctx) error {
	ns, user, body, err := s.userRequest(c)
	if err != nil {
		return err
	}
	req := filterRequests.Get().(*filterRequest)
	defer s.releaseFilterRequest(req)
	if err := decode(body, req); err != nil {
		return err
	}
	a, err := s.filterCall(req.Candidates, req.Record, req.Limit, req.OnError, "", body)
	if err != nil {
		return err
	}
	if given, err := s.beginCall(c); given || err != nil {
		return err
	}
	var k eviction.CallKey
	if scope, ok := c.Locals(callScopeLocal).(*callScope); ok {
		k = scope.key("")
	}
	if req.resp, err = s.call(req.unseen, ns, user, req.Candidates, a, k); err != nil {
		return err
	}
	req.unseen = req.resp.Unseen
	if scope, ok := c.Locals(callScopeLocal).(*callScope); ok && req.resp.Degraded {
		scope.failed = true // not kept: the retry is served anew
	}
	if req.resp.replayed {
		s.replays.replayed.Add(1)
		c.Set(HeaderReplayed, "true")
		if scope, ok := c.Locals(callScopeLocal).(*callScope); ok {
			scope.gives(req.resp.born)
		}
	}
	return sendJSON(c, &req.resp)
}

// filterRequests recycles the one call's request, its candidates slice,
// which the decoder fills in place instead of growing a new one each call,
// and the slice of its answer's unseen candidates.
var filterRequests = sync.Pool{New: func() any { return new(filterRequest) }}

// releaseFilterRequest returns req to the pool once the answer is encoded,
// dropping its strings (they alias the request buffer) and any slice larger
// than a call may carry.
func (s *Server) releaseFilterRequest(req *filterRequest) {
	reuse := func(l []string) []string {
		clear(l)
		if cap(l) > s.cfg.MaxCandidates {
			return nil
		}
		return l[:0]
	}
	*req = filterRequest{Candidates: reuse(req.Candidates), unseen: reuse(req.unseen)}
	filterRequests.Put(req)
}

// userRequest validates the namespace, the user and the JSON body of a
// per-user route.
func (s *Server) userRequest(c *fiber.Ctx) (ns, user string, body []byte, err error) {
	if ns, user, err = s.nsUser(c); err != nil {
		return
	}
	body, err = s.jsonBody(c)
	return
}

// itemsRequest validates a per-user route and its items body.
func (s *Server) itemsRequest(c *fiber.Ctx) (ns, user string, items []string, err error) {
	ns, user, body, err := s.userRequest(c)
	if err != nil {
		return "", "", nil, err
	}
	var req itemsRequest
	if err := decode(body, &req); err != nil {
		return "", "", nil, err
	}
	return ns, user, req.Items, s.items(req.Items, "/items", body)
}

func (s *Server) recordSeen(c *fiber.Ctx) error {
	ns, user, items, err := s.itemsRequest(c)
	if err != nil {
		return err
	}
	record := s.hot.Record
	switch c.Query("bulk") {
	case "", "false":
	case "true":
		record = s.hot.RecordBulk
	default:
		return fieldError(pBadRequest, "", "bulk", "bulk is true or false")
	}
	res, err := record(ns, user, items)
	if err != nil {
		return err
	}
	return c.JSON(&seenResponse{Recorded: res.Recorded, SeenCount: res.SeenCount, Saturated: res.Saturated})
}

func (s *Server) checkSeen(c *fiber.Ctx) error {
	ns, user, items, err := s.itemsRequest(c)
	if err != nil {
		return err
	}
	seen, err := s.hot.Check(ns, user, items, make([]bool, 0, len(items)))
	if err != nil {
		return err
	}
	n := 0
	for _, b := range seen {
		n += boolInt(b)
	}
	return c.JSON(&checkResponse{Seen: seen, SeenCount: n})
}

func (s *Server) forgetItems(c *fiber.Ctx) error {
	ns, user, items, err := s.itemsRequest(c)
	if err != nil {
		return err
	}
	n, err := s.hot.ForgetItems(ns, user, items)
	if err != nil {
		return err
	}
	return c.JSON(&forgetItemsResponse{Forgotten: n})
}

func (s *Server) getUser(c *fiber.Ctx) error {
	ns, user, err := s.nsUser(c)
	if err != nil {
		return err
	}
	st, err := s.hot.User(ns, user)
	if err != nil {
		return err
	}
	return c.JSON(&st)
}

// HeaderDataErased is set on the answer of an erase (DELETE
// .../users/{user}): "true" when there was anything of the user to erase,
// "false" when there was nothing.
const HeaderDataErased = "Data-Erased"

func (s *Server) forgetUser(c *fiber.Ctx) error {
	ns, user, err := s.nsUser(c)
	if err != nil {
		return err
	}
	if err := noBody(c, "it erases the whole user; to forget some of its items, DELETE .../users/{user}/items "+
		`(a client sends this for the user "." of .../users/./items: "." and ".." cannot be user ids)`); err != nil {
		return err
	}
	// The answers go while the user is erased and not yet loaded afresh:
	// a keyed call in flight then knows which user it made its call on.
	had, err := s.hot.ForgetThen(ns, user, func() { s.replays.erase(ns, user) })
	if err != nil {
		return err
	}
	s.audit(c, "seenapi: user erased", "namespace", ns, "user", user, "had_data", had)
	// Said by the erase itself: a look before it (GET) may be out of date
	// by then, the user recorded meanwhile.
	c.Set(HeaderDataErased, strconv.FormatBool(had))
	return c.SendStatus(fiber.StatusNoContent)
}

// noBody refuses a body on a route that erases and takes none: such a
// request was meant for another route, and served it would erase more than
// asked. DELETE .../users/{user} with {"items": [...]} is a forget-items
// call without its /items; a generated client sends one too when asked to
// forget items of the user ".", whose path it resolves to
// .../users/items, the erase of the user "items". what says what the
// route does instead.
func noBody(c *fiber.Ctx, what string) error {
	if len(c.Request().Body()) == 0 {
		return nil
	}
	return newError(pBadRequest, "%s %s takes no body: %s; nothing was erased", c.Method(), docPath(c.Route().Path), what)
}

func (s *Server) exportUser(c *fiber.Ctx) error {
	ns, user, err := s.nsUser(c)
	if err != nil {
		return err
	}
	b, err := s.hot.Export(ns, user)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEOctetStream)
	return c.Send(b)
}

// backup streams a backup of the store. The stream is written after the
// handler returns, so a failure once it has begun cannot change the status:
// the backup then lacks its end mark, which restore refuses, and a failure
// of the store ends it with a stop mark naming the cause (storage.Backup),
// which seenapi backup --url reports. With skip_damaged=true, the users
// whose stored filter cannot be read are left out instead, named in the
// stream's skip mark and logged (storage.Store.BackupSkippingDamaged).
func (s *Server) backup(c *fiber.Ctx) error {
	// A backup holds every namespace: a key limited to some may not take
	// one (admit lets it through the route, which has no {ns}).
	by, m := s.caller(c)
	if m.scope != nil {
		return newError(pForbidden, "this API key is limited to the namespaces %s; a backup holds every namespace",
			s.scopeWords(m))
	}
	head := c.Method() == fiber.MethodHead
	// skip_damaged: the operator's choice of a backup without the users
	// whose stored filter cannot be read, which the stream names, over
	// none until they are repaired.
	var skipDamaged bool
	switch c.Query("skip_damaged") {
	case "", "false":
	case "true":
		skipDamaged = true
	default:
		return fieldError(pBadRequest, "", "skip_damaged", "skip_damaged is true or false")
	}
	// One backup at a time. Each holds a snapshot of the store, the
	// journal not yet written back and the store's stream buffers (a few
	// times the store's size while its client reads slower than it is
	// made), and the in-flight cap does not count it: the stream is
	// written after the handler returns. Backups asked for at once by
	// clients that did not read them took the process past gigabytes. A
	// HEAD makes no backup.
	if !head && !s.backingUp.CompareAndSwap(false, true) {
		return &apiError{kind: pOverloaded, retry: backupRetry,
			detail: "a backup is being taken; one is taken at a time: retry once it ends"}
	}
	// The backup's headers, once it is taken: a refusal with them would be
	// saved as a backup by a browser or curl -OJ.
	c.Set(fiber.HeaderContentType, fiber.MIMEOctetStream)
	c.Set(fiber.HeaderContentDisposition,
		`attachment; filename="seenapi-`+time.Now().UTC().Format("20060102T150405Z")+`.backup"`)
	if head {
		// GET's headers only: a stream started would be cut, and fasthttp
		// would send its chunked encoding's end.
		return nil
	}
	// The server's write timeout bounds a whole answer from when it starts;
	// a backup may take much longer. Where the socket can be watched, the
	// stream has no deadline, and awaitDelivery cuts off a client that
	// acknowledges no byte for the idle timeout: a client that reads slowly
	// through a large receive buffer acknowledges nothing for seconds at a
	// time (its kernel reopens the window only once a good part of the
	// buffer is free), so only a connection idle that long is taken for
	// dead. Elsewhere each write pushes the write deadline on.
	conn, logger := c.Context().Conn(), s.cfg.Logger
	logger.Info("seenapi: backup started", "by", by)
	// fasthttp runs the writer whether or not the answer is sent (a client
	// gone makes its writes fail), so the backup's place is given back.
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer s.backingUp.Store(false)
		cw := &countingWriter{w: w}
		watch, err := watchSocket(conn)
		if err != nil {
			cw.w = deadlineWriter{w: w, conn: conn, timeout: s.cfg.WriteTimeout}
		}
		written := make(chan error, 1)
		s.delivering.Add(1)
		go awaitDelivery(conn, watch, s.cfg.IdleTimeout, written, func(err error) {
			defer s.delivering.Add(-1)
			switch err {
			case nil:
				logger.Info("seenapi: backup taken", "bytes", cw.n, "by", by)
			case errClosedEarly:
				logger.Warn("seenapi: a backup's connection closed before its client acknowledged the end; "+
					"a backup that lacks its end mark is refused by restore", "err", err, "bytes", cw.n, "by", by)
			default:
				logger.Error("seenapi: a backup stream failed; the client got a backup without its end mark", "err", err, "bytes", cw.n, "by", by)
			}
		})
		if skipDamaged {
			var skipped []eviction.SkippedUser
			skipped, err = s.hot.BackupSkippingDamaged(cw)
			for _, u := range skipped {
				logger.Warn("seenapi: a backup leaves out a user whose stored filter is damaged (skip_damaged)",
					"ns", u.NS, "user", u.User, "reason", u.Reason, "by", by)
			}
		} else {
			err = s.hot.Backup(cw)
		}
		if err == nil {
			err = w.Flush()
		}
		written <- err
	})
	return nil
}

// awaitDelivery follows a stream written to conn while written has not
// given the writer's result, and then its last bytes, which the kernel's
// buffers may hold by the tens of megabytes after the last write returned.
// It keeps conn free of a write deadline, so that a slow client is cut off
// neither by one large write nor before the end, and calls done once: with
// the writer's error if it failed; with nil once the client has
// acknowledged every byte; with errCutOff once bytes waited for timeout
// with none acknowledged (the connection is then reset, so that what the
// kernel holds is not delivered after the failure was logged); and with
// errClosedEarly if the client went away first. Without a watch (w nil)
// it waits for the writer only.
func awaitDelivery(conn net.Conn, w *socketWatch, timeout time.Duration, written <-chan error, done func(error)) {
	if w == nil {
		done(<-written)
		return
	}
	// Polled often enough to lift the server's deadline well within it.
	const poll = 20 * time.Millisecond
	var last uint64
	lastMoved, writing := time.Now(), true
	end := func(err error, reset bool) {
		if reset {
			conn.Close()
		}
		w.close(reset)
		if writing {
			<-written // it fails too, once conn is closed
		}
		done(err)
	}
	for ; ; time.Sleep(poll) {
		if writing {
			select {
			case err := <-written:
				writing = false
				if err != nil {
					end(err, false)
					return
				}
			default:
			}
		}
		// fasthttp sets the server's deadline as it starts the answer.
		_ = conn.SetWriteDeadline(time.Time{}) // fails once closed, which the watch sees
		acked, pending, reset, err := w.delivered()
		switch {
		case err != nil:
			// Unwatched, the stream would have no deadline left.
			end(err, true)
			return
		case reset: // before !pending: a reset socket holds nothing to send
			end(errClosedEarly, false)
			return
		case !pending && !writing:
			end(nil, false)
			return
		case acked > last || !pending:
			// The client took bytes, or has all so far and waits for more.
			last, lastMoved = acked, time.Now()
		case timeout > 0 && time.Since(lastMoved) > timeout:
			end(errCutOff, true)
			return
		}
	}
}

var (
	errCutOff      = errors.New("the client acknowledged nothing for --idle-timeout and was cut off")
	errClosedEarly = errors.New("the connection closed before the client acknowledged the end")
)

// backupRetry is the Retry-After of a backup asked for while another is
// being taken.
const backupRetry = 10 * time.Second

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// deadlineWriter moves conn's write deadline timeout past each write to w.
type deadlineWriter struct {
	w       io.Writer
	conn    net.Conn
	timeout time.Duration
}

func (d deadlineWriter) Write(p []byte) (int, error) {
	if d.timeout > 0 {
		if err := d.conn.SetWriteDeadline(time.Now().Add(d.timeout)); err != nil {
			return 0, err
		}
	}
	return d.w.Write(p)
}

func (s *Server) importUser(c *fiber.Ctx) error {
	ns, user, err := s.nsUser(c)
	if err != nil {
		return err
	}
	var replace bool
	mode := "merge"
	switch c.Query("mode") {
	case "", "merge":
	case "replace":
		replace, mode = true, "replace"
	default:
		return fieldError(pBadRequest, "", "mode", "mode is merge or replace")
	}
	if err := checkEncoding(c); err != nil {
		return err
	}
	body := c.Request().Body()
	if len(body) == 0 {
		return newError(pBadImport, "the body is empty; send the bytes of an export")
	}
	if len(body) > s.cfg.MaxImportBytes {
		return bodyTooLarge(len(body), s.cfg.MaxImportBytes)
	}
	// The request buffer is reused after this handler: the filter gets its own copy.
	imported, err := s.hot.Import(ns, user, bytes.Clone(body), replace, int64(s.cfg.MaxImportBytes))
	if err != nil {
		return err
	}
	msg, args := "seenapi: filter imported", []any{"namespace", ns, "user", user, "mode", mode, "bytes", len(body)}
	if !imported {
		// Answered 204 as a call that records nothing is, but the log must
		// not tell an operator that a user was written.
		msg = "seenapi: filter import wrote nothing"
		args = append(args, "reason", "the filter holds no item (it never recorded one, or all have left the window since), and the user has none: no user is made")
	}
	s.audit(c, msg, args...)
	return c.SendStatus(fiber.StatusNoContent)
}

// filterBatch is the one call for many users. The whole batch is validated
// before any work; per-user failures while serving are that user's error.
func (s *Server) filterBatch(c *fiber.Ctx) error {
	var req batchRequest
	ns, args, err := s.batchArgs(c, &req)
	// A batch takes from its caller's rate one request a user, as many
	// calls of one user would (admit took none: the route is selfRated).
	// One refused for its input takes one, as any request does: taken by
	// its users, a batch of a thousand refused for one bad user id would
	// empty its key's burst, and the key's other calls would be refused.
	n := 1
	if err == nil {
		n = len(req.Requests)
	}
	if err := s.takeRate(c, n); err != nil {
		if e, ok := err.(*apiError); ok && n > 1 {
			e.detail = "a batch takes one request of the rate a user, this one " + itoa(n) + ": " + e.detail
		}
		return err
	}
	if err != nil {
		return err
	}
	if given, err := s.beginCall(c); given || err != nil {
		return err
	}
	// A keyed batch keys each user's call by its user and how many
	// requests of the batch named that user before it, and checks them
	// all before it makes any. Not by its place: the same batch with its
	// requests in another order, another body, must find the first
	// batch's calls under the same keys and be refused, as it is while the
	// batch's answer is kept whole, not find none after a crash and be
	// served anew.
	keys := make([]eviction.CallKey, len(req.Requests))
	// The results of a kept answer whose retry serves its failed users
	// anew (see beginCall), nil for a failed user's.
	var given []json.RawMessage
	var priorBorn time.Time // the reading given's answer ages from
	scope, keyed := c.Locals(callScopeLocal).(*callScope)
	if keyed {
		scope.batch = true
		start := s.cfg.Now() // before any user's call
		if prior := scope.p.prior; prior != nil {
			if given, priorBorn = keptResults(prior.body, len(req.Requests)), prior.born; given == nil {
				// Not a batch's answer of this request after all: given
				// again as it is, as any kept answer, counted so, and
				// kept again as it was: as old, in its place in the
				// answers log, and with its failure, which a restart
				// reads back from its body (answerUsers), so that its
				// next retry comes here again, as after a restart.
				s.replays.abandon(scope.scoped, scope.p)
				scope.p = nil
				s.replays.replayed.Add(1)
				c.Set(HeaderReplayed, "true")
				c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
				return c.Send(prior.body)
			}
		}
		users := make([]string, 0, len(req.Requests))
		checked := make([]eviction.CallKey, 0, len(req.Requests))
		named := make(map[string]int, len(req.Requests))
		for i, e := range req.Requests {
			keys[i] = scope.key(itoa(named[e.User]) + "\x00" + e.User)
			named[e.User]++
			if given == nil || given[i] == nil {
				users, checked = append(users, e.User), append(checked, keys[i])
			}
		}
		// Before any call: an erase of one of them from now on drops the
		// answer, which lists the user's items.
		s.replays.name(scope.scoped, scope.p, users)
		born, err := s.hot.CheckCallKeys(ns, users, checked)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(given, func(r json.RawMessage) bool { return r != nil }) && (born.IsZero() || priorBorn.Before(born)) {
			born = priorBorn
		}
		if born.IsZero() {
			born = start
		}
		// The answer is one, first given at born (the batch's start, or
		// that of one whose parts it gives again): each of its users'
		// journal records is read back as old (a crash before the answer
		// is in the answers log), and the answer kept ages from then
		// too, so that no part is given again on its own once the
		// others are past their time to live, not even the later users'
		// of a batch that took seconds.
		scope.gives(born)
		stamp := s.replays.lifeOf(born)
		for i := range checked {
			checked[i].Stamp = stamp
		}
		// With Counted set: their users' hits or misses are counted.
		for i, j := 0, 0; i < len(keys); i++ {
			if given == nil || given[i] == nil {
				keys[i], j = checked[j], j+1
			}
		}
	}
	out := batchResponse{Results: make([]any, len(req.Requests))}
	replayed := 0
	for i, e := range req.Requests {
		if given != nil && given[i] != nil {
			// Given again: the answer kept lives no longer than the
			// first, whose users served anew get theirs again for what
			// is left of it only.
			out.Results[i] = given[i]
			scope.gives(priorBorn)
			replayed++
			continue
		}
		resp, err := s.batchCall(ns, e.User, e.Candidates, args[i], keys[i])
		if err != nil {
			// A namespace taken out (SIGHUP) once the batch has served a
			// user fails the users after it: those before were served,
			// and answering the batch 404 would lose their answers.
			if (i == 0 && errors.Is(err, eviction.ErrUnknownNamespace)) || errors.Is(err, eviction.ErrCallKeyReused) {
				return err
			}
			p := problemFor(err)
			s.k.countBatchError(p.Status)
			s.logFailure("seenapi: a batch's user failed", p, err, "path", c.Path(), "user", e.User)
			out.Results[i] = &batchFailure{User: e.User, Error: p}
			if keyed {
				scope.failed = true
			}
			continue
		}
		out.Results[i] = &batchAnswer{User: e.User, filterResponse: resp}
		if keyed && resp.Degraded {
			scope.failed = true // served anew by a retry, as a failure
		}
		if keyed && resp.replayed {
			scope.gives(resp.born)
		}
		replayed += boolInt(resp.replayed)
	}
	// Counted once a request, as an answer kept in memory is.
	if replayed > 0 {
		s.replays.replayed.Add(1)
	}
	if replayed == len(req.Requests) {
		c.Set(HeaderReplayed, "true")
	}
	return c.JSON(&out)
}

// keptResults returns the results of body, a kept batch answer of n
// results, each as it was encoded, nil for a user's failure or a degraded
// answer (see replay.failed); or nil if body is not such an answer.
func keptResults(body []byte, n int) []json.RawMessage {
	var b struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := sonic.Unmarshal(body, &b); err != nil || len(b.Results) != n {
		return nil
	}
	for i, r := range b.Results {
		var res struct {
			Error    json.RawMessage `json:"error"`
			Degraded bool            `json:"degraded"`
		}
		if err := sonic.Unmarshal(r, &res); err != nil {
			return nil
		}
		if res.Error != nil || res.Degraded {
			b.Results[i] = nil
		}
	}
	return b.Results
}

// batchArgs reads and validates a batch into req: its namespace, and
// each user's call arguments.
func (s *Server) batchArgs(c *fiber.Ctx, req *batchRequest) (string, []filterArgs, error) {
	ns, err := s.namespace(c)
	if err != nil {
		return "", nil, err
	}
	body, err := s.jsonBody(c)
	if err != nil {
		return "", nil, err
	}
	if err := decode(body, req); err != nil {
		return "", nil, err
	}
	if len(req.Requests) == 0 {
		return "", nil, fieldError(pBadRequest, "/requests", "", "at least one request is required")
	}
	if len(req.Requests) > s.cfg.MaxBatchUsers {
		return "", nil, &apiError{kind: pTooManyUsers,
			detail: itoa(len(req.Requests)) + " users; at most " + itoa(s.cfg.MaxBatchUsers) + " per batch",
			fields: []FieldError{{Pointer: "/requests", Detail: "at most " + itoa(s.cfg.MaxBatchUsers) + " users per batch"}}}
	}
	args := make([]filterArgs, len(req.Requests))
	for i, e := range req.Requests {
		prefix := "/requests/" + itoa(i)
		if p := s.userProblem(e.User); p != "" {
			if e.User == "" && e.Candidates == nil && isNull(body, prefix) {
				// A null request decodes as one of no member: it is named
				// for what it is, not for its user.
				return "", nil, fieldError(pBadRequest, prefix, "", prefix+" is null; each request is an object with a user and its candidates")
			}
			return "", nil, fieldError(pBadRequest, prefix+"/user", "", p)
		}
		if args[i], err = s.filterCall(e.Candidates, e.Record, e.Limit, e.OnError, prefix, body); err != nil {
			return "", nil, err
		}
	}
	return ns, args, nil
}

// batchCall is call for one user of a batch. A panic in it (a bug met by
// that user's data or call) fails that user's result with an internal
// problem, counted and logged with its stack as the recover middleware does
// for a request: the users before it in the batch were recorded, and
// failing the whole batch would lose their answers.
func (s *Server) batchCall(ns, user string, candidates []string, a filterArgs, k eviction.CallKey) (resp filterResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.k.panics.Add(1)
			s.cfg.Logger.Error("seenapi: panic serving a batch's user", "ns", ns, "user", user,
				"panic", r, "stack", string(debug.Stack()))
			resp, err = filterResponse{}, fmt.Errorf("api: panic serving the user %q of a batch: %v", user, r)
		}
	}()
	return s.call(nil, ns, user, candidates, a, k)
}

func (s *Server) listNamespaces(c *fiber.Ctx) error {
	nss := s.hot.Namespaces()
	stored, err := s.hot.StoredNamespaces()
	if err != nil {
		return err
	}
	// A key limited to some namespaces is shown those only.
	_, m := s.caller(c)
	out := struct {
		Namespaces []namespaceJSON `json:"namespaces"`
		NotServed  []string        `json:"not_served"`
	}{Namespaces: make([]namespaceJSON, 0, len(nss)), NotServed: []string{}}
	for _, n := range nss {
		if m.allows(n.Name) {
			out.Namespaces = append(out.Namespaces, toNamespaceJSON(n))
		}
	}
	for _, ns := range stored {
		if m.allows(ns) {
			out.NotServed = append(out.NotServed, ns)
		}
	}
	return c.JSON(&out)
}

// purgeNamespace erases the stored users of a namespace that is not
// served; the hot set refuses a served one.
func (s *Server) purgeNamespace(c *fiber.Ctx) error {
	ns, err := namespaceName(c)
	if err != nil {
		return err
	}
	if err := noBody(c, "it erases every user of the namespace"); err != nil {
		return err
	}
	n, err := s.hot.PurgeNamespace(ns)
	if errors.Is(err, eviction.ErrNamespaceServed) && ns == "default" {
		// Taking it out of the namespaces file, what the others need,
		// cannot be done: the service always serves "default".
		return newError(pNamespaceServed, `namespace "default" is always served (a namespaces file cannot take it out), so it cannot be purged; `+
			"erase its users one by one (DELETE /v1/namespaces/default/users/{user})")
	}
	if err != nil {
		return err
	}
	s.replays.erase(ns, "")
	s.audit(c, "seenapi: namespace purged", "namespace", ns, "users_erased", n)
	return c.JSON(&struct {
		Namespace   string `json:"namespace"`
		UsersErased int    `json:"users_erased"`
	}{ns, n})
}

// Pages of GET /v1/namespaces/{ns}/users.
const (
	DefaultUsersPage = 100
	MaxUsersPage     = 1000
)

// userListJSON is a page of a namespace's users; Next, when set, is the
// after of the next page.
type userListJSON struct {
	Users   []string       `json:"users"`
	Next    string         `json:"next,omitempty"`
	Details *[]userSummary `json:"details,omitempty"` // with ?details=true, even when empty
}

// userSummary is one user of a listed page with ?details=true: a few of
// its stats, or the error its filter met.
type userSummary struct {
	User        string     `json:"user"`
	Items       *uint64    `json:"items,omitempty"`
	MemoryBytes *int       `json:"memory_bytes,omitempty"`
	FPRate      *float64   `json:"fp_rate,omitempty"`
	Hot         *bool      `json:"hot,omitempty"`
	LastSeen    *time.Time `json:"last_seen,omitempty"`
	Error       *Problem   `json:"error,omitempty"`
}

// summarize returns the details of users in ns, reading cold users from
// the store without bringing them into memory. A user whose filter cannot
// be read gets its error, and the others their stats; a user forgotten
// since it was listed is left out.
func (s *Server) summarize(ns string, users []string) ([]userSummary, error) {
	out := make([]userSummary, 0, len(users))
	for _, u := range users {
		st, err := s.hot.Peek(ns, u)
		switch {
		case errors.Is(err, eviction.ErrUserNotFound):
			continue
		case errors.Is(err, eviction.ErrUnknownNamespace), errors.Is(err, eviction.ErrClosed):
			return nil, err
		case err != nil:
			p := problemFor(err)
			out = append(out, userSummary{User: u, Error: &p})
			continue
		}
		sum := userSummary{User: u, Items: &st.Items, MemoryBytes: &st.MemoryBytes, FPRate: &st.FPRate, Hot: &st.Hot}
		if !st.LastSeen.IsZero() { // a filter made by hand may hold items but no times
			last := st.LastSeen.UTC()
			sum.LastSeen = &last
		}
		out = append(out, sum)
	}
	return out, nil
}

// listUsers answers a page of the namespace's users in byte order: those
// after ?after= (a user id; absent or empty: from the first), at most
// ?limit= of them. A full page says where the next one starts; the last
// one (shorter, possibly empty) does not.
func (s *Server) listUsers(c *fiber.Ctx) error {
	ns, err := s.namespace(c)
	if err != nil {
		return err
	}
	limit := DefaultUsersPage
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxUsersPage {
			return fieldError(pBadRequest, "", "limit", "limit is a whole number from 1 to "+strconv.Itoa(MaxUsersPage))
		}
		limit = n
	}
	after := c.Query("after")
	if after != "" {
		if p := s.userProblem(after); p != "" {
			return fieldError(pBadRequest, "", "after", "after is a user id: "+p)
		}
	}
	details := false
	switch v := c.Query("details"); v {
	case "", "false":
	case "true":
		details = true
	default:
		return fieldError(pBadRequest, "", "details", "details is true or false")
	}
	// One more than the page tells whether another follows.
	users, err := s.hot.Users(ns, after, limit+1)
	if err != nil {
		return err
	}
	if users == nil {
		users = []string{} // [] on the wire, not null
	}
	out := userListJSON{Users: users}
	if len(users) > limit {
		out.Users = users[:limit]
		out.Next = users[limit-1]
	}
	if details {
		sums, err := s.summarize(ns, out.Users)
		if err != nil {
			return err
		}
		out.Details = &sums
	}
	return c.JSON(&out)
}

func (s *Server) getNamespace(c *fiber.Ctx) error {
	ns, err := s.namespace(c)
	if err != nil {
		return err
	}
	n, _ := s.hot.Namespace(ns)
	out := toNamespaceJSON(n)
	return c.JSON(&out)
}

func (s *Server) getStats(c *fiber.Ctx) error {
	st := s.Stats()
	// A key limited to some namespaces sees their share of the figures
	// only; the service's totals stay whole. Stats makes the map and the
	// list afresh at each call.
	if _, m := s.caller(c); m.scope != nil {
		maps.DeleteFunc(st.Namespaces, func(ns string, _ eviction.NamespaceStats) bool { return !m.allows(ns) })
		st.RemovedNamespaces = slices.DeleteFunc(st.RemovedNamespaces, func(ns string) bool { return !m.allows(ns) })
	}
	return c.JSON(&st)
}

// authJSON is the answer of GET /v1/auth.
type authJSON struct {
	Role string `json:"role"`
	Open bool   `json:"open"`
	// MaxCandidates, MaxBodyBytes, MaxItemBytes, MaxUserBytes and
	// MaxBatchUsers let a client split a longer list or a page of users,
	// or refuse an item or a user id too long, before the call is refused.
	MaxCandidates int      `json:"max_candidates"`
	MaxBodyBytes  int      `json:"max_body_bytes"`
	MaxItemBytes  int      `json:"max_item_bytes"`
	MaxUserBytes  int      `json:"max_user_bytes"`
	MaxBatchUsers int      `json:"max_batch_users"`
	RateLimit     *float64 `json:"rate_limit,omitempty"` // requests a second, when the caller is limited
	RateBurst     *int     `json:"rate_burst,omitempty"`
	KeyID         string   `json:"key_id,omitempty"` // names the key in the log of admin actions
	// Namespaces are the only ones the key may call the routes of, as
	// shownScope shows them (empty: none is served); absent: every one.
	Namespaces *[]string `json:"namespaces,omitempty"`
}

// withRate returns a with r's limit and burst when r limits anything.
func (a authJSON) withRate(r callerRate) *authJSON {
	if r.limited() {
		limit := float64(r.limit)
		a.RateLimit, a.RateBurst = &limit, &r.burst
	}
	return &a
}

// authLimits returns a with the service's limits on one call, whatever
// the key.
func (s *Server) authLimits(a authJSON) authJSON {
	a.MaxCandidates, a.MaxBodyBytes, a.MaxItemBytes, a.MaxUserBytes = s.cfg.MaxCandidates, s.cfg.MaxBodyBytes, s.cfg.MaxItemBytes, s.cfg.MaxUserBytes
	a.MaxBatchUsers = s.cfg.MaxBatchUsers
	return a
}

// getAuth answers the role of the key sent; the route's role check has
// already refused a missing or unknown key. An open server gives everyone
// every role.
func (s *Server) getAuth(c *fiber.Ctx) error {
	kr := s.keys.Load()
	if kr.open() {
		return c.JSON(s.authLimits(authJSON{Role: RoleAdmin.String(), Open: true}).withRate(serverRate(s.cfg)))
	}
	m := admitted(c)
	a := authJSON{Role: m.role.String(), KeyID: keyID(m.id)}
	if m.scope != nil {
		shown, _ := s.shownScope(m)
		a.Namespaces = &shown
	}
	return c.JSON(s.authLimits(a).withRate(m.rate))
}

func (s *Server) health(c *fiber.Ctx) error {
	return c.JSON(s.healthAnswer(healthOK))
}

// healthAnswer is the body of a health probe's 200 with status.
func (s *Server) healthAnswer(status string) *healthJSON {
	return &healthJSON{Status: status, KeyRequired: !s.Open()}
}

func (s *Server) ready(c *fiber.Ctx) error {
	if err := s.readiness(); err != nil {
		return err
	}
	return c.JSON(s.healthAnswer(healthReady))
}

// readiness is why the service is not ready (/readyz answers 503), or nil.
func (s *Server) readiness() error {
	if s.draining.Load() {
		return &apiError{kind: pUnavailable, detail: "shutting down", notReady: true}
	}
	if err := s.cfg.Ready(); err != nil {
		return &apiError{kind: pUnavailable, detail: "not ready: " + err.Error(), cause: err, notReady: true}
	}
	return nil
}

// probe is the whole answer to a health probe (GET, or HEAD when head, of
// /healthz or /readyz at path) on a connection past --max-connections,
// which fiber does not serve (see acceptRetrying.refuse): what the probe's
// route answers, and the connection closed. It is counted as the route
// counts it (Server.counted, and a 503 not ready as errorHandler does),
// so that the figures show the probes a busy service answered.
func (s *Server) probe(head bool, path string) []byte {
	start := time.Now()
	status, ctype := fiber.StatusOK, fiber.MIMEApplicationJSON
	var notReady error // and its problem, p
	var p Problem
	var body []byte
	var err error
	if path == "/healthz" {
		body, err = encode(s.healthAnswer(healthOK))
	} else if rerr := s.readiness(); rerr != nil {
		notReady, p = rerr, problemFor(rerr)
		p.Instance = path
		status, ctype = p.Status, "application/problem+json"
		body, err = encode(&p)
	} else {
		body, err = encode(s.healthAnswer(healthReady))
	}
	if err != nil {
		return nil
	}
	route := fiber.MethodGet + " " + path
	if i := slices.Index(s.k.routes, route); i >= 0 {
		s.k.calls[i].Add(1)
		defer observeSince(s.k.duration.WithLabelValues(route), start)
	}
	if notReady != nil {
		s.k.countProblem(notReady, p)
	}
	b := []byte("HTTP/1.1 " + strconv.Itoa(status) + " " + fasthttp.StatusMessage(status) + "\r\nContent-Type: " + ctype +
		"\r\n" + RawAnswerHeaders + "Connection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n")
	if status == fiber.StatusServiceUnavailable {
		b = append(b, "Retry-After: 1\r\n"...)
	}
	b = append(b, "\r\n"...)
	if !head {
		b = append(b, body...)
	}
	return b
}

func (s *Server) openAPI(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, "application/yaml")
	return c.Send(openAPISpec)
}

// nsUser returns the validated namespace and user of a per-user route.
func (s *Server) nsUser(c *fiber.Ctx) (ns, user string, err error) {
	if ns, err = s.namespace(c); err != nil {
		return "", "", err
	}
	user, err = s.user(c)
	return ns, user, err
}
