package eviction

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// markDirtyLocked records that e differs from storage. e.mu and s.mu held.
func (h *HotSet) markDirtyLocked(s *shard, e *entry) {
	if !e.dirty() {
		e.dirtySince.Store(h.clock())
		h.dirtyUsers.Add(1)
	}
	if e.flags&flagQueued == 0 {
		e.flags |= flagQueued
		s.dirty.push(e)
	}
}

// failedWrite is a user's record in shard.failed: since is when its
// oldest change not written was made, and at the dirtySince that its last
// failed write-back gave it. A user that was clean again since has
// another dirtySince, and the record is stale.
type failedWrite struct{ since, at uint32 }

// markClean records that e was written back. e.mu held.
func (h *HotSet) markClean(e *entry) {
	if e.dirty() {
		e.dirtySince.Store(0)
		h.dirtyUsers.Add(-1)
	}
}

func (h *HotSet) flushLoop() {
	defer close(h.stopped)
	// Short rounds: each is a burst of CPU (encoding, a store commit) that
	// competes with calls for a core. At 5s a round every 250 ms took a
	// core for about 50 ms under the reference workload's open loop, and a
	// round every 50 ms for 1 to 3 ms (encoding, then Badger's write of the
	// batch), which calls waited behind. So a round writes at most
	// smoothRound users that are due, every 10 ms: a burst of a few
	// hundred microseconds (every 5 ms took more CPU for the same tail).
	// Users overdue by a whole interval more are written whatever their
	// number, so a backlog (a fill, a burst of new users) never grows.
	tick := min(max(h.opts.FlushInterval/500, 5*time.Millisecond), 100*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	reapRounds, round := max(1, int(reapEvery/tick)), 0
	age := uint32(min(h.opts.FlushInterval.Milliseconds(), 1<<30))
	var warn flushWarner
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			warn.round(h.opts.Logger, h.flushSome(age, smoothRound))
			// Users gone past their window that no call looks up.
			round++
			h.reapSome(round%reapRounds == 0)
			// A set left over budget by a call that found a sweep under
			// way, with no call since to sweep it.
			h.afterEvict(nil, nil)
		case <-h.kick:
			warn.round(h.opts.Logger, h.flush(evictedOnly))
		}
	}
}

// flushWarner logs write-back failures without flooding the log: a user
// that cannot be written (a full disk, a bug met by its data) stays dirty
// from the failed write on, so a round retries it a flush interval later,
// or at every round if it was evicted (it waits in the evicted map, which
// each round writes whole). It logs a failure at most once every logEvery,
// with the rounds that failed since the last line.
type flushWarner struct {
	failed int          // rounds failed since the last line logged
	last   atomic.Int64 // see spaced
}

// round reports one write-back round's outcome.
func (w *flushWarner) round(log *slog.Logger, err error) {
	if err == nil {
		return
	}
	w.failed++
	if spaced(&w.last) {
		log.Warn("seenapi: write-back failed; will retry", "err", err, "failed_rounds", w.failed)
		w.failed = 0
	}
}

// Flush writes every dirty filter back now, merging into what is stored.
func (h *HotSet) Flush() error { return h.flush(0) }

// evictedOnly is the age of flush that writes back evicted users only.
const evictedOnly = math.MaxUint32

// kickFlush asks the write-back loop for a round of evicted users now.
func (h *HotSet) kickFlush() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// waitBacklog holds a call that is about to load a user (and so evict
// one) while evicted users waiting for write-back take more than
// backlogLimit bytes: memory stays near the budget however fast calls come.
// It waits for two write-back rounds at most, so a store that refuses
// writes (a full disk) slows loads down but never stops them.
func (h *HotSet) waitBacklog() {
	if h.evictedBytes.Load() <= h.backlogLimit {
		return
	}
	h.backlogMu.Lock()
	defer h.backlogMu.Unlock()
	until := h.flushRounds + 2
	for h.evictedBytes.Load() > h.backlogLimit && h.flushRounds < until && !h.closed.Load() && h.changing.Load() == 0 {
		h.kickFlush()
		h.backlogCond.Wait()
	}
}

