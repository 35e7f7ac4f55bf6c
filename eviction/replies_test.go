package eviction

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/userfilter"
	"github.com/zeebo/xxh3"
)

func callKey(id, request string) CallKey {
	return CallKey{ID: xxh3.HashString128(id), Request: xxh3.HashString128(request)}
}

func candidates(n int) []string {
	c := make([]string, n)
	for i := range c {
		c[i] = fmt.Sprintf("item-%03d", i)
	}
	return c
}

// A keyed call's answer outlives a crash with the items it recorded: its
// retry gets that answer and records nothing, while the same key with
// another request, and any call without it, are served anew.
func TestKeyedCallIsAnsweredAgainAfterACrash(t *testing.T) {
	fx := newFixture(t, Options{})
	cands := candidates(50)
	k := callKey("caller\x00/u/filter\x00key-1", "body-1")
	first, err := fx.h.FilterKeyed(nil, "default", "u", cands, 20, userfilter.RecordReturned, k)
	if err != nil || first.Replayed || len(first.Unseen) != 20 || first.Recorded != 20 {
		t.Fatalf("first call: %+v, %v", first, err)
	}
	first.Unseen = slices.Clone(first.Unseen)
	// The same key on the same hot set is the API's to answer (it keeps
	// the answer in memory): the hot set serves it anew, as a new call.
	fx.restart(false, Options{})

	// A batch checks its keys first, its users still cold.
	other := k
	other.Request = xxh3.HashString128("body-2")
	users := []string{"nobody", "u"}
	if _, err := fx.h.CheckCallKeys("default", users, []CallKey{callKey("x", "y"), other}); !errors.Is(err, ErrCallKeyReused) {
		t.Fatalf("CheckCallKeys with a reused key: %v", err)
	}
	again, err := fx.h.FilterKeyed(nil, "default", "u", cands, 20, userfilter.RecordReturned, k)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || !slices.Equal(again.Unseen, first.Unseen) || again.SeenCount != first.SeenCount ||
		again.Recorded != first.Recorded || again.Saturated != first.Saturated {
		t.Fatalf("retry after the crash: %+v, first answer %+v", again, first)
	}
	st, err := fx.h.User("default", "u")
	if err != nil || st.Items != 20 {
		t.Fatalf("after the retry the user holds %d items (%v), want the first call's 20", st.Items, err)
	}

	if _, err := fx.h.FilterKeyed(nil, "default", "u", cands, 20, userfilter.RecordReturned, other); !errors.Is(err, ErrCallKeyReused) {
		t.Fatalf("same key, another request: %v", err)
	}
	if _, err := fx.h.CheckCallKeys("default", users, []CallKey{callKey("x", "y"), k}); err != nil {
		t.Fatalf("CheckCallKeys: %v", err)
	}
	next, err := fx.h.FilterKeyed(nil, "default", "u", cands, 20, userfilter.RecordReturned, callKey("caller\x00/u/filter\x00key-2", "body-1"))
	if err != nil || next.Replayed || len(next.Unseen) != 20 || slices.Contains(next.Unseen, first.Unseen[0]) {
		t.Fatalf("a new key after the crash: %+v, %v", next, err)
	}
}

// An answer is given for the time to live after its call only, and the
// answers read back take no more than their budget.
func TestKeyedAnswersReadBackHaveATimeAndABudget(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	fx := newFixture(t, Options{Now: clock, ReplyTTL: time.Minute})
	cands := candidates(30)
	for u := range 3 {
		k := callKey(fmt.Sprint("key-", u), "body")
		if _, err := fx.h.FilterKeyed(nil, "default", fmt.Sprint("u", u), cands, 10, userfilter.RecordReturned, k); err != nil {
			t.Fatal(err)
		}
	}
	fx.restart(false, Options{Now: clock, ReplyTTL: time.Minute})
	now = now.Add(61 * time.Second)
	res, err := fx.h.FilterKeyed(nil, "default", "u0", cands, 10, userfilter.RecordReturned, callKey("key-0", "body"))
	if err != nil || res.Replayed || len(res.Unseen) != 10 || slices.Contains(res.Unseen, cands[0]) {
		t.Fatalf("a retry past the time to live is a new call: %+v, %v", res, err)
	}

	// A budget of one answer keeps the last one read back.
	now = now.Add(-61 * time.Second)
	one := int64(replyOverhead + 40 + len("u2")) // 10 indexes, and the user's id
	fx.restart(false, Options{Now: clock, ReplyTTL: time.Minute, ReplyBytes: one})
	for u := range 3 {
		if _, err := fx.h.User("default", fmt.Sprint("u", u)); err != nil {
			t.Fatal(err)
		}
	}
	if n, bytes := fx.h.replies.usage(); n != 1 || bytes != one {
		t.Fatalf("kept %d answers of %d bytes, want 1 of %d", n, bytes, one)
	}
	res, err = fx.h.FilterKeyed(nil, "default", "u2", cands, 10, userfilter.RecordReturned, callKey("key-2", "body"))
	if err != nil || !res.Replayed {
		t.Fatalf("the answer kept: %+v, %v", res, err)
	}
}

