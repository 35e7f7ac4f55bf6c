//go:build unix

package storage

import (
	"errors"
	"io/fs"
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
