package bench

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestPaceSendsEverySlotInOrderNeverEarly(t *testing.T) {
	const rate = 20_000.0
	start := time.Now().Add(5 * time.Millisecond)
	end := start.Add(100 * time.Millisecond)
	var want int64
	for slotTime(start, rate, want).Before(end) {
		want++
	}
	next := int64(0)
	for i := range pace(context.Background(), start, end, rate, 4) {
		if now := time.Now(); now.Before(slotTime(start, rate, i)) {
			t.Fatalf("slot %d came %v before its time", i, slotTime(start, rate, i).Sub(now))
		}
		if i != next {
			t.Fatalf("got slot %d, want %d", i, next)
		}
		next++
	}
	if next != want {
		t.Errorf("got %d slots, want %d (rate times duration)", next, want)
	}
}

func TestPaceStopsWhenItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	slots := pace(ctx, start, start.Add(time.Hour), 1000, 1)
	<-slots
	cancel()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-slots:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("pace kept sending after its context ended")
		}
	}
}

// BenchmarkPacerLateness measures how late an open loop's calls start
// against their intended times, 32 workers at 15k calls/s taking slots
// whose calls spin for 20 us: with Go's timers (each worker waits for its
// slot's time with time.After, as the harness once did) and with pace.
// It reports the lateness's p50 and p99 in microseconds.
func BenchmarkPacerLateness(b *testing.B) {
	const rate, workers, call = 15_000.0, 32, 20 * time.Microsecond
	run := func(b *testing.B, next func(ctx context.Context, start, end time.Time) func() (time.Time, bool)) {
		var late []time.Duration
		for b.Loop() {
			start := time.Now().Add(10 * time.Millisecond)
			end := start.Add(2 * time.Second)
			take := next(context.Background(), start, end)
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					var mine []time.Duration
					for {
						at, ok := take()
						if !ok {
							break
						}
						mine = append(mine, time.Since(at))
						for t := time.Now(); time.Since(t) < call; {
						}
					}
					mu.Lock()
					late = append(late, mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
		}
		slices.Sort(late)
		q := func(f float64) float64 { return float64(late[int(f*float64(len(late)-1))].Microseconds()) }
		b.ReportMetric(q(0.5), "late-p50-us")
		b.ReportMetric(q(0.99), "late-p99-us")
	}
	b.Run("timer", func(b *testing.B) {
		run(b, func(ctx context.Context, start, end time.Time) func() (time.Time, bool) {
			var mu sync.Mutex
			var i int64
			return func() (time.Time, bool) {
				mu.Lock()
				at := slotTime(start, rate, i)
				i++
				mu.Unlock()
				if !at.Before(end) {
					return at, false
				}
				if wait := time.Until(at); wait > 0 {
					<-time.After(wait)
				}
				return at, true
			}
		})
	})
	b.Run("pace", func(b *testing.B) {
		run(b, func(ctx context.Context, start, end time.Time) func() (time.Time, bool) {
			slots := pace(ctx, start, end, rate, workers)
			return func() (time.Time, bool) {
				i, ok := <-slots
				return slotTime(start, rate, i), ok
			}
		})
	})
}