// An answer read back that is larger than the whole budget is not kept,
// and the answers kept stay: kept, it would be the most recently used, and
// trimming to the budget would drop every other one before it, then it.
func TestKeyedAnswerReadBackLargerThanTheBudgetTakesNoOther(t *testing.T) {
	small := int64(replyOverhead + 40 + len("u0")) // 10 indexes, and the user's id
	opts := Options{ReplyBytes: 2 * small}
	fx := newFixture(t, opts)
	cands := candidates(200)
	for _, u := range []string{"u0", "u1"} {
		if _, err := fx.h.FilterKeyed(nil, "default", u, cands, 10, userfilter.RecordReturned, callKey("key-"+u, "body")); err != nil {
			t.Fatal(err)
		}
	}
	// 200 indexes: larger than the budget alone.
	if _, err := fx.h.FilterKeyed(nil, "default", "big", cands, 0, userfilter.RecordReturned, callKey("key-big", "body")); err != nil {
		t.Fatal(err)
	}
	fx.restart(false, opts)
	for _, u := range []string{"u0", "u1", "big"} { // big read back last
		if _, err := fx.h.User("default", u); err != nil {
			t.Fatal(err)
		}
	}
	if n, b := fx.h.replies.usage(); n != 2 || b != 2*small {
		t.Errorf("kept %d answers of %d bytes, want 2 of %d", n, b, 2*small)
	}
	for _, u := range []string{"u0", "u1"} {
		res, err := fx.h.FilterKeyed(nil, "default", u, cands, 10, userfilter.RecordReturned, callKey("key-"+u, "body"))
		if err != nil || !res.Replayed {
			t.Errorf("%s's retry after an answer larger than the budget was read back: %+v, %v, want its answer again", u, res, err)
		}
	}
}

