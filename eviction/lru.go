package eviction

import (
	"math"
)

// dropGoneLocked takes e, a gone user's clean entry, out of the cache if
// it is there (as Forget does): it answers as a user never seen, so it
// neither counts as hot nor takes budget. e.mu and s.mu held.
func (h *HotSet) dropGoneLocked(s *shard, k key, e *entry) {
	if cur, ok := s.lru.Peek(k); ok && cur == e {
		h.removeLocked(s, k, e)
	}
}

// reachLocked reports whether e is still the shard's entry for k, taking
// it back into the LRU if it was evicted and not yet let go. e.mu held;
// takes s.mu.
func (h *HotSet) reachLocked(s *shard, k key, e *entry) bool {
	s.mu.Lock()
	if cur, ok := s.lru.Peek(k); ok && cur == e {
		s.mu.Unlock()
		return true
	}
	// Its write-back may be under way: what it holds is the truth all the
	// same (waiting for the write would spin), and write-back leaves an
	// entry taken back alone. Its keyed records come back with it.
	kr, keyed := s.keyed[e]
	if !h.letGoLocked(s, k, e) {
		s.mu.Unlock()
		return false
	}
	if keyed {
		s.keyed[e] = kr
	}
	h.insertLocked(s, k, e)
	evicted := h.trimLocked(s, e)
	s.mu.Unlock()
	h.afterEvict(e, evicted)
	return true
}

// letGoLocked removes e from the shard's evicted map if it is there as
// the entry of k, and reports whether it was. s.mu held.
func (h *HotSet) letGoLocked(s *shard, k key, e *entry) bool {
	if cur, ok := s.evicted[k]; !ok || cur != e {
		return false
	}
	delete(s.evicted, k)
	delete(s.keyed, e)
	h.evictedBytes.Add(-int64(e.bytes))
	return true
}

// insertLocked adds e to the shard's LRU under k and accounts its bytes.
// e.mu (or e not yet shared) and s.mu held.
func (h *HotSet) insertLocked(s *shard, k key, e *entry) {
	h.reapListLocked(s, k, e)
	e.bytes = entrySize(e)
	s.lru.Add(k, e)
	s.bytes += int64(e.bytes)
	h.hotBytes.Add(int64(e.bytes))
	c := h.infoOf(e).c
	c.hotUsers.Add(1)
	c.hotBytes.Add(int64(e.bytes))
}

// trimLocked evicts least recently used users (never keep) while the shard
// is over its share of the budget and the whole set over the budget, and
// returns them. A shard may so hold more than its share while others hold
// less: one user larger than CacheBytes/Shards would otherwise evict every
// other user of its shard, and itself at the next load there, while the
// set is far under budget. afterEvict trims the shards over their share
// once the set is over budget, down to no user but keep, so that a budget
// of fewer users than shards holds too. An evicted user that may hold changes
// not yet written back (dirty, or in use by a call that may change it)
// moves to the shard's evicted map, where it stays reachable until written
// back: a call for the user takes it back instead of loading a second copy
// from storage, which could cover journal records the first copy holds
// before that copy is written. s.mu held.
func (h *HotSet) trimLocked(s *shard, keep *entry) []*entry {
	var out []*entry
	for s.bytes > s.budget && h.hotBytes.Load() > h.opts.CacheBytes {
		k, e, ok := s.lru.GetOldest()
		if !ok {
			break
		}
		if e == keep {
			if s.lru.Len() == 1 {
				break
			}
			s.lru.Get(k) // make it the newest; evict the next one
			continue
		}
		h.evictLocked(s, k, e)
		out = append(out, e)
	}
	return out
}

// evictLocked takes e, the shard's entry under k, out of the LRU. An entry
// that may hold changes not yet written back, or whose write-back is under
// way (flagWriting), moves to the shard's evicted map (see trimLocked).
// s.mu held.
func (h *HotSet) evictLocked(s *shard, k key, e *entry) {
	kr, keyed := s.keyed[e]
	h.removeLocked(s, k, e)
	h.infoOf(e).c.evictions.Add(1)
	// Not blocking on e.mu under s.mu (lock order is entry first): an
	// entry someone holds is kept reachable as if it were dirty, and
	// write-back lets it go once it finds it clean.
	idle := e.mu.TryLock()
	if !idle || e.dirty() || e.flags&flagWriting != 0 {
		s.evicted[k] = e
		h.evictedBytes.Add(int64(e.bytes))
		if keyed {
			s.keyed[e] = kr // see flushSome
		}
	}
	if idle {
		e.mu.Unlock()
	}
}

// removeLocked takes e, the shard's entry under k, out of the LRU and
// out of its namespace's figures. s.mu held.
func (h *HotSet) removeLocked(s *shard, k key, e *entry) {
	s.lru.Remove(k)
	// A user erased has no keyed record left; evictLocked keeps those of
	// one evicted for its write-back.
	delete(s.keyed, e)
	s.bytes -= int64(e.bytes)
	h.hotBytes.Add(-int64(e.bytes))
	c := h.infoOf(e).c
	c.hotUsers.Add(-1)
	c.hotBytes.Add(-int64(e.bytes))
}

// afterEvict runs after a shard took a user in or let one grow (keep), with
// the users that shard evicted: while the set is still over budget, the
// shards holding more than their share evict their least recently used
// (never keep, the user just called); then a write-back round is asked for
// when evicted users waiting for one take more than backlogLimit. No lock
// held.
func (h *HotSet) afterEvict(keep *entry, evicted []*entry) {
	evicted = h.sweep(keep, evicted)
	if len(evicted) > 0 && h.evictedBytes.Load() > h.backlogLimit {
		h.kickFlush()
	}
}

