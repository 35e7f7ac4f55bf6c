package storage

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// With MinFreeBytes set 64 MiB below the free space, writes succeed until
// the store has used about that much, then fail with ErrFull (found by the
// periodic free-space check), while reads go on.
func TestWritesStopWithErrFullAsTheDiskFills(t *testing.T) {
	if testing.Short() {
		t.Skip("writes up to 1 GiB")
	}
	if raceEnabled {
		// The free-space check running beside writes is raced in
		// TestAFullDiskWithoutAFloorTakesWritesOnceSpaceIsBack; filling
		// the margin with synced writes the race detector only slows.
		// test.sh runs it once, without -race, with the soak tests.
		t.Skip("fills the disk's margin: run without -race")
	}
	dir := t.TempDir()
	free, err := freeBytes(dir)
	if err != nil {
		t.Skipf("cannot measure free space: %v", err)
	}
	if free < 2<<30 {
		t.Skipf("%d bytes free: need 2 GiB", free)
	}
	const margin = 64 << 20
	opts := DefaultOptions(dir).WithLogger(testLogger(t)).
		WithMinFreeBytes(free - margin).
		WithFreeSpaceInterval(10 * time.Millisecond).
		WithSync(true) // data reaches the disk as it is written
	s := openTest(t, opts)

	value := make([]byte, 64<<10)
	var written int
	var fullErr error
	for i := 0; written < 1<<30; i++ {
		err := s.WriteBack([]Write{{NS: "feed", User: fmt.Sprint("u", i), Value: value}}, nil)
		if err != nil {
			fullErr = err
			break
		}
		written += len(value)
	}
	if !errors.Is(fullErr, ErrFull) {
		t.Fatalf("after writing %d MiB: %v, want ErrFull", written>>20, fullErr)
	}
	t.Logf("ErrFull after %d MiB written (margin %d MiB): %v", written>>20, margin>>20, fullErr)
	if _, err := s.Append("feed", "u0", []byte("x"), 0); !errors.Is(err, ErrFull) {
		t.Errorf("Append after ErrFull: %v, want ErrFull", err)
	}
	if f, _ := mustLoad(t, s, "feed", "u0"); len(f) != len(value) {
		t.Errorf("Load after ErrFull: %d bytes, want %d", len(f), len(value))
	}
}
