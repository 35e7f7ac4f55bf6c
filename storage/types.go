package storage

import "time"

// JournalEntry is one appended journal record of a user.
type JournalEntry struct {
	Seq   uint64 // store-wide sequence number, increasing in append order
	Value []byte // opaque to the store
}

// Write is one user's write-back.
type Write struct {
	NS, User string
	Value    []byte // the encoded filter; opaque to the store
	UpTo     uint64 // journal entries of this user with Seq <= UpTo are covered by Value and deleted
	// TTL is how long after the write the value expires (0: never). A
	// merge that brings stored items into it keeps the later of that and
	// the stored value's expiry (see Store.WriteBack).
	TTL time.Duration
	// Empty says Value holds no item: the user is gone (a windowed
	// filter whose items all left the window), and its entry, kept until
	// TTL for its cover mark, lists no user. A merge that brings stored
	// items into Value makes it an ordinary write.
	Empty bool
	// VoidJournal says Value is the user's whole state, whatever was
	// stored: every journal record of the user appended before the write
	// is void, as after a Delete, those an unreadable stored cover mark
	// covered included (UpTo is not read), and in the same commit as the
	// value, so a crash leaves either the old state or the new one. The
	// value replaces the stored one, merge or not. The caller keeps the
	// user's appends off until WriteBack returns.
	VoidJournal bool
	// Writer is the token of the attached writer making the write (see
	// Store.Attach); 0: a writer the store does not know, whose write
	// ends every attached writer's right to skip the merge's read.
	Writer uint64
}

// MergeFunc merges a value about to be written into the value already stored.
type MergeFunc func(stored, value []byte) ([]byte, error)

// FoldFunc returns a stored filter with the user's journal records after
// its cover mark added back onto it, as a load after a restart adds them,
// so that a merge (see Store.Restore) takes in the filter the user's calls
// ran on. An error leaves the filter as stored.
type FoldFunc func(filter []byte, journal []JournalEntry) ([]byte, error)
