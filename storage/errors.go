package storage

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error the store returns wraps one of these (or a
// Badger or I/O error) with %w and names the namespace and user concerned,
// so callers test them with errors.Is.
var (
	// ErrClosed: the store was closed; nothing was read or written.
	ErrClosed = errors.New("storage: store closed")

	// ErrFull: the filesystem's free space is below Options.MinFreeBytes (or
	// a write failed with ENOSPC), so the write was refused. Reads keep
	// working; writes succeed again once space is freed.
	ErrFull = errors.New("storage: disk full")

	// ErrBelowMinFree: an ErrFull whose write the free-space floor
	// (Options.MinFreeBytes) refused, not the disk: the disk had room, and
	// an operator frees space or lowers the floor. An ErrFull without it
	// met the disk itself full (ENOSPC).
	ErrBelowMinFree = fmt.Errorf("%w: free space below MinFreeBytes", ErrFull)

	// ErrBadKey: a namespace or user id is empty or longer than
	// MaxNamespaceLen / MaxUserLen.
	ErrBadKey = errors.New("storage: bad namespace or user id")

	// ErrCorrupt: a stored value could not be read back intact (Badger
	// found a checksum mismatch or a truncated value log). It concerns the
	// user named in the error only.
	ErrCorrupt = errors.New("storage: stored value is corrupt")

	// ErrTooLarge: a user's value is larger than the store can hold
	// (Store.MaxValueBytes); nothing was written for that user, and the
	// other users of the same write were written.
	ErrTooLarge = errors.New("storage: value too large")

	// ErrBadOptions: Options hold a value Open cannot use.
	ErrBadOptions = errors.New("storage: bad options")

	// ErrFormatVersion: the store (or a backup) was written in a format
	// version this build does not know, usually by a newer seenapi.
	ErrFormatVersion = errors.New("storage: unsupported store format version")

	// ErrBadBackup: the stream given to Restore is not a seenapi backup or is
	// truncated or corrupt.
	ErrBadBackup = errors.New("storage: bad backup stream")

	// ErrInUse: another process, usually a seenapi serving the directory,
	// holds the store's directory lock; Open opened nothing.
	ErrInUse = errors.New("storage: data directory in use")

	// ErrNoStore: Open with KeepFormat (an offline backup, which only
	// reads) was given a directory that holds no store, and made none.
	ErrNoStore = errors.New("storage: no store in the data directory")
	// ErrNotClosed: PeekNamespaces met a store that was not closed (a
	// crash): Badger reads it only once Open has recovered it.
	ErrNotClosed = errors.New("storage: the store was not closed; the next Open recovers it")
)

// opError is the failure of one operation of the store, named in its text
// after the package. The sentinels' own "storage: " is not repeated: the
// text reads "storage: restore: bad backup stream: ...".
type opError struct {
	op  string
	err error
}

func opErr(op string, err error) error { return &opError{op: op, err: err} }

func (e *opError) Error() string { return "storage: " + e.op + ": " + unprefixed(e.err) }

// unprefixed is err's text without the "storage: " that opens the store's
// own errors, for a text that has named the package already.
func unprefixed(err error) string { return strings.TrimPrefix(err.Error(), "storage: ") }

func (e *opError) Unwrap() error { return e.err }

// UserError is a failure that concerns one user only; other users of the
// same call were not affected by it.
type UserError struct {
	NS, User string
	Err      error
}

func (e *UserError) Error() string {
	return fmt.Sprintf("%s/%s: %v", e.NS, e.User, e.Err)
}

func (e *UserError) Unwrap() error { return e.Err }

// BackupStoppedError is the error of reading a backup stream (Restore,
// VerifyBackup) that ends with its maker's word that it stopped it: the
// store failed as the backup was taken, which is not whole. It names the
// user whose stored value stopped it (NS and User; empty when the failure
// was no user's) and the failure. errors.Is sees it as ErrBadBackup.
type BackupStoppedError struct {
	NS, User string
	Reason   string
}

func (e *BackupStoppedError) Error() string {
	if e.User == "" {
		return "storage: the backup was stopped as it was taken: " + e.Reason
	}
	return fmt.Sprintf("storage: the backup was stopped as it was taken, by user %s/%s: %s", e.NS, e.User, e.Reason)
}

func (e *BackupStoppedError) Is(target error) bool { return target == ErrBadBackup }

// WriteBackError is returned by WriteBack and Restore when some users were
// not written. Failed names each such user with its cause; every user of
// the call not listed was written. errors.Is sees through it to the causes
// (ErrFull, ErrClosed, ...).
type WriteBackError struct {
	Failed []UserError
}

func (e *WriteBackError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "storage: %d user(s) not written", len(e.Failed))
	for i := range e.Failed {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Failed)-i)
			break
		}
		fmt.Fprintf(&b, "; %s/%s: %s", e.Failed[i].NS, e.Failed[i].User, unprefixed(e.Failed[i].Err))
	}
	return b.String()
}

// Unwrap returns the causes, so errors.Is and errors.As match any of them.
func (e *WriteBackError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i := range e.Failed {
		errs[i] = &e.Failed[i]
	}
	return errs
}
