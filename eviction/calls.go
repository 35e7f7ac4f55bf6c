package eviction

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
	"github.com/zeebo/xxh3"
)

// callScratch is what one call reuses from the last: the filter's scratch
// and the journal record's buffer (the store is done with a record once
// Append returns, so it need not be garbage).
type callScratch struct {
	userfilter.Scratch
	rec   []byte
	reply reply // a keyed call's, for its journal record
}

// maxKeptRecord is the largest journal record buffer a callScratch keeps
// for the next call: a 10,000-item RecordAll is not memory held for good.
const maxKeptRecord = 16 << 10

// journalTTL is how long a journal record of a filter of profile p is
// kept: past its window and one bucket, its items test unseen anyway. The
// filter's own profile, not its namespace's: a namespace's window may have
// changed since the filter was made.
func journalTTL(p userfilter.Profile) time.Duration {
	if p.Window == 0 {
		return 0
	}
	return p.Window + p.Granularity
}

// journal makes the hashes in s.ToRecord, about to be recorded, durable,
// with the answer r of a keyed call (nil: none), and returns the record's
// sequence number (0: none written). e.mu held.
func (h *HotSet) journal(info *nsInfo, e *entry, at time.Time, s *callScratch, r *reply) (uint64, error) {
	if h.opts.NoJournal || len(s.ToRecord) == 0 {
		return 0, nil
	}
	var made []byte
	if e.lastSeq == 0 || e.f.Profile().Window > 0 && e.f.Empty(at) {
		// The first record since the filter was last stored (or of a
		// filter never stored) names its profile: see journal.go. So does
		// that of a windowed user with no item in the window: one found
		// gone and made anew (see acquire), maybe with another profile
		// than its earlier records, not yet retired, name; load makes it
		// anew with this one.
		var err error
		if made, err = info.madeOf(e.f.Profile()); err != nil {
			return 0, err
		}
	}
	s.rec = appendJournal(s.rec, at, s.ToRecord, r, made, e.f.Room(at))
	seq, err := h.store.Append(info.Name, e.id(), s.rec, journalTTL(e.f.Profile()))
	if cap(s.rec) > maxKeptRecord {
		s.rec = nil
	}
	if err != nil {
		h.storageErrors.Add(1)
		if errors.Is(err, storage.ErrFull) {
			return 0, fmt.Errorf("%w: %w", ErrStorageFull, err)
		}
		return 0, fmt.Errorf("%w: journal of %s/%s: %w", ErrStorage, info.Name, e.id(), err)
	}
	h.journals.Add(1)
	e.lastSeq = max(e.lastSeq, seq)
	return seq, nil
}

// Filter is the one call: it returns the candidates the user has not seen
// (order kept, duplicates once, at most limit; limit <= 0 means no limit)
// and records per mode before returning. Result.Unseen aliases candidates.
func (h *HotSet) Filter(ns, user string, candidates []string, limit int, mode userfilter.Mode) (Result, error) {
	return h.filterAppend(nil, ns, user, candidates, limit, mode, true, CallKey{})
}

// FilterAppend is Filter with Result.Unseen appended to dst[:0]: a caller
// that answers many calls reuses one slice instead of allocating one each.
func (h *HotSet) FilterAppend(dst []string, ns, user string, candidates []string, limit int, mode userfilter.Mode) (Result, error) {
	return h.filterAppend(dst, ns, user, candidates, limit, mode, true, CallKey{})
}

// FilterKeyed is FilterAppend for a call sent with an Idempotency-Key,
// which its journal record keeps with the answer. A call whose key and
// request match such a record read back after a restart (within
// Options.ReplyTTL) gets that record's answer, Result.Replayed set,
// and records nothing: the retry of a call whose answer a crash lost.
// The same key with another request is ErrCallKeyReused. A zero k is
// FilterAppend.
func (h *HotSet) FilterKeyed(dst []string, ns, user string, candidates []string, limit int, mode userfilter.Mode, k CallKey) (Result, error) {
	return h.filterAppend(dst, ns, user, candidates, limit, mode, true, k)
}