// lockForChange takes flushMu for a step that changes users outside
// write-back (an erase, an import, a forget of items, a purge) and returns
// what lets it go. While it is held no write-back round can run, so the
// loads waiting for rounds (waitBacklog) stop waiting and go on: the step
// may itself load a user, or wait for another call's load of its user,
// and would otherwise wait for good, and every write-back with it.
func (h *HotSet) lockForChange() (unlock func()) {
	h.flushMu.Lock()
	h.changing.Add(1)
	h.backlogMu.Lock()
	h.backlogCond.Broadcast()
	h.backlogMu.Unlock()
	return func() {
		h.changing.Add(-1)
		h.flushMu.Unlock()
	}
}

// flushed wakes the calls waiting in waitBacklog after a write-back round.
func (h *HotSet) flushed() {
	h.backlogMu.Lock()
	h.flushRounds++
	h.backlogCond.Broadcast()
	h.backlogMu.Unlock()
}

// flush writes back the users queued at least age milliseconds ago and
// every evicted one (an evicted user is memory over the budget until it is
// written).
func (h *HotSet) flush(age uint32) error { return h.flushSome(age, 0) }

// keyedHold is, in milliseconds, how recent a keyed call's journal record
// must be for a write-back round to leave it in the journal (see
// writeBack): the API's log of answers writes each answer within 100 ms
// (or half the flush interval, if shorter), and a second leaves room for
// a slow write; a record whose answer it has not written is held longer
// (SetAnswerLog). Longer, the users of many keyed calls (every call of a
// client with retries is keyed) would be written back twice as often.
const keyedHold = 1000

// smoothRound is how many users that are due a round of the write-back
// loop writes at most, besides those overdue (see flushLoop).
const smoothRound = 64

// flushSome is flush with at most limit users dirty for age (0: no limit)
// besides those dirty for twice age or more, which it writes all. The
// shards take turns at being looked at first, so a limit starves none.
func (h *HotSet) flushSome(age uint32, limit int) error {
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	defer h.flushed()
	now := h.clock()
	overdue := uint32(min(2*uint64(age), math.MaxUint32))
	first := h.nextShard
	h.nextShard = (h.nextShard + 1) % len(h.shards)
	all := h.due[:0]
	defer func() {
		clear(all)
		if cap(all) <= maxKeptDue {
			h.due = all[:0]
		}
	}()
	due := 0 // users taken that are due but not overdue
	hold := min(age, keyedHold)
	if age == evictedOnly {
		hold = h.keyedHoldOf() // the loop's rounds'
	}
	for i := range h.shards {
		s := h.shards[(first+i)%len(h.shards)]
		s.mu.Lock()
		n := 0
		// A clock that went back makes now-at huge: written at once.
		for n < s.dirty.len() {
			e := s.dirty.at(n)
			since := now - e.dirtySince.Load()
			if since < age {
				break
			}
			if since < overdue {
				if limit > 0 && due >= limit {
					break
				}
				due++
			}
			e.flags &^= flagQueued
			all = append(all, e)
			n++
		}
		s.dirty.drop(n)
		for _, e := range s.evicted {
			if h.holdEvictedLocked(s, e, hold) {
				continue
			}
			all = append(all, e) // written once: write-back skips one already clean
		}
		s.mu.Unlock()
	}
	var errs []error
	if age == evictedOnly {
		hold = 0 // those it takes are let go once written (see holdEvictedLocked)
	}
	dirty := 0
	for rest := all; len(rest) > 0; {
		n := min(len(rest), writeBatch)
		d, err := h.writeBack(rest[:n], nil, hold)
		if err != nil {
			errs = append(errs, err)
		}
		dirty += d
		rest = rest[n:]
	}
	if dirty > 0 {
		// Rounds that found nothing to write (the loop looks every few
		// milliseconds), or only users cleaned since they were listed (one
		// erased, or whose items were forgotten, is stored at once), are
		// not write-backs an operator counts: each one counted writes a
		// user (Stats.FlushedUsers), unless the store fails.
		h.flushes.Add(1)
	}
	return joinFew(errs)
}

