// Command seenbench runs the reference workload (WORKLOAD.md) against
// seenapi over HTTP, seenapi's hot set in-process, a Redis SET per user and
// a Redis bitmap Bloom filter per user, one after the other on this machine,
// and writes a Markdown table, a JSON file and PNG plots to --out.
//
//	go run ./cmd/seenbench --quick                  # about a minute; exits non-zero if a system failed
//	go run ./cmd/seenbench --users 1e4,1e5,1e6,1e7  # the full run
//	go run ./cmd/seenbench --users 1e5 --fill 2000 --memory-only  # memory at 2,000 items per user
//	go run ./cmd/seenbench --quick --window 30d     # the window run (in-process, clock advanced)
//	go run ./cmd/seenbench --users 1e5 --systems seenapi-inproc,seenapi-http-inproc --cpuprofile
//	go run ./cmd/seenbench --users 1e5 --systems seenapi-http,seenapi-https  # what TLS costs
//
// Redis is Debian's redis-server, installed with apt-get when missing. See
// package bench for the method.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seenapi/seenapi/bench"
	"github.com/seenapi/seenapi/bench/inproc"
)

func main() {
	// The first signal stops the servers and removes their data, which can
	// take a while (seenapi writes back on SIGTERM); a second one quits at
	// once (the signal's default action: the servers die with the harness,
	// their data stays). The signals are unregistered before the stop
	// begins or says so: a second signal sent as soon as the line shows
	// would otherwise be caught and dropped.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		s, ok := <-sig
		if !ok {
			return // the run's end, not a signal
		}
		signal.Stop(sig)
		fmt.Fprintln(os.Stderr, "seenbench: stopping the servers; interrupt again to quit at once")
		cancel(fmt.Errorf("%v signal received", s))
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	signal.Stop(sig)
	close(sig)
	cancel(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "seenbench:", err)
		os.Exit(1)
	}
}

// allSystems are the systems in the order they run.
var allSystems = []string{"seenapi-http", "seenapi-inproc", "redis-set", "redis-bloom"}

// extraSystems run only when named: seenapi-http-inproc serves the API
// inside the harness, to profile the HTTP layer with --cpuprofile;
// seenapi-https is seenapi-http over TLS (a self-signed certificate the
// harness makes), to measure what TLS costs beside seenapi-http.
var extraSystems = []string{"seenapi-http-inproc", "seenapi-https"}

