package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// RunOptions configure the run of one system at one user count.
type RunOptions struct {
	// Workload is what the calls are drawn from. Required (Users).
	Workload Workload
	// Concurrency is the client goroutines of the closed-loop phases; the
	// open-loop phase uses twice as many so that the client never queues
	// at half of saturation. Default 16.
	Concurrency int
	// Levels, when it holds more than one concurrency, makes the warm-up a
	// search for the saturation point: a closed loop at each level in turn
	// (Warm split evenly, at least a second each), after which the
	// saturation phase runs at the level that made the most calls a second.
	// The open loop keeps twice Concurrency. Too few goroutines leave the cores
	// idle while calls are in flight, and how many are enough differs by
	// system. The fill and the final checks keep Concurrency.
	Levels []int
	// Fill is the items recorded for every user before anything is
	// measured: one call per user offering Fill items of its pool with limit
	// Fill. Memory per user is measured right after it. Default 200; -1
	// skips the fill.
	Fill int
	// Warm is the unmeasured Zipf (or uniform) load after the fill. Default 5s.
	Warm time.Duration
	// Duration is the length of each measured phase (saturation, then
	// open loop). Default 20s.
	Duration time.Duration
	// OpenFraction is the open-loop rate as a fraction of the measured
	// saturation rate. Default 0.5.
	OpenFraction float64
	// Sample is how many users the tracker checks exactly. Default 1000.
	Sample int
	// MemoryLimit stops the run when the system's memory figure exceeds it.
	// Default 16 GiB.
	MemoryLimit int64
	// MemoryOnly stops after the fill: memory, disk and correctness of the
	// fill calls only.
	MemoryOnly bool
	// Progress shows the run's progress. Default none.
	Progress *Progress
	// Window, if non-zero, is the retention window of the system under
	// test, with Granularity its bucket width and Clock the clock the system
	// runs on: the tracker then expects expired items unseen again (see
	// Tracker). Default none.
	Window, Granularity time.Duration
	Clock               func() time.Time
	// CPUProfile, if set, is where a CPU profile of the harness process
	// during the saturation phase is written (for seenapi-inproc, the hot
	// set's own costs with the client's), and the open loop's beside it
	// (openProfile). Default none.
	CPUProfile string
}

func (o RunOptions) withDefaults() RunOptions {
	o.Workload = o.Workload.withDefaults()
	if o.Concurrency == 0 {
		o.Concurrency = 16
	}
	if o.Fill == 0 {
		o.Fill = 200
	}
	if o.Warm == 0 {
		o.Warm = 5 * time.Second
	}
	if o.Duration == 0 {
		o.Duration = 20 * time.Second
	}
	if o.OpenFraction == 0 {
		o.OpenFraction = 0.5
	}
	if o.Sample == 0 {
		o.Sample = 1000
	}
	if o.MemoryLimit == 0 {
		o.MemoryLimit = 16 << 30
	}
	return o
}

// Latency summarizes a latency histogram.
type Latency struct {
	Count int64         `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Phase is one load phase's figures.
type Phase struct {
	Calls   int64         `json:"calls"`
	Errors  int64         `json:"errors"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Rate    float64       `json:"calls_per_s"` // completed calls / elapsed
	Latency Latency       `json:"latency"`
	CPU     time.Duration `json:"server_cpu_ns"` // server CPU over the phase
	// Steal is the CPU (in cores) the host held back from this machine
	// during the phase (/proc/stat steal; see MachineBusy).
	Steal float64 `json:"steal_cores"`
	// Timeline is the open loop's worst latency per 100 ms of intended
	// send time: where in the phase the tail comes from.
	Timeline []time.Duration `json:"max_latency_per_100ms_ns,omitempty"`
	// Speed is how fast the CPU ran over the open loop (SpeedProbe), slot
	// by slot of Timeline.
	Speed Speed `json:"cpu_speed,omitzero"`
	// Cores is how the phase shared the machine's cores.
	Cores Cores `json:"cores,omitzero"`
	// CoresTimeline is, slot by slot of Timeline, the cores the server
	// and the client took (see coreSampler).
	CoresTimeline []SlotCores `json:"cores_per_100ms,omitempty"`
	// Calm is the open loop's latency over the calls the host's slowdowns
	// cannot have delayed: those intended in no slowed slot, nor in the
	// slot before one or the calmSlots after one (Speed.disturbed).
	Calm Latency `json:"latency_calm,omitzero"`

	calls []openCall // open loop: every call's slot and latency, for Timeline and Calm
}