// CheckCallKeys returns ErrCallKeyReused if the journal of one of users
// keeps, under the ID of the key of the same place in keys, the answer of
// another request: a batch checks all its users' keys before it makes any
// call. It loads the users that are not in memory (reading their journals'
// answers back), as their calls would; a user that fails to load fails its
// own call, as a batch's users do, not the batch. Each user's look counts
// its call's hit or miss, and sets Counted in keys so the call counts none.
// given is the oldest reading of the clock that the answers it found age
// from (Result.Born of the calls that will give them again; zero: none):
// the batch's answer is as old, and so are its users' calls made anew
// (CallKey.Stamp).
func (h *HotSet) CheckCallKeys(ns string, users []string, keys []CallKey) (given time.Time, err error) {
	info, err := h.namespace(ns)
	if err != nil {
		return time.Time{}, err
	}
	now := h.opts.Now()
	for i, k := range keys {
		if k.zero() {
			continue
		}
		e, _, err := h.acquire(info, users[i], false)
		keys[i].Counted = true // the call's hit or miss, as its user stood
		if err != nil {
			continue // no user, or one that fails its own call: not the batch's
		}
		h.release(e, false)
		r := h.replies.find(k.ID, now)
		switch {
		case r == nil:
		case r.request != k.Request:
			return time.Time{}, ErrCallKeyReused
		case given.IsZero() || r.born.Before(given):
			given = r.born
		}
	}
	return given, nil
}

// filterAppend is FilterAppend; oneCall says whether it is the one call,
// whose candidates the namespace's figures count (Record's items are not
// candidates), and k names a keyed call (see FilterKeyed).
func (h *HotSet) filterAppend(dst []string, ns, user string, candidates []string, limit int, mode userfilter.Mode, oneCall bool, k CallKey) (Result, error) {
	info, err := h.namespace(ns)
	if err != nil {
		return Result{}, err
	}
	e, _, created, err := h.acquireNew(info, user, mode != userfilter.RecordNone, !k.Counted)
	if errors.Is(err, ErrUserNotFound) {
		// A dry run for a user with no history creates no user: the answer
		// is an empty filter's.
		return h.filterNew(dst, info, candidates, limit)
	}
	if err != nil {
		return Result{}, err
	}
	// Released by a deferred call, so that a panic in the filter's code or
	// the journal's (a bug, and the API answers it with a 500) does not
	// leave the user locked and every later call of theirs waiting.
	changed, expired, refused := false, false, false
	var keyed uint64 // the journal record of a keyed call's answer
	defer func() {
		if refused {
			h.releaseRefused(e, expired)
			return
		}
		h.releaseCall(e, changed, expired, keyed)
	}()
	now := h.opts.Now()
	// Select would drop the buckets past the window all the same: dropped
	// here, their memory leaves the budget's count even when the call
	// records nothing.
	expired = e.f.Expire(now)
	if k.Began != nil {
		// Under the user's lock: an erase waits for it (see ForgetThen).
		k.Began.Store(true)
	}
	if !k.zero() {
		// Loading the user (acquire) read its journal's answers back.
		if r := h.replies.find(k.ID, now); r != nil {
			return r.result(dst, candidates, k)
		}
		if k.Sent != (xxh3.Uint128{}) {
			if r := h.replies.find(k.Sent, now); r != nil {
				k.Request = k.SentRequest
				return r.result(dst, candidates, k)
			}
		}
	}
	cs := h.scratch.Get().(*callScratch)
	defer h.scratch.Put(cs)
	s := &cs.Scratch
	res := e.f.Select(candidates, limit, mode, now, s)
	full := len(s.ToRecord) > 0 && e.f.Full(now, h.maxEncoded)
	var r *reply
	if !k.zero() {
		r = &cs.reply
		recorded, saturated := e.f.Expect(now, s, h.maxEncoded)
		*r = reply{id: k.ID, request: k.Request, caller: k.Caller, seen: int32(res.SeenCount), recorded: int32(recorded),
			saturated: saturated, unseen: s.Unseen}
		// Whole seconds: read back no younger than it is.
		switch d := k.Stamp.Sub(time.Unix(now.Unix(), 0)); {
		case k.Stamp.IsZero():
		case d >= time.Second:
			r.ahead = uint64(d / time.Second)
		case d < 0:
			r.behind = uint64((-d + time.Second - 1) / time.Second)
		}
	}
	if full {
		// Nothing would be recorded: no journal record either, which no
		// write-back would retire (the user does not change), so the
		// journal of a saturated user does not grow call after call.
		s.ToRecord = s.ToRecord[:0]
	}
	seq, err := h.journal(info, e, now, cs, r)
	if err != nil {
		refused = true
		return Result{}, err
	}
	if r != nil {
		keyed = seq
	}
	recorded, saturated := e.f.Commit(now, s, h.maxEncoded)
	saturated = saturated || full
	changed = recorded > 0
	c := info.c
	if created {
		c.newUsers.Add(1)
	}
	if oneCall {
		c.candidates.Add(uint64(res.Distinct))
		c.seen.Add(uint64(res.SeenCount))
	}
	if recorded > 0 {
		c.recorded.Add(uint64(recorded))
	}
	return Result{SeenCount: res.SeenCount, Recorded: recorded, Saturated: saturated,
		Unseen: unseenOf(dst, candidates, s)}, nil
}

