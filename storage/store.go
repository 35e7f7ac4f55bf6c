package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// maxConflictRetries bounds how often a transaction that lost a conflict
// with a concurrent one (same user) is retried.
const maxConflictRetries = 16

// seqLease is how many journal sequence numbers are reserved on disk at a
// time; a restart skips what was reserved but unused (numbers are 64-bit:
// gaps cost nothing). Large, so that renewals are rare and the one ahead
// has minutes to land even when Badger stalls its writes under load.
const seqLease = 1 << 26

// Store is the Badger store of user filters and journal records. All its
// methods are safe for concurrent use.
type Store struct {
	db   *badger.DB
	opts Options

	// mu guards closed: every call holds it for reading while it runs,
	// Close takes it for writing.
	mu     sync.RWMutex
	closed bool

	appends    chan *appendReq
	writerDone chan struct{}
	stop       chan struct{}
	loops      sync.WaitGroup

	full atomic.Bool  // free space below MinFreeBytes, or a write met a full disk
	free atomic.Int64 // free bytes at the last check
	// noSpace: full was set by a write that met a full disk (ENOSPC), and
	// no check has found free space above MinFreeBytes since. It tells the
	// refusals of the disk from those of the floor (errFull).
	noSpace atomic.Bool

	// writes is held for reading by every write to Badger once the store
	// is open, and for writing by flushMemtables, while Badger refuses
	// writes (ErrBlockedWrites), and by Backup while it takes its two
	// snapshots (the journal's and Badger's). Never taken again by its holder: the
	// journal lease's write, which a holder may need, retries instead.
	writes sync.RWMutex
	gcBase atomic.Int64 // Size() at Open and whenever value-log GC reclaimed space since (see runGC)

	wal *wal // the journal (see wal.go)

	// adviceFailed: the kernel refused adviseValueLog's advice, logged
	// once. Set by Open, then by releaseLoop alone.
	adviceFailed bool
	// releasing: the value log's pages are released (ReleaseInterval on,
	// and no release has failed), by releaseLoop and after each file
	// value-log GC rewrites.
	releasing atomic.Bool

	crashed   bool        // see OpenedAfterCrash
	keepCrash atomic.Bool // see KeepCrashMark

	// The writers of filters (Attach). writersMu is held for reading by a
	// write-back from its check of the token through its commit, and for
	// writing by whatever changes the token.
	writersMu sync.RWMutex
	writers   int           // attached writers; guarded by writersMu
	gen       uint64        // the last token handed out; guarded by writersMu
	token     atomic.Uint64 // the only attached writer's token while it may skip reads; 0: none may

	leaseMu   sync.Mutex // serializes lease writes, so the lease on disk only grows
	renewing  atomic.Bool
	seqMu     sync.Mutex
	nextSeq   uint64 // next journal sequence number to hand out
	leasedSeq uint64 // highest sequence number reserved on disk
}

// Open opens (or creates) the store in opts.Dir. It checks the store's
// format version and refuses, with ErrFormatVersion, a store written by a
// newer seenapi.
func Open(opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	// Badger would say it "cannot write pid file" in a path that is a file.
	if fi, err := os.Stat(opts.Dir); err == nil && !fi.IsDir() {
		return nil, opErr("open "+opts.Dir, syscall.ENOTDIR)
	}
	// A store kept in its format is only read (an offline backup): a
	// directory that holds none, a mistyped or wrong --data-dir, is not
	// made into an empty store whose backup would look like success.
	if opts.KeepFormat {
		if _, err := os.Stat(filepath.Join(opts.Dir, badger.ManifestFilename)); err != nil {
			return nil, opErr("open "+opts.Dir, ErrNoStore)
		}
	}
	if err := prepareBadgerDir(opts.Dir); err != nil {
		return nil, opErr("open "+opts.Dir, err)
	}
	db, err := badger.Open(badgerOptions(opts))
	if err != nil {
		// Badger says another process holds the directory in its text only
		// (the lock's errno is not wrapped).
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			err = fmt.Errorf("%w: %w", ErrInUse, err)
		}
		return nil, opErr("open "+opts.Dir, err)
	}
	s := &Store{
		db:         db,
		opts:       opts,
		appends:    make(chan *appendReq, 4*opts.MaxAppendBatch),
		writerDone: make(chan struct{}),
		stop:       make(chan struct{}),
	}
	if err := s.checkFormat(); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.loadSeq(); err != nil {
		db.Close()
		return nil, err
	}
	if s.wal, err = openWAL(opts.Dir, opts.Sync, opts.JournalSegmentBytes, opts.Logger, time.Now().Unix()); err != nil {
		db.Close()
		return nil, opErr(fmt.Sprintf("open %s", opts.Dir), err)
	}
	if err := s.raiseSeq(s.wal.maxSeqSeen()); err != nil {
		s.wal.close()
		db.Close()
		return nil, err
	}
	if !opts.KeepFormat {
		if err := s.migrate(); err != nil {
			s.wal.close()
			db.Close()
			return nil, err
		}
	}
	if err := s.applyCoverMarks(); err != nil {
		s.wal.close()
		db.Close()
		return nil, err
	}
	if s.crashed, err = markInUse(opts.Dir); err != nil {
		s.wal.close()
		db.Close()
		return nil, opErr(fmt.Sprintf("open %s", opts.Dir), err)
	}
	s.checkFree()
	go s.writer()
	// Without a floor too: a write that meets a full disk stops writes
	// until a check finds space again.
	s.loops.Add(1)
	go s.freeSpaceLoop()
	if opts.GCInterval > 0 {
		s.gcBase.Store(s.Size())
		s.loops.Add(1)
		go s.gcLoop()
	}
	if canPageOut {
		s.releasing.Store(opts.ReleaseInterval > 0)
		s.adviseValueLog(s.mappedDir())
		s.loops.Add(1)
		go s.releaseLoop()
	}
	return s, nil
}