// Cores is how a phase shared the machine's cores: the CPU time of the
// server and of the harness over the phase's length, and how long their
// threads, ready to run, waited for a core, per call. With the client and
// the server on the same few cores, a busy machine makes a tail that
// neither is slow for. (The whole machine's busy time is left out: /proc/stat
// samples it at each tick, which misses the short runs of a half-loaded
// server, and it came out below the two processes' own CPU time.)
type Cores struct {
	Server float64 `json:"server"` // for seenapi-inproc: the harness, hot set included
	Client float64 `json:"client"` // the harness; 0 for seenapi-inproc (in Server)
	// ServerWait and ClientWait are their threads' waits for a core (summed
	// over threads) per call of the phase.
	ServerWait time.Duration `json:"server_wait_per_call_ns"`
	ClientWait time.Duration `json:"client_wait_per_call_ns"`
}

// openCall is one open-loop call: its timeline slot and its latency.
type openCall struct {
	slot int
	lat  time.Duration
}

// Result is everything measured of one system at one user count.
type Result struct {
	System string  `json:"system"`
	Users  int     `json:"users"`
	Zipf   float64 `json:"zipf"` // 0: uniform
	// Concurrency is the client goroutines of the saturation phase.
	Concurrency int `json:"concurrency"`
	// Probes are the warm-up's closed loops at each of RunOptions.Levels,
	// when it searched for the saturation point.
	Probes []Probe `json:"concurrency_probes,omitempty"`
	Fill   int     `json:"fill_items_per_user"`
	Window string  `json:"window,omitempty"` // retention window of the run, if any

	FillPhase Phase `json:"fill"`
	// Settle is how long the system took after the fill to work off its
	// backlog (Settler) before the warm-up started.
	Settle time.Duration `json:"settle_ns"`
	// SettleSaturation is the same wait after the saturation phase, before
	// the open loop.
	SettleSaturation time.Duration `json:"settle_after_saturation_ns"`
	Warm             Phase         `json:"warm"`
	Saturation       Phase         `json:"saturation"`
	Open             Phase         `json:"open_loop"` // Latency measured from each call's intended send time
	// ServerOpen is the server's own time per call in the open loop, from
	// its request-duration histogram (ServerTimer; seenapi over HTTP only):
	// what the latency would be without the client, the network stack and
	// the wait for a core.
	ServerOpen Latency `json:"server_open_loop,omitzero"`
	OpenTarget float64 `json:"open_loop_target_calls_per_s"`
	// ServerGCSat and ServerGCOpen are the server's collector's work during
	// the saturation phase and the open loop (GCReporter: seenapi over HTTP;
	// nil for other systems).
	ServerGCSat  *Collected `json:"server_gc_saturation,omitempty"`
	ServerGCOpen *Collected `json:"server_gc_open_loop,omitempty"`
	// ClientGCSat and ClientGCOpen are the harness's own in the same phases:
	// the client's, and for seenapi-inproc the hot set's too.
	ClientGCSat  Collected `json:"client_gc_saturation"`
	ClientGCOpen Collected `json:"client_gc_open_loop"`

	CPUPerCall    time.Duration `json:"server_cpu_per_call_ns"` // over the saturation phase
	CPUInclClient bool          `json:"cpu_includes_client"`
	// ClientCPUPerCall is the harness process's CPU per call over the
	// saturation phase (for seenapi-inproc, the same as CPUPerCall).
	ClientCPUPerCall time.Duration `json:"client_cpu_per_call_ns"`
	// OtherLoad is the CPU (in cores) that processes other than the server
	// and the harness used during the saturation phase: other work on the
	// machine that disturbed the measurement.
	OtherLoad float64 `json:"other_load_cores"`

	MemoryBase   Memory  `json:"memory_base"`       // right after setup
	MemoryFilled Memory  `json:"memory_after_fill"` // after the fill
	MemPerUser   float64 `json:"memory_bytes_per_user"`
	AnonPerUser  float64 `json:"anon_rss_bytes_per_user,omitempty"` // the anonymous part of an RSS figure
	DiskBytes    int64   `json:"disk_bytes"`                        // -1: not applicable
	DiskPerUser  float64 `json:"disk_bytes_per_user"`
	HitRatio     float64 `json:"cache_hit_ratio"` // -1: not applicable
	Cold         Latency `json:"cold_user_latency"`

	Correctness Correctness `json:"correctness"`
	// Stopped says why the run stopped early (memory limit), if it did.
	Stopped string `json:"stopped,omitempty"`
	// Err is the first call error seen, if any.
	Err string `json:"error,omitempty"`
}