// The record of a keyed call, with or without the user's profile (and
// with the room its cap left it), reads back as it was written, and no
// byte string read as one panics: each is a record or errBadJournal.
func TestKeyedJournalRecordRoundTrip(t *testing.T) {
	at := time.Unix(1_795_000_000, 0)
	hs := []userfilter.Hash{{Lo: 1, Hi: 2}, {Lo: 3, Hi: 4}}
	r := &reply{id: xxh3.HashString128("id"), request: xxh3.HashString128("req"), seen: 7, recorded: 2,
		saturated: true, unseen: []int32{0, 5, 199}}
	made, err := emptyEncoding(userfilter.Profile{Kind: userfilter.KindBloom, MaxItems: 10}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, m := range [][]byte{nil, made} {
		b = appendJournal(nil, at, hs, r, m, 1) // the room of a capped user's call
		got, err := decodeJournal(b)
		if err != nil || !got.at.Equal(at) || !slices.Equal(got.hashes, hs) || got.room != 1 || got.reply == nil ||
			got.reply.id != r.id || got.reply.request != r.request || got.reply.seen != 7 || got.reply.recorded != 2 ||
			!got.reply.saturated || !slices.Equal(got.reply.unseen, r.unseen) || !got.reply.at.Equal(at) ||
			!bytes.Equal(got.made, m) {
			t.Fatalf("keyed record (profile %d bytes): %+v %v", len(m), got, err)
		}
		plain := appendJournal(nil, at, hs, nil, m, -1)
		if got, err := decodeJournal(plain); err != nil || got.reply != nil || !slices.Equal(got.hashes, hs) || got.room != -1 ||
			!bytes.Equal(got.made, m) {
			t.Fatalf("plain record (profile %d bytes): %+v %v", len(m), got, err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		c := slices.Clone(b)
		switch rng.IntN(3) {
		case 0:
			c = c[:rng.IntN(len(c))]
		case 1:
			c[rng.IntN(len(c))] ^= byte(1 + rng.IntN(255))
		default:
			c = make([]byte, rng.IntN(80))
			for i := range c {
				c[i] = byte(rng.Uint32())
			}
			if len(c) > 0 {
				c[0] |= 0x80 // long enough a time to be keyed, now and then
			}
		}
		if rec, err := decodeJournal(c); err == nil && rec.reply != nil {
			r := rec.reply
			for i := 1; i < len(r.unseen); i++ {
				if r.unseen[i] <= r.unseen[i-1] {
					t.Fatalf("indexes read back out of order: %v", r.unseen)
				}
			}
		} else if err != nil && !errors.Is(err, errBadJournal) {
			t.Fatalf("error %v", err)
		}
	}
}

// Erasing a user forgets the answers its journal gave back after a crash:
// a keyed call's retry after the erase is served anew, for the user who
// starts afresh (its items recorded), not given the erased history with
// nothing recorded. Another user's answer stays.
func TestForgetDropsTheAnswersReadBackFromTheJournal(t *testing.T) {
	fx := newFixture(t, Options{})
	cands := candidates(10)
	ku, kv := callKey("caller\x00/u/filter\x00key-1", "body-1"), callKey("caller\x00/v/filter\x00key-1", "body-1")
	for user, k := range map[string]CallKey{"u": ku, "v": kv} {
		if _, err := fx.h.FilterKeyed(nil, "default", user, cands, 4, userfilter.RecordReturned, k); err != nil {
			t.Fatal(err)
		}
	}
	fx.restart(false, Options{}) // a crash: the answers are in the journal only
	for _, user := range []string{"u", "v"} {
		if _, err := fx.h.User("default", user); err != nil { // loaded: the answers read back
			t.Fatal(err)
		}
	}
	if err := fx.h.Forget("default", "u"); err != nil {
		t.Fatal(err)
	}
	res, err := fx.h.FilterKeyed(nil, "default", "u", cands, 4, userfilter.RecordReturned, ku)
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed || res.Recorded != 4 {
		t.Fatalf("a retry after the user was erased: %+v; want it served anew, 4 items recorded", res)
	}
	if st, err := fx.h.User("default", "u"); err != nil || st.Items != 4 {
		t.Fatalf("after the retry the user holds %+v, %v; want 4 items", st, err)
	}
	if res, err := fx.h.FilterKeyed(nil, "default", "v", cands, 4, userfilter.RecordReturned, kv); err != nil || !res.Replayed {
		t.Fatalf("another user's retry: %+v, %v; want its answer given again", res, err)
	}
}

// A keyed call's journal record keeps its answer for a flush interval
// after the call, however long its user was changed before it: the API
// writes its answers to their own log within that interval (see
// Options.FlushInterval), and until then a crash leaves the answer in the
// journal alone. A write-back due for an earlier change, just after the
// call, would retire the record, and the call's retry after a crash would
// be served anew, recording the next items. The record goes with the
// user's next write-back.
func TestKeyedRecordOutlivesAWriteBackDueJustAfterItsCall(t *testing.T) {
	var now atomic.Int64
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return start.Add(time.Duration(now.Load())) }
	set := func(d time.Duration) { now.Store(int64(d)) }
	opts := Options{Now: clock, FlushInterval: time.Second}
	fx := newFixture(t, opts)
	cands := candidates(10)
	// A user changed at from, called with a key 990 ms later; 20 ms
	// after the call, the write-back loop (every 5 ms) finds it due.
	keyed := func(user string, from time.Duration) (Result, CallKey) {
		t.Helper()
		set(from)
		record(t, fx.h, "default", user, "earlier")
		set(from + 990*time.Millisecond)
		k := callKey("caller\x00/"+user+"/filter\x00key-1", "body-1")
		res, err := fx.h.FilterKeyed(nil, "default", user, cands, 3, userfilter.RecordReturned, k)
		if err != nil || len(res.Unseen) != 3 {
			t.Fatalf("the keyed call: %+v, %v", res, err)
		}
		res.Unseen = slices.Clone(res.Unseen)
		flushed := fx.h.Stats().FlushedUsers
		set(from + 1010*time.Millisecond)
		for deadline := time.Now().Add(5 * time.Second); fx.h.Stats().FlushedUsers == flushed; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s was not written back", user)
			}
		}
		return res, k
	}
	journal := func(user string) int { return fx.journalLen("default", user) }

	first, k := keyed("u", 0)
	fx.restart(false, opts) // a crash
	again, err := fx.h.FilterKeyed(nil, "default", "u", cands, 3, userfilter.RecordReturned, k)
	if err != nil || !again.Replayed || !slices.Equal(again.Unseen, first.Unseen) {
		t.Fatalf("the retry after a crash 20 ms after the call: %+v, %v; want the first answer %v, replayed",
			again, err, first.Unseen)
	}

	keyed("v", 2*time.Second)
	if n := journal("v"); n == 0 {
		t.Fatalf("the keyed call's record went with the write-back 20 ms after it")
	}
	set(5 * time.Second) // a flush interval after the write-back that kept it
	for deadline := time.Now().Add(5 * time.Second); journal("v") > 0 || fx.h.Stats().DirtyUsers > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a flush interval after the keyed call, its user still has %d journal records", journal("v"))
		}
	}
}

