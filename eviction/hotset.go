package eviction

import (
	"log/slog"
	"time"

	"github.com/seenapi/seenapi/userfilter"
)

// Options configure a HotSet. The zero value of each field means its default.
type Options struct {
	// CacheBytes is the byte budget of hot users (filters plus per-entry overhead). Default 512 MiB.
	CacheBytes int64
	// FlushInterval is how often dirty filters are written back. Default 1s.
	FlushInterval time.Duration
	// NoJournal turns the journal off: acknowledged writes can then be lost
	// on a crash. For benchmarks only.
	NoJournal bool
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
}

// HotSet holds user filters in memory under a byte budget. Safe for concurrent use.
type HotSet struct{}

// New returns a hot set over store for the given namespaces.
func New(store Store, namespaces []Namespace, opts Options) (*HotSet, error) {
	return nil, ErrClosed // implementation in progress
}

// Filter is the one call: it returns the candidates the user has not seen
// (order kept, duplicates once, at most limit; limit <= 0 means no limit)
// and records per mode before returning. Result.Unseen aliases candidates.
func (h *HotSet) Filter(ns, user string, candidates []string, limit int, mode userfilter.Mode) (Result, error) {
	return Result{}, ErrClosed
}

// Record marks items seen without filtering (Result.Recorded new, Result.SeenCount already seen).
func (h *HotSet) Record(ns, user string, items []string) (Result, error) { return Result{}, ErrClosed }

// Check appends to seen whether each item was seen, recording nothing. An
// unknown user has seen nothing.
func (h *HotSet) Check(ns, user string, items []string, seen []bool) ([]bool, error) {
	return seen, ErrClosed
}

// User returns the user's stats, or ErrUserNotFound.
func (h *HotSet) User(ns, user string) (UserStats, error) { return UserStats{}, ErrClosed }

// Forget erases the user from the hot set, the journal and the store.
func (h *HotSet) Forget(ns, user string) error { return ErrClosed }

// Export returns the user's encoded filter (including unflushed changes), or ErrUserNotFound.
func (h *HotSet) Export(ns, user string) ([]byte, error) { return nil, ErrClosed }

// Import merges (or with replace, replaces) the user's filter with data
// from Export. Bad bytes or a filter of other parameters: ErrBadImport.
func (h *HotSet) Import(ns, user string, data []byte, replace bool) error { return ErrClosed }

// Namespaces returns the configured namespaces sorted by name.
func (h *HotSet) Namespaces() []Namespace { return nil }

// Namespace returns one namespace.
func (h *HotSet) Namespace(name string) (Namespace, bool) { return Namespace{}, false }

// Stats returns service-wide figures.
func (h *HotSet) Stats() Stats { return Stats{} }

// Flush writes every dirty filter back now.
func (h *HotSet) Flush() error { return ErrClosed }

// Close flushes every dirty filter and stops background work. It does not close the store.
func (h *HotSet) Close() error { return nil }
