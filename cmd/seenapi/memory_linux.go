//go:build linux

package main

import (
	"github.com/KimMachineGun/automemlimit/memlimit"
	"golang.org/x/sys/unix"
)

// totalMemory is the memory this process may use in bytes: the machine's,
// or its control group's limit when that is lower (a container's), 0 if
// unknown. automemlimit reads cgroup v1 and v2 through the process's own
// mounts, as a container sees them.
func totalMemory() int64 {
	var info unix.Sysinfo_t
	if unix.Sysinfo(&info) != nil {
		return 0
	}
	limit, err := memlimit.FromCgroup()
	if err != nil {
		limit = 0 // no control group, or no limit in it
	}
	return usableMemory(int64(info.Totalram)*int64(info.Unit), limit)
}