type config struct {
	users       []int
	systems     []string
	duration    time.Duration
	warm        time.Duration
	concurrency int   // of the fill and the final checks: the first of levels
	levels      []int // tried in the warm-up when more than one
	clientProcs int
	zipf        float64
	uniform     bool
	seed        uint64
	fill        int
	sample      int
	openFrac    float64
	out         string
	quick       bool
	memoryOnly  bool
	memLimit    int64
	cacheBytes  int64
	seenapiBin  string
	seenapiArgs string
	flushEvery  time.Duration
	dataParent  string
	redisClient string
	cpuProfile  bool
	noJournal   bool
	window      time.Duration
	granularity time.Duration
	windowSpeed time.Duration
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("seenbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{}
	users := fs.String("users", "1e4,1e5,1e6,1e7", "user counts U, comma-separated (1e5 or 100000)")
	systems := fs.String("systems", strings.Join(allSystems, ","), "systems to run, comma-separated")
	fs.DurationVar(&c.duration, "duration", 20*time.Second, "length of each measured phase (saturation, then open loop)")
	fs.DurationVar(&c.warm, "warm", 5*time.Second, "unmeasured closed-loop load after the fill")
	concurrency := fs.String("concurrency", "16,32,64,128", "client goroutines in the closed loop (twice the first in the open loop); "+
		"several, comma-separated: the warm-up tries each and the saturation phase uses the one that made the most calls a second")
	fs.IntVar(&c.clientProcs, "client-procs", 0, "GOMAXPROCS of the client (0: Go's default, all cores); printed with the results")
	fs.Float64Var(&c.zipf, "zipf", bench.DefaultZipf, "Zipf exponent s of the users' popularity")
	fs.BoolVar(&c.uniform, "uniform", false, "choose users uniformly instead of by Zipf")
	fs.Uint64Var(&c.seed, "seed", 1, "workload seed")
	fs.IntVar(&c.fill, "fill", 200, "items recorded per user before measuring (one call per user); memory per user is measured after it")
	fs.IntVar(&c.sample, "sample", 1000, "users whose exact sets the harness keeps to check every answer")
	fs.Float64Var(&c.openFrac, "open-fraction", 0.5, "open-loop rate as a fraction of the measured saturation")
	fs.StringVar(&c.out, "out", filepath.Join(os.TempDir(), "seenbench"), "output directory (results.md, results.json, PNG plots, logs)")
	fs.BoolVar(&c.quick, "quick", false, "about a minute, U=2e3, every system; exit non-zero unless every system ran and correctness held")
	fs.BoolVar(&c.memoryOnly, "memory-only", false, "only the fill: memory and disk per user (e.g. with --fill 2000)")
	memLimit := fs.String("memory-limit", "16GiB", "stop a system at the user count where its memory (used_memory, RSS) would exceed this")
	cacheBytes := fs.String("cache-bytes", "0", "seenapi hot set budget (--cache-bytes of the server and the in-process hot set; 0: their default)")
	fs.StringVar(&c.seenapiBin, "seenapi-bin", "", "seenapi server binary (default: built from this module with go build)")
	fs.StringVar(&c.seenapiArgs, "seenapi-args", "", "extra seenapi server flags, space-separated")
	fs.DurationVar(&c.flushEvery, "flush-interval", 0, "seenapi's write-back interval (--flush-interval of the server and the in-process hot set; 0: their default, 5s); "+
		"the settle after the fill and after the saturation phase waits about that long for the last changes to be written back")
	fs.StringVar(&c.redisClient, "redis-client", "go-redis", "client of the Redis systems' load: go-redis, or resp (a minimal pipelining client, to gauge go-redis's own cost)")
	window := fs.String("window", "", "retention window (e.g. 30d): the window run, seenapi-inproc only, on a clock the harness advances")
	granularity := fs.String("window-granularity", "", "bucket width of the window (default window/4)")
	windowSpeed := fs.String("window-speed", "10d", "simulated time per real second of the window run's clock")
	fs.BoolVar(&c.noJournal, "inproc-no-journal", false, "run the in-process hot set without its journal (to measure what the journal costs; not the product's durability)")
	fs.BoolVar(&c.cpuProfile, "cpuprofile", false, "write a CPU profile of the harness (client, and the hot set for seenapi-inproc) during each saturation phase to --out, and one of each open loop beside it (-open.pprof)")
	fs.StringVar(&c.dataParent, "data-dir", "", "parent of the systems' fresh data directories, made if missing (default: the temp dir)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.quick {
		// The quick run's settings, unless given explicitly.
		if !set["users"] {
			*users = "2e3"
		}
		if !set["duration"] {
			c.duration = 3 * time.Second
		}
		if !set["warm"] {
			c.warm = time.Second
		}
		if !set["sample"] {
			c.sample = 400
		}
		if !set["flush-interval"] {
			// Each settle waits about one interval for the write-back of
			// the last changes: 20 s of the run at the default 5 s.
			c.flushEvery = time.Second
		}
	}
	var err error
	if c.users, err = parseUsers(*users); err != nil {
		return nil, err
	}
	// Out-of-range values would otherwise fall back to a default unseen
	// (RunOptions' zero values) or run something no one asked for.
	switch {
	case c.duration <= 0:
		return nil, fmt.Errorf("--duration %v: want a positive duration", c.duration)
	case c.warm < 0:
		return nil, fmt.Errorf("--warm %v: want a duration of at least 0", c.warm)
	case !(c.openFrac > 0 && c.openFrac <= 1):
		return nil, fmt.Errorf("--open-fraction %v: want a fraction of the saturation in (0, 1]", c.openFrac)
	case c.sample < 1:
		return nil, fmt.Errorf("--sample %d: want at least 1 user checked", c.sample)
	case c.fill < 0:
		return nil, fmt.Errorf("--fill %d: want at least 0 items (0: no fill)", c.fill)
	case c.flushEvery != 0 && c.flushEvery < time.Millisecond:
		return nil, fmt.Errorf("--flush-interval %v: want at least 1ms (0: seenapi's default)", c.flushEvery)
	case c.clientProcs < 0:
		return nil, fmt.Errorf("--client-procs %d: want at least 0 (0: all cores)", c.clientProcs)
	}
	for _, s := range strings.Split(*systems, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !contains(allSystems, s) && !contains(extraSystems, s) {
			return nil, fmt.Errorf("unknown system %q (have %s)", s, strings.Join(append(allSystems, extraSystems...), ", "))
		}
		c.systems = append(c.systems, s)
	}
	if len(c.systems) == 0 {
		return nil, errors.New("no systems")
	}
	if c.memLimit, err = parseBytes(*memLimit); err != nil {
		return nil, fmt.Errorf("--memory-limit: %w", err)
	}
	if c.memLimit <= 0 {
		return nil, fmt.Errorf("--memory-limit %s: want a positive size", *memLimit)
	}
	if c.cacheBytes, err = parseBytes(*cacheBytes); err != nil {
		return nil, fmt.Errorf("--cache-bytes: %w", err)
	}
	if c.uniform {
		c.zipf = 0
	}
	w := bench.DefaultWorkload(c.users[0])
	w.Zipf = c.zipf
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("--zipf: %w", err)
	}
	for _, d := range []struct {
		flag string
		in   string
		out  *time.Duration
	}{{"window", *window, &c.window}, {"window-granularity", *granularity, &c.granularity}, {"window-speed", *windowSpeed, &c.windowSpeed}} {
		if d.in == "" {
			continue
		}
		if *d.out, err = parseDays(d.in); err != nil {
			return nil, fmt.Errorf("--%s: %w", d.flag, err)
		}
	}
	if c.windowSpeed <= 0 {
		return nil, fmt.Errorf("--window-speed %s: want a positive duration", *windowSpeed)
	}
	if c.window > 0 {
		if c.granularity == 0 {
			c.granularity = c.window / 4
		}
		if !set["systems"] {
			c.systems = []string{"seenapi-inproc"}
		}
		if len(c.systems) != 1 || c.systems[0] != "seenapi-inproc" {
			return nil, errors.New("--window runs seenapi-inproc only: the server has no clock the harness can advance, and Redis has no window")
		}
	}
	if c.redisClient != "go-redis" && c.redisClient != "resp" {
		return nil, fmt.Errorf("--redis-client %q: want go-redis or resp", c.redisClient)
	}
	for _, f := range strings.Split(*concurrency, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--concurrency %q: want counts of at least 1, comma-separated", *concurrency)
		}
		c.levels = append(c.levels, n)
	}
	c.concurrency = c.levels[0]
	return c, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parseUsers parses "1e4,1e5,100000".