// result is the answer r keeps, for the retry of its call with key k and
// candidates (those of the call, as k.Request vouches).
func (r *reply) result(dst, candidates []string, k CallKey) (Result, error) {
	if r.request != k.Request {
		return Result{}, ErrCallKeyReused
	}
	out := slices.Grow(dst[:0], len(r.unseen))
	for _, i := range r.unseen {
		if int(i) >= len(candidates) {
			return Result{}, ErrCallKeyReused // not the candidates of the call after all
		}
		out = append(out, candidates[i])
	}
	return Result{Unseen: out, SeenCount: int(r.seen), Recorded: int(r.recorded), Saturated: r.saturated,
		Replayed: true, Born: r.born}, nil
}

// unseenOf appends to dst[:0] the candidates s selected as unseen.
func unseenOf(dst, candidates []string, s *userfilter.Scratch) []string {
	out := slices.Grow(dst[:0], len(s.Unseen))
	for _, idx := range s.Unseen {
		out = append(out, candidates[idx])
	}
	return out
}

// filterNew answers a dry run for a user with no history, without making one.
func (h *HotSet) filterNew(dst []string, info *nsInfo, candidates []string, limit int) (Result, error) {
	f, err := userfilter.New(info.Profile)
	if err != nil {
		return Result{}, err
	}
	cs := h.scratch.Get().(*callScratch)
	defer h.scratch.Put(cs)
	s := &cs.Scratch
	res := f.Select(candidates, limit, userfilter.RecordNone, h.opts.Now(), s)
	info.c.candidates.Add(uint64(res.Distinct))
	return Result{SeenCount: res.SeenCount, Unseen: unseenOf(dst, candidates, s)}, nil
}

// Record marks items seen without filtering (Result.Recorded new, Result.SeenCount already seen).
func (h *HotSet) Record(ns, user string, items []string) (Result, error) {
	res, err := h.filterAppend(nil, ns, user, items, 0, userfilter.RecordAll, false, CallKey{})
	res.Unseen = nil
	return res, err
}

