package bench

import (
	"errors"
	"testing"
	"time"
)

// checkOnce runs one checked call of the sampled user 0 of a one-user tracker.
func checkOnce(t *testing.T, tr *Tracker, candidates, unseen []string, limit int) error {
	t.Helper()
	u := tr.Lock(0)
	if u == nil {
		t.Fatal("rank 0 of a one-user tracker is not sampled")
	}
	return tr.Check(u, candidates, unseen, limit)
}

func TestTrackerCountsAShownItemReportedUnseenAsFalseNegative(t *testing.T) {
	tr := NewTracker(1, 1)
	if err := checkOnce(t, tr, []string{"a", "b"}, []string{"a", "b"}, 20); err != nil {
		t.Fatal(err)
	}
	if err := checkOnce(t, tr, []string{"a", "c"}, []string{"a", "c"}, 20); err != nil {
		t.Fatal(err)
	}
	if got := tr.Result().FalseNegatives; got != 1 {
		t.Errorf("false negatives = %d, want 1 (a was shown, then reported unseen)", got)
	}
}

func TestTrackerCountsANeverShownItemReportedSeenAsFalsePositive(t *testing.T) {
	tr := NewTracker(1, 1)
	if err := checkOnce(t, tr, []string{"a", "b", "c", "d"}, []string{"a", "c"}, 20); err != nil {
		t.Fatal(err)
	}
	r := tr.Result()
	if r.FalsePositives != 2 || r.NeverShown != 4 || r.FPRate != 0.5 {
		t.Errorf("fp = %d of %d (rate %v), want 2 of 4 (b and d passed over)", r.FalsePositives, r.NeverShown, r.FPRate)
	}
}

func TestTrackerIgnoresCandidatesPastTheLimit(t *testing.T) {
	tr := NewTracker(1, 1)
	// Limit 2 reached at "c": "d" and "e" were never classified.
	if err := checkOnce(t, tr, []string{"a", "b", "c", "d", "e"}, []string{"a", "c"}, 2); err != nil {
		t.Fatal(err)
	}
	r := tr.Result()
	if r.NeverShown != 3 || r.FalsePositives != 1 {
		t.Errorf("classified %d never-shown with %d false positives, want 3 and 1", r.NeverShown, r.FalsePositives)
	}
}

func TestTrackerRejectsAnAnswerThatIsNotASubsequence(t *testing.T) {
	for name, unseen := range map[string][]string{
		"stranger":     {"z"},
		"out of order": {"b", "a"},
		"over limit":   {"a", "b", "c"},
	} {
		tr := NewTracker(1, 1)
		err := checkOnce(t, tr, []string{"a", "b", "c"}, unseen, 2)
		if !errors.Is(err, ErrBadAnswer) {
			t.Errorf("%s: err = %v, want ErrBadAnswer", name, err)
		}
		if tr.Result().BadAnswers != 1 {
			t.Errorf("%s: bad answers = %d, want 1", name, tr.Result().BadAnswers)
		}
	}
}

func TestTrackerStopsCheckingAUserAfterAFailedCall(t *testing.T) {
	tr := NewTracker(1, 1)
	tr.Fail(tr.Lock(0))
	if err := checkOnce(t, tr, []string{"a"}, []string{"a"}, 20); err != nil {
		t.Fatal(err)
	}
	r := tr.Result()
	if r.TaintedUsers != 1 || r.Checks != 0 {
		t.Errorf("tainted %d, checks %d; want 1 and 0", r.TaintedUsers, r.Checks)
	}
}

func TestTrackerSamplesSpreadRanks(t *testing.T) {
	tr := NewTracker(10000, 1000)
	s := tr.Sampled()
	if len(s) != 1000 || s[0] != 5 || s[999] != 9995 {
		t.Errorf("sampled %d ranks from %d to %d, want 1000 from 5 to 9995", len(s), s[0], s[len(s)-1])
	}
	if tr.Lock(6) != nil {
		t.Error("rank 6 is reported sampled")
	}
}

func TestTrackerCountsAFalsePositiveOnce(t *testing.T) {
	tr := NewTracker(1, 1)
	for range 5 {
		// b is reported seen at every call, never shown.
		if err := checkOnce(t, tr, []string{"b", "x"}, nil, 20); err != nil {
			t.Fatal(err)
		}
	}
	r := tr.Result()
	if r.FalsePositives != 2 || r.NeverShown != 2 {
		t.Errorf("fp %d of %d, want 2 of 2: b and x count once each however often asked", r.FalsePositives, r.NeverShown)
	}
}

// manualClock is a clock the test moves by hand.
type manualClock struct{ t time.Time }

func (c *manualClock) Now() time.Time { return c.t }

func TestTrackerWithWindowExpectsExpiredItemsUnseen(t *testing.T) {
	clk := &manualClock{t: time.Unix(1e9, 0)}
	tr := NewTracker(1, 1)
	tr.SetWindow(clk.Now, 30*24*time.Hour, 24*time.Hour)
	if err := checkOnce(t, tr, []string{"a", "b"}, []string{"a", "b"}, 20); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(10 * 24 * time.Hour) // inside the window: a reported unseen is a false negative
	if err := checkOnce(t, tr, []string{"a"}, []string{"a"}, 20); err != nil {
		t.Fatal(err)
	}
	if got := tr.Result().FalseNegatives; got != 1 {
		t.Fatalf("false negatives = %d, want 1", got)
	}
	clk.t = clk.t.Add(20*24*time.Hour + 12*time.Hour) // b: 30.5 days, between window and window+granularity: not counted
	if err := checkOnce(t, tr, []string{"b"}, nil, 20); err != nil {
		t.Fatal(err)
	}
	if r := tr.Result(); r.NeverShown != 2 || r.FalsePositives != 0 {
		t.Fatalf("b in the grace period was counted: %+v", r)
	}
	clk.t = clk.t.Add(24 * time.Hour) // b: 31.5 days, past window+granularity, must test unseen; reported seen
	if err := checkOnce(t, tr, []string{"b"}, nil, 20); err != nil {
		t.Fatal(err)
	}
	if r := tr.Result(); r.NeverShown != 3 || r.FalsePositives != 1 || r.Expired != 1 || r.ExpiredSeen != 1 {
		t.Errorf("expired b reported seen: fp %d of %d, want 1 of 3 (a and b first, then b expired)", r.FalsePositives, r.NeverShown)
	}
}

func TestSimClockRunsFaster(t *testing.T) {
	c := NewSimClock(1000)
	t0 := c.Now()
	time.Sleep(10 * time.Millisecond)
	if d := c.Now().Sub(t0); d < 9*time.Second {
		t.Errorf("10ms at speed 1000 advanced %v, want about 10s", d)
	}
}