// AnswerLog is what the write-back needs of the API's log of keyed calls'
// answers (see SetAnswerLog). Its methods must be safe for concurrent use.
type AnswerLog interface {
	// Mark returns the mark of a keyed call's journal record made now.
	Mark() uint64
	// Written returns the mark below which every keyed call's answer is
	// written to the log; math.MaxUint64 once the log writes no more (it
	// stopped, or closed with the answers saved).
	Written() uint64
}

// SetAnswerLog makes the write-back leave a keyed call's journal record in
// the journal, past the hold (keyedHold), until log has written the call's
// answer: the hold alone assumed the log's writer is never late by more
// than it, and on a loaded machine a write-back retired a record whose
// answer was in memory only, so that a crash then served the call's retry
// anew, recording its next items. Call it before serving.
func (h *HotSet) SetAnswerLog(log AnswerLog) { h.answerLog.Store(&log) }

// answerMark is the API's log's mark of a keyed call's record made now
// (0: no log).
func (h *HotSet) answerMark() uint64 {
	if l := h.answerLog.Load(); l != nil {
		return (*l).Mark()
	}
	return 0
}

// keyedFrom is kr.from now, for a hold of hold milliseconds (0: none, as a
// final write-back's, which holds no record for the log either: the API
// saved or wrote its answers before).
func (h *HotSet) keyedFrom(kr keyedRecord, hold uint32) uint64 {
	written := uint64(math.MaxUint64)
	if l := h.answerLog.Load(); l != nil && hold > 0 {
		written = (*l).Written()
	}
	return kr.from(h.clock(), hold, written)
}

// keyedHoldOf is the hold of the write-back loop's rounds (see writeBack),
// which write the users changed FlushInterval ago.
func (h *HotSet) keyedHoldOf() uint32 {
	return uint32(min(h.opts.FlushInterval.Milliseconds(), keyedHold))
}

// holdEvictedLocked reports whether the write-back of e, an evicted user,
// waits for a later round: one with a keyed call's journal record made
// less than hold milliseconds ago (see writeBack) stays in memory until
// then, instead of being written at once and its record retired with the
// call's answer in the API's memory only, which a crash lost: the retry
// was served anew and recorded the next items. So that memory stays near
// the budget (see waitBacklog), only while the evicted users waiting for
// write-back take at most half the backlog (beyond, writeBack lets it go
// at once, as the exception documented). s.mu held.
func (h *HotSet) holdEvictedLocked(s *shard, e *entry, hold uint32) bool {
	kr, ok := s.keyed[e]
	if !ok || h.evictedBytes.Load() > h.backlogLimit/2 {
		return false
	}
	return h.keyedFrom(kr, hold) != 0
}

