package storage

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"google.golang.org/protobuf/proto"
)

// backupMagic opens every backup stream, followed by the uvarint store
// format version, then Badger's backup stream (uint64 little-endian length,
// protobuf KVList, repeated), then the end mark: backupEnd, the bytes of
// the lists before it and, from store format 4, their CRC-32C
// (Castagnoli), each uint64 little-endian. A backup streamed over HTTP may
// be cut short at a list's end; without the mark it would restore as a
// smaller, complete-looking one. A byte changed on disk would restore as
// other data (a user id's byte flipped moves its history to another
// user): the checksum refuses it. Streams of the first version
// (backupMagicV0) have no end mark, and those of formats before 4 no
// checksum; both still restore. (The checksum goes by the format, not by
// a new magic, so that a build of format 3 refuses such a backup naming
// its format version rather than finding no header.)
//
// A backup that its maker stops, at a list's end, for a failure of the
// store (a user's value damaged on disk) ends with a stop mark instead of
// the end mark: backupStopped, then the length (uint64 little-endian) of
// a JSON backupStop that says why, so that a client downloading it can
// name the cause rather than a backup cut short. A build without the stop
// mark reads it as a list too large and refuses the stream as it refuses
// any backup not whole; no format version is needed.
//
// A backup taken skipping damaged users (BackupSkippingDamaged) has, after
// its lists, a skip mark before its end mark: a stop mark whose record
// lists the users left out (Skipped), counted with the lists by the end
// mark and its checksum. Readers of this build note those users and read
// on to the end mark; a build before it reads a stop mark, and refuses
// the stream saying why (its Reason): a restore there would leave the
// users out without a word. Its record may exceed maxBackupStop (builds
// before it refuse that as a bad stop mark), up to maxBackupSkip.
var (
	backupMagic   = []byte("seenapi-backup\x01")
	backupMagicV0 = []byte("seenapi-backup\x00")
)

// checksumFormat is the first store format whose backups end with a checksum.
const checksumFormat = 4

// backupCRC is the table of the end mark's checksum.
var backupCRC = crc32.MakeTable(crc32.Castagnoli)

const (
	restoreChunkKeys  = 256
	restoreChunkBytes = 1 << 20
	maxBackupList     = 1 << 30 // a larger KVList length means a corrupt stream
	backupEnd         = ^uint64(0)
	backupStopped     = backupEnd - 1
	maxBackupStop     = 64 << 10 // a longer stop record means a corrupt stream
	maxBackupSkip     = 16 << 20 // a longer skip record, too
)

// backupStop is the record of a stop mark: the user whose failure stopped
// the backup (none: not a user's), and the failure's text; or of a skip
// mark, the users left out (Skipped, not empty) and, for builds that read
// it as a stop mark, why they cannot restore the backup (Reason).
type backupStop struct {
	NS      string        `json:"ns,omitempty"`
	User    string        `json:"user,omitempty"`
	Reason  string        `json:"reason"`
	Skipped []SkippedUser `json:"skipped,omitempty"`
}

// SkippedUser is a user a backup left out, its stored filter unreadable
// (see Store.BackupSkippingDamaged), and why.
type SkippedUser struct {
	NS     string `json:"ns"`
	User   string `json:"user"`
	Reason string `json:"reason"`
}

