package eviction

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
	"github.com/zeebo/xxh3"
)

// Options configure a HotSet. The zero value of each field means its default.
type Options struct {
	// CacheBytes is the byte budget of hot users (filters plus per-entry overhead). Default 512 MiB.
	CacheBytes int64
	// FlushInterval is how long a changed filter waits before it is
	// written back (the journal keeps its changes durable meanwhile): the
	// write-back loop runs every FlushInterval/500 (5 ms to 100 ms) and
	// writes at most smoothRound of the users changed at least
	// FlushInterval ago, all of those changed twice that long ago, and
	// every evicted one. So the work is spread evenly instead of coming in
	// one burst per interval, a user called again meanwhile is written
	// once, and a change waits between one and two intervals. Default 5s.
	FlushInterval time.Duration
	// Shards splits the hot set so calls for different users rarely share
	// a lock. Rounded up to a power of two. Default 64.
	Shards int
	// NoJournal turns the journal off: acknowledged writes can then be lost
	// on a crash. For benchmarks only.
	NoJournal bool
	// ReplyTTL is how long the answer of a call sent with an
	// Idempotency-Key, read back from the journal after a restart, is given
	// to its retry (FilterKeyed). Default 5m, the API's own.
	ReplyTTL time.Duration
	// ReplyBytes is the budget of those answers, shared between their
	// callers (CallKey.Caller): the least recently used of the caller
	// whose answers take the most goes first. Default 32 MiB; negative:
	// none kept.
	ReplyBytes int64
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultCacheBytes    = 512 << 20
	DefaultFlushInterval = 5 * time.Second
	DefaultShards        = 64
	DefaultReplyTTL      = 5 * time.Minute
	DefaultReplyBytes    = 32 << 20
	// writeBatch is how many users one store write-back carries.
	writeBatch = 512
)

