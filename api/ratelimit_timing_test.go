package api

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkRateLimitTake is what --rate-limit adds to a request, callers
// taking tokens at once from goroutines on every core: a lookup in the
// callers' cache (one lock) and a token from the caller's bucket (another).
// Against the one call's tens of microseconds (BenchmarkOneCall).
func BenchmarkRateLimitTake(b *testing.B) {
	for _, callers := range []int{1, 16, 1024} {
		b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
			l, r := newRateLimiter(time.Now), callerRate{limit: 1e12, burst: 1 << 30}
			ids := make([]string, callers)
			for i := range ids {
				ids[i] = "caller-" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if err := l.take(ids[i%callers], r, "this API key", 1); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		})
	}
}
