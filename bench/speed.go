package bench

import (
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// The host of a virtual machine can run its CPUs slowly without taking
// them away: on the machines seenapi is measured on, a spinning thread
// runs about ten times slower for around 100 ms every second or two,
// while /proc/stat's steal does not move and the guest kernel preempts
// nothing. Every process slows at once, client and server, and calls
// queue behind the slow stretch: that is most of an open loop's p99. A
// SpeedProbe finds those stretches so a run can say how much of its tail
// they made.

// probeEvery is how often the probe times a piece of work (probeIters): about
// 1% of one core.
const probeEvery = 2 * time.Millisecond

// probeIters is the length of a piece: about 20 us on the machines here.
const probeIters = 20_000

// slowFactor is the slowdown at which a timeline slot counts as slowed: its
// pieces took at least this many times the run's typical fast piece on
// average. The mean, not the median: the host's slowdowns come as gaps
// that a piece either falls into (and takes milliseconds) or misses.
const slowFactor = 2

// SpeedProbe times a fixed piece of arithmetic every probeEvery on a
// thread of its own, in that thread's CPU time (CLOCK_THREAD_CPUTIME_ID):
// the time the guest kernel ran it, so waiting for a core does not count
// and a slow piece means the CPU itself ran slowly.
type SpeedProbe struct {
	start time.Time
	stop  chan struct{}
	done  chan struct{}
	// pieces[i] are the CPU times of the pieces started in timeline slot i.
	pieces [][]time.Duration
	// steal[i] is the steal /proc/stat counted from the start of slot i to
	// the start of the next one that had a piece.
	steal []time.Duration
	sink  uint64
}

// StartSpeedProbe starts timing pieces; slot 0 of its timeline begins at
// start (which may be in the future: pieces before it count in slot 0).
func StartSpeedProbe(start time.Time) *SpeedProbe {
	p := &SpeedProbe{start: start, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *SpeedProbe) run() {
	defer close(p.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	x := uint64(88172645463325252)
	_, steal0, _ := MachineBusy()
	// closeSlot gives the last slot the steal counted since it began.
	closeSlot := func() {
		if _, st, err := MachineBusy(); err == nil {
			if len(p.steal) > 0 {
				p.steal[len(p.steal)-1] = st - steal0
			}
			steal0 = st
		}
	}
	for {
		select {
		case <-p.stop:
			p.sink = x
			closeSlot()
			return
		case <-t.C:
		}
		c0, err0 := threadCPU()
		for range probeIters {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		c1, err1 := threadCPU()
		if err0 != nil || err1 != nil {
			continue
		}
		slot := max(0, int(time.Since(p.start)/timelineSlot))
		if len(p.pieces) <= slot {
			closeSlot()
		}
		for len(p.pieces) <= slot {
			p.pieces = append(p.pieces, nil)
			p.steal = append(p.steal, 0)
		}
		p.pieces[slot] = append(p.pieces[slot], c1-c0)
	}
}

func threadCPU() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}

// Speed is what a SpeedProbe saw over a phase.
type Speed struct {
	// Slowdown is, per timeline slot, the mean piece's CPU time over the
	// phase's typical fast piece (its 10th percentile): 1 at full speed,
	// 10 when the CPU ran ten times slower; 0 for a slot without a piece.
	Slowdown []float64 `json:"slowdown_per_100ms,omitempty"`
	// Steal is, per timeline slot, the steal /proc/stat counted in it
	// (in 10 ms ticks, over all CPUs): time the host held this machine's
	// CPUs back and told it so, which a piece does not see (the guest
	// kernel leaves it out of the thread's CPU time).
	Steal []time.Duration `json:"steal_per_100ms_ns,omitempty"`
	// Slowed is the fraction of slots that are slowed: Slowdown slowFactor
	// or more, or any steal.
	Slowed float64 `json:"slowed_fraction"`
}

// slowed reports whether slot i is slowed (see Speed.Slowed).
func (sp Speed) slowed(i int) bool {
	return sp.Slowdown[i] >= slowFactor || (i < len(sp.Steal) && sp.Steal[i] > 0)
}

// Stop ends the probe and returns what it saw.
func (p *SpeedProbe) Stop() Speed {
	close(p.stop)
	<-p.done
	return speedOf(p.pieces, p.steal)
}

// speedOf sums up pieces[i], the CPU times of the pieces timed in slot i,
// and steal[i], the steal counted in it.
func speedOf(pieces [][]time.Duration, steal []time.Duration) Speed {
	var all []time.Duration
	for _, s := range pieces {
		all = append(all, s...)
	}
	var sp Speed
	if len(all) == 0 {
		return sp
	}
	slices.Sort(all)
	fast := float64(max(1, all[len(all)/10]))
	slowed := 0
	sp.Steal = steal
	for i, s := range pieces {
		f := 0.0
		if len(s) > 0 {
			var sum time.Duration
			for _, d := range s {
				sum += d
			}
			f = float64(sum) / float64(len(s)) / fast
		}
		sp.Slowdown = append(sp.Slowdown, f)
		if sp.slowed(i) {
			slowed++
		}
	}
	sp.Slowed = float64(slowed) / float64(len(pieces))
	return sp
}

// disturbed reports whether a call intended in timeline slot i can have
// waited behind a slowed stretch: one in its own slot or the next (a call
// late in a slot waits into the next), or in the calmSlots before it (the
// queue a slowdown leaves takes that long to drain at half load).
func (sp Speed) disturbed(i int) bool {
	for j := max(0, i-calmSlots); j <= i+1 && j < len(sp.Slowdown); j++ {
		if sp.slowed(j) {
			return true
		}
	}
	return false
}

// calmSlots: see disturbed.
const calmSlots = 2
