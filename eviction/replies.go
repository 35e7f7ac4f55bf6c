package eviction

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/zeebo/xxh3"
)

// The API keeps the answers of calls sent with an Idempotency-Key in
// memory, so that a retry after a lost answer gets it again instead of the
// next items. A crash loses those, and the retry the crash provokes is the
// one that needs it most: the call's items were journaled, its answer never
// left. So a keyed call's journal record carries its answer (journal.go),
// loading a user reads the answers of its records back into replies, and
// the call's retry, which loads the user first, finds its answer there.

// CallKey names a call sent with an Idempotency-Key: ID the key as its
// caller scoped it (the caller, the route, the user), Request a digest of
// the request. Began, if not nil, is set once the call holds its user,
// before it reads or records anything: an erase that finds it unset (see
// ForgetThen) knows that the call works on the user it leaves, not on the
// history it erased. Counted says that the call's hit or miss is counted
// already (CheckCallKeys sets it). Caller names who made the call (a hash
// of its API key's digest; 0: none known, as on an open server), whose
// share of the budget its answer takes once read back (see replies).
// Stamp is the time of the call's answer in the caller's own time of
// answers, when that runs ahead of the clock's (a wall clock set back
// since answers were stamped: see SetReplyClock), or when the answer is
// part of one first given before, whose time it is then (a keyed batch's
// user, served after the batch's start, or anew by its retry, which gives
// the other users their first results again: read back, the part lives
// no longer than they do); zero: the clock's. Sent and SentRequest are
// ID and Request as a caller of an earlier build scoped the same call
// (one that spelled the route otherwise), zero if the same: a retry finds
// the answer such a build's journal holds under them. A CallKey of zero ID
// and Request is none.
type CallKey struct {
	ID, Request       xxh3.Uint128
	Sent, SentRequest xxh3.Uint128
	Caller            uint64
	Stamp             time.Time
	Began             *atomic.Bool
	Counted           bool
}

func (k CallKey) zero() bool { return k.ID == xxh3.Uint128{} && k.Request == xxh3.Uint128{} }

// reply is the answer of a keyed call, as its journal record keeps it.
type reply struct {
	id, request xxh3.Uint128
	caller      uint64    // CallKey.Caller; 0 for a record of a build before store format 6
	at          time.Time // the call's, to the second, in the caller's time of answers
	ahead       uint64    // the seconds at is ahead of its record's time (CallKey.Stamp)
	behind      uint64    // or behind it (a part of an answer first given before)
	// born is the clock's reading it ages from (see keep): on Go's
	// monotonic clock, which a step of the wall clock leaves alone.
	born      time.Time
	seen      int32
	recorded  int32
	saturated bool
	unseen    []int32 // indexes of the candidates answered unseen
	// ns and user name the user whose journal held it (set as it is read
	// back), so that erasing the user drops it (see replies.erase).
	ns   uint8
	user string
}

// replyOverhead is what a kept reply costs besides its indexes: the
// struct, its caller's LRU element and map entry, and its entry in the
// map by ID.
const replyOverhead = 240

func (r *reply) size() int64 { return replyOverhead + 4*int64(len(r.unseen)) + int64(len(r.user)) }

// replies holds the answers read back from the journal, each for ttl
// after its call, within a budget shared between callers as the API's is:
// past it, the least recently used answer of the caller whose answers take
// the most bytes goes, so that one API key's flood of keyed calls before a
// crash, read back as its retries load their users, pushes out its own
// older answers, not those of another key whose retries come later. The
// records of builds before store format 6, which name no caller, are one
// caller's. Safe for concurrent use.
type replies struct {
	// life gives the time an answer read back ages by (SetReplyClock);
	// nil: the clock's wall time.
	life    atomic.Pointer[func(time.Time) time.Time]
	mu      sync.Mutex
	byID    map[xxh3.Uint128]*reply
	callers map[uint64]*replyCaller
	bytes   int64
	budget  int64
	ttl     time.Duration
}

// replyCaller is the answers kept of one caller, least recently used first.
type replyCaller struct {
	lru   *simplelru.LRU[xxh3.Uint128, *reply]
	bytes int64
}

