package eviction

import (
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// Result is the answer of the one call.
type Result struct {
	Unseen    []string // candidates that tested unseen, in order, without duplicates, at most limit
	SeenCount int      // distinct candidates that tested seen
	Recorded  int      // items that became seen by this call
	Saturated bool     // the user is at its item cap: some items could not be recorded
	// Replayed says the answer is an earlier call's, read back from the
	// journal (see HotSet.FilterKeyed): this call recorded nothing.
	Replayed bool
	// Born is, for a Replayed answer, the clock's reading it ages from:
	// kept again for later retries, it lives no longer than from then.
	Born time.Time
}

// UserStats is the user's filter stats plus what the hot set knows of it.
type UserStats struct {
	userfilter.Stats
	// Window, Granularity (in seconds) and MaxItems are the filter's own,
	// from the profile it was made with, which is not its namespace's when
	// the namespace's profile changed since (a reload, or a restart with
	// another namespaces file): they bound what the user's history holds.
	Window      int64     `json:"window"`
	Granularity int64     `json:"granularity"`
	MaxItems    uint64    `json:"max_items"`
	Hot         bool      `json:"hot"`
	Dirty       bool      `json:"dirty"`
	FirstSeen   time.Time `json:"first_seen"`
	LastSeen    time.Time `json:"last_seen"`
}

// Namespace is one configured profile.
type Namespace struct {
	Name    string
	Profile userfilter.Profile
}

// Stats are service-wide figures of the hot set.
type Stats struct {
	// The hot users, cache bytes, hits, misses, loads, new users and
	// evictions of every namespace.
	NamespaceStats
	CacheBudgetBytes int64         `json:"cache_budget_bytes"` // --cache-bytes
	DirtyUsers       int64         `json:"dirty_users"`
	FlushLag         time.Duration `json:"flush_lag_ns"` // age of the oldest unwritten change
	Flushes          uint64        `json:"flushes"`      // write-back rounds that had users to write
	FlushedUsers     uint64        `json:"flushed_users"`
	JournalAppends   uint64        `json:"journal_appends"`
	StorageErrors    uint64        `json:"storage_errors"`
	Panics           uint64        `json:"panics"` // bugs met and recovered: steps on one user's data failed instead of the process ending (the API adds its handlers')
	StorageBytes     int64         `json:"storage_bytes"`
	// StorageFull: the store refuses writes for lack of disk space (calls
	// that record are answered ErrStorageFull) until space comes back.
	StorageFull bool `json:"storage_full"`
	// StorageLevels are the store's LSM levels, when it has them (empty
	// otherwise).
	StorageLevels []storage.LevelStats `json:"storage_levels"`
	// Namespaces holds each namespace's share of the figures of
	// NamespaceStats above (they sum to them), to tell which namespace
	// fills the budget and which one misses: every namespace served since
	// the start, those a reload took out too (RemovedNamespaces).
	Namespaces map[string]NamespaceStats `json:"namespaces"`
	// RemovedNamespaces are those of Namespaces that a reload took out:
	// no longer served, their figures kept. Sorted.
	RemovedNamespaces []string `json:"removed_namespaces"`
}

// NamespaceStats are the hot users and cache figures of one namespace, or
// of all (Stats), since the start.
type NamespaceStats struct {
	HotUsers   int64 `json:"hot_users"`
	CacheBytes int64 `json:"cache_bytes"` // bytes accounted to the namespace's hot users
	// Hits, Misses and NoHistory count calls: those that filter, check,
	// record or forget a user's items, or import a filter; not the reads
	// of a user (User, Export), which load a cold user but are no call.
	Hits uint64 `json:"hits"`
	// Misses are the calls that found their user cold with a history
	// stored; NoHistory those that found it cold with none (nothing
	// stored, or all of it past its window: a new user's first call),
	// which no cache could have held, so neither a hit nor a miss. Each
	// takes a load. A user found hot is a hit, even one whose items have
	// all passed the window since: the cache spared its load.
	Misses    uint64  `json:"misses"`
	NoHistory uint64  `json:"no_history_calls"`
	HitRatio  float64 `json:"hit_ratio"` // Hits over Hits plus Misses
	// Loads are the storage reads of cold users: Misses plus NoHistory,
	// and the reads that are no call's (a cold user's stats, an import,
	// a journal folded in at the start), so never fewer.
	Loads     uint64 `json:"loads"`
	NewUsers  uint64 `json:"new_users"` // users a recording call or an import made: nothing stored (among Loads), or gone past its window
	Evictions uint64 `json:"evictions"`
	// Candidates are the distinct candidates the one call tested (filter
	// and batch calls), SeenCandidates those of them that tested seen
	// (filtered out), and Recorded the items recorded as seen by every
	// route: what the service does for the recommender.
	Candidates     uint64 `json:"candidates"`
	SeenCandidates uint64 `json:"seen_candidates"`
	Recorded       uint64 `json:"recorded"`
}

// add adds n's figures to s's, all but the hit ratio.
func (s *NamespaceStats) add(n NamespaceStats) {
	s.HotUsers += n.HotUsers
	s.CacheBytes += n.CacheBytes
	s.Hits += n.Hits
	s.Misses += n.Misses
	s.NoHistory += n.NoHistory
	s.Loads += n.Loads
	s.NewUsers += n.NewUsers
	s.Evictions += n.Evictions
	s.Candidates += n.Candidates
	s.SeenCandidates += n.SeenCandidates
	s.Recorded += n.Recorded
}