// An evicted user is written back at once, but one with a keyed call's
// journal record made within the hold of a hot user's (see keyedHold)
// waits for it to pass: the API writes the call's answer to its own log
// within that time, and until then a crash leaves the answer in the
// journal alone. Written at once, the record was retired, and a crash
// just after it made the call's retry be served anew, recording the next
// items. With a budget that holds a single user, every call evicts the
// one before; the clock stands still but where the test moves it.
func TestKeyedRecordOutlivesTheEvictionOfItsUser(t *testing.T) {
	var now atomic.Int64
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	opts := Options{Now: func() time.Time { return start.Add(time.Duration(now.Load())) }, FlushInterval: time.Second, CacheBytes: 1}
	fx := newFixture(t, opts)
	cands := candidates(10)
	keyed := func(user string) (Result, CallKey) {
		t.Helper()
		k := callKey("caller\x00/"+user+"/filter\x00key-1", "body-1")
		res, err := fx.h.FilterKeyed(nil, "default", user, cands, 3, userfilter.RecordReturned, k)
		if err != nil || len(res.Unseen) != 3 {
			t.Fatalf("the keyed call: %+v, %v", res, err)
		}
		res.Unseen = slices.Clone(res.Unseen)
		return res, k
	}
	rounds := func(n uint64) { waitRounds(t, fx.h, n) }

	keyed("u")
	record(t, fx.h, "default", "v", "x") // evicts u
	rounds(3)
	if n := fx.journalLen("default", "u"); n == 0 {
		t.Errorf("the keyed call's record went with the write-back of its evicted user")
	}
	// Past the hold, the evicted user is written back and let go.
	keyed("w") // evicts v
	now.Store(int64(1100 * time.Millisecond))
	for deadline := time.Now().Add(10 * time.Second); fx.journalLen("default", "u") > 0 || fx.h.evictedBytes.Load() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("past the hold, the evicted user keeps %d journal records, evicted users %d bytes",
				fx.journalLen("default", "u"), fx.h.evictedBytes.Load())
		}
	}

	// So too for a user changed a flush interval before its keyed call,
	// which makes it due at once: written with the record held, it stays
	// until the hold is over.
	record(t, fx.h, "default", "x", "earlier")
	now.Store(int64(2200 * time.Millisecond))
	first, k := keyed("x")
	record(t, fx.h, "default", "y", "x") // evicts x
	rounds(3)
	fx.restart(false, opts) // a crash
	again, err := fx.h.FilterKeyed(nil, "default", "x", cands, 3, userfilter.RecordReturned, k)
	if err != nil || !again.Replayed || !slices.Equal(again.Unseen, first.Unseen) {
		t.Fatalf("the retry after a crash just after its user was evicted: %+v, %v; want the first answer %v, replayed",
			again, err, first.Unseen)
	}
	if st, err := fx.h.User("default", "x"); err != nil || st.Items != 4 {
		t.Fatalf("after the retry the user holds %+v, %v; want the 4 items of the first calls", st.Stats, err)
	}
}

