package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Progress prints one status line while a run goes on: rewritten in place
// (\r) on a terminal; otherwise (a log) a plain line when a phase starts,
// every few seconds while it runs, and when it ends (Done), so that a log
// shows every phase, even one shorter than the interval. Its methods are
// safe for concurrent use; a nil *Progress prints nothing.
type Progress struct {
	w        io.Writer
	tty      bool
	every    time.Duration
	mu       sync.Mutex
	label    string
	phase    string
	total    int64 // calls expected in the phase (0: time-bound)
	deadline time.Time
	ended    bool    // Done was called for the phase
	waiting  bool    // a phase without calls, waiting for a Settler's backlog
	pending  Backlog // the backlog last read, if read is set
	read     bool
	start    time.Time
	calls    atomic.Int64
	errs     atomic.Int64
	stop     chan struct{}
	stopped  chan struct{}
	once     sync.Once
	lastLen  int
}

// NewProgress starts a progress line on w (terminal detection applies when w is os.Stderr or os.Stdout).
func NewProgress(w io.Writer) *Progress {
	p := &Progress{w: w, every: 5 * time.Second, stop: make(chan struct{}), stopped: make(chan struct{})}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty, p.every = true, 250*time.Millisecond
		}
	}
	go p.loop()
	return p
}

// Phase starts a new phase of the given system: total calls if known, or a deadline.
func (p *Progress) Phase(label, phase string, total int64, deadline time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.label, p.phase, p.total, p.deadline, p.start = label, phase, total, deadline, time.Now()
	p.waiting, p.read, p.ended = false, false, false
	p.calls.Store(0)
	p.errs.Store(0)
	if !p.tty {
		what := "started"
		switch {
		case total > 0:
			what = fmt.Sprintf("started, %d calls to make", total)
		case !deadline.IsZero():
			what = fmt.Sprintf("started, for %s", time.Until(deadline).Round(100*time.Millisecond))
		}
		fmt.Fprintf(p.w, "[%s] %s: %s\n", label, phase, what)
	}
	p.mu.Unlock()
}

// Done ends the current phase. In a log it prints the phase's last line
// (its calls, rate and errors, or the backlog a wait ended on, and the time
// it took) and no more until the next phase starts; on a terminal the next
// phase's line replaces it.
func (p *Progress) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty || p.label == "" || p.ended {
		return
	}
	p.ended = true
	fmt.Fprintln(p.w, p.line())
}

// Wait starts a phase that makes no calls but waits for a system's
// backlog (a settle): its line shows the backlog Pending last gave and the
// time waited, rather than calls and a timeout nobody expects to reach.
func (p *Progress) Wait(label, phase string) {
	if p == nil {
		return
	}
	p.Phase(label, phase, 0, time.Time{})
	p.mu.Lock()
	p.waiting = true
	p.mu.Unlock()
}

// Pending sets the backlog a Wait phase shows.
func (p *Progress) Pending(b Backlog) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.pending, p.read = b, true
	p.mu.Unlock()
}

// Add counts calls and errors of the current phase.
func (p *Progress) Add(calls, errs int64) {
	if p == nil {
		return
	}
	p.calls.Add(calls)
	if errs != 0 {
		p.errs.Add(errs)
	}
}

// Printf prints a line above the progress line.
func (p *Progress) Printf(format string, a ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintf(p.w, format+"\n", a...)
}

// Close stops the progress line; Printf still prints after it. Calling it
// again does nothing.
func (p *Progress) Close() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		close(p.stop)
		<-p.stopped
		p.mu.Lock()
		p.clear()
		p.label = ""
		p.mu.Unlock()
	})
}

func (p *Progress) clear() {
	if p.tty && p.lastLen > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.lastLen))
		p.lastLen = 0
	}
}

func (p *Progress) loop() {
	defer close(p.stopped)
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.print()
		}
	}
}

func (p *Progress) print() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.label == "" || p.ended {
		return
	}
	// A log has the phase's start line: one a moment later says nothing.
	if !p.tty && time.Since(p.start) < time.Second {
		return
	}
	line := p.line()
	if p.tty {
		pad := ""
		if n := p.lastLen - len(line); n > 0 {
			pad = strings.Repeat(" ", n)
		}
		fmt.Fprintf(p.w, "\r%s%s", line, pad)
		p.lastLen = len(line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

// line is the status line of the current phase, or its last if it ended;
// p.mu is held.
func (p *Progress) line() string {
	if p.waiting {
		what := "reading the backlog"
		if p.read {
			what = fmt.Sprintf("%d dirty users, oldest change %s old", p.pending.Users, roundLag(p.pending.Lag))
		}
		if p.ended {
			if p.read && p.pending.Users == 0 {
				what = "no backlog left"
			}
			return fmt.Sprintf("[%s] %s: done, %s, waited %s", p.label, p.phase, what, time.Since(p.start).Round(10*time.Millisecond))
		}
		return fmt.Sprintf("[%s] %s: %s, waited %s", p.label, p.phase, what, time.Since(p.start).Round(time.Second))
	}
	calls, errs := p.calls.Load(), p.errs.Load()
	if p.ended {
		el := time.Since(p.start)
		rate := 0.0
		if el > 0 {
			rate = float64(calls) / el.Seconds()
		}
		return fmt.Sprintf("[%s] %s: done, %d calls in %s, %.0f calls/s, %d errors", p.label, p.phase, calls, el.Round(10*time.Millisecond), rate, errs)
	}
	el := time.Since(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(calls) / el
	}
	var where string
	switch {
	case p.total > 0:
		where = fmt.Sprintf("%d/%d calls (%.0f%%)", calls, p.total, 100*float64(calls)/float64(p.total))
	case !p.deadline.IsZero():
		left := max(time.Until(p.deadline), 0).Round(time.Second)
		where = fmt.Sprintf("%d calls, %s left", calls, left)
	default:
		where = fmt.Sprintf("%d calls", calls)
	}
	return fmt.Sprintf("[%s] %s: %s, %.0f calls/s, %d errors", p.label, p.phase, where, rate, errs)
}

// roundLag rounds a flush lag for reading: to the millisecond under a
// second (a healthy write-back's lag), to a tenth of a second above.
func roundLag(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
