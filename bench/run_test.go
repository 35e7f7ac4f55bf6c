package bench

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowSet is an exact in-memory system whose calls take a fixed time, one
// at a time: a server with a known capacity, to test the load generator
// itself.
type slowSet struct {
	mu    sync.Mutex
	delay time.Duration
	seen  map[string]map[string]bool
}

func (s *slowSet) Name() string                { return "slow-set" }
func (s *slowSet) Setup(context.Context) error { s.seen = map[string]map[string]bool{}; return nil }
func (s *slowSet) Memory(context.Context) (Memory, error) {
	return Memory{Bytes: 1, Kind: "none"}, nil
}
func (s *slowSet) CPU() (CPU, error) { return CPU{}, nil }
func (s *slowSet) Close() error      { return nil }
func (s *slowSet) Call(_ context.Context, user string, candidates []string, limit int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	time.Sleep(s.delay)
	return s.answer(user, candidates, limit), nil
}

// answer returns the first limit candidates the user has not seen and
// records them. s.mu held.
func (s *slowSet) answer(user string, candidates []string, limit int) []string {
	u := s.seen[user]
	if u == nil {
		u = map[string]bool{}
		s.seen[user] = u
	}
	var out []string
	for _, c := range candidates {
		if len(out) == limit {
			break
		}
		if !u[c] {
			out = append(out, c)
			u[c] = true
		}
	}
	return out
}