func parseUsers(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v < 1 || v > 1<<31 || v != math.Trunc(v) {
			return nil, fmt.Errorf("bad user count %q", f)
		}
		out = append(out, int(v))
	}
	if len(out) == 0 {
		return nil, errors.New("no user counts")
	}
	return out, nil
}

// parseBytes parses "16GiB", "512MiB", "1e9", "0".
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = rest, u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return int64(v * float64(mult)), nil
}

// parseDays parses a Go duration, or a number of days like "30d" or "7.5d".
func parseDays(s string) (time.Duration, error) {
	if v, ok := strings.CutSuffix(s, "d"); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		return time.Duration(f * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad duration %q", s)
	}
	return d, nil
}

// moduleDir returns the directory of the Go module the command runs in.
func moduleDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the seenapi module: run from the repository or pass --seenapi-bin")
	}
	return filepath.Dir(mod), nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if c.clientProcs > 0 {
		prev := runtime.GOMAXPROCS(c.clientProcs)
		defer runtime.GOMAXPROCS(prev)
	}
	logDir := filepath.Join(c.out, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	// Like --out, a --data-dir that is not there yet is made: the systems'
	// setup failed on it one after the other, after the build.
	if c.dataParent != "" {
		if err := os.MkdirAll(c.dataParent, 0o755); err != nil {
			return fmt.Errorf("--data-dir: %w", err)
		}
	}
	progress := bench.NewProgress(stderr)
	defer progress.Close()
	logf := func(format string, a ...any) { progress.Printf("seenbench: "+format, a...) }

	// Build the server once, and find (or install) redis-server once.
	seenapiBin := c.seenapiBin
	if seenapiBin == "" && (contains(c.systems, "seenapi-http") || contains(c.systems, "seenapi-https")) {
		dir, err := moduleDir(ctx)
		if err != nil {
			return err
		}
		seenapiBin = filepath.Join(c.out, "bin", "seenapi")
		logf("building %s from %s", seenapiBin, dir)
		if err := bench.BuildSeenapi(ctx, dir, seenapiBin); err != nil {
			return err
		}
	}
	var redisBin string
	if contains(c.systems, "redis-set") || contains(c.systems, "redis-bloom") {
		if redisBin, err = bench.EnsureRedis(ctx, logf); err != nil {
			return err
		}
	}
	// The window run's clock, advanced windowSpeed per real second.
	clock := bench.NewSimClock(float64(c.windowSpeed) / float64(time.Second))
	// Each system's connections: enough for the open loop's workers and the
	// largest closed loop, with a few to spare.
	conns := max(2*c.concurrency, slices.Max(c.levels)) + 8
	newSystem := func(name string) bench.System {
		ropts := bench.RedisOptions{Bin: redisBin, Conns: conns, LogDir: logDir, Logf: logf, Client: c.redisClient}
		switch name {
		case "seenapi-http", "seenapi-https":
			var extra []string
			if c.flushEvery > 0 { // before --seenapi-args, which may set it again
				extra = append(extra, "--flush-interval", c.flushEvery.String())
			}
			extra = append(extra, strings.Fields(c.seenapiArgs)...)
			return bench.NewSeenapiHTTP(bench.HTTPOptions{Bin: seenapiBin, DataParent: c.dataParent,
				CacheBytes: c.cacheBytes, Args: extra, LogDir: logDir, Conns: conns, TLS: name == "seenapi-https"})
		case "seenapi-inproc", "seenapi-http-inproc":
			o := inproc.Options{DataParent: c.dataParent, CacheBytes: c.cacheBytes,
				HTTP: name == "seenapi-http-inproc", Conns: conns, NoJournal: c.noJournal, FlushInterval: c.flushEvery}
			if c.window > 0 {
				o.Window, o.Granularity, o.Now = c.window, c.granularity, clock.Now
			}
			return inproc.New(o)
		case "redis-set":
			return bench.NewRedisSet(ropts)
		default:
			return bench.NewRedisBloom(ropts)
		}
	}

	w := bench.DefaultWorkload(0)
	w.Zipf, w.Seed = c.zipf, c.seed
	rep := &bench.Report{Command: "seenbench " + strings.Join(args, " "), Started: time.Now().UTC(),
		GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), ClientProcs: runtime.GOMAXPROCS(0),
		Concurrency: c.concurrency, Levels: c.levels, Workload: w, Fill: c.fill, Warm: c.warm.String(), Duration: c.duration.String(),
		OpenFrac: c.openFrac, Sample: c.sample}
	rep.Notes = append(rep.Notes, fmt.Sprintf("The client (this harness) ran with GOMAXPROCS %d on a %d-core machine, "+
		"sharing the cores with the server under test; seenapi-inproc runs inside it.", rep.ClientProcs, rep.CPUs))
	rep.Notes = append(rep.Notes, "Redis systems' client: "+c.redisClient+".")
	if c.noJournal {
		rep.Notes = append(rep.Notes, "The in-process hot set ran without its journal (--inproc-no-journal).")
	}
	if c.window > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("Window run: retention window %s with buckets of %s on a clock the harness advances %s per real second; "+
			"seenapi-inproc only (the server has no clock the harness can advance; Redis has no window). "+
			"Items shown longer ago than the window plus one bucket must test unseen (counted with the never-shown items in the FP rate); "+
			"items shown less than the window ago must test seen.", c.window, c.granularity, c.windowSpeed))
	}
	if c.memoryOnly {
		rep.Notes = append(rep.Notes, "Memory-only run: fill phase only; no throughput or latency figures.")
	}
	logf("client GOMAXPROCS %d on %d cores; %s; output in %s", rep.ClientProcs, rep.CPUs, rep.Goroutines(), c.out)

	// perUser remembers each system's measured memory per user to skip a
	// user count that would exceed the limit.
	type seen struct {
		perUser float64
		users   int
		stopped string
	}
	last := map[string]seen{}
	var failures []string
	// wrote is whether results.md and results.json were written: after
	// each system that finished.
	wrote := false
	// interrupted is the error of a run a signal ended: what measured before
	// it stays in --out.
	interrupted := func() error {
		if !wrote {
			return fmt.Errorf("interrupted (%v) before any system finished: no results were written", context.Cause(ctx))
		}
		return fmt.Errorf("interrupted (%v); the results of the systems that completed are in %s", context.Cause(ctx), c.out)
	}
	for _, users := range c.users {
		for _, name := range c.systems {
			if ctx.Err() != nil {
				return interrupted()
			}
			wl := w
			wl.Users = users
			if prev, ok := last[name]; ok {
				var why string
				switch {
				case prev.stopped != "":
					why = fmt.Sprintf("stopped at U=%s: %s", bench.FormatUsers(prev.users), prev.stopped)
				case strings.HasPrefix(name, "seenapi") && c.cacheBytes > 0 && 2*c.cacheBytes < c.memLimit:
					// The hot set's budget bounds seenapi's memory whatever U
					// is (the run still stops at the limit if it does not).
				case prev.perUser*float64(users)*1.1 > float64(c.memLimit):
					why = fmt.Sprintf("would exceed %s: %.0f B/user measured at U=%s", formatBytes(c.memLimit), prev.perUser, bench.FormatUsers(prev.users))
				}
				if why != "" {
					logf("%s U=%s skipped: %s", name, bench.FormatUsers(users), why)
					rep.Results = append(rep.Results, bench.Result{System: name, Users: users, Zipf: wl.Zipf,
						Fill: c.fill, Stopped: why})
					if prev.stopped == "" {
						last[name] = seen{perUser: prev.perUser, users: prev.users, stopped: why}
					}
					continue
				}
			}
			profile := ""
			if c.cpuProfile {
				profile = filepath.Join(c.out, fmt.Sprintf("cpu-%s-%s.pprof", name, bench.FormatUsers(users)))
			}
			var window, gran time.Duration
			var clk func() time.Time
			if c.window > 0 {
				window, gran, clk = c.window, c.granularity, clock.Now
			}
			res, err := bench.Run(ctx, newSystem(name), bench.RunOptions{CPUProfile: profile,
				Window: window, Granularity: gran, Clock: clk, Workload: wl, Concurrency: c.concurrency, Levels: c.levels,
				Fill: fillOpt(c.fill), Warm: c.warm, Duration: c.duration, OpenFraction: c.openFrac,
				Sample: c.sample, MemoryLimit: c.memLimit, MemoryOnly: c.memoryOnly, Progress: progress})
			if err != nil {
				if ctx.Err() != nil {
					return interrupted()
				}
				logf("%s U=%s failed: %v", name, bench.FormatUsers(users), err)
				failures = append(failures, fmt.Sprintf("%s U=%s: %v", name, bench.FormatUsers(users), err))
			} else {
				logf("%s U=%s: %s", name, bench.FormatUsers(users), summary(res))
			}
			rep.Results = append(rep.Results, res)
			last[name] = seen{perUser: res.MemPerUser, users: users, stopped: res.Stopped}
			// Give the in-process system's heap back before the next system runs.
			debug.FreeOSMemory()
			if err := writeOutputs(rep, c.out); err != nil { // after every system: a long run keeps what it measured
				return err
			}
			wrote = true
		}
	}
	progress.Close()
	if err := writeOutputs(rep, c.out); err != nil {
		return err
	}
	if files, err := rep.WritePlots(c.out); err != nil {
		fmt.Fprintf(stderr, "seenbench: plots: %v\n", err)
		failures = append(failures, "plots: "+err.Error())
	} else if len(files) == 0 {
		fmt.Fprintln(stderr, "seenbench: no plots: no system has figures to plot")
	} else {
		fmt.Fprintf(stderr, "seenbench: wrote %s\n", strings.Join(files, ", "))
	}
	if err := rep.WriteMarkdown(stdout); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "seenbench: wrote %s and %s\n", filepath.Join(c.out, "results.md"), filepath.Join(c.out, "results.json"))
	if c.quick {
		failures = append(failures, quickChecks(rep, c.systems, c.memoryOnly)...)
	}
	if len(failures) > 0 {
		return fmt.Errorf("%d failure(s):\n  %s", len(failures), strings.Join(failures, "\n  "))
	}
	return nil
}

