package inproc

import (
	"context"
	"slices"
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

// Disk a user is the data directory after a flush, as seenapi-http gives
// it after its server's shutdown: the store closed, not its open memtable
// log and journal besides what was written back.
func TestFlushDiskMeasuresTheClosedStore(t *testing.T) {
	ctx := context.Background()
	s := New(Options{DataParent: t.TempDir()})
	if err := s.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	src, err := bench.NewSource(bench.DefaultWorkload(500))
	if err != nil {
		t.Fatal(err)
	}
	g := src.Gen(1)
	var c, seven bench.Call
	for rank := range 500 {
		g.Fill(&c, rank, 200, 200)
		if _, err := s.Call(ctx, c.User, c.Candidates, c.Limit); err != nil {
			t.Fatal(err)
		}
		if rank == 7 {
			seven = bench.Call{User: c.User, Candidates: slices.Clone(c.Candidates), Limit: c.Limit}
		}
	}
	got, err := s.FlushDisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.shut(); err != nil {
		t.Fatal(err)
	}
	closed, err := bench.DiskUsage(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != closed {
		t.Errorf("FlushDisk gave %d bytes, the closed store takes %d", got, closed)
	}
	// And the cold phase after it finds every user.
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if unseen, err := s.Call(ctx, seven.User, seven.Candidates, seven.Limit); err != nil || len(unseen) != 0 {
		t.Errorf("after the restart, %d of user 7's 200 recorded items unseen (%v)", len(unseen), err)
	}
}
