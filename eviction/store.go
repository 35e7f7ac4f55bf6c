package eviction

import "time"

// Store is what the hot set needs of storage (implemented by storage.Store).
// Values are opaque bytes to it; all methods must be safe for concurrent use.
type Store interface {
	// Load returns the user's stored filter (nil if none) and the journal
	// entries not yet covered by it, in sequence order.
	Load(ns, user string) (filter []byte, journal []JournalEntry, err error)
	// Append adds one journal entry for the user and returns once it is
	// committed (fsync'd when the store syncs). Concurrent appends are grouped
	// into one write. The entry expires after ttl (0: never).
	Append(ns, user string, value []byte, ttl time.Duration) (seq uint64, err error)
	// WriteBack stores each write's value, merged into what is stored with
	// merge when both exist, and deletes that user's journal entries with
	// Seq <= UpTo, atomically per user.
	WriteBack(writes []Write, merge func(stored, value []byte) ([]byte, error)) error
	// Delete removes the user's filter and journal.
	Delete(ns, user string) error
	// Size returns the bytes the store takes on disk.
	Size() int64
}

// JournalEntry is one appended record.
type JournalEntry struct {
	Seq   uint64
	Value []byte
}

// Write is one user's write-back.
type Write struct {
	NS, User string
	Value    []byte
	UpTo     uint64        // journal entries with Seq <= UpTo are covered by Value
	TTL      time.Duration // 0: never expires
}