// RecordBulk is Record for bulk loads, such as an import from another
// store: a user who is not in memory is loaded, changed and written back
// before it returns, without entering the hot set, so a bulk load does not
// push out the users being served. A user in memory is recorded as by
// Record. The user's load slot is held meanwhile: other calls for the user
// wait, then load what was written.
func (h *HotSet) RecordBulk(ns, user string, items []string) (Result, error) {
	info, err := h.namespace(ns)
	if err != nil {
		return Result{}, err
	}
	k0 := h.key(info, user, 0)
	s := h.shardOf(k0)
	for {
		s.mu.Lock()
		sl, err := h.slotLocked(s, info, user, k0)
		if err != nil {
			s.mu.Unlock()
			return Result{}, err
		}
		if sl.e != nil {
			s.mu.Unlock()
			return h.Record(ns, user, items)
		}
		if lc := sl.lc; lc != nil {
			s.mu.Unlock()
			<-lc.done
			continue
		}
		lc := h.claimLocked(s, sl, info, user)
		gen := info.c.purges.Load() // under s.mu: see PurgeNamespace
		s.mu.Unlock()
		return h.recordCold(s, sl.k, lc, gen, info, user, items)
	}
}

// recordCold records items for a user whose load slot lc (under key k of
// shard s) it holds, in the store only, and lets the slot go. gen is the
// namespace's purges when lc was claimed.
func (h *HotSet) recordCold(s *shard, k key, lc *loadCall, gen uint64, info *nsInfo, user string, items []string) (res Result, err error) {
	defer func() {
		s.mu.Lock()
		delete(s.loading, k)
		s.mu.Unlock()
		close(lc.done) // lc.err nil: waiters look again and load what was written
	}()
	defer h.recovered(&err, "recording in bulk", info.Name, user)
	f, lastSeq, err := h.load(info, user)
	countCold(info.c, f, err, h.opts.Now)
	if err != nil {
		return Result{}, err
	}
	created := f == nil || gone(f, h.opts.Now())
	if created {
		if f, err = userfilter.New(info.Profile); err != nil {
			return Result{}, err
		}
	}
	cs := h.scratch.Get().(*callScratch)
	defer h.scratch.Put(cs)
	now := h.opts.Now()
	sel := f.Select(items, 0, userfilter.RecordAll, now, &cs.Scratch)
	recorded, saturated := f.Commit(now, &cs.Scratch, h.maxEncoded)
	res = Result{SeenCount: sel.SeenCount, Recorded: recorded, Saturated: saturated}
	if recorded == 0 && lastSeq == 0 {
		return res, nil // nothing to write
	}
	if purgedSince(info, gen) {
		return Result{}, errPurged(info) // not written over the purge
	}
	// Written before the answer, as a journal record would be: nothing else
	// holds the user meanwhile, so this is the user's whole state.
	if err := h.writeNow(info, user, f, lastSeq, false, now, "recording in bulk"); err != nil {
		return Result{}, err
	}
	if created {
		info.c.newUsers.Add(1)
	}
	info.c.recorded.Add(uint64(recorded))
	return res, nil
}

// Check appends to seen whether each item was seen, recording nothing. An
// unknown user has seen nothing.
func (h *HotSet) Check(ns, user string, items []string, seen []bool) ([]bool, error) {
	info, err := h.namespace(ns)
	if err != nil {
		return seen, err
	}
	e, _, err := h.acquire(info, user, false)
	if errors.Is(err, ErrUserNotFound) {
		for range items {
			seen = append(seen, false)
		}
		return seen, nil
	}
	if err != nil {
		return seen, err
	}
	defer h.release(e, false) // deferred: see FilterAppend
	cs := h.scratch.Get().(*callScratch)
	defer h.scratch.Put(cs)
	return e.f.CheckWith(items, h.opts.Now(), seen, &cs.Scratch), nil
}

// User returns the user's stats, or ErrUserNotFound. It brings a cold user
// into memory, but counts no hit, miss or call for a user with no history:
// a person or a tool reading a user (the dashboard's look-up) is no call of
// the recommender's, whose users the hit ratio says the budget holds.
func (h *HotSet) User(ns, user string) (UserStats, error) {
	info, err := h.namespace(ns)
	if err != nil {
		return UserStats{}, err
	}
	e, hot, _, err := h.acquireNew(info, user, false, false)
	if err != nil {
		return UserStats{}, err
	}
	defer h.release(e, false) // deferred: see FilterAppend
	now := h.opts.Now()
	if gone(&e.f, now) {
		h.dropGone(e)
		return UserStats{}, ErrUserNotFound
	}
	return h.userStats(&e.f, hot, e.dirty(), now), nil
}

