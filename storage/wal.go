package storage

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The journal lives in append-only segment files under <dir>/journal, not
// in Badger: an append is one write(2) of the whole group commit, nothing
// else. In Badger every record cost a memtable insert, a tombstone when it
// was covered and compaction work for both, and appends waited behind
// write-back transactions and memtable flushes (measured: about a third of
// the in-process CPU of a call, and stalls of hundreds of milliseconds).
//
// Segment file: walMagic, then records. Record:
//
//	uint32 LE payload length | uint32 LE CRC-32C of payload | payload
//	payload: kind (1 byte) | uvarint seq | uvarint len(ns) | ns | uvarint len(user) | user |
//	         varint expiresAt (unix seconds, 0: never) | value   (kind 'a': append)
//	         kind (1 byte) | uvarint seq | ns and user as above | uvarint upTo  (kind 'e': erase)
//
// An erase record says the user's records with seq <= upTo are void: it is
// written after a Delete (one for each user a namespace purge erases),
// which removes the filter and its cover mark with it, so records that
// were covered (no longer indexed) but still sit in a live segment cannot
// bring the user back when the journal is replayed after a crash. A
// replacing write-back (an import) needs none: it keeps the stored cover
// mark (see Store.prepare), or, voiding the user's journal (the stored
// value unreadable, Write.VoidJournal), stores a mark of a number of its
// own, past every record of the user.
//
// In memory the journal is an index from user to live records (segment,
// offset, length). A write-back or Delete drops the user's covered records
// from the index; a segment that is not the active one and holds no live
// record is deleted (one holding erase records only once it is the oldest,
// so the records it voids are gone first), by a goroutine of its own that
// deletes them in that order. After a restart every record in
// the remaining segments is live again: replaying a covered record into
// the filter that covers it changes nothing, since filters merge by union.
// A close with every record covered deletes every segment (see close).

const (
	walDir          = "journal"
	walSuffix       = ".wal"
	walMagic        = "seenwal1"
	walHeader       = 8 // length and checksum
	maxWALPayload   = 64 << 20
	defaultSegBytes = 64 << 20
	kindAppend      = 'a'
	kindErase       = 'e'
)

var walCRC = crc32.MakeTable(crc32.Castagnoli)

type segment struct {
	id     uint64
	f      *os.File
	size   int64
	live   int // indexed append records
	erases int // erase records
	// torn: a failed write left bytes past size that could not be cut off
	// yet (see cutLocked). w.mu held.
	torn bool
}

// walRec is one live append record.
type walRec struct {
	seq       uint64
	seg       *segment
	off       int64 // of the value within the segment file
	n         int32 // value length
	expiresAt int64
}

type wal struct {
	dir      string
	sync     bool
	segBytes int64
	logger   *slog.Logger

	mu     sync.RWMutex
	segs   []*segment // ascending id; the last is active
	index  walIndex
	maxSeq uint64 // highest seq seen
	buf    []byte
	offs   []int // write's offsets of the values in buf, reused

	// Dead segments are deleted by a goroutine of their own (removeLoop),
	// oldest first, not under mu: unlinking a 64 MiB segment took 14 ms
	// here, and every append waited for it.
	rm rmQueue
}

// rmQueue is the journal's segments waiting to be closed and deleted, in
// the order they were collected: a segment of erase records goes only
// after the older ones, as collectLocked requires.
type rmQueue struct {
	mu      sync.Mutex
	cond    sync.Cond
	segs    []*segment
	busy    bool // removeLoop is deleting one
	closed  bool
	stopped chan struct{}
	unlink  func(path string) error // os.Remove; tests slow it down
}

// walKeyBuf is room for the index key of most users on the stack: looking
// a user up in the index allocates nothing, and every append and every
// written-back user does (coverMark, cover).
type walKeyBuf [64]byte

