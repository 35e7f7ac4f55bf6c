package storage

import (
	"fmt"
	"log/slog"
	"time"
)

// Options configure a Store. Build them with DefaultOptions and the WithX
// methods; in an Options value built by hand, a zero field means its default.
type Options struct {
	// Dir is the data directory (created if missing). Required; no default.
	Dir string

	// Sync makes every journal append and write-back commit fsync'd before
	// it returns, so acknowledged writes survive a power loss, not only a
	// process crash. Default false.
	Sync bool

	// MinFreeBytes: writes are refused with ErrFull while the filesystem
	// holding Dir has less free space than this (Badger does not survive a
	// full disk gracefully). Checked at Open, every FreeSpaceInterval and
	// after every failed write. Default 256 MiB; negative turns the check off
	// (a write that meets a full disk still stops writes until a check,
	// every FreeSpaceInterval, finds space free again).
	MinFreeBytes int64

	// FreeSpaceInterval is how often free space is checked. Default 2s.
	FreeSpaceInterval time.Duration

	// GCInterval is how often value-log garbage collection runs (repeatedly,
	// until nothing is left to rewrite). Default 1m: most filters live in
	// the value log and every write-back supersedes one, so the garbage
	// between runs grows with the interval, while a run's work is per file
	// reclaimed (a run with nothing to reclaim rewrites nothing). Negative
	// turns it off.
	GCInterval time.Duration

	// ReleaseInterval is how often the store asks the kernel to take back
	// the resident pages of its value-log files' memory maps (Linux only;
	// elsewhere it does nothing). Badger maps every value-log file and
	// writes values by copying them into the map, so every filter written
	// back stayed in the process's resident memory (charged to its
	// container), though the hot set keeps the users it holds in the Go heap
	// and only a load after an eviction reads one again. Default 10s;
	// negative turns it off. The pages are also released after each file
	// value-log GC rewrites. Each round, and the open, also advise the
	// value-log files mapped since to be read without readahead (every
	// 10s when the release is off).
	ReleaseInterval time.Duration

	// GCDiscardRatio: a value-log file is rewritten when at least this
	// fraction of it is garbage. Default 0.5.
	GCDiscardRatio float64

	// MemTableSize is the size of one Badger memtable. Default 16 MiB
	// (Badger's own default is 64 MiB).
	MemTableSize int64

	// NumMemtables is how many memtables may be held in memory (one active,
	// the rest waiting to be flushed). Default 3 (Badger: 5).
	NumMemtables int

	// BlockCacheSize is the size of Badger's cache of table blocks;
	// negative: none, the default (Badger: 256 MiB). The store's tables are
	// not compressed, so a block is read in place from the table's memory
	// map and a cache saves no work; and Badger charges a cached block the
	// capacity of that slice, the rest of the table's map (about 1 MiB
	// for a 4 KiB block), so 64 MiB held about 64 blocks: 27%, then 11%,
	// then 5% of the reads hit in the first three minutes of a run at a
	// million users, which logged that the cache was too small every minute.
	BlockCacheSize int64

	// ValueThreshold: values of at least this many bytes go to the value
	// log, smaller ones stay in the LSM tree next to their key. The default,
	// 256 B, keeps small users' filters (100 items encode to 242 B) in the tree
	// and moves the others to the value log: a filter is rewritten whole at
	// every write-back, and in the tree each rewrite was copied again by
	// every compaction that passed it: with a million users drawn
	// uniformly, compaction took a fifth of the server's CPU in a 12 s
	// profile at 4 KiB, and none in the same window at 256 B. Superseded
	// values in the log are reclaimed by value-log GC. Must not exceed 15%
	// of MemTableSize.
	ValueThreshold int64

	// ValueLogFileSize is the size of one value-log file, the unit value-log
	// GC reclaims. Default 128 MiB (Badger: 1 GiB).
	ValueLogFileSize int64

	// MaxAppendBatch caps how many journal appends one group commit writes.
	// Default 1024.
	MaxAppendBatch int

	// JournalSegmentBytes is the size at which the journal starts a new
	// segment file; a segment is deleted once every record in it is covered
	// by a write-back. Default 64 MiB.
	JournalSegmentBytes int64

	// KeepFormat makes Open leave a store of an older format as it is
	// instead of upgrading it, for an offline backup, which must not change
	// the directory it reads (a build of the older format could no longer
	// open it). Only Backup should be used on such a store. A directory
	// that holds no store is refused (ErrNoStore), not made into one.
	// Default false.
	KeepFormat bool

	// Logger receives the store's and Badger's warnings and errors (Badger's
	// informational messages are logged at debug level). Default
	// slog.Default(), which drops debug: quiet except for warnings.
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultMinFreeBytes      = 256 << 20
	DefaultFreeSpaceInterval = 2 * time.Second
	DefaultGCInterval        = time.Minute
	DefaultGCDiscardRatio    = 0.5
	DefaultReleaseInterval   = 10 * time.Second
	DefaultMemTableSize      = 16 << 20
	DefaultNumMemtables      = 3
	DefaultBlockCacheSize    = -1
	DefaultValueThreshold    = 256
	DefaultValueLogFileSize  = 128 << 20
	DefaultMaxAppendBatch    = 1024
	DefaultJournalSegment    = 64 << 20
)