// Probe is one closed loop of the search for the saturation point.
type Probe struct {
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"calls_per_s"`
}

// Ran reports whether the system completed the measured phases with calls and no errors.
func (r Result) Ran() bool {
	return r.Stopped == "" && r.Err == "" && r.Saturation.Calls > 0 && r.Open.Calls > 0 &&
		r.Saturation.Errors == 0 && r.Open.Errors == 0 && r.FillPhase.Errors == 0 && r.Warm.Errors == 0
}

// runner holds one run's state.
type runner struct {
	sys     System
	o       RunOptions
	tr      *Tracker
	src     *Source
	label   string
	firstMu sync.Mutex
	first   error // first call error
	stream  atomic.Uint64
}

func (r *runner) noteErr(err error) {
	r.firstMu.Lock()
	if r.first == nil {
		r.first = err
	}
	r.firstMu.Unlock()
}

// call makes one call, checking it against the tracker (sampled users) or
// validating the answer's shape (others).
func (r *runner) call(ctx context.Context, c *Call) error {
	tu := r.tr.Lock(c.Rank)
	unseen, err := r.sys.Call(ctx, c.User, c.Candidates, c.Limit)
	if tu != nil {
		if err != nil {
			r.tr.Fail(tu)
			return err
		}
		return r.tr.Check(tu, c.Candidates, unseen, c.Limit)
	}
	if err != nil {
		return err
	}
	return validAnswer(c.Candidates, unseen, c.Limit)
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 120_000_000, 3) } // microseconds

func record(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	if us < 1 {
		us = 1
	}
	_ = h.RecordValue(min(us, h.HighestTrackableValue()))
}

func summarize(h *hdrhistogram.Histogram) Latency {
	us := time.Microsecond
	return Latency{Count: h.TotalCount(), P50: time.Duration(h.ValueAtQuantile(50)) * us,
		P99: time.Duration(h.ValueAtQuantile(99)) * us, P999: time.Duration(h.ValueAtQuantile(99.9)) * us,
		Max: time.Duration(h.Max()) * us}
}

// errTooMany stops a phase whose calls mostly fail.
var errTooMany = errors.New("bench: too many failed calls")

// worker is the state of one load goroutine.
type worker struct {
	gen    *Gen
	call   Call
	hist   *hdrhistogram.Histogram
	calls  int64
	errors int64
	open   []openCall // open loop: every call
}

// timedCall makes w's call, recording its latency and any error.
func (r *runner) timedCall(ctx context.Context, w *worker) {
	t0 := time.Now()
	err := r.call(ctx, &w.call)
	record(w.hist, time.Since(t0))
	w.calls++
	if err != nil {
		w.errors++
		r.noteErr(err)
	}
}

// timelineSlot is the resolution of an open-loop phase's latency timeline.
const timelineSlot = 100 * time.Millisecond

// phase runs fn on n workers until ctx ends or fn returns false, then merges.
func (r *runner) phase(ctx context.Context, name string, n int, total int64, deadline time.Time,
	fn func(ctx context.Context, w *worker) bool) (Phase, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.o.Progress.Phase(r.label, name, total, deadline)
	defer r.o.Progress.Done()
	ws := make([]*worker, n)
	for i := range ws {
		ws[i] = &worker{gen: r.src.Gen(r.stream.Add(1)), hist: newHist()}
	}
	var failed atomic.Int64
	var all atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				before := w.errors
				if !fn(ctx, w) {
					return
				}
				errs := w.errors - before
				r.o.Progress.Add(1, errs)
				a := all.Add(1)
				if errs > 0 {
					if f := failed.Add(errs); f > 100 && f*2 > a {
						cancel(errTooMany)
					}
				}
			}
		}()
	}
	wg.Wait()
	p := Phase{Elapsed: time.Since(start)}
	h := newHist()
	for _, w := range ws {
		p.Calls += w.calls
		p.Errors += w.errors
		h.Merge(w.hist)
		p.calls = append(p.calls, w.open...)
	}
	p.Latency = summarize(h)
	if p.Elapsed > 0 {
		p.Rate = float64(p.Calls) / p.Elapsed.Seconds()
	}
	if cause := context.Cause(ctx); errors.Is(cause, errTooMany) {
		r.firstMu.Lock()
		first := r.first
		r.firstMu.Unlock()
		return p, fmt.Errorf("%s: %w (%d of %d); first: %v", name, errTooMany, failed.Load(), all.Load(), first)
	}
	return p, nil
}

// closedLoop: each of n workers calls, waits for the answer, calls again, until d
// passes; calls in flight at the end finish and count.
func (r *runner) closedLoop(ctx context.Context, name string, n int, d time.Duration) (Phase, error) {
	deadline := time.Now().Add(d)
	return r.phase(ctx, name, n, 0, deadline, func(ctx context.Context, w *worker) bool {
		if !time.Now().Before(deadline) {
			return false
		}
		w.gen.Next(&w.call)
		r.timedCall(ctx, w)
		return true
	})
}

// openLoop issues calls on a fixed schedule (call i intended at start + i/rate)
// for d; pace hands out the slots, any free worker takes the next, and
// latency runs from the slot's intended time, so a slow answer delays no
// measurement (no coordinated omission).
func (r *runner) openLoop(ctx context.Context, name string, rate float64, workers int, d time.Duration) (Phase, error) {
	start := time.Now().Add(10 * time.Millisecond)
	end := start.Add(d)
	total := int64(rate * d.Seconds())
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	slots := pace(pctx, start, end, rate, workers)
	probe := StartSpeedProbe(start)
	sampler := startCoreSampler(start, r.sys)
	p, err := r.phase(ctx, name, workers, total, end, func(ctx context.Context, w *worker) bool {
		w.gen.Next(&w.call)
		var i int64
		select {
		case n, ok := <-slots:
			if !ok {
				return false
			}
			i = n
		case <-ctx.Done():
			return false
		}
		intended := slotTime(start, rate, i)
		err := r.call(ctx, &w.call)
		lat := time.Since(intended)
		record(w.hist, lat)
		w.open = append(w.open, openCall{int(intended.Sub(start) / timelineSlot), lat})
		w.calls++
		if err != nil {
			w.errors++
			r.noteErr(err)
		}
		return true
	})
	p.Speed = probe.Stop()
	p.CoresTimeline = sampler.Stop()
	h := newHist()
	for _, c := range p.calls {
		for len(p.Timeline) <= c.slot {
			p.Timeline = append(p.Timeline, 0)
		}
		p.Timeline[c.slot] = max(p.Timeline[c.slot], c.lat)
		if !p.Speed.disturbed(c.slot) {
			record(h, c.lat)
		}
	}
	p.Calm = summarize(h)
	p.calls = nil
	return p, err
}

// warm runs the unmeasured closed loop after the fill: at Concurrency for
// Warm, or with Levels, at each level in turn (see RunOptions.Levels),
// returning each level's rate. The phase it returns sums them all.
func (r *runner) warm(ctx context.Context) (Phase, []Probe, error) {
	if len(r.o.Levels) < 2 {
		p, err := r.closedLoop(ctx, "warm-up (unmeasured)", r.o.Concurrency, r.o.Warm)
		return p, nil, err
	}
	each := max(r.o.Warm/time.Duration(len(r.o.Levels)), time.Second)
	var all Phase
	probes := make([]Probe, 0, len(r.o.Levels))
	for _, n := range r.o.Levels {
		p, err := r.closedLoop(ctx, fmt.Sprintf("warm-up at %d goroutines (unmeasured)", n), n, each)
		all.Calls += p.Calls
		all.Errors += p.Errors
		all.Elapsed += p.Elapsed
		probes = append(probes, Probe{Concurrency: n, Rate: p.Rate})
		if err != nil {
			return all, probes, err
		}
	}
	if all.Elapsed > 0 {
		all.Rate = float64(all.Calls) / all.Elapsed.Seconds()
	}
	return all, probes, nil
}

// fill makes one call per user, in the order of Source.FillOrder, each
// offering n items with limit n; a Recorder records the items of users not
// checked instead.
func (r *runner) fill(ctx context.Context, n int) (Phase, error) {
	var next atomic.Int64
	order := r.src.FillOrder()
	users := int64(len(order))
	return r.phase(ctx, fmt.Sprintf("fill %d items/user", n), r.o.Concurrency, users, time.Time{},
		func(ctx context.Context, w *worker) bool {
			i := next.Add(1) - 1
			if i >= users {
				return false
			}
			rank := order[i]
			w.gen.Fill(&w.call, int(rank), n, n)
			t0 := time.Now()
			var err error
			if rec, ok := r.sys.(Recorder); ok && !r.tr.IsSampled(int(rank)) {
				err = rec.Record(ctx, w.call.User, w.call.Candidates)
			} else {
				err = r.call(ctx, &w.call)
			}
			record(w.hist, time.Since(t0))
			w.calls++
			if err != nil {
				w.errors++
				r.noteErr(err)
			}
			return true
		})
}

// ranks calls each of the given users once, with the workload's call shape,
// on n workers.
func (r *runner) ranks(ctx context.Context, name string, ranks []int, n int) (Phase, error) {
	var next atomic.Int64
	return r.phase(ctx, name, n, int64(len(ranks)), time.Time{}, func(ctx context.Context, w *worker) bool {
		i := next.Add(1) - 1
		if i >= int64(len(ranks)) {
			return false
		}
		w.gen.Fill(&w.call, ranks[i], r.o.Workload.Candidates, r.o.Workload.Limit)
		r.timedCall(ctx, w)
		return true
	})
}

// settleTimeout bounds the wait for a system's backlog after the fill or
// the saturation phase.
const settleTimeout = 10 * time.Minute

// settle waits until st's backlog is gone (polling every 100ms), at most
// settleTimeout, and returns how long it took; after names the phase it
// follows, for the progress line.
func (r *runner) settle(ctx context.Context, st Settler, after string) (time.Duration, error) {
	start := time.Now()
	r.o.Progress.Wait(r.label, "settling after the "+after+" (write-back)")
	defer r.o.Progress.Done()
	for {
		b, err := st.Backlog(ctx)
		if err != nil {
			return time.Since(start), err
		}
		r.o.Progress.Pending(b)
		if b.Users == 0 || time.Since(start) > settleTimeout {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// watchMemory cancels ctx with ErrMemoryLimit when the system's memory
// exceeds limit; it polls every half second until ctx ends.
func (r *runner) watchMemory(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m, err := r.sys.Memory(ctx)
			if err == nil && m.Bytes > r.o.MemoryLimit {
				cancel(fmt.Errorf("%w: %s %d bytes > %d at %d users", ErrMemoryLimit, m.Kind, m.Bytes, r.o.MemoryLimit, r.o.Workload.Users))
				return
			}
		}
	}
}

// Run sets sys up, fills every user, warms it, measures saturation and then
// the open-loop latency at OpenFraction of it, checks the sampled users once
// more, reads cache, disk and cold-user figures where the system has them,
// and closes sys. A run stopped by the memory limit returns its Result with
// Stopped set and a nil error; a failed run returns what it measured and
// the error.
func Run(ctx context.Context, sys System, opts RunOptions) (res Result, err error) {
	o := opts.withDefaults()
	if err := o.Workload.Validate(); err != nil {
		return Result{}, err
	}
	if slices.ContainsFunc(o.Levels, func(n int) bool { return n < 1 }) || o.Concurrency < 1 {
		return Result{}, fmt.Errorf("%w: concurrency %d, levels %v: each must be at least 1", ErrBadConfig, o.Concurrency, o.Levels)
	}
	src, err := NewSource(o.Workload)
	if err != nil {
		return Result{}, err
	}
	r := &runner{sys: sys, o: o, tr: NewTracker(o.Workload.Users, o.Sample), src: src,
		label: fmt.Sprintf("%s U=%d", sys.Name(), o.Workload.Users)}
	if o.Window > 0 {
		if o.Clock == nil {
			return Result{}, fmt.Errorf("%w: a window needs the system's clock", ErrBadConfig)
		}
		r.tr.SetWindow(o.Clock, o.Window, o.Granularity)
	}
	res = Result{System: sys.Name(), Users: o.Workload.Users, Zipf: o.Workload.Zipf,
		Concurrency: o.Concurrency, Fill: max(o.Fill, 0), DiskBytes: -1, DiskPerUser: -1, HitRatio: -1}
	if o.Window > 0 {
		res.Window = o.Window.String()
	}
	defer func() {
		res.Correctness = r.tr.Result()
		// A run stopped at the memory limit cancels the calls in flight:
		// their errors are the stop's, not the system's.
		if r.first != nil && res.Err == "" && !(res.Stopped != "" && errors.Is(r.first, context.Canceled)) {
			res.Err = r.first.Error()
		}
		if err != nil && res.Err == "" {
			res.Err = err.Error()
		}
	}()
	// An interrupted run is no measurement: its phases end early without
	// an error of their own, so say so rather than return cut figures.
	defer func() {
		if err == nil && ctx.Err() != nil {
			err = context.Cause(ctx)
		}
	}()

	closed := false
	defer func() {
		// Also after a failed Setup: it may have made a data directory or
		// started a process before failing.
		if !closed {
			_ = sys.Close()
		}
	}()
	if err := sys.Setup(ctx); err != nil {
		return res, fmt.Errorf("%s: setup: %w", sys.Name(), err)
	}
	if res.MemoryBase, err = sys.Memory(ctx); err != nil {
		return res, fmt.Errorf("%s: memory: %w", sys.Name(), err)
	}

	mctx, mcancel := context.WithCancelCause(ctx)
	defer mcancel(nil)
	go r.watchMemory(mctx, mcancel)
	stopped := func() bool {
		if cause := context.Cause(mctx); errors.Is(cause, ErrMemoryLimit) {
			res.Stopped = cause.Error()
			return true
		}
		return false
	}

	users := float64(o.Workload.Users)
	if o.Fill > 0 {
		if res.FillPhase, err = r.fill(mctx, o.Fill); err != nil {
			return res, err
		}
		if stopped() {
			return res, nil
		}
	}
	if st, ok := sys.(Settler); ok {
		if res.Settle, err = r.settle(mctx, st, "fill"); err != nil {
			return res, fmt.Errorf("%s: settle: %w", sys.Name(), err)
		}
	}
	if res.MemoryFilled, err = sys.Memory(ctx); err != nil {
		return res, fmt.Errorf("%s: memory: %w", sys.Name(), err)
	}
	res.MemPerUser = float64(res.MemoryFilled.Bytes-res.MemoryBase.Bytes) / users
	if res.MemoryFilled.Anon > 0 {
		res.AnonPerUser = float64(res.MemoryFilled.Anon-res.MemoryBase.Anon) / users
	}
	// The watch polls every half second: a fill shorter than that can pass
	// the limit unseen.
	if res.MemoryFilled.Bytes > o.MemoryLimit {
		res.Stopped = fmt.Sprintf("%v: %s %d bytes > %d at %d users", ErrMemoryLimit, res.MemoryFilled.Kind,
			res.MemoryFilled.Bytes, o.MemoryLimit, o.Workload.Users)
		return res, nil
	}
	// The hit ratio covers the phases after the fill (whose users are all new).
	var hits0, misses0 uint64
	cs, hasCache := sys.(CacheStater)
	if hasCache {
		if hits0, misses0, err = cs.CacheStats(ctx); err != nil {
			return res, fmt.Errorf("%s: cache stats: %w", sys.Name(), err)
		}
	}

	if !o.MemoryOnly {
		if res.Warm, res.Probes, err = r.warm(mctx); err != nil || stopped() {
			return res, err
		}
		if len(res.Probes) > 0 {
			res.Concurrency = slices.MaxFunc(res.Probes, func(a, b Probe) int { return cmp.Compare(a.Rate, b.Rate) }).Concurrency
		}
		u0, err := takeUsage(sys)
		if err != nil {
			return res, err
		}
		// readGC reads the server's collector (nil for a system without a
		// Go server to read) and the harness's own.
		readGC := func() (server *Collected, client Collected, err error) {
			if gcr, ok := sys.(GCReporter); ok {
				c, err := gcr.ServerGC(mctx)
				if err != nil {
					return nil, client, fmt.Errorf("%s: collector: %w", sys.Name(), err)
				}
				server = &c
			}
			return server, selfGC(), nil
		}
		srvGC0, cliGC0, err := readGC()
		if err != nil {
			return res, err
		}
		stopProfile, err := startProfile(o.CPUProfile)
		if err != nil {
			return res, err
		}
		res.Saturation, err = r.closedLoop(mctx, "saturation (closed loop)", res.Concurrency, o.Duration)
		if perr := stopProfile(); err == nil {
			err = perr
		}
		if err != nil || stopped() {
			return res, err
		}
		u1, err := takeUsage(sys)
		if err != nil {
			return res, err
		}
		srvGC1, cliGC1, err := readGC()
		if err != nil {
			return res, err
		}
		res.ServerGCSat, res.ClientGCSat = srvGC1.since(srvGC0), cliGC1.Sub(cliGC0)
		res.Saturation.account(u0, u1)
		res.CPUInclClient = u1.server.InclClient
		other := (u1.busy - u0.busy) - (u1.client - u0.client)
		if !u1.server.InclClient {
			other -= res.Saturation.CPU
		}
		res.OtherLoad = max(0, cores(other, res.Saturation.Elapsed))
		if res.Saturation.Calls > 0 {
			res.CPUPerCall = res.Saturation.CPU / time.Duration(res.Saturation.Calls)
			res.ClientCPUPerCall = (u1.client - u0.client) / time.Duration(res.Saturation.Calls)
		}
		// The saturation phase overloads on purpose; the open loop measures
		// latency at a sustainable rate, so it starts once the overload's
		// backlog (seenapi's write-back) is worked off.
		if st, ok := sys.(Settler); ok {
			if res.SettleSaturation, err = r.settle(mctx, st, "saturation phase"); err != nil {
				return res, fmt.Errorf("%s: settle: %w", sys.Name(), err)
			}
		}
		res.OpenTarget = math.Max(1, o.OpenFraction*res.Saturation.Rate)
		name := fmt.Sprintf("open loop at %.0f calls/s", res.OpenTarget)
		timer, timed := sys.(ServerTimer)
		var before Histogram
		if timed {
			if before, err = timer.CallDurations(mctx); err != nil {
				return res, fmt.Errorf("%s: server timing: %w", sys.Name(), err)
			}
		}
		if srvGC0, cliGC0, err = readGC(); err != nil {
			return res, err
		}
		if u0, err = takeUsage(sys); err != nil {
			return res, err
		}
		// The open loop's workers only carry the calls in flight at half of
		// saturation, which the first level's twice has room for; more
		// would spread the calls over more connections than before Levels.
		if stopProfile, err = startProfile(openProfile(o.CPUProfile)); err != nil {
			return res, err
		}
		res.Open, err = r.openLoop(mctx, name, res.OpenTarget, 2*o.Concurrency, o.Duration)
		if perr := stopProfile(); err == nil {
			err = perr
		}
		if err != nil || stopped() {
			return res, err
		}
		if u1, err = takeUsage(sys); err != nil {
			return res, err
		}
		if srvGC1, cliGC1, err = readGC(); err != nil {
			return res, err
		}
		res.ServerGCOpen, res.ClientGCOpen = srvGC1.since(srvGC0), cliGC1.Sub(cliGC0)
		res.Open.account(u0, u1)
		if timed {
			after, err := timer.CallDurations(mctx)
			if err != nil {
				return res, fmt.Errorf("%s: server timing: %w", sys.Name(), err)
			}
			res.ServerOpen = after.Sub(before).Latency()
		}
		if _, err = r.ranks(mctx, "check every sampled user", r.tr.Sampled(), o.Concurrency); err != nil || stopped() {
			return res, err
		}
	}
	mcancel(nil)
	if ctx.Err() != nil {
		return res, context.Cause(ctx)
	}

	if hasCache {
		hits, misses, err := cs.CacheStats(ctx)
		if err != nil {
			return res, fmt.Errorf("%s: cache stats: %w", sys.Name(), err)
		}
		hits, misses = hits-hits0, misses-misses0
		if hits+misses > 0 {
			res.HitRatio = float64(hits) / float64(hits+misses)
		}
	}
	if f, ok := sys.(Flusher); ok {
		if res.DiskBytes, err = f.FlushDisk(ctx); err != nil {
			return res, fmt.Errorf("%s: flush: %w", sys.Name(), err)
		}
		res.DiskPerUser = float64(res.DiskBytes) / users
	}
	if rs, ok := sys.(Restarter); ok {
		// After a restart every user is cold: one call per sampled user
		// measures the storage-read latency and checks that nothing
		// recorded was lost across the restart.
		if err := rs.Restart(ctx); err != nil {
			return res, fmt.Errorf("%s: restart: %w", sys.Name(), err)
		}
		p, err := r.ranks(ctx, "cold users after restart", r.tr.Sampled(), 1)
		res.Cold = p.Latency
		if err != nil {
			return res, err
		}
	}
	closed = true
	if err := sys.Close(); err != nil {
		return res, fmt.Errorf("%s: close: %w", sys.Name(), err)
	}
	return res, nil
}

// usage is what the server, the harness and the whole machine had spent at
// one moment; a phase's figures are differences of two.
type usage struct {
	server CPU
	// at is when server was read, next to the reading: reading the rest
	// takes a harness starved of cores long enough to skew the server's
	// cores over a 100 ms slot (coreSampler).
	at            time.Time
	client        time.Duration // the harness's CPU
	clientWaited  time.Duration // its threads' wait for a core (ProcWaited)
	busy, stealed time.Duration // the machine's (MachineBusy)
}

// takeUsage reads the usage of sys, of the harness and of the machine now.
func takeUsage(sys System) (usage, error) {
	var u usage
	var err error
	if u.server, err = sys.CPU(); err != nil {
		return u, fmt.Errorf("%s: cpu: %w", sys.Name(), err)
	}
	u.at = time.Now()
	self := os.Getpid()
	if u.client, err = ProcCPU(self); err != nil {
		return u, fmt.Errorf("bench: own cpu: %w", err)
	}
	u.clientWaited, _ = ProcWaited(self) // 0 without schedstat: a diagnostic only
	if u.busy, u.stealed, err = MachineBusy(); err != nil {
		return u, fmt.Errorf("bench: machine cpu: %w", err)
	}
	return u, nil
}

// account sets p's CPU, Steal and Cores from usage taken at its start and end.
func (p *Phase) account(start, end usage) {
	p.CPU = end.server.Time - start.server.Time
	p.Steal = cores(end.stealed-start.stealed, p.Elapsed)
	p.Cores = Cores{Server: cores(p.CPU, p.Elapsed)}
	if !end.server.InclClient {
		p.Cores.Client = cores(end.client-start.client, p.Elapsed)
	}
	if p.Calls > 0 {
		n := time.Duration(p.Calls)
		p.Cores.ServerWait = (end.server.Waited - start.server.Waited) / n
		if !end.server.InclClient {
			p.Cores.ClientWait = (end.clientWaited - start.clientWaited) / n
		}
	}
}

// cores is CPU time cpu spread over elapsed, in cores (0 for no time).
func cores(cpu, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return cpu.Seconds() / elapsed.Seconds()
}

// openProfile is where the open loop's profile goes when the saturation
// phase's goes to path: its name with "-open" before the extension. At half
// load a call costs the client and the server more CPU than at saturation
// (wake-ups instead of batches), and this shows where.
func openProfile(path string) string {
	if path == "" {
		return ""
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-open" + ext
}

// startProfile starts a CPU profile into path (nothing if path is empty)
// and returns the function that stops it.
func startProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
