package eviction

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// Forget erases the user from the hot set, the journal and the store. A
// write-back running concurrently cannot bring it back.
func (h *HotSet) Forget(ns, user string) error {
	_, err := h.ForgetThen(ns, user, nil)
	return err
}

// ForgetThen is Forget calling then (if not nil) once the user is erased,
// before any call can load it afresh: every keyed call that held the
// erased user has set its CallKey.Began by then, and one that has not
// makes its call on the user the erase leaves. It reports whether there
// was anything of the user to erase, as the erase found it (a look before
// it may be out of date by then): items in memory or changes not yet
// written back, or a filter or journal records stored, those of items
// that have all left a window, or that cannot be read, included.
func (h *HotSet) ForgetThen(ns, user string, then func()) (had bool, err error) {
	info, err := h.namespace(ns)
	if err != nil {
		return false, err
	}
	defer h.lockForChange()()
	held, had, err := h.takeUser(info, user)
	if err != nil {
		return false, err
	}
	if !had {
		// What a load would read; with the load slot held, no call adds
		// to it meanwhile.
		had = h.storedAny(info, user)
	}
	err = h.deleteStored(info, user)
	if err != nil {
		h.storageErrors.Add(1)
		err = h.storageErr(err, "erasing", info.Name, user)
	}
	if err == nil {
		// Before the load slot goes: a keyed call's retry waiting for it
		// must not find the erased user's answer.
		h.replies.erase(info.index, user)
		if then != nil {
			then()
		}
	}
	loadErr := err
	if err == nil {
		loadErr = ErrUserNotFound
	}
	h.releaseUser(held, loadErr)
	return had, err
}

// heldUser is a user's load slot, claimed by takeUser.
type heldUser struct {
	s  *shard
	k  key
	lc *loadCall
}

// takeUser claims the user's load slot, once a load of it in flight is
// over, and drops the user from memory (hot, or evicted and waiting for
// its write-back), clean: for a step that changes what is stored of the
// user without loading it (an erase, a replace of a user that cannot be
// read), so that no call reloads what it is about to change, nor a
// write-back writes the user over it, until releaseUser. It reports
// whether what it dropped held anything (items, or changes not written
// back). flushMu held (lockForChange), so no write-back is under way.
func (h *HotSet) takeUser(info *nsInfo, user string) (held heldUser, had bool, err error) {
	k0 := h.key(info, user, 0)
	s := h.shardOf(k0)
	var sl slot
	for {
		s.mu.Lock()
		if sl, err = h.slotLocked(s, info, user, k0); err != nil {
			s.mu.Unlock()
			return heldUser{}, false, err
		}
		if sl.lc == nil {
			break
		}
		s.mu.Unlock()
		<-sl.lc.done
	}
	var victims []*entry
	if e, ok := s.lru.Peek(sl.k); ok && e == sl.e {
		h.removeLocked(s, sl.k, e)
		victims = append(victims, e)
	}
	if e, ok := s.evicted[sl.k]; ok && e.ns == info.index && e.id() == user {
		h.letGoLocked(s, sl.k, e)
		victims = append(victims, e)
	}
	lc := h.claimLocked(s, slot{k: sl.k, probe: sl.probe}, info, user)
	s.mu.Unlock()
	now := h.opts.Now()
	for _, e := range victims {
		// Unreachable now: a call holding it looks the user up again.
		e.mu.Lock()
		had = had || e.dirty() || !e.f.Empty(now)
		h.markClean(e) // a queued entry that is clean is skipped by write-back
		e.mu.Unlock()
	}
	return heldUser{s: s, k: sl.k, lc: lc}, had, nil
}

// releaseUser lets go of the load slot takeUser claimed: the calls that
// waited for it fail with err, or (nil) look the user up again and load
// what is stored.
func (h *HotSet) releaseUser(held heldUser, err error) {
	held.s.mu.Lock()
	delete(held.s.loading, held.k)
	held.lc.err = err
	held.s.mu.Unlock()
	close(held.lc.done)
}

// storedAny reports whether the store holds a filter or journal records
// of the user, or may: a read that fails counts as something there.
func (h *HotSet) storedAny(info *nsInfo, user string) bool {
	var err error
	var stored bool
	func() {
		defer h.recovered(&err, "erasing", info.Name, user)
		raw, journal, lerr := h.store.Load(info.Name, user)
		stored, err = raw != nil || len(journal) > 0, lerr
	}()
	return stored || err != nil
}

// deleteStored deletes the user from the store. A panic in it fails the
// erase instead of leaving the user's load slot claimed.
func (h *HotSet) deleteStored(info *nsInfo, user string) (err error) {
	defer h.recovered(&err, "erasing", info.Name, user)
	return h.store.Delete(info.Name, user)
}