// openWAL replays dir's segments into a new index, truncating a torn tail,
// and starts a new active segment.
func openWAL(dir string, sync bool, segBytes int64, logger *slog.Logger, now int64) (*wal, error) {
	w := &wal{dir: filepath.Join(dir, walDir), sync: sync, segBytes: segBytes, logger: logger, index: newWALIndex()}
	w.rm.cond.L = &w.rm.mu
	w.rm.stopped, w.rm.unlink = make(chan struct{}), os.Remove
	go w.removeLoop()
	if w.segBytes <= 0 {
		w.segBytes = defaultSegBytes
	}
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return nil, opErr("journal", err)
	}
	ents, err := os.ReadDir(w.dir)
	if err != nil {
		return nil, opErr("journal", err)
	}
	var ids []uint64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, walSuffix) {
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSuffix(name, walSuffix), 10, 64)
		if err != nil {
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for i, id := range ids {
		if err := w.replay(id, i == len(ids)-1, now); err != nil {
			w.close()
			return nil, err
		}
	}
	next := uint64(1)
	if len(ids) > 0 {
		next = ids[len(ids)-1] + 1
	}
	if err := w.rotate(next); err != nil {
		w.close()
		return nil, err
	}
	w.collect()
	return w, nil
}

func (w *wal) segPath(id uint64) string {
	return filepath.Join(w.dir, fmt.Sprintf("%020d%s", id, walSuffix))
}

// replay reads one segment into the index. A damaged record ends the
// segment: in the last one it is a torn write and the file is truncated
// there; in an earlier one the rest is unreadable and reported.
func (w *wal) replay(id uint64, last bool, now int64) error {
	path := w.segPath(id)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return opErr("journal", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return opErr(fmt.Sprintf("journal: read %s", path), err)
	}
	seg := &segment{id: id, f: f, size: int64(len(data))}
	w.segs = append(w.segs, seg)
	if len(data) < len(walMagic) || string(data[:len(walMagic)]) != walMagic {
		w.logger.Warn("storage: journal segment without a header ignored", "file", path)
		seg.size = 0
		return nil
	}
	off := len(walMagic)
	for off < len(data) {
		n, ok := w.replayRecord(seg, data, off, now)
		if ok {
			off += n
			continue
		}
		if next, ok := nextIntact(data, off); ok {
			// Damage, not a torn write: the records after it are other
			// calls, acknowledged, maybe of other users.
			w.logger.Error("storage: journal record damaged; skipping it, a call's record is lost", "file", path,
				"offset", off, "bytes_skipped", next-off)
			off = next
			continue
		}
		if last {
			w.logger.Warn("storage: journal ends in a torn write; truncating it", "file", path,
				"offset", off, "bytes_dropped", len(data)-off)
			if err := f.Truncate(int64(off)); err != nil {
				return opErr(fmt.Sprintf("journal: truncate %s", path), err)
			}
		} else {
			w.logger.Error("storage: journal segment damaged at its end; the records there are lost",
				"file", path, "offset", off, "bytes", len(data)-off)
		}
		seg.size = int64(off)
		break
	}
	return nil
}

// nextIntact returns the offset of the first intact record after the
// damaged one at data[off:], or false if none follows (a torn write, which
// only ever ends a segment). The damaged record's length is tried first (a
// byte changed in its payload or checksum), then every offset after it (in
// its length), taking one only if what follows it reads intact too, so
// that bytes inside a record that happen to read as one are not replayed.
func nextIntact(data []byte, off int) (int, bool) {
	if len(data)-off >= walHeader {
		next := off + walHeader + int(binary.LittleEndian.Uint32(data[off:]))
		if next > off+walHeader && next < len(data) {
			if _, _, ok := readWALRecord(data, next); ok {
				return next, true
			}
		}
	}
	for next := off + 1; next < len(data); next++ {
		if _, p, ok := readWALRecord(data, next); ok {
			if end := next + walHeader + len(p); end == len(data) {
				return next, true
			} else if _, _, ok := readWALRecord(data, end); ok {
				return next, true
			}
		}
	}
	return 0, false
}

