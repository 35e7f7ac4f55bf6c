package main

import "math"

// usableMemory is the lower of a machine's memory and a control group's
// limit (0: none; a limit past what an int64 holds, as cgroup v1 writes
// "no limit", is none either).
func usableMemory(machine int64, cgroup uint64) int64 {
	if cgroup == 0 || cgroup > math.MaxInt64 || machine > 0 && int64(cgroup) >= machine {
		return machine
	}
	return int64(cgroup)
}
