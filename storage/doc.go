// Package storage is seenapi's on-disk store: per-user filters in Badger
// (github.com/dgraph-io/badger/v4) and journal records in append-only
// segment files beside it (<dir>/journal), under one data directory. It knows bytes, not filters: values are opaque to it, and it
// imports nothing else of seenapi.
//
// # What it owns
//
//   - A user's filter: the encoded filter written back by the hot set.
//   - A user's journal: small records appended before a recording call is
//     acknowledged, each with a store-wide sequence number. A write-back
//     carries the sequence number up to which its filter covers them
//     (Write.UpTo) and retires those records once the filter is written,
//     so loading a user (Load) returns the filter plus the records newer
//     than it. The journal is not in Badger: see "The journal" below.
//   - The store format version, checked on every Open, and the lease of
//     journal sequence numbers (numbers keep increasing across restarts).
//   - A marker file, <dir>/seenapi-in-use, made by Open and removed by
//     Close: found by Open, it means the last process that had the store
//     open crashed (OpenedAfterCrash). A process that leaves the records a
//     crash left as it found them (an offline backup or restore) keeps it
//     (KeepCrashMark).
//
// # Key layout
//
// Every key starts with a one-byte kind; namespaces and user ids are
// length-prefixed so no user's keys are a prefix of another's ("ab" and
// "abc", or one namespace and another):
//
//	filter:   'f' | uvarint(len(ns)) | ns | user
//	journal:  'j' | uvarint(len(ns)) | ns | uvarint(len(user)) | user | seq (8 bytes, big-endian)
//	          (format 1 stores and backups only; Open moves them into the journal files)
//	cover:    'c' | uvarint(len(ns)) | ns | user   (uvarint journal number the filter covers;
//	          format 2 only: format 3 ends the filter's value with it, see metaCoverMark)
//	meta:     'm' | name              ("mformat": uvarint format version; "mseq": uint64 sequence lease)
//
// One namespace's users are a prefix scan of 'f' | uvarint(len(ns)) | ns,
// in user byte order (Users). The pair (ns, user) is the unit of every key, so
// the same layout maps onto Redis Cluster keys hash-tagged by user, e.g.
// "{ns:user}:f" and "{ns:user}:j", with the user's keys on one shard.
//
// # Writes and durability
//
// Append is a group commit: callers queue their record and wait; one writer
// goroutine takes every queued record (up to Options.MaxAppendBatch),
// writes them with one write(2) to the journal's active segment and
// acknowledges each caller once it is written. An acknowledged record
// survives a process crash; with Options.Sync the write is also fsync'd
// and survives a power loss.
//
// # The journal
//
// Segment files of CRC-32C-checked records (wal.go), rotated at
// Options.JournalSegmentBytes, with an in-memory index of each user's live
// records. Keeping it out of Badger is measured: there each record cost a
// memtable insert, a tombstone and compaction, and appends queued behind
// write-back transactions and memtable flushes (stalls of hundreds of
// milliseconds under load). A segment is deleted once no live record is
// left in it, so covered records can outlive their write-back in a segment
// kept for others: each write-back therefore stores, at the end of the
// filter's value (one Badger entry), the user's cover mark (the journal
// number below which the filter holds every record), and Open replays the
// segments skipping what the marks cover. A torn last record (a crash in
// the middle of a write) is cut off, and so is at once what a write that
// failed (a full disk) left, whose callers were answered with an error:
// none of its records is replayed. A record damaged with intact ones
// after it (a bad sector, a flipped bit) is skipped alone, and logged:
// the calls after it, other users' too, are kept. Delete removes the mark with the
// filter and writes an erase record, so the user's records never come back
// in a replay. A write that voids its user's journal (Write.VoidJournal:
// a replace of a value that cannot be read, whose mark is lost with it)
// stores a mark of a journal number of its own, past every record of the
// user, in the commit of its value: an erase and a write in one step. PurgeNamespace does the same for every user of a namespace,
// a page of users at a time (one batch of deletes, one write of erase
// records).
//
// WriteBack writes filters in transactions of up to 256 users: for each
// user it reads the stored filter, merges the new value into it with the
// caller's MergeFunc (bitwise OR for Bloom filters, so a second writer, a
// replayed journal or a restore never rolls a user back; a merged value
// expires with the longer-lived of the two, as a restored one does), sets it and
// then retires the covered journal records (a crash in between leaves
// them to be replayed, harmlessly). A merge that
// fails for one user skips that user only (see WriteBackError). The read
// and the merge are skipped for the store's only attached writer (Attach),
// whose values include what is stored, until anything else writes a
// filter or restores.
//
// # Faults are errors
//
// Free space is measured (statfs) at Open, every Options.FreeSpaceInterval
// and after every failed write; below Options.MinFreeBytes, or after
// ENOSPC, writes fail with an error wrapping ErrFull (and ErrBelowMinFree
// when the floor refused them, not the disk) while reads go on
// (Badger does not survive a full disk gracefully, so it must not get
// there). Delete stays allowed, since erasing frees space. A closed store
// answers ErrClosed. Badger's errors are wrapped with %w and name the user.
// A value past MaxValueBytes (Badger keeps a value whole in one value-log
// file) fails its user alone with ErrTooLarge, which says its size, never
// its bytes; the rest of the write goes on.
// A value Badger cannot read back intact (its value-log checksum fails)
// fails that user's calls with ErrCorrupt, and a backup, naming the user;
// Badger itself would return it as an empty value. Badger truncates the
// last value-log file at its first damaged record when it opens (as after
// a torn write); Open keeps it from cutting that of a store closed cleanly
// (see sealValueLog), so only after a crash do the large values written
// after a damaged record in that file fail with ErrCorrupt too.
//
// # Backup and restore
//
// Backup writes a header (magic and format version), the live journal
// records as journal keys in Badger's backup stream format, the stream of
// a consistent snapshot (backups of earlier builds have the journal after
// it), and an end mark with the lists' length
// and CRC-32C, without which a backup cut short (a dropped download) or
// with a byte changed (bit rot) is refused. A backup the store's failure
// stops (a user's value damaged on disk: no backup leaves a user out, which
// would restore as whole without it) ends with a stop mark instead, naming
// the user, which readers return as a *BackupStoppedError, so that a
// client downloading it learns the cause. BackupSkippingDamaged, asked for
// by an operator who must have a backup before the repair, leaves such
// users out instead and names them in a skip mark before the end mark,
// which VerifyBackup returns (BackupContents.Skipped) and builds before it
// refuse as a stop mark saying why. VerifyBackup checks a stream
// whole without restoring it. Restore reads it back into any store,
// empty or not, merging filters with the caller's MergeFunc (each side's
// pending journal records first folded into its filter by the caller's
// FoldFunc) and keeping both journal entries when two share a sequence
// number, so restoring into a live store, or twice, loses nothing.
//
// # Keeping disk use bounded
//
// Filters below Options.ValueThreshold (small users) live in the LSM tree,
// where compaction drops superseded versions; larger ones go to the value
// log, which a background loop garbage-collects every Options.GCInterval.
// Journal segments are deleted as write-backs cover their records.
//
// # Keeping memory bounded
//
// Badger maps its value-log files and writes values by copying them into
// the map, so every value written would stay in the process's resident
// memory. On Linux a background loop syncs the value log and releases its
// resident pages (madvise MADV_PAGEOUT) every Options.ReleaseInterval; a
// value read later is read back from the file. The value log's maps are
// also advised to be read at random (MADV_RANDOM, at open and in each
// round of that loop), so that loading a user reads the pages its value
// is in rather than the kernel's readahead around them. Value-log GC reads
// each file it rewrites whole; the pages are released after each file too.
//
// # Concurrency
//
// Every method of Store is safe for concurrent use. Close waits for the
// calls in progress, commits every queued append, stops the background
// loops and closes Badger; calls after Close return ErrClosed. Two
// write-backs (or a write-back and a Delete) of the same user are
// serialized by Badger's conflict detection and retried; ordering a
// Delete against a later write-back of the same user (so it cannot bring
// the user back) is the caller's job.
package storage