// replayRecord indexes the record at data[off:] and returns its length, or
// false if it is damaged or cut short.
func (w *wal) replayRecord(seg *segment, data []byte, off int, now int64) (int, bool) {
	r, p, ok := readWALRecord(data, off)
	if !ok {
		return 0, false
	}
	n := len(p)
	w.maxSeq = max(w.maxSeq, r.seq)
	var kb walKeyBuf
	key := filterKey(kb[:0], r.ns, r.user)
	switch r.kind {
	case kindAppend:
		if r.expiresAt != 0 && r.expiresAt <= now {
			break
		}
		seg.live++
		w.index.add(key, walRec{seq: r.seq, seg: seg,
			off: int64(off + walHeader + r.valueOff), n: int32(len(p) - r.valueOff), expiresAt: r.expiresAt})
	case kindErase:
		seg.erases++
		w.dropLocked(key, func(rec walRec) bool { return rec.seq <= r.upTo })
	}
	return walHeader + n, true
}

// readWALRecord parses the record at data[off:] and returns it with its
// payload, or false if it is damaged or cut short.
func readWALRecord(data []byte, off int) (walRecord, []byte, bool) {
	if len(data)-off < walHeader {
		return walRecord{}, nil, false
	}
	n := int(binary.LittleEndian.Uint32(data[off:]))
	if n > maxWALPayload || len(data)-off-walHeader < n {
		return walRecord{}, nil, false
	}
	// The checksum last: where a damaged record is looked past (see
	// nextIntact), most offsets fail the cheap parse first.
	p := data[off+walHeader : off+walHeader+n]
	r, ok := parseWALRecord(p)
	if !ok || crc32.Checksum(p, walCRC) != binary.LittleEndian.Uint32(data[off+4:]) {
		return walRecord{}, nil, false
	}
	return r, p, true
}

type walRecord struct {
	kind      byte
	seq       uint64
	ns, user  string
	expiresAt int64
	upTo      uint64
	valueOff  int // offset of the value in the payload (appends)
}

func parseWALRecord(p []byte) (r walRecord, ok bool) {
	if len(p) < 1 {
		return r, false
	}
	r.kind = p[0]
	i := 1
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(p[i:])
		if n <= 0 {
			return 0, false
		}
		i += n
		return v, true
	}
	str := func() (string, bool) {
		l, ok := uv()
		if !ok || l > uint64(len(p)-i) {
			return "", false
		}
		s := string(p[i : i+int(l)])
		i += int(l)
		return s, true
	}
	if r.seq, ok = uv(); !ok {
		return r, false
	}
	if r.ns, ok = str(); !ok || checkKey(r.ns, "u") != nil {
		return r, false
	}
	if r.user, ok = str(); !ok || checkKey(r.ns, r.user) != nil {
		return r, false
	}
	switch r.kind {
	case kindAppend:
		v, n := binary.Varint(p[i:])
		if n <= 0 {
			return r, false
		}
		r.expiresAt, i = v, i+n
		r.valueOff = i
	case kindErase:
		if r.upTo, ok = uv(); !ok {
			return r, false
		}
	default:
		return r, false
	}
	return r, true
}

// appendRecord encodes one record at the end of dst and returns it with the
// value's offset within the encoded record.
func appendRecord(dst []byte, kind byte, seq uint64, ns, user string, expiresAt int64, upTo uint64, value []byte) ([]byte, int) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, kind)
	dst = binary.AppendUvarint(dst, seq)
	dst = binary.AppendUvarint(dst, uint64(len(ns)))
	dst = append(dst, ns...)
	dst = binary.AppendUvarint(dst, uint64(len(user)))
	dst = append(dst, user...)
	valueOff := 0
	if kind == kindAppend {
		dst = binary.AppendVarint(dst, expiresAt)
		valueOff = len(dst) - start
		dst = append(dst, value...)
	} else {
		dst = binary.AppendUvarint(dst, upTo)
	}
	p := dst[start+walHeader:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(p)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(p, walCRC))
	return dst, valueOff
}

// walAppend is one append of a group commit.
type walAppend struct {
	seq       uint64
	ns, user  string
	expiresAt int64
	value     []byte
}

