package storage

import (
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// journalUsersPage is how many users JournalUsers reads per read transaction.
const journalUsersPage = 1024

// Hidden says which stored filters Users leaves out, as if none were
// stored: those of at most MaxBytes (a longer one is not read) for which
// Is reports true. The zero Hidden hides none.
type Hidden struct {
	MaxBytes int
	Is       func(filter []byte) bool
}

// hides reports whether h hides the filter of a stored filter's item. One
// that cannot be read is not hidden: its user's look-up answers its error.
func (h Hidden) hides(item *badger.Item) bool {
	// ValueSize reads no value: the listing reads the values of short
	// filters only, which are most often kept beside their key.
	if h.Is == nil || item.ValueSize() > int64(h.MaxBytes+coverMarkLen) {
		return false
	}
	filter, _, err := readFilter(item)
	return err == nil && h.hidesFilter(filter)
}

// hidesFilter reports whether h hides a stored filter (its cover mark
// split off).
func (h Hidden) hidesFilter(filter []byte) bool {
	return h.Is != nil && len(filter) <= h.MaxBytes && h.Is(filter)
}

// listed reports whether the user of a stored filter's item is listed: not
// written Empty (gone, kept for its cover mark only), nor hidden by hide.
func listed(item *badger.Item, hide Hidden) bool {
	return item.UserMeta()&metaEmpty == 0 && !hide.hides(item)
}

// Users returns up to limit users of the namespace that have a stored
// filter (not one written Empty, nor one hide hides) or journal entries (a
// user is in the store from its first acknowledged write, before its first
// write-back), in byte order, starting after the user after ("" to start
// at the first). limit <= 0 means no limit.
func (s *Store) Users(ns, after string, limit int, hide Hidden) ([]string, error) {
	if err := checkKey(ns, "-"); err != nil {
		return nil, opErr("users", err)
	}
	if err := s.enter(); err != nil {
		return nil, opErr(fmt.Sprintf("users of %s", ns), err)
	}
	defer s.leave()
	prefix := appendNSPrefix(nil, prefixFilter, ns)
	var users []string
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(append(slices.Clip(prefix), after...)); it.Valid(); it.Next() {
			user := it.Item().Key()[len(prefix):]
			if string(user) == after { // after == "" never matches: users are not empty
				continue
			}
			if !listed(it.Item(), hide) {
				continue
			}
			users = append(users, string(user))
			if limit > 0 && len(users) == limit {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, opErr(fmt.Sprintf("users of %s", ns), err)
	}
	// The journal's users are few (those not yet written back) and in
	// memory: merge all of them after `after`, then cut to the page. The
	// page holds the first limit of the union, as both lists are sorted and
	// the scan stopped at limit of its own.
	if journal := s.wal.usersOf(ns, after, time.Now().Unix()); len(journal) > 0 {
		users = append(users, journal...)
		slices.Sort(users)
		users = slices.Compact(users)
		if limit > 0 && len(users) > limit {
			users = users[:limit]
		}
	}
	return users, nil
}

// Namespaces returns the namespaces that hold a stored filter or a journal
// entry, sorted. It skips from one namespace to the next, so it reads a
// few keys per namespace, not every key.
func (s *Store) Namespaces() ([]string, error) {
	if err := s.enter(); err != nil {
		return nil, opErr("namespaces", err)
	}
	defer s.leave()
	var names []string
	err := s.db.View(func(txn *badger.Txn) error {
		// Journal-only namespaces come from the journal's index below.
		p := []byte{prefixFilter}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
		defer it.Close()
		for it.Seek(p); it.Valid(); {
			key := it.Item().Key()
			ns, rest, ok := splitNS(key)
			if !ok {
				s.opts.Logger.Warn("storage: skipping malformed key", "key", hex.EncodeToString(key))
				it.Next()
				continue
			}
			names = append(names, string(ns))
			it.Seek(prefixEnd(key[:len(key)-len(rest)])) // past this namespace
		}
		return nil
	})
	if err != nil {
		return nil, opErr("namespaces", err)
	}
	for _, u := range s.wal.users() {
		names = append(names, u[0])
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// JournalUsers calls fn once for every user that has journal entries (in
// key order), for example to fold them into the user's filter at start. fn
// is called outside any Badger transaction and may call the store; users
// whose first entry is appended while JournalUsers runs may or may not be
// visited. An error from fn stops the walk and is returned.
func (s *Store) JournalUsers(fn func(ns, user string) error) error {
	if err := s.enter(); err != nil {
		return opErr("journal users", err)
	}
	users := s.wal.users()
	s.leave()
	for _, u := range users {
		if err := fn(u[0], u[1]); err != nil {
			return err
		}
	}
	return nil
}
