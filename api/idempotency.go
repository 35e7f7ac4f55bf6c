package api

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bytedance/sonic"
	"github.com/gofiber/fiber/v2"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/seenapi/seenapi/eviction"
	"github.com/zeebo/xxh3"
)

// A call that records (the one call, a batch of it) is not safe to send
// twice: the answer of the first has made its items seen, so a retry after
// a lost answer gets the next items, and the first ones are never shown.
// With an Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header)
// the service keeps the answer of the first call and answers a retry with
// it, recording nothing again. The answers live in memory, under a byte
// budget (least recently used first out, of the caller holding the most:
// see trimLocked) and for a time to live; a
// graceful stop saves them for the next start (SaveReplays, LoadReplays).
// Against a crash they are written to files every interval (answerLog,
// OpenAnswerLog), and until then the hot set's journal holds each keyed
// call's answer with the items it records, and gives it to a retry after
// the restart (eviction.HotSet.FilterKeyed). A retry after its answer left
// the budget is served anew.

// HeaderIdempotencyKey names the key of a call; HeaderReplayed is set on an
// answer given again.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderReplayed       = "Idempotent-Replayed"
	// maxIdempotencyKey bounds a key's bytes (a UUID takes 36).
	maxIdempotencyKey = 255
	// inUseRetry is the Retry-After of 409 idempotency-key-in-use.
	inUseRetry = time.Second
	// replayOverhead is what a kept answer costs besides its body and key:
	// the struct, the LRU's element and map entry.
	replayOverhead = 224
)

// replay is one keyed call: in flight until done, then its answer.
type replay struct {
	request xxh3.Uint128 // of the body, seeded by the path
	done    bool
	status  int
	body    []byte
	// at stamps the answer in the order of answers and erase marks, as a
	// wall time that outlives the process (stampLocked); born is the
	// clock's reading it ages from (see expired).
	at, born time.Time
	size     int64
	// began is set by the hot set once the one call holds its user
	// (eviction.CallKey.Began): an erase of the user drops a call in
	// flight only if it did, before the erase (the call then worked on
	// the erased history).
	began atomic.Bool
	// users are the hashes (userHash) of the users a batch's answer names,
	// sorted; nil while not known (a batch in flight before name, or one
	// whose body did not read back), which any erase in its namespace
	// drops. Unused for the one call, whose path names its user.
	users []uint64
	// failed says that the batch's answer holds a result that changed
	// nothing: a user's failure, or an answer degraded by on_error open
	// (the store failed: nothing was tested or recorded). Its retry gives
	// the others' results again and serves that user anew (a store that
	// failed it once may serve it now), as for a one call whose answer is
	// an error or degraded, which is not kept. prior is, while such a
	// retry is in flight, the answer it resumes, kept again if the retry
	// fails.
	failed bool
	prior  *replay
	// mark is the log's mark (replays.mark) when the call began: the hot
	// set's records of its journal are of marks at least as high.
	mark uint64
	// key is its key in replays.lru, and by the caller whose answers
	// include it, as the prev-next list of their recency (see trimLocked);
	// set while it is kept.
	key        string
	by         *answerer
	prev, next *replay
}

// answerer is the answers kept of one caller (an API key; everyone on an
// open server), least recently used first, and their bytes with those of
// its calls in flight.
type answerer struct {
	caller      string
	bytes       int64
	first, last *replay
}

// callerOf returns the caller part of scoped (see idempotent).
func callerOf(scoped string) string {
	i := strings.LastIndexByte(scoped, 0)
	if i < 0 {
		return ""
	}
	return scoped[:max(strings.LastIndexByte(scoped[:i], 0), 0)]
}

// names reports whether p's batch answer may name the user of hash h.
func (p *replay) names(h uint64) bool {
	if p.users == nil {
		return true
	}
	_, ok := slices.BinarySearch(p.users, h)
	return ok
}

// replays keeps the answers of keyed calls. Safe for concurrent use.
type replays struct {
	mu  sync.Mutex
	lru *simplelru.LRU[string, *replay] // the answers given
	// by are the answers given by caller, for the budget's share.
	by map[string]*answerer
	// inFlight are the calls begun and not yet answered. They take room
	// in bytes but are never trimmed: trimmed, a call's twin sent while it
	// is in flight would be served anew, and both would record.
	inFlight map[string]*replay
	bytes    int64
	budget   int64
	ttl      time.Duration
	now      func() time.Time
	replayed atomic.Uint64 // answers given again
	log      *answerLog    // where each answer is written soon after it is given; nil: none
	// mark counts the log's flushes begun (nextMark): the hot set's keyed
	// journal records are marked with it (eviction.AnswerLog). Set under mu.
	mark atomic.Uint64
	// latest is the time of the last answer kept or erase, and lastErase
	// of the last erase (either read back too): the next are stamped at
	// or after them (stampLocked).
	latest, lastErase time.Time
	// erased are the erase marks of the last time to live (and those read
	// back), by user: an answer first given before them, kept again now
	// (see finish), is stamped after those of its users only. pruneAt is
	// the count of marks past which the next erase drops those past their
	// time to live.
	erased  erasedMarks
	pruneAt int
	// lifeBase, taken at the reading lifeAt, sets the time answers are
	// stamped and read back in (lifeLocked); clocked is the time of the
	// last clock mark written to the log (noteClock).
	lifeBase, lifeAt, clocked time.Time
}