// write appends the records in one write (and one fsync with sync) and
// indexes them.
func (w *wal) write(recs []walAppend) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	buf := w.buf[:0]
	offs := w.offs[:0]
	for _, r := range recs {
		start := len(buf)
		var vo int
		buf, vo = appendRecord(buf, kindAppend, r.seq, r.ns, r.user, r.expiresAt, 0, r.value)
		offs = append(offs, start+vo)
	}
	w.buf, w.offs = buf[:0], offs[:0]
	seg, base, err := w.writeLocked(buf)
	if err != nil {
		return err
	}
	var kb walKeyBuf
	for i, r := range recs {
		w.index.add(filterKey(kb[:0], r.ns, r.user), walRec{seq: r.seq, seg: seg, off: base + int64(offs[i]),
			n: int32(len(r.value)), expiresAt: r.expiresAt})
		seg.live++
		w.maxSeq = max(w.maxSeq, r.seq)
	}
	return nil
}

// writeLocked writes buf at the end of the active segment, rotating first
// when it is full, and returns the segment and buf's offset in it. On
// error nothing of buf stays in the segment. w.mu held.
func (w *wal) writeLocked(buf []byte) (*segment, int64, error) {
	seg := w.segs[len(w.segs)-1]
	if seg.torn {
		// Before anything else, a rotation too: the segment's replay
		// would read the failed write's records past its end.
		if err := w.cutLocked(seg); err != nil {
			return nil, 0, err
		}
	}
	if seg.size > int64(len(walMagic)) && seg.size+int64(len(buf)) > w.segBytes {
		if err := w.rotate(seg.id + 1); err != nil {
			return nil, 0, err
		}
		w.collectLocked()
		seg = w.segs[len(w.segs)-1]
	}
	base := seg.size
	if _, err := seg.f.WriteAt(buf, base); err != nil {
		return nil, 0, w.failedLocked(seg, fmt.Errorf("journal write: %w", err))
	}
	if w.sync {
		if err := seg.f.Sync(); err != nil {
			return nil, 0, w.failedLocked(seg, fmt.Errorf("journal sync: %w", err))
		}
	}
	seg.size += int64(len(buf))
	return seg, base, nil
}

// failedLocked cuts a failed write off the end of seg (size is not moved)
// and returns err. A write that fails partway (ENOSPC, EFBIG) may leave
// whole records of its batch, whose callers are answered with an error,
// and the next write, if shorter, would not overwrite them all: a replay
// after a crash would add them. Should the cut fail, the segment takes no
// write until a later one succeeds. w.mu held.
func (w *wal) failedLocked(seg *segment, err error) error {
	if cerr := w.cutLocked(seg); cerr != nil {
		w.logger.Error("storage: a failed journal write could not be cut off; the journal takes no write until it is",
			"file", seg.f.Name(), "offset", seg.size, "error", cerr)
	}
	return err
}

// cutLocked truncates seg to its size (fsync'd with sync, so that a power
// loss does not bring the cut bytes back), setting seg.torn until it
// succeeds. w.mu held.
func (w *wal) cutLocked(seg *segment) error {
	err := seg.f.Truncate(seg.size)
	if err == nil && w.sync {
		err = seg.f.Sync()
	}
	seg.torn = err != nil
	if err != nil {
		return fmt.Errorf("journal: cut off a failed write: %w", err)
	}
	return nil
}