// prepareBadgerDir readies dir for Badger's open: it removes the empty
// files a crash left (removeEmptyBadgerFiles) and seals the last value-log
// file of a store closed cleanly (sealValueLog). It runs under Badger's
// lock on the directory, so that a file a running process has just
// created is never removed; a directory in use is left to Badger, which
// refuses it.
func prepareBadgerDir(dir string) error {
	lock := lockDir(dir)
	if lock == nil {
		return nil
	}
	defer unlockDir(lock)
	if err := removeEmptyBadgerFiles(dir); err != nil {
		return err
	}
	return sealValueLog(dir)
}

// removeEmptyBadgerFiles removes the memtable and value-log files a crash
// left empty: the process was killed between Badger's creation of one and
// its sizing, or between the truncation to 0 and the removal by which
// Badger deletes one (a memtable's once flushed into a table, a value log
// once collected). They hold nothing, and Badger refuses to open a
// directory holding one: it takes its own "new file" answer for an error
// (dgraph-io/badger#2207; "while opening memtables err: while opening fid:
// 1 err: Create a new file"), so the first start after such a crash would
// fail.
func removeEmptyBadgerFiles(dir string) error {
	for _, pattern := range []string{"*.mem", "*.vlog"} {
		names, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return err
		}
		for _, name := range names {
			if fi, err := os.Lstat(name); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
				if err := os.Remove(name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// vlogHeaderBytes is the header Badger starts a value-log file with: the
// id of its encryption key (8 bytes, 0: none) and a base IV (12 bytes).
const vlogHeaderBytes = 20

// sealValueLog keeps Badger from cutting the last value-log file of a
// store closed cleanly. Opening, Badger reads the last file through and
// truncates it at its first record that fails its checksum, taking that
// for a torn write: one value damaged on disk (a bad sector) lost every
// value written after it in the file, other users' (up to a file's 128 MiB
// of them: the whole store while it is smaller). After a Close the file
// ends with its last record, so a record that fails there is damage: an
// empty value-log file after it (a header only, as Badger leaves a file it
// wrote nothing to, and deletes at its next open) makes it an earlier
// one, whose values Badger reads one at a time, each checked (ErrCorrupt
// for the damaged one alone). After a crash (the in-use mark is there)
// the cut is left to Badger, since the file may end in a torn write.
func sealValueLog(dir string) error {
	if _, err := os.Lstat(filepath.Join(dir, inUseFile)); err == nil {
		return nil
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		return err
	}
	last, lastFid := "", uint64(0)
	for _, name := range names {
		fid, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(name), ".vlog"), 10, 32)
		if err == nil && (last == "" || fid > lastFid) {
			last, lastFid = name, fid
		}
	}
	if last == "" {
		return nil
	}
	if fi, err := os.Lstat(last); err != nil || fi.Size() <= vlogHeaderBytes {
		return err // nothing in it to lose
	}
	path := filepath.Join(dir, fmt.Sprintf("%06d.vlog", lastFid+1))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, vlogHeaderBytes))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// Not sealed (a full disk): Badger opens the store as it would
		// have without this, rather than over a file cut short.
		return os.Remove(path)
	}
	return nil
}