// Across a restart only a wall time relates an answer read back to now,
// and the wall clock may have been set back since its stamp: read back
// as no older than the read, the answer would live its time to live again
// at each start (a crash, a deploy) while the clock stays behind. So
// answers are stamped and read back in a time that never goes back, even
// across restarts: the wall clock, but from a start on never behind the
// latest time the answers read back (the snapshot of a graceful stop, the
// log) were stamped or noted in, and from then on at least as fast as the
// monotonic clock. The log notes that time every clockEvery while answers
// may be live (a clock mark), and a start after a crash, which loses what
// passed since the last note, counts clockEvery more: an answer lives its
// time to live from when it was given, across restarts, in total. What a
// clock set back while the service was down hides of the downtime is not
// counted, nor, after a power cut, what a log without --sync had not
// written yet.

// clockEvery is how often the answers log notes the time (see above).
const clockEvery = time.Second

// clockStatus is the Status of a clock mark in the answers log and in the
// snapshot of a graceful stop: no answer is kept with it (restore keeps
// 200s only, as every build did).
const clockStatus = 1

// lifeLocked returns the time of reading in the time answers are stamped
// and read back in (see above): its wall time, but never behind the base
// a start set (raiseLocked) plus what the clock's readings say passed
// since, nor behind one it returned before. r.mu held.
func (r *replays) lifeLocked(reading time.Time) time.Time {
	w := reading.Round(0)
	if !r.lifeAt.IsZero() {
		if life := r.lifeBase.Add(reading.Sub(r.lifeAt)); life.After(w) {
			return life
		}
	}
	r.lifeBase, r.lifeAt = w, reading
	return w
}

// lifeOfLocked is lifeLocked of a reading taken before the last, which
// it leaves as it is. r.mu held.
func (r *replays) lifeOfLocked(reading time.Time) time.Time {
	w := reading.Round(0)
	if r.lifeAt.IsZero() {
		return w
	}
	return later(w, r.lifeBase.Add(reading.Sub(r.lifeAt)))
}

// lifeOf is lifeOfLocked, r.mu not held.
func (r *replays) lifeOf(reading time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lifeOfLocked(reading)
}

// life is lifeLocked, r.mu not held.
func (r *replays) life(reading time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lifeLocked(reading)
}

// raiseLocked sets the time of reading to at least floor (see lifeLocked),
// and returns it. r.mu held.
func (r *replays) raiseLocked(floor, reading time.Time) time.Time {
	if life := r.lifeLocked(reading); !floor.After(life) {
		return life
	}
	r.lifeBase, r.lifeAt = floor.Round(0), reading
	return r.lifeBase
}

// noteClock writes a clock mark to the log once clockEvery has passed
// since the last, while an answer or erase mark may be live.
func (r *replays) noteClock() {
	r.mu.Lock()
	defer r.mu.Unlock()
	life := r.lifeLocked(r.now())
	if r.log == nil || life.Sub(r.clocked) < clockEvery || life.Sub(r.latest.Round(0)) >= r.ttl+clockEvery {
		return
	}
	r.clocked = life
	r.log.append(keptAnswer{Status: clockStatus, At: life})
}

// expired reports whether p is past its time to live at now, a reading
// of the clock: its age is counted from born, one reading to another, on
// Go's monotonic clock, which a step of the wall clock (NTP, an operator)
// leaves alone; not from its stamp, which a step moves (stampLocked holds
// it at the latest one's), and which an answer read back from before a
// restart has as a wall time only (see readBack).
func (r *replays) expired(p *replay, now time.Time) bool { return now.Sub(p.born) >= r.ttl }

// readBack returns the reading of the clock, now, from which an answer or
// an erase mark read back from before a restart (the snapshot of a graceful
// stop, the answers log), stamped at, ages, and whether it is still within
// ttl: its age is life, the time of now that stamps are in (lifeLocked),
// less its stamp. From then on it ages on the monotonic clock, as an
// answer given since.
func readBack(now, life, at time.Time, ttl time.Duration) (born time.Time, live bool) {
	age := max(life.Round(0).Sub(at.Round(0)), 0)
	return now.Add(-age), age < ttl
}

// stampLocked returns the time of an answer kept (erase false) or of an
// erase at now, a reading of the clock: its own, or the latest one's if the wall clock has been
// stepped back since (set right, across a restart too), and for an answer
// just after the last erase's. Erase marks void the answers of times up
// to theirs, read back as wall times: with times in the order of the
// events, a mark voids, after a crash, every answer of its user given
// before it, and none given after. The walls are compared, not the
// monotonic readings, which a step leaves alone. r.mu held.
func (r *replays) stampLocked(now time.Time, erase bool) time.Time {
	now = r.lifeLocked(now)
	if latest := r.latest.Round(0); now.Round(0).Before(latest) {
		now = latest
	}
	if last := r.lastErase.Round(0); !erase && !now.Round(0).After(last) {
		now = last.Add(time.Nanosecond)
	}
	r.noteLocked(now, erase)
	return now
}

// noteLocked notes the time of an answer or an erase (kept, or read back),
// for stampLocked. r.mu held.
func (r *replays) noteLocked(at time.Time, erase bool) {
	if at.Round(0).After(r.latest.Round(0)) {
		r.latest = at
	}
	if erase && at.Round(0).After(r.lastErase.Round(0)) {
		r.lastErase = at
	}
}

