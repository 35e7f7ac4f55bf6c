package api

import (
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
		r.finish(k, p, 200, answer)
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
		r.finish(k, p, 200, []byte("0123456789"))
	}
	p, st := r.begin("big", req("big"))
	if st != replayNew {
		t.Fatalf("big: %v, want new", st)
	}
	r.finish("big", p, 200, make([]byte, budget))
	for _, k := range []string{"a", "b"} {
		if _, st := r.begin(k, req(k)); st != replayDone {
			t.Errorf("%s after an answer larger than the budget: %v, want done (still kept)", k, st)
		}
	}
	if _, st := r.begin("big", req("big")); st != replayNew {
		t.Errorf("big: %v, want new (not kept)", st)
	}
	if n := r.restore([]keptAnswer{{Key: "big2", Request: req("big2"), Status: 200, Body: make([]byte, budget), At: now}}); n != 0 {
		t.Errorf("restore kept %d answers larger than the budget, want 0", n)
	}
	if _, st := r.begin("a", req("a")); st != replayDone {
		t.Errorf("a after restoring an answer larger than the budget: %v, want done", st)
	}
}