func newReplies(budget int64, ttl time.Duration) *replies {
	return &replies{byID: map[xxh3.Uint128]*reply{}, callers: map[uint64]*replyCaller{}, budget: budget, ttl: ttl}
}

// addLocked keeps r as its caller's most recently used. rs.mu held.
func (rs *replies) addLocked(r *reply) {
	c := rs.callers[r.caller]
	if c == nil {
		l, err := simplelru.NewLRU[xxh3.Uint128, *reply](math.MaxInt32, nil)
		if err != nil {
			panic(err) // only for a size below 1
		}
		c = &replyCaller{lru: l}
		rs.callers[r.caller] = c
	}
	c.lru.Add(r.id, r)
	c.bytes += r.size()
	rs.bytes += r.size()
	rs.byID[r.id] = r
}

// removeLocked drops r, kept. rs.mu held.
func (rs *replies) removeLocked(r *reply) {
	delete(rs.byID, r.id)
	rs.bytes -= r.size()
	c := rs.callers[r.caller]
	c.lru.Remove(r.id)
	if c.bytes -= r.size(); c.lru.Len() == 0 {
		delete(rs.callers, r.caller)
	}
}

// keep adds r unless it is past its time to live at now, a reading of
// the clock; a reply of the same ID read before is replaced (the later
// record is the later call). Its stamp is a wall time, read back: its age
// is now's wall less it, but one stamped ahead of the clock (which has
// stepped back since) is as old as the read, so that it lives ttl from
// then, never longer; from then on it ages on the monotonic clock, from
// the first read of the same record (a user evicted and loaded again
// reads it again).
func (rs *replies) keep(r *reply, now time.Time) {
	life := now.Round(0)
	if f := rs.life.Load(); f != nil {
		life = (*f)(now)
	}
	age := max(life.Sub(r.at), 0)
	if rs.budget <= 0 || age >= rs.ttl {
		return
	}
	r.born = now.Add(-age)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if old, ok := rs.byID[r.id]; ok {
		if old.request == r.request && old.at.Equal(r.at) {
			r.born = old.born
		}
		rs.removeLocked(old)
	}
	if r.size() > rs.budget {
		// Added, it would leave the budget last, after every other reply
		// of its caller (it is the most recently used): one reply larger
		// than the budget would take every other with it. Its retry is
		// served anew.
		return
	}
	rs.addLocked(r)
	for rs.bytes > rs.budget {
		var top *replyCaller
		for _, c := range rs.callers {
			if top == nil || c.bytes > top.bytes {
				top = c
			}
		}
		_, old, ok := top.lru.GetOldest()
		if !ok {
			break
		}
		rs.removeLocked(old)
	}
}

// find returns the reply kept for id, or nil: none, or past its time at
// now, a reading of the clock.
func (rs *replies) find(id xxh3.Uint128, now time.Time) *reply {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r, ok := rs.byID[id]
	if !ok {
		return nil
	}
	if now.Sub(r.born) >= rs.ttl {
		rs.removeLocked(r)
		return nil
	}
	rs.callers[r.caller].lru.Get(id) // its caller's most recently used
	return r
}

// erase drops the replies read back from the journal of user in the
// namespace of index ns (user "": of every user of ns): an erased user's
// answers must not be given to a retry, which would get the erased
// history back and record nothing for the user who starts afresh.
func (rs *replies) erase(ns uint8, user string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, r := range rs.byID {
		if r.ns == ns && (user == "" || r.user == user) {
			rs.removeLocked(r)
		}
	}
}

// usage returns the replies kept and their bytes.
func (rs *replies) usage() (int, int64) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.byID), rs.bytes
}

// SetReplyClock makes the answers read back from the journal age by life,
// which gives a reading of the clock in the time the caller stamps its
// answers in (CallKey.Stamp): a time that never goes back across restarts
// (the API's: see api.Server), so that an answer stamped ahead of a wall
// clock set back since is as old as it is, not as new as the read. Call it
// before the journal is read back (Recover, serving).
func (h *HotSet) SetReplyClock(life func(time.Time) time.Time) { h.replies.life.Store(&life) }