// DefaultOptions returns the default options for a store in dir.
func DefaultOptions(dir string) Options {
	return Options{
		Dir:                 dir,
		MinFreeBytes:        DefaultMinFreeBytes,
		FreeSpaceInterval:   DefaultFreeSpaceInterval,
		GCInterval:          DefaultGCInterval,
		GCDiscardRatio:      DefaultGCDiscardRatio,
		ReleaseInterval:     DefaultReleaseInterval,
		MemTableSize:        DefaultMemTableSize,
		NumMemtables:        DefaultNumMemtables,
		BlockCacheSize:      DefaultBlockCacheSize,
		ValueThreshold:      DefaultValueThreshold,
		ValueLogFileSize:    DefaultValueLogFileSize,
		MaxAppendBatch:      DefaultMaxAppendBatch,
		JournalSegmentBytes: DefaultJournalSegment,
	}
}

// WithDir returns o with Dir set.
func (o Options) WithDir(dir string) Options { o.Dir = dir; return o }

// WithSync returns o with Sync set.
func (o Options) WithSync(sync bool) Options { o.Sync = sync; return o }

// WithMinFreeBytes returns o with MinFreeBytes set (negative: no check).
func (o Options) WithMinFreeBytes(n int64) Options { o.MinFreeBytes = n; return o }

// WithFreeSpaceInterval returns o with FreeSpaceInterval set.
func (o Options) WithFreeSpaceInterval(d time.Duration) Options { o.FreeSpaceInterval = d; return o }

// WithGCInterval returns o with GCInterval set (negative: no GC loop).
func (o Options) WithGCInterval(d time.Duration) Options { o.GCInterval = d; return o }

// WithReleaseInterval returns o with ReleaseInterval set (negative: no
// release).
func (o Options) WithReleaseInterval(d time.Duration) Options { o.ReleaseInterval = d; return o }

// WithGCDiscardRatio returns o with GCDiscardRatio set.
func (o Options) WithGCDiscardRatio(r float64) Options { o.GCDiscardRatio = r; return o }

// WithMemTableSize returns o with MemTableSize set.
func (o Options) WithMemTableSize(n int64) Options { o.MemTableSize = n; return o }

// WithNumMemtables returns o with NumMemtables set.
func (o Options) WithNumMemtables(n int) Options { o.NumMemtables = n; return o }

// WithBlockCacheSize returns o with BlockCacheSize set.
func (o Options) WithBlockCacheSize(n int64) Options { o.BlockCacheSize = n; return o }

// WithValueThreshold returns o with ValueThreshold set.
func (o Options) WithValueThreshold(n int64) Options { o.ValueThreshold = n; return o }