func newReplays(budget int64, ttl time.Duration, now func() time.Time) *replays {
	l, err := simplelru.NewLRU[string, *replay](math.MaxInt32, nil)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &replays{lru: l, by: map[string]*answerer{}, inFlight: map[string]*replay{}, budget: budget, ttl: ttl, now: now,
		erased: erasedMarks{}}
}

// What begin found.
type replayState int

const (
	replayNew      replayState = iota // no answer kept: the caller makes the call, then finish or abandon
	replayDone                        // the answer to give again
	replayBusy                        // the same call is in flight
	replayMismatch                    // the key was used for another request
	replayResume                      // a batch's answer with failed users (prior): the caller serves those, then finish or abandon
)

// begin looks key up for a request of digest request, registering a new
// call when none is kept (or the one kept is older than the time to live).
func (r *replays) begin(key string, request xxh3.Uint128) (*replay, replayState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.inFlight[key]; ok {
		if p.request != request {
			return nil, replayMismatch
		}
		return nil, replayBusy
	}
	if p, ok := r.lru.Get(key); ok {
		r.touchLocked(p)
		switch {
		case r.expired(p, r.now()):
			r.removeLocked(key, p)
		case p.request != request:
			return nil, replayMismatch
		case p.failed:
			// In flight again, so that a twin is refused while the
			// failed users are served; abandon keeps p again.
			r.removeLocked(key, p)
			q := &replay{request: request, size: int64(len(key)+8*len(p.users)) + replayOverhead, users: p.users, prior: p,
				mark: r.mark.Load()}
			r.inFlight[key] = q
			r.chargeLocked(key, q.size)
			r.trimLocked()
			return q, replayResume
		default:
			r.replayed.Add(1)
			return p, replayDone
		}
	}
	p := &replay{request: request, size: int64(len(key)) + replayOverhead, mark: r.mark.Load()}
	r.inFlight[key] = p
	r.chargeLocked(key, p.size)
	r.trimLocked()
	return p, replayNew
}

// given looks key up for an answer kept of a request of digest request,
// registering nothing: replayDone with the answer to give again,
// replayMismatch if the key was used for another request, replayNew if
// none is kept. It serves the scopes of builds before 54d10a0 (see
// callScope.sent), which this build reads back but never keeps answers
// under, so none is in flight or a batch's.
func (r *replays) given(key string, request xxh3.Uint128) (*replay, replayState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.lru.Get(key)
	switch {
	case !ok || p.failed:
		return nil, replayNew
	case r.expired(p, r.now()):
		r.removeLocked(key, p)
		return nil, replayNew
	case p.request != request:
		return nil, replayMismatch
	}
	r.touchLocked(p)
	r.replayed.Add(1)
	return p, replayDone
}

// finish keeps the answer of the call begin registered under key; failed
// says that it is a batch's that holds a user's failure. given, if not
// zero, is the clock's reading the answer ages from, given before (the
// hot set read it back from the journal, or a resumed batch gives its
// prior's results again): kept again, it lives no longer than from then,
// across restarts too.
func (r *replays) finish(key string, p *replay, status int, body []byte, failed bool, given time.Time) {
	r.mu.Lock()
	if r.inFlight[key] != p {
		r.mu.Unlock()
		return // dropped while in flight (an erase)
	}
	defer r.mu.Unlock()
	delete(r.inFlight, key)
	r.chargeLocked(key, -p.size)
	p.prior = nil // a resumed batch's answer: body holds what prior did
	if p.size+int64(len(body)) > r.budget {
		// Kept, it would leave the budget last, after every other answer
		// (it is the most recently used): one answer larger than the
		// budget (a batch's of large candidates, say) would take every
		// other caller's with it. Its retry is served anew.
		return
	}
	born := r.now()
	var now time.Time
	if !given.IsZero() && given.Before(born) {
		// Stamped as of then, not after the latest answer's time: an
		// answer given since is not this one's. Nor after the last
		// erase's, of any user: read back after a restart, the answer
		// would be that much younger, and outlive its time to live. But
		// after the last erase of its users, whose mark would void it
		// (an erase since, of a user served anew after it: the journal
		// kept the other users' parts), and an erase at the very time.
		born = given
		now = r.lifeOfLocked(born)
		if last, ok := r.erased.last(key, p.users); ok {
			now = later(now, last.Round(0).Add(time.Nanosecond))
		}
		r.noteLocked(now, false)
	} else {
		now = r.stampLocked(born, false)
	}
	p.done, p.status, p.body, p.at, p.born, p.failed = true, status, bytes.Clone(body), now, born, failed
	p.size += int64(len(body))
	r.addLocked(key, p)
	r.trimLocked()
	if r.log != nil {
		// Under r.mu: an erase (see erase) that drops this answer writes
		// its mark after it in the log, never before.
		r.log.append(keptAnswer{Key: key, Request: p.request, Status: status, Body: p.body, At: now})
	}
}

// name notes the users of the batch p, in flight under key, before it
// makes their calls, so that erasing one of them drops its answer.
func (r *replays) name(key string, p *replay, users []string) {
	hs := make([]uint64, len(users))
	for i, u := range users {
		hs[i] = userHash(u)
	}
	slices.Sort(hs)
	hs = slices.Compact(hs)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight[key] != p || p.users != nil {
		return // dropped already (an erase): finish keeps nothing; or a resumed batch's, known
	}
	p.users = hs
	p.size += int64(8 * len(hs))
	r.chargeLocked(key, int64(8*len(hs)))
	r.trimLocked()
}