// sweep makes the shards over their share evict, down to no user but
// keep, while the set is over budget, and returns evicted with the users
// they evicted. One call sweeps at a time: another that finds the set over
// budget meanwhile does not wait, and the sweeper looks at the total again
// once it lets go (as long as its sweep freed something), so an insert made
// while it swept is not left over budget; the write-back loop's rounds
// sweep too (see flushLoop). No lock held.
func (h *HotSet) sweep(keep *entry, evicted []*entry) []*entry {
	for h.hotBytes.Load() > h.opts.CacheBytes && h.sweepMu.TryLock() {
		// Each sweep starts one shard further on, so none is the first
		// to give users up every time.
		before := len(evicted)
		first := h.sweepNext
		h.sweepNext = (first + 1) % len(h.shards)
		for i := range h.shards {
			if h.hotBytes.Load() <= h.opts.CacheBytes {
				break
			}
			s := h.shards[(first+i)%len(h.shards)]
			s.mu.Lock()
			evicted = append(evicted, h.trimLocked(s, keep)...)
			s.mu.Unlock()
		}
		h.sweepMu.Unlock()
		if len(evicted) == before {
			break // no user left to evict but keep
		}
	}
	return evicted
}

// release unlocks e after a call, marking it dirty if it changed and
// re-accounting its size.
func (h *HotSet) release(e *entry, changed bool) { h.releaseSized(e, changed, changed) }

// releaseSized is release that re-accounts e's size when resized too,
// changed or not: a call that records nothing may still have dropped the
// buckets past the window (Filter.Expire), which are memory no longer held.
func (h *HotSet) releaseSized(e *entry, changed, resized bool) { h.releaseCall(e, changed, resized, 0) }

// keyedRecord is what the write-back needs to know of a user's journal
// records that carry keyed calls' answers (see writeBack): the sequence
// number of the first since its last write-back, and the clock (see
// clock) and the answer log's mark (see AnswerLog) of the last; and, if
// that write-back left some in the journal (held), the first of those and
// the clock and mark of their last, so that the user, evicted before the
// next round, still keeps them for the hold.
type keyedRecord struct {
	seq, heldSeq   uint64
	at, heldAt     uint32
	mark, heldMark uint64
}

// from returns the sequence number of the first record to leave in the
// journal at clock now for a hold of hold milliseconds, with the answers
// of the records of marks below written in the API's log (see
// answersWritten): that of the first of the records whose last is that
// recent or has its answer not yet written (0: none). The difference of
// clocks holds across the clock's wrap.
func (kr keyedRecord) from(now, hold uint32, written uint64) uint64 {
	held := func(at uint32, mark uint64) bool { return now-at < hold || mark >= written }
	switch {
	case kr.heldSeq != 0 && held(kr.heldAt, kr.heldMark):
		return kr.heldSeq
	case kr.seq != 0 && held(kr.at, kr.mark):
		return kr.seq
	}
	return 0
}

// releaseCall is releaseSized for a call whose journal record of sequence
// number keyed (0: none) carries a keyed call's answer.
func (h *HotSet) releaseCall(e *entry, changed, resized bool, keyed uint64) {
	if !changed && !resized && keyed == 0 {
		e.mu.Unlock()
		return
	}
	k := h.keyOf(e)
	s := h.shardOf(k)
	size := entrySize(e)
	s.mu.Lock()
	if changed {
		h.markDirtyLocked(s, e)
	}
	if keyed != 0 {
		// Hot users, and evicted ones still reached: removeLocked
		// forgets an erased one's.
		if cur, ok := s.lru.Peek(k); (ok && cur == e) || s.evicted[k] == e {
			kr := s.keyed[e]
			if kr.seq == 0 {
				kr.seq = keyed
			}
			kr.at, kr.mark = h.clock(), h.answerMark()
			s.keyed[e] = kr
		}
	}
	// Accounted before e.mu is let go, so sizes are applied in the order
	// of the user's changes: applied after it, a call's size could land
	// after a later call's, leaving the user accounted at its older size.
	h.accountLocked(s, k, e, size)
	evicted := h.trimLocked(s, e)
	s.mu.Unlock()
	e.mu.Unlock()
	h.afterEvict(e, evicted)
}

// resize accounts e, the entry of key k of shard s, at size bytes if it is
// still hot, and evicts as its growth makes the budget ask. e.mu held;
// takes s.mu.
func (h *HotSet) resize(s *shard, k key, e *entry, size int32) {
	s.mu.Lock()
	h.accountLocked(s, k, e, size)
	evicted := h.trimLocked(s, e)
	s.mu.Unlock()
	h.afterEvict(e, evicted)
}

// accountLocked accounts e, the entry of key k of shard s, at size bytes
// if it is still hot. e.mu and s.mu held.
func (h *HotSet) accountLocked(s *shard, k key, e *entry, size int32) {
	if cur, ok := s.lru.Peek(k); ok && cur == e && size != e.bytes {
		grow := size - e.bytes
		e.bytes = size
		s.bytes += int64(grow)
		h.hotBytes.Add(int64(grow))
		h.infoOf(e).c.hotBytes.Add(int64(grow))
	}
}

// entrySize is what e is accounted for. e.mu held (or e not yet shared).
func entrySize(e *entry) int32 {
	return int32(min(e.f.MemoryBytes()+entryOverhead+len(e.id()), math.MaxInt32))
}
