package eviction

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
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
	// ReplyBytes is the budget of those answers, least recently used first
	// out. Default 32 MiB; negative: none kept.
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
	hotUsers, hotBytes                       atomic.Int64
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

// NamespaceChanges is what SetNamespaces did.
type NamespaceChanges struct {
	Added, Changed []string // namespaces new to the hot set (or served again), and those whose profile changed
	// Removed are namespaces the hot set served that the new list leaves
	// out: they are no longer served, and their hot users were evicted
	// (those with changes are written back first; see SetNamespaces).
	Removed []string
}

// SetNamespaces serves namespaces from now on, without a restart: a new
// namespace is served at once, and a changed profile applies to the users
// whose filters are made from now on (a filter keeps the profile it was
// made with). A namespace left out is no longer served: calls for it fail
// with ErrUnknownNamespace, as after a restart without it, and its hot
// users are evicted, those with changes kept reachable until they are
// written back, which SetNamespaces asks for at once. Its users' data
// stays in the store, and a later list that has the namespace again
// serves them as they were. A call for such a namespace that was under
// way when SetNamespaces ran finishes, and may leave its user hot, to be
// evicted as the least recently used.
// A list with an invalid profile, a name twice, or more namespaces in all
// than the hot set can tell apart changes nothing.
func (h *HotSet) SetNamespaces(namespaces []Namespace) (NamespaceChanges, error) {
	h.nsMu.Lock()
	defer h.nsMu.Unlock()
	prev := h.nss.Load()
	t, ch, err := nextTable(prev, namespaces)
	if err != nil {
		return NamespaceChanges{}, err
	}
	h.nss.Store(t)
	if len(ch.Removed) > 0 {
		h.stored.add(ch.Removed...)
		var gone [maxNamespaces]bool
		for _, name := range ch.Removed {
			gone[prev.byName[name].index] = true
		}
		h.evictNamespaces(&gone)
	}
	return ch, nil
}

// evictNamespaces evicts every hot user of the namespaces whose index is
// set in gone, as trimLocked evicts the least recently used, and asks for
// a write-back round of those with changes. No lock held.
func (h *HotSet) evictNamespaces(gone *[maxNamespaces]bool) {
	var out []*entry
	for _, s := range h.shards {
		s.mu.Lock()
		for _, k := range s.lru.Keys() {
			if e, ok := s.lru.Peek(k); ok && gone[e.ns] {
				h.evictLocked(s, k, e)
				out = append(out, e)
			}
		}
		s.mu.Unlock()
	}
	if len(out) > 0 {
		h.kickFlush()
	}
}

// MaxNamespaces is how many namespaces a hot set serves since its start,
// those a SetNamespaces took out included: each user's entry tells its
// namespace by a byte.
const MaxNamespaces = maxNamespaces

// CheckNamespaces returns the error New would for namespaces, opening
// nothing: a profile that is not valid, a name twice, too many. seenapi
// check runs it on a namespaces file before the service is started or told
// to reload it.
func CheckNamespaces(namespaces []Namespace) error {
	_, _, err := nextTable(&nsTable{}, namespaces)
	return err
}

// nextTable is prev with namespaces served: a namespace served before
// (now or by an earlier table) keeps its index and counters, a new one
// takes the next index, and those of prev that namespaces leaves out are
// no longer served (they stay in byIndex).
func nextTable(prev *nsTable, namespaces []Namespace) (*nsTable, NamespaceChanges, error) {
	var ch NamespaceChanges
	t := &nsTable{byName: make(map[string]*nsInfo, len(prev.byIndex)+len(namespaces)),
		byIndex: slices.Clone(prev.byIndex)}
	for _, n := range namespaces {
		p := n.Profile.WithDefaults()
		if err := p.Validate(); err != nil {
			return nil, ch, fmt.Errorf("namespace %q: %w", n.Name, err)
		}
		if _, dup := t.byName[n.Name]; dup {
			return nil, ch, fmt.Errorf("namespace %q configured twice", n.Name)
		}
		made, err := emptyEncoding(p)
		if err != nil {
			return nil, ch, fmt.Errorf("namespace %q: %w", n.Name, err)
		}
		info := &nsInfo{Namespace: Namespace{Name: n.Name, Profile: p}, seed: nsSeed(n.Name), made: made}
		if old, ok := prev.byName[n.Name]; ok {
			info.index, info.c = old.index, old.c
			if old.Profile != p {
				ch.Changed = append(ch.Changed, n.Name)
			}
		} else if i := slices.IndexFunc(prev.byIndex, func(o *nsInfo) bool { return o.Name == n.Name }); i >= 0 {
			// Served again: its users may still be in memory under its
			// index (dirty ones wait for their write-back).
			info.index, info.c = prev.byIndex[i].index, prev.byIndex[i].c
			ch.Added = append(ch.Added, n.Name)
		} else {
			if len(t.byIndex) == maxNamespaces {
				return nil, ch, fmt.Errorf("more than %d namespaces configured (counting those served since the start)", maxNamespaces)
			}
			info.index, info.c = uint8(len(t.byIndex)), new(nsCounters)
			t.byIndex = append(t.byIndex, nil)
			if len(prev.byIndex) > 0 {
				ch.Added = append(ch.Added, n.Name)
			}
		}
		t.byIndex[info.index] = info
		t.byName[n.Name] = info
	}
	for _, name := range prev.names {
		if _, ok := t.byName[name]; !ok {
			ch.Removed = append(ch.Removed, name)
		}
	}
	t.names = slices.Sorted(maps.Keys(t.byName))
	return t, ch, nil
}

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

// acquire returns the user's entry locked, loading it if it is cold. A user
// with nothing stored gets an empty filter if create, else ErrUserNotFound.
// hot says whether the user was in memory already.
func (h *HotSet) acquire(info *nsInfo, user string, create bool) (e *entry, hot bool, err error) {
	e, hot, _, err = h.acquireNew(info, user, create, true)
	return e, hot, err
}

// acquireNew is acquire that also says whether it made the user anew
// (nothing stored, or what was is gone). It counts no new user: the
// caller does once its change is kept, so that a call refused after
// (a full disk, a key reused, an import that does not fit) counts none.
// It counts a hit or a miss if call: a hit or a miss is a call's, and the
// ratio tells whether the budget holds the users called (Recover calls
// nothing, and a keyed batch's call was counted as CheckCallKeys looked).
func (h *HotSet) acquireNew(info *nsInfo, user string, create, call bool) (e *entry, hot, created bool, err error) {
	k0 := h.key(info, user, 0)
	s := h.shardOf(k0)
	for {
		s.mu.Lock()
		sl, err := h.slotLocked(s, info, user, k0)
		if err != nil {
			s.mu.Unlock()
			return nil, false, false, err
		}
		if e := sl.e; e != nil {
			s.mu.Unlock()
			// Lock order is entry before shard. Once e.mu is held, e is
			// either still in the shard (hot, or evicted and taken back
			// here) or let go, and then looked up again: a user is never
			// served by an entry the shard no longer reaches, so no second
			// copy is ever loaded beside one that holds changes.
			e.mu.Lock()
			if h.reachLocked(s, sl.k, e) {
				if call {
					info.c.hits.Add(1)
				}
				if create && e.f.Profile().Window > 0 && gone(&e.f, h.opts.Now()) { // no clock read without a window
					// A gone user comes back as a new one, with the
					// namespace's profile, as from the store (below).
					if f, err := userfilter.New(info.Profile); err == nil {
						e.f.Replace(f)
						created = true
					}
				}
				return e, true, created, nil
			}
			e.mu.Unlock()
			continue
		}
		if lc := sl.lc; lc != nil {
			s.mu.Unlock()
			<-lc.done
			if lc.err != nil && (!errors.Is(lc.err, ErrUserNotFound) || !create) {
				return nil, false, false, lc.err
			}
			continue
		}
		lc := h.claimLocked(s, sl, info, user)
		gen := info.c.purges.Load() // under s.mu: see PurgeNamespace
		s.mu.Unlock()
		if call {
			info.c.misses.Add(1)
		}
		h.waitBacklog()

		f, lastSeq, err := h.load(info, user)
		if err == nil && f != nil && lastSeq == 0 && gone(f, h.opts.Now()) {
			f = nil // nothing of it to write back either
		}
		if err == nil && create && (f == nil || gone(f, h.opts.Now())) {
			// A gone user comes back as a new one, with the namespace's
			// profile; a journal it had is retired at its next write-back.
			f, err = userfilter.New(info.Profile)
			created = err == nil
		}
		s.mu.Lock()
		delete(s.loading, sl.k)
		if err == nil && purgedSince(info, gen) {
			// What was read may be what the purge erased since.
			err = errPurged(info)
		}
		if err != nil || f == nil {
			if err == nil {
				err = ErrUserNotFound
			}
			lc.err = err
			s.mu.Unlock()
			close(lc.done)
			return nil, false, false, err
		}
		e = newEntry(info.index, user)
		e.f.Replace(f)
		e.lastSeq, e.probe = lastSeq, sl.probe
		e.mu.Lock()
		if lastSeq > 0 {
			// The journal is folded into the filter at the next write-back.
			h.markDirtyLocked(s, e)
		}
		h.insertLocked(s, sl.k, e)
		evicted := h.trimLocked(s, e)
		s.mu.Unlock()
		close(lc.done)
		h.afterEvict(e, evicted)
		return e, false, created, nil
	}
}

// dropGoneLocked takes e, a gone user's clean entry, out of the cache if
// it is there (as Forget does): it answers as a user never seen, so it
// neither counts as hot nor takes budget. e.mu and s.mu held.
func (h *HotSet) dropGoneLocked(s *shard, k key, e *entry) {
	if cur, ok := s.lru.Peek(k); ok && cur == e {
		h.removeLocked(s, k, e)
	}
}

