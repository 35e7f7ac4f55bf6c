package bench

import "time"

// SimClock is a clock that runs Speed times faster than real time from
// the moment it is made, so that a run of minutes covers months of a
// retention window. Safe for concurrent use.
type SimClock struct {
	start, realStart time.Time
	speed            float64
}

// NewSimClock returns a clock starting at the real time now and advancing
// speed simulated seconds per real second.
func NewSimClock(speed float64) *SimClock {
	now := time.Now()
	return &SimClock{start: now, realStart: now, speed: speed}
}

// Now returns the simulated time.
func (c *SimClock) Now() time.Time {
	return c.start.Add(time.Duration(float64(time.Since(c.realStart)) * c.speed))
}
