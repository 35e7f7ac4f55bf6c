//go:build unix

package main

import "syscall"

// descriptorLimit returns the process's limit on open files (ulimit -n,
// as Go raised it at start), or 0 when it cannot tell.
func descriptorLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return uint64(r.Cur)
}