// erase drops the answers kept for the calls of user in ns (user "": of
// every user of ns), given or in flight (whose finish then keeps nothing):
// its one calls' and the batches' of ns that name it. A one call in flight
// that has not begun on the user (began) is left: run while the user is
// erased and before it can be loaded afresh (eviction.HotSet.ForgetThen),
// erase knows that such a call works on the user the erase leaves. It
// writes an erase
// mark to the answers log, written to its file before erase returns, so
// that neither a retry nor a start after a crash gives an erased user's
// answer again: a kept answer lists the user's items. (A log that has
// stopped deletes its files instead: see answerLog.writeMark.)
func (r *replays) erase(ns, user string) {
	h := userHash(user)
	r.mu.Lock()
	for _, k := range r.lru.Keys() {
		ans, au, ok := answerOwner(k)
		if !ok || ans != ns {
			continue
		}
		if p, ok := r.lru.Peek(k); ok && (user == "" || au == user || au == "" && p.names(h)) {
			r.removeLocked(k, p)
		}
	}
	for k, p := range r.inFlight {
		if ans, au, ok := answerOwner(k); ok && ans == ns && (user == "" || au == user && p.began.Load() || au == "" && p.names(h)) {
			r.dropInFlightLocked(k, p)
		}
	}
	l := r.log
	born := r.now()
	now := r.stampLocked(born, true)
	mark := eraseMark(ns, user, now, born)
	r.erased.add(mark)
	if len(r.erased) > r.pruneAt {
		r.erased.prune(now.Add(-r.ttl)) // older than any answer kept
		r.pruneAt = 2*len(r.erased) + 64
	}
	if l != nil {
		l.append(mark)
	}
	r.mu.Unlock()
	if l != nil {
		l.writeMark(now)
	}
}

// dropErased drops the answers that marks, the erase marks read back from
// the answers log, void: those read back before the log was opened (the
// snapshot of a graceful stop, which a crash since left in place).
func (r *replays) dropErased(marks erasedMarks) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, at := range marks {
		r.noteLocked(at, true)
		if t, ok := r.erased[k]; !ok || at.After(t) {
			r.erased[k] = at
		}
	}
	if len(marks) == 0 {
		return
	}
	for _, k := range r.lru.Keys() {
		if p, ok := r.lru.Peek(k); ok && p.done && marks.void(k, p.at, p.users) {
			r.removeLocked(k, p)
		}
	}
}

// userHash is what a batch's kept answer keeps of each of its users: two
// users of one hash cost an answer that an erase need not have dropped.
func userHash(user string) uint64 { return xxh3.HashString(user) }

// answerUsers returns the sorted hashes of the users that the batch answer
// body under scoped names, read back from the body (which lists each user
// once a request: see batchResponse), or nil if scoped is not a batch's or
// the body does not read; and whether one of its results changed nothing,
// a user's failure or a degraded answer (replay.failed).
func answerUsers(scoped string, body []byte) (users []uint64, failed bool) {
	if _, user, ok := answerOwner(scoped); !ok || user != "" {
		return nil, false
	}
	var b struct {
		Results []struct {
			User     string          `json:"user"`
			Error    json.RawMessage `json:"error"`
			Degraded bool            `json:"degraded"`
		} `json:"results"`
	}
	if err := sonic.Unmarshal(body, &b); err != nil || len(b.Results) == 0 {
		return nil, false
	}
	users = make([]uint64, len(b.Results))
	for i, r := range b.Results {
		users[i] = userHash(r.User)
		failed = failed || r.Error != nil || r.Degraded
	}
	slices.Sort(users)
	return slices.Compact(users), failed
}

// answerOwner returns the namespace and the user of the call whose kept
// answer is under scoped (caller, path and Idempotency-Key, see
// idempotent): user is "" for a batch (POST /v1/namespaces/{ns}/filter),
// whose answer names many users. The path is the last but one part: a key
// is printable ASCII, and a path with a NUL byte is refused before its
// answer is kept.
func answerOwner(scoped string) (ns, user string, ok bool) {
	i := strings.LastIndexByte(scoped, 0)
	if i < 0 {
		return "", "", false
	}
	path := scoped[:i]
	path = path[strings.LastIndexByte(path, 0)+1:]
	rest, ok := strings.CutPrefix(path, "/v1/namespaces/")
	if !ok {
		return "", "", false
	}
	ns, rest, ok = strings.Cut(rest, "/")
	if !ok {
		return "", "", false
	}
	if rest == "filter" {
		return ns, "", true
	}
	raw, ok := strings.CutPrefix(rest, "users/")
	if !ok {
		return "", "", false
	}
	if raw, ok = strings.CutSuffix(raw, "/filter"); !ok || raw == "" {
		return "", "", false
	}
	if strings.IndexByte(raw, '%') < 0 {
		return ns, raw, true
	}
	u, err := url.PathUnescape(raw) // as the handler read it (Server.user)
	if err != nil {
		return "", "", false
	}
	return ns, u, true
}