// markDirtyLocked records that e differs from storage. e.mu and s.mu held.
func (h *HotSet) markDirtyLocked(s *shard, e *entry) {
	if !e.dirty() {
		e.dirtySince.Store(h.clock())
		h.dirtyUsers.Add(1)
	}
	if e.flags&flagQueued == 0 {
		e.flags |= flagQueued
		s.dirty.push(e)
	}
}

// failedWrite is a user's record in shard.failed: since is when its
// oldest change not written was made, and at the dirtySince that its last
// failed write-back gave it. A user that was clean again since has
// another dirtySince, and the record is stale.
type failedWrite struct{ since, at uint32 }

// markClean records that e was written back. e.mu held.
func (h *HotSet) markClean(e *entry) {
	if e.dirty() {
		e.dirtySince.Store(0)
		h.dirtyUsers.Add(-1)
	}
}

// load reads a cold user: the stored filter plus the journal not yet folded
// into it, and the highest sequence number of that journal (0: none). A nil
// filter with no error means nothing is stored (or a gone filter, see
// gone, with no journal). A journal replayed may leave a gone filter,
// returned so that a write-back retires the journal.
func (h *HotSet) load(info *nsInfo, user string) (f *userfilter.Filter, lastSeq uint64, err error) {
	// A panic here would leave the user's load claimed and every later call
	// of theirs waiting for it: it fails this load instead.
	defer h.recovered(&err, "loading", info.Name, user)
	info.c.loads.Add(1)
	raw, journal, err := h.store.Load(info.Name, user)
	if err != nil {
		h.storageErrors.Add(1)
		return nil, 0, fmt.Errorf("%w: loading %s/%s: %w", ErrStorage, info.Name, user, err)
	}
	now := h.opts.Now()
	if raw != nil {
		f, err = userfilter.Decode(raw)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %s/%s: %w", ErrCorrupt, info.Name, user, err)
		}
		if gone(f, now) {
			// Gone: as if nothing were stored. A journal newer than it
			// starts the user again, with the profile it names.
			f = nil
		}
	}
	if len(journal) == 0 {
		return f, 0, nil
	}
	recs := make([]journalRecord, len(journal))
	for i, j := range journal {
		if recs[i], err = decodeJournal(j.Value); err != nil {
			return nil, 0, fmt.Errorf("%w: journal of %s/%s: %w", ErrCorrupt, info.Name, user, err)
		}
	}
	made := -1 // the record whose profile f was made with
	if f == nil {
		// Never stored: made with the profile its journal names (the
		// namespace's may have changed since), or, for records of builds
		// that named none, the namespace's.
		made = slices.IndexFunc(recs, func(r journalRecord) bool { return r.made != nil })
		if made < 0 {
			f, err = userfilter.New(info.Profile)
		} else {
			f, err = decodeMade(info, user, recs[made].made)
		}
		if err != nil {
			return nil, 0, err
		}
	}
	// Each record is added back as its call added it: the filter expired
	// as of the call, as its Select expired it, and the items it holds
	// counted then against the cap. Buckets past the window would count
	// against maxEncoded and could refuse an item its call recorded; and
	// counted as of now, with buckets gone since, the cap would leave room
	// the call did not have, and the items it refused would take the room
	// the calls after it had filled, moving where those items went. A
	// record that notes the room the cap left its call is let in that
	// much: the earlier records the cap counted may have expired.
	f, err = replayJournal(f, recs, made, h.maxEncoded, func(made []byte) (*userfilter.Filter, error) {
		return decodeMade(info, user, made)
	})
	if err != nil {
		return nil, 0, err
	}
	for i, rec := range recs {
		if rec.reply != nil {
			rec.reply.ns, rec.reply.user = info.index, strings.Clone(user) // user may alias a request's buffer
			h.replies.keep(rec.reply, now)
		}
		lastSeq = max(lastSeq, journal[i].Seq)
	}
	f.Expire(now)
	return f, lastSeq, nil
}

// replayJournal adds each of recs back onto f as its call added it (see
// load) and returns the filter, which a record whose call found the user
// gone makes anew with decodeMade, unless it is recs[made], the record f
// was made from (-1: none).
func replayJournal(f *userfilter.Filter, recs []journalRecord, made, maxEncoded int, decodeMade func([]byte) (*userfilter.Filter, error)) (*userfilter.Filter, error) {
	for i, rec := range recs {
		f.Expire(rec.at)
		if rec.made != nil && i != made && gone(f, rec.at) {
			// The call found the user gone and made it anew, with the
			// profile the record names (see HotSet.journal).
			var err error
			if f, err = decodeMade(rec.made); err != nil {
				return nil, err
			}
		}
		f.AddHashes(rec.hashes, rec.at, rec.at, maxEncoded, rec.room)
	}
	return f, nil
}

// FoldJournal returns the storage.FoldFunc of a merging restore into a
// store whose values hold at most maxEncoded bytes (its MaxValueBytes):
// it adds a user's journal records back onto the stored filter as a load
// does, so that the merge takes in the filter the user's calls ran on.
// A stored filter of a gone user, which a load would set aside for one
// made from the records, is not folded into (an error).
func FoldJournal(maxEncoded int64) storage.FoldFunc {
	limit := int(min(maxEncoded, math.MaxInt))
	return func(stored []byte, journal []storage.JournalEntry) ([]byte, error) {
		f, err := userfilter.Decode(stored)
		if err != nil {
			return nil, err
		}
		if gone(f, time.Now()) {
			return nil, errors.New("the stored filter is of a gone user")
		}
		recs := make([]journalRecord, len(journal))
		for i, j := range journal {
			if recs[i], err = decodeJournal(j.Value); err != nil {
				return nil, err
			}
		}
		f, err = replayJournal(f, recs, -1, limit, userfilter.Decode)
		if err != nil {
			return nil, err
		}
		return f.AppendBinary(nil)
	}
}

// decodeMade decodes the profile a journal record of the user names: an
// empty filter of it.
func decodeMade(info *nsInfo, user string, made []byte) (*userfilter.Filter, error) {
	f, err := userfilter.Decode(made)
	if err != nil {
		return nil, fmt.Errorf("%w: journal of %s/%s: its profile: %w", ErrCorrupt, info.Name, user, err)
	}
	return f, nil
}

// reachLocked reports whether e is still the shard's entry for k, taking
// it back into the LRU if it was evicted and not yet let go. e.mu held;
// takes s.mu.
func (h *HotSet) reachLocked(s *shard, k key, e *entry) bool {
	s.mu.Lock()
	if cur, ok := s.lru.Peek(k); ok && cur == e {
		s.mu.Unlock()
		return true
	}
	// Its write-back may be under way: what it holds is the truth all the
	// same (waiting for the write would spin), and write-back leaves an
	// entry taken back alone. Its keyed records come back with it.
	kr, keyed := s.keyed[e]
	if !h.letGoLocked(s, k, e) {
		s.mu.Unlock()
		return false
	}
	if keyed {
		s.keyed[e] = kr
	}
	h.insertLocked(s, k, e)
	evicted := h.trimLocked(s, e)
	s.mu.Unlock()
	h.afterEvict(e, evicted)
	return true
}

// letGoLocked removes e from the shard's evicted map if it is there as
// the entry of k, and reports whether it was. s.mu held.
func (h *HotSet) letGoLocked(s *shard, k key, e *entry) bool {
	if cur, ok := s.evicted[k]; !ok || cur != e {
		return false
	}
	delete(s.evicted, k)
	delete(s.keyed, e)
	h.evictedBytes.Add(-int64(e.bytes))
	return true
}

// insertLocked adds e to the shard's LRU under k and accounts its bytes.
// e.mu (or e not yet shared) and s.mu held.
func (h *HotSet) insertLocked(s *shard, k key, e *entry) {
	h.reapListLocked(s, k, e)
	e.bytes = entrySize(e)
	s.lru.Add(k, e)
	s.bytes += int64(e.bytes)
	h.hotBytes.Add(int64(e.bytes))
	c := h.infoOf(e).c
	c.hotUsers.Add(1)
	c.hotBytes.Add(int64(e.bytes))
}

// trimLocked evicts least recently used users (never keep) while the shard
// is over its share of the budget and the whole set over the budget, and
// returns them. A shard may so hold more than its share while others hold
// less: one user larger than CacheBytes/Shards would otherwise evict every
// other user of its shard, and itself at the next load there, while the
// set is far under budget. afterEvict trims the shards over their share
// once the set is over budget, down to no user but keep, so that a budget
// of fewer users than shards holds too. An evicted user that may hold changes
// not yet written back (dirty, or in use by a call that may change it)
// moves to the shard's evicted map, where it stays reachable until written
// back: a call for the user takes it back instead of loading a second copy
// from storage, which could cover journal records the first copy holds
// before that copy is written. s.mu held.
func (h *HotSet) trimLocked(s *shard, keep *entry) []*entry {
	var out []*entry
	for s.bytes > s.budget && h.hotBytes.Load() > h.opts.CacheBytes {
		k, e, ok := s.lru.GetOldest()
		if !ok {
			break
		}
		if e == keep {
			if s.lru.Len() == 1 {
				break
			}
			s.lru.Get(k) // make it the newest; evict the next one
			continue
		}
		h.evictLocked(s, k, e)
		out = append(out, e)
	}
	return out
}

// evictLocked takes e, the shard's entry under k, out of the LRU. An entry
// that may hold changes not yet written back, or whose write-back is under
// way (flagWriting), moves to the shard's evicted map (see trimLocked).
// s.mu held.
func (h *HotSet) evictLocked(s *shard, k key, e *entry) {
	kr, keyed := s.keyed[e]
	h.removeLocked(s, k, e)
	h.infoOf(e).c.evictions.Add(1)
	// Not blocking on e.mu under s.mu (lock order is entry first): an
	// entry someone holds is kept reachable as if it were dirty, and
	// write-back lets it go once it finds it clean.
	idle := e.mu.TryLock()
	if !idle || e.dirty() || e.flags&flagWriting != 0 {
		s.evicted[k] = e
		h.evictedBytes.Add(int64(e.bytes))
		if keyed {
			s.keyed[e] = kr // see flushSome
		}
	}
	if idle {
		e.mu.Unlock()
	}
}

