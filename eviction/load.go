package eviction

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// acquire returns the user's entry locked, loading it if it is cold. A user
// with nothing stored gets an empty filter if create, else ErrUserNotFound.
// hot says whether the user was in memory already.
func (h *HotSet) acquire(info *nsInfo, user string, create bool) (e *entry, hot bool, err error) {
	e, hot, _, err = h.acquireNew(info, user, create, true)
	return e, hot, err
}

// acquireNew is acquire that also says whether it made the user anew
// (nothing stored, or what was is gone). It counts no new user: the
// caller does once its change is kept, so that a call refused after
// (a full disk, a key reused, an import that does not fit) counts none.
// It counts a hit, a miss or a call for a user with no history (countCold)
// if call: each is a call's, and the ratio tells whether the budget holds
// the users called (Recover calls nothing, a keyed batch's call was
// counted as CheckCallKeys looked, and reading a user, User or Export, is
// no call).
func (h *HotSet) acquireNew(info *nsInfo, user string, create, call bool) (e *entry, hot, created bool, err error) {
	k0 := h.key(info, user, 0)
	s := h.shardOf(k0)
	for {
		s.mu.Lock()
		sl, err := h.slotLocked(s, info, user, k0)
		if err != nil {
			s.mu.Unlock()
			return nil, false, false, err
		}
		if e := sl.e; e != nil {
			s.mu.Unlock()
			// Lock order is entry before shard. Once e.mu is held, e is
			// either still in the shard (hot, or evicted and taken back
			// here) or let go, and then looked up again: a user is never
			// served by an entry the shard no longer reaches, so no second
			// copy is ever loaded beside one that holds changes.
			e.mu.Lock()
			if h.reachLocked(s, sl.k, e) {
				if call {
					info.c.hits.Add(1)
				}
				if create && e.f.Profile().Window > 0 && gone(&e.f, h.opts.Now()) { // no clock read without a window
					// A gone user comes back as a new one, with the
					// namespace's profile, as from the store (below).
					if f, err := userfilter.New(info.Profile); err == nil {
						e.f.Replace(f)
						created = true
					}
				}
				return e, true, created, nil
			}
			e.mu.Unlock()
			continue
		}
		if lc := sl.lc; lc != nil {
			s.mu.Unlock()
			<-lc.done
			if lc.err != nil && (!errors.Is(lc.err, ErrUserNotFound) || !create) {
				return nil, false, false, lc.err
			}
			continue
		}
		lc := h.claimLocked(s, sl, info, user)
		gen := info.c.purges.Load() // under s.mu: see PurgeNamespace
		s.mu.Unlock()
		h.waitBacklog()

		f, lastSeq, err := h.load(info, user)
		if call {
			countCold(info.c, f, err, h.opts.Now)
		}
		if err == nil && f != nil && lastSeq == 0 && gone(f, h.opts.Now()) {
			f = nil // nothing of it to write back either
		}
		if err == nil && create && (f == nil || gone(f, h.opts.Now())) {
			// A gone user comes back as a new one, with the namespace's
			// profile; a journal it had is retired at its next write-back.
			f, err = userfilter.New(info.Profile)
			created = err == nil
		}
		s.mu.Lock()
		delete(s.loading, sl.k)
		if err == nil && purgedSince(info, gen) {
			// What was read may be what the purge erased since.
			err = errPurged(info)
		}
		if err != nil || f == nil {
			if err == nil {
				err = ErrUserNotFound
			}
			lc.err = err
			s.mu.Unlock()
			close(lc.done)
			return nil, false, false, err
		}
		e = newEntry(info.index, user)
		e.f.Replace(f)
		e.lastSeq, e.probe = lastSeq, sl.probe
		e.mu.Lock()
		if lastSeq > 0 {
			// The journal is folded into the filter at the next write-back.
			h.markDirtyLocked(s, e)
		}
		h.insertLocked(s, sl.k, e)
		evicted := h.trimLocked(s, e)
		s.mu.Unlock()
		close(lc.done)
		h.afterEvict(e, evicted)
		return e, false, created, nil
	}
}