// badgerOptions are the options the store opens Badger with (Open, and
// PeekNamespaces read-only).
func badgerOptions(opts Options) badger.Options {
	bopts := badger.DefaultOptions(opts.Dir).
		WithSyncWrites(opts.Sync).
		WithLogger(badgerLogger{opts.Logger}).
		WithMemTableSize(opts.MemTableSize).
		WithNumMemtables(opts.NumMemtables).
		WithBlockCacheSize(max(opts.BlockCacheSize, 0)).
		WithValueThreshold(opts.ValueThreshold).
		WithValueLogFileSize(opts.ValueLogFileSize).
		WithVerifyValueChecksum(true).
		WithChecksumVerificationMode(options.OnBlockRead).
		// Filters are Bloom bits, which do not compress: Snappy only cost
		// CPU on every block read and every compaction.
		WithCompression(options.None).
		WithMetricsEnabled(false).
		// Two compactors, not four, on the machines seenapi runs on (a few
		// cores): each holds table builders in the Go heap.
		WithNumCompactors(2)
	// Tables of one size (2 MiB) at every level. A compaction keeps up to
	// eight tables or more in flight, each builder holding a buffer of
	// twice its table in the Go heap; Badger's default doubles the table
	// size per level, so at ten million users (data down to level 5 or 6,
	// tables of 32-64 MiB) one compaction could hold hundreds of MiB next
	// to the hot set.
	bopts.TableSizeMultiplier = 1
	return bopts
}

// checkFormat writes the format version into a new store and checks it in an
// existing one.
func (s *Store) checkFormat() error {
	return s.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(keyFormat)
		if errors.Is(err, badger.ErrKeyNotFound) {
			for _, p := range []byte{prefixFilter, prefixJournal} {
				if hasPrefix(txn, []byte{p}) {
					return fmt.Errorf("%w: %s holds data but no format version: not a seenapi store", ErrFormatVersion, s.opts.Dir)
				}
			}
			return txn.Set(keyFormat, binary.AppendUvarint(nil, FormatVersion))
		}
		if err != nil {
			return opErr(fmt.Sprintf("open %s: read format version", s.opts.Dir), err)
		}
		return item.Value(func(v []byte) error {
			ver, n := binary.Uvarint(v)
			switch {
			case n <= 0 || ver == 0:
				return fmt.Errorf("%w: %s has an unreadable format version %x", ErrFormatVersion, s.opts.Dir, v)
			case ver > FormatVersion:
				return fmt.Errorf("%w: %s is in format version %d, newer than this build supports (%d); use a newer seenapi",
					ErrFormatVersion, s.opts.Dir, ver, FormatVersion)
			}
			return nil
		})
	})
}

func hasPrefix(txn *badger.Txn, prefix []byte) bool {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	it.Seek(prefix)
	return it.Valid()
}

// loadSeq reads the sequence lease: numbers up to it may have been used.
func (s *Store) loadSeq() error {
	return s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keySeq)
		if errors.Is(err, badger.ErrKeyNotFound) {
			s.nextSeq = 1
			return nil
		}
		if err != nil {
			return opErr(fmt.Sprintf("open %s: read sequence", s.opts.Dir), err)
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("storage: open %s: sequence record of %d bytes", s.opts.Dir, len(v))
			}
			s.leasedSeq = binary.BigEndian.Uint64(v)
			s.nextSeq = s.leasedSeq + 1
			return nil
		})
	})
}

// takeSeqs hands out n consecutive sequence numbers, first reserving more on
// disk when the lease runs out, so numbers keep increasing across restarts.
func (s *Store) takeSeqs(n uint64) (uint64, error) {
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	for s.nextSeq+n-1 > s.leasedSeq { // leaseLocked lets go of seqMu: check again
		if err := s.leaseLocked(s.nextSeq + n - 1); err != nil {
			return 0, err
		}
	}
	first := s.nextSeq
	s.nextSeq += n
	if s.nextSeq+seqLease/2 > s.leasedSeq && !s.renewing.Swap(true) {
		// Renew ahead, off the append path: a lease written while Badger
		// stalls its writes (a memtable flush) would stall every append.
		go s.renewLease(s.nextSeq + seqLease)
	}
	return first, nil
}

// renewLease extends the lease to upTo in the background.
func (s *Store) renewLease(upTo uint64) {
	defer s.renewing.Store(false)
	if err := s.enter(); err != nil {
		return
	}
	defer s.leave()
	if err := s.writeLease(upTo); err != nil {
		s.opts.Logger.Warn("storage: renewing the journal sequence lease failed; appends will renew it", "err", err)
	}
}