// removeLocked takes e, the shard's entry under k, out of the LRU and
// out of its namespace's figures. s.mu held.
func (h *HotSet) removeLocked(s *shard, k key, e *entry) {
	s.lru.Remove(k)
	// A user erased has no keyed record left; evictLocked keeps those of
	// one evicted for its write-back.
	delete(s.keyed, e)
	s.bytes -= int64(e.bytes)
	h.hotBytes.Add(-int64(e.bytes))
	c := h.infoOf(e).c
	c.hotUsers.Add(-1)
	c.hotBytes.Add(-int64(e.bytes))
}

// afterEvict runs after a shard took a user in or let one grow (keep), with
// the users that shard evicted: while the set is still over budget, the
// shards holding more than their share evict their least recently used
// (never keep, the user just called); then a write-back round is asked for
// when evicted users waiting for one take more than backlogLimit. No lock
// held.
func (h *HotSet) afterEvict(keep *entry, evicted []*entry) {
	evicted = h.sweep(keep, evicted)
	if len(evicted) > 0 && h.evictedBytes.Load() > h.backlogLimit {
		h.kickFlush()
	}
}

// sweep makes the shards over their share evict, down to no user but
// keep, while the set is over budget, and returns evicted with the users
// they evicted. One call sweeps at a time: another that finds the set over
// budget meanwhile does not wait, and the sweeper looks at the total again
// once it lets go (as long as its sweep freed something), so an insert made
// while it swept is not left over budget; the write-back loop's rounds
// sweep too (see flushLoop). No lock held.
func (h *HotSet) sweep(keep *entry, evicted []*entry) []*entry {
	for h.hotBytes.Load() > h.opts.CacheBytes && h.sweepMu.TryLock() {
		// Each sweep starts one shard further on, so none is the first
		// to give users up every time.
		before := len(evicted)
		first := h.sweepNext
		h.sweepNext = (first + 1) % len(h.shards)
		for i := range h.shards {
			if h.hotBytes.Load() <= h.opts.CacheBytes {
				break
			}
			s := h.shards[(first+i)%len(h.shards)]
			s.mu.Lock()
			evicted = append(evicted, h.trimLocked(s, keep)...)
			s.mu.Unlock()
		}
		h.sweepMu.Unlock()
		if len(evicted) == before {
			break // no user left to evict but keep
		}
	}
	return evicted
}

// release unlocks e after a call, marking it dirty if it changed and
// re-accounting its size.
func (h *HotSet) release(e *entry, changed bool) { h.releaseSized(e, changed, changed) }

// releaseSized is release that re-accounts e's size when resized too,
// changed or not: a call that records nothing may still have dropped the
// buckets past the window (Filter.Expire), which are memory no longer held.
func (h *HotSet) releaseSized(e *entry, changed, resized bool) { h.releaseCall(e, changed, resized, 0) }

// keyedRecord is what the write-back needs to know of a user's journal
// records that carry keyed calls' answers (see writeBack): the sequence
// number of the first since its last write-back, and the clock (see
// clock) of the last; and, if that write-back left some in the journal
// (held), the first of those and the clock of their last, so that the
// user, evicted before the next round, still keeps them for the hold.
type keyedRecord struct {
	seq, heldSeq uint64
	at, heldAt   uint32
}

// from returns the sequence number of the first record to leave in the
// journal at clock now for a hold of hold milliseconds: that of the first
// of the records whose last is that recent (0: none). The difference of
// clocks holds across the clock's wrap.
func (kr keyedRecord) from(now, hold uint32) uint64 {
	recent := func(at uint32) bool { return now-at < hold }
	switch {
	case kr.heldSeq != 0 && recent(kr.heldAt):
		return kr.heldSeq
	case kr.seq != 0 && recent(kr.at):
		return kr.seq
	}
	return 0
}

// releaseCall is releaseSized for a call whose journal record of sequence
// number keyed (0: none) carries a keyed call's answer.
func (h *HotSet) releaseCall(e *entry, changed, resized bool, keyed uint64) {
	if !changed && !resized && keyed == 0 {
		e.mu.Unlock()
		return
	}
	k := h.keyOf(e)
	s := h.shardOf(k)
	size := entrySize(e)
	s.mu.Lock()
	if changed {
		h.markDirtyLocked(s, e)
	}
	if keyed != 0 {
		// Hot users, and evicted ones still reached: removeLocked
		// forgets an erased one's.
		if cur, ok := s.lru.Peek(k); (ok && cur == e) || s.evicted[k] == e {
			kr := s.keyed[e]
			if kr.seq == 0 {
				kr.seq = keyed
			}
			kr.at = h.clock()
			s.keyed[e] = kr
		}
	}
	// Accounted before e.mu is let go, so sizes are applied in the order
	// of the user's changes: applied after it, a call's size could land
	// after a later call's, leaving the user accounted at its older size.
	h.accountLocked(s, k, e, size)
	evicted := h.trimLocked(s, e)
	s.mu.Unlock()
	e.mu.Unlock()
	h.afterEvict(e, evicted)
}

// resize accounts e, the entry of key k of shard s, at size bytes if it is
// still hot, and evicts as its growth makes the budget ask. e.mu held;
// takes s.mu.
func (h *HotSet) resize(s *shard, k key, e *entry, size int32) {
	s.mu.Lock()
	h.accountLocked(s, k, e, size)
	evicted := h.trimLocked(s, e)
	s.mu.Unlock()
	h.afterEvict(e, evicted)
}

// accountLocked accounts e, the entry of key k of shard s, at size bytes
// if it is still hot. e.mu and s.mu held.
func (h *HotSet) accountLocked(s *shard, k key, e *entry, size int32) {
	if cur, ok := s.lru.Peek(k); ok && cur == e && size != e.bytes {
		grow := size - e.bytes
		e.bytes = size
		s.bytes += int64(grow)
		h.hotBytes.Add(int64(grow))
		h.infoOf(e).c.hotBytes.Add(int64(grow))
	}
}

// entrySize is what e is accounted for. e.mu held (or e not yet shared).
func entrySize(e *entry) int32 {
	return int32(min(e.f.MemoryBytes()+entryOverhead+len(e.id()), math.MaxInt32))
}

// callScratch is what one call reuses from the last: the filter's scratch
// and the journal record's buffer (the store is done with a record once
// Append returns, so it need not be garbage).
type callScratch struct {
	userfilter.Scratch
	rec   []byte
	reply reply // a keyed call's, for its journal record
}

// maxKeptRecord is the largest journal record buffer a callScratch keeps
// for the next call: a 10,000-item RecordAll is not memory held for good.
const maxKeptRecord = 16 << 10

// journalTTL is how long a journal record of a filter of profile p is
// kept: past its window and one bucket, its items test unseen anyway. The
// filter's own profile, not its namespace's: a namespace's window may have
// changed since the filter was made.
func journalTTL(p userfilter.Profile) time.Duration {
	if p.Window == 0 {
		return 0
	}
	return p.Window + p.Granularity
}

// journal makes the hashes in s.ToRecord, about to be recorded, durable,
// with the answer r of a keyed call (nil: none), and returns the record's
// sequence number (0: none written). e.mu held.
func (h *HotSet) journal(info *nsInfo, e *entry, at time.Time, s *callScratch, r *reply) (uint64, error) {
	if h.opts.NoJournal || len(s.ToRecord) == 0 {
		return 0, nil
	}
	var made []byte
	if e.lastSeq == 0 || e.f.Profile().Window > 0 && e.f.Empty(at) {
		// The first record since the filter was last stored (or of a
		// filter never stored) names its profile: see journal.go. So does
		// that of a windowed user with no item in the window: one found
		// gone and made anew (see acquire), maybe with another profile
		// than its earlier records, not yet retired, name; load makes it
		// anew with this one.
		var err error
		if made, err = info.madeOf(e.f.Profile()); err != nil {
			return 0, err
		}
	}
	s.rec = appendJournal(s.rec, at, s.ToRecord, r, made, e.f.Room(at))
	seq, err := h.store.Append(info.Name, e.id(), s.rec, journalTTL(e.f.Profile()))
	if cap(s.rec) > maxKeptRecord {
		s.rec = nil
	}
	if err != nil {
		h.storageErrors.Add(1)
		if errors.Is(err, storage.ErrFull) {
			return 0, fmt.Errorf("%w: %w", ErrStorageFull, err)
		}
		return 0, fmt.Errorf("%w: journal of %s/%s: %w", ErrStorage, info.Name, e.id(), err)
	}
	h.journals.Add(1)
	e.lastSeq = max(e.lastSeq, seq)
	return seq, nil
}

// Filter is the one call: it returns the candidates the user has not seen
// (order kept, duplicates once, at most limit; limit <= 0 means no limit)
// and records per mode before returning. Result.Unseen aliases candidates.
func (h *HotSet) Filter(ns, user string, candidates []string, limit int, mode userfilter.Mode) (Result, error) {
	return h.filterAppend(nil, ns, user, candidates, limit, mode, true, CallKey{})
}

// FilterAppend is Filter with Result.Unseen appended to dst[:0]: a caller
// that answers many calls reuses one slice instead of allocating one each.
func (h *HotSet) FilterAppend(dst []string, ns, user string, candidates []string, limit int, mode userfilter.Mode) (Result, error) {
	return h.filterAppend(dst, ns, user, candidates, limit, mode, true, CallKey{})
}

// FilterKeyed is FilterAppend for a call sent with an Idempotency-Key,
// which its journal record keeps with the answer. A call whose key and
// request match such a record read back after a restart (within
// Options.ReplyTTL) gets that record's answer, Result.Replayed set,
// and records nothing: the retry of a call whose answer a crash lost.
// The same key with another request is ErrCallKeyReused. A zero k is
// FilterAppend.
func (h *HotSet) FilterKeyed(dst []string, ns, user string, candidates []string, limit int, mode userfilter.Mode, k CallKey) (Result, error) {
	return h.filterAppend(dst, ns, user, candidates, limit, mode, true, k)
}

