package eviction

import (
	"io"
	"time"

	"github.com/seenapi/seenapi/storage"
)

// Store is what the hot set needs of storage (implemented by *storage.Store).
// Values are opaque bytes to it; all methods must be safe for concurrent use.
type Store interface {
	// Load returns the user's stored filter (nil if none) and the journal
	// entries not yet covered by it, in sequence order.
	Load(ns, user string) (filter []byte, journal []storage.JournalEntry, err error)
	// Append adds one journal entry for the user and returns once it is
	// committed (fsync'd when the store syncs). Concurrent appends are grouped
	// into one write. The entry expires after ttl (0: never).
	Append(ns, user string, value []byte, ttl time.Duration) (seq uint64, err error)
	// WriteBack stores each write's value, merged into what is stored with
	// merge when both exist, and deletes that user's journal entries with
	// Seq <= UpTo (or those listed in Journal) once the value is written.
	WriteBack(writes []storage.Write, merge storage.MergeFunc) error
	// Delete removes the user's filter and journal.
	Delete(ns, user string) error
	// Size returns the bytes the store takes on disk.
	Size() int64
	// Users returns up to limit users of ns that have a stored filter
	// (but those hide hides) or journal entries, in byte order, after the
	// user after ("": from the first).
	Users(ns, after string, limit int, hide storage.Hidden) ([]string, error)
	// Namespaces returns the namespaces that hold a stored filter or a
	// journal entry, sorted.
	Namespaces() ([]string, error)
	// PurgeNamespace erases every user of ns, as Delete erases one, and
	// returns how many there were.
	PurgeNamespace(ns string) (int, error)
	// Backup writes a consistent snapshot of the store, journal included,
	// to w without blocking other calls.
	Backup(w io.Writer) error
	// BackupSkippingDamaged is Backup, but leaves out, and returns, the
	// users whose stored filter cannot be read rather than failing.
	BackupSkippingDamaged(w io.Writer) ([]storage.SkippedUser, error)
}