// writeBack writes a batch of dirty entries; with upTo, batch[i] only if
// its journal ends at upTo[i] (it is left dirty otherwise). A user with a
// keyed call's journal record made less than hold milliseconds ago (see
// clock), or, for a hold, one whose answer the API's log of answers has
// not written (SetAnswerLog), keeps its journal from its first such record
// on, and stays dirty for another round: the record holds the call's
// answer until the log does, whatever the age of the user's earlier
// changes, which make it due. An evicted
// user is so held only while the evicted users take at most half the
// backlog, and keeps its keyed record: the rounds leave it until the hold
// is over (holdEvictedLocked). It returns how many of batch had changes
// to write (written or not). flushMu held.
func (h *HotSet) writeBack(batch []*entry, upTo []uint64, hold uint32) (int, error) {
	now := h.opts.Now()
	writes, taken, sinces := h.writes[:0], h.taken[:0], h.sinces[:0]
	var encodeErrs []error
	for i, e := range batch {
		e.mu.Lock()
		if upTo != nil && e.dirty() && e.lastSeq != upTo[i] {
			e.mu.Unlock() // still on its shard's dirty list
			continue
		}
		if !e.dirty() {
			// Nothing to write. An evicted entry kept for a call that was
			// using it (see trimLocked) is let go here, unless this batch
			// writes it (it was listed twice, as queued and as evicted):
			// then once that write lands.
			k := h.keyOf(e)
			s := h.shardOf(k)
			s.mu.Lock()
			if e.flags&flagWriting == 0 {
				h.letGoLocked(s, k, e)
			}
			s.mu.Unlock()
			e.mu.Unlock()
			continue
		}
		raw, err := h.encode(e, now)
		if err != nil {
			// Not written: it stays dirty and goes back on its shard's
			// dirty list; the rest of the batch is written all the same.
			s := h.shardOf(h.keyOf(e))
			s.mu.Lock()
			h.markDirtyLocked(s, e)
			s.mu.Unlock()
			e.mu.Unlock()
			encodeErrs = append(encodeErrs, fmt.Errorf("encoding %s/%s: %w", h.infoOf(e).Name, e.id(), err))
			continue
		}
		k := h.keyOf(e)
		s := h.shardOf(k)
		s.mu.Lock()
		if size := entrySize(e); size != e.bytes {
			// encode dropped the buckets past the window: their memory
			// leaves the budget's count, as after a call that drops some.
			h.accountLocked(s, k, e, size)
		}
		// Reachable until the write lands, though clean from here on (see
		// flagWriting).
		e.flags |= flagWriting
		covered, held := e.lastSeq, false
		if kr, ok := s.keyed[e]; ok {
			cur, ok := s.lru.Peek(k)
			hot := ok && cur == e
			from := h.keyedFrom(kr, hold)
			held = from != 0 && (hot || h.evictedBytes.Load() <= h.backlogLimit/2)
			switch {
			case !held:
				delete(s.keyed, e)
			case hot:
				// The next keyed call starts the records of the next
				// write-back; those left are kept in mind until their
				// hold is over, for an eviction before it (see
				// holdEvictedLocked).
				last, mark := kr.at, kr.mark
				if kr.seq == 0 {
					last, mark = kr.heldAt, kr.heldMark
				}
				s.keyed[e] = keyedRecord{heldSeq: from, heldAt: last, heldMark: mark}
			}
			// An evicted user held keeps them all: the rounds leave it in
			// memory until its hold is over (see holdEvictedLocked).
			if held {
				covered = from - 1
			}
		}
		writes = append(writes, storage.Write{NS: h.infoOf(e).Name, User: e.id(), Value: raw,
			UpTo: covered, TTL: ttlOf(&e.f, now), Empty: gone(&e.f, now), Writer: h.writer})
		// Clean from here on: a call that changes it again marks it dirty
		// again and is journalled past UpTo. One whose keyed records are
		// held is dirty again, from now: the next round due for it
		// retires them, a flush interval after the last.
		sinces = append(sinces, e.dirtySince.Load())
		h.markClean(e)
		if held {
			h.markDirtyLocked(s, e)
		}
		s.mu.Unlock()
		taken = append(taken, e)
		e.mu.Unlock()
	}
	// The store is done with the values once WriteBack returns: the next
	// batch encodes into the same buffer.
	defer func() {
		h.encoded = h.encoded[:0]
		if cap(h.encoded) > maxKeptEncoded {
			h.encoded = nil
		}
		clear(writes)
		clear(taken)
		h.writes, h.taken, h.sinces = writes[:0], taken[:0], sinces[:0]
	}()
	if len(writes) == 0 {
		return len(encodeErrs), errors.Join(encodeErrs...)
	}
	err := h.storeWriteBack(writes)
	failedAll := err != nil
	failed := map[string]bool{}
	if err != nil {
		h.storageErrors.Add(1)
		var wbe *storage.WriteBackError
		if errors.As(err, &wbe) {
			failedAll = false
			for _, u := range wbe.Failed {
				failed[u.NS+"\x00"+u.User] = true
			}
		}
	}
	// Users not written stay dirty and are retried at the next write-back;
	// written ones that were evicted meanwhile are let go.
	for i, e := range taken {
		e.mu.Lock()
		k := h.keyOf(e)
		s := h.shardOf(k)
		s.mu.Lock()
		e.flags &^= flagWriting
		if failedAll || failed[h.infoOf(e).Name+"\x00"+e.id()] {
			h.markDirtyLocked(s, e)
			f, ok := s.failed[e]
			if !ok || f.at != sinces[i] { // not failed since its last write
				f.since = sinces[i]
			}
			f.at = e.dirtySince.Load()
			if s.failed == nil {
				s.failed = map[*entry]failedWrite{}
			}
			s.failed[e] = f
		} else if e.lastSeq == writes[i].UpTo {
			// Nothing journalled since the snapshot: no entry is left to
			// cover, and the next write-back need not look for any. Had
			// there been one, lastSeq would have grown past UpTo and the
			// next write-back's UpTo covers it and those before.
			e.lastSeq = 0
		}
		if f, ok := s.failed[e]; ok && e.dirtySince.Load() != f.at {
			delete(s.failed, e) // written
		}
		if !e.dirty() {
			h.letGoLocked(s, k, e)
			if writes[i].Empty && e.lastSeq == 0 {
				// Gone, and written so: it leaves the cache too. A call
				// holding it looks the user up again (reachLocked).
				h.dropGoneLocked(s, k, e)
			}
		}
		s.mu.Unlock()
		e.mu.Unlock()
	}
	if !failedAll {
		h.flushedUsers.Add(uint64(len(writes) - len(failed)))
	}
	return len(writes) + len(encodeErrs), errors.Join(append(encodeErrs, err)...)
}

