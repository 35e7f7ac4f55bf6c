package inproc

import (
	"context"
	"testing"
	"time"

	"github.com/seenapi/seenapi/bench"
)

func runSmall(t *testing.T, opts Options, o bench.RunOptions) bench.Result {
	t.Helper()
	opts.DataParent = t.TempDir()
	o.Workload = bench.DefaultWorkload(300)
	o.Concurrency, o.Warm, o.Duration, o.Sample = 4, 200*time.Millisecond, 500*time.Millisecond, 30
	res, err := bench.Run(context.Background(), New(opts), o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Every phase runs, the filter keeps what it was shown across the restart
// of the cold phase, and the figures of a hot set are reported.
func TestRunInProcessHoldsCorrectnessAcrossARestart(t *testing.T) {
	for _, http := range []bool{false, true} {
		res := runSmall(t, Options{HTTP: http}, bench.RunOptions{})
		c := res.Correctness
		if !res.Ran() || c.FalseNegatives != 0 || c.Checks < 60 || res.Cold.Count != 30 {
			t.Errorf("http=%v: ran %v, correctness %+v, cold calls %d", http, res.Ran(), c, res.Cold.Count)
		}
		if c.FPRate > 0.02 {
			t.Errorf("http=%v: false-positive rate %.4f over a 1%% target", http, c.FPRate)
		}
		if res.HitRatio <= 0 || res.DiskBytes <= 0 || res.MemPerUser <= 0 {
			t.Errorf("http=%v: hit ratio %v, disk %d, memory/user %v: want all measured", http, res.HitRatio, res.DiskBytes, res.MemPerUser)
		}
	}
}

// With a 30-day window on a clock running 100 days per second, items
// expire during the run: expired items are tested and no shown item inside
// the window is called unseen.
func TestWindowRunExpiresItems(t *testing.T) {
	clock := bench.NewSimClock(100 * 24 * 3600)
	window, gran := 30*24*time.Hour, 7*24*time.Hour+12*time.Hour
	res := runSmall(t, Options{Window: window, Granularity: gran, Now: clock.Now},
		bench.RunOptions{Window: window, Granularity: gran, Clock: clock.Now})
	c := res.Correctness
	if !res.Ran() || c.FalseNegatives != 0 || c.Expired == 0 {
		t.Errorf("ran %v, correctness %+v: want expired items tested and no false negative", res.Ran(), c)
	}
}