// A system that answers 1 call per 5 ms (200/s) driven open-loop at 400/s for
// 1 s falls 200 calls behind: the last calls wait about 0.5 s from their
// intended send time. Latency measured from the actual send (coordinated
// omission) would stay near 5 ms times the queue of at most 2*Concurrency.
func TestOpenLoopChargesQueueingToTheCalls(t *testing.T) {
	sys := &slowSet{delay: 5 * time.Millisecond}
	if err := sys.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	src, _ := NewSource(DefaultWorkload(100))
	r := &runner{sys: sys, o: RunOptions{Concurrency: 1}.withDefaults(), tr: NewTracker(100, 10), src: src}
	r.o.Concurrency = 1
	p, err := r.openLoop(context.Background(), "open", 400, 2*r.o.Concurrency, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if p.Calls < 380 {
		t.Errorf("%d calls made, want the 400 scheduled (a few may be cut at the end)", p.Calls)
	}
	if p.Latency.Max < 300*time.Millisecond {
		t.Errorf("max latency %v, want at least 300ms: queueing behind the slow system must count", p.Latency.Max)
	}
	// The speed probe covered the loop, and the calm latency leaves out
	// only calls near a slowed slot.
	if len(p.Speed.Slowdown) < 9 {
		t.Errorf("speed probe has %d slots for a 1 s loop, want about 10", len(p.Speed.Slowdown))
	}
	if p.Calm.Count > p.Latency.Count || (p.Speed.Slowed == 0 && p.Calm.Count != p.Latency.Count) {
		t.Errorf("calm calls %d of %d with %.0f%% of slots slowed", p.Calm.Count, p.Latency.Count, 100*p.Speed.Slowed)
	}
}

// busySet is a slowSet whose server reports CPU time at cores cores since
// its setup.
type busySet struct {
	slowSet
	since time.Time
	cores float64
}

func (b *busySet) CPU() (CPU, error) {
	return CPU{Time: time.Duration(b.cores * float64(time.Since(b.since)))}, nil
}

// The open loop samples the server's and the client's cores slot by slot:
// one slot per 100 ms it ran, each at the server's 1.5 cores, also when a
// loaded machine starves the sampler (its late readings close the slots
// they cover, rather than make slots of a sliver of time).
func TestOpenLoopSamplesTheCoresOfEachSlot(t *testing.T) {
	sys := &busySet{slowSet: slowSet{delay: time.Millisecond}, since: time.Now(), cores: 1.5}
	_ = sys.Setup(context.Background())
	src, _ := NewSource(DefaultWorkload(100))
	r := &runner{sys: sys, o: RunOptions{Concurrency: 2}.withDefaults(), tr: NewTracker(100, 10), src: src}
	began := time.Now()
	p, err := r.openLoop(context.Background(), "open", 200, 2*r.o.Concurrency, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The loop starts 10 ms after the call and runs at least its second
	// (less the last call's 5 ms); a loaded machine makes it end later.
	took := time.Since(began)
	if n := len(p.CoresTimeline); n < 9 || n > int((took-10*time.Millisecond)/timelineSlot) {
		t.Fatalf("%d slots of cores for a 1 s loop that took %v, want one a 100 ms", n, took)
	}
	for i, c := range p.CoresTimeline {
		if c.Server < 1.4 || c.Server > 1.6 || c.Client < 0 {
			t.Errorf("slot %d: server %.2f cores (want 1.5), client %.2f", i, c.Server, c.Client)
		}
	}
}

func TestClosedLoopRateMatchesCapacity(t *testing.T) {
	sys := &slowSet{delay: 2 * time.Millisecond}
	_ = sys.Setup(context.Background())
	src, _ := NewSource(DefaultWorkload(100))
	r := &runner{sys: sys, o: RunOptions{Concurrency: 4}.withDefaults(), tr: NewTracker(100, 10), src: src}
	p, err := r.closedLoop(context.Background(), "closed", r.o.Concurrency, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// One call at a time, 2 ms each (plus sleep overshoot): at most 500/s.
	// The floor only catches a loop that stalls: a loaded machine (a
	// benchmark beside the tests) oversleeps a lot.
	if p.Rate > 520 || p.Rate < 50 {
		t.Errorf("closed-loop rate %.0f/s, want 50..520 for a 2 ms serial system", p.Rate)
	}
}

// failing always fails its calls.
type failing struct{ slowSet }

func (f *failing) Call(context.Context, string, []string, int) ([]string, error) {
	return nil, errors.New("down")
}

func TestPhaseStopsWhenMostCallsFail(t *testing.T) {
	sys := &failing{}
	src, _ := NewSource(DefaultWorkload(100))
	r := &runner{sys: sys, o: RunOptions{Concurrency: 2}.withDefaults(), tr: NewTracker(100, 10), src: src}
	start := time.Now()
	_, err := r.closedLoop(context.Background(), "closed", r.o.Concurrency, 10*time.Second)
	if !errors.Is(err, errTooMany) {
		t.Fatalf("err = %v, want errTooMany", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %v to give up", time.Since(start))
	}
}

func TestRunChecksSampledUsersAcrossPhases(t *testing.T) {
	res, err := Run(context.Background(), &slowSet{}, RunOptions{Workload: DefaultWorkload(200), Concurrency: 4,
		Warm: 100 * time.Millisecond, Duration: 300 * time.Millisecond, Sample: 20})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Correctness
	if !res.Ran() || c.SampledUsers != 20 || c.Checks < 40 || c.FalseNegatives != 0 || c.FalsePositives != 0 {
		t.Errorf("ran %v, correctness %+v: want 20 users checked at least twice each, exact", res.Ran(), c)
	}
	if c.MeanShown < 200 {
		t.Errorf("sampled users hold %.0f items on average, want at least the 200 of the fill", c.MeanShown)
	}
}

// groupSet is a slowSet that answers calls in groups, as a store that
// commits writes in groups does: a call waits until size calls wait with
// it, or at most wait. Its capacity grows with the client's concurrency:
// one goroutine's calls each wait the whole wait, size goroutines' go
// through together at once. It notes the most calls it had at once in
// each phase that phases names (the run's progress log).
type groupSet struct {
	slowSet
	size    int
	wait    time.Duration
	phases  *phaseLog
	gmu     sync.Mutex
	waiting []chan struct{}
	now     int            // calls in flight
	most    map[string]int // by phase, the most calls in flight
}

func (s *groupSet) Call(_ context.Context, user string, candidates []string, limit int) ([]string, error) {
	ready := make(chan struct{})
	s.gmu.Lock()
	s.now++
	if ph := s.phases.current(); s.now > s.most[ph] {
		s.most[ph] = s.now
	}
	s.waiting = append(s.waiting, ready)
	if len(s.waiting) == s.size {
		for _, c := range s.waiting {
			close(c)
		}
		s.waiting = nil
	}
	s.gmu.Unlock()
	timer := time.NewTimer(s.wait)
	select {
	case <-ready:
	case <-timer.C:
		s.gmu.Lock()
		if i := slices.Index(s.waiting, ready); i >= 0 {
			s.waiting = slices.Delete(s.waiting, i, i+1)
		}
		s.gmu.Unlock()
	}
	timer.Stop()
	s.mu.Lock()
	unseen := s.answer(user, candidates, limit)
	s.mu.Unlock()
	s.gmu.Lock()
	s.now--
	s.gmu.Unlock()
	return unseen, nil
}

// phaseLog is a Progress's log that keeps the name of the phase last
// started: Progress writes "[label] phase: started..." before the phase's
// first call.
type phaseLog struct {
	mu    sync.Mutex
	phase string
}

func (l *phaseLog) Write(b []byte) (int, error) {
	line := string(b)
	if i, j := strings.Index(line, "] "), strings.LastIndex(line, ": started"); i >= 0 && j > i {
		l.mu.Lock()
		l.phase = line[i+2 : j]
		l.mu.Unlock()
	}
	return len(b), nil
}

func (l *phaseLog) current() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.phase
}

// With Levels, the warm-up tries each concurrency and the saturation phase
// runs at the most productive one: here one goroutine makes at most 50
// calls a second (each waits 20 ms for company) and four many times that,
// so a run that kept the first level would report a fraction of the
// capacity.
//
// The rates are measured a second or half a second each, in turn, and a
// loaded machine can stall the test for most of one of them: the rates
// compared differ by far more than such a stall takes, a rate the
// harness's speed sets (four goroutines) against a cap no speed lifts
// (one). Which concurrency each phase ran at is what the system saw, not
// a rate. No fill (at 20 ms a call, one goroutine would take 4 s over it),
// and an open loop at a small fraction of the saturation (its calls go
// through at the harness's speed, which a loaded machine slows).
func TestRunSearchesForTheSaturationPoint(t *testing.T) {
	phases := &phaseLog{}
	progress := NewProgress(phases)
	defer progress.Close()
	sys := &groupSet{size: 4, wait: 20 * time.Millisecond, phases: phases, most: map[string]int{}}
	res, err := Run(context.Background(), sys, RunOptions{Workload: DefaultWorkload(200), Concurrency: 1, Fill: -1,
		Levels: []int{1, 4}, Warm: 2 * time.Second, Duration: 500 * time.Millisecond, OpenFraction: 0.02, Sample: 20,
		Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Probes) != 2 || res.Probes[0].Concurrency != 1 || res.Probes[1].Concurrency != 4 {
		t.Fatalf("probes %+v, want one at 1 and one at 4", res.Probes)
	}
	if one, four := res.Probes[0].Rate, res.Probes[1].Rate; four < 2*one {
		t.Errorf("probe rates %.0f/s at 1 and %.0f/s at 4: want at least twice at 4", one, four)
	}
	if res.Concurrency != 4 {
		t.Errorf("saturation at %d goroutines, want 4 (probes %+v)", res.Concurrency, res.Probes)
	}
	sys.gmu.Lock()
	most := maps.Clone(sys.most)
	sys.gmu.Unlock()
	for phase, n := range map[string]int{"warm-up at 1 goroutines (unmeasured)": 1,
		"warm-up at 4 goroutines (unmeasured)": 4, "saturation (closed loop)": 4} {
		if most[phase] != n {
			t.Errorf("%s: at most %d calls at once, want %d (all: %v)", phase, most[phase], n, most)
		}
	}
	if !res.Ran() || res.Correctness.FalseNegatives != 0 {
		t.Errorf("ran %v, correctness %+v", res.Ran(), res.Correctness)
	}
}

// growingSet is a slowSet whose memory is a fixed base plus perUser bytes
// for each user it holds.
type growingSet struct {
	slowSet
	base, perUser int64
}

func (s *growingSet) Memory(context.Context) (Memory, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Memory{Bytes: s.base + s.perUser*int64(len(s.seen)), Kind: "test"}, nil
}

// Memory per user is what the fill added over the memory after setup,
// shared among the users: the base the system takes empty is left out.
func TestMemoryPerUserIsWhatTheFillAdded(t *testing.T) {
	sys := &growingSet{base: 50 << 20, perUser: 1000}
	res, err := Run(context.Background(), sys, RunOptions{Workload: DefaultWorkload(200), Concurrency: 4,
		Warm: 50 * time.Millisecond, Duration: 100 * time.Millisecond, Sample: 20})
	if err != nil {
		t.Fatal(err)
	}
	if res.MemoryBase.Bytes != sys.base || res.MemPerUser != float64(sys.perUser) {
		t.Errorf("memory base %d, per user %v; want %d and %d", res.MemoryBase.Bytes, res.MemPerUser, sys.base, sys.perUser)
	}
}

func TestParseUnseenReturnsCandidatesInOrder(t *testing.T) {
	cands := []string{"a", "b", "c", "d"}
	got, err := parseUnseen([]byte(`{"unseen": ["b" , "d"],"seen_count":2,"recorded":2}`), cands, 20)
	if err != nil || !slices.Equal(got, []string{"b", "d"}) {
		t.Errorf("got %v, %v", got, err)
	}
	got, err = parseUnseen([]byte(`{"unseen":[],"seen_count":4}`), cands, 20)
	if err != nil || len(got) != 0 {
		t.Errorf("empty: got %v, %v", got, err)
	}
	got, err = parseUnseen([]byte(`{"unseen":["\u0061","c"]}`), cands, 20)
	if err != nil || !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("escaped: got %v, %v", got, err)
	}
}

func TestParseUnseenRejectsStrangersAndDisorder(t *testing.T) {
	cands := []string{"a", "b", "c"}
	for _, body := range []string{`{"unseen":["z"]}`, `{"unseen":["c","a"]}`, `{"unseen":["a"`, `{"seen_count":1}`} {
		if _, err := parseUnseen([]byte(body), cands, 20); !errors.Is(err, ErrBadAnswer) {
			t.Errorf("%s: err = %v, want ErrBadAnswer", body, err)
		}
	}
}

func TestAppendJSONStringEscapes(t *testing.T) {
	got := string(appendJSONString(nil, "a\"b\\c\x01"))
	if want := `"a\"b\\c\u0001"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestAppendJSONStringRoundTrips decodes what appendJSONString wrote with
// encoding/json, for strings with every byte that needs escaping at every
// position around the 8-byte steps of its fast path.
func TestAppendJSONStringRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	special := []byte{0, 1, 0x1f, 0x20, '"', '\\', '/', 0x7f, 'a', '~', '<'}
	for n := 0; n < 40; n++ {
		for trial := 0; trial < 200; trial++ {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte('a' + rng.IntN(26))
			}
			if n > 0 && trial > 0 {
				b[rng.IntN(n)] = special[rng.IntN(len(special))]
			}
			if trial%7 == 0 && n > 1 {
				copy(b[rng.IntN(n-1):], "é") // multi-byte UTF-8 passes as it is
			}
			enc := appendJSONString(nil, string(b))
			var got string
			if err := json.Unmarshal(enc, &got); err != nil {
				t.Fatalf("%q encoded as %s: %v", b, enc, err)
			}
			if got != string(b) {
				t.Fatalf("%q encoded as %s decodes to %q", b, enc, got)
			}
		}
	}
}

func BenchmarkAppendJSONString(b *testing.B) {
	w := DefaultWorkload(10)
	items := make([]string, 200)
	for j := range items {
		items[j] = w.Item(1, j)
	}
	buf := make([]byte, 0, 8192)
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for _, it := range items {
			buf = appendJSONString(buf, it)
		}
	}
}

// A server that cannot start (its port is another's) fails the run with
// the reason from its log, and leaves no data directory behind.
func TestRunOfAServerThatCannotStartLeavesNothingBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server")
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	parent := t.TempDir()
	s := NewSeenapiHTTP(HTTPOptions{Bin: seenapiBin(t), DataParent: parent, Conns: 4,
		Args: []string{"--addr", held.Addr().String()}})
	_, err = Run(context.Background(), s, RunOptions{Workload: DefaultWorkload(10), Concurrency: 1})
	if !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("err = %v, want the server's own reason", err)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Errorf("left behind in the data parent: %v", left)
	}
}

// cancelAfter is a system whose context is cancelled after its calls
// number n: an interrupt (Ctrl-C) in the middle of a measured phase.
type cancelAfter struct {
	System
	n      int64
	calls  atomic.Int64
	cancel context.CancelFunc
}

func (c *cancelAfter) Call(ctx context.Context, user string, candidates []string, limit int) ([]string, error) {
	if c.calls.Add(1) == c.n {
		c.cancel()
	}
	return c.System.Call(ctx, user, candidates, limit)
}

// An interrupted run returns the interruption, not the cut phases as if
// they were measurements, and stops its server.
func TestRunInterruptedReturnsTheInterruption(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewRedisSet(RedisOptions{Bin: redisBin(t), Conns: 8})
	sys := &cancelAfter{System: s, n: 400, cancel: cancel} // the fill is 100 calls
	res, err := Run(ctx, sys, RunOptions{Workload: DefaultWorkload(100), Concurrency: 2,
		Warm: 200 * time.Millisecond, Duration: 5 * time.Second, Sample: 10})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want the interruption", err)
	}
	if res.Ran() {
		t.Error("an interrupted run reports it ran")
	}
	if s.srv != nil {
		t.Error("redis-server was not stopped")
	}
}

// A fill shorter than the memory watch's half second that passes the limit
// stops the run all the same, and the calls the stop cancels are no error
// of the system's.
func TestRunStopsAtTheMemoryLimitAfterAShortFill(t *testing.T) {
	s := NewRedisSet(RedisOptions{Bin: redisBin(t), Conns: 8})
	// 1,000 users of 200 items take about 15 MB of used_memory.
	res, err := Run(context.Background(), s, RunOptions{Workload: DefaultWorkload(1000), Concurrency: 4,
		Sample: 10, MemoryLimit: 4 << 20, MemoryOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Stopped, ErrMemoryLimit.Error()) || res.Err != "" {
		t.Errorf("stopped %q, error %q: want the memory limit and no error", res.Stopped, res.Err)
	}
}

// slowCalls is a system whose calls each wait d first.
type slowCalls struct {
	System
	d time.Duration
}

func (s slowCalls) Call(ctx context.Context, user string, candidates []string, limit int) ([]string, error) {
	time.Sleep(s.d)
	return s.System.Call(ctx, user, candidates, limit)
}

// A fill the memory watch stops midway cancels the calls in flight: their
// errors are the stop's, not the system's.
func TestRunStoppedMidFillReportsNoError(t *testing.T) {
	s := NewRedisSet(RedisOptions{Bin: redisBin(t), Conns: 8})
	// The fill's 1,000 calls take at least 1.25 s; by the watch's first
	// look, at 0.5 s, about 400 users hold some 6 MB.
	res, err := Run(context.Background(), slowCalls{s, 5 * time.Millisecond}, RunOptions{Workload: DefaultWorkload(1000),
		Concurrency: 4, Sample: 10, MemoryLimit: 4 << 20, MemoryOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Stopped, ErrMemoryLimit.Error()) || res.FillPhase.Calls >= 1000 {
		t.Errorf("stopped %q after %d calls, want the memory limit within the fill", res.Stopped, res.FillPhase.Calls)
	}
	if res.Err != "" {
		t.Errorf("error %q: the calls the stop cancelled are no error of the system's", res.Err)
	}
}

// settledSet is a Settler whose backlog is always worked off.
type settledSet struct{ slowSet }

func (*settledSet) Backlog(context.Context) (Backlog, error) { return Backlog{}, nil }

// The progress line names the phase a settle follows: the one after the
// saturation phase said "after the fill" too.
func TestSettleNamesThePhaseItFollows(t *testing.T) {
	var out strings.Builder
	p := NewProgress(&out)
	defer p.Close()
	r := &runner{o: RunOptions{Progress: p}, label: "x"}
	for _, after := range []string{"fill", "saturation phase"} {
		if _, err := r.settle(context.Background(), &settledSet{}, after); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		phase := p.phase
		p.mu.Unlock()
		if phase != "settling after the "+after+" (write-back)" {
			t.Errorf("phase %q after the %s", phase, after)
		}
	}
}

// drainingSet is a Settler whose backlog is 1,234 dirty users, 2.5 s old,
// at the first look and gone at the second, which first reads the
// progress line the settle shows.
type drainingSet struct {
	slowSet
	p     *Progress
	looks int
	line  string
}

func (d *drainingSet) Backlog(context.Context) (Backlog, error) {
	d.looks++
	if d.looks == 1 {
		return Backlog{Users: 1234, Lag: 2500 * time.Millisecond}, nil
	}
	d.p.mu.Lock()
	d.line = d.p.line()
	d.p.mu.Unlock()
	return Backlog{}, nil
}

// While a settle waits, the progress line shows what it waits for (the
// write-back backlog) and how long it has waited: it showed "0 calls,
// 9m59s left", the calls of a phase that makes none and the settle's
// timeout.
func TestSettleProgressShowsTheBacklog(t *testing.T) {
	var out strings.Builder
	p := NewProgress(&out)
	defer p.Close()
	r := &runner{o: RunOptions{Progress: p}, label: "x"}
	d := &drainingSet{p: p}
	if _, err := r.settle(context.Background(), d, "fill"); err != nil {
		t.Fatal(err)
	}
	want := "[x] settling after the fill (write-back): 1234 dirty users, oldest change 2.5s old, waited "
	if !strings.HasPrefix(d.line, want) || strings.Contains(d.line, "calls") || strings.Contains(d.line, "left") {
		t.Errorf("progress line %q, want %q and the time waited", d.line, want)
	}
}

// In a log (not a terminal) the progress says when each phase starts and
// ends, one line each: it printed only every 5 s, so a run of short phases
// (--quick's take 1 to 3 s) left most of them out of the log.
func TestProgressLogsEachPhaseStartAndEnd(t *testing.T) {
	var out strings.Builder
	p := NewProgress(&out) // not a terminal
	_, err := Run(context.Background(), &settledSet{}, RunOptions{Workload: DefaultWorkload(200), Concurrency: 4,
		Warm: 100 * time.Millisecond, Duration: 300 * time.Millisecond, Sample: 20, Progress: p})
	p.Close()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	started := map[string]int{}
	done := map[string]int{}
	for _, l := range lines {
		head, what, ok := strings.Cut(l, ": ")
		switch {
		case !ok:
			t.Errorf("line %q: want [system] phase: status", l)
		case strings.HasPrefix(what, "started"):
			started[head]++
		case strings.HasPrefix(what, "done, "):
			done[head]++
		}
	}
	for _, phase := range []string{"fill 200 items/user", "settling after the fill (write-back)", "warm-up (unmeasured)",
		"saturation (closed loop)", "settling after the saturation phase (write-back)", "check every sampled user"} {
		head := "[slow-set U=200] " + phase
		if started[head] != 1 || done[head] != 1 {
			t.Errorf("%s: started %d times, done %d times, want once each", head, started[head], done[head])
		}
	}
	open := 0
	for head := range started {
		if strings.HasPrefix(head, "[slow-set U=200] open loop at ") && done[head] == 1 {
			open++
		}
	}
	if open != 1 || len(started) != 7 || len(done) != 7 {
		t.Errorf("%d open loops started and done, %d phases started, %d done, want 1, 7 and 7; log:\n%s", open, len(started), len(done), out.String())
	}
	// Start and end of each phase, and a line every 5 s at most between.
	if len(lines) > 2*7+2 {
		t.Errorf("%d lines for 7 phases of under a second each; log:\n%s", len(lines), out.String())
	}
}
