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
//
// The first record after a write-back (or of a user never written back)
// also carries the profile of the user's filter, as an empty filter of
// that profile encoded (userfilter's AppendBinary): a user whose filter
// is not stored yet is rebuilt from its journal with the profile it was
// made with, not the namespace's profile of the moment, which a SIGHUP may
// have changed (a cap, or another kind, would lose items). A windowed
// user with no item in the window names it too: a call that finds the
// user gone makes it anew with its namespace's profile, while the records
// of its earlier life, which outlive their items by up to a bucket, may
// name another; a replay that reaches such a record with the filter gone
// as of its time makes the filter anew from it, as the call did. Its
// seconds have madeMark set, and the encoding comes right after them:
//
//	uvarint(seconds | madeMark [| keyedMark]) | uvarint len | encoding | ...
//
// The record of a call to a filter with a cap (max_items) also carries
// the room the cap left the call (userfilter's Room, at most the number of
// hashes), which its replay lets in whatever the filter holds by then
// (AddHashes): an earlier record, whose items the call's cap counted,
// expires before it (a window and a bucket after its own call), and the
// cap counted again without them would let in items the call refused and
// refuse items later calls recorded (replayed again, it lets in nothing
// more: see AddHashes). Its seconds have roomMark set, and
// the room comes after the encoding (if any), before the answer (if any):
//
//	uvarint(seconds | roomMark [| madeMark] [| keyedMark]) [| uvarint len | encoding] | uvarint room | ...
//
// Records without it (of builds before store format 5, or of filters
// without a cap) are replayed with the cap counted as of their call.
//
// The answer of a call whose caller is known (an API key: see
// CallKey.Caller) names it, so that the answers read back share their
// budget between callers (see replies). Its seconds have callerMark set
// too, and the caller's 8 bytes (little-endian) follow the Request:
//
//	... | ID (Hi, Lo) | Request (Hi, Lo) | caller | uvarint seen | ...
//
// The answers of records without it (of builds before store format 6, or
// of an open server's calls) are caller 0's.
//
// The answer of a call whose caller stamps answers in a time ahead of the
// record's (CallKey.Stamp) notes by how many seconds, so that it is read
// back as old as it is in that time (see SetReplyClock). Its seconds have
// aheadMark set, and the uvarint seconds follow the caller (if any):
//
//	... | Request (Hi, Lo) [| caller] | uvarint ahead | uvarint seen | ...
//
// The answer of a call that is part of an answer first given before (a
// keyed batch's user served after the batch's start, or anew by the
// batch's retry, whose other users get their first results again: see
// CallKey.Stamp) notes by how many seconds
// its stamp is behind the record's, so that it is read back as old as the
// answer it is part of, and lives no longer. Its seconds have behindMark
// set, and the uvarint seconds follow the caller (if any), in place of
// ahead's (a stamp is ahead or behind, never both):
//
//	... | Request (Hi, Lo) [| caller] | uvarint behind | uvarint seen | ...
const (
	keyedMark  = 1 << 41
	madeMark   = 1 << 42
	roomMark   = 1 << 43
	callerMark = 1 << 44
	aheadMark  = 1 << 45
	behindMark = 1 << 46
)

// journalRecord is a decoded journal record.
type journalRecord struct {
	at     time.Time
	hashes []userfilter.Hash
	reply  *reply // a keyed call's answer; nil: none
	made   []byte // an empty filter of the user's profile, encoded; nil: none
	room   int    // the room the cap left the call; -1: none noted
}