// rotate makes a new active segment. w.mu held (or w not yet shared).
func (w *wal) rotate(id uint64) error {
	path := w.segPath(id)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("journal: new segment: %w", err)
	}
	if _, err := f.Write([]byte(walMagic)); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("journal: new segment: %w", err)
	}
	if w.sync {
		err := f.Sync()
		if err == nil {
			err = syncDir(w.dir)
		}
		if err != nil {
			f.Close()
			os.Remove(path)
			return fmt.Errorf("journal: new segment: %w", err)
		}
	}
	w.segs = append(w.segs, &segment{id: id, f: f, size: int64(len(walMagic))})
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// eraseAll drops every record of each of users, all of ns, and writes
// for each an erase record (numbered from seq on, all in one write)
// voiding its records up to that number, so a replay after a crash reads
// none of them, nor the older, already covered ones.
func (w *wal) eraseAll(seq uint64, ns string, users []string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	buf := w.buf[:0]
	for i, user := range users {
		buf, _ = appendRecord(buf, kindErase, seq+uint64(i), ns, user, 0, seq+uint64(i), nil)
	}
	w.buf = buf[:0]
	seg, _, err := w.writeLocked(buf)
	if err != nil {
		return err
	}
	seg.erases += len(users)
	w.maxSeq = max(w.maxSeq, seq+uint64(len(users))-1)
	var kb walKeyBuf
	for _, user := range users {
		w.dropLocked(filterKey(kb[:0], ns, user), func(walRec) bool { return true })
	}
	w.collectLocked()
	return nil
}

// cover drops the user's records numbered up to upTo (covered by a
// write-back) and deletes the segments left without live records.
func (w *wal) cover(ns, user string, upTo uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var kb walKeyBuf
	w.dropLocked(filterKey(kb[:0], ns, user), func(r walRec) bool { return r.seq <= upTo })
	w.collectLocked()
}

func (w *wal) dropLocked(key []byte, drop func(walRec) bool) {
	w.index.drop(key, func(r walRec) bool {
		if drop(r) {
			r.seg.live--
			return true
		}
		return false
	})
}

func (w *wal) collect() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.collectLocked()
}

// collectLocked hands removeLoop every segment but the active one that
// holds no live record, and holds erase records only if it is the oldest.
// w.mu held.
func (w *wal) collectLocked() {
	kept := w.segs[:0]
	var dead []*segment
	for i, seg := range w.segs {
		oldest := len(kept) == 0
		if i < len(w.segs)-1 && seg.live == 0 && (seg.erases == 0 || oldest) {
			dead = append(dead, seg)
			continue
		}
		kept = append(kept, seg)
	}
	clear(w.segs[len(kept):])
	w.segs = kept
	if len(dead) > 0 {
		w.rm.mu.Lock()
		w.rm.segs = append(w.rm.segs, dead...)
		w.rm.cond.Broadcast()
		w.rm.mu.Unlock()
	}
}

// removeLoop closes and deletes the segments collectLocked hands it, one at
// a time in their order, until close has stopped it and none is left.
func (w *wal) removeLoop() {
	defer close(w.rm.stopped)
	q := &w.rm
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		for len(q.segs) == 0 && !q.closed {
			q.cond.Wait()
		}
		if len(q.segs) == 0 {
			return
		}
		seg := q.segs[0]
		q.segs[0] = nil
		q.segs = q.segs[1:]
		q.busy = true
		q.mu.Unlock()
		seg.f.Close()
		if err := q.unlink(w.segPath(seg.id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.logger.Warn("storage: cannot delete a journal segment", "err", err)
		}
		q.mu.Lock()
		q.busy = false
		q.cond.Broadcast()
	}
}

// load returns copies of the user's live records that have not expired.
func (w *wal) load(ns, user string, now int64) ([]JournalEntry, error) {
	var out []JournalEntry
	err := w.readLive(ns, user, now, func(r walRec, v []byte) {
		out = append(out, JournalEntry{Seq: r.seq, Value: v})
	})
	return out, err
}

// readLive calls fn with each of the user's live records that has not
// expired and a copy of its value, in sequence order, under the read lock.
func (w *wal) readLive(ns, user string, now int64, fn func(walRec, []byte)) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	var kb walKeyBuf
	recs := slices.Collect(w.index.records(filterKey(kb[:0], ns, user)))
	slices.SortFunc(recs, func(a, b walRec) int { return cmp.Compare(a.seq, b.seq) })
	for _, r := range recs {
		if r.expiresAt != 0 && r.expiresAt <= now {
			continue
		}
		v := make([]byte, r.n)
		if _, err := r.seg.f.ReadAt(v, r.off); err != nil {
			return fmt.Errorf("%w: journal entry %d: %w", ErrCorrupt, r.seq, err)
		}
		fn(r, v)
	}
	return nil
}