// Export returns the user's encoded filter (including unflushed changes), or
// ErrUserNotFound (also for a gone user, see gone). Like User, it counts no
// hit, miss or call for a user with no history.
func (h *HotSet) Export(ns, user string) ([]byte, error) {
	info, err := h.namespace(ns)
	if err != nil {
		return nil, err
	}
	e, _, _, err := h.acquireNew(info, user, false, false)
	if err != nil {
		return nil, err
	}
	defer h.release(e, false)
	if gone(&e.f, h.opts.Now()) {
		h.dropGone(e)
		return nil, ErrUserNotFound
	}
	return e.f.MarshalBinary()
}

// Import merges (or with replace, replaces) the user's filter with data
// from Export and writes it to the store before returning. Bad bytes, a
// filter whose bits would take more than maxBytes of memory, or one
// (merged with the user's) that would encode past what the store keeps for
// one user (both also wrapping userfilter.ErrTooLarge), or a filter of
// other parameters: an *ImportError (ErrBadImport), and nothing changes.
// A merge takes the parameters of the user's filter; a replace those too,
// or the namespace's profile. A filter that never recorded an item, or
// whose items have all left its window, makes no user (none is created, as
// none is by a call that records nothing),
// and without a window replaces no user's filter, which would leave a
// user with no history: an *ImportError (DELETE erases a user). With a
// window the user it replaces is gone, as when its items leave the window.
// It reports whether it wrote anything: false (and no error) for such a
// filter imported for a user with no history.
//
// A user of whom what is stored cannot be read (ErrCorrupt: a value the
// disk damaged, a journal record that does not decode) is replaced all the
// same, needing none of it, its journal records void as an erase voids
// them, in the one write of the filter (see replaceUnreadable); a merge
// into it fails with ErrCorrupt, there being nothing to merge into.
func (h *HotSet) Import(ns, user string, data []byte, replace bool, maxBytes int64) (imported bool, err error) {
	info, err := h.namespace(ns)
	if err != nil {
		return false, err
	}
	in, err := userfilter.DecodeWithin(data, maxBytes)
	if err != nil {
		return false, badImport(err, "the body is not a filter exported by seenapi (%s)", filterWords(err))
	}
	defer h.lockForChange()()
	ours := info.Profile.WithDefaults()
	created := false
	e, _, err := h.acquire(info, user, false)
	if replace && errors.Is(err, ErrCorrupt) {
		// What is stored of the user cannot be read, and a replace needs
		// none of it.
		err = h.replaceUnreadable(info, user, in, ours)
		return err == nil, importErr(err, false)
	}
	if err == nil && e.f.Profile().Window > 0 && gone(&e.f, h.opts.Now()) {
		// Gone, yet in memory or with journal records: a user with no
		// history, made anew with the namespace's profile as a call makes
		// it, whether it was found hot or cold.
		h.releaseRefused(e, false)
		err = ErrUserNotFound
	}
	if errors.Is(err, ErrUserNotFound) {
		// Checked before the user is created: a refused import changes nothing.
		if err := importable(info.Name, ours, ours, in.Profile(), replace); err != nil {
			return false, err
		}
		if raw, err := in.MarshalBinary(); err == nil {
			if err := h.storable(len(raw)); err != nil {
				return false, badImport(err, "%v", err)
			}
		}
		// The call's miss is counted: the second look counts none (it
		// reads the store again, another call may have made the user).
		e, _, created, err = h.acquireNew(info, user, true, false)
	}
	if err != nil {
		return false, err
	}
	// Deferred (see FilterAppend); a refused import leaves no user it made,
	// nor does one of no history.
	nothing := false
	defer func() {
		if err != nil || nothing {
			h.releaseRefused(e, false)
			return
		}
		if created {
			info.c.newUsers.Add(1)
		}
		h.release(e, false)
	}()
	if err := importable(info.Name, ours, e.f.Profile(), in.Profile(), replace); err != nil {
		return false, err
	}
	next := in
	if !replace {
		next = e.f.Clone()
		if err := next.Merge(in); err != nil {
			return false, badImport(err, "the filter does not merge with the user's: %s", filterWords(err))
		}
	}
	now := h.opts.Now()
	// Of no history: it never recorded, or (with a window) its items have
	// all left the window since it was exported.
	if gone(next, now) {
		if created {
			nothing = true
			return false, nil
		}
		if replace && next.Profile().Window == 0 {
			return false, errLeavesNoHistory()
		}
	}
	err = h.replaceNow(info, e, next, !replace, now, "importing")
	return err == nil, importErr(err, !replace)
}

// errLeavesNoHistory refuses a filter that never recorded an item as the
// replacement of a user's, of a namespace without a window.
func errLeavesNoHistory() error {
	return badImport(nil, "the filter never recorded an item: it would leave the user with no history; to erase the user, DELETE it")
}

