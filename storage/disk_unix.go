//go:build unix

package storage

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// freeBytes returns the space available to unprivileged writers on the
// filesystem holding dir.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// allocatedBytes returns the bytes a file takes on disk (its allocated
// blocks: Badger preallocates sparse files whose length overstates it).
func allocatedBytes(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}

// isNoSpace reports whether err is a "no space left on device" error.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// lockDir takes the lock Badger takes on a store's directory (an exclusive
// flock of the directory itself) and returns the directory it holds open
// for it, to give back to unlockDir; nil when another process holds it.
func lockDir(dir string) *os.File {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil
	}
	return f
}

// unlockDir releases the lock lockDir took, then closes the directory.
// Closing alone releases it only once every copy of the descriptor is
// closed, and a process forked meanwhile (os/exec, anywhere in this
// process) holds a copy of each until its exec: Badger, taking its own
// lock next, found the directory in use.
func unlockDir(f *os.File) {
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}