// coverMark returns the highest sequence number of the user's records up
// to upTo (0: none): the cover mark a write-back stores with the filter, so
// a replay after a restart skips what the filter holds.
func (w *wal) coverMark(ns, user string, upTo uint64) uint64 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	var mark uint64
	var kb walKeyBuf
	for r := range w.index.records(filterKey(kb[:0], ns, user)) {
		if r.seq <= upTo {
			mark = max(mark, r.seq)
		}
	}
	return mark
}

// hasValue reports whether any live record of the user holds value.
func (w *wal) hasValue(ns, user string, value []byte) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	var kb walKeyBuf
	for r := range w.index.records(filterKey(kb[:0], ns, user)) {
		if int(r.n) != len(value) {
			continue
		}
		v := make([]byte, r.n)
		if _, err := r.seg.f.ReadAt(v, r.off); err == nil && bytes.Equal(v, value) {
			return true
		}
	}
	return false
}

// users returns the (ns, user) pairs with live records, in key order.
func (w *wal) users() [][2]string {
	w.mu.RLock()
	keys := w.index.keys()
	w.mu.RUnlock()
	slices.Sort(keys)
	out := make([][2]string, 0, len(keys))
	for _, k := range keys {
		if ns, user, ok := parseFilterKey([]byte(k)); ok {
			out = append(out, [2]string{string(ns), string(user)})
		}
	}
	return out
}

// usersOf returns the users of ns with journal entries that sort after
// after, sorted; with now > 0, only those with an entry not expired at now
// (unix seconds): a user whose records all expired unread has nothing a
// load would find.
func (w *wal) usersOf(ns, after string, now int64) []string {
	prefix := string(appendNSPrefix(nil, prefixFilter, ns))
	var out []string
	w.mu.RLock()
	for k := range w.index.slots { // only this namespace's, not a copy of every key
		user, ok := strings.CutPrefix(k, prefix)
		if !ok || user <= after {
			continue
		}
		if now > 0 && !w.anyLiveLocked(k, now) {
			continue
		}
		out = append(out, user)
	}
	w.mu.RUnlock()
	slices.Sort(out)
	return out
}

// anyLiveLocked reports whether the user of key has a record not expired
// at now. mu held.
func (w *wal) anyLiveLocked(key string, now int64) bool {
	for r := range w.index.records([]byte(key)) {
		if r.expiresAt == 0 || r.expiresAt > now {
			return true
		}
	}
	return false
}

// snapshot returns every live record as a journal key and value, for a
// backup.
func (w *wal) snapshot(now int64) ([]restoreKV, error) {
	var out []restoreKV
	for _, u := range w.users() {
		err := w.readLive(u[0], u[1], now, func(r walRec, v []byte) {
			out = append(out, restoreKV{key: journalKey(nil, u[0], u[1], r.seq), value: v,
				expiresAt: uint64(max(r.expiresAt, 0))})
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (w *wal) close() error {
	w.rm.mu.Lock()
	w.rm.closed = true
	w.rm.cond.Broadcast()
	w.rm.mu.Unlock()
	<-w.rm.stopped
	w.mu.Lock()
	defer w.mu.Unlock()
	// A journal whose every record is covered (a clean stop wrote every
	// user back) has nothing left to replay: its segments go, so that the
	// next start reads none, and an earlier build started on the data
	// directory (a rollback) meets no record of a later form. Sequence
	// numbers go on from the lease in Badger, not from the segments.
	covered := w.index.len() == 0
	var errs []error
	for _, s := range w.segs {
		if w.sync && !covered {
			errs = append(errs, s.f.Sync())
		}
		errs = append(errs, s.f.Close())
		if covered {
			if err := os.Remove(w.segPath(s.id)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	w.segs = nil
	return errors.Join(errs...)
}

// maxSeqSeen is the highest sequence number in the journal.
func (w *wal) maxSeqSeen() uint64 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.maxSeq
}