// countingWriter counts the bytes written through it and sums them, and
// keeps the first error of w.
type countingWriter struct {
	w   io.Writer
	n   uint64
	crc uint32
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	c.crc = crc32.Update(c.crc, backupCRC, p[:n])
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// Backup writes a consistent snapshot of the whole store to w. The calls
// that run meanwhile are not blocked. A user's value that cannot be read
// fails it with a *UserError (ErrCorrupt) naming the user, after a stop
// mark saying so (see backupStopped) ends what w was given.
func (s *Store) Backup(w io.Writer) error {
	_, err := s.backup(w, false)
	return err
}

// BackupSkippingDamaged is Backup, but a user whose stored filter cannot
// be read is left out of the backup rather than failing it, and returned,
// for an operator who must take a backup before repairing them. The
// stream names them (see backupMagic), so that reading it says so; their
// journal records, which come before the filters, stay in it: a restore
// brings back their calls since their last write-back alone.
func (s *Store) BackupSkippingDamaged(w io.Writer) ([]SkippedUser, error) {
	return s.backup(w, true)
}

func (s *Store) backup(w io.Writer, skipDamaged bool) (skipped []SkippedUser, err error) {
	if err := s.enter(); err != nil {
		return nil, opErr("backup", err)
	}
	defer s.leave()
	// The journal first: a write-back between the two snapshots then puts
	// a record in both (restoring it twice is harmless), never in neither.
	// Both with writes held, so that no erase (Delete: the filter, then the
	// journal) falls between them: it would leave the user in the backup
	// by its journal records alone, and a restore would bring back part of
	// an erased user.
	s.writes.Lock()
	journal, err := s.wal.snapshot(time.Now().Unix())
	var txn *badger.Txn
	if err == nil {
		if betweenBackupSnapshots != nil {
			betweenBackupSnapshots()
		}
		txn = s.db.NewTransaction(false)
	}
	s.writes.Unlock()
	if err != nil {
		return nil, opErr("backup", err)
	}
	defer txn.Discard()
	hdr := binary.AppendUvarint(append([]byte(nil), backupMagic...), FormatVersion)
	if _, err := w.Write(hdr); err != nil {
		return nil, opErr("backup", err)
	}
	lists := &countingWriter{w: w}
	// Journal records travel as journal keys of format 1, in lists of the
	// same stream format, so every backup reads back the same way. They
	// come before the filters, so that a merging restore has a user's
	// records at hand when it meets the user's filter (see Restore); a
	// build that restores them after reads either order alike.
	for len(journal) > 0 {
		n := min(len(journal), restoreChunkKeys)
		list := &pb.KVList{}
		for _, kv := range journal[:n] {
			list.Kv = append(list.Kv, &pb.KV{Key: kv.key, Value: kv.value, ExpiresAt: kv.expiresAt, Version: 1})
		}
		journal = journal[n:]
		if err := writeList(lists, list); err != nil {
			return nil, opErr("backup", err)
		}
	}
	skipped, err = backupKeys(txn, lists, skipDamaged)
	if err == nil && len(skipped) > 0 {
		err = writeSkipped(lists, skipped)
	}
	if err != nil {
		if lists.err == nil {
			// The store failed, not w: the stream ends saying so. (w's
			// own failure leaves it cut short; nothing could be added.)
			writeStop(w, err)
		}
		return nil, opErr("backup", err)
	}
	end := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, backupEnd), lists.n)
	end = binary.LittleEndian.AppendUint64(end, uint64(lists.crc))
	if _, err := lists.w.Write(end); err != nil {
		return nil, opErr("backup", err)
	}
	return skipped, nil
}

// betweenBackupSnapshots, if set, runs between a backup's reading of the
// journal and its opening of the read snapshot; tests set it to erase
// a user there.
var betweenBackupSnapshots func()

// backupListBytes is about how many bytes of keys and values a list of a
// backup holds: what Backup keeps in memory at a time, twice over (the
// list and its encoding).
const backupListBytes = 1 << 20

