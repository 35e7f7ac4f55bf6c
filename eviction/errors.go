package eviction

import (
	"errors"
	"fmt"
	"strings"

	"github.com/seenapi/seenapi/storage"
)

// Sentinel errors; the API maps them to problem types in one place.
var (
	// ErrUnknownNamespace: no profile of that name.
	ErrUnknownNamespace = errors.New("eviction: unknown namespace")
	// ErrUserNotFound: the user has no filter (hot or stored).
	ErrUserNotFound = errors.New("eviction: user not found")
	// ErrCorrupt: the user's stored filter failed its checksum; other users are unaffected.
	ErrCorrupt = errors.New("eviction: stored filter is corrupt")
	// ErrStorage: the store failed (read or write); wraps the store's error.
	ErrStorage = errors.New("eviction: storage failure")
	// ErrStorageFull: the store refused a write for lack of disk space.
	ErrStorageFull = errors.New("eviction: storage full")
	// ErrBelowMinFree: an ErrStorageFull refused by the store's free-space
	// floor (storage.Options.MinFreeBytes, --min-free-bytes) rather than by a full
	// disk; such errors wrap both.
	ErrBelowMinFree = storage.ErrBelowMinFree
	// ErrClosed: the hot set was closed.
	ErrClosed = errors.New("eviction: closed")
	// ErrBadImport: imported bytes are not a valid filter or do not fit the namespace.
	ErrBadImport = errors.New("eviction: bad import")
	// ErrCallKeyReused: a keyed call's answer read back from the journal
	// is another request's (see HotSet.FilterKeyed).
	ErrCallKeyReused = errors.New("eviction: idempotency key used for another request")
	// ErrUnsupported: the filter kind cannot do this (forget items, for a Bloom filter).
	ErrUnsupported = errors.New("eviction: not supported by the filter kind")
)

// ImportError is an ErrBadImport with the reason in words a person reads
// (the API's problem detail). It also wraps the filter's own error.
type ImportError struct {
	Reason string
	err    error
}

func (e *ImportError) Error() string   { return ErrBadImport.Error() + ": " + e.Reason }
func (e *ImportError) Unwrap() []error { return []error{ErrBadImport, e.err} }

func badImport(err error, format string, args ...any) error {
	return &ImportError{Reason: fmt.Sprintf(format, args...), err: err}
}

// filterWords is the filter's error as a caller reads it: without the
// package names its sentinels start with ("userfilter: corrupt encoding:
// checksum mismatch" is "corrupt encoding: checksum mismatch").
func filterWords(err error) string {
	return strings.ReplaceAll(err.Error(), "userfilter: ", "")
}

// joinFew is errors.Join of the first few of errs, and of how many more
// there were: a write-back of many users fails batch after batch alike (a
// full disk), and the one line that logs its error listed every batch,
// 165 KB at a stop of 200,000 users. errors.Is and errors.As see the few.
func joinFew(errs []error) error {
	const few = 3
	if len(errs) <= few {
		return errors.Join(errs...)
	}
	return errors.Join(append(errs[:few:few], fmt.Errorf("and %d more like these", len(errs)-few))...)
}
