package bench

import (
	"context"
	"time"
)

// System is one system under test, driven through the one call. A System is
// set up once per user count, called from many goroutines, then closed.
type System interface {
	// Name is the system's short name as used in --systems and the report.
	Name() string
	// Setup starts the system fresh (a new server process, an empty store).
	Setup(ctx context.Context) error
	// Call asks which candidates the user has not seen, in candidate order,
	// at most limit of them, and records the returned ones as seen. Safe for
	// concurrent use. The returned strings may alias candidates.
	Call(ctx context.Context, user string, candidates []string, limit int) (unseen []string, err error)
	// Memory returns what the system holds in memory now.
	Memory(ctx context.Context) (Memory, error)
	// CPU returns the CPU time (user + system) the server has spent since it
	// started; the run takes differences of it.
	CPU() (CPU, error)
	// Close stops the system and frees what Setup took.
	Close() error
}

// Memory is a system's memory figure.
type Memory struct {
	Bytes int64  `json:"bytes"`
	Kind  string `json:"kind"` // what Bytes is: "rss", "used_memory", "cache_bytes"
	// Anon is the anonymous part of an RSS (heap, not mapped files); 0 if not applicable.
	Anon int64 `json:"anon,omitempty"`
}

// CPU is a server's cumulative CPU time.
type CPU struct {
	Time time.Duration
	// Waited is how long its threads have waited for a core (ProcWaited).
	Waited time.Duration
	// InclClient is true when the figure includes the load generator
	// (the system runs inside the harness process).
	InclClient bool
}

// Flusher is a System that writes everything it holds back to disk; the run
// reports disk bytes per user after the flush. A stopped server counts as
// flushed (its shutdown writes back); Flush may stop it.
type Flusher interface {
	// FlushDisk writes every change back and returns the bytes the system
	// takes on disk.
	FlushDisk(ctx context.Context) (int64, error)
}

// CacheStater is a System with a hot set in front of storage.
type CacheStater interface {
	// CacheStats returns the hot set's hits and misses since it started.
	CacheStats(ctx context.Context) (hits, misses uint64, err error)
}

// Restarter is a System whose users can be made cold: Restart stops it
// (writing back) and starts it again on the same data, with an empty hot
// set. The run uses it to measure the cold-user (storage read) latency.
type Restarter interface {
	Restart(ctx context.Context) error
}

// Recorder is a System that can record items as seen without answering a
// call, faster than the call. The fill phase (which is not measured) uses it
// for the users the tracker does not check; checked users are filled by the
// call itself.
type Recorder interface {
	// Record marks items seen for user. Safe for concurrent use.
	Record(ctx context.Context, user string, items []string) error
}

// Settler is a System that does background work after a burst of writes
// (seenapi writes back the filters the fill changed). The run waits for it
// after the fill so that the measured phases see the steady state, not the
// fill's backlog, and reports how long it took.
type Settler interface {
	// Backlog returns the work still pending.
	Backlog(ctx context.Context) (Backlog, error)
}

// Backlog is a Settler's pending write-back: seenapi's dirty users and the
// age of its oldest change not yet written back (GET /v1/stats dirty_users
// and flush_lag_ns).
type Backlog struct {
	Users int64
	Lag   time.Duration
}
