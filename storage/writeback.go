package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// writeBackChunk is how many users one write-back transaction holds at most.
const writeBackChunk = 256

// WriteBack stores each write's value, then retires that user's journal
// records it covers (Seq <= UpTo): a crash in between
// leaves records already in the filter, and replaying them is harmless for
// filters that merge by union. When merge is non-nil and a filter is
// stored, the value written is merge(stored, value), which expires with
// the longer-lived of the two unless it is value itself; with merge nil the
// value replaces the stored one, and the records that earlier write-backs
// covered stay covered (the stored cover mark carries over, see prepare),
// so a replay after a crash does not bring them back into it; a write
// that voids its user's journal (Write.VoidJournal) voids every earlier
// record of the user, as a Delete would, by the cover mark committed with
// its value. Users are
// written in Badger transactions of up to 256 users (fewer if they do not
// fit).
//
// On failure it returns a *WriteBackError naming every user that was not
// written and why (a merge error, ErrTooLarge for a value past
// MaxValueBytes, ErrFull, ErrClosed, a Badger error); every user not
// named was written.
//
// Write values must not be modified until WriteBack returns.
func (s *Store) WriteBack(writes []Write, merge MergeFunc) error {
	if len(writes) == 0 {
		return nil
	}
	var failed []UserError
	fail := func(ws []Write, err error) {
		for _, w := range ws {
			failed = append(failed, UserError{NS: w.NS, User: w.User, Err: err})
		}
	}
	if err := s.enterWrite(); err != nil {
		fail(writes, err)
		return &WriteBackError{Failed: failed}
	}
	defer s.leave()

	ok := writes
	for _, w := range writes {
		if checkKey(w.NS, w.User) != nil {
			ok = nil
			break
		}
	}
	if ok == nil { // some keys are bad: keep the good ones
		ok = make([]Write, 0, len(writes))
		for _, w := range writes {
			if err := checkKey(w.NS, w.User); err != nil {
				fail([]Write{w}, err)
				continue
			}
			ok = append(ok, w)
		}
	}

	ok, failed = s.voidMarks(ok, failed)
	for _, w := range ok {
		if w.Writer != s.token.Load() {
			s.unknownWrite(w.Writer)
			break
		}
	}
	for len(ok) > 0 {
		if s.full.Load() { // found full while writing: fail the rest without trying
			fail(ok, s.errFull())
			break
		}
		n, errs := s.writeBackSome(ok, merge)
		for i, err := range errs {
			if err == nil {
				s.wal.cover(ok[i].NS, ok[i].User, ok[i].UpTo)
			}
			if err != nil {
				failed = append(failed, UserError{NS: ok[i].NS, User: ok[i].User, Err: err})
			}
		}
		ok = ok[n:]
	}
	if len(failed) > 0 {
		return &WriteBackError{Failed: failed}
	}
	return nil
}

// voidMarks returns ws with each write that voids its user's journal
// (Write.VoidJournal) given a journal number of its own as UpTo, past every
// record appended before it: the cover mark stored with its value, under
// which a replay after a crash leaves out every earlier record of the
// user, and up to which the write retires them. ws is copied, not changed,
// if any is; a write that gets no number is added to failed.
func (s *Store) voidMarks(ws []Write, failed []UserError) ([]Write, []UserError) {
	if !slices.ContainsFunc(ws, func(w Write) bool { return w.VoidJournal }) {
		return ws, failed
	}
	out := make([]Write, 0, len(ws))
	for _, w := range ws {
		if w.VoidJournal {
			seq, err := s.takeSeqs(1)
			if err != nil {
				failed = append(failed, UserError{NS: w.NS, User: w.User, Err: err})
				continue
			}
			w.UpTo = seq
		}
		out = append(out, w)
	}
	return out, failed
}