// A merging import writes the user at once, but leaves a keyed call's
// record made within the hold in the journal, as a write-back does: a
// merge takes nothing from the user's history, and the record holds the
// call's answer until the API's log of answers does. Retired with the
// import, a crash just after it made the call's retry be served anew,
// recording the next items.
func TestKeyedRecordOutlivesAMergingImport(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	opts := Options{Now: func() time.Time { return start }} // the hold never passes
	fx := newFixture(t, opts)
	record(t, fx.h, "default", "src", "other")
	data, err := fx.h.Export("default", "src")
	if err != nil {
		t.Fatal(err)
	}
	cands := candidates(10)
	k := callKey("caller\x00/u/filter\x00key-1", "body-1")
	first, err := fx.h.FilterKeyed(nil, "default", "u", cands, 3, userfilter.RecordReturned, k)
	if err != nil || len(first.Unseen) != 3 {
		t.Fatalf("the keyed call: %+v, %v", first, err)
	}
	first.Unseen = slices.Clone(first.Unseen)
	if _, err := fx.h.Import("default", "u", data, false, 1<<20); err != nil {
		t.Fatal(err)
	}
	if n := fx.journalLen("default", "u"); n == 0 {
		t.Errorf("the keyed call's record went with the merging import")
	}
	fx.restart(false, opts) // a crash
	again, err := fx.h.FilterKeyed(nil, "default", "u", cands, 3, userfilter.RecordReturned, k)
	if err != nil || !again.Replayed || !slices.Equal(again.Unseen, first.Unseen) {
		t.Fatalf("the retry after a crash just after a merging import: %+v, %v; want the first answer %v, replayed",
			again, err, first.Unseen)
	}
	if seen, err := fx.h.Check("default", "u", []string{"other", first.Unseen[0]}, nil); err != nil || !slices.Equal(seen, []bool{true, true}) {
		t.Fatalf("after the retry: %v, %v; want the imported item and the call's seen", seen, err)
	}
	// Written back, the record goes.
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := fx.journalLen("default", "u"); n != 0 {
		t.Errorf("after a write-back the user keeps %d journal records", n)
	}
}

