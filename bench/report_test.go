package bench

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleReport() *Report {
	r := &Report{Workload: DefaultWorkload(0), Fill: 200, OpenFrac: 0.5, Concurrency: 16}
	for _, u := range []int{10000, 100000} {
		for i, sys := range []string{"seenapi-http", ReferenceSystem} {
			f := float64(i + 1)
			r.Results = append(r.Results, Result{System: sys, Users: u, Zipf: 1.1, Fill: 200,
				Saturation: Phase{Calls: 1000, Rate: 30000 / f}, Open: Phase{Calls: 500, Latency: Latency{P99: time.Duration(f) * time.Millisecond}},
				CPUPerCall: time.Duration(20*f) * time.Microsecond, MemPerUser: 400 * f * f * f, DiskPerUser: -1, HitRatio: -1})
		}
	}
	r.Results = append(r.Results, Result{System: ReferenceSystem, Users: 10000000, Stopped: "would exceed 16 GiB"})
	return r
}

// sampleMarkdown is sampleReport written as Markdown.
func sampleMarkdown(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	if err := sampleReport().WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestMarkdownTableGivesRatiosAgainstTheRedisSet(t *testing.T) {
	md := sampleMarkdown(t)
	for _, want := range []string{"| seenapi-http | 1e4 | 30000 | 2.00x |", "| 0.50x |", "| 0.12x |", "stopped: would exceed 16 GiB"} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
}

func TestReportRoundTripsThroughJSON(t *testing.T) {
	var b bytes.Buffer
	r := sampleReport()
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != len(r.Results) || back.Results[0].Saturation.Rate != 30000 {
		t.Errorf("results after a round trip: %+v", back.Results)
	}
}

func TestWritePlotsDrawsEveryPNG(t *testing.T) {
	dir := t.TempDir()
	files, err := sampleReport().WritePlots(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("wrote %v, want 3 plots", files)
	}
	for _, name := range []string{PlotRate, PlotP99, PlotMemory} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() < 300 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestFormatUsers(t *testing.T) {
	for n, want := range map[int]string{10000: "1e4", 2000: "2e3", 12345: "12345", 7: "7", 10000000: "1e7"} {
		if got := formatUsers(n); got != want {
			t.Errorf("formatUsers(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestWritePlotsLeavesOutPlotsWithoutValues(t *testing.T) {
	r := sampleReport()
	for i := range r.Results {
		r.Results[i].Saturation, r.Results[i].Open = Phase{}, Phase{} // a memory-only run
	}
	files, err := r.WritePlots(t.TempDir())
	if err != nil || len(files) != 1 || filepath.Base(files[0]) != PlotMemory {
		t.Errorf("wrote %v, %v; want only the memory plot", files, err)
	}
}

func TestCollectionsNoteGivesTheCollectorsCyclesAndShare(t *testing.T) {
	res := Result{System: "seenapi-http", Users: 1000000, Saturation: Phase{Calls: 100, CPU: 2 * time.Second},
		ServerGCSat:  &Collected{Cycles: 1, CPU: 100 * time.Millisecond},
		ServerGCOpen: &Collected{Cycles: 2, CPU: 1500 * time.Millisecond},
		ClientGCSat:  Collected{Cycles: 7, CPU: 30 * time.Millisecond}}
	got := collectionsNote(res)
	for _, want := range []string{"seenapi-http U=1e6", "the server's 1 at saturation (100 ms of CPU, 5.0% of its CPU)",
		"2 in the open loop (1500 ms)", "the client's 7 at saturation (30 ms) and 0 in the open loop (0 ms)"} {
		if !strings.Contains(got, want) {
			t.Errorf("note lacks %q: %s", want, got)
		}
	}
	// With what each process allocated, the bytes a call of each phase.
	res.Open = Phase{Calls: 50}
	res.ServerGCSat.Allocated, res.ServerGCOpen.Allocated = 30000, 12500
	res.ClientGCSat.Allocated, res.ClientGCOpen.Allocated = 4000, 1000
	got = collectionsNote(res)
	for _, want := range []string{"5.0% of its CPU, 300 B allocated a call)", "(1500 ms, 250 B allocated a call)",
		"the client's 7 at saturation (30 ms, 40 B allocated a call) and 0 in the open loop (0 ms, 20 B allocated a call)"} {
		if !strings.Contains(got, want) {
			t.Errorf("note lacks %q: %s", want, got)
		}
	}
	// In-process, the harness's collector is the hot set's too; no server part.
	res = Result{System: "seenapi-inproc", Users: 1000, Saturation: Phase{Calls: 10}, CPUInclClient: true,
		ClientGCOpen: Collected{Cycles: 3, CPU: 4 * time.Millisecond}}
	got = collectionsNote(res)
	if strings.Contains(got, "server's") || !strings.Contains(got, "the client's and the hot set's (one process) 0 at saturation (0 ms) and 3 in the open loop (4 ms)") {
		t.Errorf("in-process note: %s", got)
	}
	// A server that reports none still says so.
	res = Result{System: "seenapi-http", Users: 1000, Saturation: Phase{Calls: 10}, ServerGCSat: &Collected{}, ServerGCOpen: &Collected{}}
	if got = collectionsNote(res); !strings.Contains(got, "the server's 0 at saturation (0 ms of CPU) and 0 in the open loop (0 ms)") {
		t.Errorf("note without collections: %s", got)
	}
	if md := sampleMarkdown(t); !strings.Contains(md, "seenapi-http U=1e4, collections") {
		t.Errorf("report lacks the collections note:\n%s", md)
	}
}

func TestCoresNoteSaysWhoTookTheCoresAndHowLongThreadsWaited(t *testing.T) {
	res := Result{System: "seenapi-http", Users: 100000,
		Saturation: Phase{Calls: 100, Cores: Cores{Server: 1.02, Client: 0.95, ServerWait: 150 * time.Microsecond, ClientWait: 90 * time.Microsecond}},
		Open:       Phase{Calls: 50, Cores: Cores{Server: 0.8, Client: 0.7, ServerWait: 300 * time.Microsecond, ClientWait: 2500 * time.Microsecond}}}
	got := coresNote(res, 2)
	for _, want := range []string{"seenapi-http U=1e5",
		"at saturation the server took 1.02 of the 2 cores and the client 0.95; threads ready to run waited for a core 150 us per call in the server and 90.0 us in the client",
		"in the open loop the server took 0.80 of the 2 cores and the client 0.70",
		"300 us per call in the server and 2500 us in the client"} {
		if !strings.Contains(got, want) {
			t.Errorf("note lacks %q: %s", want, got)
		}
	}
	// In-process, the harness is the server: one figure for both.
	res = Result{System: "seenapi-inproc", Users: 1000, CPUInclClient: true,
		Saturation: Phase{Calls: 10, Cores: Cores{Server: 1.9, ServerWait: 40 * time.Microsecond}},
		Open:       Phase{Calls: 5, Cores: Cores{Server: 0.9}}}
	got = coresNote(res, 2)
	if strings.Contains(got, "client 0") || !strings.Contains(got, "at saturation this process (client and hot set) took 1.90 of the 2 cores; its threads waited for a core 40.0 us per call") {
		t.Errorf("in-process note: %s", got)
	}
	if md := sampleMarkdown(t); !strings.Contains(md, "seenapi-http U=1e4, the cores") {
		t.Errorf("report lacks the cores note:\n%s", md)
	}
}

func TestTailNoteSaysWhoHadTheCoresWhileTheWorstCallsQueued(t *testing.T) {
	ms := time.Millisecond
	tl := make([]time.Duration, 30)
	cs := make([]SlotCores, 30)
	for i := range tl {
		tl[i], cs[i] = 2*ms, SlotCores{Server: 0.8, Client: 0.85}
	}
	// A burst of the server's work from slot 18 to 21 starves the client;
	// the calls intended in slot 20 wait 250 ms.
	tl[19], tl[20], tl[21] = 120*ms, 250*ms, 180*ms
	for i := 18; i <= 21; i++ {
		cs[i] = SlotCores{Server: 1.4 + float64(i-18)/10, Client: 0.6 - float64(i-18)/10}
	}
	cs[5] = SlotCores{Server: 1.9, Client: 0.1} // long before the worst call: not its cause
	res := Result{System: "seenapi-http", Users: 1000000, Saturation: Phase{Calls: 10},
		Open: Phase{Calls: 100, Timeline: tl, CoresTimeline: cs, Cores: Cores{Server: 0.83, Client: 0.86}}}
	slot, worst, srv, cli, ok := res.Open.worstStretch()
	if !ok || slot != 20 || worst != 250*ms || srv != 1.7 || cli < 0.29 || cli > 0.31 {
		t.Fatalf("worstStretch = slot %d, %v, server %.2f, client %.2f, %v; want slot 20, 250ms, 1.70, 0.30", slot, worst, srv, cli, ok)
	}
	got := tailNote(res)
	for _, want := range []string{"seenapi-http U=1e6, the open loop's worst call was intended 2.0 s in and took 250 ms",
		"the server took up to 1.70 cores in a 100 ms slot and the client as few as 0.30, against 0.83 and 0.86 over the loop"} {
		if !strings.Contains(got, want) {
			t.Errorf("note lacks %q: %s", want, got)
		}
	}
	// Without the cores (an old results.json), no note.
	res.Open.CoresTimeline = nil
	if n := tailNote(res); n != "" {
		t.Errorf("note without cores: %s", n)
	}
}

// A run whose every system stopped at the memory limit has nothing to plot,
// which is not an error of its own: the results say where each stopped.
func TestWritePlotsOfStoppedSystemsWritesNoneWithoutError(t *testing.T) {
	r := sampleReport()
	for i := range r.Results {
		r.Results[i] = Result{System: r.Results[i].System, Users: r.Results[i].Users, Stopped: "memory limit"}
	}
	if files, err := r.WritePlots(t.TempDir()); err != nil || len(files) != 0 {
		t.Errorf("wrote %v, %v; want none and no error", files, err)
	}
}