// raiseSeq makes every later sequence number greater than seq.
func (s *Store) raiseSeq(seq uint64) error {
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	for seq > s.leasedSeq {
		if err := s.leaseLocked(seq); err != nil {
			return err
		}
	}
	s.nextSeq = max(s.nextSeq, seq+1)
	return nil
}

// leaseLocked reserves numbers up to upTo and more on disk. seqMu held; it
// is let go while the lease is written.
func (s *Store) leaseLocked(upTo uint64) error {
	if upTo <= s.leasedSeq {
		return nil
	}
	lease := upTo + seqLease
	if lease < upTo {
		lease = math.MaxUint64
	}
	s.seqMu.Unlock() // writeLease takes it to publish the lease
	err := s.writeLease(lease)
	s.seqMu.Lock()
	return err
}

// writeLease reserves sequence numbers up to lease on disk, then lets them
// be handed out. Lease writes are serialized and never lower the lease.
func (s *Store) writeLease(lease uint64) error {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	s.seqMu.Lock()
	cur := s.leasedSeq
	s.seqMu.Unlock()
	if lease <= cur {
		return nil
	}
	// Not under s.writes: a forget and a restore take sequence numbers
	// while they hold it, and a read lock taken again behind a waiting
	// flushMemtables would never be had. A write Badger refuses during the
	// flush is tried again once it is over.
	var err error
	for {
		err = s.db.Update(func(txn *badger.Txn) error {
			return txn.Set(keySeq, binary.BigEndian.AppendUint64(nil, lease))
		})
		if !errors.Is(err, badger.ErrBlockedWrites) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		return opErr("reserve journal sequence numbers", s.writeErr(err))
	}
	s.seqMu.Lock()
	s.leasedSeq = max(s.leasedSeq, lease)
	s.seqMu.Unlock()
	return nil
}

// Close stops the background loops, waits for running calls, commits every
// queued append, and closes Badger. Later calls return ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.appends)
	s.mu.Unlock()
	<-s.writerDone
	close(s.stop)
	s.loops.Wait()
	werr := s.wal.close()
	if werr == nil && !(s.crashed && s.keepCrash.Load()) {
		// Still under Badger's directory lock: no other process has the
		// store open yet. A marker that stays says a crash at the next Open.
		_ = os.Remove(filepath.Join(s.opts.Dir, inUseFile))
	}
	if err := s.db.Close(); err != nil {
		return opErr(fmt.Sprintf("close %s", s.opts.Dir), err)
	}
	if werr != nil {
		return opErr(fmt.Sprintf("close %s: journal", s.opts.Dir), werr)
	}
	return nil
}

// inUseFile is the marker of a store in use: made by Open, removed by
// Close. Found by Open, it means the process that had the store open
// before ended without closing it.
const inUseFile = "seenapi-in-use"

// markInUse makes dir's in-use marker and reports whether it was there
// already: the last process that had the store open did not close it.
func markInUse(dir string) (crashed bool, err error) {
	name := filepath.Join(dir, inUseFile)
	_, err = os.Lstat(name)
	crashed = err == nil
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	return crashed, syncDir(dir) // so that a power loss is told as a crash too
}

// OpenedAfterCrash reports whether the process that had the store open
// before this one ended without closing it (a crash, kill -9, a power
// loss), so that its journal may hold records it left unwritten. False
// after a Close, whatever the journal holds, and for a store last used by
// a seenapi older than this check.
func (s *Store) OpenedAfterCrash() bool { return s.crashed }

// KeepCrashMark makes Close of a store opened after a crash leave it as
// the crash did, so that the next Open reports the crash again: for a
// process that does not fold the journal's records into their users (an
// offline backup or restore), which are as unwritten after it as before.
// A store not opened after a crash is unaffected.
func (s *Store) KeepCrashMark() { s.keepCrash.Store(true) }

// enter starts a call: it fails with ErrClosed once Close has begun.
// A nil return must be paired with leave.
func (s *Store) enter() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (s *Store) leave() { s.mu.RUnlock() }

// enterWrite is enter for a call that writes: it also fails with ErrFull
// while free space is below MinFreeBytes.
func (s *Store) enterWrite() error {
	if err := s.enter(); err != nil {
		return err
	}
	if s.full.Load() {
		s.leave()
		return s.errFull()
	}
	return nil
}

func (s *Store) errFull() error {
	if s.noSpace.Load() {
		return fmt.Errorf("%w: a write met no space left on the device under %s", ErrFull, s.opts.Dir)
	}
	return fmt.Errorf("%w: %d bytes free under %s, below the %d required", ErrBelowMinFree, s.free.Load(), s.opts.Dir, s.opts.MinFreeBytes)
}