// WithValueLogFileSize returns o with ValueLogFileSize set.
func (o Options) WithValueLogFileSize(n int64) Options { o.ValueLogFileSize = n; return o }

// WithMaxAppendBatch returns o with MaxAppendBatch set.
func (o Options) WithMaxAppendBatch(n int) Options { o.MaxAppendBatch = n; return o }

// WithJournalSegmentBytes returns o with JournalSegmentBytes set.
func (o Options) WithJournalSegmentBytes(n int64) Options { o.JournalSegmentBytes = n; return o }

// WithLogger returns o with Logger set.
func (o Options) WithLogger(l *slog.Logger) Options { o.Logger = l; return o }

// WithKeepFormat returns o with KeepFormat set.
func (o Options) WithKeepFormat(keep bool) Options { o.KeepFormat = keep; return o }

// withDefaults fills zero fields with their defaults and checks the rest.
func (o Options) withDefaults() (Options, error) {
	d := DefaultOptions(o.Dir)
	if o.Dir == "" {
		return o, fmt.Errorf("%w: Dir is empty", ErrBadOptions)
	}
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = d.MinFreeBytes
	}
	if o.FreeSpaceInterval == 0 {
		o.FreeSpaceInterval = d.FreeSpaceInterval
	}
	if o.GCInterval == 0 {
		o.GCInterval = d.GCInterval
	}
	if o.ReleaseInterval == 0 {
		o.ReleaseInterval = d.ReleaseInterval
	}
	if o.GCDiscardRatio == 0 {
		o.GCDiscardRatio = d.GCDiscardRatio
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = d.MemTableSize
	}
	if o.NumMemtables == 0 {
		o.NumMemtables = d.NumMemtables
	}
	if o.BlockCacheSize == 0 {
		o.BlockCacheSize = d.BlockCacheSize
	}
	if o.ValueThreshold == 0 {
		o.ValueThreshold = d.ValueThreshold
	}
	if o.ValueLogFileSize == 0 {
		o.ValueLogFileSize = d.ValueLogFileSize
	}
	if o.MaxAppendBatch == 0 {
		o.MaxAppendBatch = d.MaxAppendBatch
	}
	if o.JournalSegmentBytes == 0 {
		o.JournalSegmentBytes = d.JournalSegmentBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.FreeSpaceInterval < 0:
		return o, fmt.Errorf("%w: FreeSpaceInterval %v is negative", ErrBadOptions, o.FreeSpaceInterval)
	case o.GCDiscardRatio <= 0 || o.GCDiscardRatio >= 1:
		return o, fmt.Errorf("%w: GCDiscardRatio %v not in (0, 1)", ErrBadOptions, o.GCDiscardRatio)
	case o.MemTableSize < 1<<20:
		return o, fmt.Errorf("%w: MemTableSize %d below 1 MiB", ErrBadOptions, o.MemTableSize)
	case o.NumMemtables < 1:
		return o, fmt.Errorf("%w: NumMemtables %d below 1", ErrBadOptions, o.NumMemtables)
	case o.ValueThreshold < 0 || o.ValueThreshold > o.MemTableSize*15/100:
		return o, fmt.Errorf("%w: ValueThreshold %d not in [0, 15%% of MemTableSize]", ErrBadOptions, o.ValueThreshold)
	case o.ValueLogFileSize < 1<<20 || o.ValueLogFileSize >= 2<<30:
		return o, fmt.Errorf("%w: ValueLogFileSize %d not in [1 MiB, 2 GiB)", ErrBadOptions, o.ValueLogFileSize)
	case o.JournalSegmentBytes < 1<<10:
		return o, fmt.Errorf("%w: JournalSegmentBytes %d below 1 KiB", ErrBadOptions, o.JournalSegmentBytes)
	case o.MaxAppendBatch < 1:
		return o, fmt.Errorf("%w: MaxAppendBatch %d below 1", ErrBadOptions, o.MaxAppendBatch)
	}
	return o, nil
}
