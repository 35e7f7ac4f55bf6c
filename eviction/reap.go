package eviction

import "time"

// The reaper takes out of the cache the clean hot users of windowed
// filters whose items have all left the window (gone, see gone) and that
// no call looks up, which would otherwise count among the hot users and
// bytes until the LRU evicted them. It does what a look-up of such a user
// does (dropGone): a clean user's stored value expires with its items and
// covers its journal, so nothing of it comes back after a restart; a dirty
// one is left to its write-back, which writes it Empty and drops it.
//
// Each shard lists the keys of its hot windowed users (reap): a key is
// added when its user enters the LRU (a load, or an evicted user taken
// back), never on a hit, so the one call's path pays nothing for it. Each
// round of the write-back loop looks at the next few keys of each shard
// (reapSlice, plus as many as were added since, within reapMaxSlice)
// under the shard's lock, and takes out of the list the keys of users
// gone, evicted or no longer windowed. Keys rather than entries, so that the list keeps no evicted
// user's memory alive. A user evicted and loaded again before the reaper
// met its first key is listed twice; the pass parity (shard.reapPass,
// flagReapPass) tells the second copy, met in the same pass over the list,
// and drops it, so the list stays within the hot windowed users plus those
// added since the pass began.

// reapSlice is how many keys of each shard a round of the reaper looks at,
// besides those added since the last round, up to reapMaxSlice in all:
// microseconds under the shard's lock, every reapEvery (see flushLoop). A
// round over 200,000 hot windowed users took about 200 us
// (BenchmarkReapRound): every 100 ms, 0.2% of a core, and a pass over a
// million users about a minute and a half, for users whose window is
// hours or days. (Each write-back round, every 10 ms, took 2%.)
const (
	reapSlice    = 16
	reapMaxSlice = 16 * reapSlice
	reapEvery    = 100 * time.Millisecond
)

// reapListLocked lists k, the key of e, about to be or now in the LRU, for
// the reaper if e's filter has a window. e.mu (or e not yet shared) and
// s.mu held.
func (h *HotSet) reapListLocked(s *shard, k key, e *entry) {
	if e.f.Profile().Window == 0 {
		return
	}
	// Not met in the pass under way: its key is past the reaper's place.
	e.flags = e.flags&^flagReapPass | (s.reapPass ^ flagReapPass)
	s.reap = append(s.reap, k)
	s.reapPushed++
	h.reapKeys.Add(1)
}

// reapSome is one round of the reaper over every shard: as many keys as
// were listed since the last round, so that the list does not grow with
// loads, and those of users certainly evicted (the keys beyond the users
// in the shard, copies listed by loads of users evicted since); and, on a
// steady round (every reapEvery), reapSlice more, which moves the pass
// over the hot windowed users on. No lock held.
func (h *HotSet) reapSome(steady bool) {
	if h.reapKeys.Load() == 0 {
		return
	}
	now := h.opts.Now()
	for _, s := range h.shards {
		s.mu.Lock()
		n := s.reapPushed + max(len(s.reap)-s.lru.Len(), 0)
		if steady {
			n += reapSlice
		}
		if n > 0 {
			h.reapLocked(s, now, min(n, reapMaxSlice))
		}
		s.reapPushed = 0
		s.mu.Unlock()
	}
}

// reapLocked looks at the next n keys of the shard's reap list (see
// reapSome) and takes out of the cache the users they find gone as of
// now. s.mu held.
func (h *HotSet) reapLocked(s *shard, now time.Time, n int) {
	for ; n > 0 && len(s.reap) > 0; n-- {
		if s.reapAt >= len(s.reap) {
			// A pass ends: every key is unmet in the next.
			s.reapAt = 0
			s.reapPass ^= flagReapPass
		}
		k := s.reap[s.reapAt]
		e, ok := s.lru.Peek(k)
		if !ok || e.flags&flagReapPass == s.reapPass {
			h.unlistLocked(s) // evicted or forgotten, or a second copy
			continue
		}
		e.flags ^= flagReapPass // met in this pass
		// Lock order is entry before shard: a user held by a call is not
		// waited for, and is looked at again in the next pass.
		if !e.mu.TryLock() {
			s.reapAt++
			continue
		}
		windowed := e.f.Profile().Window > 0
		drop := windowed && !e.dirty() && e.lastSeq == 0 && e.flags&flagWriting == 0 && gone(&e.f, now)
		if drop {
			h.dropGoneLocked(s, k, e)
		}
		e.mu.Unlock()
		if drop || !windowed {
			h.unlistLocked(s)
			continue
		}
		s.reapAt++
	}
	if c := cap(s.reap); c > minQueueCap && len(s.reap) < c/4 {
		// A burst of loads is not memory kept for good.
		s.reap = append(make([]key, 0, max(2*len(s.reap), minQueueCap)), s.reap...)
	}
}

// unlistLocked takes the key at the reaper's place out of the shard's
// reap list; the last key takes its place. s.mu held.
func (h *HotSet) unlistLocked(s *shard) {
	last := len(s.reap) - 1
	s.reap[s.reapAt] = s.reap[last]
	s.reap = s.reap[:last]
	h.reapKeys.Add(-1)
}