// Full reports whether the store refuses writes for lack of disk space
// (free space below MinFreeBytes at the last check, or a write that met a
// full disk).
func (s *Store) Full() bool { return s.full.Load() }

// checkFree measures free space and returns whether it is below MinFreeBytes.
// Without a floor (MinFreeBytes negative) it measures only after a write
// met a full disk, and finds it full until some space is free again.
func (s *Store) checkFree() bool {
	floor := s.opts.MinFreeBytes
	if floor < 0 {
		if !s.noSpace.Load() {
			return false
		}
		floor = 1
	}
	n, err := freeBytes(s.opts.Dir)
	if err != nil {
		s.opts.Logger.Warn("storage: cannot measure free space", "dir", s.opts.Dir, "err", err)
		return s.full.Load()
	}
	s.free.Store(n)
	full := n < floor
	if !full {
		s.noSpace.Store(false)
	}
	if was := s.full.Swap(full); was != full {
		if full {
			s.opts.Logger.Warn("storage: free space below minimum, refusing writes",
				"dir", s.opts.Dir, "free_bytes", n, "min_free_bytes", s.opts.MinFreeBytes)
		} else {
			s.opts.Logger.Warn("storage: free space recovered, accepting writes",
				"dir", s.opts.Dir, "free_bytes", n, "min_free_bytes", s.opts.MinFreeBytes)
		}
	}
	return full
}

