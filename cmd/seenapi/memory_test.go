package main

import "testing"

// The memory the process may use is the lower of the machine's and its
// control group's limit; cgroup v1's "no limit" (a number near 2^63) and
// a limit past the machine's are no limit.
func TestUsableMemory(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		machine int64
		cgroup  uint64
		want    int64
	}{
		{24 * gib, 0, 24 * gib},
		{24 * gib, 1 * gib, 1 * gib},
		{24 * gib, 9223372036854771712, 24 * gib},
		{24 * gib, 1 << 63, 24 * gib},
		{24 * gib, 32 * gib, 24 * gib},
		{0, 2 * gib, 2 * gib},
	} {
		if got := usableMemory(c.machine, c.cgroup); got != c.want {
			t.Errorf("usableMemory(%d, %d) = %d, want %d", c.machine, c.cgroup, got, c.want)
		}
	}
}

// --memory-limit auto is twice the budget and 768 MiB, at most 90% of the
// memory the process may use, but not under the budget and Badger's heap.
func TestAutoMemoryLimitFitsTheMemory(t *testing.T) {
	const mib, gib = 1 << 20, 1 << 30
	for _, c := range []struct {
		cache, memory, want int64
	}{
		{1 * gib, 24 * gib, 2*gib + 768*mib},
		{1 * gib, 0, 2*gib + 768*mib},
		{512 * mib, 1 * gib, 921 * mib}, // 90% in whole MiB
		{1 * gib, 1 * gib, 1*gib + badgerHeapBytes},
	} {
		if got := autoMemoryLimit(c.cache, c.memory); got != c.want {
			t.Errorf("autoMemoryLimit(%d, %d) = %d, want %d", c.cache, c.memory, got, c.want)
		}
	}
}