// importErr is the error of an import whose write failed with err: one of
// a filter too large to store is a bad import (merged: the filter merged
// with the user's).
func importErr(err error, merged bool) error {
	if tl := (*tooLargeError)(nil); errors.As(err, &tl) {
		if merged {
			return badImport(err, "merged with the user's, %v", tl)
		}
		return badImport(err, "%v", tl)
	}
	return err
}

// replaceUnreadable makes in the filter of a user of whom what is stored
// cannot be read (its filter, or its journal: ErrCorrupt). in is written
// whole with every journal record of the user void (see
// storage.Write.VoidJournal) in one commit: no record of the unreadable
// state comes back, and a crash leaves the user either as it was or
// replaced, never erased and not yet imported. Its parameters unknown, in
// must have the namespace's profile, as for a new user. The user's load
// slot is held meanwhile (takeUser, as Forget holds it); the calls that
// waited for it then load what is stored. flushMu held.
func (h *HotSet) replaceUnreadable(info *nsInfo, user string, in *userfilter.Filter, ours userfilter.Profile) error {
	if err := importable(info.Name, ours, ours, in.Profile(), true); err != nil {
		return err
	}
	now := h.opts.Now()
	if in.Profile().Window == 0 && gone(in, now) {
		return errLeavesNoHistory()
	}
	held, _, err := h.takeUser(info, user)
	if err != nil {
		return err
	}
	err = h.writeNow(info, user, in, 0, true, now, "importing")
	h.releaseUser(held, nil) // failed or not, they read what is stored
	return err
}

// tooLargeError is a filter that encodes past what the store keeps for
// one user (HotSet.maxEncoded).
type tooLargeError struct{ size, max int }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("the filter takes %d bytes encoded, more than the %d the store keeps for one user", e.size, e.max)
}

func (e *tooLargeError) Unwrap() error { return userfilter.ErrTooLarge }

// storable returns a *tooLargeError if a filter encoded in size bytes is
// more than the store keeps for one user.
func (h *HotSet) storable(size int) error {
	if h.maxEncoded > 0 && size > h.maxEncoded {
		return &tooLargeError{size: size, max: h.maxEncoded}
	}
	return nil
}

