package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Report is a whole run: its settings and one Result per system and user count.
type Report struct {
	Command     string    `json:"command"`
	Started     time.Time `json:"started"`
	GoVersion   string    `json:"go_version"`
	CPUs        int       `json:"cpus"`         // cores of the machine
	ClientProcs int       `json:"client_procs"` // GOMAXPROCS of the harness (the client)
	Concurrency int       `json:"concurrency"`
	// Levels are the concurrencies each system's warm-up tried when there
	// are several (RunOptions.Levels); each result gives the one it used.
	Levels   []int    `json:"concurrency_levels,omitempty"`
	Workload Workload `json:"workload"` // Users is per result
	Fill     int      `json:"fill_items_per_user"`
	Warm     string   `json:"warm"`
	Duration string   `json:"duration"`
	OpenFrac float64  `json:"open_fraction"`
	Sample   int      `json:"sampled_users"`
	Notes    []string `json:"notes"`
	Results  []Result `json:"results"`
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// formatUsers writes a user count as 1e4, 2e3, 12345.
func formatUsers(n int) string {
	if n <= 0 {
		return strconv.Itoa(n)
	}
	e := int(math.Floor(math.Log10(float64(n))))
	for ; e >= 1; e-- {
		p := int(math.Pow10(e))
		if n%p == 0 && n/p < 10 {
			return fmt.Sprintf("%de%d", n/p, e)
		}
	}
	return strconv.Itoa(n)
}

// FormatUsers is formatUsers for the command.
func FormatUsers(n int) string { return formatUsers(n) }

func us(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	v := float64(d) / float64(time.Microsecond)
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.1f ms", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f us", v)
	default:
		return fmt.Sprintf("%.1f us", v)
	}
}

// ms formats d in whole milliseconds (0 as "0 ms", unlike us).
func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func bytesPer(v float64) string {
	switch {
	case v < 0:
		return "-"
	case v >= 10000:
		return fmt.Sprintf("%.1f KB", v/1000)
	default:
		return fmt.Sprintf("%.0f B", v)
	}
}

func ratio(a, b float64) string {
	if a <= 0 || b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "-"
	}
	r := a / b
	switch {
	case r >= 10:
		return fmt.Sprintf("%.0fx", r)
	case r >= 0.1:
		return fmt.Sprintf("%.2fx", r)
	default:
		return fmt.Sprintf("1/%.0f", 1/r)
	}
}

// ReferenceSystem is the system the ratios of the report are taken against.
const ReferenceSystem = "redis-set"

func (r *Report) reference(res Result) (Result, bool) {
	for _, x := range r.Results {
		if x.System == ReferenceSystem && x.Users == res.Users && x.Zipf == res.Zipf && x.Fill == res.Fill {
			return x, x.Stopped == "" // a figure it lacks gives no ratio (see ratio)
		}
	}
	return Result{}, false
}

