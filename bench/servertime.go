package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"runtime/metrics"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/valyala/fasthttp"
)

// ServerTimer is a System that measures its own time per call (seenapi:
// the request-duration histogram of GET /metrics). The run reads it before
// and after the open loop, so the report can tell the server's share of
// the latency from what the client and the machine add (the client shares
// the cores).
type ServerTimer interface {
	// CallDurations returns the server's cumulative histogram of the one
	// call's durations since it started.
	CallDurations(ctx context.Context) (Histogram, error)
}

// Histogram is a cumulative histogram: Counts[i] observations of at most
// Upper[i] seconds; the last bound is +Inf.
type Histogram struct {
	Upper  []float64
	Counts []uint64
}

// Sub returns h minus an earlier snapshot of the same histogram.
func (h Histogram) Sub(earlier Histogram) Histogram {
	out := Histogram{Upper: h.Upper, Counts: make([]uint64, len(h.Counts))}
	for i := range h.Counts {
		out.Counts[i] = h.Counts[i]
		if i < len(earlier.Counts) {
			out.Counts[i] -= min(earlier.Counts[i], h.Counts[i])
		}
	}
	return out
}

// Quantile returns the q-quantile, interpolated linearly inside its bucket
// (the first bucket from 0; a quantile in the +Inf bucket is its lower
// bound). 0 for an empty histogram.
func (h Histogram) Quantile(q float64) time.Duration {
	n := len(h.Counts)
	if n == 0 || h.Counts[n-1] == 0 {
		return 0
	}
	rank := q * float64(h.Counts[n-1])
	for i, c := range h.Counts {
		if float64(c) < rank {
			continue
		}
		lo, below := 0.0, uint64(0)
		if i > 0 {
			lo, below = h.Upper[i-1], h.Counts[i-1]
		}
		hi := h.Upper[i]
		if math.IsInf(hi, 1) || c == below {
			return seconds(lo)
		}
		return seconds(lo + (hi-lo)*(rank-float64(below))/float64(c-below))
	}
	return seconds(h.Upper[n-2])
}

// Latency summarizes h as the report's latency figures (Max: the upper
// bound of the highest bucket used).
func (h Histogram) Latency() Latency {
	n := len(h.Counts)
	if n == 0 {
		return Latency{}
	}
	l := Latency{Count: int64(h.Counts[n-1]), P50: h.Quantile(0.5), P99: h.Quantile(0.99), P999: h.Quantile(0.999)}
	for i := range h.Counts {
		if h.Counts[i] == h.Counts[n-1] {
			l.Max = seconds(h.Upper[i])
			if math.IsInf(h.Upper[i], 1) && i > 0 {
				l.Max = seconds(h.Upper[i-1])
			}
			break
		}
	}
	return l
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// filterRoute is the one call's route label in seenapi's metrics.
const filterRoute = "POST /v1/namespaces/{ns}/users/{user}/filter"

// CallDurations reads the one call's request-duration histogram from GET /metrics.
func (s *HTTPClient) CallDurations(context.Context) (Histogram, error) {
	code, body, err := s.client.GetTimeout(nil, s.base+"/metrics", 10*time.Second)
	if err != nil {
		return Histogram{}, err
	}
	if code != fasthttp.StatusOK {
		return Histogram{}, fmt.Errorf("%w: GET /metrics: HTTP %d", ErrServer, code)
	}
	return parseCallDurations(body)
}

// parseCallDurations finds the one call's histogram in a Prometheus text
// exposition.
func parseCallDurations(body []byte) (Histogram, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return Histogram{}, fmt.Errorf("%w: GET /metrics: %v", ErrServer, err)
	}
	fam, ok := fams["seenapi_http_request_duration_seconds"]
	if !ok || fam.GetType() != dto.MetricType_HISTOGRAM {
		return Histogram{}, fmt.Errorf("%w: GET /metrics has no request-duration histogram", ErrServer)
	}
	for _, m := range fam.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() != "route" || l.GetValue() != filterRoute {
				continue
			}
			var h Histogram
			for _, b := range m.GetHistogram().GetBucket() {
				h.Upper = append(h.Upper, b.GetUpperBound())
				h.Counts = append(h.Counts, b.GetCumulativeCount())
			}
			if len(h.Upper) == 0 || !math.IsInf(h.Upper[len(h.Upper)-1], 1) {
				h.Upper = append(h.Upper, math.Inf(1))
				h.Counts = append(h.Counts, m.GetHistogram().GetSampleCount())
			}
			return h, nil
		}
	}
	return Histogram{}, fmt.Errorf("%w: GET /metrics has no duration histogram of %s", ErrServer, filterRoute)
}

// CallDurations reads the server's histogram of the one call's durations.
func (s *SeenapiHTTP) CallDurations(ctx context.Context) (Histogram, error) {
	return s.client.CallDurations(ctx)
}

// Collected is what a Go process's collector has done since the process
// started: completed cycles and the CPU they took from work, as the Go
// runtime estimates it (runtime/metrics /gc/cycles/total, and
// /cpu/classes/gc/total less /cpu/classes/gc/mark/idle: marking on cores
// that would otherwise be idle takes nothing from calls, as GET /v1/stats
// counts it too). With millions of users hot every cycle marks all
// of them, about a second of CPU at a million, so whether one fell inside
// a phase explains much of that phase's latency tail.
type Collected struct {
	Cycles uint64        `json:"cycles"`
	CPU    time.Duration `json:"cpu_ns"`
	// Allocated is what the process allocated on the Go heap
	// (/gc/heap/allocs:bytes): its rate paces the collections, so bytes a
	// call say how often they come at a given rate of calls.
	Allocated uint64 `json:"allocated_bytes"`
}

// Sub returns c minus an earlier reading of the same process.
func (c Collected) Sub(earlier Collected) Collected {
	return Collected{Cycles: c.Cycles - min(earlier.Cycles, c.Cycles), CPU: max(0, c.CPU-earlier.CPU),
		Allocated: c.Allocated - min(earlier.Allocated, c.Allocated)}
}

// since is Sub for readings that may be missing: nil unless both are there.
func (c *Collected) since(earlier *Collected) *Collected {
	if c == nil || earlier == nil {
		return nil
	}
	d := c.Sub(*earlier)
	return &d
}

// GCReporter is a System whose server is a Go process that reports its
// collector's work (seenapi: GET /v1/stats).
type GCReporter interface {
	// ServerGC returns the server's collector's work since it started.
	ServerGC(ctx context.Context) (Collected, error)
}

// selfGC returns this process's collector's work since it started (for
// seenapi-inproc, the hot set's collections are these).
func selfGC() Collected {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/gc/heap/allocs:bytes"}, {Name: "/cpu/classes/gc/mark/idle:cpu-seconds"}}
	metrics.Read(s)
	var c Collected
	if s[0].Value.Kind() == metrics.KindUint64 {
		c.Cycles = s[0].Value.Uint64()
	}
	if s[2].Value.Kind() == metrics.KindUint64 {
		c.Allocated = s[2].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindFloat64 && s[3].Value.Kind() == metrics.KindFloat64 {
		c.CPU = max(0, seconds(s[1].Value.Float64()-s[3].Value.Float64()))
	}
	return c
}
