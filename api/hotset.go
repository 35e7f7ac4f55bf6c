package api

import (
	"io"
	"time"

	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/userfilter"
)

// HotSet is what the API needs of the hot set (implemented by
// *eviction.HotSet). Its methods must be safe for concurrent use. Strings
// passed to it may alias request buffers that are reused once the handler
// returns: the hot set clones whatever it keeps.
type HotSet interface {
	// FilterKeyed is the one call, its unseen candidates appended to
	// dst[:0], with the Idempotency-Key of a call sent with one (see
	// eviction.HotSet.FilterKeyed).
	FilterKeyed(dst []string, ns, user string, candidates []string, limit int, mode userfilter.Mode, k eviction.CallKey) (eviction.Result, error)
	// CheckCallKeys refuses keys whose answers read back from their users'
	// journals are other requests', and returns the oldest reading the
	// others found age from.
	CheckCallKeys(ns string, users []string, keys []eviction.CallKey) (time.Time, error)
	// Record marks items seen without filtering.
	Record(ns, user string, items []string) (eviction.Result, error)
	// RecordBulk is Record leaving a user who is not in memory out of it.
	RecordBulk(ns, user string, items []string) (eviction.Result, error)
	// Check appends to seen whether each item was seen, recording nothing.
	Check(ns, user string, items []string, seen []bool) ([]bool, error)
	// User returns the user's stats, or eviction.ErrUserNotFound.
	User(ns, user string) (eviction.UserStats, error)
	// Peek is User without bringing a cold user into memory.
	Peek(ns, user string) (eviction.UserStats, error)
	// ForgetThen erases the user everywhere, calling then before a call
	// can load the user afresh, and reports whether there was anything of
	// the user to erase (see eviction.HotSet.ForgetThen).
	ForgetThen(ns, user string, then func()) (bool, error)
	// ForgetItems makes items unseen again, in namespaces whose filter kind can.
	ForgetItems(ns, user string, items []string) (int, error)
	// Export returns the user's encoded filter.
	Export(ns, user string) ([]byte, error)
	// Import merges data into (or with replace, replaces) the user's filter,
	// and reports whether it wrote anything (see eviction.HotSet.Import).
	Import(ns, user string, data []byte, replace bool, maxBytes int64) (bool, error)
	// Users returns up to limit users of ns with a history, in byte order,
	// after the user after ("": from the first).
	Users(ns, after string, limit int) ([]string, error)
	// Namespaces returns the configured namespaces sorted by name.
	Namespaces() []eviction.Namespace
	// StoredNamespaces returns the namespaces with stored users that are
	// not served.
	StoredNamespaces() ([]string, error)
	// PurgeNamespace erases every stored user of a namespace that is not
	// served, and returns how many there were.
	PurgeNamespace(ns string) (int, error)
	// Namespace returns one namespace.
	Namespace(name string) (eviction.Namespace, bool)
	// Stats returns service-wide figures.
	Stats() eviction.Stats
	// Backup writes a backup of the store to w while calls go on.
	Backup(w io.Writer) error
	// BackupSkippingDamaged is Backup, but leaves out, and returns, the
	// users whose stored filter cannot be read.
	BackupSkippingDamaged(w io.Writer) ([]eviction.SkippedUser, error)
	// SetReplyClock makes the answers read back from the journal age in
	// the time answers are stamped in (see replays.lifeLocked).
	SetReplyClock(life func(time.Time) time.Time)
	// SetAnswerLog makes the write-back keep a keyed call's journal record
	// until log has written the call's answer.
	SetAnswerLog(log eviction.AnswerLog)
}

var _ HotSet = (*eviction.HotSet)(nil)