func (o Options) withDefaults() Options {
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.Shards <= 0 {
		o.Shards = DefaultShards
	}
	n := 1
	for n < o.Shards {
		n <<= 1
	}
	o.Shards = n
	if o.ReplyTTL <= 0 {
		o.ReplyTTL = DefaultReplyTTL
	}
	if o.ReplyBytes == 0 {
		o.ReplyBytes = DefaultReplyBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// key identifies a user in the hot set: 64 bits of XXH3 of the user id,
// seeded by the namespace and a seed drawn at start (so ids cannot be
// chosen to collide). A uint64 key makes the LRU's map slot 16 bytes
// instead of 24 for a 128-bit key. The entry keeps the id itself, so two
// users with one key are told apart: the second takes the next of its
// maxProbes keys (see HotSet.key and slotLocked).
type key uint64

// maxProbes is how many keys a user may take. Two users of one key in a
// hot set of a million users happen about once in 2^25 such sets; a user
// whose every key is taken by others is an error, never a mix-up.
const maxProbes = 4

// probeSeeds turn a user's first key into its others.
var probeSeeds = [maxProbes]uint64{0, 0x9e3779b97f4a7c15, 0xc2b2ae3d27d4eb4f, 0x165667b19e3779f9}

// userHash hashes a user id; tests replace it to make users collide.
var userHash = xxh3.HashStringSeed

// processSeed is part of every key's seed: keys live in memory only.
var processSeed = rand.Uint64()

// nsSeed is the seed of namespace name's keys.
func nsSeed(name string) uint64 { return xxh3.HashString(name) ^ processSeed }

type loadCall struct {
	done chan struct{}
	err  error
	// Whose load it is: the key alone does not say (see slotLocked). user
	// may alias the caller's request, which outlives the loadCall.
	ns   uint8
	user string
}

type shard struct {
	mu      sync.Mutex
	lru     *simplelru.LRU[key, *entry]
	bytes   int64
	budget  int64
	loading map[key]*loadCall
	dirty   queue          // entries that turned dirty since their last write-back, in dirtySince order
	evicted map[key]*entry // evicted while dirty: still the truth until written back
	// keyed holds, for a user changed by keyed calls since its last
	// write-back or whose last write-back left such calls' records in the
	// journal, the first such record's sequence number and when the last
	// was made (see keyedRecord).
	keyed map[*entry]keyedRecord
	// failed holds, for a user whose write-back failed and that has not
	// been written since, when its oldest change not written was made:
	// its dirtySince restarts at the failure, which spaces its retries, and
	// the flush lag reads this instead (see failedWrite).
	failed map[*entry]failedWrite
	// probing is set once a user of this shard took a key other than its
	// first: from then on, a user not found under its first key may be
	// under another, and lookups try them all.
	probing bool
	// reap, reapAt, reapPass and reapPushed are the reaper's (see reap.go).
	reap       []key
	reapAt     int
	reapPass   uint8 // flagReapPass or 0
	reapPushed int
}

// nsInfo is one namespace as the hot set serves it. It is never changed
// once built: SetNamespaces builds a new one that keeps the index, the seed
// and the counters, so a call that holds the old one finishes with it.
type nsInfo struct {
	Namespace
	index uint8  // in nsTable.byIndex; what an entry keeps
	seed  uint64 // namespace part of every key
	c     *nsCounters
	made  []byte // an empty filter of Profile, encoded, for journal records (see journal.go)
}

// madeOf returns an empty filter of profile p encoded: the namespace's own
// when p is its profile, else made anew (a user made before a SIGHUP
// changed the profile).
func (n *nsInfo) madeOf(p userfilter.Profile) ([]byte, error) {
	if p == n.Profile && n.made != nil {
		return n.made, nil
	}
	return emptyEncoding(p)
}

// emptyEncoding is an empty filter of profile p, encoded.
func emptyEncoding(p userfilter.Profile) ([]byte, error) {
	f, err := userfilter.New(p)
	if err != nil {
		return nil, err
	}
	return f.AppendBinary(nil)
}

// nsTable is the namespaces the hot set serves, replaced whole by
// SetNamespaces and read without a lock by every call.
type nsTable struct {
	byName map[string]*nsInfo // the namespaces served
	// byIndex holds every namespace served since New, by index: one that a
	// reload left out stays, for its users still in memory (write-back
	// names their namespace) and for its figures, and takes its index back
	// if a later reload serves it again.
	byIndex []*nsInfo
	names   []string // byName's keys, sorted
}

// nsCounters are a namespace's figures. The service-wide ones are their
// sums (HotSet.Stats), so that counting by namespace costs a call no more
// atomic additions than counting for the whole service did.
type nsCounters struct {
	hits, misses, loads, evictions, newUsers atomic.Uint64
	// noHistory counts the calls that looked for a cold user with no
	// history (countCold): neither hits nor misses.
	noHistory          atomic.Uint64
	hotUsers, hotBytes atomic.Int64
	// candidates and seen count the one call's distinct candidates, and
	// those of them that tested seen; recorded the items every recording
	// route added.
	candidates, seen, recorded atomic.Uint64
	// purges counts the purges of the namespace begun and ended: odd
	// while one runs (see PurgeNamespace and purgedSince).
	purges atomic.Uint64
}

// HotSet holds user filters in memory under a byte budget, writes changes
// back to the store in batches and journals every recording call before it
// is acknowledged. Safe for concurrent use.
type HotSet struct {
	store  Store
	writer uint64 // the store's token for this hot set's writes (storage.Store.Attach); 0: none
	detach func()
	opts   Options
	nss    atomic.Pointer[nsTable]
	nsMu   sync.Mutex // one SetNamespaces (or PurgeNamespace) at a time
	stored storedSet  // namespaces that may hold data (see StoredNamespaces)
	start  time.Time  // origin of clock
	shards []*shard
	mask   uint64
	// replies are the answers of keyed calls read back from the journal.
	replies *replies
	// answerLog is the API's log of keyed calls' answers (SetAnswerLog);
	// nil: none.
	answerLog atomic.Pointer[AnswerLog]

	flushMu sync.Mutex // one write-back at a time; erase and import wait for it
	// changing counts the steps holding flushMu outside write-back (see
	// lockForChange): while one does, no round can run, and loads do not
	// wait for one (waitBacklog).
	changing atomic.Int32

	// Evicted users that are still dirty live outside the budget until
	// written back: past backlogLimit bytes of them, calls that load a user
	// (and so evict one) wait for the write-back to catch up (see
	// waitBacklog).
	evictedBytes atomic.Int64
	backlogLimit int64
	backlogMu    sync.Mutex
	backlogCond  *sync.Cond
	flushRounds  uint64 // guarded by backlogMu
	kick         chan struct{}
	scratch      sync.Pool // of *callScratch
	// encoded holds the encodings of one write-back batch, back to back
	// (one buffer reused, not one allocation per user). flushMu held.
	encoded []byte
	// writes, taken and due are write-back's lists, reused from one round
	// to the next (rounds come every few milliseconds) and cleared after
	// each, so that they keep no user alive. flushMu held.
	writes     []storage.Write
	taken, due []*entry
	sinces     []uint32 // the dirtySince of each of taken
	// nextShard is the shard a limited write-back round looks at first
	// (flushSome). flushMu held.
	nextShard int

	// maxEncoded is the largest encoded filter the store keeps for a user
	// (0: no limit but the filter's own): a user saturates there, as at
	// its namespace's max_items, since write-back stores a filter whole
	// and one it cannot store would stay dirty, its journal live, for good.
	maxEncoded int

	// hotBytes is what every shard holds, summed: a shard evicts for its
	// own budget only while the whole set is over CacheBytes (see
	// trimLocked), and sweepMu lets one call at a time trim the others.
	hotBytes  atomic.Int64
	sweepMu   sync.Mutex
	sweepNext int // the shard the next sweep looks at first; sweepMu held

	// reapKeys is how many keys the shards' reap lists hold, summed: the
	// reaper skips its round without locking a shard while it is 0.
	reapKeys atomic.Int64

	flushes, flushedUsers, journals atomic.Uint64
	storageErrors, panics           atomic.Uint64
	panicLogged                     atomic.Int64 // see spaced
	dirtyUsers                      atomic.Int64
	closed, ready                   atomic.Bool
	stop                            chan struct{}
	stopped                         chan struct{}
}

// New returns a hot set over store for the given namespaces and starts its
// write-back loop. Close stops it.
func New(store Store, namespaces []Namespace, opts Options) (*HotSet, error) {
	opts = opts.withDefaults()
	t, _, err := nextTable(&nsTable{}, namespaces)
	if err != nil {
		return nil, err
	}
	h := &HotSet{store: store, opts: opts, start: opts.Now(), stored: storedSet{names: map[string]struct{}{}},
		stop: make(chan struct{}), stopped: make(chan struct{}), kick: make(chan struct{}, 1),
		backlogLimit: max(opts.CacheBytes/16, 1<<20)}
	h.nss.Store(t)
	h.backlogCond = sync.NewCond(&h.backlogMu)
	h.shards = make([]*shard, opts.Shards)
	for i := range h.shards {
		l, err := simplelru.NewLRU[key, *entry](math.MaxInt32, nil)
		if err != nil {
			return nil, err
		}
		h.shards[i] = &shard{lru: l, budget: opts.CacheBytes / int64(opts.Shards),
			loading: map[key]*loadCall{}, evicted: map[key]*entry{}, keyed: map[*entry]keyedRecord{}}
	}
	h.mask = uint64(opts.Shards - 1)
	h.scratch.New = func() any { return new(callScratch) }
	h.replies = newReplies(opts.ReplyBytes, opts.ReplyTTL)
	// Every user the hot set writes it has loaded first, and every write of
	// it goes through the hot set: its values include what is stored, so
	// while it is the store's only writer, write-back need not read and
	// merge (see storage.Store.Attach).
	h.detach = func() {}
	if a, ok := store.(attacher); ok {
		h.writer, h.detach = a.Attach()
	}
	if l, ok := store.(valueLimiter); ok {
		h.maxEncoded = int(min(l.MaxValueBytes(), math.MaxInt))
	}
	go h.flushLoop()
	return h, nil
}

// attacher is a Store that lets its only writer skip write-back's merge.
type attacher interface {
	Attach() (token uint64, detach func())
}

// valueLimiter is a Store that keeps values of at most MaxValueBytes.
type valueLimiter interface {
	MaxValueBytes() int64
}

func (h *HotSet) shardOf(k key) *shard { return h.shards[uint64(k)&h.mask] }

// infoOf returns the namespace of e.
func (h *HotSet) infoOf(e *entry) *nsInfo { return h.nss.Load().byIndex[e.ns] }

// key returns the user's key number probe. Every key of a user picks the
// same shard (the first key's low bits), so all of them are looked up
// under one lock.
func (h *HotSet) key(info *nsInfo, user string, probe uint8) key {
	k := userHash(user, info.seed)
	if probe > 0 {
		k = userHash(user, info.seed^probeSeeds[probe])&^h.mask | k&h.mask
	}
	return key(k)
}

// keyOf returns the key of e's user (recomputed rather than stored: 8 bytes a user).
func (h *HotSet) keyOf(e *entry) key { return h.key(h.infoOf(e), e.id(), e.probe) }

// clock is the time in milliseconds since the hot set started, modulo
// 2^32 (about 49.7 days), never 0: what entry.dirtySince holds.
func (h *HotSet) clock() uint32 {
	return max(uint32(h.opts.Now().Sub(h.start).Milliseconds()), 1)
}

// errCollision means every key of a user is taken by other users.
var errCollision = errors.New("eviction: user key collision")

// slot is where a user is in a shard: the key its entry or its load is
// under (at most one of e and lc is set), or the key it would take.
type slot struct {
	k     key
	probe uint8
	e     *entry
	lc    *loadCall
}

// slotLocked finds the user's entry or load in shard s, or else the first
// of its keys that no other user's entry or load holds. An entry it finds
// in the LRU moves to the front (another user's too, when a key is shared:
// rare, and only an LRU order). s.mu held.
func (h *HotSet) slotLocked(s *shard, info *nsInfo, user string, k0 key) (slot, error) {
	free := slot{probe: maxProbes}
	for p := uint8(0); p < maxProbes; p++ {
		if p > 0 && !s.probing && free.probe < maxProbes {
			break // no user of this shard is under a later key
		}
		k := k0
		if p > 0 {
			k = h.key(info, user, p)
		}
		e, ok := s.lru.Get(k)
		if !ok {
			e, ok = s.evicted[k]
		}
		if ok {
			if e.ns == info.index && e.id() == user {
				return slot{k: k, probe: p, e: e}, nil
			}
			continue
		}
		if lc, ok := s.loading[k]; ok {
			if lc.ns == info.index && lc.user == user {
				return slot{k: k, probe: p, lc: lc}, nil
			}
			continue
		}
		if free.probe == maxProbes {
			free = slot{k: k, probe: p}
		}
	}
	if free.probe == maxProbes {
		return slot{}, fmt.Errorf("%w: all %d keys of %s/%s are taken", errCollision, maxProbes, info.Name, user)
	}
	return free, nil
}

// claimLocked registers lc as the user's load at the free slot sl. s.mu held.
func (h *HotSet) claimLocked(s *shard, sl slot, info *nsInfo, user string) *loadCall {
	lc := &loadCall{done: make(chan struct{}), ns: info.index, user: user}
	s.loading[sl.k] = lc
	if sl.probe > 0 {
		s.probing = true
	}
	return lc
}

func (h *HotSet) namespace(ns string) (*nsInfo, error) {
	if h.closed.Load() {
		return nil, ErrClosed
	}
	info, ok := h.nss.Load().byName[ns]
	if !ok {
		return nil, fmt.Errorf("%w: %q is not served", ErrUnknownNamespace, ns)
	}
	return info, nil
}

// recovered, deferred by a step that handles one user's data in the store
// or the filter's code (a load, an encoding, a write-back, an erase), turns
// a panic in it (a bug met by that data) into the step's error: the user's
// step fails and is retried like any failed one, other users go on, and no
// lock or load claim is left held. The stack is logged at most once every
// logEvery, since a failing write-back is retried again and again (see
// flushWarner).
func (h *HotSet) recovered(err *error, what, ns, user string) {
	r := recover()
	if r == nil {
		return
	}
	h.panics.Add(1)
	if ns != "" || user != "" { // a merge knows bytes only; the store names the user
		what += " " + ns + "/" + user
	}
	*err = fmt.Errorf("eviction: panic %s: %v", what, r)
	if spaced(&h.panicLogged) {
		h.opts.Logger.Error("seenapi: panic handling a user's data; the step fails and is retried",
			"step", what, "ns", ns, "user", user, "panic", r, "stack", string(debug.Stack()))
	}
}

// logEvery is how often a failure that repeats (a write-back retried a
// flush interval later, an evicted user's at every round, up to 200 a
// second: see flushWarner) is logged at most.
const logEvery = 10 * time.Second

// spaced reports whether a line may be logged now: last holds when (unix
// ns) the line before was, and lines come at most once every logEvery.
// Safe for concurrent use.
func spaced(last *atomic.Int64) bool {
	now, l := time.Now().UnixNano(), last.Load()
	return now-l >= int64(logEvery) && last.CompareAndSwap(l, now)
}

func (h *HotSet) storageErr(err error, what, ns, user string) error {
	if errors.Is(err, storage.ErrFull) {
		return fmt.Errorf("%w: %s %s/%s: %w", ErrStorageFull, what, ns, user, err)
	}
	return fmt.Errorf("%w: %s %s/%s: %w", ErrStorage, what, ns, user, err)
}

// ttlOf is how long a windowed filter stays useful in the store. An empty
// one (gone) stays as long as a journal record it covers may, so that none
// is replayed after a restart, then leaves.
func ttlOf(f *userfilter.Filter, now time.Time) time.Duration {
	if gone(f, now) {
		return journalTTL(f.Profile())
	}
	exp := f.ExpiresAt()
	if exp.IsZero() {
		return 0
	}
	return max(exp.Sub(now), time.Second)
}

// gone reports whether f is a windowed filter with no item in the window
// at now, or one without a window that never recorded an item (stored by
// builds that made a user of an import of such a filter, see Import): its
// user is gone, as if never seen (not listed, no stats), and its stored
// value is written Empty, to leave the disk. A windowless filter reads its
// first seen only, unless it never recorded.
func gone(f *userfilter.Filter, now time.Time) bool {
	if f.Profile().Window == 0 && !f.FirstSeen().IsZero() {
		return false
	}
	return f.Empty(now)
}

// NoHistory is what the store's listing and count of users
// (storage.PeekNamespaces) leave out: the stored filters that are gone
// whatever the time, those without a window that never recorded (see
// gone), which earlier builds stored. Such a filter takes
// about 20 bytes; the listing reads no value longer than the store keeps
// beside its key by default (storage.DefaultValueThreshold), so that it
// reads no value-log file.
func NoHistory() storage.Hidden {
	return storage.Hidden{MaxBytes: storage.DefaultValueThreshold, Is: userfilter.NeverRecorded}
}

// Users returns up to limit users of ns, in byte order, after the user
// after ("": from the first): each user with a history in ns, from its
// first acknowledged write (journaled before it is answered) until it is
// forgotten. Hot users are read from the store, not the cache, so a page is
// as long as asked whatever is hot. Safe for concurrent use.
func (h *HotSet) Users(ns, after string, limit int) ([]string, error) {
	if _, err := h.namespace(ns); err != nil {
		return nil, err
	}
	users, err := h.store.Users(ns, after, limit, NoHistory())
	if err != nil {
		return nil, fmt.Errorf("%w: listing users: %w", ErrStorage, err)
	}
	return users, nil
}

// Usage returns the bytes accounted to hot users and the budget; cheaper
// than Stats.
func (h *HotSet) Usage() (bytes, budget int64) {
	for _, info := range h.nss.Load().byIndex {
		bytes += info.c.hotBytes.Load()
	}
	return bytes, h.opts.CacheBytes
}

// Stats returns service-wide figures, and each namespace's share of them.
func (h *HotSet) Stats() Stats {
	st := Stats{CacheBudgetBytes: h.opts.CacheBytes,
		DirtyUsers: h.dirtyUsers.Load(), Flushes: h.flushes.Load(), FlushedUsers: h.flushedUsers.Load(),
		JournalAppends: h.journals.Load(), StorageErrors: h.storageErrors.Load(), Panics: h.panics.Load(),
		StorageBytes: h.store.Size(), StorageLevels: []storage.LevelStats{}, RemovedNamespaces: []string{}}
	if l, ok := h.store.(leveled); ok {
		st.StorageLevels = l.Levels()
	}
	if f, ok := h.store.(interface{ Full() bool }); ok {
		st.StorageFull = f.Full()
	}
	t := h.nss.Load()
	st.Namespaces = make(map[string]NamespaceStats, len(t.byIndex))
	for _, info := range t.byIndex {
		c := info.c
		// Misses and NoHistory are read before Loads, which a cold call
		// counts first: a snapshot never has more of them than loads.
		n := NamespaceStats{HotUsers: c.hotUsers.Load(), CacheBytes: c.hotBytes.Load(), Hits: c.hits.Load(),
			Misses: c.misses.Load(), NoHistory: c.noHistory.Load(), Loads: c.loads.Load(), NewUsers: c.newUsers.Load(), Evictions: c.evictions.Load(),
			Candidates: c.candidates.Load(), SeenCandidates: c.seen.Load(), Recorded: c.recorded.Load()}
		n.HitRatio = hitRatio(n.Hits, n.Misses)
		st.Namespaces[info.Name] = n
		st.add(n)
		if _, served := t.byName[info.Name]; !served {
			st.RemovedNamespaces = append(st.RemovedNamespaces, info.Name)
		}
	}
	slices.Sort(st.RemovedNamespaces)
	st.HitRatio = hitRatio(st.Hits, st.Misses)
	now := h.clock()
	for _, s := range h.shards {
		s.mu.Lock()
		lag := func(since uint32) {
			// A difference of 2^31 ms or more is a clock that went back.
			if d := now - since; since != 0 && d < 1<<31 {
				st.FlushLag = max(st.FlushLag, time.Duration(d)*time.Millisecond)
			}
		}
		s.dirty.each(func(e *entry) { lag(e.dirtySince.Load()) })
		for e, f := range s.failed {
			if e.dirtySince.Load() != f.at {
				delete(s.failed, e) // clean since, or written
				continue
			}
			lag(f.since)
		}
		s.mu.Unlock()
	}
	return st
}

// countCold counts the look of a call at a cold user once its load says
// whether the user had a history: a miss if it had one (or if the load
// failed: f nil and err set), else a call for a user with no history
// (nothing stored, or all of it past its window), which no cache could
// have held: counted as a miss, a brand-new user's first call would make
// a fresh service's hit ratio read as a cache too small.
func countCold(c *nsCounters, f *userfilter.Filter, err error, now func() time.Time) {
	if err == nil && (f == nil || gone(f, now())) {
		c.noHistory.Add(1)
		return
	}
	c.misses.Add(1)
}

// hitRatio is hits over hits plus misses; 0 before any call.
func hitRatio(hits, misses uint64) float64 {
	if total := hits + misses; total > 0 {
		return float64(hits) / float64(total)
	}
	return 0
}

// Close flushes every dirty filter and stops background work. It does not close the store.
func (h *HotSet) Close() error {
	if h.closed.Swap(true) {
		return nil
	}
	close(h.stop)
	<-h.stopped
	h.flushed() // let go of calls waiting on the backlog
	defer h.detach()
	return h.Flush()
}

// Ready reports whether Recover has run: the pending journal has been
// folded in (calls are answered correctly before that too; they replay
// their user's journal when they load it).
func (h *HotSet) Ready() bool { return h.ready.Load() }
