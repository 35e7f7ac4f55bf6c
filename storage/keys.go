package storage

import (
	"encoding/binary"
	"fmt"
)

// Limits of namespace names and user ids, in bytes.
const (
	MaxNamespaceLen = 255
	MaxUserLen      = 4096
)

// Key prefixes (the first byte of every key).
const (
	prefixFilter  byte = 'f'
	prefixJournal byte = 'j'
	prefixMeta    byte = 'm'
	prefixCover   byte = 'c'
)

// Meta keys.
var (
	keyFormat = []byte("mformat") // uvarint store format version
	keySeq    = []byte("mseq")    // uint64 BE: highest journal sequence number that may have been used
	// keyFlush is written and at once dropped to make Badger flush its
	// memtables (see Store.flushMemtables); it holds nothing.
	keyFlush = []byte("mflush")
)

// FormatVersion is the store format this build writes and reads. Format 3
// keeps a user's cover mark at the end of its filter's value (flagged by
// metaCoverMark) rather than under a key of its own; stores of format 2
// open as they are, their values read as before. Format 4 changes nothing
// here: its journal records may name the profile of their user's filter
// (the hot set's record format), which builds of format 3 read as corrupt,
// so they refuse the store instead. Format 5 is the same for the journal
// records that note the room a user's cap left their call, which builds of
// format 4 read as corrupt, and format 6 for the keyed call's records that
// name its caller or how far its answer's stamp is ahead, which builds of
// format 5 read as corrupt, and format 7 for those that note how far
// their answer's stamp is behind (a part of an answer first given
// before), which builds of format 6 read as corrupt.
const FormatVersion = 7

// metaCoverMark, in a filter entry's UserMeta, says its value ends with
// the user's cover mark: 8 bytes, big-endian, the journal number below
// which the filter holds every record of the user. One Badger entry a
// write-back instead of two: the cover key's entry cost as much as the
// filter's (BenchmarkWriteBack).
const metaCoverMark byte = 1

// metaEmpty, in a filter entry's UserMeta, says the filter holds no item
// (Write.Empty): a windowed user whose items all left its window. The
// entry stays only for its cover mark, until every journal record it
// covers has expired too (so none is replayed after a restart), and lists
// no user (Users).
const metaEmpty byte = 2

// coverMarkLen is the length of the cover mark at the end of a value
// flagged by metaCoverMark.
const coverMarkLen = 8

// splitCoverMark returns the filter and the cover mark (0: none) of a
// filter entry's value and UserMeta.
func splitCoverMark(v []byte, meta byte) (filter []byte, mark uint64, err error) {
	if meta&metaCoverMark == 0 {
		return v, 0, nil
	}
	if len(v) < coverMarkLen {
		return nil, 0, fmt.Errorf("%w: a filter value of %d bytes flagged with a cover mark", ErrCorrupt, len(v))
	}
	n := len(v) - coverMarkLen
	return v[:n:n], binary.BigEndian.Uint64(v[n:]), nil
}

func checkKey(ns, user string) error {
	switch {
	case ns == "":
		return fmt.Errorf("%w: empty namespace", ErrBadKey)
	case len(ns) > MaxNamespaceLen:
		return fmt.Errorf("%w: namespace of %d bytes (max %d)", ErrBadKey, len(ns), MaxNamespaceLen)
	case user == "":
		return fmt.Errorf("%w: empty user id in namespace %q", ErrBadKey, ns)
	case len(user) > MaxUserLen:
		return fmt.Errorf("%w: user id of %d bytes in namespace %q (max %d)", ErrBadKey, len(user), ns, MaxUserLen)
	}
	return nil
}

// appendNSPrefix appends prefix | uvarint(len(ns)) | ns.
func appendNSPrefix(dst []byte, prefix byte, ns string) []byte {
	dst = append(dst, prefix)
	dst = binary.AppendUvarint(dst, uint64(len(ns)))
	return append(dst, ns...)
}

// filterKey appends 'f' | uvarint(len(ns)) | ns | user.
func filterKey(dst []byte, ns, user string) []byte {
	return append(appendNSPrefix(dst, prefixFilter, ns), user...)
}

// coverKey appends 'c' | uvarint(len(ns)) | ns | user: the key of the
// highest journal sequence number the user's stored filter covers.
func coverKey(dst []byte, ns, user string) []byte {
	return append(appendNSPrefix(dst, prefixCover, ns), user...)
}

// journalPrefix appends 'j' | uvarint(len(ns)) | ns | uvarint(len(user)) | user:
// the prefix of every journal key of the user and of no other user.
func journalPrefix(dst []byte, ns, user string) []byte {
	dst = appendNSPrefix(dst, prefixJournal, ns)
	dst = binary.AppendUvarint(dst, uint64(len(user)))
	return append(dst, user...)
}

// journalKey appends the user's journal prefix and seq (8 bytes, big-endian,
// so a user's entries sort in sequence order).
func journalKey(dst []byte, ns, user string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(journalPrefix(dst, ns, user), seq)
}

func journalKeyLen(ns, user string) int {
	return 1 + uvarintLen(len(ns)) + len(ns) + uvarintLen(len(user)) + len(user) + 8
}

func uvarintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}

// splitNS splits a key (prefix byte included) into its namespace and the
// rest. Lengths must be in canonical (shortest) uvarint form, so every key
// that parses is the one its parts encode to.
func splitNS(key []byte) (ns, rest []byte, ok bool) {
	if len(key) < 2 {
		return nil, nil, false
	}
	n, w := binary.Uvarint(key[1:])
	if w <= 0 || n == 0 || n > MaxNamespaceLen || w != uvarintLen(int(n)) || uint64(len(key)-1-w) < n {
		return nil, nil, false
	}
	ns = key[1+w : 1+w+int(n)]
	return ns, key[1+w+int(n):], true
}

// parseFilterKey returns the namespace and user of a filter key.
func parseFilterKey(key []byte) (ns, user []byte, ok bool) {
	if len(key) == 0 || key[0] != prefixFilter {
		return nil, nil, false
	}
	ns, user, ok = splitNS(key)
	if !ok || len(user) == 0 || len(user) > MaxUserLen {
		return nil, nil, false
	}
	return ns, user, true
}

// parseJournalKey returns the namespace, user and sequence number of a journal key.
func parseJournalKey(key []byte) (ns, user []byte, seq uint64, ok bool) {
	if len(key) == 0 || key[0] != prefixJournal {
		return nil, nil, 0, false
	}
	ns, rest, ok := splitNS(key)
	if !ok {
		return nil, nil, 0, false
	}
	n, w := binary.Uvarint(rest)
	if w <= 0 || n == 0 || n > MaxUserLen || w != uvarintLen(int(n)) || uint64(len(rest)-w) != n+8 {
		return nil, nil, 0, false
	}
	user = rest[w : w+int(n)]
	return ns, user, binary.BigEndian.Uint64(rest[w+int(n):]), true
}

// prefixEnd returns the smallest key greater than every key starting with p
// (nil if there is none).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
