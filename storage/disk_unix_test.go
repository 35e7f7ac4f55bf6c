//go:build unix

package storage

import (
	"syscall"
	"testing"
)

// Open locks the directory for a moment (lockDir) before Badger locks it
// too, and a process forked meanwhile (os/exec, anywhere in the process)
// holds a copy of the lock's descriptor until its exec: unlockDir must let
// the lock go at once, not once the last copy is closed, or Badger finds
// in use (ErrInUse) a directory nobody uses. dup makes the copy a fork
// makes (the same open file description), kept as long as the test needs.
func TestUnlockDirFreesTheDirectoryWhileACopyOfItsDescriptorIsOpen(t *testing.T) {
	opts := testOptions(t)
	lock := lockDir(opts.Dir)
	if lock == nil {
		t.Fatal("lockDir of a new directory did not lock it")
	}
	copied, err := syscall.Dup(int(lock.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(copied)
	unlockDir(lock)
	openTest(t, opts)
}