// releaseRefused is release after a call the store refused (its journal
// record, or the import's write): a user that acquire made for the call,
// still holding nothing the store lacks, leaves the cache, so that a
// refused call leaves no user behind (stats and the hot figures answer as
// for a user never seen). A user another call recorded into is dirty, or
// holds items once written back, and stays; a call waiting for e looks the
// user up again (reachLocked). resized: see releaseSized. e.mu held; lets
// it go.
func (h *HotSet) releaseRefused(e *entry, resized bool) {
	if e.dirty() || e.lastSeq != 0 || !e.f.Empty(h.opts.Now()) {
		h.releaseSized(e, false, resized)
		return
	}
	h.dropGone(e)
	e.mu.Unlock()
}

// dropGone takes e, found gone, out of the cache unless it is dirty (its
// write-back then writes it Empty and drops it) or its write-back is in
// flight (it stays reachable until that lands, see flagWriting). e.mu held.
func (h *HotSet) dropGone(e *entry) {
	if e.dirty() {
		return
	}
	k := h.keyOf(e)
	s := h.shardOf(k)
	s.mu.Lock()
	if e.flags&flagWriting == 0 {
		h.dropGoneLocked(s, k, e)
	}
	s.mu.Unlock()
}

// Peek returns the user's stats as User does, but reads a cold user from
// the store without bringing it into memory, and counts no hit or miss, so
// that listing many users (the dashboard's list) neither evicts others nor
// counts as their calls. A user in memory is answered from there (which
// refreshes its place in the LRU, as any look-up does). Safe for
// concurrent use.
func (h *HotSet) Peek(ns, user string) (UserStats, error) {
	info, err := h.namespace(ns)
	if err != nil {
		return UserStats{}, err
	}
	k0 := h.key(info, user, 0)
	s := h.shardOf(k0)
	s.mu.Lock()
	sl, err := h.slotLocked(s, info, user, k0)
	hot := false
	if err == nil && sl.e != nil {
		cur, ok := s.lru.Peek(sl.k)
		hot = ok && cur == sl.e
	}
	s.mu.Unlock()
	if err != nil {
		return UserStats{}, err
	}
	if e := sl.e; e != nil {
		// Hot, or evicted and waiting for its write-back: its entry holds
		// what the store may not yet. Read under its lock, as a call
		// would, without taking it back into the LRU.
		e.mu.Lock()
		defer e.mu.Unlock()
		now := h.opts.Now()
		if gone(&e.f, now) {
			return UserStats{}, ErrUserNotFound
		}
		return h.userStats(&e.f, hot, e.dirty(), now), nil
	}
	// Cold, or being loaded: what the store holds is what the load reads.
	f, _, err := h.load(info, user)
	if err != nil {
		return UserStats{}, err
	}
	if f == nil || gone(f, h.opts.Now()) {
		return UserStats{}, ErrUserNotFound
	}
	return h.userStats(f, false, false, h.opts.Now()), nil
}

// userStats is what User and Peek answer for the filter f.
// userStats is f's stats: saturated at its item cap, or at the largest
// filter the store keeps (maxEncoded).
func (h *HotSet) userStats(f *userfilter.Filter, hot, dirty bool, now time.Time) UserStats {
	p := f.Profile()
	st := f.Stats(now)
	st.Saturated = st.Saturated || f.Full(now, h.maxEncoded)
	return UserStats{Stats: st, Hot: hot, Dirty: dirty,
		Window: int64(p.Window / time.Second), Granularity: int64(p.Granularity / time.Second), MaxItems: p.MaxItems,
		FirstSeen: f.FirstSeen(), LastSeen: f.LastSeen()}
}