// backupKeys writes the store's live keys (every filter, cover mark and
// meta key; the journal goes apart), each at its latest version, as of the
// read transaction txn, in lists of about backupListBytes. Badger's own backup
// (its Stream) reads with 8 goroutines into buffers of 32 MiB and queues
// up to 32 of them for the writer: with a client reading at 64 MB/s the
// heap grew by 1.2 GB for a store of 250 MB. One iterator here keeps
// about two lists. Deleted and expired keys go into no backup: a user
// erased before it (Delete) is not named in it. With skipDamaged, a
// user's filter that cannot be read is left out and returned.
func backupKeys(txn *badger.Txn, w io.Writer, skipDamaged bool) (skipped []SkippedUser, err error) {
	// No values read ahead: Badger's default reads the next 100, which
	// for filters of a MiB is 100 MiB held besides the list.
	it := txn.NewIterator(badger.IteratorOptions{})
	defer it.Close()
	list, size := &pb.KVList{}, 0
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if item.IsDeletedOrExpired() {
			continue
		}
		// Badger reads a value whose checksum fails as empty, without an
		// error: a backup would carry it so, as if nothing were wrong,
		// and restore it as an empty value. The damage is the backup's
		// error, naming the user (an erase or a replacing import of the
		// user repairs it).
		value, err := readValue(item)
		if err != nil {
			ns, user, ok := parseFilterKey(item.Key())
			switch {
			case !ok:
				return nil, fmt.Errorf("key %q: %w", item.Key(), err)
			case skipDamaged:
				skipped = append(skipped, SkippedUser{NS: string(ns), User: string(user), Reason: unprefixed(err)})
				continue
			}
			return nil, &UserError{NS: string(ns), User: string(user), Err: err}
		}
		key := item.KeyCopy(nil)
		list.Kv = append(list.Kv, &pb.KV{Key: key, Value: value, UserMeta: []byte{item.UserMeta()},
			Version: item.Version(), ExpiresAt: item.ExpiresAt()})
		if size += len(key) + len(value); size >= backupListBytes {
			if err := writeList(w, list); err != nil {
				return nil, err
			}
			list, size = &pb.KVList{}, 0
		}
	}
	if len(list.Kv) == 0 {
		return skipped, nil
	}
	return skipped, writeList(w, list)
}

// writeSkipped writes a backup's skip mark, naming the users it left out
// (see backupMagic), to lists, which the end mark counts.
func writeSkipped(lists io.Writer, skipped []SkippedUser) error {
	rec, err := json.Marshal(backupStop{Skipped: skipped, Reason: fmt.Sprintf(
		"damaged users were left out of it on request (skip_damaged: %d users), which this build cannot name; "+
			"restore it with a build that reads such a backup", len(skipped))})
	switch {
	case err != nil:
		return err
	case len(rec) > maxBackupSkip:
		return fmt.Errorf("%d damaged users: more than a backup can name", len(skipped))
	}
	head := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, backupStopped), uint64(len(rec)))
	_, err = lists.Write(append(head, rec...))
	return err
}

// writeStop ends a backup, at a list's end, with a stop mark saying that
// err stopped it, naming the user of a *UserError. A failure to write it
// leaves the stream cut short, which is refused as well.
func writeStop(w io.Writer, err error) {
	stop := backupStop{Reason: unprefixed(err)}
	if ue := (*UserError)(nil); errors.As(err, &ue) {
		stop.NS, stop.User, stop.Reason = ue.NS, ue.User, unprefixed(ue.Err)
	}
	rec, jerr := json.Marshal(stop)
	if jerr != nil || len(rec) > maxBackupStop {
		return
	}
	head := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, backupStopped), uint64(len(rec)))
	w.Write(append(head, rec...)) // a failure: see above
}

// readBackupStop reads the rest of a stop mark: of a skip mark, the users
// it names and its bytes after the marker (rec, which the end mark
// counts); else the *BackupStoppedError it records.
func readBackupStop(br *bufio.Reader, src *sourceReader) (skipped []SkippedUser, rec []byte, err error) {
	var head [8]byte
	if _, err := io.ReadFull(br, head[:]); err != nil {
		if src.err != nil {
			return nil, nil, src.failed("its stop mark")
		}
		return nil, nil, fmt.Errorf("%w: the backup is cut short (in its stop mark)", ErrBadBackup)
	}
	n := binary.LittleEndian.Uint64(head[:])
	if n > maxBackupSkip {
		return nil, nil, fmt.Errorf("%w: stop mark of %d bytes", ErrBadBackup, n)
	}
	rec = make([]byte, 8+n)
	copy(rec, head[:])
	if _, err := io.ReadFull(br, rec[8:]); err != nil {
		if src.err != nil {
			return nil, nil, src.failed("its stop mark")
		}
		return nil, nil, fmt.Errorf("%w: the backup is cut short (in its stop mark)", ErrBadBackup)
	}
	var stop backupStop
	if err := json.Unmarshal(rec[8:], &stop); err != nil {
		return nil, nil, fmt.Errorf("%w: stop mark: %w", ErrBadBackup, err)
	}
	if len(stop.Skipped) > 0 {
		return stop.Skipped, rec, nil
	}
	return nil, nil, &BackupStoppedError{NS: stop.NS, User: stop.User, Reason: stop.Reason}
}

