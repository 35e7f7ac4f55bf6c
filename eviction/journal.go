package eviction

import (
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/seenapi/seenapi/userfilter"
	"github.com/zeebo/xxh3"
)

// A journal record is uvarint(unix seconds of the call) followed by the
// 16-byte item hashes (little-endian Lo then Hi) it recorded. Replaying it
// adds the hashes at that time; adding twice is harmless.
//
// The record of a call sent with an Idempotency-Key also carries its
// answer, so that a retry after a crash gets it instead of the next items
// (see replies.go). Its seconds have keyedMark set (a time past 1<<40 is
// refused, so no record of an earlier build has it), and the hashes follow
// the call's key and answer:
//
//	uvarint(seconds | keyedMark) | ID (Hi, Lo) | Request (Hi, Lo) |
//	uvarint seen | uvarint recorded | byte saturated |
//	uvarint n | n x uvarint index of an unseen candidate | hashes
//
// In one record the answer is written, or lost, with the items it recorded.
const keyedMark = 1 << 41

// appendJournal appends the record of hashes recorded at to dst[:0], with
// the answer r of a keyed call (nil: none).
func appendJournal(dst []byte, at time.Time, hashes []userfilter.Hash, r *reply) []byte {
	b := slices.Grow(dst[:0], binary.MaxVarintLen64+16*len(hashes))
	sec := uint64(at.Unix())
	if r == nil {
		b = binary.AppendUvarint(b, sec)
	} else {
		b = binary.AppendUvarint(b, sec|keyedMark)
		for _, x := range []xxh3.Uint128{r.id, r.request} {
			b = binary.LittleEndian.AppendUint64(b, x.Hi)
			b = binary.LittleEndian.AppendUint64(b, x.Lo)
		}
		b = binary.AppendUvarint(b, uint64(r.seen))
		b = binary.AppendUvarint(b, uint64(r.recorded))
		b = append(b, byte(boolByte(r.saturated)))
		b = binary.AppendUvarint(b, uint64(len(r.unseen)))
		for _, i := range r.unseen {
			b = binary.AppendUvarint(b, uint64(i))
		}
	}
	for _, h := range hashes {
		b = binary.LittleEndian.AppendUint64(b, h.Lo)
		b = binary.LittleEndian.AppendUint64(b, h.Hi)
	}
	return b
}

func boolByte(b bool) int {
	if b {
		return 1
	}
	return 0
}

var errBadJournal = errors.New("bad journal record")

// decodeJournal reads a record: its time, its hashes and, for a keyed
// call, its answer (nil otherwise).
func decodeJournal(b []byte) (time.Time, []userfilter.Hash, *reply, error) {
	sec, n := binary.Uvarint(b)
	if n <= 0 {
		return time.Time{}, nil, nil, errBadJournal
	}
	b = b[n:]
	var r *reply
	if sec&keyedMark != 0 {
		sec &^= keyedMark
		var err error
		if r, b, err = decodeReply(b); err != nil {
			return time.Time{}, nil, nil, err
		}
	}
	if len(b)%16 != 0 || sec > 1<<40 {
		return time.Time{}, nil, nil, errBadJournal
	}
	hs := make([]userfilter.Hash, len(b)/16)
	for i := range hs {
		hs[i] = userfilter.Hash{Lo: binary.LittleEndian.Uint64(b[16*i:]), Hi: binary.LittleEndian.Uint64(b[16*i+8:])}
	}
	at := time.Unix(int64(sec), 0)
	if r != nil {
		r.at = at
	}
	return at, hs, r, nil
}

// decodeReply reads a keyed record's answer and returns the rest of b.
func decodeReply(b []byte) (*reply, []byte, error) {
	if len(b) < 32 {
		return nil, nil, errBadJournal
	}
	r := &reply{
		id:      xxh3.Uint128{Hi: binary.LittleEndian.Uint64(b), Lo: binary.LittleEndian.Uint64(b[8:])},
		request: xxh3.Uint128{Hi: binary.LittleEndian.Uint64(b[16:]), Lo: binary.LittleEndian.Uint64(b[24:])},
	}
	b = b[32:]
	var vs [2]uint64
	for i := range vs {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > 1<<31 {
			return nil, nil, errBadJournal
		}
		vs[i], b = v, b[n:]
	}
	r.seen, r.recorded = int32(vs[0]), int32(vs[1])
	if len(b) == 0 || b[0] > 1 {
		return nil, nil, errBadJournal
	}
	r.saturated, b = b[0] == 1, b[1:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) { // an index takes a byte at least
		return nil, nil, errBadJournal
	}
	b = b[n:]
	r.unseen = make([]int32, count)
	prev := int64(-1)
	for i := range r.unseen {
		v, n := binary.Uvarint(b)
		if n <= 0 || int64(v) <= prev || v > 1<<31 {
			return nil, nil, errBadJournal // indexes of candidates only grow
		}
		r.unseen[i], prev, b = int32(v), int64(v), b[n:]
	}
	return r, b, nil
}
