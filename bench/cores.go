package bench

import "time"

// An open loop's tail is made in a few stretches where calls queue: on a
// machine whose cores the client and the server share, a burst of the
// server's background work (a collection, a compaction of its store) takes
// the cores the client needs to send and read calls, and every call
// intended meanwhile waits. A coreSampler reads both processes' CPU time at
// each timeline slot, so that a run shows which process had the cores
// when its worst calls queued.

// SlotCores is how many cores the server and the client took in one
// timeline slot (Client is 0 when the server runs in the harness).
type SlotCores struct {
	Server float64 `json:"server"`
	Client float64 `json:"client"`
}

// coreSampler reads a system's and the harness's CPU time at the
// timelineSlot boundaries from start.
type coreSampler struct {
	stop  chan struct{}
	done  chan struct{}
	slots []SlotCores
}

// startCoreSampler starts sampling sys and this process; slot 0 begins at
// start.
func startCoreSampler(start time.Time, sys System) *coreSampler {
	s := &coreSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go s.run(start, sys)
	return s
}

// run reads at each slot boundary until Stop, and once more at the stop.
// A reading closes every slot that ended since the one before, each at the
// cores over the time that really passed between the two readings: a late
// one (a starved harness) closes several with their mean, so that slot i
// stays the 100 ms from start + i*timelineSlot, as in the latency timeline.
// Readings are at least half a slot apart: a slot closed by a reading just
// after a late one would be a sliver of time, and its cores (CPU times
// counted in 10 ms ticks over a sliver) noise.
func (s *coreSampler) run(start time.Time, sys System) {
	defer close(s.done)
	select {
	case <-time.After(time.Until(start)):
	case <-s.stop:
		return
	}
	prev, err := takeUsage(sys)
	for stopped := false; !stopped; {
		next := max(len(s.slots)+1, int(prev.at.Add(timelineSlot/2).Sub(start)/timelineSlot)+1)
		select {
		case <-time.After(time.Until(start.Add(time.Duration(next) * timelineSlot))):
		case <-s.stop:
			stopped = true
		}
		now, errNow := takeUsage(sys)
		ended := int(now.at.Sub(start) / timelineSlot)
		if ended <= len(s.slots) || now.at.Sub(prev.at) < timelineSlot/2 {
			continue // a stop before another slot ended, or just after a reading
		}
		var c SlotCores
		if err == nil && errNow == nil {
			c.Server = cores(now.server.Time-prev.server.Time, now.at.Sub(prev.at))
			if !now.server.InclClient {
				c.Client = cores(now.client-prev.client, now.at.Sub(prev.at))
			}
		}
		for len(s.slots) < ended {
			s.slots = append(s.slots, c)
		}
		prev, err = now, errNow
	}
}

// Stop ends the sampling and returns the cores of each slot a reading
// closed: every slot that ended by the stop, but for one that ended less
// than half a slot after the reading before.
func (s *coreSampler) Stop() []SlotCores {
	close(s.stop)
	<-s.done
	return s.slots
}

// worstStretch finds the open loop's worst call in p.Timeline and the
// coresBefore slots up to it (the time the calls queued in): the most cores
// the server took in one of those slots and the fewest the client got.
// ok is false without a timeline or cores.
func (p Phase) worstStretch() (slot int, worst time.Duration, serverMax, clientMin float64, ok bool) {
	if len(p.Timeline) == 0 || len(p.CoresTimeline) == 0 {
		return 0, 0, 0, 0, false
	}
	for i, d := range p.Timeline {
		if d > worst {
			slot, worst = i, d
		}
	}
	// The calls of the worst slot queued behind what happened from a
	// little before it (coresBefore) until they were answered.
	from := max(0, slot-coresBefore)
	to := min(len(p.CoresTimeline)-1, slot+int(worst/timelineSlot))
	if from > to {
		return 0, 0, 0, 0, false
	}
	clientMin = p.CoresTimeline[from].Client
	for _, c := range p.CoresTimeline[from : to+1] {
		serverMax = max(serverMax, c.Server)
		clientMin = min(clientMin, c.Client)
	}
	return slot, worst, serverMax, clientMin, true
}

// coresBefore is how many slots before the worst call's worstStretch looks
// at: the queue it waited in began building up to that long before.
const coresBefore = 5