// writeErr classifies a failed write: out of space becomes ErrFull, a
// Badger closed underneath becomes ErrClosed.
func (s *Store) writeErr(err error) error {
	switch {
	case errors.Is(err, ErrFull), errors.Is(err, ErrClosed):
		return err
	case isNoSpace(err):
		s.noSpace.Store(true)
		s.full.Store(true)
		return fmt.Errorf("%w: %w", ErrFull, err)
	case s.checkFree():
		return fmt.Errorf("%w: %w", s.errFull(), err)
	case errors.Is(err, badger.ErrDBClosed), errors.Is(err, badger.ErrBlockedWrites):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

func (s *Store) freeSpaceLoop() { s.every(s.opts.FreeSpaceInterval, func() { s.checkFree() }) }

// gcLoop runs value-log GC every GCInterval, and sooner when the store has
// grown by gcFlushGrowth value-log files since GC last reclaimed space
// (looked at every gcGrowthCheck), so that a store written fast does not
// grow by a whole interval's writes before runGC flushes the memtables.
func (s *Store) gcLoop() {
	last := time.Now()
	s.every(min(s.opts.GCInterval, gcGrowthCheck), func() {
		if time.Since(last) >= s.opts.GCInterval || s.Size() >= s.gcBase.Load()+gcFlushGrowth*s.opts.ValueLogFileSize {
			s.runGC()
			last = time.Now()
		}
	})
}

// releaseLoop releases the value log's resident pages every
// ReleaseInterval (see Options.ReleaseInterval), until the kernel says it
// cannot. Each round first advises the value-log files Badger has mapped
// since the last one (see adviseValueLog); with no release, it only does
// that, every DefaultReleaseInterval.
func (s *Store) releaseLoop() {
	dir := s.mappedDir()
	interval := s.opts.ReleaseInterval
	if interval <= 0 {
		interval = DefaultReleaseInterval
	}
	s.every(interval, func() {
		s.adviseValueLog(dir)
		s.releaseIfOn(dir)
	})
}

// releaseIfOn releases the value log's pages (releaseValueLog) while
// releases are on, and turns them off when one fails.
func (s *Store) releaseIfOn(dir string) {
	if s.releasing.Load() && !s.releaseValueLog(dir) {
		s.releasing.Store(false)
	}
}

// adviseValueLog asks the kernel to read only the pages a load touches of
// the value-log files mapped in dir (see readValueLogAtRandom): without
// it, every user loaded after an eviction would bring its value's
// neighbours into memory too. A kernel that refuses is logged once.
func (s *Store) adviseValueLog(dir string) {
	if _, err := readValueLogAtRandom(dir); err != nil && !s.adviceFailed {
		s.adviceFailed = true
		s.opts.Logger.Warn("storage: the value log is read with the kernel's readahead", "dir", s.opts.Dir, "err", err)
	}
}

// mappedDir is the store's directory as /proc/self/maps names the files in
// it: absolute, with symbolic links resolved.
func (s *Store) mappedDir() string {
	dir, err := filepath.Abs(s.opts.Dir)
	if err != nil {
		return s.opts.Dir
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return dir
}

// releaseValueLog asks the kernel to take back the value log's pages: it
// syncs them, then releases the resident pages of the value log's maps in
// dir (see pageOutValueLog). It reports false, having logged why, when the
// release failed (a kernel without MADV_PAGEOUT, no /proc): the store
// works on without it, and the next try would fail the same way.
func (s *Store) releaseValueLog(dir string) bool {
	// A dirty page leaves the process's maps but stays in the page cache
	// until the kernel writes it, up to 30 s later: synced first, the pages
	// leave memory altogether (80 MiB of values just written left the page
	// cache with the sync, and stayed in it without). With Sync, every
	// write is synced already.
	if !s.opts.Sync {
		if err := s.db.Sync(); err != nil {
			s.opts.Logger.Warn("storage: syncing the value log", "dir", s.opts.Dir, "err", err)
		}
	}
	advised, err := pageOutValueLog(dir)
	if err != nil {
		s.opts.Logger.Warn("storage: the value log's pages are left resident from now on", "dir", s.opts.Dir, "err", err)
		return false
	}
	s.opts.Logger.Debug("storage: value log's pages released", "dir", s.opts.Dir, "mapped_bytes", advised)
	return true
}

// gcGrowthCheck is how often gcLoop looks at the store's growth: a walk
// of the data directory's few hundred files, under a millisecond. A store
// written at 50 MiB/s grew by 100 MiB between looks 2 s apart.
const gcGrowthCheck = 500 * time.Millisecond

// every runs fn each interval until the store closes (one of s.loops).
func (s *Store) every(interval time.Duration, fn func()) {
	defer s.loops.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			fn()
		}
	}
}

// runGC rewrites value-log files until none has enough garbage.
//
// Badger knows a value-log file's garbage only from compactions, which
// count the older versions of keys they drop, and compacts only once
// memtables fill. A store of few users written back often (heavy users,
// a short --flush-interval) fills them slowly, as each write adds a small
// pointer to them while its filter goes to the value log: such a store
// grew by everything written, 981 MiB in a minute for 4 MiB of filters,
// with nothing to reclaim. So when the store has grown by
// gcFlushGrowth value-log files since space was last reclaimed and GC
// finds nothing, the memtables are flushed, which lets it count.
func (s *Store) runGC() {
	if s.gcRounds() {
		s.gcBase.Store(s.Size())
		return
	}
	size := s.Size()
	if size < s.gcBase.Load()+gcFlushGrowth*s.opts.ValueLogFileSize {
		return
	}
	start := time.Now()
	if err := s.flushMemtables(); err != nil {
		s.opts.Logger.Warn("storage: flushing memtables for value-log GC", "dir", s.opts.Dir, "err", err)
		return
	}
	s.gcRounds()
	after := s.Size()
	s.gcBase.Store(after)
	s.opts.Logger.Info("storage: memtables flushed for value-log GC", "dir", s.opts.Dir,
		"bytes_before", size, "bytes_after", after, "took", time.Since(start).Round(time.Millisecond))
}

// gcFlushGrowth is how many value-log files the store may grow by without
// GC reclaiming anything before runGC flushes the memtables.
const gcFlushGrowth = 4

// gcRounds rewrites value-log files until none has enough garbage and
// reports whether it rewrote any.
func (s *Store) gcRounds() (rewrote bool) {
	for {
		select {
		case <-s.stop:
			return rewrote
		default:
		}
		err := s.db.RunValueLogGC(s.opts.GCDiscardRatio)
		if err == nil {
			rewrote = true
			// GC read the file it rewrote whole, through its map, which
			// Badger keeps until no iterator is open: released now, so that
			// file after file rewritten do not all stay resident until the
			// next release.
			s.releaseIfOn(s.mappedDir())
			continue
		}
		if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
			s.opts.Logger.Warn("storage: value-log GC", "dir", s.opts.Dir, "err", err)
		}
		return rewrote
	}
}

// flushMemtables makes Badger write its memtables out (and so compact, and
// count the value log's garbage): it writes keyFlush and drops it, as
// Badger flushes its memtables before dropping a prefix. Badger refuses
// writes meanwhile, so every write of the store waits for it (s.writes).
func (s *Store) flushMemtables() error {
	s.writes.Lock()
	defer s.writes.Unlock()
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(keyFlush, nil) }); err != nil {
		return err
	}
	return s.db.DropPrefix(keyFlush)
}