// eraseStatus is the Status of an erase mark in the answers log: no
// answer is kept with it (restore keeps 200s only, as every build did).
const eraseStatus = 0

// eraseMark is the answers log's record that an erase of user in ns (""
// for all of ns) at happened, born the clock's reading then: the answers
// before it of its calls are void.
func eraseMark(ns, user string, at, born time.Time) keptAnswer {
	return keptAnswer{Key: ns + "\x00" + user, Status: eraseStatus, At: at, born: born}
}

// erasedMarks are the erase marks read back from the answers log: the
// latest time each user (by its userHash) or a whole namespace was erased.
type erasedMarks map[eraseKey]time.Time

type eraseKey struct {
	ns    string
	user  uint64 // userHash
	whole bool   // the whole namespace
}

// add notes the mark a, if it is one, and reports whether it was.
func (m erasedMarks) add(a keptAnswer) bool {
	if a.Status != eraseStatus {
		return false
	}
	ns, user, _ := strings.Cut(a.Key, "\x00")
	k := eraseKey{ns: ns, whole: user == ""}
	if !k.whole {
		k.user = userHash(user)
	}
	if at, ok := m[k]; !ok || a.At.After(at) {
		m[k] = a.At
	}
	return true
}

// void reports whether the answer under scoped, given at, was erased
// since: its user's, or of a batch one of users (answerUsers; nil: any
// user of its namespace).
func (m erasedMarks) void(scoped string, at time.Time, users []uint64) bool {
	last, ok := m.last(scoped, users)
	return ok && !at.After(last)
}

// last returns the time of the latest mark that voids the answer under
// scoped given before it (see void), and whether there is one.
func (m erasedMarks) last(scoped string, users []uint64) (time.Time, bool) {
	ns, user, ok := answerOwner(scoped)
	if !ok {
		return time.Time{}, false
	}
	var last time.Time
	found := false
	see := func(k eraseKey) {
		if t, ok := m[k]; ok && (!found || t.After(last)) {
			last, found = t, true
		}
	}
	see(eraseKey{ns: ns, whole: true})
	switch {
	case user != "":
		see(eraseKey{ns: ns, user: userHash(user)})
	case users == nil:
		for k := range m {
			if k.ns == ns {
				see(k)
			}
		}
	default:
		for _, u := range users {
			see(eraseKey{ns: ns, user: u})
		}
	}
	return last, found
}

// prune drops the marks before cutoff.
func (m erasedMarks) prune(cutoff time.Time) {
	for k, t := range m {
		if t.Before(cutoff) {
			delete(m, k)
		}
	}
}

// abandon forgets a call that failed: a retry makes it anew. A resumed
// batch's answer (prior) is kept again: its users' results were given.
func (r *replays) abandon(key string, p *replay) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight[key] != p {
		return
	}
	r.dropInFlightLocked(key, p)
	if q := p.prior; q != nil && !r.expired(q, r.now()) {
		r.addLocked(key, q)
		r.trimLocked()
	}
}

// addLocked keeps p, an answer given, under key, as its caller's most
// recently used.
func (r *replays) addLocked(key string, p *replay) {
	r.lru.Add(key, p)
	o := r.chargeLocked(key, p.size)
	p.key, p.by, p.prev, p.next = key, o, o.last, nil
	if o.last != nil {
		o.last.next = p
	} else {
		o.first = p
	}
	o.last = p
}

func (r *replays) removeLocked(key string, p *replay) {
	r.lru.Remove(key)
	if p.by != nil {
		r.unlinkLocked(p)
		p.by = nil
	}
	r.chargeLocked(key, -p.size)
}

// chargeLocked adds n bytes, an answer's or a call's in flight under key,
// to the budget's count and its caller's, and returns the caller's.
func (r *replays) chargeLocked(key string, n int64) *answerer {
	r.bytes += n
	caller := callerOf(key)
	o := r.by[caller]
	if o == nil {
		o = &answerer{caller: caller}
		r.by[caller] = o
	}
	o.bytes += n
	if o.bytes == 0 && o.first == nil {
		delete(r.by, caller)
	}
	return o
}

func (r *replays) unlinkLocked(p *replay) {
	o := p.by
	if p.prev != nil {
		p.prev.next = p.next
	} else {
		o.first = p.next
	}
	if p.next != nil {
		p.next.prev = p.prev
	} else {
		o.last = p.prev
	}
	p.prev, p.next = nil, nil
}

// touchLocked makes p, kept, its caller's most recently used answer.
func (r *replays) touchLocked(p *replay) {
	o := p.by
	if o == nil || o.last == p {
		return
	}
	r.unlinkLocked(p)
	p.prev = o.last
	o.last.next = p
	o.last = p
}

func (r *replays) dropInFlightLocked(key string, p *replay) {
	delete(r.inFlight, key)
	r.chargeLocked(key, -p.size)
}

// trimLocked drops the answers past their time to live from the least
// recently used on (no retry gets them, and kept they held their memory
// and counted in the figures until the budget pushed them out), then,
// while over budget, the least recently used answer of the caller whose
// answers and calls in flight take the most bytes (the calls in flight
// stay). So the budget is
// shared between callers: one client's burst of keyed calls pushes out
// its own older answers, not another's, as long as the other holds less
// than it; callers that both keep calling end with even shares. Callers
// are API keys, few: each answer trimmed looks at every one.
func (r *replays) trimLocked() {
	now := r.now()
	for {
		k, p, ok := r.lru.GetOldest()
		if !ok || !r.expired(p, now) {
			break
		}
		r.removeLocked(k, p)
	}
	for r.bytes > r.budget {
		var top *answerer
		for _, o := range r.by {
			if o.first != nil && (top == nil || o.bytes > top.bytes) {
				top = o
			}
		}
		if top == nil {
			return
		}
		r.removeLocked(top.first.key, top.first)
	}
}

