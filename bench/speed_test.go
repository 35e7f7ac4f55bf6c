package bench

import (
	"testing"
	"time"
)

func TestSpeedOfFindsSlowSlotsByTheirMeanPiece(t *testing.T) {
	us := time.Microsecond
	fast := []time.Duration{20 * us, 21 * us, 20 * us, 22 * us}
	// Slot 2: most pieces run at full speed, one fell into a 3 ms gap: the
	// median would miss it, the mean does not.
	gap := []time.Duration{20 * us, 20 * us, 3000 * us, 21 * us}
	// Slot 4: every piece a little slow, under slowFactor.
	mild := []time.Duration{30 * us, 31 * us, 29 * us, 30 * us}
	sp := speedOf([][]time.Duration{fast, fast, gap, fast, mild, fast, fast, fast, fast, fast}, make([]time.Duration, 10))
	if len(sp.Slowdown) != 10 {
		t.Fatalf("slowdown has %d slots, want 10", len(sp.Slowdown))
	}
	for i, f := range sp.Slowdown {
		slow := f >= slowFactor
		if slow != (i == 2) {
			t.Errorf("slot %d: slowdown %.2f, slowed %v; want only slot 2 slowed", i, f, slow)
		}
	}
	if sp.Slowdown[2] < 30 {
		t.Errorf("slot 2 slowdown %.1f, want the gap's ~38x", sp.Slowdown[2])
	}
	if sp.Slowed != 0.1 {
		t.Errorf("slowed fraction %v, want 0.1", sp.Slowed)
	}
	// A call waits behind a slowdown from the slot before it to calmSlots after.
	for i := range 10 {
		want := i >= 1 && i <= 2+calmSlots
		if got := sp.disturbed(i); got != want {
			t.Errorf("disturbed(%d) = %v, want %v", i, got, want)
		}
	}
	if empty := speedOf(nil, nil); empty.Slowed != 0 || len(empty.Slowdown) != 0 {
		t.Errorf("no pieces: %+v, want zero", empty)
	}
}

// Steal the guest kernel counted slows a slot whose pieces ran at full
// speed (the kernel leaves the stolen time out of the thread's CPU time).
func TestSpeedOfCountsStealAsSlowed(t *testing.T) {
	us := time.Microsecond
	fast := []time.Duration{20 * us, 21 * us, 20 * us}
	steal := make([]time.Duration, 8)
	steal[5] = 10 * time.Millisecond
	sp := speedOf([][]time.Duration{fast, fast, fast, fast, fast, fast, fast, fast}, steal)
	for i := range 8 {
		if got, want := sp.slowed(i), i == 5; got != want {
			t.Errorf("slot %d slowed = %v, want %v", i, got, want)
		}
	}
	if sp.Slowed != 1.0/8 {
		t.Errorf("slowed fraction %v, want 1/8", sp.Slowed)
	}
	if !sp.disturbed(4) || !sp.disturbed(7) || sp.disturbed(3) {
		t.Errorf("disturbed(3,4,7) = %v %v %v, want false true true", sp.disturbed(3), sp.disturbed(4), sp.disturbed(7))
	}
}

func TestSpeedProbeTimesPiecesInItsSlots(t *testing.T) {
	p := StartSpeedProbe(time.Now())
	time.Sleep(350 * time.Millisecond)
	sp := p.Stop()
	if len(sp.Slowdown) < 3 {
		t.Fatalf("%d slots after 350 ms, want at least 3", len(sp.Slowdown))
	}
	for i, f := range sp.Slowdown[:3] {
		if f <= 0 {
			t.Errorf("slot %d has no piece (slowdown %v)", i, f)
		}
	}
}