// Load returns the user's stored filter (nil if none) and the user's
// journal entries in sequence order. The returned slices are the caller's.
func (s *Store) Load(ns, user string) (filter []byte, journal []JournalEntry, err error) {
	if err := checkKey(ns, user); err != nil {
		return nil, nil, opErr("load", err)
	}
	if err := s.enter(); err != nil {
		return nil, nil, opErr(fmt.Sprintf("load %s/%s", ns, user), err)
	}
	defer s.leave()
	// The journal first: a write-back committing between the two reads
	// retires records only after its filter is visible, so records read
	// before the filter are either still live or covered by what the read
	// of the filter sees. The other order could miss both.
	if journal, err = s.wal.load(ns, user, time.Now().Unix()); err != nil {
		return nil, nil, opErr(fmt.Sprintf("load %s/%s", ns, user), err)
	}
	var key [64]byte
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(filterKey(key[:0], ns, user))
		switch {
		case err == nil:
			if filter, _, err = readFilter(item); err != nil {
				return fmt.Errorf("read filter: %w", err)
			}
		case !errors.Is(err, badger.ErrKeyNotFound):
			return fmt.Errorf("read filter: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, nil, opErr(fmt.Sprintf("load %s/%s", ns, user), err)
	}
	return filter, journal, nil
}

// readValue returns a copy of the item's value. Badger logs a value-log
// read that fails (checksum mismatch, truncated file) and returns an empty
// value without an error; an empty value whose recorded size is not empty
// is that failure, reported as ErrCorrupt.
func readValue(item *badger.Item) ([]byte, error) {
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	// For a value-log record, ValueSize exceeds the value's length by at
	// most the header's size (under 32 bytes).
	if len(v) == 0 && item.ValueSize() > 32 {
		return nil, fmt.Errorf("%w: value of about %d bytes unreadable in the value log", ErrCorrupt, item.ValueSize())
	}
	return v, nil
}

// readFilter returns a copy of a filter entry's filter and its cover mark
// (0: none).
func readFilter(item *badger.Item) (filter []byte, mark uint64, err error) {
	v, err := readValue(item)
	if err != nil {
		return nil, 0, err
	}
	return splitCoverMark(v, item.UserMeta())
}

// Delete removes the user's filter and every journal entry of the user.
// It is allowed while the disk is below MinFreeBytes (erasure frees space).
func (s *Store) Delete(ns, user string) error {
	if err := checkKey(ns, user); err != nil {
		return opErr("delete", err)
	}
	if err := s.enter(); err != nil {
		return opErr(fmt.Sprintf("delete %s/%s", ns, user), err)
	}
	defer s.leave()
	s.writes.RLock()
	defer s.writes.RUnlock()
	fk := filterKey(nil, ns, user)
	for attempt := 0; ; attempt++ {
		err := s.db.Update(func(txn *badger.Txn) error {
			if err := txn.Delete(coverKey(nil, ns, user)); err != nil {
				return err
			}
			return txn.Delete(fk)
		})
		if errors.Is(err, badger.ErrConflict) && attempt < maxConflictRetries {
			continue
		}
		if err != nil {
			return opErr(fmt.Sprintf("delete %s/%s", ns, user), s.writeErr(err))
		}
		break
	}
	// The filter goes first: a crash before the erase record is written
	// leaves journal records that bring part of the user back, never a
	// lost acknowledged write.
	if err := s.eraseJournals(ns, []string{user}); err != nil {
		return opErr(fmt.Sprintf("delete %s/%s", ns, user), err)
	}
	return nil
}

// MaxValueBytes is the largest value WriteBack stores for one user: Badger
// keeps a value whole in one value-log file, so it is
// Options.ValueLogFileSize less the cover mark the store ends a filter's
// value with. A larger one fails that user's write with ErrTooLarge.
func (s *Store) MaxValueBytes() int64 { return s.opts.ValueLogFileSize - coverMarkLen }

// tooLarge is the error of a value of n bytes past MaxValueBytes: its size
// and the limit, never its bytes (Badger's own error quotes them in hex).
func (s *Store) tooLarge(n int) error {
	return fmt.Errorf("%w: %d bytes, over the %d a user's value may take (the value-log file size less %d)",
		ErrTooLarge, n, s.MaxValueBytes(), coverMarkLen)
}

// Size returns the bytes the store's files take on disk (allocated blocks
// of the LSM tables, value log, memtable logs and manifest).
func (s *Store) Size() int64 {
	var total int64
	_ = filepath.WalkDir(s.opts.Dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			total += allocatedBytes(fi)
		}
		return nil
	})
	return total
}

// LevelStats is one level of the store's LSM tree.
type LevelStats struct {
	Level  int   `json:"level"`
	Tables int   `json:"tables"`
	Bytes  int64 `json:"bytes"`
}

