package storage

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// purgePage is how many users PurgeNamespace erases at a time: one read of
// their keys, one batch of deletes and one write of their erase records,
// so that a namespace of millions takes bounded memory.
const purgePage = 4096

// purgeProgressEvery is how often a purge logs how far it is: at about
// 3.5 us a user (BenchmarkPurgeNamespace), a namespace of ten million
// users takes half a minute inside the HTTP call that asked for it.
var purgeProgressEvery = 5 * time.Second

// PurgeNamespace erases every user of ns, as Delete erases one: each stored
// filter and cover mark, then an erase record voiding the user's journal
// records, so that no replay brings any of them back. It returns how many
// users it erased (0 when ns holds nothing). It is meant for a namespace
// that is no longer served: a user recorded in ns while it runs may
// outlive it. A crash part-way leaves some users, never a user of another
// namespace; running it again erases the rest. Like Delete it is allowed
// while the disk is below MinFreeBytes.
func (s *Store) PurgeNamespace(ns string) (int, error) {
	if err := checkKey(ns, "-"); err != nil {
		return 0, opErr("purge namespace", err)
	}
	if err := s.enter(); err != nil {
		return 0, opErr(fmt.Sprintf("purge namespace %s", ns), err)
	}
	defer s.leave()
	fail := func(err error) (int, error) {
		return 0, opErr(fmt.Sprintf("purge namespace %s", ns), err)
	}
	// Cover keys (marks a format 2 store wrote beside the filters) are
	// not users: they go first, in pages of their own.
	var from []byte
	for {
		keys, err := s.keysWithPrefix(appendNSPrefix(nil, prefixCover, ns), from)
		if err == nil && len(keys) > 0 {
			err = s.deleteKeys(keys)
		}
		if err != nil {
			return fail(err)
		}
		if len(keys) < purgePage {
			break
		}
		from = keys[len(keys)-1]
	}
	erased := 0
	from = nil
	prefix := appendNSPrefix(nil, prefixFilter, ns)
	logged := time.Now()
	for {
		keys, err := s.keysWithPrefix(prefix, from)
		if err != nil {
			return fail(err)
		}
		users := make([]string, len(keys))
		for i, k := range keys {
			users[i] = string(k[len(prefix):])
		}
		// The filters go first, as in Delete: a crash before the erase
		// records leaves journal records, never a lost write. Users of
		// this page may also have journal records (those with journal
		// records only are erased below). Both with writes held, as in
		// Delete, so that no backup takes its two snapshots between them:
		// it would hold a user by its journal records alone.
		s.writes.RLock()
		if len(keys) > 0 {
			err = s.deleteKeysLocked(keys)
		}
		if betweenPurgeSteps != nil {
			betweenPurgeSteps()
		}
		if err == nil {
			err = s.eraseJournals(ns, users)
		}
		s.writes.RUnlock()
		if err != nil {
			return fail(err)
		}
		erased += len(users)
		if len(keys) < purgePage {
			break
		}
		from = keys[len(keys)-1]
		if time.Since(logged) >= purgeProgressEvery {
			s.opts.Logger.Info("storage: purging a namespace", "namespace", ns, "users_erased", erased)
			logged = time.Now()
		}
	}
	for {
		users := s.wal.usersOf(ns, "", 0)
		if len(users) == 0 {
			break
		}
		users = users[:min(len(users), purgePage)]
		if err := s.eraseJournals(ns, users); err != nil {
			return fail(err)
		}
		erased += len(users)
	}
	return erased, nil
}

// betweenPurgeSteps, if set, runs between the deletion of a page's
// filters and the erasure of their journal records; tests set it to take a
// backup there.
var betweenPurgeSteps func()

// keysWithPrefix returns up to purgePage live keys that start with prefix,
// in order, after the key after (nil: from the first). Each page starts
// where the last one ended: seeking the prefix, Badger steps over every
// key the pages before deleted. In BenchmarkPurgeNamespace (one run each),
// a million users took 43.5 us a user that way against 6.8 us at a hundred
// thousand; from the last key, 3.5 and 3.6 us.
func (s *Store) keysWithPrefix(prefix, after []byte) ([][]byte, error) {
	var keys [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		if after != nil {
			it.Seek(after)
		} else {
			it.Seek(prefix)
		}
		for ; it.Valid() && len(keys) < purgePage; it.Next() {
			if k := it.Item().Key(); after != nil && bytes.Equal(k, after) {
				continue
			}
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	return keys, err
}

// deleteKeys deletes keys in one batch (Badger splits it into transactions
// as it must).
func (s *Store) deleteKeys(keys [][]byte) error {
	s.writes.RLock()
	defer s.writes.RUnlock()
	return s.deleteKeysLocked(keys)
}

// deleteKeysLocked is deleteKeys with s.writes held for reading.
func (s *Store) deleteKeysLocked(keys [][]byte) error {
	wb := s.db.NewWriteBatch()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			wb.Cancel()
			return s.writeErr(err)
		}
	}
	if err := wb.Flush(); err != nil {
		return s.writeErr(err)
	}
	return nil
}

// eraseJournals voids every journal record of users, all of ns, for good,
// with one erase record each, written together: the records keep a replay
// after a crash from reading them again.
func (s *Store) eraseJournals(ns string, users []string) error {
	if len(users) == 0 {
		return nil
	}
	seq, err := s.takeSeqs(uint64(len(users)))
	if err != nil {
		return err
	}
	if err := s.wal.eraseAll(seq, ns, slices.Clip(users)); err != nil {
		return s.writeErr(err)
	}
	return nil
}