// Goroutines says how many client goroutines the closed and open loops
// used.
func (r *Report) Goroutines() string {
	if len(r.Levels) < 2 {
		return fmt.Sprintf("%d client goroutines closed loop (%d open loop)", r.Concurrency, 2*r.Concurrency)
	}
	levels := make([]string, len(r.Levels))
	for i, n := range r.Levels {
		levels[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("saturation at whichever of %s client goroutines made the most calls a second in the warm-up "+
		"(each system's below); the fill at %d, the open loop at %d", strings.Join(levels, ", "), r.Concurrency, 2*r.Concurrency)
}

// WriteMarkdown writes the report's table (the one the README shows) with
// its settings.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	dist := "uniform"
	if r.Workload.Zipf > 0 {
		dist = fmt.Sprintf("Zipf s=%g", r.Workload.Zipf)
	}
	fmt.Fprintf(&b, "# seenbench results\n\n")
	fmt.Fprintf(&b, "Workload: feed, users chosen by %s; pool %d items/user; %d candidates/call; limit %d, record returned; seed %d.\n\n",
		dist, r.Workload.Pool, r.Workload.Candidates, r.Workload.Limit, r.Workload.Seed)
	fmt.Fprintf(&b, "Run: %s on %d cores; client GOMAXPROCS %d; %s; "+
		"fill %d items/user (one call per user; the Redis systems record unchecked users' items with one SADD, or one SET of the whole bitmap), warm-up %s unmeasured, then %s at saturation and %s open loop at %.0f%% of it; "+
		"%d users checked exactly.\n\n",
		r.GoVersion, r.CPUs, r.ClientProcs, r.Goroutines(), r.Fill, r.Warm, r.Duration, r.Duration,
		100*r.OpenFrac, r.Sample)
	fmt.Fprintf(&b, "Command: `%s`\n\n", r.Command)
	b.WriteString("| system | users | calls/s (saturation) | vs SET | p50 | p99 | p99.9 | p99 vs SET | p99 outside slowdowns | vs SET | server CPU/call | vs SET | memory/user | vs SET | disk/user | FP rate | false neg. | hit ratio | cold p50/p99 | client CPU/call | other load | host slowdowns (open loop) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, res := range r.Results {
		ref, hasRef := r.reference(res)
		row := []string{res.System, formatUsers(res.Users)}
		if res.Stopped != "" {
			row = append(row, "stopped: "+res.Stopped)
			for len(row) < 22 {
				row = append(row, "")
			}
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
			continue
		}
		rr := func(a, b float64) string {
			if !hasRef || res.System == ReferenceSystem {
				return "-"
			}
			return ratio(a, b)
		}
		cpu := us(res.CPUPerCall)
		if res.CPUInclClient {
			cpu += " (incl. client)"
		}
		mem := bytesPer(res.MemPerUser)
		if res.MemoryFilled.Kind != "" {
			mem += " (" + res.MemoryFilled.Kind
			if res.AnonPerUser != 0 {
				mem += ", anon " + bytesPer(res.AnonPerUser)
			}
			mem += ")"
		}
		fp := "-"
		if res.Correctness.NeverShown > 0 {
			fp = fmt.Sprintf("%.3f%%", 100*res.Correctness.FPRate)
		}
		hit := "-"
		if res.HitRatio >= 0 {
			hit = fmt.Sprintf("%.4f", res.HitRatio)
		}
		cold := "-"
		if res.Cold.Count > 0 {
			cold = us(res.Cold.P50) + " / " + us(res.Cold.P99)
		}
		calm, calmVsRef := "-", "-"
		if res.Open.Calm.Count > 0 {
			calm = us(res.Open.Calm.P99)
			if ref.Open.Calm.Count > 0 {
				calmVsRef = rr(float64(res.Open.Calm.P99), float64(ref.Open.Calm.P99))
			}
		}
		rate := fmt.Sprintf("%.0f", res.Saturation.Rate)
		if res.Err != "" {
			rate += " (errors)"
		}
		row = append(row, rate, rr(res.Saturation.Rate, ref.Saturation.Rate),
			us(res.Open.Latency.P50), us(res.Open.Latency.P99), us(res.Open.Latency.P999),
			rr(float64(res.Open.Latency.P99), float64(ref.Open.Latency.P99)),
			calm, calmVsRef,
			cpu, rr(float64(res.CPUPerCall), float64(ref.CPUPerCall)),
			mem, rr(res.MemPerUser, ref.MemPerUser),
			bytesPer(res.DiskPerUser), fp, strconv.FormatInt(res.Correctness.FalseNegatives, 10), hit, cold,
			us(res.ClientCPUPerCall), fmt.Sprintf("%.2f cores", res.OtherLoad),
			fmt.Sprintf("%.0f%% of the time; steal %.2f cores", 100*res.Open.Speed.Slowed, res.Open.Steal))
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	b.WriteString("\nLatency is measured in the open-loop phase from each call's intended send time (no coordinated omission). " +
		"Server CPU/call is user+system time of the server process (/proc/<pid>/stat) over the saturation phase divided by its calls. " +
		"Memory/user is (memory after the fill - memory right after start) / users: RSS of the seenapi process (anon: its anonymous part, without mapped files), " +
		"used_memory of redis-server, the hot set's accounted bytes in-process. Disk/user is the data directory's allocated bytes after write-back, with the store closed. " +
		"Hit ratio: over the phases after the fill. Cold latency: one call per checked user right after a restart (every user cold). " +
		"Client CPU/call is the harness's own CPU per call; other load is the CPU that other processes on the machine took during the saturation phase " +
		"(from /proc/stat), which disturbs every figure but CPU/call. " +
		"Host slowdowns: the share of the open loop's 100 ms slots in which the CPU ran at under half its speed " +
		"(timing a fixed piece of arithmetic every 2 ms in its thread's own CPU time) or the host stole time (/proc/stat's steal, whose total is also given); " +
		"the host of this virtual machine slows its CPUs for a tenth of a second at a time without counting it as steal. " +
		"Every process slows at once, client and server, and calls queue behind the slow stretch, so such slots make the p99 of every system in the run. " +
		"p99 outside slowdowns is over the calls intended in no slowed slot, nor in the slot before one or the two after it; " +
		"what share of the calls that leaves is in results.json (latency_calm).\n")
	for _, n := range r.Notes {
		b.WriteString("\n" + n + "\n")
	}
	for _, res := range r.Results {
		if l := res.ServerOpen; l.Count > 0 {
			fmt.Fprintf(&b, "\n%s U=%s, the server's own time per call in the open loop (its request-duration histogram, %d calls): "+
				"p50 %s, p99 %s, p99.9 %s; the rest of the latency above is the client, the network stack and the wait for a core.\n",
				res.System, formatUsers(res.Users), l.Count, us(l.P50), us(l.P99), us(l.P999))
		}
	}
	for _, res := range r.Results {
		if res.Ran() && res.Saturation.Calls > 0 {
			b.WriteString("\n" + collectionsNote(res) + "\n")
		}
	}
	for _, res := range r.Results {
		if res.Ran() && res.Saturation.Calls > 0 && res.Open.Calls > 0 {
			b.WriteString("\n" + coresNote(res, r.CPUs) + "\n")
		}
	}
	for _, res := range r.Results {
		if n := tailNote(res); res.Ran() && n != "" {
			b.WriteString("\n" + n + "\n")
		}
	}
	for _, res := range r.Results {
		if len(res.Probes) > 0 {
			probes := make([]string, len(res.Probes))
			for i, p := range res.Probes {
				probes[i] = fmt.Sprintf("%d: %.0f", p.Concurrency, p.Rate)
			}
			fmt.Fprintf(&b, "\n%s U=%s, the warm-up's calls/s by client goroutines: %s; saturation measured at %d.\n",
				res.System, formatUsers(res.Users), strings.Join(probes, ", "), res.Concurrency)
		}
	}
	for _, res := range r.Results {
		if res.Settle > 0 {
			fmt.Fprintf(&b, "\n%s U=%s worked off its write-back backlog in %s after the fill and in %s after the saturation phase.\n",
				res.System, formatUsers(res.Users), res.Settle.Round(100*time.Millisecond), res.SettleSaturation.Round(100*time.Millisecond))
		}
	}
	for _, res := range r.Results {
		if c := res.Correctness; res.Window != "" {
			fmt.Fprintf(&b, "\n%s U=%s, window %s: %d items tested after expiring, %d of them reported seen; %d false negatives.\n",
				res.System, formatUsers(res.Users), res.Window, c.Expired, c.ExpiredSeen, c.FalseNegatives)
		}
	}
	var errs []string
	for _, res := range r.Results {
		if res.Err != "" {
			errs = append(errs, fmt.Sprintf("- %s U=%s: %s", res.System, formatUsers(res.Users), res.Err))
		}
	}
	if len(errs) > 0 {
		b.WriteString("\nErrors:\n" + strings.Join(errs, "\n") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// coresNote says how a result's saturation phase and open loop shared the
// machine's cores, and how long threads waited for one per call.
func coresNote(res Result, cpus int) string {
	phase := func(name string, c Cores) string {
		if res.CPUInclClient {
			return fmt.Sprintf("%s this process (client and hot set) took %.2f of the %d cores; "+
				"its threads waited for a core %s per call", name, c.Server, cpus, us(c.ServerWait))
		}
		return fmt.Sprintf("%s the server took %.2f of the %d cores and the client %.2f; "+
			"threads ready to run waited for a core %s per call in the server and %s in the client",
			name, c.Server, cpus, c.Client, us(c.ServerWait), us(c.ClientWait))
	}
	return fmt.Sprintf("%s U=%s, the cores (/proc/<pid>/stat, run_delay of /proc/<pid>/task/*/schedstat): %s; %s.",
		res.System, formatUsers(res.Users), phase("at saturation", res.Saturation.Cores), phase("in the open loop", res.Open.Cores))
}

// tailNote says where a result's open loop had its worst call and who had
// the cores while the calls around it queued (Phase.worstStretch), against
// the loop's average: a server that takes the client's cores in a burst of
// its own work shows as the server's cores up and the client's down.
func tailNote(res Result) string {
	o := res.Open
	slot, worst, serverMax, clientMin, ok := o.worstStretch()
	if !ok {
		return ""
	}
	at := (time.Duration(slot) * timelineSlot).Seconds()
	head := fmt.Sprintf("%s U=%s, the open loop's worst call was intended %.1f s in and took %s; from %s before it until it was answered, ",
		res.System, formatUsers(res.Users), at, ms(worst), ms(coresBefore*timelineSlot))
	if res.CPUInclClient {
		return head + fmt.Sprintf("this process (client and hot set) took up to %.2f cores in a 100 ms slot, against %.2f over the loop.",
			serverMax, o.Cores.Server)
	}
	return head + fmt.Sprintf("the server took up to %.2f cores in a 100 ms slot and the client as few as %.2f, against %.2f and %.2f over the loop "+
		"(cores_per_100ms in results.json).", serverMax, clientMin, o.Cores.Server, o.Cores.Client)
}

// collectionsNote says how many collections fell in a result's saturation
// phase and open loop and what CPU they took (the Go runtime's estimate),
// the server's (seenapi over HTTP) and the harness's own.
func collectionsNote(res Result) string {
	share := func(c Collected, of time.Duration) string {
		if of <= 0 {
			return ""
		}
		return fmt.Sprintf(", %.1f%% of its CPU", 100*c.CPU.Seconds()/of.Seconds())
	}
	perCall := func(c Collected, p Phase) string {
		if p.Calls <= 0 || c.Allocated == 0 {
			return ""
		}
		return fmt.Sprintf(", %d B allocated a call", c.Allocated/uint64(p.Calls))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s U=%s, collections (the Go runtime's count and CPU estimate, its marking on otherwise idle cores left out): ", res.System, formatUsers(res.Users))
	if sat, open := res.ServerGCSat, res.ServerGCOpen; sat != nil && open != nil {
		fmt.Fprintf(&b, "the server's %d at saturation (%s of CPU%s%s) and %d in the open loop (%s%s); ",
			sat.Cycles, ms(sat.CPU), share(*sat, res.Saturation.CPU), perCall(*sat, res.Saturation),
			open.Cycles, ms(open.CPU), perCall(*open, res.Open))
	}
	who := "the client's"
	if res.CPUInclClient {
		who = "the client's and the hot set's (one process)"
	}
	fmt.Fprintf(&b, "%s %d at saturation (%s%s) and %d in the open loop (%s%s).", who,
		res.ClientGCSat.Cycles, ms(res.ClientGCSat.CPU), perCall(res.ClientGCSat, res.Saturation),
		res.ClientGCOpen.Cycles, ms(res.ClientGCOpen.CPU), perCall(res.ClientGCOpen, res.Open))
	return b.String()
}
