package storage

import "iter"

// walIndex is the journal's index in memory: for each user with live
// records, where they are. A user's records sit in an entry of one array,
// which the map points to by number, the first record inline: appending to
// a user already indexed allocates nothing (the map is read with a key on
// the stack and not assigned to), and a user with one record costs its key
// and an entry, not a key, an entry and an array of one. At a million users
// drawn uniformly the index's key and record arrays made a tenth of what
// the server allocated, and twice as many objects for the collector to mark
// as users with records. A busy user's record array is reused from one
// write-back to the next (see spare). Not safe for concurrent use: the
// wal's mutex guards it.
type walIndex struct {
	slots map[string]int32 // the user's key (filterKey) → its entry in users
	users []walUser
	free  []int32 // entries of users not in use
	peak  int     // most users indexed since the index was last rebuilt
	// spare holds the record arrays of users whose records were all
	// dropped, emptied, for the next user that gets a second record: a busy
	// user's records are retired by each write-back and come back right
	// after, and the index, such arrays growing again from nothing among
	// it, made a fifth of what a loaded server allocated (100,000 users by
	// Zipf). At most spareRoom records' room is kept in all.
	spare     [][]walRec
	spareRecs int // the room of the arrays in spare, in records
}

// spareRoom bounds the room kept in spare arrays: 16,384 records (640 KiB).
const spareRoom = 1 << 14

// walUser is one user's live records, in the order they were added.
type walUser struct {
	first walRec   // the first (a free entry is all zero)
	more  []walRec // the others; empty (and often nil) for a user with one
}

func newWALIndex() walIndex { return walIndex{slots: map[string]int32{}} }

// len is how many users have live records.
func (x *walIndex) len() int { return len(x.slots) }

// add indexes r as the user's latest record.
func (x *walIndex) add(key []byte, r walRec) {
	if i, ok := x.slots[string(key)]; ok {
		u := &x.users[i]
		if u.more == nil {
			u.more = x.takeSpare()
		}
		u.more = append(u.more, r)
		return
	}
	var i int32
	if n := len(x.free); n > 0 {
		i, x.free = x.free[n-1], x.free[:n-1]
	} else {
		i = int32(len(x.users))
		x.users = append(x.users, walUser{})
	}
	x.users[i] = walUser{first: r}
	x.slots[string(key)] = i
	x.peak = max(x.peak, len(x.slots))
}

// records yields the user's live records, in the order they were added.
func (x *walIndex) records(key []byte) iter.Seq[walRec] {
	return func(yield func(walRec) bool) {
		i, ok := x.slots[string(key)]
		if !ok {
			return
		}
		u := &x.users[i]
		if !yield(u.first) {
			return
		}
		for _, r := range u.more {
			if !yield(r) {
				return
			}
		}
	}
}

// drop removes the user's records for which drop returns true, and the
// user once none is left.
func (x *walIndex) drop(key []byte, drop func(walRec) bool) {
	i, ok := x.slots[string(key)]
	if !ok {
		return
	}
	u := &x.users[i]
	// Kept records move down in place: record k (0 the first, then
	// more[k-1]) goes to position n <= k.
	n := 0
	for k := 0; k <= len(u.more); k++ {
		r := u.first
		if k > 0 {
			r = u.more[k-1]
		}
		if drop(r) {
			continue
		}
		if n == 0 {
			u.first = r
		} else {
			u.more[n-1] = r
		}
		n++
	}
	switch {
	case n == 0:
		x.putSpare(u.more)
		x.users[i] = walUser{}
		x.free = append(x.free, i)
		delete(x.slots, string(key))
		x.shrink()
	default:
		clear(u.more[n-1:])
		u.more = u.more[:n-1]
	}
}

// takeSpare returns an emptied record array from spare, or nil.
func (x *walIndex) takeSpare() []walRec {
	n := len(x.spare)
	if n == 0 {
		return nil
	}
	more := x.spare[n-1]
	x.spare[n-1] = nil
	x.spare = x.spare[:n-1]
	x.spareRecs -= cap(more)
	return more
}

// putSpare keeps more, emptied, for takeSpare if there is room for it.
func (x *walIndex) putSpare(more []walRec) {
	if cap(more) == 0 || x.spareRecs+cap(more) > spareRoom {
		return
	}
	clear(more) // a spare array holds on to no segment
	x.spare = append(x.spare, more[:0])
	x.spareRecs += cap(more)
}

// shrink rebuilds an index that has emptied out: Go maps keep their peak
// size, and a burst of pending users must not pin its memory for good.
// Into a new map sized for what is left: maps.Clone keeps the tables'
// size, so it allocated the peak again instead of shrinking (12.6 MB to
// clone a map that had held 200,000 keys and held 10).
func (x *walIndex) shrink() {
	if x.peak <= 4096 || len(x.slots) >= x.peak/8 {
		return
	}
	slots := make(map[string]int32, len(x.slots))
	users := make([]walUser, 0, len(x.slots))
	for k, i := range x.slots {
		slots[k] = int32(len(users))
		users = append(users, x.users[i])
	}
	x.slots, x.users, x.free, x.peak = slots, users, nil, len(slots)
	x.spare, x.spareRecs = nil, 0
}

// keys returns the keys of the users with live records, in no order.
func (x *walIndex) keys() []string {
	keys := make([]string, 0, len(x.slots))
	for k := range x.slots {
		keys = append(keys, k)
	}
	return keys
}