// CheckCallKeys returns ErrCallKeyReused if the journal of one of users
// keeps, under the ID of the key of the same place in keys, the answer of
// another request: a batch checks all its users' keys before it makes any
// call. It loads the users that are not in memory (reading their journals'
// answers back), as their calls would; a user that fails to load fails its
// own call, as a batch's users do, not the batch. Each user's look counts
// its call's hit or miss, and sets Counted in keys so the call counts none.
func (h *HotSet) CheckCallKeys(ns string, users []string, keys []CallKey) error {
	info, err := h.namespace(ns)
	if err != nil {
		return err
	}
	now := h.opts.Now()
	for i, k := range keys {
		if k.zero() {
			continue
		}
		e, _, err := h.acquire(info, users[i], false)
		keys[i].Counted = true // the call's hit or miss, as its user stood
		if err != nil {
			continue // no user, or one that fails its own call: not the batch's
		}
		h.release(e, false)
		if r := h.replies.find(k.ID, now); r != nil && r.request != k.Request {
			return ErrCallKeyReused
		}
	}
	return nil
}

// filterAppend is FilterAppend; oneCall says whether it is the one call,
// whose candidates the namespace's figures count (Record's items are not
// candidates), and k names a keyed call (see FilterKeyed).
func (h *HotSet) filterAppend(dst []string, ns, user string, candidates []string, limit int, mode userfilter.Mode, oneCall bool, k CallKey) (Result, error) {
	info, err := h.namespace(ns)
	if err != nil {
		return Result{}, err
	}
	e, _, created, err := h.acquireNew(info, user, mode != userfilter.RecordNone, !k.Counted)
	if errors.Is(err, ErrUserNotFound) {
		// A dry run for a user with no history creates no user: the answer
		// is an empty filter's.
		return h.filterNew(dst, info, candidates, limit)
	}
	if err != nil {
		return Result{}, err
	}
	// Released by a deferred call, so that a panic in the filter's code or
	// the journal's (a bug, and the API answers it with a 500) does not
	// leave the user locked and every later call of theirs waiting.
	changed, expired, refused := false, false, false
	var keyed uint64 // the journal record of a keyed call's answer
	defer func() {
		if refused {
			h.releaseRefused(e, expired)
			return
		}
		h.releaseCall(e, changed, expired, keyed)
	}()
	now := h.opts.Now()
	// Select would drop the buckets past the window all the same: dropped
	// here, their memory leaves the budget's count even when the call
	// records nothing.
	expired = e.f.Expire(now)
	if k.Began != nil {
		// Under the user's lock: an erase waits for it (see ForgetThen).
		k.Began.Store(true)
	}
	if !k.zero() {
		// Loading the user (acquire) read its journal's answers back.
		if r := h.replies.find(k.ID, now); r != nil {
			return r.result(dst, candidates, k)
		}
	}
	cs := h.scratch.Get().(*callScratch)
	defer h.scratch.Put(cs)
	s := &cs.Scratch
	res := e.f.Select(candidates, limit, mode, now, s)
	full := len(s.ToRecord) > 0 && e.f.Full(now, h.maxEncoded)
	var r *reply
	if !k.zero() {
		r = &cs.reply
		recorded, saturated := e.f.Expect(now, s, h.maxEncoded)
		*r = reply{id: k.ID, request: k.Request, seen: int32(res.SeenCount), recorded: int32(recorded),
			saturated: saturated, unseen: s.Unseen}
	}
	if full {
		// Nothing would be recorded: no journal record either, which no
		// write-back would retire (the user does not change), so the
		// journal of a saturated user does not grow call after call.
		s.ToRecord = s.ToRecord[:0]
	}
	seq, err := h.journal(info, e, now, cs, r)
	if err != nil {
		refused = true
		return Result{}, err
	}
	if r != nil {
		keyed = seq
	}
	recorded, saturated := e.f.Commit(now, s, h.maxEncoded)
	saturated = saturated || full
	changed = recorded > 0
	c := info.c
	if created {
		c.newUsers.Add(1)
	}
	if oneCall {
		c.candidates.Add(uint64(res.Distinct))
		c.seen.Add(uint64(res.SeenCount))
	}
	if recorded > 0 {
		c.recorded.Add(uint64(recorded))
	}
	return Result{SeenCount: res.SeenCount, Recorded: recorded, Saturated: saturated,
		Unseen: unseenOf(dst, candidates, s)}, nil
}

// result is the answer r keeps, for the retry of its call with key k and
// candidates (those of the call, as k.Request vouches).
func (r *reply) result(dst, candidates []string, k CallKey) (Result, error) {
	if r.request != k.Request {
		return Result{}, ErrCallKeyReused
	}
	out := slices.Grow(dst[:0], len(r.unseen))
	for _, i := range r.unseen {
		if int(i) >= len(candidates) {
			return Result{}, ErrCallKeyReused // not the candidates of the call after all
		}
		out = append(out, candidates[i])
	}
	return Result{Unseen: out, SeenCount: int(r.seen), Recorded: int(r.recorded), Saturated: r.saturated,
		Replayed: true}, nil
}

// unseenOf appends to dst[:0] the candidates s selected as unseen.
func unseenOf(dst, candidates []string, s *userfilter.Scratch) []string {
	out := slices.Grow(dst[:0], len(s.Unseen))
	for _, idx := range s.Unseen {
		out = append(out, candidates[idx])
	}
	return out
}

// filterNew answers a dry run for a user with no history, without making one.
func (h *HotSet) filterNew(dst []string, info *nsInfo, candidates []string, limit int) (Result, error) {
	f, err := userfilter.New(info.Profile)
	if err != nil {
		return Result{}, err
	}
	cs := h.scratch.Get().(*callScratch)
	defer h.scratch.Put(cs)
	s := &cs.Scratch
	res := f.Select(candidates, limit, userfilter.RecordNone, h.opts.Now(), s)
	info.c.candidates.Add(uint64(res.Distinct))
	return Result{SeenCount: res.SeenCount, Unseen: unseenOf(dst, candidates, s)}, nil
}

// Record marks items seen without filtering (Result.Recorded new, Result.SeenCount already seen).
func (h *HotSet) Record(ns, user string, items []string) (Result, error) {
	res, err := h.filterAppend(nil, ns, user, items, 0, userfilter.RecordAll, false, CallKey{})
	res.Unseen = nil
	return res, err
}

// RecordBulk is Record for bulk loads, such as an import from another
// store: a user who is not in memory is loaded, changed and written back
// before it returns, without entering the hot set, so a bulk load does not
// push out the users being served. A user in memory is recorded as by
// Record. The user's load slot is held meanwhile: other calls for the user
// wait, then load what was written.
func (h *HotSet) RecordBulk(ns, user string, items []string) (Result, error) {
	info, err := h.namespace(ns)
	if err != nil {
		return Result{}, err
	}
	k0 := h.key(info, user, 0)
	s := h.shardOf(k0)
	for {
		s.mu.Lock()
		sl, err := h.slotLocked(s, info, user, k0)
		if err != nil {
			s.mu.Unlock()
			return Result{}, err
		}
		if sl.e != nil {
			s.mu.Unlock()
			return h.Record(ns, user, items)
		}
		if lc := sl.lc; lc != nil {
			s.mu.Unlock()
			<-lc.done
			continue
		}
		lc := h.claimLocked(s, sl, info, user)
		gen := info.c.purges.Load() // under s.mu: see PurgeNamespace
		s.mu.Unlock()
		return h.recordCold(s, sl.k, lc, gen, info, user, items)
	}
}

// recordCold records items for a user whose load slot lc (under key k of
// shard s) it holds, in the store only, and lets the slot go. gen is the
// namespace's purges when lc was claimed.
func (h *HotSet) recordCold(s *shard, k key, lc *loadCall, gen uint64, info *nsInfo, user string, items []string) (res Result, err error) {
	defer func() {
		s.mu.Lock()
		delete(s.loading, k)
		s.mu.Unlock()
		close(lc.done) // lc.err nil: waiters look again and load what was written
	}()
	defer h.recovered(&err, "recording in bulk", info.Name, user)
	info.c.misses.Add(1)
	f, lastSeq, err := h.load(info, user)
	if err != nil {
		return Result{}, err
	}
	created := f == nil || gone(f, h.opts.Now())
	if created {
		if f, err = userfilter.New(info.Profile); err != nil {
			return Result{}, err
		}
	}
	cs := h.scratch.Get().(*callScratch)
	defer h.scratch.Put(cs)
	now := h.opts.Now()
	sel := f.Select(items, 0, userfilter.RecordAll, now, &cs.Scratch)
	recorded, saturated := f.Commit(now, &cs.Scratch, h.maxEncoded)
	res = Result{SeenCount: sel.SeenCount, Recorded: recorded, Saturated: saturated}
	if recorded == 0 && lastSeq == 0 {
		return res, nil // nothing to write
	}
	if purgedSince(info, gen) {
		return Result{}, errPurged(info) // not written over the purge
	}
	// Written before the answer, as a journal record would be: nothing else
	// holds the user meanwhile, so this is the user's whole state.
	if err := h.writeNow(info, user, f, lastSeq, now, "recording in bulk"); err != nil {
		return Result{}, err
	}
	if created {
		info.c.newUsers.Add(1)
	}
	info.c.recorded.Add(uint64(recorded))
	return res, nil
}

// Check appends to seen whether each item was seen, recording nothing. An
// unknown user has seen nothing.
func (h *HotSet) Check(ns, user string, items []string, seen []bool) ([]bool, error) {
	info, err := h.namespace(ns)
	if err != nil {
		return seen, err
	}
	e, _, err := h.acquire(info, user, false)
	if errors.Is(err, ErrUserNotFound) {
		for range items {
			seen = append(seen, false)
		}
		return seen, nil
	}
	if err != nil {
		return seen, err
	}
	defer h.release(e, false) // deferred: see FilterAppend
	cs := h.scratch.Get().(*callScratch)
	defer h.scratch.Put(cs)
	return e.f.CheckWith(items, h.opts.Now(), seen, &cs.Scratch), nil
}