func fillOpt(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

func summary(r bench.Result) string {
	if r.Stopped != "" {
		return "stopped: " + r.Stopped
	}
	if r.Saturation.Calls == 0 { // --memory-only: the fill's figures
		return fmt.Sprintf("fill %.0f calls/s, %.0f B/user, fp %.4f%%, fn %d",
			r.FillPhase.Rate, r.MemPerUser, 100*r.Correctness.FPRate, r.Correctness.FalseNegatives)
	}
	return fmt.Sprintf("%.0f calls/s, p99 %v at %.0f calls/s (%v outside the host's slowdowns, which took %.0f%% of the time; steal %.2f cores), cpu %v/call, %.0f B/user, fp %.4f%%, fn %d",
		r.Saturation.Rate, r.Open.Latency.P99, r.OpenTarget, r.Open.Calm.P99, 100*r.Open.Speed.Slowed, r.Open.Steal, r.CPUPerCall, r.MemPerUser,
		100*r.Correctness.FPRate, r.Correctness.FalseNegatives)
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1e9:
		return fmt.Sprintf("%.3g GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.3g MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%d B", n)
}

func writeOutputs(rep *bench.Report, dir string) error {
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{{"results.md", rep.WriteMarkdown}, {"results.json", rep.WriteJSON}} {
		fh, err := os.Create(filepath.Join(dir, f.name))
		if err != nil {
			return err
		}
		err = f.write(fh)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// targetFP is the default namespace's target false-positive rate, which
// every system of the run is sized for.
const targetFP = 0.01

// quickChecks returns what makes a quick run fail: a system that did not run
// (or had errors), a false negative, an invalid answer, or a measured
// false-positive rate above the target by more than three standard errors.
func quickChecks(rep *bench.Report, systems []string, memoryOnly bool) []string {
	var bad []string
	for _, name := range systems {
		found := false
		for _, r := range rep.Results {
			if r.System != name {
				continue
			}
			found = true
			id := fmt.Sprintf("%s U=%s", name, bench.FormatUsers(r.Users))
			if memoryOnly {
				if r.FillPhase.Calls == 0 || r.Err != "" || r.Stopped != "" {
					bad = append(bad, id+": did not complete the fill")
				}
			} else if !r.Ran() {
				bad = append(bad, fmt.Sprintf("%s: did not run cleanly (saturation %d calls, %d errors; open loop %d calls, %d errors; %s%s)",
					id, r.Saturation.Calls, r.Saturation.Errors, r.Open.Calls, r.Open.Errors, r.Stopped, r.Err))
			}
			k := r.Correctness
			if k.Checks == 0 {
				bad = append(bad, id+": no answer was checked")
			}
			if k.FalseNegatives != 0 {
				bad = append(bad, fmt.Sprintf("%s: %d false negatives", id, k.FalseNegatives))
			}
			if k.BadAnswers != 0 {
				bad = append(bad, fmt.Sprintf("%s: %d invalid answers", id, k.BadAnswers))
			}
			if k.NeverShown > 0 {
				limit := targetFP + 3*math.Sqrt(targetFP*(1-targetFP)/float64(k.NeverShown))
				if k.FPRate > limit {
					bad = append(bad, fmt.Sprintf("%s: false-positive rate %.4f%% over %.4f%% (target + 3 standard errors)", id, 100*k.FPRate, 100*limit))
				}
			}
		}
		if !found {
			bad = append(bad, name+": no result")
		}
	}
	return bad
}
