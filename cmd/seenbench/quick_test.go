package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seenapi/seenapi/bench"
	"github.com/seenapi/seenapi/eviction"
)

// TestQuickRunsEverySystemAndHoldsCorrectness runs `seenbench --quick` end
// to end: it builds and starts the real seenapi server, starts a real
// redis-server, drives all four systems and checks the outputs. Without
// redis-server it skips, unless CI=true, where it fails.
func TestQuickRunsEverySystemAndHoldsCorrectness(t *testing.T) {
	if testing.Short() {
		t.Skip("the quick run takes about a minute")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is missing (CI=true: install it, e.g. ./test.sh)")
		}
		t.Skip("redis-server is missing")
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := run(ctx, []string{"--quick", "--out", out, "--data-dir", t.TempDir()}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("seenbench --quick: %v\nstderr:\n%s", err, stderr.String())
	}

	var rep bench.Report
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	for _, name := range allSystems {
		var r *bench.Result
		for i := range rep.Results {
			if rep.Results[i].System == name {
				r = &rep.Results[i]
			}
		}
		if r == nil {
			t.Errorf("%s: no result", name)
			continue
		}
		if !r.Ran() || r.Correctness.Checks == 0 || r.Correctness.FalseNegatives != 0 {
			t.Errorf("%s: ran %v, %d checks, %d false negatives", name, r.Ran(), r.Correctness.Checks, r.Correctness.FalseNegatives)
		}
		// seenapi over HTTP reports its own time per call beside the
		// client's; none of it can exceed what the client saw.
		if name == "seenapi-http" && (r.ServerOpen.Count == 0 || r.ServerOpen.P50 <= 0 ||
			r.ServerOpen.Count > r.Open.Calls || r.ServerOpen.P50 > r.Open.Latency.P99) {
			t.Errorf("%s: server timing %+v against the open loop's %d calls, p99 %v", name, r.ServerOpen, r.Open.Calls, r.Open.Latency.P99)
		}
		// Only seenapi over HTTP reports a server's collector (its /v1/stats).
		if (name == "seenapi-http") != (r.ServerGCSat != nil && r.ServerGCOpen != nil) {
			t.Errorf("%s: server collections %v / %v", name, r.ServerGCSat, r.ServerGCOpen)
		}
		if !strings.Contains(stdout.String(), "| "+name+" |") {
			t.Errorf("%s: no row in the Markdown table", name)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil || !bytes.Equal(md, stdout.Bytes()) {
		t.Errorf("results.md differs from the table printed (err %v)", err)
	}
	for _, f := range []string{bench.PlotRate, bench.PlotP99, bench.PlotMemory} {
		fh, err := os.Open(filepath.Join(out, f))
		if err != nil {
			t.Error(err)
			continue
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil || img.Bounds().Dx() < 100 {
			t.Errorf("%s: not a plot: %v", f, err)
		}
	}
}

func TestParseUsersAcceptsExponents(t *testing.T) {
	got, err := parseUsers("1e4, 2e3,100000")
	if err != nil || len(got) != 3 || got[0] != 10000 || got[1] != 2000 || got[2] != 100000 {
		t.Errorf("parseUsers = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1.5", "-3", "x"} {
		if _, err := parseUsers(bad); err == nil {
			t.Errorf("parseUsers(%q) accepted", bad)
		}
	}
}

func TestParseBytesAcceptsUnits(t *testing.T) {
	for in, want := range map[string]int64{"16GiB": 16 << 30, "512MiB": 512 << 20, "1e9": 1e9, "0": 0, "2GB": 2e9} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestQuickRejectsAnUnknownSystem(t *testing.T) {
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"--quick", "--systems", "memcached", "--out", t.TempDir()}, &bytes.Buffer{}, &stderr)
	if err == nil || !strings.Contains(err.Error(), "unknown system") {
		t.Errorf("err = %v, want unknown system", err)
	}
}

// A flag value out of range is refused before anything runs, naming the
// flag, rather than replaced by a default (--duration 0 ran 20 s) or run
// as given (--open-fraction 2, beyond saturation).
func TestParseFlagsRejectsOutOfRangeValues(t *testing.T) {
	for _, args := range [][]string{
		{"--duration", "0s"}, {"--duration", "-1s"}, {"--warm", "-2s"},
		{"--open-fraction", "0"}, {"--open-fraction", "2"}, {"--open-fraction", "-1"},
		{"--sample", "0"}, {"--sample", "-5"}, {"--fill", "-3"}, {"--client-procs", "-1"},
		{"--zipf", "0.5"}, {"--memory-limit", "0"}, {"--window-speed", "0"},
		{"--flush-interval", "-1s"}, {"--flush-interval", "1us"},
	} {
		_, err := parseFlags(args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: err = %v, want one naming %s", args, err, args[0])
		}
	}
	if _, err := parseFlags([]string{"--uniform", "--fill", "0", "--warm", "0s", "--open-fraction", "1"}, io.Discard); err != nil {
		t.Errorf("valid flags refused: %v", err)
	}
}

// --flush-interval sets seenapi's write-back interval, about which each
// settle waits for the last changes to be written back: at 50 ms the
// settle after the fill takes far less than the default's 5 s. The quick
// run takes 1 s unless told otherwise.
func TestFlushIntervalShortensTheSettle(t *testing.T) {
	out := t.TempDir()
	err := run(context.Background(), []string{"--systems", "seenapi-inproc", "--users", "200", "--concurrency", "4", "--sample", "20",
		"--warm", "200ms", "--duration", "300ms", "--flush-interval", "50ms", "--out", out, "--data-dir", t.TempDir()}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil || len(rep.Results) != 1 {
		t.Fatalf("results.json: %v, %d results", err, len(rep.Results))
	}
	if r := rep.Results[0]; r.Settle >= eviction.DefaultFlushInterval/2 || r.SettleSaturation >= eviction.DefaultFlushInterval/2 {
		t.Errorf("settled in %v after the fill and %v after the saturation phase, at a flush interval of 50ms", r.Settle, r.SettleSaturation)
	}
	for args, want := range map[string]time.Duration{"--quick": time.Second, "--quick --flush-interval 3s": 3 * time.Second, "": 0} {
		if c, err := parseFlags(strings.Fields(args), io.Discard); err != nil || c.flushEvery != want {
			t.Errorf("%q: %+v (%v), want a flush interval of %v", args, c, err, want)
		}
	}
}

// A run a signal ends before any system finished says so, and that it
// wrote no results: it said they were in --out, where there were none.
func TestRunInterruptedBeforeAnySystemSaysNothingWasWritten(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupt signal received"))
	out := t.TempDir()
	err := run(ctx, []string{"--quick", "--systems", "seenapi-inproc", "--out", out, "--data-dir", t.TempDir()}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "interrupted (interrupt signal received) before any system finished: no results were written") {
		t.Errorf("err = %v, want the interruption and that no results were written", err)
	}
	if _, serr := os.Stat(filepath.Join(out, "results.md")); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("results.md: %v, want none", serr)
	}
}

// cancelOn is a log that cancels a run once a line holding what appears.
type cancelOn struct {
	what   string
	cancel context.CancelCauseFunc
	log    bytes.Buffer
}

func (c *cancelOn) Write(b []byte) (int, error) {
	c.log.Write(b)
	if bytes.Contains(c.log.Bytes(), []byte(c.what)) {
		c.cancel(errors.New("interrupt signal received"))
	}
	return len(b), nil
}

// A run a signal ends after a system finished says so, and where the
// results of the systems it finished are.
func TestRunInterruptedAfterASystemSaysWhereItsResultsAre(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	out := t.TempDir()
	log := &cancelOn{what: "seenbench: seenapi-inproc U=2e2: ", cancel: cancel}
	err := run(ctx, []string{"--systems", "seenapi-inproc", "--users", "200,300", "--concurrency", "4", "--sample", "20",
		"--warm", "200ms", "--duration", "300ms", "--flush-interval", "50ms", "--out", out, "--data-dir", t.TempDir()}, io.Discard, log)
	if err == nil || !strings.Contains(err.Error(), "interrupted (interrupt signal received); the results of the systems that completed are in "+out) {
		t.Errorf("err = %v, want the interruption and %s; log:\n%s", err, out, log.log.String())
	}
	var rep bench.Report
	b, rerr := os.ReadFile(filepath.Join(out, "results.json"))
	if rerr == nil {
		rerr = json.Unmarshal(b, &rep)
	}
	if rerr != nil || len(rep.Results) != 1 || rep.Results[0].Users != 200 {
		t.Errorf("results.json: %v, %d results, want the one at U=200", rerr, len(rep.Results))
	}
}

// A --data-dir not there yet is made, as --out is: every seenapi system
// failed its setup on it ("stat DIR: no such file or directory").
func TestDataDirIsMadeWhenMissing(t *testing.T) {
	data := filepath.Join(t.TempDir(), "not", "yet")
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"--systems", "seenapi-inproc", "--users", "200", "--concurrency", "4", "--sample", "20",
		"--memory-only", "--out", t.TempDir(), "--data-dir", data}, io.Discard, &stderr)
	if err != nil {
		t.Errorf("seenbench --data-dir %s: %v\nstderr:\n%s", data, err, stderr.String())
	}
}

func TestFormatBytesIsReadable(t *testing.T) {
	for n, want := range map[int64]string{16 << 30: "16 GiB", 512 << 20: "512 MiB", 20e6: "20 MB", 1.5e9: "1.5 GB", 1000: "1000 B"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// A memory-only run's line gives the fill's figures, not a saturation of
// 0 calls/s.
func TestSummaryOfAMemoryOnlyRunGivesTheFill(t *testing.T) {
	r := bench.Result{FillPhase: bench.Phase{Calls: 2000, Rate: 5000}, MemPerUser: 667}
	if got := summary(r); !strings.HasPrefix(got, "fill 5000 calls/s, 667 B/user") {
		t.Errorf("summary = %q", got)
	}
}
