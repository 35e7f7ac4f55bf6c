package userfilter

import "github.com/zeebo/xxh3"

// Hash is the one 128-bit hash of an item, from which every layer's bit
// positions are derived by double hashing. It is persisted (in filters and
// journal records), so HashItem must never change for a given hashVersion.
type Hash struct{ Lo, Hi uint64 }

// hashVersion is stored in every encoding; a new hash function needs a new one.
const hashVersion = 1

// HashItem hashes an item with XXH3-128 (stable across processes, machines and versions).
func HashItem(item string) Hash {
	u := xxh3.HashString128(item)
	return Hash{Lo: u.Lo, Hi: u.Hi}
}
