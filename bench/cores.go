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

// coreSampler reads a system's and the harness's CPU time at every
// timelineSlot boundary from start.
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

func (s *coreSampler) run(start time.Time, sys System) {
	defer close(s.done)
	select {
	case <-time.After(time.Until(start)):
	case <-s.stop:
		return
	}
	prev, err := takeUsage(sys)
	at0 := time.Now()
	for i := 1; ; i++ {
		select {
		case <-time.After(time.Until(start.Add(time.Duration(i) * timelineSlot))):
		case <-s.stop:
			return
		}
		now, errNow := takeUsage(sys)
		at := time.Now()
		var c SlotCores
		if err == nil && errNow == nil {
			// A late tick (a starved harness) makes a longer slot, not a
			// busier one: divide by the time that really passed.
			c.Server = cores(now.server.Time-prev.server.Time, at.Sub(at0))
			if !now.server.InclClient {
				c.Client = cores(now.client-prev.client, at.Sub(at0))
			}
		}
		s.slots = append(s.slots, c)
		prev, err, at0 = now, errNow, at
	}
}

// Stop ends the sampling and returns the cores of each completed slot.
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