// encode appends e's filter, expired as of now, to h.encoded and returns
// its bytes. e.mu and flushMu held.
func (h *HotSet) encode(e *entry, now time.Time) (raw []byte, err error) {
	defer h.recovered(&err, "encoding", h.infoOf(e).Name, e.id())
	e.f.Expire(now)
	start := len(h.encoded)
	encoded, err := appendFilter(&e.f, h.encoded)
	if err != nil {
		return nil, err
	}
	h.encoded = encoded
	return encoded[start:len(encoded):len(encoded)], nil // the next user's bytes go after, never into it
}

// appendFilter is the filter's encoder; tests replace it to meet a bug.
var appendFilter = (*userfilter.Filter).AppendBinary

// storeWriteBack writes a batch. A panic in the store fails the whole batch
// (its users stay dirty and are retried); one in a user's merge fails that
// user only (h.merge, storage.Store.WriteBack).
func (h *HotSet) storeWriteBack(writes []storage.Write) (err error) {
	defer h.recovered(&err, "writing back the batch of", writes[0].NS, writes[0].User)
	return h.store.WriteBack(writes, h.merge)
}

// merge is the write-back's merge: a panic in it (a bug met by one user's
// stored bytes) is counted and logged with the hot set's others, and the
// store fails that user's write-back only, naming the user.
func (h *HotSet) merge(stored, value []byte) (out []byte, err error) {
	defer h.recovered(&err, "merging into the stored filter", "", "")
	return mergeFilters(stored, value)
}

// mergeFilters is MergeFilters; tests replace it to meet a bug.
var mergeFilters = MergeFilters

// maxKeptEncoded is the largest write-back buffer kept for the next batch.
const maxKeptEncoded = 4 << 20

// maxKeptDue is the longest list of due users kept for the next round: a
// burst of dirty users is not memory kept for good.
const maxKeptDue = 4096

// MergeFilters is the storage.MergeFunc of write-back: it ORs a filter
// about to be written into the stored one, so a second writer or a
// replayed journal never rolls a user back. A corrupt stored value, or one
// built with other parameters (the user was erased or replaced since),
// gives way to the new value.
func MergeFilters(stored, value []byte) ([]byte, error) {
	return mergeDecoded(stored, value, false)
}

// MergeRestored is the storage.MergeFunc of a merging restore: as
// MergeFilters, but a stored filter built with other parameters than the
// backup's (its user erased, replaced by an import, or gone and made anew
// with a changed profile since the backup was taken, or the backup another
// service's) does not give way: the two cannot be ORed, and either one
// alone would lose the other's items, so the user is refused with an error
// wrapping userfilter.ErrIncompatible and keeps its stored filter, unless
// one of the two holds no item now, when the other is taken.
func MergeRestored(stored, value []byte) ([]byte, error) {
	return mergeDecoded(stored, value, true)
}