// appendJournal appends the record of hashes recorded at to dst[:0], with
// the answer r of a keyed call (nil: none), made, the user's profile as an
// empty filter encoded (nil: none), and room, the room the cap left the
// call (< 0: no cap).
func appendJournal(dst []byte, at time.Time, hashes []userfilter.Hash, r *reply, made []byte, room int) []byte {
	b := slices.Grow(dst[:0], 3*binary.MaxVarintLen64+len(made)+16*len(hashes))
	sec := uint64(at.Unix())
	if made != nil {
		sec |= madeMark
	}
	if room >= 0 {
		sec |= roomMark
	}
	if r != nil {
		sec |= keyedMark
		if r.caller != 0 {
			sec |= callerMark
		}
		if r.ahead != 0 {
			sec |= aheadMark
		}
		if r.behind != 0 {
			sec |= behindMark
		}
	}
	b = binary.AppendUvarint(b, sec)
	if made != nil {
		b = binary.AppendUvarint(b, uint64(len(made)))
		b = append(b, made...)
	}
	if room >= 0 {
		// Room for more than the call's items lets them all in: no need
		// to spend bytes on the rest.
		b = binary.AppendUvarint(b, uint64(min(room, len(hashes))))
	}
	if r != nil {
		for _, x := range []xxh3.Uint128{r.id, r.request} {
			b = binary.LittleEndian.AppendUint64(b, x.Hi)
			b = binary.LittleEndian.AppendUint64(b, x.Lo)
		}
		if r.caller != 0 {
			b = binary.LittleEndian.AppendUint64(b, r.caller)
		}
		if r.ahead != 0 {
			b = binary.AppendUvarint(b, r.ahead)
		}
		if r.behind != 0 {
			b = binary.AppendUvarint(b, r.behind)
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

// decodeJournal reads a record.
func decodeJournal(b []byte) (journalRecord, error) {
	rec := journalRecord{room: -1}
	sec, n := binary.Uvarint(b)
	if n <= 0 {
		return rec, errBadJournal
	}
	b = b[n:]
	if sec&madeMark != 0 {
		sec &^= madeMark
		l, n := binary.Uvarint(b)
		if n <= 0 || l == 0 || l > uint64(len(b)-n) {
			return rec, errBadJournal
		}
		rec.made, b = b[n:n+int(l)], b[n+int(l):]
	}
	if sec&roomMark != 0 {
		sec &^= roomMark
		v, n := binary.Uvarint(b)
		if n <= 0 || v > 1<<31 {
			return rec, errBadJournal
		}
		rec.room, b = int(v), b[n:]
	}
	if sec&keyedMark != 0 {
		caller, ahead, behind := sec&callerMark != 0, sec&aheadMark != 0, sec&behindMark != 0
		sec &^= keyedMark | callerMark | aheadMark | behindMark
		var err error
		if rec.reply, b, err = decodeReply(b, caller, ahead, behind); err != nil {
			return rec, err
		}
	}
	if len(b)%16 != 0 || sec > 1<<40 {
		return rec, errBadJournal
	}
	rec.hashes = make([]userfilter.Hash, len(b)/16)
	for i := range rec.hashes {
		rec.hashes[i] = userfilter.Hash{Lo: binary.LittleEndian.Uint64(b[16*i:]), Hi: binary.LittleEndian.Uint64(b[16*i+8:])}
	}
	rec.at = time.Unix(int64(sec), 0)
	if rec.reply != nil {
		rec.reply.at = rec.at.Add(time.Duration(rec.reply.ahead)*time.Second - time.Duration(rec.reply.behind)*time.Second)
	}
	return rec, nil
}

// decodeReply reads a keyed record's answer, which names its caller if
// caller and how far its stamp is ahead if ahead, or behind if behind, and
// returns the rest of b.
func decodeReply(b []byte, caller, ahead, behind bool) (*reply, []byte, error) {
	if len(b) < 32 {
		return nil, nil, errBadJournal
	}
	r := &reply{
		id:      xxh3.Uint128{Hi: binary.LittleEndian.Uint64(b), Lo: binary.LittleEndian.Uint64(b[8:])},
		request: xxh3.Uint128{Hi: binary.LittleEndian.Uint64(b[16:]), Lo: binary.LittleEndian.Uint64(b[24:])},
	}
	b = b[32:]
	if caller {
		if len(b) < 8 {
			return nil, nil, errBadJournal
		}
		r.caller, b = binary.LittleEndian.Uint64(b), b[8:]
	}
	if ahead && behind {
		return nil, nil, errBadJournal
	}
	if ahead || behind {
		v, n := binary.Uvarint(b)
		if n <= 0 || v == 0 || v > 1<<40 {
			return nil, nil, errBadJournal
		}
		if ahead {
			r.ahead = v
		} else {
			r.behind = v
		}
		b = b[n:]
	}
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