// User returns the user's stats, or ErrUserNotFound.
func (h *HotSet) User(ns, user string) (UserStats, error) {
	info, err := h.namespace(ns)
	if err != nil {
		return UserStats{}, err
	}
	e, hot, err := h.acquire(info, user, false)
	if err != nil {
		return UserStats{}, err
	}
	defer h.release(e, false) // deferred: see FilterAppend
	now := h.opts.Now()
	if gone(&e.f, now) {
		h.dropGone(e)
		return UserStats{}, ErrUserNotFound
	}
	return h.userStats(&e.f, hot, e.dirty(), now), nil
}

// releaseRefused is release after a call the store refused (its journal
// record, or the import's write): a user that acquire made for the call,
// still holding nothing the store lacks, leaves the cache, so that a
// refused call leaves no user behind (stats and the hot figures answer as
// for a user never seen). A user another call recorded into is dirty, or
// holds items once written back, and stays; a call waiting for e looks the
// user up again (reachLocked). resized: see releaseSized. e.mu held; lets
// it go.
func (h *HotSet) releaseRefused(e *entry, resized bool) {
	if e.dirty() || e.lastSeq != 0 || !e.f.Empty(h.opts.Now()) {
		h.releaseSized(e, false, resized)
		return
	}
	h.dropGone(e)
	e.mu.Unlock()
}

// dropGone takes e, found gone, out of the cache unless it is dirty (its
// write-back then writes it Empty and drops it) or its write-back is in
// flight (it stays reachable until that lands, see flagWriting). e.mu held.
func (h *HotSet) dropGone(e *entry) {
	if e.dirty() {
		return
	}
	k := h.keyOf(e)
	s := h.shardOf(k)
	s.mu.Lock()
	if e.flags&flagWriting == 0 {
		h.dropGoneLocked(s, k, e)
	}
	s.mu.Unlock()
}

// Peek returns the user's stats as User does, but reads a cold user from
// the store without bringing it into memory, and counts no hit or miss, so
// that listing many users (the dashboard's list) neither evicts others nor
// counts as their calls. A user in memory is answered from there (which
// refreshes its place in the LRU, as any look-up does). Safe for
// concurrent use.
func (h *HotSet) Peek(ns, user string) (UserStats, error) {
	info, err := h.namespace(ns)
	if err != nil {
		return UserStats{}, err
	}
	k0 := h.key(info, user, 0)
	s := h.shardOf(k0)
	s.mu.Lock()
	sl, err := h.slotLocked(s, info, user, k0)
	hot := false
	if err == nil && sl.e != nil {
		cur, ok := s.lru.Peek(sl.k)
		hot = ok && cur == sl.e
	}
	s.mu.Unlock()
	if err != nil {
		return UserStats{}, err
	}
	if e := sl.e; e != nil {
		// Hot, or evicted and waiting for its write-back: its entry holds
		// what the store may not yet. Read under its lock, as a call
		// would, without taking it back into the LRU.
		e.mu.Lock()
		defer e.mu.Unlock()
		now := h.opts.Now()
		if gone(&e.f, now) {
			return UserStats{}, ErrUserNotFound
		}
		return h.userStats(&e.f, hot, e.dirty(), now), nil
	}
	// Cold, or being loaded: what the store holds is what the load reads.
	f, _, err := h.load(info, user)
	if err != nil {
		return UserStats{}, err
	}
	if f == nil || gone(f, h.opts.Now()) {
		return UserStats{}, ErrUserNotFound
	}
	return h.userStats(f, false, false, h.opts.Now()), nil
}

// userStats is what User and Peek answer for the filter f.
// userStats is f's stats: saturated at its item cap, or at the largest
// filter the store keeps (maxEncoded).
func (h *HotSet) userStats(f *userfilter.Filter, hot, dirty bool, now time.Time) UserStats {
	p := f.Profile()
	st := f.Stats(now)
	st.Saturated = st.Saturated || f.Full(now, h.maxEncoded)
	return UserStats{Stats: st, Hot: hot, Dirty: dirty,
		Window: int64(p.Window / time.Second), Granularity: int64(p.Granularity / time.Second), MaxItems: p.MaxItems,
		FirstSeen: f.FirstSeen(), LastSeen: f.LastSeen()}
}

// Forget erases the user from the hot set, the journal and the store. A
// write-back running concurrently cannot bring it back.
func (h *HotSet) Forget(ns, user string) error {
	_, err := h.ForgetThen(ns, user, nil)
	return err
}

// ForgetThen is Forget calling then (if not nil) once the user is erased,
// before any call can load it afresh: every keyed call that held the
// erased user has set its CallKey.Began by then, and one that has not
// makes its call on the user the erase leaves. It reports whether there
// was anything of the user to erase, as the erase found it (a look before
// it may be out of date by then): items in memory or changes not yet
// written back, or a filter or journal records stored, those of items
// that have all left a window, or that cannot be read, included.
func (h *HotSet) ForgetThen(ns, user string, then func()) (had bool, err error) {
	info, err := h.namespace(ns)
	if err != nil {
		return false, err
	}
	defer h.lockForChange()()
	k0 := h.key(info, user, 0)
	s := h.shardOf(k0)
	var sl slot
	for {
		s.mu.Lock()
		if sl, err = h.slotLocked(s, info, user, k0); err != nil {
			s.mu.Unlock()
			return false, err
		}
		if sl.lc == nil {
			break
		}
		s.mu.Unlock()
		<-sl.lc.done
	}
	// Hold the user's load slot while erasing, so that no call reloads
	// what is about to be deleted.
	var victims []*entry
	if e, ok := s.lru.Peek(sl.k); ok && e == sl.e {
		h.removeLocked(s, sl.k, e)
		victims = append(victims, e)
	}
	if e, ok := s.evicted[sl.k]; ok && e.ns == info.index && e.id() == user {
		h.letGoLocked(s, sl.k, e)
		victims = append(victims, e)
	}
	lc := h.claimLocked(s, slot{k: sl.k, probe: sl.probe}, info, user)
	s.mu.Unlock()
	now := h.opts.Now()
	for _, e := range victims {
		// Unreachable now: a call holding it looks the user up again.
		e.mu.Lock()
		had = had || e.dirty() || !e.f.Empty(now)
		h.markClean(e) // a queued entry that is clean is skipped by write-back
		e.mu.Unlock()
	}
	if !had {
		// What a load would read; with the load slot held, no call adds
		// to it meanwhile.
		had = h.storedAny(info, user)
	}
	err = h.deleteStored(info, user)
	if err != nil {
		h.storageErrors.Add(1)
		err = h.storageErr(err, "erasing", info.Name, user)
	}
	if err == nil {
		// Before the load slot goes: a keyed call's retry waiting for it
		// must not find the erased user's answer.
		h.replies.erase(info.index, user)
		if then != nil {
			then()
		}
	}
	s.mu.Lock()
	delete(s.loading, sl.k)
	lc.err = err
	if err == nil {
		lc.err = ErrUserNotFound
	}
	s.mu.Unlock()
	close(lc.done)
	return had, err
}

// storedAny reports whether the store holds a filter or journal records
// of the user, or may: a read that fails counts as something there.
func (h *HotSet) storedAny(info *nsInfo, user string) bool {
	var err error
	var stored bool
	func() {
		defer h.recovered(&err, "erasing", info.Name, user)
		raw, journal, lerr := h.store.Load(info.Name, user)
		stored, err = raw != nil || len(journal) > 0, lerr
	}()
	return stored || err != nil
}

// deleteStored deletes the user from the store. A panic in it fails the
// erase instead of leaving the user's load slot claimed.
func (h *HotSet) deleteStored(info *nsInfo, user string) (err error) {
	defer h.recovered(&err, "erasing", info.Name, user)
	return h.store.Delete(info.Name, user)
}

// Export returns the user's encoded filter (including unflushed changes), or
// ErrUserNotFound (also for a gone user, see gone).
func (h *HotSet) Export(ns, user string) ([]byte, error) {
	info, err := h.namespace(ns)
	if err != nil {
		return nil, err
	}
	e, _, err := h.acquire(info, user, false)
	if err != nil {
		return nil, err
	}
	defer h.release(e, false)
	if gone(&e.f, h.opts.Now()) {
		h.dropGone(e)
		return nil, ErrUserNotFound
	}
	return e.f.MarshalBinary()
}

// Import merges (or with replace, replaces) the user's filter with data
// from Export and writes it to the store before returning. Bad bytes, a
// filter whose bits would take more than maxBytes of memory, or one
// (merged with the user's) that would encode past what the store keeps for
// one user (both also wrapping userfilter.ErrTooLarge), or a filter of
// other parameters: an *ImportError (ErrBadImport), and nothing changes.
// A merge takes the parameters of the user's filter; a replace those too,
// or the namespace's profile.
func (h *HotSet) Import(ns, user string, data []byte, replace bool, maxBytes int64) (err error) {
	info, err := h.namespace(ns)
	if err != nil {
		return err
	}
	in, err := userfilter.DecodeWithin(data, maxBytes)
	if err != nil {
		return badImport(err, "the body is not a filter exported by seenapi (%s)", filterWords(err))
	}
	defer h.lockForChange()()
	ours := info.Profile.WithDefaults()
	created := false
	e, _, err := h.acquire(info, user, false)
	if errors.Is(err, ErrUserNotFound) {
		// Checked before the user is created: a refused import changes nothing.
		if err := importable(info.Name, ours, ours, in.Profile(), replace); err != nil {
			return err
		}
		if raw, err := in.MarshalBinary(); err == nil {
			if err := h.storable(len(raw)); err != nil {
				return badImport(err, "%v", err)
			}
		}
		// The call's miss is counted: the second look counts none (it
		// reads the store again, another call may have made the user).
		e, _, created, err = h.acquireNew(info, user, true, false)
	}
	if err != nil {
		return err
	}
	// Deferred (see FilterAppend); a refused import leaves no user it made.
	defer func() {
		if err != nil {
			h.releaseRefused(e, false)
			return
		}
		if created {
			info.c.newUsers.Add(1)
		}
		h.release(e, false)
	}()
	if err := importable(info.Name, ours, e.f.Profile(), in.Profile(), replace); err != nil {
		return err
	}
	next := in
	if !replace {
		next = e.f.Clone()
		if err := next.Merge(in); err != nil {
			return badImport(err, "the filter does not merge with the user's: %s", filterWords(err))
		}
	}
	err = h.replaceNow(info, e, next, !replace, h.opts.Now(), "importing")
	if tl := (*tooLargeError)(nil); errors.As(err, &tl) {
		if !replace {
			return badImport(err, "merged with the user's, %v", tl)
		}
		return badImport(err, "%v", tl)
	}
	return err
}