func mergeDecoded(stored, value []byte, restoring bool) ([]byte, error) {
	old, err := userfilter.Decode(stored)
	if err != nil {
		// A corrupt stored value is replaced by the good one in memory.
		return value, nil
	}
	cur, err := userfilter.Decode(value)
	if err != nil {
		return nil, err
	}
	if !cur.Compatible(old) {
		if !restoring {
			// The user was re-created with a new profile (after an erase
			// or a replace import): what is in memory is the truth.
			return value, nil
		}
		now := time.Now()
		switch {
		case old.Empty(now):
			return value, nil
		case cur.Empty(now):
			return stored, nil
		}
		return nil, fmt.Errorf("%w: the backup's filter and the stored one (made anew since, or of another service) cannot be merged, "+
			"so the stored one is kept (the backup's against the stored one's: %s)", userfilter.ErrIncompatible, cur.Profile().Differences(old.Profile()))
	}
	if p := cur.Profile(); p.Window > 0 {
		// Buckets past the window of the newer of the two, as of its
		// newest bucket, are past it now too: merged back in, they were
		// stored again at every write-back, the user's value growing by a
		// bucket each granularity for as long as it was written, and
		// never covered by what is in memory, where they are gone.
		newest := cur.ExpiresAt()
		if e := old.ExpiresAt(); e.After(newest) {
			newest = e
		}
		if !newest.IsZero() {
			at := newest.Add(-p.Window - p.Granularity) // the newest bucket's start
			cur.Expire(at)
			old.Expire(at)
		}
	}
	if cur.Covers(old) {
		// The usual case: what is stored is an earlier state of what is in
		// memory. The union is value itself: no merge, no second encoding.
		return value, nil
	}
	if err := cur.Merge(old); err != nil {
		return nil, err
	}
	return cur.MarshalBinary()
}

// leveled is a Store whose LSM levels Stats reports.
type leveled interface {
	Levels() []storage.LevelStats
}

// journalLister is what Recover needs of the store beyond Store.
type journalLister interface {
	JournalUsers(fn func(ns, user string) error) error
}

// Recover folds every pending journal (left by a crash, or brought by a
// restored backup) into its user's filter and writes them back, so the
// journal does not wait for each user's next call; a user a call has
// changed meanwhile is left to the write-back loop (see writeBackFolded).
// Users of namespaces no
// longer configured are left as they are. Ready reports true once it has
// run. It returns how many users' journals it folded in.
func (h *HotSet) Recover() (users int, err error) {
	defer h.ready.Store(true)
	jl, ok := h.store.(journalLister)
	if !ok {
		return 0, nil
	}
	var errs []error
	loaded := make([]*entry, 0, writeBatch)
	upTo := make([]uint64, 0, writeBatch)
	fold := func() {
		if err := h.writeBackFolded(loaded, upTo); err != nil {
			errs = append(errs, err)
		}
		loaded, upTo = loaded[:0], upTo[:0]
	}
	err = jl.JournalUsers(func(ns, user string) error {
		info, err := h.namespace(ns)
		if err != nil {
			return nil
		}
		e, hot, _, err := h.acquireNew(info, user, false, false)
		if errors.Is(err, ErrUserNotFound) {
			// Nothing left to fold in: its journal expired (past its
			// window) or a call erased the user since the listing.
			return nil
		}
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if !hot {
			// A user a call loaded first has its journal folded in
			// already, and maybe that call's record too: the write-back
			// loop writes it.
			loaded, upTo = append(loaded, e), append(upTo, e.lastSeq)
		}
		h.release(e, false)
		if users++; len(loaded) == writeBatch {
			fold()
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	fold()
	return users, joinFew(errs)
}

// writeBackFolded writes back the users Recover loaded (loaded[i] with its
// journal ending at upTo[i]), but those a call has changed since: the
// call's journal record, which keeps a keyed call's answer, is left to the
// write-back loop, whose wait (Options.FlushInterval) lets the API's log of
// answers keep the answer first. Written back at once, the record was
// erased with the answer still in memory only, and a crash then gave the
// call's retry the next items instead of its answer.
func (h *HotSet) writeBackFolded(loaded []*entry, upTo []uint64) error {
	if len(loaded) == 0 {
		return nil
	}
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	defer h.flushed()
	dirty, err := h.writeBack(loaded, upTo, 0)
	if dirty > 0 {
		h.flushes.Add(1)
	}
	return err
}
