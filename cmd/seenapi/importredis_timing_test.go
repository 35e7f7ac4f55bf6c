package main

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkListedKeysBytes reports the heap the keys import-redis has
// listed take while --redis-wait is on (listedKeys), a key, at a million
// keys: 19.4 B with listedKeys where a map of the same hashes took 55.7 B.
// A memory figure, so a benchmark: go test -run '^$' -bench
// BenchmarkListedKeysBytes ./cmd/seenapi/.
func BenchmarkListedKeysBytes(b *testing.B) {
	const n = 1_000_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("seen:u", i)
	}
	var perKey float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		listed := newListedKeys()
		for _, k := range keys {
			listed.add(k)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(listed)
		perKey = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	}
	runtime.KeepAlive(keys) // not counted as freed
	b.ReportMetric(perKey, "B/key")
}
