package bench

import (
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Tracker keeps the exact seen set of a sample of users and checks every
// answer a system gives for them: a false negative is an item the user was
// shown (returned by an earlier call) that the system calls unseen; a false
// positive is an item never shown that the system calls seen.
//
// False positives are counted once per (user, item), at the item's first
// classification: a filter's false positive stays one (the item is never
// returned, so never shown), while a true negative is returned and becomes
// shown. Counting every call would make the never-shown rest of a busy
// user's pool consist mostly of its false positives, counted again and
// again; counting each item once estimates the probability that an item
// never shown tests seen.
//
// With a retention window (SetWindow) an item shown longer ago than the
// window plus one granularity must test unseen again (it counts with the
// never-shown items), an item shown less than the window ago must test seen,
// and an item in between may go either way and is not counted.
//
// Calls of one sampled user are serialized by the tracker (Lock/Unlock
// around the call) so that its exact set is the truth at the time of each
// call. Safe for concurrent use.
type Tracker struct {
	users  map[int]*trackedUser // sampled ranks; read-only after NewTracker
	stride int
	seed   maphash.Seed // of itemKey

	clock  func() time.Time // nil: no window
	window time.Duration    // items younger than this must test seen
	grace  time.Duration    // items older than this (window + granularity) must test unseen

	checks   atomic.Int64 // answers checked
	fn       atomic.Int64 // false negatives
	tested   atomic.Int64 // never-shown (user, item) pairs classified, each once
	fp       atomic.Int64 // of those, reported seen
	expired  atomic.Int64 // of the tested, items shown once but past the window
	expSeen  atomic.Int64 // of those, reported seen
	bad      atomic.Int64 // invalid answers
	tainted  atomic.Int64 // users dropped after a failed call
	shownSum atomic.Int64 // items recorded in exact sets
}

// span is when an item was last shown: during a call from a to b (Unix ns
// of the tracker's clock; zero without a window).
type span struct{ a, b int64 }

// trackedUser keys its items by a 64-bit hash of the id (itemKey) rather
// than the id: the maps then hold no pointers, so the harness's collector
// does not scan a thousand users' histories in every cycle (its mark work
// shares the cores with the system under test and lengthens every system's
// latency tail). Two items of one user's pool (2,000 ids) share a key with
// probability about 2^-43.
type trackedUser struct {
	mu      sync.Mutex
	t0      int64               // clock at Lock
	seen    map[uint64]span     // items returned (shown), with when
	fp      map[uint64]struct{} // items never shown, once reported seen: counted already
	tainted bool                // a call failed: the state is unknown, stop checking
}

// NewTracker samples about n of the users' ranks: every stride-th rank
// starting at stride/2 (stride = users/n), so the sample spans hot and cold
// users without holding the few hottest, whose serialization would disturb
// the load.
func NewTracker(users, n int) *Tracker {
	t := &Tracker{users: map[int]*trackedUser{}, seed: maphash.MakeSeed()}
	if n <= 0 || users <= 0 {
		return t
	}
	if n > users {
		n = users
	}
	t.stride = users / n
	for r := t.stride / 2; r < users && len(t.users) < n; r += t.stride {
		t.users[r] = &trackedUser{seen: map[uint64]span{}, fp: map[uint64]struct{}{}}
	}
	return t
}

// SetWindow makes the tracker judge answers by a retention window on the
// given clock (the one the system under test uses): see Tracker. Call it
// before any call.
func (t *Tracker) SetWindow(clock func() time.Time, window, granularity time.Duration) {
	t.clock, t.window, t.grace = clock, window, window+granularity
}

// itemKey is the key of item in a trackedUser's maps.
func (t *Tracker) itemKey(item string) uint64 { return maphash.String(t.seed, item) }

func (t *Tracker) now() int64 {
	if t.clock == nil {
		return 0
	}
	return t.clock().UnixNano()
}

// Sampled returns the ranks of the sampled users.
func (t *Tracker) Sampled() []int {
	out := make([]int, 0, len(t.users))
	for r := t.stride / 2; len(out) < len(t.users); r += t.stride {
		out = append(out, r)
	}
	return out
}

// IsSampled reports whether the user of rank is checked.
func (t *Tracker) IsSampled(rank int) bool { return t.users[rank] != nil }

// Lock returns the tracked state of the user of rank, locked, or nil if the
// user is not sampled. The caller makes the call, then calls Check (on
// success) or Fail (on error), which unlock.
func (t *Tracker) Lock(rank int) *trackedUser {
	u := t.users[rank]
	if u != nil {
		u.mu.Lock()
		u.t0 = t.now()
	}
	return u
}

// Fail records that the call failed: the user's state is unknown from now
// on and the user is no longer checked. It unlocks u.
func (t *Tracker) Fail(u *trackedUser) {
	if !u.tainted {
		u.tainted = true
		t.tainted.Add(1)
	}
	u.mu.Unlock()
}

// Check checks the answer unseen to candidates (distinct items) with the
// given limit against u's exact set, then adds the returned items to it.
// Candidates after the limit-th returned one were not classified by the
// system and are not counted. It unlocks u and returns
// ErrBadAnswer if the answer is not a subsequence of the candidates of at
// most limit items.
func (t *Tracker) Check(u *trackedUser, candidates, unseen []string, limit int) error {
	defer u.mu.Unlock()
	if u.tainted {
		return nil
	}
	if err := validAnswer(candidates, unseen, limit); err != nil {
		t.bad.Add(1)
		u.tainted = true
		t.tainted.Add(1)
		return err
	}
	t.checks.Add(1)
	t0, t1 := u.t0, t.now()
	var fn, tested, fp, expired, expSeen int64
	j := 0
	for _, c := range candidates {
		if j == len(unseen) && len(unseen) >= limit {
			break // the limit was reached: the remaining candidates were not classified
		}
		reportedUnseen := j < len(unseen) && unseen[j] == c
		if reportedUnseen {
			j++
		}
		key := t.itemKey(c)
		sp, shown := u.seen[key]
		mustSeen, mustUnseen := shown, !shown
		if shown && t.clock != nil {
			mustSeen = t1-sp.a < int64(t.window)
			mustUnseen = t0-sp.b >= int64(t.grace)
		}
		_, counted := u.fp[key]
		switch {
		case mustSeen && reportedUnseen:
			fn++
		case mustUnseen && !counted:
			tested++
			if shown {
				expired++
			}
			if !reportedUnseen {
				fp++
				u.fp[key] = struct{}{}
				if shown {
					expSeen++
				}
			}
		}
	}
	for _, c := range unseen {
		key := t.itemKey(c)
		delete(u.fp, key) // no longer never shown
		if _, ok := u.seen[key]; !ok {
			t.shownSum.Add(1)
		}
		u.seen[key] = span{t0, t1}
	}
	t.fn.Add(fn)
	t.tested.Add(tested)
	t.fp.Add(fp)
	t.expired.Add(expired)
	t.expSeen.Add(expSeen)
	return nil
}

// validAnswer reports whether unseen is a subsequence of candidates with at
// most limit items.
func validAnswer(candidates, unseen []string, limit int) error {
	if len(unseen) > limit {
		return fmt.Errorf("%w: %d items returned, limit %d", ErrBadAnswer, len(unseen), limit)
	}
	j := 0
	for _, c := range candidates {
		if j < len(unseen) && unseen[j] == c {
			j++
		}
	}
	if j != len(unseen) {
		return fmt.Errorf("%w: item %q is not a candidate or is out of order", ErrBadAnswer, unseen[j])
	}
	return nil
}

// Correctness is what the tracker found.
type Correctness struct {
	SampledUsers   int     `json:"sampled_users"`
	Checks         int64   `json:"checks"`           // answers checked
	FalseNegatives int64   `json:"false_negatives"`  // shown items reported unseen
	NeverShown     int64   `json:"never_shown"`      // distinct never-shown (user, item) pairs classified
	FalsePositives int64   `json:"false_positives"`  // of those, reported seen at their first classification
	FPRate         float64 `json:"fp_rate"`          // FalsePositives / NeverShown
	Expired        int64   `json:"expired"`          // of NeverShown, items shown once but past the window (window runs)
	ExpiredSeen    int64   `json:"expired_seen"`     // of those, reported seen (false positives or late expiry)
	BadAnswers     int64   `json:"bad_answers"`      // answers that were not a subsequence of the candidates
	TaintedUsers   int64   `json:"tainted_users"`    // users dropped after a failed call
	ShownItems     int64   `json:"shown_items"`      // distinct items ever shown to the sampled users
	MeanShown      float64 `json:"mean_shown_items"` // per sampled user
}

// Result returns the figures so far.
func (t *Tracker) Result() Correctness {
	c := Correctness{SampledUsers: len(t.users), Checks: t.checks.Load(),
		FalseNegatives: t.fn.Load(), NeverShown: t.tested.Load(), FalsePositives: t.fp.Load(),
		Expired: t.expired.Load(), ExpiredSeen: t.expSeen.Load(),
		BadAnswers: t.bad.Load(), TaintedUsers: t.tainted.Load(), ShownItems: t.shownSum.Load()}
	if c.NeverShown > 0 {
		c.FPRate = float64(c.FalsePositives) / float64(c.NeverShown)
	}
	if c.SampledUsers > 0 {
		c.MeanShown = float64(c.ShownItems) / float64(c.SampledUsers)
	}
	return c
}
