//go:build unix

package storage

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// A refusal says which limit made it: the free-space floor (MinFreeBytes,
// ErrBelowMinFree) while the disk may have room, or the disk itself once
// a write met ENOSPC, until a check finds free space above the floor. An
// operator lowers the one and frees space for the other.
func TestTheFloorAndAFullDiskAreToldApart(t *testing.T) {
	floor := openTest(t, testOptions(t).WithMinFreeBytes(1<<62)) // more than any disk has
	_, err := floor.Append("feed", "u", []byte("x"), 0)
	if !errors.Is(err, ErrFull) || !errors.Is(err, ErrBelowMinFree) {
		t.Fatalf("an append below the floor: %v, want ErrFull and ErrBelowMinFree", err)
	}

	s := openTest(t, testOptions(t).WithMinFreeBytes(1)) // any disk has a byte free
	if err := s.writeErr(fmt.Errorf("write: %w", syscall.ENOSPC)); !errors.Is(err, ErrFull) || errors.Is(err, ErrBelowMinFree) {
		t.Fatalf("a write that met ENOSPC: %v, want ErrFull without ErrBelowMinFree", err)
	}
	_, err = s.Append("feed", "u", []byte("x"), 0)
	if !errors.Is(err, ErrFull) || errors.Is(err, ErrBelowMinFree) {
		t.Fatalf("an append after ENOSPC: %v, want ErrFull without ErrBelowMinFree", err)
	}
	if s.checkFree() {
		t.Fatal("a check found less than a byte free")
	}
	if _, err := s.Append("feed", "u", []byte("x"), 0); err != nil {
		t.Fatalf("an append once a check found room: %v", err)
	}
}

// With no floor (MinFreeBytes negative), a write that met a full disk
// stops writes only until space comes back, as with one: the store checks
// the disk again every FreeSpaceInterval, not only at the next start.
func TestAFullDiskWithoutAFloorTakesWritesOnceSpaceIsBack(t *testing.T) {
	s := openTest(t, testOptions(t).WithMinFreeBytes(-1).WithFreeSpaceInterval(10*time.Millisecond))
	if err := s.writeErr(fmt.Errorf("write: %w", syscall.ENOSPC)); !errors.Is(err, ErrFull) {
		t.Fatalf("a write that met ENOSPC: %v, want ErrFull", err)
	}
	// The disk this test runs on has room: the next check finds it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.Append("feed", "u", []byte("x"), 0)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrFull) || time.Now().After(deadline) {
			t.Fatalf("an append 30 s after a full disk, with room on it now and no floor: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s.Full() {
		t.Error("the store still says it is full once it takes writes")
	}
}
