package api

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zeebo/xxh3"
)

// An answer is given again until its time to live has passed; answers
// leave the budget least recently used first; a call in flight takes
// room too, and a call abandoned leaves none behind.
func TestReplaysTTLAndBudget(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	r := newReplays(3*(replayOverhead+1+10), time.Minute, func() time.Time { return now })
	req := func(s string) xxh3.Uint128 { return xxh3.HashString128(s) }
	answer := []byte("0123456789")
	for _, k := range []string{"a", "b", "c"} {
		p, st := r.begin(k, req(k))
		if st != replayNew {
			t.Fatalf("%s: first begin %v, want new", k, st)
		}
		r.finish(k, p, 200, answer, false, time.Time{})
	}
	if n, b := r.usage(); n != 3 || b != 3*(replayOverhead+1+10) {
		t.Fatalf("usage %d answers in %d bytes", n, b)
	}
	if _, st := r.begin("a", req("a")); st != replayDone { // a is now the most recently used
		t.Fatalf("a: %v, want done", st)
	}
	if _, st := r.begin("a", req("other")); st != replayMismatch {
		t.Fatalf("a with another request: %v, want mismatch", st)
	}
	p, st := r.begin("d", req("d")) // over budget: b, the least recently used, leaves
	if st != replayNew {
		t.Fatalf("d: %v", st)
	}
	if _, st := r.begin("d", req("d")); st != replayBusy {
		t.Fatalf("d in flight: %v, want busy", st)
	}
	r.abandon("d", p)
	if _, st := r.begin("b", req("b")); st != replayNew {
		t.Fatalf("b after d came: %v, want new (trimmed)", st)
	}
	if _, st := r.begin("a", req("a")); st != replayDone {
		t.Fatalf("a after d came: %v, want done", st)
	}
	now = now.Add(time.Minute)
	if _, st := r.begin("a", req("a")); st != replayNew {
		t.Fatalf("a a minute later: %v, want new (expired)", st)
	}
	if r.replayed.Load() != 2 {
		t.Fatalf("%d replays counted, want 2", r.replayed.Load())
	}
}

// An answer larger than the whole budget is not kept, and the answers kept
// stay: kept, it would be the most recently used, and trimming to the
// budget would drop every other answer before it, then it too.
func TestReplaysAnswerLargerThanTheBudgetTakesNoOther(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	budget := int64(3 * (replayOverhead + 1 + 10))
	r := newReplays(budget, time.Minute, func() time.Time { return now })
	req := func(s string) xxh3.Uint128 { return xxh3.HashString128(s) }
	for _, k := range []string{"a", "b"} {
		p, _ := r.begin(k, req(k))
		r.finish(k, p, 200, []byte("0123456789"), false, time.Time{})
	}
	p, st := r.begin("big", req("big"))
	if st != replayNew {
		t.Fatalf("big: %v, want new", st)
	}
	r.finish("big", p, 200, make([]byte, budget), false, time.Time{})
	for _, k := range []string{"a", "b"} {
		if _, st := r.begin(k, req(k)); st != replayDone {
			t.Errorf("%s after an answer larger than the budget: %v, want done (still kept)", k, st)
		}
	}
	if _, st := r.begin("big", req("big")); st != replayNew {
		t.Errorf("big: %v, want new (not kept)", st)
	}
	if n := r.restore([]keptAnswer{{Key: "big2", Request: req("big2"), Status: 200, Body: make([]byte, budget), At: now}}, time.Time{}); n != 0 {
		t.Errorf("restore kept %d answers larger than the budget, want 0", n)
	}
	if _, st := r.begin("a", req("a")); st != replayDone {
		t.Errorf("a after restoring an answer larger than the budget: %v, want done", st)
	}
}

// A batch's answer that holds a user's failure is begun again by its
// retry (resume), with the answer as the retry's prior: a twin meanwhile is
// refused (busy), a retry that fails keeps the answer again, and one that
// is answered replaces it.
func TestReplaysResumeABatchWithAFailedUser(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	r := newReplays(1<<20, time.Minute, func() time.Time { return now })
	const key = "\x00/v1/namespaces/default/filter\x00k"
	req := xxh3.HashString128("batch")
	failed := []byte(`{"results":[{"user":"a","unseen":["x"]},{"user":"b","error":{}}]}`)
	p, _ := r.begin(key, req)
	r.finish(key, p, 200, failed, true, time.Time{})
	_, bytesKept := r.usage()
	q, st := r.begin(key, req)
	if st != replayResume || q.prior == nil || string(q.prior.body) != string(failed) {
		t.Fatalf("the retry of a batch with a failed user: %v, want resume with the kept answer", st)
	}
	if _, st := r.begin(key, req); st != replayBusy {
		t.Fatalf("its twin: %v, want busy", st)
	}
	r.abandon(key, q)
	if n, b := r.usage(); n != 1 || b != bytesKept {
		t.Fatalf("after the retry failed: %d answers in %d bytes, want the answer kept again (%d bytes)", n, b, bytesKept)
	}
	q, st = r.begin(key, req)
	if st != replayResume || string(q.prior.body) != string(failed) {
		t.Fatalf("the retry after a failed retry: %v, want resume with the kept answer", st)
	}
	served := []byte(`{"results":[{"user":"a","unseen":["x"]},{"user":"b","unseen":["x"]}]}`)
	r.finish(key, q, 200, served, false, time.Time{})
	if p, st := r.begin(key, req); st != replayDone || string(p.body) != string(served) || p.prior != nil {
		t.Fatalf("the retry once every user was served: %v, want done with the served answer", st)
	}
	// Read back, the answer tells the same (restore reads failed from it).
	r2 := newReplays(1<<20, time.Minute, func() time.Time { return now })
	if n := r2.restore([]keptAnswer{{Key: key, Request: req, Status: 200, Body: failed, At: now},
		{Key: key, Request: req, Status: 200, Body: served, At: now.Add(time.Second)}}, time.Time{}); n != 1 {
		t.Fatalf("restored %d answers, want the later of the key's two", n)
	}
	if p, st := r2.begin(key, req); st != replayDone || string(p.body) != string(served) {
		t.Fatalf("after a restore: %v, want done with the later answer", st)
	}
	// The later in the log wins, whatever a clock stepped back between
	// the two made its time.
	r2 = newReplays(1<<20, time.Minute, func() time.Time { return now })
	r2.restore([]keptAnswer{{Key: key, Request: req, Status: 200, Body: failed, At: now},
		{Key: key, Request: req, Status: 200, Body: served, At: now.Add(-time.Second)}}, time.Time{})
	if p, st := r2.begin(key, req); st != replayDone || string(p.body) != string(served) {
		t.Fatalf("after a restore whose later answer has an earlier time: %v, want done with the later answer", st)
	}
	r3 := newReplays(1<<20, time.Minute, func() time.Time { return now })
	r3.restore([]keptAnswer{{Key: key, Request: req, Status: 200, Body: failed, At: now}}, time.Time{})
	if _, st := r3.begin(key, req); st != replayResume {
		t.Fatalf("a restored answer with a failed user: %v, want resume", st)
	}
}