// writeList writes one list of a backup: its length (uint64 little-endian),
// then the list.
func writeList(w io.Writer, list *pb.KVList) error {
	buf, err := proto.Marshal(list)
	if err != nil {
		return err
	}
	if _, err := w.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(buf)))); err != nil {
		return err
	}
	_, err = w.Write(buf)
	return err
}

// restoreKV is one key of a backup being restored.
type restoreKV struct {
	key, value []byte
	expiresAt  uint64
	// Of a filter merged with a fold: the backup's records of the user,
	// and the filter's cover mark in the source (0: none).
	journal []JournalEntry
	mark    uint64
}

// Restore adds the filters and journal entries of a backup made by Backup
// to the store, which may be empty or not and may be in use. A restored
// filter replaces the stored one, or with merge non-nil is merged into it
// as in WriteBack, and keeps the stored one's cover mark, as a write-back
// does: the records this store covered stay covered. Restored journal
// entries get new sequence numbers (the store's own cover marks count its
// own numbers); one the user holds already, value for value, is not added
// twice. Entries already expired are skipped; the others keep their
// expiry.
//
// With merge and fold non-nil, a stored filter that has journal records
// after its cover mark (calls not written back, as after a crash) is
// merged with those records folded into it: the calls ran on that filter,
// and their records replayed onto the union could fill and seal its layers
// at other points, so that an item a call found seen (a false positive it
// did not record) would test unseen. So is the backup's filter with the
// backup's records of the user, which a backup holds before its filters
// (those of backups of earlier builds, which hold them after, are
// replayed onto the union as before); Restore keeps them in memory until
// the user's filter comes, as Backup held them. The records of both sides
// stay in the journal: replayed onto the union, which holds each of their
// items, they add nothing, and a crash during the restore loses none of
// them.
//
// Restore is not atomic: on error, part of the backup may be restored, and
// running it again is safe. A stream that is not a backup, or is cut short,
// fails with ErrBadBackup; one of a newer format with ErrFormatVersion; a
// read of r that fails otherwise, with r's error.
// Users whose merge failed are named in a *WriteBackError.
func (s *Store) Restore(r io.Reader, merge MergeFunc, fold FoldFunc) error {
	if err := s.enterWrite(); err != nil {
		return opErr("restore", err)
	}
	defer s.leave()
	s.unknownWrite(0) // what it writes is nobody's load
	var (
		failed  []UserError
		pending []restoreKV
		size    int
		prevKey []byte
		now     = uint64(time.Now().Unix())
		// The backup's journal records by user (filter key), kept for a
		// merge with a fold until the user's filter comes: a backup of
		// this build holds them before the filters (one of an earlier
		// build after them, and its records are not folded).
		journals = map[string][]JournalEntry{}
		folding  = merge != nil && fold != nil
	)
	flush := func() error {
		for len(pending) > 0 {
			n, userErrs, err := s.restoreSome(pending, merge, fold)
			failed = append(failed, userErrs...)
			if err != nil {
				return err
			}
			pending = pending[n:]
		}
		pending, size = pending[:0], 0
		return nil
	}
	_, err := readBackup(r, func(list *pb.KVList) error {
		for _, kv := range list.Kv {
			if bytes.Equal(kv.Key, prevKey) {
				continue // an older version of the key just restored
			}
			prevKey = kv.Key
			if !live(kv, now) {
				continue
			}
			if err := checkBackupKey(kv.Key); err != nil {
				return err
			}
			if kv.Key[0] == prefixMeta || kv.Key[0] == prefixCover {
				// The header carried the format version; cover marks count
				// the source store's journal numbers, not this one's.
				continue
			}
			if goneValue(kv) {
				continue
			}
			value := kv.Value
			var mark uint64
			if kv.Key[0] == prefixFilter && len(kv.UserMeta) > 0 {
				// The source's cover mark counts its journal numbers:
				// the filter alone is restored.
				var err error
				if value, mark, err = splitCoverMark(value, kv.UserMeta[0]); err != nil {
					return fmt.Errorf("%w: %w", ErrBadBackup, err)
				}
			}
			var journal []JournalEntry
			switch {
			case !folding:
			case kv.Key[0] == prefixJournal:
				ns, user, seq, _ := parseJournalKey(kv.Key)
				k := string(filterKey(nil, string(ns), string(user)))
				journals[k] = append(journals[k], JournalEntry{Seq: seq, Value: bytes.Clone(kv.Value)})
			case kv.Key[0] == prefixFilter:
				journal = journals[string(kv.Key)]
				delete(journals, string(kv.Key))
			}
			pending = append(pending, restoreKV{key: kv.Key, value: value, expiresAt: kv.ExpiresAt, journal: journal, mark: mark})
			size += len(kv.Key) + len(kv.Value)
			if len(pending) >= restoreChunkKeys || size >= restoreChunkBytes {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return opErr("restore", err)
	}
	if err := flush(); err != nil {
		return opErr("restore", err)
	}
	if len(failed) > 0 {
		return &WriteBackError{Failed: failed}
	}
	return nil
}

// BackupContents is what a backup holds, as VerifyBackup counts it: what
// Restore would bring back.
type BackupContents struct {
	Filters int // users' stored filters (not the Empty values of gone users)
	// Of Filters, those VerifyBackup's Hidden hides whose user has no
	// journal record in the backup: restored as they are, but not listed
	// as users (see Store.Users), so that Filters less NoHistory is what a
	// listing of the users restored counts from their filters.
	NoHistory      int
	JournalRecords int // impressions recorded since their user's last write-back
	// The users left out, their filters damaged (BackupSkippingDamaged):
	// a restore brings back their journal records alone.
	Skipped []SkippedUser
}

// VerifyBackup reads a backup stream through without restoring it and says
// what it holds: a nil error if it is a whole backup this build can
// restore, else the error Restore would meet (ErrBadBackup,
// ErrFormatVersion, or r's own) before writing anything. The filters hide
// hides, of users without journal records in it, are counted apart
// (NoHistory) as well: a listing leaves them out.
func VerifyBackup(r io.Reader, hide Hidden) (BackupContents, error) {
	now := uint64(time.Now().Unix())
	var c BackupContents
	var prevKey []byte
	// By filter key: the hidden filters, and the users with journal
	// records, which a listing shows whatever their filter (a backup of
	// this build holds the records first, one of an earlier build after).
	hidden, journaled := map[string]bool{}, map[string]bool{}
	skipped, err := readBackup(r, func(list *pb.KVList) error {
		for _, kv := range list.Kv {
			if bytes.Equal(kv.Key, prevKey) {
				continue // an older version of the key just read, as Restore skips it
			}
			prevKey = append(prevKey[:0], kv.Key...)
			if !live(kv, now) {
				continue
			}
			if err := checkBackupKey(kv.Key); err != nil {
				return err
			}
			switch kv.Key[0] {
			case prefixFilter:
				if goneValue(kv) { // Restore leaves it out
					continue
				}
				c.Filters++
				if hide.Is == nil || len(kv.Value) > hide.MaxBytes+coverMarkLen {
					continue
				}
				var meta byte
				if len(kv.UserMeta) > 0 {
					meta = kv.UserMeta[0]
				}
				if filter, _, err := splitCoverMark(kv.Value, meta); err == nil && hide.hidesFilter(filter) {
					hidden[string(kv.Key)] = true
				}
			case prefixJournal:
				c.JournalRecords++
				if hide.Is != nil {
					ns, user, _, _ := parseJournalKey(kv.Key)
					journaled[string(filterKey(nil, string(ns), string(user)))] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return BackupContents{}, opErr("backup", err)
	}
	for k := range hidden {
		if !journaled[k] {
			c.NoHistory++
		}
	}
	c.Skipped = skipped
	return c, nil
}

// goneValue reports whether a backed-up key is a gone user's Empty value
// (see Write.Empty), kept in the source for its cover mark only, which
// counts the source's journal numbers: Restore leaves it out.
func goneValue(kv *pb.KV) bool {
	return kv.Key[0] == prefixFilter && len(kv.UserMeta) > 0 && kv.UserMeta[0]&metaEmpty != 0
}

// live reports whether a backed-up key is neither deleted nor expired.
func live(kv *pb.KV, now uint64) bool {
	return !(len(kv.Meta) > 0 && kv.Meta[0]&1 != 0 || kv.ExpiresAt != 0 && kv.ExpiresAt <= now)
}

// readBackup reads a backup stream: the header, each list in turn (passed
// to each, which may keep nothing of it), then the end mark, and returns
// the users its skip mark names (see backupMagic).
func readBackup(r io.Reader, each func(*pb.KVList) error) (skipped []SkippedUser, err error) {
	src := &sourceReader{r: r}
	br := bufio.NewReaderSize(src, 64<<10)
	version, err := readBackupHeader(br, src)
	if err != nil {
		return nil, err
	}
	var (
		buf  []byte
		read uint64 // bytes of the lists (and skip mark) so far
		sum  uint32 // and their CRC-32C
		head [8]byte
	)
	for {
		if _, err := io.ReadFull(br, head[:]); err != nil {
			switch {
			case src.err != nil:
				return nil, src.failed("a list's length")
			case errors.Is(err, io.EOF) && version == 0:
				return nil, nil
			case errors.Is(err, io.EOF):
				return nil, fmt.Errorf("%w: the backup is cut short (no end mark)", ErrBadBackup)
			}
			return nil, fmt.Errorf("%w: the backup is cut short (in a list's length)", ErrBadBackup)
		}
		n := binary.LittleEndian.Uint64(head[:])
		switch {
		case skipped != nil && n != backupEnd:
			return nil, fmt.Errorf("%w: no end mark after the skip mark", ErrBadBackup)
		case n == backupEnd && version > 0:
			return skipped, readBackupEnd(br, src, version, read, sum)
		case n == backupStopped && version > 0:
			var rec []byte
			if skipped, rec, err = readBackupStop(br, src); err != nil {
				return nil, err
			}
			read += 8 + uint64(len(rec))
			sum = crc32.Update(crc32.Update(sum, backupCRC, head[:]), backupCRC, rec)
			continue
		}
		read += 8 + n
		sum = crc32.Update(sum, backupCRC, head[:])
		if n > maxBackupList {
			return nil, fmt.Errorf("%w: list of %d bytes", ErrBadBackup, n)
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			if src.err != nil {
				return nil, src.failed("a list")
			}
			return nil, fmt.Errorf("%w: the backup is cut short (in a list of %d bytes)", ErrBadBackup, n)
		}
		sum = crc32.Update(sum, backupCRC, buf)
		list := &pb.KVList{}
		if err := proto.Unmarshal(buf, list); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadBackup, err)
		}
		if err := each(list); err != nil {
			return nil, err
		}
	}
}

// readBackupHeader reads a backup's header and returns the stream's
// version: 0 (no end mark), 1 (an end mark without a checksum) or 2 (an
// end mark with one).
func readBackupHeader(br *bufio.Reader, src *sourceReader) (version int, err error) {
	magic := make([]byte, len(backupMagic))
	if n, err := io.ReadFull(br, magic); err != nil {
		switch {
		case src.err != nil:
			return 0, src.failed("its header")
		case n == 0:
			return 0, fmt.Errorf("%w: no seenapi backup header: the stream is empty", ErrBadBackup)
		case bytes.HasPrefix(backupMagic, magic[:n]) || bytes.HasPrefix(backupMagicV0, magic[:n]):
			return 0, fmt.Errorf("%w: the stream ends in its header, after %d bytes", ErrBadBackup, n)
		}
		return 0, fmt.Errorf("%w: no seenapi backup header", ErrBadBackup)
	}
	switch {
	case bytes.Equal(magic, backupMagic):
		version = 1
	case !bytes.Equal(magic, backupMagicV0):
		return 0, fmt.Errorf("%w: no seenapi backup header", ErrBadBackup)
	}
	ver, err := binary.ReadUvarint(br)
	switch {
	case err != nil && src.err != nil:
		return 0, src.failed("its format version")
	case err != nil:
		return 0, fmt.Errorf("%w: format version: %w", ErrBadBackup, err)
	case ver == 0 || ver > FormatVersion:
		return 0, fmt.Errorf("%w: backup in format version %d, this build supports %d", ErrFormatVersion, ver, FormatVersion)
	}
	if version == 1 && ver >= checksumFormat {
		version = 2
	}
	return version, nil
}

// readBackupEnd reads the rest of the end mark, which must count read bytes
// of lists, in a stream of version 2 give their checksum sum, and end the
// stream.
func readBackupEnd(br *bufio.Reader, src *sourceReader, version int, read uint64, sum uint32) error {
	var n uint64
	if err := binary.Read(br, binary.LittleEndian, &n); err != nil {
		if src.err != nil {
			return src.failed("its end mark")
		}
		return fmt.Errorf("%w: the backup is cut short (in its end mark)", ErrBadBackup)
	}
	if n != read {
		return fmt.Errorf("%w: the end mark counts %d bytes of lists, the stream had %d", ErrBadBackup, n, read)
	}
	if version >= 2 {
		var want uint64
		if err := binary.Read(br, binary.LittleEndian, &want); err != nil {
			if src.err != nil {
				return src.failed("its end mark")
			}
			return fmt.Errorf("%w: the backup is cut short (in its end mark)", ErrBadBackup)
		}
		if want != uint64(sum) {
			return fmt.Errorf("%w: the backup's checksum does not match its contents (a byte changed since it was written)", ErrBadBackup)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		if src.err != nil {
			return src.failed("its end")
		}
		return fmt.Errorf("%w: bytes after the end mark", ErrBadBackup)
	}
	return nil
}

// sourceReader keeps the first error of the reader of a backup stream
// other than its end (io.EOF, io.ErrUnexpectedEOF): a read that fails so,
// a disk's I/O error or a connection reset during a download, says nothing
// of the backup, and is reported as what it is (see failed) rather than as
// a bad backup, which would send its user to look at a file that may be
// whole.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && s.err == nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		s.err = err
	}
	return n, err
}

// failed is the error of a read of the stream's what (its header, a list,
// ...) that met the reader's error.
func (s *sourceReader) failed(what string) error {
	return fmt.Errorf("reading the backup, in %s: %w", what, s.err)
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
func (s *Store) restoreSome(kvs []restoreKV, merge MergeFunc, fold FoldFunc) (int, []UserError, error) {
	limit := len(kvs)
	for attempt := 0; ; {
		failed, n, err := s.restoreTxn(kvs[:limit], merge, fold)
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
func (s *Store) restoreTxn(kvs []restoreKV, merge MergeFunc, fold FoldFunc) (failed []UserError, n int, err error) {
	s.writes.RLock()
	defer s.writes.RUnlock()
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	for i, kv := range kvs {
		key, value, expiresAt := kv.key, kv.value, kv.expiresAt
		var mark uint64 // the stored filter's cover mark, kept (see below)
		switch key[0] {
		case prefixFilter:
			item, err := txn.Get(key)
			if errors.Is(err, badger.ErrKeyNotFound) {
				break
			}
			// The stored filter's cover mark still holds for the records
			// this store's write-backs covered, which may outlive them in
			// a journal segment kept for others: the restored value ends
			// with it too, as a write-back's that replaces the filter
			// does, so that a restart does not replay them into it (a
			// forgotten item, or a history an import replaced, would come
			// back). Unreadable, it counts as none (see prepare).
			if merge == nil {
				if err == nil {
					mark = storedMark(item)
				}
				break
			}
			ns, user, _ := parseFilterKey(key)
			if err == nil {
				var stored, merged []byte
				if stored, mark, err = readFilter(item); err == nil {
					stored = s.foldPending(string(ns), string(user), stored, mark, kv.journal, fold)
					merged, err = merge(stored, s.foldBackup(string(ns), string(user), value, kv.journal, kv.mark, fold))
				}
				if err == nil && !bytes.Equal(merged, value) {
					// The union holds the stored filter's items too (in a
					// windowed namespace, maybe of newer time buckets than
					// the backup's): it lasts as long as the longer-lived
					// of the two. The backup's value as it is (covering
					// the stored one, or replacing it) keeps its own.
					expiresAt = laterExpiry(expiresAt, item.ExpiresAt())
				}
				value = merged
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
		if key[0] == prefixFilter && int64(len(value)) > s.MaxValueBytes() {
			// Refused for this user alone, as by WriteBack, which could
			// not write the user back either.
			ns, user, _ := parseFilterKey(key)
			failed = append(failed, UserError{NS: string(ns), User: string(user), Err: s.tooLarge(len(value))})
			continue
		}
		var meta byte
		if mark > 0 {
			value, meta = binary.BigEndian.AppendUint64(slices.Clip(value), mark), metaCoverMark
		}
		if err := txn.SetEntry(&badger.Entry{Key: key, Value: value, ExpiresAt: expiresAt, UserMeta: meta}); err != nil {
			return nil, i, err
		}
	}
	return failed, len(kvs), txn.Commit()
}

// foldPending returns the user's stored filter with its journal records
// after mark folded in by fold (see Restore), or the filter as stored if
// there are none, fold is nil, or it fails (the records are then replayed
// onto the merge, as before folding was done). The backup's records of
// the user (restored), whose calls ran on the backup's filter, are not
// folded in.
func (s *Store) foldPending(ns, user string, stored []byte, mark uint64, restored []JournalEntry, fold FoldFunc) []byte {
	if fold == nil {
		return stored
	}
	journal, err := s.wal.load(ns, user, time.Now().Unix())
	var folded []byte
	if err == nil {
		// Records the mark covers may still be live for a moment after a
		// write-back: the filter holds them.
		journal = slices.DeleteFunc(journal, func(j JournalEntry) bool {
			return j.Seq <= mark || slices.ContainsFunc(restored, func(r JournalEntry) bool { return bytes.Equal(r.Value, j.Value) })
		})
		if len(journal) == 0 {
			return stored
		}
		folded, err = safeFold(fold, stored, journal)
	}
	if err != nil {
		s.opts.Logger.Warn("storage: restore merges a stored filter without its journal records folded in",
			"ns", ns, "user", user, "err", err)
		return stored
	}
	return folded
}

// foldBackup returns the backup's filter of the user with the backup's
// records of the user (journal) after its cover mark in the source folded
// in by fold, or the filter as it is if there are none or the fold fails
// (the records, restored into the journal, are then replayed onto the
// merge, as before folding was done).
func (s *Store) foldBackup(ns, user string, value []byte, journal []JournalEntry, mark uint64, fold FoldFunc) []byte {
	// Records the mark covers, in the backup too when a write-back fell
	// between its two snapshots, are in the filter.
	journal = slices.DeleteFunc(slices.Clone(journal), func(j JournalEntry) bool { return j.Seq <= mark })
	if fold == nil || len(journal) == 0 {
		return value
	}
	folded, err := safeFold(fold, value, journal)
	if err != nil {
		s.opts.Logger.Warn("storage: restore merges a backup's filter without its journal records folded in",
			"ns", ns, "user", user, "err", err)
		return value
	}
	return folded
}

// safeFold calls fold, turning a panic in it (a bug met by one user's
// bytes) into an error, as safeMerge does for a merge.
func safeFold(fold FoldFunc, stored []byte, journal []JournalEntry) (folded []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fold(stored, journal)
}

// laterExpiry is the later of two Badger expiry times (0: never).
func laterExpiry(a, b uint64) uint64 {
	if a == 0 || b == 0 {
		return 0
	}
	return max(a, b)
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
