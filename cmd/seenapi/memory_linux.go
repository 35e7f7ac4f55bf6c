//go:build linux

package main

import "golang.org/x/sys/unix"

// totalMemory is the machine's memory in bytes, 0 if unknown.
func totalMemory() int64 {
	var info unix.Sysinfo_t
	if unix.Sysinfo(&info) != nil {
		return 0
	}
	return int64(info.Totalram) * int64(info.Unit)
}