// A kept answer ages from the clock's reading when it was given, not from
// its stamp: once the wall clock has stepped back, an answer is stamped at
// the latest one's time (stampLocked), and aged from that stamp it lived
// as much longer (or shorter) than its time to live as the step. One read
// back from before a restart whose stamp is ahead of the clock (stepped
// back since) lives its time to live from the read, not that plus the
// step.
func TestReplaysAgeFromTheirReadingNotTheirStamp(t *testing.T) {
	base := time.Now()
	now := base.Add(time.Hour)
	r := newReplays(1<<20, time.Minute, func() time.Time { return now })
	req := func(s string) xxh3.Uint128 { return xxh3.HashString128(s) }
	p, _ := r.begin("before", req("before"))
	r.finish("before", p, 200, []byte("{}"), false, time.Time{})
	now = base // the clock steps back an hour
	p, _ = r.begin("after", req("after"))
	r.finish("after", p, 200, []byte("{}"), false, time.Time{})
	r.restore([]keptAnswer{{Key: "read", Request: req("read"), Status: 200, Body: []byte("{}"),
		At: base.Add(time.Hour).Round(0)}}, time.Time{}) // a wall time, as read back
	now = base.Add(59 * time.Second)
	for _, k := range []string{"after", "read"} {
		if _, st := r.begin(k, req(k)); st != replayDone {
			t.Fatalf("%s 59 s after it was given: %v, want done", k, st)
		}
	}
	now = base.Add(time.Minute)
	for _, k := range []string{"after", "read"} {
		if _, st := r.begin(k, req(k)); st != replayNew {
			t.Errorf("%s a minute after it was given (read back): %v, want new (past its time to live)", k, st)
		}
	}
}

// The budget is shared between callers: past it, the answer that goes is
// the least recently used of the caller whose answers take the most, so
// one caller's burst of keyed calls pushes out its own older answers, not
// another's; two callers that keep calling end with even shares.
func TestReplaysBudgetIsSharedBetweenCallers(t *testing.T) {
	now := time.Now()
	key := func(caller string, i int) string {
		return fmt.Sprintf("%s\x00/v1/namespaces/default/users/u/filter\x00k-%03d", caller, i)
	}
	size := int64(replayOverhead + len(key("A", 0)) + 10)
	r := newReplays(10*size, time.Minute, func() time.Time { return now })
	req := func(s string) xxh3.Uint128 { return xxh3.HashString128(s) }
	give := func(caller string, from, to int) {
		for i := from; i < to; i++ {
			k := key(caller, i)
			p, st := r.begin(k, req(k))
			if st != replayNew {
				t.Fatalf("%q: first begin %v, want new", k, st)
			}
			r.finish(k, p, 200, []byte("0123456789"), false, time.Time{})
		}
	}
	kept := func(caller string, n int) (out []int) {
		for i := range n {
			if p, ok := r.lru.Peek(key(caller, i)); ok && p.done {
				out = append(out, i)
			}
		}
		return out
	}
	give("B", 0, 3)
	give("A", 0, 100) // a burst: A's own older answers go
	if got := kept("B", 3); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("after A's burst, B's answers kept: %v, want all three", got)
	}
	if got := kept("A", 100); !slices.Equal(got, []int{93, 94, 95, 96, 97, 98, 99}) {
		t.Fatalf("after A's burst, A's answers kept: %v, want its last 7", got)
	}
	give("B", 3, 100) // B keeps calling too: even shares
	if a, b := len(kept("A", 100)), len(kept("B", 100)); a != 5 || b != 5 {
		t.Fatalf("after both bursts, A keeps %d answers and B %d; want 5 each", a, b)
	}
	// An answer given again is its caller's most recently used.
	if _, st := r.begin(key("A", 95), req(key("A", 95))); st != replayDone {
		t.Fatalf("A's answer 95: %v, want done", st)
	}
	give("A", 100, 101)
	if got := kept("A", 101); !slices.Equal(got, []int{95, 97, 98, 99, 100}) {
		t.Fatalf("A's answers kept: %v, want 95 (given again) and its last 4", got)
	}
	if n, b := r.usage(); n != 10 || b != 10*size {
		t.Fatalf("usage %d answers in %d bytes, want 10 in %d", n, b, 10*size)
	}
}