// writeBackSome writes back a first part of ws (at least one user). It
// returns how many users it handled and, for each, the error that kept it
// from being written (nil: written).
func (s *Store) writeBackSome(ws []Write, merge MergeFunc) (n int, errs []error) {
	s.writersMu.RLock() // the token holds until the commits
	defer s.writersMu.RUnlock()
	token := s.token.Load()
	limit := distinctPrefix(ws, writeBackChunk)
	errs = make([]error, limit)
	for attempt := 0; ; {
		clear(errs)
		tooBig, err := s.writeBackTxn(ws[:limit], merge, token, errs[:limit])
		switch {
		case tooBig && limit > 1:
			limit /= 2
			continue
		case tooBig:
			errs[0] = s.writeBackLarge(ws[0], merge, token) // alone, in its own transaction
			return 1, errs[:1]
		case errors.Is(err, badger.ErrConflict) && attempt < maxConflictRetries:
			attempt++
			continue
		case err != nil:
			err = s.writeErr(err)
			for i := range errs[:limit] {
				if errs[i] == nil {
					errs[i] = err
				}
			}
		}
		return limit, errs[:limit]
	}
}

// distinctPrefix returns the length, at most max, of the longest prefix of
// ws in which no user appears twice (a user's second write must see its
// first, so it goes in a later transaction).
func distinctPrefix(ws []Write, max int) int {
	n := min(len(ws), max)
	if n <= smallWriteBack {
		// No table: most rounds of write-back are a few users each.
		for i := 1; i < n; i++ {
			for _, o := range ws[:i] {
				if o.User == ws[i].User && o.NS == ws[i].NS {
					return i
				}
			}
		}
		return n
	}
	if n > writeBackChunk {
		seen := make(map[[2]string]struct{}, n)
		for i, w := range ws[:n] {
			k := [2]string{w.NS, w.User}
			if _, dup := seen[k]; dup {
				return i
			}
			seen[k] = struct{}{}
		}
		return n
	}
	// An open-addressed table on the stack of the users seen (index + 1),
	// by a hash of the user: a map allocated for each transaction was 3%
	// of what a server with a million users allocated.
	var table [2 * writeBackChunk]uint16
	const mask = len(table) - 1
	for i, w := range ws[:n] {
		j := int(maphash.String(distinctSeed, w.User)^maphash.String(distinctSeed, w.NS)) & mask
		for ; table[j] != 0; j = (j + 1) & mask {
			if o := ws[table[j]-1]; o.User == w.User && o.NS == w.NS {
				return i
			}
		}
		table[j] = uint16(i + 1)
	}
	return n
}

var distinctSeed = maphash.MakeSeed()

// smallWriteBack is the most users distinctPrefix checks pair by pair.
const smallWriteBack = 64

// arena holds a transaction's keys and values back to back: the
// transaction refers to them until it commits, and one growing buffer a
// batch replaces two or three allocations a user, which pace the
// collector.
type arena []byte

// txnScratch is a write-back transaction's buffers, reused from one
// transaction to the next (writeBackScratch): a value with its cover mark
// is a copy of the filter, and a fresh arena a transaction would allocate
// about as many bytes as it writes.
type txnScratch struct {
	keys, values arena
	userKeys     [][]byte // each user's filter key, in keys
	prepared     [][]byte
	marks        []uint64
	expiries     []uint64 // each user's Badger expiry (0: never)
	// entries are the transaction's Badger entries, one array a batch
	// instead of badger.NewEntry's allocation a user (a ninth of what a
	// write-back allocated, BenchmarkWriteBack). The transaction holds
	// pointers into it until it commits; Badger keeps none after.
	entries []badger.Entry
}

var writeBackScratch = sync.Pool{New: func() any { return new(txnScratch) }}

// free returns sc to writeBackScratch once the transaction that used it is
// over (Badger copies keys and values when it commits), keeping no value.
func (sc *txnScratch) free() {
	if cap(sc.values) > 4<<20 {
		sc.values = nil // a batch of huge filters: let it go
	}
	sc.keys, sc.values = sc.keys[:0], sc.values[:0]
	clear(sc.userKeys)
	clear(sc.prepared)
	clear(sc.entries)
	sc.userKeys, sc.prepared, sc.marks, sc.entries = sc.userKeys[:0], sc.prepared[:0], sc.marks[:0], sc.entries[:0]
	sc.expiries = sc.expiries[:0]
	writeBackScratch.Put(sc)
}

// since returns what was appended from start on, as a slice that later
// appends never write into (a grown arena leaves it in the old array).
func (a *arena) since(start int) []byte { return (*a)[start:len(*a):len(*a)] }