// tooLargeError is a filter that encodes past what the store keeps for
// one user (HotSet.maxEncoded).
type tooLargeError struct{ size, max int }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("the filter takes %d bytes encoded, more than the %d the store keeps for one user", e.size, e.max)
}

func (e *tooLargeError) Unwrap() error { return userfilter.ErrTooLarge }

// storable returns a *tooLargeError if a filter encoded in size bytes is
// more than the store keeps for one user.
func (h *HotSet) storable(size int) error {
	if h.maxEncoded > 0 && size > h.maxEncoded {
		return &tooLargeError{size: size, max: h.maxEncoded}
	}
	return nil
}

// ForgetItems makes items unseen again for the user and returns how many
// of them tested seen (see userfilter.Filter.Forget), with the change in
// the store before it returns. A user's filter of a kind that cannot
// forget: ErrUnsupported, and nothing changes. A user with no filter has
// nothing to forget: 0, or ErrUnsupported in a namespace whose kind cannot
// forget. A compact filter forgets even in a namespace now of Bloom
// filters (its profile travels with it).
//
// The filter is written whole, replacing the stored one and superseding
// the user's journal (as Import with replace does): a write-back merges by
// union, and a replayed journal record adds, so either would bring a
// forgotten item back otherwise.
func (h *HotSet) ForgetItems(ns, user string, items []string) (int, error) {
	info, err := h.namespace(ns)
	if err != nil {
		return 0, err
	}
	// The user's own filter decides: one built before its namespace's
	// profile changed keeps its kind, and a compact one can forget in a
	// namespace now of Bloom filters. The namespace's kind answers for a
	// user without one.
	kind := info.Profile.WithDefaults().Kind
	nsRefuses := func() error {
		return fmt.Errorf("%w: namespace %q uses %v filters, which cannot forget items", ErrUnsupported, info.Name, kind)
	}
	defer h.lockForChange()() // no write-back of the user's older state after ours
	e, _, err := h.acquire(info, user, false)
	if errors.Is(err, ErrUserNotFound) {
		if !kind.CanForget() {
			return 0, nsRefuses()
		}
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer h.release(e, false) // deferred: see FilterAppend
	if own := e.f.Profile().Kind; !own.CanForget() {
		// Refused before the clone: a large Bloom filter is not copied for nothing.
		if !kind.CanForget() {
			return 0, nsRefuses()
		}
		return 0, fmt.Errorf("%w: the user's filter is a %v filter (built before the namespace's profile changed), "+
			"which cannot forget items", ErrUnsupported, own)
	}
	now := h.opts.Now()
	next := e.f.Clone() // the hot filter changes only once the store has the change
	n, err := next.Forget(items, now)
	if err != nil || n == 0 {
		return 0, err
	}
	if err := h.replaceNow(info, e, next, false, now, "forgetting items"); err != nil {
		return 0, err
	}
	return n, nil
}

// Backup writes a backup of the store to w (see storage.Store.Backup)
// while calls go on. Every call acknowledged before it began is in it,
// written back or journaled; restoring it replays the journal as a start
// after a crash does.
func (h *HotSet) Backup(w io.Writer) error {
	if h.closed.Load() {
		return ErrClosed
	}
	if err := h.store.Backup(w); err != nil {
		return fmt.Errorf("%w: backing up: %w", ErrStorage, err)
	}
	return nil
}

// writeNow expires f at now and writes it as the user's whole state,
// superseding the journal up to upTo, before returning: for the steps that
// answer only once the store has the change (an import, a bulk recording).
// what names the step in the error.
func (h *HotSet) writeNow(info *nsInfo, user string, f *userfilter.Filter, upTo uint64, now time.Time, what string) error {
	f.Expire(now)
	raw, err := f.MarshalBinary()
	if err == nil {
		if err := h.storable(len(raw)); err != nil {
			return fmt.Errorf("%s %s/%s: %w", what, info.Name, user, err) // nothing written
		}
		err = h.store.WriteBack([]storage.Write{{NS: info.Name, User: user, Value: raw, UpTo: upTo,
			TTL: ttlOf(f, now), Empty: gone(f, now), Writer: h.writer}}, nil)
	}
	if err != nil {
		h.storageErrors.Add(1)
		return h.storageErr(err, what, info.Name, user)
	}
	return nil
}

// replaceNow makes next the user's filter: written whole to the store first
// (superseding the journal up to e.lastSeq), then in memory, clean. If
// merged (next holds every item of the user's filter), a keyed call's
// journal record made within the hold stays, as a write-back leaves it
// (see writeBack), and the user stays dirty for the write-back to retire
// it. e.mu held; what names the step in the error. On error e is
// unchanged.
func (h *HotSet) replaceNow(info *nsInfo, e *entry, next *userfilter.Filter, merged bool, now time.Time, what string) error {
	k := h.keyOf(e)
	s := h.shardOf(k)
	upTo, held := e.lastSeq, false
	if merged {
		s.mu.Lock()
		if from := s.keyed[e].from(h.clock(), h.keyedHoldOf()); from != 0 {
			upTo, held = from-1, true
		}
		s.mu.Unlock()
	}
	if err := h.writeNow(info, e.id(), next, upTo, now, what); err != nil {
		return err
	}
	old := e.f.Profile()
	e.f.Replace(next)
	if held {
		s.mu.Lock()
		h.markDirtyLocked(s, e)
		s.mu.Unlock()
	} else {
		e.lastSeq = 0 // the journal up to it is superseded; later entries are past it
		h.markClean(e)
	}
	if !held && gone(&e.f, now) {
		// Written Empty: it leaves the cache too, as at a write-back.
		s.mu.Lock()
		h.dropGoneLocked(s, k, e)
		s.mu.Unlock()
		return nil
	}
	// No release re-accounts it (it is clean, or dirty from before): an
	// import may bring a filter of any size, which the budget must count.
	h.resize(s, k, e, entrySize(e))
	if old.Window == 0 && e.f.Profile().Window > 0 {
		// A windowless user replaced with a windowed filter: now one the
		// reaper must look at.
		s.mu.Lock()
		if cur, ok := s.lru.Peek(k); ok && cur == e {
			h.reapListLocked(s, k, e)
		}
		s.mu.Unlock()
	}
	return nil
}

// importable says why a filter of parameters in cannot be imported over
// the user's filter, of parameters user (the namespace's profile ours for a
// new user): nil if it can. A merge needs the user's parameters; a replace
// may also bring the namespace's profile to a user whose filter predates
// it. Anything else is most likely another namespace's export, whose cap
// and window would come with it.
func importable(ns string, ours, user, in userfilter.Profile, replace bool) error {
	switch {
	case in == user || replace && in == ours:
		return nil
	case replace || user == ours:
		return badImport(userfilter.ErrIncompatible, "the filter was built with other parameters than namespace %q's "+
			"profile (the namespace's against the filter's): %s", ns, ours.Differences(in))
	default:
		return badImport(userfilter.ErrIncompatible, "the filter was built with other parameters than the user's "+
			"(the user's against the filter's): %s", user.Differences(in))
	}
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
// at now: its user is gone, as if never seen (not listed, no stats), and
// its stored value is written Empty, to leave the disk.
func gone(f *userfilter.Filter, now time.Time) bool {
	return f.Profile().Window > 0 && f.Empty(now)
}

// Namespaces returns the configured namespaces sorted by name.
func (h *HotSet) Namespaces() []Namespace {
	t := h.nss.Load()
	out := make([]Namespace, len(t.names))
	for i, n := range t.names {
		out[i] = t.byName[n].Namespace
	}
	return out
}

// Namespace returns one namespace.
func (h *HotSet) Namespace(name string) (Namespace, bool) {
	info, ok := h.nss.Load().byName[name]
	if !ok {
		return Namespace{}, false
	}
	return info.Namespace, true
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
	users, err := h.store.Users(ns, after, limit)
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
		n := NamespaceStats{HotUsers: c.hotUsers.Load(), CacheBytes: c.hotBytes.Load(), Hits: c.hits.Load(),
			Misses: c.misses.Load(), Loads: c.loads.Load(), NewUsers: c.newUsers.Load(), Evictions: c.evictions.Load(),
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

// hitRatio is hits over hits plus misses; 0 before any call.
func hitRatio(hits, misses uint64) float64 {
	if total := hits + misses; total > 0 {
		return float64(hits) / float64(total)
	}
	return 0
}

func (h *HotSet) flushLoop() {
	defer close(h.stopped)
	// Short rounds: each is a burst of CPU (encoding, a store commit) that
	// competes with calls for a core. At 5s a round every 250 ms took a
	// core for about 50 ms under the reference workload's open loop, and a
	// round every 50 ms for 1 to 3 ms (encoding, then Badger's write of the
	// batch), which calls waited behind. So a round writes at most
	// smoothRound users that are due, every 10 ms: a burst of a few
	// hundred microseconds (every 5 ms took more CPU for the same tail).
	// Users overdue by a whole interval more are written whatever their
	// number, so a backlog (a fill, a burst of new users) never grows.
	tick := min(max(h.opts.FlushInterval/500, 5*time.Millisecond), 100*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	reapRounds, round := max(1, int(reapEvery/tick)), 0
	age := uint32(min(h.opts.FlushInterval.Milliseconds(), 1<<30))
	var warn flushWarner
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			warn.round(h.opts.Logger, h.flushSome(age, smoothRound))
			// Users gone past their window that no call looks up.
			round++
			h.reapSome(round%reapRounds == 0)
			// A set left over budget by a call that found a sweep under
			// way, with no call since to sweep it.
			h.afterEvict(nil, nil)
		case <-h.kick:
			warn.round(h.opts.Logger, h.flush(evictedOnly))
		}
	}
}

// flushWarner logs write-back failures without flooding the log: a user
// that cannot be written (a full disk, a bug met by its data) stays dirty
// from the failed write on, so a round retries it a flush interval later,
// or at every round if it was evicted (it waits in the evicted map, which
// each round writes whole). It logs a failure at most once every logEvery,
// with the rounds that failed since the last line.
type flushWarner struct {
	failed int          // rounds failed since the last line logged
	last   atomic.Int64 // see spaced
}

// round reports one write-back round's outcome.
func (w *flushWarner) round(log *slog.Logger, err error) {
	if err == nil {
		return
	}
	w.failed++
	if spaced(&w.last) {
		log.Warn("seenapi: write-back failed; will retry", "err", err, "failed_rounds", w.failed)
		w.failed = 0
	}
}

// Flush writes every dirty filter back now, merging into what is stored.
func (h *HotSet) Flush() error { return h.flush(0) }

// evictedOnly is the age of flush that writes back evicted users only.
const evictedOnly = math.MaxUint32

// kickFlush asks the write-back loop for a round of evicted users now.
func (h *HotSet) kickFlush() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// waitBacklog holds a call that is about to load a user (and so evict
// one) while evicted users waiting for write-back take more than
// backlogLimit bytes: memory stays near the budget however fast calls come.
// It waits for two write-back rounds at most, so a store that refuses
// writes (a full disk) slows loads down but never stops them.
func (h *HotSet) waitBacklog() {
	if h.evictedBytes.Load() <= h.backlogLimit {
		return
	}
	h.backlogMu.Lock()
	defer h.backlogMu.Unlock()
	until := h.flushRounds + 2
	for h.evictedBytes.Load() > h.backlogLimit && h.flushRounds < until && !h.closed.Load() && h.changing.Load() == 0 {
		h.kickFlush()
		h.backlogCond.Wait()
	}
}

// lockForChange takes flushMu for a step that changes users outside
// write-back (an erase, an import, a forget of items, a purge) and returns
// what lets it go. While it is held no write-back round can run, so the
// loads waiting for rounds (waitBacklog) stop waiting and go on: the step
// may itself load a user, or wait for another call's load of its user,
// and would otherwise wait for good, and every write-back with it.
func (h *HotSet) lockForChange() (unlock func()) {
	h.flushMu.Lock()
	h.changing.Add(1)
	h.backlogMu.Lock()
	h.backlogCond.Broadcast()
	h.backlogMu.Unlock()
	return func() {
		h.changing.Add(-1)
		h.flushMu.Unlock()
	}
}

// flushed wakes the calls waiting in waitBacklog after a write-back round.
func (h *HotSet) flushed() {
	h.backlogMu.Lock()
	h.flushRounds++
	h.backlogCond.Broadcast()
	h.backlogMu.Unlock()
}

// flush writes back the users queued at least age milliseconds ago and
// every evicted one (an evicted user is memory over the budget until it is
// written).
func (h *HotSet) flush(age uint32) error { return h.flushSome(age, 0) }

// keyedHold is, in milliseconds, how recent a keyed call's journal record
// must be for a write-back round to leave it in the journal (see
// writeBack): the API's log of answers writes each answer within 100 ms
// (or half the flush interval, if shorter), and a second leaves room for
// a slow write. Longer, the users of many keyed calls (every call of a
// client with retries is keyed) would be written back twice as often.
const keyedHold = 1000

// smoothRound is how many users that are due a round of the write-back
// loop writes at most, besides those overdue (see flushLoop).
const smoothRound = 64

// flushSome is flush with at most limit users dirty for age (0: no limit)
// besides those dirty for twice age or more, which it writes all. The
// shards take turns at being looked at first, so a limit starves none.
func (h *HotSet) flushSome(age uint32, limit int) error {
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	defer h.flushed()
	now := h.clock()
	overdue := uint32(min(2*uint64(age), math.MaxUint32))
	first := h.nextShard
	h.nextShard = (h.nextShard + 1) % len(h.shards)
	all := h.due[:0]
	defer func() {
		clear(all)
		if cap(all) <= maxKeptDue {
			h.due = all[:0]
		}
	}()
	due := 0 // users taken that are due but not overdue
	hold := min(age, keyedHold)
	if age == evictedOnly {
		hold = h.keyedHoldOf() // the loop's rounds'
	}
	for i := range h.shards {
		s := h.shards[(first+i)%len(h.shards)]
		s.mu.Lock()
		n := 0
		// A clock that went back makes now-at huge: written at once.
		for n < s.dirty.len() {
			e := s.dirty.at(n)
			since := now - e.dirtySince.Load()
			if since < age {
				break
			}
			if since < overdue {
				if limit > 0 && due >= limit {
					break
				}
				due++
			}
			e.flags &^= flagQueued
			all = append(all, e)
			n++
		}
		s.dirty.drop(n)
		for _, e := range s.evicted {
			if h.holdEvictedLocked(s, e, hold) {
				continue
			}
			all = append(all, e) // written once: write-back skips one already clean
		}
		s.mu.Unlock()
	}
	if len(all) > 0 {
		// Rounds that found nothing to write (the loop looks every few
		// milliseconds) are not write-backs an operator counts.
		h.flushes.Add(1)
	}
	var errs []error
	if age == evictedOnly {
		hold = 0 // those it takes are let go once written (see holdEvictedLocked)
	}
	for rest := all; len(rest) > 0; {
		n := min(len(rest), writeBatch)
		if err := h.writeBack(rest[:n], nil, hold); err != nil {
			errs = append(errs, err)
		}
		rest = rest[n:]
	}
	return joinFew(errs)
}

// keyedHoldOf is the hold of the write-back loop's rounds (see writeBack),
// which write the users changed FlushInterval ago.
func (h *HotSet) keyedHoldOf() uint32 {
	return uint32(min(h.opts.FlushInterval.Milliseconds(), keyedHold))
}

// holdEvictedLocked reports whether the write-back of e, an evicted user,
// waits for a later round: one with a keyed call's journal record made
// less than hold milliseconds ago (see writeBack) stays in memory until
// then, instead of being written at once and its record retired with the
// call's answer in the API's memory only, which a crash lost: the retry
// was served anew and recorded the next items. So that memory stays near
// the budget (see waitBacklog), only while the evicted users waiting for
// write-back take at most half the backlog (beyond, writeBack lets it go
// at once, as the exception documented). s.mu held.
func (h *HotSet) holdEvictedLocked(s *shard, e *entry, hold uint32) bool {
	kr, ok := s.keyed[e]
	if !ok || h.evictedBytes.Load() > h.backlogLimit/2 {
		return false
	}
	return kr.from(h.clock(), hold) != 0
}

// writeBack writes a batch of dirty entries; with upTo, batch[i] only if
// its journal ends at upTo[i] (it is left dirty otherwise). A user with a
// keyed call's journal record made less than hold milliseconds ago (see
// clock) keeps its journal from its first such record on, and stays dirty
// for another round: the record holds the call's answer until the API's
// log of answers does, which writes them at shorter intervals than the
// flush interval (the age of the write-back loop's rounds) but whatever
// the age of the user's earlier changes, which make it due. An evicted
// user is so held only while the evicted users take at most half the
// backlog, and keeps its keyed record: the rounds leave it until the hold
// is over (holdEvictedLocked). flushMu held.
func (h *HotSet) writeBack(batch []*entry, upTo []uint64, hold uint32) error {
	now := h.opts.Now()
	writes, taken, sinces := h.writes[:0], h.taken[:0], h.sinces[:0]
	var encodeErrs []error
	for i, e := range batch {
		e.mu.Lock()
		if upTo != nil && e.dirty() && e.lastSeq != upTo[i] {
			e.mu.Unlock() // still on its shard's dirty list
			continue
		}
		if !e.dirty() {
			// Nothing to write. An evicted entry kept for a call that was
			// using it (see trimLocked) is let go here, unless this batch
			// writes it (it was listed twice, as queued and as evicted):
			// then once that write lands.
			k := h.keyOf(e)
			s := h.shardOf(k)
			s.mu.Lock()
			if e.flags&flagWriting == 0 {
				h.letGoLocked(s, k, e)
			}
			s.mu.Unlock()
			e.mu.Unlock()
			continue
		}
		raw, err := h.encode(e, now)
		if err != nil {
			// Not written: it stays dirty and goes back on its shard's
			// dirty list; the rest of the batch is written all the same.
			s := h.shardOf(h.keyOf(e))
			s.mu.Lock()
			h.markDirtyLocked(s, e)
			s.mu.Unlock()
			e.mu.Unlock()
			encodeErrs = append(encodeErrs, fmt.Errorf("encoding %s/%s: %w", h.infoOf(e).Name, e.id(), err))
			continue
		}
		k := h.keyOf(e)
		s := h.shardOf(k)
		s.mu.Lock()
		if size := entrySize(e); size != e.bytes {
			// encode dropped the buckets past the window: their memory
			// leaves the budget's count, as after a call that drops some.
			h.accountLocked(s, k, e, size)
		}
		// Reachable until the write lands, though clean from here on (see
		// flagWriting).
		e.flags |= flagWriting
		covered, held := e.lastSeq, false
		if kr, ok := s.keyed[e]; ok {
			cur, ok := s.lru.Peek(k)
			hot := ok && cur == e
			from := kr.from(h.clock(), hold)
			held = from != 0 && (hot || h.evictedBytes.Load() <= h.backlogLimit/2)
			switch {
			case !held:
				delete(s.keyed, e)
			case hot:
				// The next keyed call starts the records of the next
				// write-back; those left are kept in mind until their
				// hold is over, for an eviction before it (see
				// holdEvictedLocked).
				last := kr.at
				if kr.seq == 0 {
					last = kr.heldAt
				}
				s.keyed[e] = keyedRecord{heldSeq: from, heldAt: last}
			}
			// An evicted user held keeps them all: the rounds leave it in
			// memory until its hold is over (see holdEvictedLocked).
			if held {
				covered = from - 1
			}
		}
		writes = append(writes, storage.Write{NS: h.infoOf(e).Name, User: e.id(), Value: raw,
			UpTo: covered, TTL: ttlOf(&e.f, now), Empty: gone(&e.f, now), Writer: h.writer})
		// Clean from here on: a call that changes it again marks it dirty
		// again and is journalled past UpTo. One whose keyed records are
		// held is dirty again, from now: the next round due for it
		// retires them, a flush interval after the last.
		sinces = append(sinces, e.dirtySince.Load())
		h.markClean(e)
		if held {
			h.markDirtyLocked(s, e)
		}
		s.mu.Unlock()
		taken = append(taken, e)
		e.mu.Unlock()
	}
	// The store is done with the values once WriteBack returns: the next
	// batch encodes into the same buffer.
	defer func() {
		h.encoded = h.encoded[:0]
		if cap(h.encoded) > maxKeptEncoded {
			h.encoded = nil
		}
		clear(writes)
		clear(taken)
		h.writes, h.taken, h.sinces = writes[:0], taken[:0], sinces[:0]
	}()
	if len(writes) == 0 {
		return errors.Join(encodeErrs...)
	}
	err := h.storeWriteBack(writes)
	failedAll := err != nil
	failed := map[string]bool{}
	if err != nil {
		h.storageErrors.Add(1)
		var wbe *storage.WriteBackError
		if errors.As(err, &wbe) {
			failedAll = false
			for _, u := range wbe.Failed {
				failed[u.NS+"\x00"+u.User] = true
			}
		}
	}
	// Users not written stay dirty and are retried at the next write-back;
	// written ones that were evicted meanwhile are let go.
	for i, e := range taken {
		e.mu.Lock()
		k := h.keyOf(e)
		s := h.shardOf(k)
		s.mu.Lock()
		e.flags &^= flagWriting
		if failedAll || failed[h.infoOf(e).Name+"\x00"+e.id()] {
			h.markDirtyLocked(s, e)
			f, ok := s.failed[e]
			if !ok || f.at != sinces[i] { // not failed since its last write
				f.since = sinces[i]
			}
			f.at = e.dirtySince.Load()
			if s.failed == nil {
				s.failed = map[*entry]failedWrite{}
			}
			s.failed[e] = f
		} else if e.lastSeq == writes[i].UpTo {
			// Nothing journalled since the snapshot: no entry is left to
			// cover, and the next write-back need not look for any. Had
			// there been one, lastSeq would have grown past UpTo and the
			// next write-back's UpTo covers it and those before.
			e.lastSeq = 0
		}
		if f, ok := s.failed[e]; ok && e.dirtySince.Load() != f.at {
			delete(s.failed, e) // written
		}
		if !e.dirty() {
			h.letGoLocked(s, k, e)
			if writes[i].Empty && e.lastSeq == 0 {
				// Gone, and written so: it leaves the cache too. A call
				// holding it looks the user up again (reachLocked).
				h.dropGoneLocked(s, k, e)
			}
		}
		s.mu.Unlock()
		e.mu.Unlock()
	}
	if !failedAll {
		h.flushedUsers.Add(uint64(len(writes) - len(failed)))
	}
	return errors.Join(append(encodeErrs, err)...)
}

// encode appends e's filter, expired as of now, to h.encoded and returns
// its bytes. e.mu and flushMu held.
func (h *HotSet) encode(e *entry, now time.Time) (raw []byte, err error) {
	defer h.recovered(&err, "encoding", h.infoOf(e).Name, e.id())
	e.f.Expire(now)
	start := len(h.encoded)
	encoded, err := appendFilter(&e.f, h.encoded)
	if err != nil {
		return nil, err
	}
	h.encoded = encoded
	return encoded[start:len(encoded):len(encoded)], nil // the next user's bytes go after, never into it
}

// appendFilter is the filter's encoder; tests replace it to meet a bug.
var appendFilter = (*userfilter.Filter).AppendBinary

// storeWriteBack writes a batch. A panic in the store fails the whole batch
// (its users stay dirty and are retried); one in a user's merge fails that
// user only (h.merge, storage.Store.WriteBack).
func (h *HotSet) storeWriteBack(writes []storage.Write) (err error) {
	defer h.recovered(&err, "writing back the batch of", writes[0].NS, writes[0].User)
	return h.store.WriteBack(writes, h.merge)
}

// merge is the write-back's merge: a panic in it (a bug met by one user's
// stored bytes) is counted and logged with the hot set's others, and the
// store fails that user's write-back only, naming the user.
func (h *HotSet) merge(stored, value []byte) (out []byte, err error) {
	defer h.recovered(&err, "merging into the stored filter", "", "")
	return mergeFilters(stored, value)
}

// mergeFilters is MergeFilters; tests replace it to meet a bug.
var mergeFilters = MergeFilters

// maxKeptEncoded is the largest write-back buffer kept for the next batch.
const maxKeptEncoded = 4 << 20

// maxKeptDue is the longest list of due users kept for the next round: a
// burst of dirty users is not memory kept for good.
const maxKeptDue = 4096

// MergeFilters is the storage.MergeFunc of write-back (and of a merging
// restore): it ORs a filter about to be written into the stored one, so a
// second writer, a replayed journal or a restore never rolls a user back.
// A corrupt stored value, or one built with other parameters (the user was
// erased or replaced since), gives way to the new value.
func MergeFilters(stored, value []byte) ([]byte, error) {
	old, err := userfilter.Decode(stored)
	if err != nil {
		// A corrupt stored value is replaced by the good one in memory.
		return value, nil
	}
	cur, err := userfilter.Decode(value)
	if err != nil {
		return nil, err
	}
	if !cur.Compatible(old) {
		// The user was re-created with a new profile (after an erase or a
		// replace import): what is in memory is the truth.
		return value, nil
	}
	if p := cur.Profile(); p.Window > 0 {
		// Buckets past the window of the newer of the two, as of its
		// newest bucket, are past it now too: merged back in, they were
		// stored again at every write-back, the user's value growing by a
		// bucket each granularity for as long as it was written, and
		// never covered by what is in memory, where they are gone.
		newest := cur.ExpiresAt()
		if e := old.ExpiresAt(); e.After(newest) {
			newest = e
		}
		if !newest.IsZero() {
			at := newest.Add(-p.Window - p.Granularity) // the newest bucket's start
			cur.Expire(at)
			old.Expire(at)
		}
	}
	if cur.Covers(old) {
		// The usual case: what is stored is an earlier state of what is in
		// memory. The union is value itself: no merge, no second encoding.
		return value, nil
	}
	if err := cur.Merge(old); err != nil {
		return nil, err
	}
	return cur.MarshalBinary()
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

// leveled is a Store whose LSM levels Stats reports.
type leveled interface {
	Levels() []storage.LevelStats
}

// journalLister is what Recover needs of the store beyond Store.
type journalLister interface {
	JournalUsers(fn func(ns, user string) error) error
}

// Recover folds every pending journal (left by a crash, or brought by a
// restored backup) into its user's filter and writes them back, so the
// journal does not wait for each user's next call; a user a call has
// changed meanwhile is left to the write-back loop (see writeBackFolded).
// Users of namespaces no
// longer configured are left as they are. Ready reports true once it has
// run. It returns how many users' journals it folded in.
func (h *HotSet) Recover() (users int, err error) {
	defer h.ready.Store(true)
	jl, ok := h.store.(journalLister)
	if !ok {
		return 0, nil
	}
	var errs []error
	loaded := make([]*entry, 0, writeBatch)
	upTo := make([]uint64, 0, writeBatch)
	fold := func() {
		if err := h.writeBackFolded(loaded, upTo); err != nil {
			errs = append(errs, err)
		}
		loaded, upTo = loaded[:0], upTo[:0]
	}
	err = jl.JournalUsers(func(ns, user string) error {
		info, err := h.namespace(ns)
		if err != nil {
			return nil
		}
		e, hot, _, err := h.acquireNew(info, user, false, false)
		if errors.Is(err, ErrUserNotFound) {
			// Nothing left to fold in: its journal expired (past its
			// window) or a call erased the user since the listing.
			return nil
		}
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if !hot {
			// A user a call loaded first has its journal folded in
			// already, and maybe that call's record too: the write-back
			// loop writes it.
			loaded, upTo = append(loaded, e), append(upTo, e.lastSeq)
		}
		h.release(e, false)
		if users++; len(loaded) == writeBatch {
			fold()
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	fold()
	return users, joinFew(errs)
}

// writeBackFolded writes back the users Recover loaded (loaded[i] with its
// journal ending at upTo[i]), but those a call has changed since: the
// call's journal record, which keeps a keyed call's answer, is left to the
// write-back loop, whose wait (Options.FlushInterval) lets the API's log of
// answers keep the answer first. Written back at once, the record was
// erased with the answer still in memory only, and a crash then gave the
// call's retry the next items instead of its answer.
func (h *HotSet) writeBackFolded(loaded []*entry, upTo []uint64) error {
	if len(loaded) == 0 {
		return nil
	}
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	defer h.flushed()
	h.flushes.Add(1)
	return h.writeBack(loaded, upTo, 0)
}

// Ready reports whether Recover has run: the pending journal has been
// folded in (calls are answered correctly before that too; they replay
// their user's journal when they load it).
func (h *HotSet) Ready() bool { return h.ready.Load() }
