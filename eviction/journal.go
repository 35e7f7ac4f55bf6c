package eviction

import (
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/seenapi/seenapi/userfilter"
)

// A journal record is uvarint(unix seconds of the call) followed by the
// 16-byte item hashes (little-endian Lo then Hi) it recorded. Replaying it
// adds the hashes at that time; adding twice is harmless.

// appendJournal appends the record of hashes recorded at to dst[:0].
func appendJournal(dst []byte, at time.Time, hashes []userfilter.Hash) []byte {
	b := slices.Grow(dst[:0], binary.MaxVarintLen64+16*len(hashes))
	b = binary.AppendUvarint(b, uint64(at.Unix()))
	for _, h := range hashes {
		b = binary.LittleEndian.AppendUint64(b, h.Lo)
		b = binary.LittleEndian.AppendUint64(b, h.Hi)
	}
	return b
}

var errBadJournal = errors.New("bad journal record")

func decodeJournal(b []byte) (time.Time, []userfilter.Hash, error) {
	sec, n := binary.Uvarint(b)
	if n <= 0 || (len(b)-n)%16 != 0 || sec > 1<<40 {
		return time.Time{}, nil, errBadJournal
	}
	b = b[n:]
	hs := make([]userfilter.Hash, len(b)/16)
	for i := range hs {
		hs[i] = userfilter.Hash{Lo: binary.LittleEndian.Uint64(b[16*i:]), Hi: binary.LittleEndian.Uint64(b[16*i+8:])}
	}
	return time.Unix(int64(sec), 0), hs, nil
}