// writeBackTxn writes back every user of ws (no user twice) in one
// transaction, setting errs[i] for a user skipped for an error of its own.
// tooBig reports that the users do not fit in one transaction; err is the
// commit's error.
//
// Every read comes before the first write: an iterator of a transaction
// with pending writes sorts them all, which would make a transaction of n
// users cost n^2 log n.
func (s *Store) writeBackTxn(ws []Write, merge MergeFunc, token uint64, errs []error) (tooBig bool, err error) {
	sc := writeBackScratch.Get().(*txnScratch)
	defer sc.free() // once the transaction is over
	s.writes.RLock()
	defer s.writes.RUnlock()
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	for i, w := range ws {
		start := len(sc.keys)
		sc.keys = filterKey(sc.keys, w.NS, w.User)
		key := sc.keys.since(start)
		v, mark, expiresAt, err := s.prepare(txn, key, w, merge, token)
		if err == nil && int64(len(v)) > s.MaxValueBytes() {
			// Refused here, for this user alone: Badger's refusal would
			// fail the whole transaction, every user of it, each round.
			err = s.tooLarge(len(v))
		}
		sc.userKeys, sc.prepared, sc.marks = append(sc.userKeys, key), append(sc.prepared, v), append(sc.marks, mark)
		sc.expiries = append(sc.expiries, expiresAt)
		errs[i] = err
	}
	sc.entries = slices.Grow(sc.entries[:0], len(ws)) // one array for the batch
	for i, w := range ws {
		if errs[i] != nil {
			continue
		}
		if err := setFilter(txn, sc.userKeys[i], w, sc.prepared[i], sc.marks[i], sc.expiries[i], sc); err != nil {
			return errors.Is(err, badger.ErrTxnTooBig), err
		}
	}
	return false, txn.Commit()
}

// prepare returns the value a user's write-back writes, the cover mark
// to store with it (0: none) and when it expires (Badger's ExpiresAt, 0:
// never). The value is w.Value, or merged into the
// stored filter when there is one and merge is not nil, unless w comes
// from the store's only writer, holding token (see Attach). It expires
// w.TTL from now, or, merged with stored items w.Value lacks, when the
// later-lived of the stored filter and w.TTL says: in a windowed
// namespace the stored items may be of newer time buckets than w's
// (another writer's), which w's expiry would drop before they leave their
// window (as Restore does). The mark is
// the journal number of the last record w covers, or for a write that
// covers none (a replacement, an import) the mark stored with the filter
// it overwrites, which still holds for the records that filter covered
// (format 2 kept it under a key of its own, which such a write left
// alone): the only read a write-back of the only writer may need. An
// unreadable stored mark counts as none (its records are then replayed
// after a restart, harmlessly). The errors concern that user only.
func (s *Store) prepare(txn *badger.Txn, fkey []byte, w Write, merge MergeFunc, token uint64) (value []byte, mark, expiresAt uint64, err error) {
	if w.TTL > 0 {
		expiresAt = uint64(time.Now().Add(w.TTL).Unix()) // as Badger's WithTTL
	}
	if w.VoidJournal {
		// Its own number (voidMarks): neither a stored mark to keep nor a
		// stored value to merge, which may be what cannot be read.
		return w.Value, w.UpTo, expiresAt, nil
	}
	mark = s.wal.coverMark(w.NS, w.User, w.UpTo)
	asIs := merge == nil || (token != 0 && w.Writer == token)
	if asIs && mark > 0 {
		return w.Value, mark, expiresAt, nil
	}
	item, err := txn.Get(fkey)
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return w.Value, mark, expiresAt, nil
	case asIs && err == nil:
		return w.Value, storedMark(item), expiresAt, nil
	case asIs:
		return w.Value, 0, expiresAt, nil // an unreadable mark counts as none
	case err != nil:
		return nil, 0, 0, fmt.Errorf("read stored filter: %w", err)
	}
	stored, was, err := readFilter(item)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read stored filter: %w", err)
	}
	value, err = safeMerge(merge, stored, w.Value)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("merge: %w", err)
	}
	if !bytes.Equal(value, w.Value) {
		// The union holds stored items w lacks: it lasts as long as they
		// do. A value that covers the stored one keeps its own expiry.
		expiresAt = laterExpiry(expiresAt, item.ExpiresAt())
	}
	if mark == 0 {
		mark = was
	}
	return value, mark, expiresAt, nil
}

