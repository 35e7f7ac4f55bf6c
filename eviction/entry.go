package eviction

import (
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/seenapi/seenapi/userfilter"
)

// entry is one hot user: its filter, its lock and the hot set's bookkeeping
// in one allocation, which also holds the user id when it is short enough
// (see newEntry). The fields are ordered and sized so that the entry of a
// user with an id of up to idHeadLen bytes fills the 144-byte size class
// of Go's allocator exactly (TestEntryLayout); a windowless filter's one
// generation is inside it too (userfilter.Filter), so a hot user is three
// heap objects: the entry, its bits and golang-lru's list element.
//
// mu serializes the user's calls and guards the fields marked so; the
// shard's lock guards the others. The namespace and the id never change.
type entry struct {
	f  userfilter.Filter // guarded by mu
	mu sync.Mutex
	// lastSeq is the highest journal sequence number applied to f and not
	// yet covered by a write-back; 0: none. The user's journal entries are
	// appended only under mu, so their sequence numbers only grow and one
	// number stands for all of them (storage.Write.UpTo). Guarded by mu.
	lastSeq uint64
	// dirtySince is when f first differed from storage, in milliseconds
	// since the hot set started, modulo 2^32 (see HotSet.clock); 0: clean.
	// Written under mu and the shard lock; atomic so that the write-back
	// loop and Stats can read it holding the shard lock only (the dirty
	// list is in dirtySince order: an entry is queued when it turns dirty).
	dirtySince atomic.Uint32
	bytes      int32 // accounted size; guarded by the shard lock
	flags      uint8 // flagQueued, flagWriting, flagReapPass; guarded by the shard lock
	ns         uint8 // index of the namespace in nsTable.byIndex
	probe      uint8 // which of the user's keys it is under (see HotSet.key); 0 unless its first collided
	// idLen is the id's length when it is kept inline: its first bytes in
	// idHead, the rest right after the entry in the same allocation. With
	// idOutside, a string holding the id follows the entry instead.
	idLen  uint8
	idHead [idHeadLen]byte
}

// Bits of entry.flags.
const (
	// flagQueued: in the shard's dirty list.
	flagQueued uint8 = 1 << iota
	// flagWriting: taken by a write-back whose store write has not landed.
	// Evicted meanwhile, the entry stays reachable (the shard's evicted
	// map) until it lands, clean or not: a copy loaded beside it could be
	// written before it and then be overwritten by it (the write-back of
	// the hot set's only writer does not read what is stored), or, after
	// a failed write, it would stay queued and be written over that copy's
	// newer filter, whose write-back retired the journal.
	flagWriting
	// flagReapPass: the reaper met the entry in its pass over the shard's
	// reap list whose parity is this bit (see shard.reapPass): met again
	// in the same pass, the key is a second copy in the list.
	flagReapPass
)

const (
	// idHeadLen is how many bytes of the id fit inside the entry itself.
	idHeadLen = 12
	// idOutside is idLen of an entry whose id is a separate string: ids
	// of idOutside bytes or more.
	idOutside = 255
	// maxNamespaces is how many namespaces entry.ns can tell apart.
	maxNamespaces = 256
)

// tailed is an entry with room after it: T is a byte array for the rest of
// an inline id, or a string for a long id. The entry is its first field, so
// a *entry to it is a pointer to the whole allocation and keeps it alive.
type tailed[T any] struct {
	entry
	rest T
}

func newTailed[T any]() *entry { return &new(tailed[T]).entry }

// entryAlloc allocates an entry with room for ids of up to room bytes.
type entryAlloc struct {
	room  int
	alloc func() *entry
}

func allocOf[T any]() entryAlloc {
	return entryAlloc{room: int(unsafe.Sizeof(tailed[T]{}) - unsafe.Offsetof(entry{}.idHead)), alloc: newTailed[T]}
}

// entryAllocs go up one Go size class at a time (the rest of each class
// would be wasted), from the bare entry (144 B) to 416 B, which holds ids
// of up to idOutside-1 bytes; the rest arrays are the class minus 144.
var entryAllocs = [...]entryAlloc{
	{room: idHeadLen, alloc: func() *entry { return new(entry) }},
	allocOf[[16]byte](), allocOf[[32]byte](), allocOf[[48]byte](), allocOf[[64]byte](),
	allocOf[[80]byte](), allocOf[[96]byte](), allocOf[[112]byte](), allocOf[[144]byte](),
	allocOf[[176]byte](), allocOf[[208]byte](), allocOf[[240]byte](), allocOf[[272]byte](),
}

// newEntry returns an entry of namespace index ns for user, with the id
// copied (callers' strings may alias request buffers) into the entry's own
// allocation unless it is idOutside bytes or longer.
func newEntry(ns uint8, user string) *entry {
	n := len(user)
	if n >= idOutside {
		t := &tailed[string]{rest: strings.Clone(user)}
		t.ns, t.idLen = ns, idOutside
		return &t.entry
	}
	i := 0
	for entryAllocs[i].room < n {
		i++
	}
	e := entryAllocs[i].alloc()
	e.ns, e.idLen = ns, uint8(n)
	copy(unsafe.Slice(&e.idHead[0], n), user)
	return e
}

// id is the user id. The string aliases the entry and never changes.
func (e *entry) id() string {
	if e.idLen == idOutside {
		return (*tailed[string])(unsafe.Pointer(e)).rest
	}
	return unsafe.String(&e.idHead[0], int(e.idLen))
}

func (e *entry) dirty() bool { return e.dirtySince.Load() != 0 }

// entryOverhead is what a hot user costs beyond its filter's MemoryBytes
// and its id's length: the entry's own fields (40 B of its 144, the id's
// first 12 bytes included), golang-lru's list element (80 B) and its map
// slot (an 8-byte key and a pointer in a map between 7/16 and 7/8 full,
// about 25 B), and a dirty-list slot (8 B and the list's spare room) while
// the user is dirty, and a reap-list slot (8 B, see reap.go) while it is
// windowed. BenchmarkBytesPerHotUser measures the heap a dirty
// user with a 12-byte id takes beyond its filter: 154 B at 10 items and
// at 200, 155 B at 2,000, of which the dirty-list slot is 10-11 B. It is
// set so that the accounted bytes per user stay at or above the heap
// measured at every size, with room for a map that is less full.
const entryOverhead = 168