// A hot user written back with a keyed call's record held (see writeBack)
// and evicted before its next round keeps the record for the hold too:
// the evicted users are written at every round, and one written as if it
// had no keyed record retired it at once, the call's answer then in the
// API's memory only, so a crash right after made its retry be served anew.
func TestKeyedRecordHeldOutlivesTheLaterEvictionOfItsUser(t *testing.T) {
	var now atomic.Int64
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	opts := Options{Now: func() time.Time { return start.Add(time.Duration(now.Load())) }, FlushInterval: time.Second, CacheBytes: 1 << 20}
	fx := newFixture(t, opts)
	cands := candidates(10)
	rounds := func(n uint64) { waitRounds(t, fx.h, n) }

	// Changed a flush interval before its keyed call, the user is due at
	// once: the round writes it hot, leaving the keyed call's record.
	record(t, fx.h, "default", "x", "earlier")
	unlock := fx.h.lockForChange() // no round between the clock's move and the call
	now.Store(int64(1200 * time.Millisecond))
	k := callKey("caller\x00/x/filter\x00key-1", "body-1")
	first, err := fx.h.FilterKeyed(nil, "default", "x", cands, 3, userfilter.RecordReturned, k)
	unlock()
	if err != nil || len(first.Unseen) != 3 {
		t.Fatalf("the keyed call: %+v, %v", first, err)
	}
	first.Unseen = slices.Clone(first.Unseen)
	rounds(3)
	if n := fx.journalLen("default", "x"); n != 1 {
		t.Fatalf("after the write-back of the hot user, %d journal records; want the keyed call's", n)
	}
	// Evicted, as trimLocked evicts the least recently used.
	info, err := fx.h.namespace("default")
	if err != nil {
		t.Fatal(err)
	}
	kx := fx.h.key(info, "x", 0)
	s := fx.h.shardOf(kx)
	s.mu.Lock()
	e, ok := s.lru.Peek(kx)
	if ok {
		fx.h.evictLocked(s, kx, e)
	}
	s.mu.Unlock()
	if !ok {
		t.Fatal("the user is not hot")
	}
	rounds(3)
	if n := fx.journalLen("default", "x"); n != 1 {
		t.Errorf("the keyed call's record went with the write-back of its user evicted within the hold (%d records)", n)
	}
	fx.restart(false, opts) // a crash
	again, err := fx.h.FilterKeyed(nil, "default", "x", cands, 3, userfilter.RecordReturned, k)
	if err != nil || !again.Replayed || !slices.Equal(again.Unseen, first.Unseen) {
		t.Fatalf("the retry after a crash: %+v, %v; want the first answer %v, replayed", again, err, first.Unseen)
	}

	// The records left are retired once their hold is over, keyed calls
	// coming or not: a user called with keys without pause keeps no
	// longer a journal.
	keyed := func(n int) {
		t.Helper()
		k := callKey(fmt.Sprintf("caller\x00/z/filter\x00key-%d", n), "body")
		if _, err := fx.h.FilterKeyed(nil, "default", "z", cands, 1, userfilter.RecordReturned, k); err != nil {
			t.Fatal(err)
		}
	}
	at := func(ms int) { now.Store(int64(1200*time.Millisecond + time.Duration(ms)*time.Millisecond)) }
	record(t, fx.h, "default", "z", "earlier")
	unlock = fx.h.lockForChange()
	at(1100)
	keyed(1)
	unlock()
	rounds(3) // due: written, the record of key-1 left
	at(1600)
	keyed(2)
	at(2200) // the user due again; key-1's record past its hold, key-2's not
	rounds(3)
	if n := fx.journalLen("default", "z"); n != 1 {
		t.Fatalf("a round past key-1's hold left %d journal records; want key-2's only", n)
	}
	at(3300)
	rounds(3)
	if n := fx.journalLen("default", "z"); n != 0 {
		t.Fatalf("a round past every hold left %d journal records; want none", n)
	}
}

// waitRounds waits for n rounds of h's write-back loop.
func waitRounds(t *testing.T, h *HotSet, n uint64) {
	t.Helper()
	h.backlogMu.Lock()
	until := h.flushRounds + n
	h.backlogMu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		h.backlogMu.Lock()
		done := h.flushRounds >= until
		h.backlogMu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the write-back loop runs no round")
		}
	}
}

// An answer read back from the journal ages from the read, on the clock's
// readings, not from its record's stamp, a wall time: one stamped ahead of
// the clock (which has stepped back since the call) is given for its time
// to live from the read, not for that and the step.
func TestKeyedAnswerReadBackAgesFromTheRead(t *testing.T) {
	base := time.Now()
	var offset atomic.Int64
	offset.Store(int64(time.Hour))
	clock := func() time.Time { return base.Add(time.Duration(offset.Load())) }
	fx := newFixture(t, Options{Now: clock, ReplyTTL: time.Minute})
	cands := candidates(30)
	k := callKey("key", "body")
	if _, err := fx.h.FilterKeyed(nil, "default", "u", cands, 10, userfilter.RecordReturned, k); err != nil {
		t.Fatal(err)
	}
	offset.Store(0) // the clock steps back an hour
	fx.restart(false, Options{Now: clock, ReplyTTL: time.Minute})
	if _, err := fx.h.User("default", "u"); err != nil { // loads u, reading its answer back
		t.Fatal(err)
	}
	offset.Store(int64(59 * time.Second))
	if res, err := fx.h.FilterKeyed(nil, "default", "u", cands, 10, userfilter.RecordReturned, k); err != nil || !res.Replayed {
		t.Fatalf("the retry 59 s after the read: %+v, %v; want the answer read back", res, err)
	}
	offset.Store(int64(time.Minute))
	res, err := fx.h.FilterKeyed(nil, "default", "u", cands, 10, userfilter.RecordReturned, k)
	if err != nil || res.Replayed {
		t.Fatalf("the retry a minute after the read: %+v, %v; want a new call (stamped an hour ahead, the answer lived the hour too)", res, err)
	}
}