// ForgetItems makes items unseen again for the user and returns how many
// of them tested seen (see userfilter.Filter.Forget), with the change in
// the store before it returns. A user's filter of a kind that cannot
// forget: ErrUnsupported, and nothing changes. A user with no filter has
// nothing to forget: 0, or ErrUnsupported in a namespace whose kind cannot
// forget. A compact filter forgets even in a namespace now of Bloom
// filters (its profile travels with it).
//
// The filter is written whole, replacing the stored one and superseding
// the user's journal (as Import with replace does): a write-back merges by
// union, and a replayed journal record adds, so either would bring a
// forgotten item back otherwise.
func (h *HotSet) ForgetItems(ns, user string, items []string) (int, error) {
	info, err := h.namespace(ns)
	if err != nil {
		return 0, err
	}
	// The user's own filter decides: one built before its namespace's
	// profile changed keeps its kind, and a compact one can forget in a
	// namespace now of Bloom filters. The namespace's kind answers for a
	// user without one.
	kind := info.Profile.WithDefaults().Kind
	nsRefuses := func() error {
		return fmt.Errorf("%w: namespace %q uses %v filters, which cannot forget items", ErrUnsupported, info.Name, kind)
	}
	defer h.lockForChange()() // no write-back of the user's older state after ours
	e, _, err := h.acquire(info, user, false)
	if errors.Is(err, ErrUserNotFound) {
		if !kind.CanForget() {
			return 0, nsRefuses()
		}
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer h.release(e, false) // deferred: see FilterAppend
	if own := e.f.Profile().Kind; !own.CanForget() {
		// Refused before the clone: a large Bloom filter is not copied for nothing.
		if !kind.CanForget() {
			return 0, nsRefuses()
		}
		return 0, fmt.Errorf("%w: the user's filter is a %v filter (built before the namespace's profile changed), "+
			"which cannot forget items", ErrUnsupported, own)
	}
	now := h.opts.Now()
	next := e.f.Clone() // the hot filter changes only once the store has the change
	n, err := next.Forget(items, now)
	if err != nil || n == 0 {
		return 0, err
	}
	if err := h.replaceNow(info, e, next, false, now, "forgetting items"); err != nil {
		return 0, err
	}
	return n, nil
}

// Backup writes a backup of the store to w (see storage.Store.Backup)
// while calls go on. Every call acknowledged before it began is in it,
// written back or journaled; restoring it replays the journal as a start
// after a crash does.
func (h *HotSet) Backup(w io.Writer) error {
	if h.closed.Load() {
		return ErrClosed
	}
	if err := h.store.Backup(w); err != nil {
		return fmt.Errorf("%w: backing up: %w", ErrStorage, err)
	}
	return nil
}

// SkippedUser is a user a backup left out, its stored filter unreadable.
type SkippedUser = storage.SkippedUser

// BackupSkippingDamaged is Backup, but the users whose stored filter
// cannot be read are left out and returned rather than failing it (see
// storage.Store.BackupSkippingDamaged).
func (h *HotSet) BackupSkippingDamaged(w io.Writer) ([]SkippedUser, error) {
	if h.closed.Load() {
		return nil, ErrClosed
	}
	skipped, err := h.store.BackupSkippingDamaged(w)
	if err != nil {
		return nil, fmt.Errorf("%w: backing up: %w", ErrStorage, err)
	}
	return skipped, nil
}

// writeNow expires f at now and writes it as the user's whole state,
// superseding the journal up to upTo (or with void, every record of the
// user: see storage.Write.VoidJournal), before returning: for the steps
// that answer only once the store has the change (an import, a bulk
// recording). what names the step in the error.
func (h *HotSet) writeNow(info *nsInfo, user string, f *userfilter.Filter, upTo uint64, void bool, now time.Time, what string) error {
	f.Expire(now)
	raw, err := f.MarshalBinary()
	if err == nil {
		if err := h.storable(len(raw)); err != nil {
			return fmt.Errorf("%s %s/%s: %w", what, info.Name, user, err) // nothing written
		}
		err = h.store.WriteBack([]storage.Write{{NS: info.Name, User: user, Value: raw, UpTo: upTo,
			TTL: ttlOf(f, now), Empty: gone(f, now), VoidJournal: void, Writer: h.writer}}, nil)
	}
	if err != nil {
		h.storageErrors.Add(1)
		return h.storageErr(err, what, info.Name, user)
	}
	return nil
}

// replaceNow makes next the user's filter: written whole to the store first
// (superseding the journal up to e.lastSeq), then in memory, clean. If
// merged (next holds every item of the user's filter), a keyed call's
// journal record made within the hold stays, as a write-back leaves it
// (see writeBack), and the user stays dirty for the write-back to retire
// it. e.mu held; what names the step in the error. On error e is
// unchanged.
func (h *HotSet) replaceNow(info *nsInfo, e *entry, next *userfilter.Filter, merged bool, now time.Time, what string) error {
	k := h.keyOf(e)
	s := h.shardOf(k)
	upTo, held := e.lastSeq, false
	if merged {
		s.mu.Lock()
		if from := h.keyedFrom(s.keyed[e], h.keyedHoldOf()); from != 0 {
			upTo, held = from-1, true
		}
		s.mu.Unlock()
	}
	if err := h.writeNow(info, e.id(), next, upTo, false, now, what); err != nil {
		return err
	}
	old := e.f.Profile()
	e.f.Replace(next)
	if held {
		s.mu.Lock()
		h.markDirtyLocked(s, e)
		s.mu.Unlock()
	} else {
		e.lastSeq = 0 // the journal up to it is superseded; later entries are past it
		h.markClean(e)
	}
	if !held && gone(&e.f, now) {
		// Written Empty: it leaves the cache too, as at a write-back.
		s.mu.Lock()
		h.dropGoneLocked(s, k, e)
		s.mu.Unlock()
		return nil
	}
	// No release re-accounts it (it is clean, or dirty from before): an
	// import may bring a filter of any size, which the budget must count.
	h.resize(s, k, e, entrySize(e))
	if old.Window == 0 && e.f.Profile().Window > 0 {
		// A windowless user replaced with a windowed filter: now one the
		// reaper must look at.
		s.mu.Lock()
		if cur, ok := s.lru.Peek(k); ok && cur == e {
			h.reapListLocked(s, k, e)
		}
		s.mu.Unlock()
	}
	return nil
}

// importable says why a filter of parameters in cannot be imported over
// the user's filter, of parameters user (the namespace's profile ours for a
// new user): nil if it can. A merge needs the user's parameters; a replace
// may also bring the namespace's profile to a user whose filter predates
// it. Anything else is most likely another namespace's export, whose cap
// and window would come with it.
func importable(ns string, ours, user, in userfilter.Profile, replace bool) error {
	switch {
	case in == user || replace && in == ours:
		return nil
	case replace || user == ours:
		return badImport(userfilter.ErrIncompatible, "the filter was built with other parameters than namespace %q's "+
			"profile (the namespace's against the filter's): %s", ns, ours.Differences(in))
	default:
		return badImport(userfilter.ErrIncompatible, "the filter was built with other parameters than the user's "+
			"(the user's against the filter's): %s", user.Differences(in))
	}
}