// keptAnswer is one kept answer as SaveReplays writes it.
type keptAnswer struct {
	Key     string // scoped: caller, path and Idempotency-Key
	Request xxh3.Uint128
	Status  int
	Body    []byte
	At      time.Time
	born    time.Time // the reading it ages from (replay.born); not saved
	users   []uint64  // of a batch, once read (answerUsers); not saved
	failed  bool      // likewise
	read    bool      // users and failed are read
}

// replaysMagic heads what SaveReplays writes, naming its form.
const replaysMagic = "seenapi kept answers, form 1\n"

// SaveReplays writes the answers kept for Idempotency-Key retries to w,
// least recently used first, for LoadReplays to read back after a restart:
// a graceful stop (a deploy) loses none of them. It returns how many it
// wrote. Calls should be over (after Shutdown); an answer still in flight
// is left out.
func (s *Server) SaveReplays(w io.Writer) (int, error) {
	kept := s.replays.answers()
	n := len(kept)
	// Last, the time of the stop, which the next start reads back no later
	// than (see lifeLocked); builds that know no clock mark skip it.
	kept = append(kept, s.replays.clockMark())
	if _, err := io.WriteString(w, replaysMagic); err != nil {
		return 0, err
	}
	return n, gob.NewEncoder(w).Encode(kept)
}

// clockMark returns a clock mark of now.
func (r *replays) clockMark() keptAnswer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return keptAnswer{Status: clockStatus, At: r.lifeLocked(r.now())}
}