// storedMark returns the cover mark at the end of a stored filter's value
// (0: none, or unreadable), reading no copy of the filter.
func storedMark(item *badger.Item) (mark uint64) {
	if item.UserMeta()&metaCoverMark == 0 {
		return 0
	}
	_ = item.Value(func(v []byte) error {
		_, mark, _ = splitCoverMark(v, item.UserMeta())
		return nil
	})
	return mark
}

// safeMerge calls merge, turning a panic in it (a bug met by one user's
// stored bytes) into that user's error: the rest of the write-back goes on.
func safeMerge(merge MergeFunc, stored, value []byte) (merged []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			merged, err = nil, fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return merge(stored, value)
}

// setFilter sets the user's filter in txn under key, expiring at
// expiresAt (0: never), ending with the user's cover mark (0: none), so that a replay after a restart skips the
// records it holds (journal segments outlive the records a write-back
// covers). Its value, when it carries a mark, and its entry go in sc. key
// must stay unchanged until the transaction commits.
func setFilter(txn *badger.Txn, key []byte, w Write, value []byte, mark, expiresAt uint64, sc *txnScratch) error {
	var meta byte
	if w.Empty && bytes.Equal(value, w.Value) { // a merge that kept stored items would differ
		meta = metaEmpty
	}
	if mark > 0 {
		start := len(sc.values)
		sc.values = binary.BigEndian.AppendUint64(append(sc.values, value...), mark)
		value, meta = sc.values.since(start), meta|metaCoverMark
	}
	// An append that grows sc.entries leaves the entries already set in
	// the old array, which the transaction keeps alive.
	sc.entries = append(sc.entries, badger.Entry{Key: key, Value: value})
	e := &sc.entries[len(sc.entries)-1]
	e.WithMeta(meta)
	e.ExpiresAt = expiresAt
	return txn.SetEntry(e)
}

// writeBackLarge writes back one user whose filter and covered journal do
// not fit in one transaction: the filter first, then the journal deletions.
func (s *Store) writeBackLarge(w Write, merge MergeFunc, token uint64) error {
	fkey := filterKey(nil, w.NS, w.User)
	s.writes.RLock()
	defer s.writes.RUnlock()
	for attempt := 0; ; attempt++ {
		var userErr error
		err := s.db.Update(func(txn *badger.Txn) error {
			value, mark, expiresAt, err := s.prepare(txn, fkey, w, merge, token)
			if err == nil && int64(len(value)) > s.MaxValueBytes() {
				err = s.tooLarge(len(value))
			}
			if err != nil {
				userErr = err
				return nil
			}
			return setFilter(txn, fkey, w, value, mark, expiresAt, &txnScratch{})
		})
		switch {
		case userErr != nil:
			return userErr
		case errors.Is(err, badger.ErrConflict) && attempt < maxConflictRetries:
			continue
		case err != nil:
			return s.writeErr(err)
		}
		break
	}
	return nil
}

// Attach registers a writer of filters and returns its token, to set as
// the Writer of its Writes, and detach, to call when it stops writing.
//
// Write-back merges what it writes into what is stored, so that a second
// writer, a replayed journal or a restore never rolls a user back; that
// costs a read of the stored filter and two decodings a user. A writer
// whose value for a user always includes what was stored when it read the
// user (the hot set: it loads a user before changing it, and every write
// of that user goes through it) gains nothing from the merge while nothing
// else writes: then the store writes its values without reading. That
// holds while it is the only writer attached and no write without its
// token and no restore has happened since it attached; the token is 0 (no
// skipping) for a writer that attaches beside another, and a token stops
// skipping for good at the first write of another writer.
func (s *Store) Attach() (token uint64, detach func()) {
	s.writersMu.Lock()
	defer s.writersMu.Unlock()
	s.writers++
	s.gen++
	if s.writers == 1 {
		token = s.gen
	}
	s.token.Store(token)
	var once sync.Once
	return token, func() {
		once.Do(func() {
			s.writersMu.Lock()
			defer s.writersMu.Unlock()
			s.writers--
			s.token.Store(0) // a writer that stays attached keeps merging
		})
	}
}

// unknownWrite ends the skipping of the only writer's token: a write by
// writer (0: one that did not attach) that is not its.
func (s *Store) unknownWrite(writer uint64) {
	if s.token.Load() == 0 {
		return
	}
	s.writersMu.Lock()
	defer s.writersMu.Unlock()
	if t := s.token.Load(); t != 0 && writer != t {
		s.token.Store(0)
	}
}
