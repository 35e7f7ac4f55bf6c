package storage

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/proto"
)

// backupMagic opens every backup stream, followed by the uvarint store
// format version, then Badger's backup stream (uint64 little-endian length,
// protobuf KVList, repeated).
var backupMagic = []byte("seenapi-backup\x00")

const (
	restoreChunkKeys  = 256
	restoreChunkBytes = 1 << 20
	maxBackupList     = 1 << 30 // a larger KVList length means a corrupt stream
)

// Backup writes a consistent snapshot of the whole store to w. The calls
// that run meanwhile are not blocked.
func (s *Store) Backup(w io.Writer) error {
	if err := s.enter(); err != nil {
		return fmt.Errorf("storage: backup: %w", err)
	}
	defer s.leave()
	// The journal first: a write-back between the two snapshots then puts
	// a record in both (restoring it twice is harmless), never in neither.
	journal, err := s.wal.snapshot(time.Now().Unix())
	if err != nil {
		return fmt.Errorf("storage: backup: %w", err)
	}
	hdr := binary.AppendUvarint(append([]byte(nil), backupMagic...), FormatVersion)
	if _, err := w.Write(hdr); err != nil {
		return fmt.Errorf("storage: backup: %w", err)
	}
	if _, err := s.db.Backup(w, 0); err != nil {
		return fmt.Errorf("storage: backup: %w", err)
	}
	// Journal records travel as journal keys of format 1, in lists of the
	// same stream format, so every backup reads back the same way.
	for len(journal) > 0 {
		n := min(len(journal), restoreChunkKeys)
		list := &pb.KVList{}
		for _, kv := range journal[:n] {
			list.Kv = append(list.Kv, &pb.KV{Key: kv.key, Value: kv.value, ExpiresAt: kv.expiresAt, Version: 1})
		}
		journal = journal[n:]
		buf, err := proto.Marshal(list)
		if err == nil {
			_, err = w.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(buf))))
		}
		if err == nil {
			_, err = w.Write(buf)
		}
		if err != nil {
			return fmt.Errorf("storage: backup: %w", err)
		}
	}
	return nil
}

// restoreKV is one key of a backup being restored.
type restoreKV struct {
	key, value []byte
	expiresAt  uint64
}

// Restore adds the filters and journal entries of a backup made by Backup
// to the store, which may be empty or not and may be in use. A restored
// filter replaces the stored one, or with merge non-nil is merged into it
// as in WriteBack. Restored journal entries get new sequence numbers (the
// store's own cover marks count its own numbers); one the user holds
// already, value for value, is not added twice. Entries already
// expired are skipped; the others keep their expiry.
//
// Restore is not atomic: on error, part of the backup may be restored, and
// running it again is safe. A stream that is not a backup, or is cut short,
// fails with ErrBadBackup; one of a newer format with ErrFormatVersion.
// Users whose merge failed are named in a *WriteBackError.
func (s *Store) Restore(r io.Reader, merge MergeFunc) error {
	if err := s.enterWrite(); err != nil {
		return fmt.Errorf("storage: restore: %w", err)
	}
	defer s.leave()
	s.unknownWrite(0) // what it writes is nobody's load
	br := bufio.NewReaderSize(r, 64<<10)
	if err := readBackupHeader(br); err != nil {
		return fmt.Errorf("storage: restore: %w", err)
	}
	var (
		failed  []UserError
		pending []restoreKV
		size    int
		prevKey []byte
		buf     []byte
		now     = uint64(time.Now().Unix())
	)
	flush := func() error {
		for len(pending) > 0 {
			n, userErrs, err := s.restoreSome(pending, merge)
			failed = append(failed, userErrs...)
			if err != nil {
				return err
			}
			pending = pending[n:]
		}
		pending, size = pending[:0], 0
		return nil
	}
	for {
		var n uint64
		if err := binary.Read(br, binary.LittleEndian, &n); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("storage: restore: %w: %w", ErrBadBackup, err)
		}
		if n > maxBackupList {
			return fmt.Errorf("storage: restore: %w: list of %d bytes", ErrBadBackup, n)
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("storage: restore: %w: %w", ErrBadBackup, err)
		}
		list := &pb.KVList{}
		if err := proto.Unmarshal(buf, list); err != nil {
			return fmt.Errorf("storage: restore: %w: %w", ErrBadBackup, err)
		}
		for _, kv := range list.Kv {
			if bytes.Equal(kv.Key, prevKey) {
				continue // an older version of the key just restored
			}
			prevKey = kv.Key
			if len(kv.Meta) > 0 && kv.Meta[0]&1 != 0 || kv.ExpiresAt != 0 && kv.ExpiresAt <= now {
				continue // deleted or expired
			}
			if err := checkBackupKey(kv.Key); err != nil {
				return fmt.Errorf("storage: restore: %w", err)
			}
			if kv.Key[0] == prefixMeta || kv.Key[0] == prefixCover {
				// The header carried the format version; cover marks count
				// the source store's journal numbers, not this one's.
				continue
			}
			pending = append(pending, restoreKV{key: kv.Key, value: kv.Value, expiresAt: kv.ExpiresAt})
			size += len(kv.Key) + len(kv.Value)
			if len(pending) >= restoreChunkKeys || size >= restoreChunkBytes {
				if err := flush(); err != nil {
					return fmt.Errorf("storage: restore: %w", err)
				}
			}
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("storage: restore: %w", err)
	}
	if len(failed) > 0 {
		return &WriteBackError{Failed: failed}
	}
	return nil
}