// LoadReplays reads what SaveReplays wrote into the answers kept, those
// still within their time to live, as far as the budget allows (the most
// recently used win). It returns how many it kept.
func (s *Server) LoadReplays(r io.Reader) (int, error) {
	magic := make([]byte, len(replaysMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != replaysMagic {
		return 0, errors.New("not a file of kept answers of this build's form")
	}
	var kept []keptAnswer
	if err := gob.NewDecoder(r).Decode(&kept); err != nil {
		return 0, err
	}
	// A snapshot is written at a stop: nothing passed after its clock mark.
	var floor time.Time
	for _, a := range kept {
		floor = later(floor, a.At)
	}
	return s.replays.restore(kept, floor), nil
}

// answers returns the answers given (not those in flight) and within
// their time to live, least recently used first.
func (r *replays) answers() []keptAnswer {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var out []keptAnswer
	for _, k := range r.lru.Keys() {
		if p, ok := r.lru.Peek(k); ok && !r.expired(p, now) {
			out = append(out, keptAnswer{Key: k, Request: p.request, Status: p.status, Body: p.body, At: p.at})
		}
	}
	return out
}

// keptOf returns those of answers that are still kept as they were (not
// dropped by an erase, nor replaced), in their order.
func (r *replays) keptOf(answers []keptAnswer) []keptAnswer {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []keptAnswer
	for _, a := range answers {
		if p, ok := r.lru.Peek(a.Key); ok && p.is(a) {
			out = append(out, a)
		}
	}
	return out
}

// is reports whether p is the answer a, given: its body too, not its stamp
// and request alone, which a resumed batch's answer shares with the answer
// it resumes (see finish). Taken for it, the earlier answer, with its
// failed users, would be written to the answers log again after it (see
// answerLog.retain), and a start after a crash, reading it back last,
// would serve those users anew a second time.
func (p *replay) is(a keptAnswer) bool {
	return p.done && p.at.Equal(a.At) && p.request == a.Request && bytes.Equal(p.body, a.Body)
}

// restore adds kept answers (least recently used first, or in the order
// they were given) that are still within their time to live, and returns
// how many it kept. One replaces the answer kept under its key, which was
// given before it (earlier in kept, or in the snapshot a log follows): the
// answers log holds a batch's answer again once its retry served its
// failed users. The order decides, not the times, which a clock stepped
// back would make lie. The time of the read is at least floor (see
// lifeLocked), the latest one they were stamped or noted in, and what
// passed after it.
func (r *replays) restore(kept []keptAnswer, floor time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	life := r.raiseLocked(floor, now)
	for _, a := range kept {
		r.noteLocked(a.At, false)
		born, live := readBack(now, life, a.At, r.ttl)
		if a.Status != fiber.StatusOK || !live || a.Key == "" || r.inFlight[a.Key] != nil {
			continue
		}
		if old, ok := r.lru.Peek(a.Key); ok {
			r.removeLocked(a.Key, old)
		}
		if !a.read {
			a.users, a.failed = answerUsers(a.Key, a.Body)
		}
		p := &replay{request: a.Request, done: true, status: a.Status, body: a.Body, at: a.At, born: born,
			size: int64(len(a.Key)+len(a.Body)+8*len(a.users)) + replayOverhead, users: a.users, failed: a.failed}
		if p.size > r.budget {
			continue // as finish: it would trim every other answer, then itself
		}
		r.addLocked(a.Key, p)
		r.trimLocked()
	}
	n := 0
	for _, a := range kept {
		if p, ok := r.lru.Peek(a.Key); ok && p.is(a) {
			n++
		}
	}
	return n
}

// usage returns the answers kept and their bytes.
func (r *replays) usage() (n int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trimLocked() // what is past its time to live is not kept
	return r.lru.Len() + len(r.inFlight), r.bytes
}

// idempotencyKey returns the request's Idempotency-Key (without the quotes
// of the draft's sf-string form), "" when it has none, or a bad-request
// error: 1 to 255 printable ASCII characters, in quotes or bare (a bare
// key does not begin with a quote, as the document's schema says: `"k`
// is a quoted key cut short), on one header line. Two lines name no one
// call: taken as the first, the same request sent through a proxy that
// keeps the last would be another call, and record again. Nor does one
// line that lists keys, as a proxy joins two lines into one (RFC 9110
// 5.3): a bare key holds no comma, and a quoted one no quote but escaped
// (\"), so `a, b` and `"a", "b"` are refused while `"a,b"` is one key.
// A key is taken as sent between its quotes, escapes and all, as keys
// were before lists were refused: a retry keyed so then is the same call.
func idempotencyKey(c *fiber.Ctx) (string, error) {
	h := &c.Request().Header
	raw := h.Peek(HeaderIdempotencyKey)
	if raw == nil {
		return "", nil
	}
	k := string(raw)
	quoted := len(k) > 0 && k[0] == '"'
	if quoted {
		end := closingQuote(k)
		if end < 0 {
			return "", badIdempotencyKey() // cut short
		}
		if end != len(k)-1 {
			if rest := strings.TrimLeft(k[end+1:], " \t"); strings.HasPrefix(rest, ",") {
				return "", listedIdempotencyKeys()
			}
			return "", badIdempotencyKey()
		}
		k = k[1:end]
	} else if strings.Contains(k, ",") {
		return "", listedIdempotencyKeys()
	}
	if k == "" || len(k) > maxIdempotencyKey || strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		return "", badIdempotencyKey()
	}
	if len(h.PeekAll(HeaderIdempotencyKey)) > 1 {
		return "", listedIdempotencyKeys()
	}
	return k, nil
}

// closingQuote returns the index of the quote that ends the quoted string
// k begins with (a backslash escapes the byte after it), or -1 if none
// does.
func closingQuote(k string) int {
	for i := 1; i < len(k); i++ {
		switch k[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

func badIdempotencyKey() error {
	return fieldError(pBadRequest, "", HeaderIdempotencyKey,
		"an Idempotency-Key is 1 to 255 printable ASCII characters, e.g. a UUID, bare (without a comma) or in quotes (a quote inside escaped)")
}

// listedIdempotencyKeys is the problem of a request with more than one key:
// two header lines, or one that lists them.
func listedIdempotencyKeys() error {
	return fieldError(pBadRequest, "", HeaderIdempotencyKey,
		"a request carries one Idempotency-Key, sent once: two header lines, or a list of keys on one (a comma outside quotes), name no one call")
}

// callScopeLocal is the fiber local under which idempotent hands a keyed
// call's scope to its handler.
const callScopeLocal = "seenapi.callScope"

// callScope is a keyed call as idempotent scoped it.
type callScope struct {
	scoped  string       // caller, path and key
	request xxh3.Uint128 // of the body, seeded by the path
	header  string       // the Idempotency-Key, for the problems' details
	// sent and sentRequest are scoped and request as builds before 54d10a0
	// made them, of the path as sent, when keyPath spells it otherwise
	// (u%3A1 for u:1); "": the same. Those builds' answers, read back
	// after the upgrade (kept-answers, answers/, and the hot set's from the
	// journal), are kept under them, and their retries, sent as before, get
	// them again instead of recording the next items.
	sent        string
	sentRequest xxh3.Uint128
	p           *replay // its answer, in flight; nil until beginCall registers it
	// failed says that the answer holds a result that changed nothing (a
	// batch user's failure, or an answer degraded by on_error open: see
	// replay.failed). A batch's answer is kept so, for its retry to serve
	// those users anew; a one call's is not kept, as an error answer.
	failed bool
	batch  bool   // a batch's call
	caller uint64 // a hash of the caller (eviction.CallKey.Caller); 0 on an open server
	// stamp is the time of the call that answers are stamped in, when it
	// is ahead of the wall clock (eviction.CallKey.Stamp); zero: not.
	stamp time.Time
	// born is the clock's reading the answer ages from if (a part of) it
	// was given before: read back from the journal (eviction.Result.Born),
	// or a resumed batch's prior; zero: none (see gives).
	born time.Time
}

// gives notes that the answer gives again a part first given at born, a
// reading of the clock: kept, it lives no longer than its oldest part.
func (cs *callScope) gives(born time.Time) {
	if cs.born.IsZero() || born.Before(cs.born) {
		cs.born = born
	}
}

// key is the hot set's key of the call, or with part (a batch's user) of
// that part of it.
func (cs *callScope) key(part string) eviction.CallKey {
	id := cs.scoped
	if part != "" {
		id += "\x00" + part
	}
	k := eviction.CallKey{ID: xxh3.HashString128(id), Request: cs.request, Caller: cs.caller, Stamp: cs.stamp}
	if part == "" && cs.sent != "" {
		k.Sent, k.SentRequest = xxh3.HashString128(cs.sent), cs.sentRequest
	}
	if part == "" && cs.p != nil {
		k.Began = &cs.p.began
	}
	return k
}

// idempotent wraps a recording route's handler, which calls beginCall once
// it has validated the request: a call with an Idempotency-Key that was
// answered 200 before, by the same caller to the same path with the same
// body, gets that answer again (with Idempotent-Replayed: true) and
// changes nothing; the same key with another body is refused (422), and so
// is a call whose twin is still in flight (409). A request that fails its
// validation gets its own problem whatever key it carries, and leaves the
// answer kept under the key alone: a kept answer is a 200's, whose request
// passed the same validation. Calls without the header go straight to h.
func (s *Server) idempotent(h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		key, err := idempotencyKey(c)
		if err != nil {
			return err
		}
		if key == "" {
			return h(c)
		}
		// Refused by every route that records, and before the body is
		// hashed: fiber's c.Body() would inflate a compressed body whole
		// (a 1 MiB gzip stands for 1 GiB).
		if err := checkEncoding(c); err != nil {
			return err
		}
		// Scoped to the caller: another key's calls are not this one's.
		caller := ""
		if !s.keys.Load().open() {
			m := admitted(c)
			caller = string(m.id[:])
		}
		path := keyPath(c)
		scoped := caller + "\x00" + path + "\x00" + key
		request := xxh3.Hash128Seed(c.Request().Body(), xxh3.HashString(path)) // as sent, never inflated
		cs := &callScope{scoped: scoped, request: request, header: key}
		if sent := c.Path(); sent != path {
			cs.sent = caller + "\x00" + sent + "\x00" + key
			cs.sentRequest = xxh3.Hash128Seed(c.Request().Body(), xxh3.HashString(sent))
		}
		if caller != "" {
			// The hot set's share of the answers it reads back from the
			// journal after a crash is the caller's, as in memory here.
			cs.caller = max(xxh3.HashString(caller), 1)
		}
		// The journal keeps the answer with the call's time: in the time
		// answers are stamped in when that is ahead of the clock (set back
		// since earlier answers), so that it is read back as old as it is.
		reading := s.cfg.Now()
		if life := s.replays.life(reading); life.After(reading.Round(0)) {
			cs.stamp = life
		}
		c.Locals(callScopeLocal, cs)
		kept := false
		defer func() {
			if !kept && cs.p != nil {
				s.replays.abandon(scoped, cs.p) // an error or a panic: a retry makes the call anew
			}
		}()
		if err := h(c); err != nil {
			return err
		}
		if cs.p != nil && c.Response().StatusCode() == fiber.StatusOK && (cs.batch || !cs.failed) {
			s.replays.finish(scoped, cs.p, fiber.StatusOK, c.Response().Body(), cs.failed, cs.born)
			kept = true
		}
		return nil
	}
}

// keyPath is the path a keyed call is scoped to: the request's, but with
// the one call's user id percent-encoded one way (url.PathEscape, which
// leaves most ids as they are sent), so that a retry that encodes the
// same user otherwise (u%3A1, u%3a1 for u:1) is the same call, not
// another that records the next items. An id that does not decode is
// left as sent: the handler refuses it.
func keyPath(c *fiber.Ctx) string {
	path, raw := c.Path(), c.Params("user")
	if raw == "" {
		return path
	}
	u := raw
	if strings.IndexByte(raw, '%') >= 0 {
		var err error
		if u, err = url.PathUnescape(raw); err != nil {
			return path
		}
	}
	end := len(path) - len("/filter")
	if e := url.PathEscape(u); e != raw && end >= len(raw) && path[end-len(raw):end] == raw {
		return path[:end-len(raw)] + e + path[end:]
	}
	return path
}

// beginCall looks the keyed call of a validated request up (see
// idempotent) before the handler makes it: given reports that the kept
// answer was set as the response, which the handler returns as it is; an
// error is the key's problem (in use, or reused with another body). A call
// without a key is begun at once. A batch's answer that holds a user's
// failure is not given: the call is begun with it as its replay's prior,
// whose results the batch gives again but for the failed users'.
func (s *Server) beginCall(c *fiber.Ctx) (given bool, err error) {
	cs, ok := c.Locals(callScopeLocal).(*callScope)
	if !ok {
		return false, nil
	}
	var p *replay
	state := replayNew
	if cs.sent != "" {
		p, state = s.replays.given(cs.sent, cs.sentRequest)
	}
	if state == replayNew {
		p, state = s.replays.begin(cs.scoped, cs.request)
	}
	switch state {
	case replayDone:
		c.Set(HeaderReplayed, "true")
		c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
		c.Status(p.status)
		c.Response().SetBody(p.body)
		return true, nil
	case replayMismatch:
		return false, newError(pIdempotencyKeyReused, "Idempotency-Key %q was used for another request to this route; a retry must send the same body", cs.header)
	case replayBusy:
		// Retry-After tells any client when: the first call is
		// answered in milliseconds, and a header counts whole seconds.
		e := newError(pIdempotencyKeyInUse, "a request with Idempotency-Key %q is still in flight; retry once it is answered", cs.header)
		e.retry = inUseRetry
		return false, e
	}
	cs.p = p
	return false, nil
}