// The answers read back from the journal share their budget between
// callers: one API key's flood of keyed calls before a crash, read back as
// its retries load its users, pushes out its own older answers, not those
// of another key, read back before and retried after.
func TestKeyedAnswersReadBackShareTheBudgetBetweenCallers(t *testing.T) {
	size := int64(replyOverhead + 40 + len("a0")) // 10 indexes, and the user's id
	opts := Options{ReplyBytes: 4 * size}
	fx := newFixture(t, opts)
	cands := candidates(30)
	keyOf := func(caller uint64, user string) CallKey {
		k := callKey(fmt.Sprint(caller, "\x00/", user, "/filter\x00key"), "body")
		k.Caller = caller
		return k
	}
	const a, b = 1, 2
	if _, err := fx.h.FilterKeyed(nil, "default", "b0", cands, 10, userfilter.RecordReturned, keyOf(b, "b0")); err != nil {
		t.Fatal(err)
	}
	for u := range 10 {
		user := fmt.Sprint("a", u)
		if _, err := fx.h.FilterKeyed(nil, "default", user, cands, 10, userfilter.RecordReturned, keyOf(a, user)); err != nil {
			t.Fatal(err)
		}
	}
	fx.restart(false, opts)
	// B's user is loaded (by another of its calls, say), then A's retries
	// load each of A's users.
	if _, err := fx.h.User("default", "b0"); err != nil {
		t.Fatal(err)
	}
	for u := range 10 {
		user := fmt.Sprint("a", u)
		if res, err := fx.h.FilterKeyed(nil, "default", user, cands, 10, userfilter.RecordReturned, keyOf(a, user)); err != nil || !res.Replayed {
			t.Fatalf("A's retry on %s: %+v, %v; want its answer read back", user, res, err)
		}
	}
	res, err := fx.h.FilterKeyed(nil, "default", "b0", cands, 10, userfilter.RecordReturned, keyOf(b, "b0"))
	if err != nil || !res.Replayed {
		t.Fatalf("B's retry after A's: %+v, %v; want its answer read back (A's answers pushed it out)", res, err)
	}
	if n, bytes := fx.h.replies.usage(); n != 4 || bytes != 4*size {
		t.Errorf("kept %d answers of %d bytes, want 4 of %d", n, bytes, 4*size)
	}
}

// The keyed record of a build before store format 6, which names no
// caller, is read back after the upgrade as that build wrote it: the
// retry of its call, now sent with its caller known, gets its answer.
func TestKeyedRecordOfAnEarlierBuildIsAnsweredAfterTheUpgrade(t *testing.T) {
	fx := newFixture(t, Options{})
	cands := candidates(30)
	k := callKey("caller\x00/u/filter\x00key", "body")
	old := &reply{id: k.ID, request: k.Request, seen: 0, recorded: 2, unseen: []int32{3, 7}}
	hs := []userfilter.Hash{userfilter.HashItem(cands[3]), userfilter.HashItem(cands[7])}
	rec := appendJournal(nil, time.Now(), hs, old, nil, -1)
	if sec, _ := binary.Uvarint(rec); sec&callerMark != 0 || sec&keyedMark == 0 {
		t.Fatalf("the record %x is not a keyed record of format 5, which names no caller", rec)
	}
	if _, err := fx.st.Append("default", "u", rec, 0); err != nil {
		t.Fatal(err)
	}
	fx.restart(false, Options{})
	k.Caller = 42
	res, err := fx.h.FilterKeyed(nil, "default", "u", cands, 10, userfilter.RecordReturned, k)
	if err != nil || !res.Replayed || !slices.Equal(res.Unseen, []string{cands[3], cands[7]}) || res.Recorded != 2 {
		t.Fatalf("the retry of a call journaled by the earlier build: %+v, %v; want its answer %v", res, err, []string{cands[3], cands[7]})
	}
}
