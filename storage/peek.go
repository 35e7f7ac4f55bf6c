package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// NamespaceUsers is a namespace of a store and how many users it holds.
type NamespaceUsers struct {
	Namespace string
	// Users counts the users, up to PeekNamespaces' limit; AtLeast says
	// the namespace holds more.
	Users   int
	AtLeast bool
}

// PeekNamespaces returns the namespaces whose users the store in opts.Dir
// holds (a stored filter, or a journal record a crash left unwritten),
// but those skip names, each with its users counted up to limit (0: no
// limit), sorted by name. It writes nothing, to the directory or its
// journal: Badger is opened read-only, which it refuses with ErrInUse
// while a process (a seenapi serving it) has the store open, and while it
// reads, Open in another process fails with ErrInUse in turn. A store a
// crash left is not read either (ErrNotClosed). A directory with no store
// gives none. Counting reads a key a user of the namespaces
// it lists, and a few keys a namespace skipped; it counts the users Users
// lists, hide as its hide.
func PeekNamespaces(opts Options, skip func(ns string) bool, limit int, hide Hidden) ([]NamespaceUsers, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	// Badger's read-only open refuses a directory without a manifest, and
	// would create nothing: no manifest, no store.
	if _, err := os.Stat(filepath.Join(opts.Dir, badger.ManifestFilename)); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	db, err := badger.Open(badgerOptions(opts).WithReadOnly(true).WithBlockCacheSize(0).WithIndexCacheSize(0))
	if err != nil {
		// Badger says both in its text only.
		switch {
		case strings.Contains(err.Error(), "Cannot acquire directory lock"):
			err = fmt.Errorf("%w: %w", ErrInUse, err)
		case strings.Contains(err.Error(), badger.ErrTruncateNeeded.Error()):
			// Its memory tables' files are cut to their end by a Close
			// only: read-only, Badger refuses every store a crash left.
			err = ErrNotClosed
		}
		return nil, opErr("peek "+opts.Dir, err)
	}
	defer db.Close()
	if limit <= 0 {
		limit = int(^uint(0) >> 1)
	}
	counts := map[string]*NamespaceUsers{}
	journal := map[[2]string]bool{} // the journal's users of namespaces not skipped
	err = db.View(func(txn *badger.Txn) error {
		if err := peekFormat(txn, opts.Dir); err != nil {
			return err
		}
		// Stored filters: one key a user.
		p := []byte{prefixFilter}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
		defer it.Close()
		for it.Seek(p); it.Valid(); {
			key := it.Item().Key()
			ns, rest, ok := splitNS(key)
			if !ok {
				it.Next()
				continue
			}
			past := prefixEnd(key[:len(key)-len(rest)])
			if name := string(ns); !skip(name) {
				c := counts[name]
				if c == nil || c.Users < limit {
					// A namespace of unlisted users alone holds none.
					if listed(it.Item(), hide) {
						if c == nil {
							c = &NamespaceUsers{Namespace: name}
							counts[name] = c
						}
						c.Users++
					}
					it.Next()
					continue
				}
				c.AtLeast = true
			}
			it.Seek(past)
		}
		// The journal of a store of format 3 or older, in Badger (the next
		// Open moves it to the journal's files).
		p = []byte{prefixJournal}
		jt := txn.NewIterator(badger.IteratorOptions{Prefix: p})
		defer jt.Close()
		for jt.Seek(p); jt.Valid(); jt.Next() {
			if ns, user, _, ok := parseJournalKey(jt.Item().Key()); ok && !skip(string(ns)) {
				journal[[2]string{string(ns), string(user)}] = true
			}
		}
		if err := peekJournal(filepath.Join(opts.Dir, walDir), skip, time.Now().Unix(), journal); err != nil {
			return err
		}
		// A journal's user counts unless its stored filter counted.
		var kb walKeyBuf
		for u := range journal {
			if item, err := txn.Get(filterKey(kb[:0], u[0], u[1])); err == nil && listed(item, hide) ||
				err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			c := counts[u[0]]
			if c == nil {
				c = &NamespaceUsers{Namespace: u[0]}
				counts[u[0]] = c
			}
			if c.Users < limit {
				c.Users++
			} else {
				c.AtLeast = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, opErr("peek "+opts.Dir, err)
	}
	out := make([]NamespaceUsers, 0, len(counts))
	for _, c := range counts {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b NamespaceUsers) int { return strings.Compare(a.Namespace, b.Namespace) })
	return out, nil
}

// peekFormat refuses a store of a format newer than this build reads:
// its keys may mean something else.
func peekFormat(txn *badger.Txn, dir string) error {
	item, err := txn.Get(keyFormat)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil // a store that never took a write
	}
	if err != nil {
		return err
	}
	return item.Value(func(v []byte) error {
		if ver, n := binary.Uvarint(v); n <= 0 || ver > FormatVersion {
			return fmt.Errorf("%w: %s is in a format this build does not read (%x)", ErrFormatVersion, dir, v)
		}
		return nil
	})
}

// peekJournal adds to users the users of the journal's segments in dir
// that have a live record (not past its expiry, nor voided by an erase),
// as openWAL would index them, without truncating a torn tail.
func peekJournal(dir string, skip func(ns string) bool, now int64, users map[[2]string]bool) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var ids []uint64
	for _, e := range ents {
		if id, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), walSuffix), 10, 64); err == nil && strings.HasSuffix(e.Name(), walSuffix) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	last := map[[2]string]uint64{} // the highest seq of a user's live records
	for _, id := range ids {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%020d%s", id, walSuffix)))
		if err != nil {
			return err
		}
		if len(data) < len(walMagic) || string(data[:len(walMagic)]) != walMagic {
			continue
		}
		for off := len(walMagic); off < len(data); {
			r, p, ok := readWALRecord(data, off)
			if !ok {
				// Damage, looked past as openWAL does, or a torn tail.
				if off, ok = nextIntact(data, off); !ok {
					break
				}
				continue
			}
			off += walHeader + len(p)
			if skip(r.ns) {
				continue
			}
			u := [2]string{r.ns, r.user}
			switch r.kind {
			case kindAppend:
				if r.expiresAt == 0 || r.expiresAt > now {
					last[u] = max(last[u], r.seq)
				}
			case kindErase:
				if seq, ok := last[u]; ok && seq <= r.upTo {
					delete(last, u)
				}
			}
		}
	}
	for u := range last {
		users[u] = true
	}
	return nil
}
