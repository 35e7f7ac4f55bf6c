package bench

import (
	"os"
	"runtime"
	"sync"
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

func TestProcWaitedCountsThreadsWaitingForACore(t *testing.T) {
	self := os.Getpid()
	w0, err := ProcWaited(self)
	if err != nil {
		t.Fatal(err)
	}
	// One more spinning thread than there are cores: for 200 ms one of
	// them is always waiting.
	n := runtime.NumCPU() + 1
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n + 1))
	var wg sync.WaitGroup
	deadline := time.Now().Add(200 * time.Millisecond)
	for range n {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for x := uint64(1); time.Now().Before(deadline); x = x*6364136223846793005 + 1 {
			}
		})
	}
	wg.Wait()
	w1, err := ProcWaited(self)
	if err != nil {
		t.Fatal(err)
	}
	if got := w1 - w0; got < 40*time.Millisecond {
		t.Errorf("%d threads spinning for 200 ms on %d cores waited %v for a core in all; want about 200 ms", n, n-1, got)
	}
	if _, err := ProcWaited(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}

// The harness finds where its seenapi serves, which picks its own port,
// in the start line of either log format.
func TestServingAddrReadsTheStartLine(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`time=2026-11-28T14:00:00Z level=INFO msg="seenapi: serving" version=dev url=http://127.0.0.1:41234 data_dir=/tmp/d` + "\n", "127.0.0.1:41234"},
		{`{"time":"2026-11-28T14:00:00Z","level":"INFO","msg":"seenapi: serving","url":"https://127.0.0.1:8443","data_dir":"/tmp/d"}` + "\n", "127.0.0.1:8443"},
		{`time=2026-11-28T14:00:00Z level=INFO msg="seenapi: serving" version=dev url=http://[::1]:80`, "[::1]:80"},
		{`msg="seenapi: serving" data_dir=/tmp/d`, ""},
	} {
		if got := servingAddr(tc.line); got != tc.want {
			t.Errorf("servingAddr(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}