// Levels returns the tables and bytes of each level of the LSM tree, level
// 0 first. Level 0 gains a table at each memtable flush until a compaction
// merges its tables into the level below; with users spread over the whole
// key space that compaction rewrites about every user's key, and takes the
// CPU for it while it runs, so a level 0 that empties marks one. Safe for
// concurrent use.
func (s *Store) Levels() []LevelStats {
	levels := s.db.Levels()
	out := make([]LevelStats, len(levels))
	for i, l := range levels {
		out[i] = LevelStats{Level: l.Level, Tables: l.NumTables, Bytes: l.Size}
	}
	return out
}

// Dir returns the store's data directory.
func (s *Store) Dir() string { return s.opts.Dir }

// migrate brings a store of an older format up to FormatVersion. Format 1
// kept the journal in Badger under 'j' keys: they move into the journal
// files (a crash halfway moves some twice, which replays harmlessly), then
// the version is raised.
func (s *Store) migrate() error {
	var ver uint64
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keyFormat)
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { ver, _ = binary.Uvarint(v); return nil })
	})
	if err != nil {
		return opErr(fmt.Sprintf("open %s: read format version", s.opts.Dir), err)
	}
	if ver >= FormatVersion {
		return nil
	}
	var moved int
	for {
		var recs []walAppend
		var keys [][]byte
		err := s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixJournal}, PrefetchValues: true})
			defer it.Close()
			for it.Seek([]byte{prefixJournal}); it.Valid() && len(recs) < 4096; it.Next() {
				item := it.Item()
				ns, user, seq, ok := parseJournalKey(item.Key())
				if !ok {
					continue
				}
				v, err := item.ValueCopy(nil)
				if err != nil {
					return err
				}
				recs = append(recs, walAppend{seq: seq, ns: string(ns), user: string(user),
					expiresAt: int64(item.ExpiresAt()), value: v})
				keys = append(keys, item.KeyCopy(nil))
			}
			return nil
		})
		if err == nil && len(recs) > 0 {
			err = s.wal.write(recs)
		}
		if err == nil && len(recs) > 0 {
			err = s.raiseSeq(recs[len(recs)-1].seq)
		}
		if err == nil && len(keys) > 0 {
			wb := s.db.NewWriteBatch()
			for _, k := range keys {
				if err = wb.Delete(k); err != nil {
					break
				}
			}
			if err == nil {
				err = wb.Flush()
			} else {
				wb.Cancel()
			}
		}
		if err != nil {
			return opErr(fmt.Sprintf("open %s: moving the journal out of format %d", s.opts.Dir, ver), err)
		}
		moved += len(recs)
		if len(recs) == 0 {
			break
		}
	}
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(keyFormat, binary.AppendUvarint(nil, FormatVersion))
	}); err != nil {
		return opErr(fmt.Sprintf("open %s: write format version", s.opts.Dir), err)
	}
	s.opts.Logger.Info("storage: store format upgraded", "dir", s.opts.Dir, "from", ver, "to", FormatVersion,
		"journal_records_moved", moved)
	return nil
}

// applyCoverMarks drops from the replayed journal the records each user's
// stored filter already holds (its cover mark), so only the records a
// crash left unwritten come back. The mark ends the filter's value, or
// for a filter last written by format 2 sits under the user's cover key;
// a user may have both, the key's from before, so the larger counts.
func (s *Store) applyCoverMarks() error {
	users := s.wal.users()
	for start := 0; start < len(users); start += 1024 {
		page := users[start:min(start+1024, len(users))]
		marks := make([]uint64, len(page))
		err := s.db.View(func(txn *badger.Txn) error {
			for i, u := range page {
				item, err := txn.Get(coverKey(nil, u[0], u[1]))
				switch {
				case err == nil:
					if err := item.Value(func(v []byte) error { marks[i], _ = binary.Uvarint(v); return nil }); err != nil {
						return err
					}
				case !errors.Is(err, badger.ErrKeyNotFound):
					return err
				}
				item, err = txn.Get(filterKey(nil, u[0], u[1]))
				switch {
				case errors.Is(err, badger.ErrKeyNotFound):
					continue
				case err != nil:
					return err
				}
				// A damaged value leaves its mark unread (0): the records
				// are replayed, which is harmless, and the user's load
				// reports the damage.
				marks[i] = max(marks[i], storedMark(item))
			}
			return nil
		})
		if err != nil {
			return opErr(fmt.Sprintf("open %s: read cover marks", s.opts.Dir), err)
		}
		for i, u := range page {
			if mark := marks[i]; mark > 0 {
				s.wal.cover(u[0], u[1], mark)
			}
		}
	}
	return nil
}