// load reads a cold user: the stored filter plus the journal not yet folded
// into it, and the highest sequence number of that journal (0: none). A nil
// filter with no error means nothing is stored (or a gone filter, see
// gone, with no journal). A journal replayed may leave a gone filter,
// returned so that a write-back retires the journal.
func (h *HotSet) load(info *nsInfo, user string) (f *userfilter.Filter, lastSeq uint64, err error) {
	// A panic here would leave the user's load claimed and every later call
	// of theirs waiting for it: it fails this load instead.
	defer h.recovered(&err, "loading", info.Name, user)
	info.c.loads.Add(1)
	raw, journal, err := h.store.Load(info.Name, user)
	if err != nil {
		h.storageErrors.Add(1)
		if errors.Is(err, storage.ErrCorrupt) {
			// Damaged on disk (its checksum fails): this user's fault
			// alone, as a filter that does not decode, and no retry
			// reads it whole.
			return nil, 0, fmt.Errorf("%w: %s/%s: %w", ErrCorrupt, info.Name, user, err)
		}
		return nil, 0, fmt.Errorf("%w: loading %s/%s: %w", ErrStorage, info.Name, user, err)
	}
	now := h.opts.Now()
	if raw != nil {
		f, err = userfilter.Decode(raw)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %s/%s: %w", ErrCorrupt, info.Name, user, err)
		}
		if gone(f, now) {
			// Gone: as if nothing were stored. A journal newer than it
			// starts the user again, with the profile it names.
			f = nil
		}
	}
	if len(journal) == 0 {
		return f, 0, nil
	}
	recs := make([]journalRecord, len(journal))
	for i, j := range journal {
		if recs[i], err = decodeJournal(j.Value); err != nil {
			return nil, 0, fmt.Errorf("%w: journal of %s/%s: %w", ErrCorrupt, info.Name, user, err)
		}
	}
	made := -1 // the record whose profile f was made with
	if f == nil {
		// Never stored: made with the profile its journal names (the
		// namespace's may have changed since), or, for records of builds
		// that named none, the namespace's.
		if f, made, err = madeAnew(recs, info.Profile, func(made []byte) (*userfilter.Filter, error) {
			return decodeMade(info, user, made)
		}); err != nil {
			return nil, 0, err
		}
	}
	// Each record is added back as its call added it: the filter expired
	// as of the call, as its Select expired it, and the items it holds
	// counted then against the cap. Buckets past the window would count
	// against maxEncoded and could refuse an item its call recorded; and
	// counted as of now, with buckets gone since, the cap would leave room
	// the call did not have, and the items it refused would take the room
	// the calls after it had filled, moving where those items went. A
	// record that notes the room the cap left its call is let in that
	// much: the earlier records the cap counted may have expired.
	f, err = replayJournal(f, recs, made, h.maxEncoded, func(made []byte) (*userfilter.Filter, error) {
		return decodeMade(info, user, made)
	})
	if err != nil {
		return nil, 0, err
	}
	for i, rec := range recs {
		if rec.reply != nil {
			rec.reply.ns, rec.reply.user = info.index, strings.Clone(user) // user may alias a request's buffer
			h.replies.keep(rec.reply, now)
		}
		lastSeq = max(lastSeq, journal[i].Seq)
	}
	f.Expire(now)
	return f, lastSeq, nil
}

// madeAnew returns the filter a user's records start from when nothing of
// the user is stored, or what is is gone: an empty filter of the profile
// the first record naming one names (decoded by decodeMade), and that
// record's index; or, for records of builds that named none, an empty
// filter of p, and -1.
func madeAnew(recs []journalRecord, p userfilter.Profile, decodeMade func([]byte) (*userfilter.Filter, error)) (*userfilter.Filter, int, error) {
	made := slices.IndexFunc(recs, func(r journalRecord) bool { return r.made != nil })
	if made < 0 {
		f, err := userfilter.New(p)
		return f, made, err
	}
	f, err := decodeMade(recs[made].made)
	return f, made, err
}

// replayJournal adds each of recs back onto f as its call added it (see
// load) and returns the filter, which a record whose call found the user
// gone makes anew with decodeMade, unless it is recs[made], the record f
// was made from (-1: none).
func replayJournal(f *userfilter.Filter, recs []journalRecord, made, maxEncoded int, decodeMade func([]byte) (*userfilter.Filter, error)) (*userfilter.Filter, error) {
	for i, rec := range recs {
		f.Expire(rec.at)
		if rec.made != nil && i != made && gone(f, rec.at) {
			// The call found the user gone and made it anew, with the
			// profile the record names (see HotSet.journal).
			var err error
			if f, err = decodeMade(rec.made); err != nil {
				return nil, err
			}
		}
		f.AddHashes(rec.hashes, rec.at, rec.at, maxEncoded, rec.room)
	}
	return f, nil
}

// FoldJournal returns the storage.FoldFunc of a merging restore into a
// store whose values hold at most maxEncoded bytes (its MaxValueBytes):
// it adds a user's journal records back onto the stored filter as a load
// does, so that the merge takes in the filter the user's calls ran on.
// The stored filter of a gone user (one that never recorded, say) is set
// aside for one made from the records, as a load sets it aside: the calls
// found the user never seen and ran on a filter made anew. Records of
// builds that named no profile start from an empty filter of the stored
// one's profile (a load, from the namespace's, which a fold does not know).
func FoldJournal(maxEncoded int64) storage.FoldFunc {
	limit := int(min(maxEncoded, math.MaxInt))
	return func(stored []byte, journal []storage.JournalEntry) ([]byte, error) {
		f, err := userfilter.Decode(stored)
		if err != nil {
			return nil, err
		}
		recs := make([]journalRecord, len(journal))
		for i, j := range journal {
			if recs[i], err = decodeJournal(j.Value); err != nil {
				return nil, err
			}
		}
		made := -1
		if gone(f, time.Now()) {
			if f, made, err = madeAnew(recs, f.Profile(), userfilter.Decode); err != nil {
				return nil, err
			}
		}
		f, err = replayJournal(f, recs, made, limit, userfilter.Decode)
		if err != nil {
			return nil, err
		}
		return f.AppendBinary(nil)
	}
}

// decodeMade decodes the profile a journal record of the user names: an
// empty filter of it.
func decodeMade(info *nsInfo, user string, made []byte) (*userfilter.Filter, error) {
	f, err := userfilter.Decode(made)
	if err != nil {
		return nil, fmt.Errorf("%w: journal of %s/%s: its profile: %w", ErrCorrupt, info.Name, user, err)
	}
	return f, nil
}
