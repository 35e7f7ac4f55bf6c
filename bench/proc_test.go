package bench

import (
	"testing"
	"time"
)

func TestMachineBusyCountsStealWithinBusy(t *testing.T) {
	busy0, steal0, err := MachineBusy()
	if err != nil {
		t.Fatal(err)
	}
	// Burn a little CPU so that the machine's busy time moves.
	deadline := time.Now().Add(50 * time.Millisecond)
	for x := uint64(1); time.Now().Before(deadline); x = x*6364136223846793005 + 1 {
	}
	busy1, steal1, err := MachineBusy()
	if err != nil {
		t.Fatal(err)
	}
	if busy0 <= 0 || steal0 < 0 || steal0 > busy0 {
		t.Fatalf("busy %v, steal %v: want 0 <= steal <= busy, busy > 0", busy0, steal0)
	}
	if busy1 < busy0 || steal1 < steal0 {
		t.Fatalf("went back: busy %v -> %v, steal %v -> %v", busy0, busy1, steal0, steal1)
	}
	if busy1 == busy0 {
		t.Fatalf("busy did not move after 50 ms of work: %v", busy1)
	}
}