func readBackupHeader(br *bufio.Reader) error {
	magic := make([]byte, len(backupMagic))
	if _, err := io.ReadFull(br, magic); err != nil || !bytes.Equal(magic, backupMagic) {
		return fmt.Errorf("%w: no seenapi backup header", ErrBadBackup)
	}
	ver, err := binary.ReadUvarint(br)
	switch {
	case err != nil:
		return fmt.Errorf("%w: format version: %w", ErrBadBackup, err)
	case ver == 0 || ver > FormatVersion:
		return fmt.Errorf("%w: backup in format version %d, this build supports %d", ErrFormatVersion, ver, FormatVersion)
	}
	return nil
}

func checkBackupKey(key []byte) error {
	if len(key) > 0 {
		switch key[0] {
		case prefixMeta, prefixCover:
			return nil
		case prefixFilter:
			if _, _, ok := parseFilterKey(key); ok {
				return nil
			}
		case prefixJournal:
			if _, _, _, ok := parseJournalKey(key); ok {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: unknown key %q", ErrBadBackup, key)
}

// restoreSome writes a first part of kvs in one transaction and returns how
// many keys it handled and the users skipped for a merge error.
func (s *Store) restoreSome(kvs []restoreKV, merge MergeFunc) (int, []UserError, error) {
	limit := len(kvs)
	for attempt := 0; ; {
		failed, n, err := s.restoreTxn(kvs[:limit], merge)
		switch {
		case errors.Is(err, badger.ErrTxnTooBig) && n > 0:
			limit = n
			continue
		case errors.Is(err, badger.ErrConflict) && attempt < maxConflictRetries:
			attempt++
			continue
		case err != nil:
			return 0, nil, s.writeErr(err)
		}
		return limit, failed, nil
	}
}

// restoreTxn writes kvs in one transaction. On ErrTxnTooBig, n is how many
// keys fitted.
func (s *Store) restoreTxn(kvs []restoreKV, merge MergeFunc) (failed []UserError, n int, err error) {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	for i, kv := range kvs {
		key, value := kv.key, kv.value
		switch key[0] {
		case prefixFilter:
			if merge == nil {
				break
			}
			item, err := txn.Get(key)
			if errors.Is(err, badger.ErrKeyNotFound) {
				break
			}
			ns, user, _ := parseFilterKey(key)
			if err == nil {
				var stored []byte
				if stored, err = readValue(item); err == nil {
					value, err = merge(stored, value)
				}
			}
			if err != nil {
				failed = append(failed, UserError{NS: string(ns), User: string(user), Err: fmt.Errorf("merge: %w", err)})
				continue
			}
		case prefixJournal:
			if err := s.restoreJournal(kv); err != nil {
				return nil, i, err
			}
			continue
		}
		if err := txn.SetEntry(&badger.Entry{Key: key, Value: value, ExpiresAt: kv.expiresAt}); err != nil {
			return nil, i, err
		}
	}
	return failed, len(kvs), txn.Commit()
}

// restoreJournal appends a restored journal record under a new sequence
// number (above every cover mark of this store), unless the user holds
// the same record already (restored before).
func (s *Store) restoreJournal(kv restoreKV) error {
	ns, user, _, _ := parseJournalKey(kv.key)
	if s.wal.hasValue(string(ns), string(user), kv.value) {
		return nil
	}
	seq, err := s.takeSeqs(1)
	if err != nil {
		return err
	}
	rec := walAppend{seq: seq, ns: string(ns), user: string(user), expiresAt: int64(kv.expiresAt), value: kv.value}
	if err := s.wal.write([]walAppend{rec}); err != nil {
		return s.writeErr(err)
	}
	return nil
}
