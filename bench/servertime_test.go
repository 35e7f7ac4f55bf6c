package bench

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seenapi/seenapi/api"
)

func TestHistogramQuantileInterpolatesInsideItsBucket(t *testing.T) {
	// 100 calls: 50 of at most 1 ms, 40 more of at most 2 ms, 10 more of at most 4 ms.
	h := Histogram{Upper: []float64{0.001, 0.002, 0.004, math.Inf(1)}, Counts: []uint64{50, 90, 100, 100}}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{
		{0.25, 500 * time.Microsecond},  // halfway into the first bucket
		{0.5, time.Millisecond},         // its top
		{0.7, 1500 * time.Microsecond},  // halfway through the second
		{0.99, 3800 * time.Microsecond}, // 9 of the third's 10
	} {
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("q%v = %v, want %v", c.q, got, c.want)
		}
	}
	if l := h.Latency(); l.Count != 100 || l.Max != 4*time.Millisecond {
		t.Errorf("latency %+v, want 100 calls, max 4ms", l)
	}
}

func TestHistogramQuantileInTheInfBucketIsItsLowerBound(t *testing.T) {
	h := Histogram{Upper: []float64{0.001, math.Inf(1)}, Counts: []uint64{1, 10}}
	if got := h.Quantile(0.99); got != time.Millisecond {
		t.Errorf("q0.99 = %v, want 1ms", got)
	}
	if got := (Histogram{}).Quantile(0.5); got != 0 {
		t.Errorf("empty histogram q0.5 = %v, want 0", got)
	}
}

func TestHistogramSubLeavesTheCallsBetweenTwoSnapshots(t *testing.T) {
	before := Histogram{Upper: []float64{0.001, math.Inf(1)}, Counts: []uint64{5, 7}}
	after := Histogram{Upper: before.Upper, Counts: []uint64{15, 27}}
	d := after.Sub(before)
	if d.Counts[0] != 10 || d.Counts[1] != 20 {
		t.Errorf("difference %v, want [10 20]", d.Counts)
	}
}

// The exposition is the one client_golang writes, as seenapi serves it.
func TestParseCallDurationsReadsTheOneCallsHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "seenapi_http_request_duration_seconds",
		Buckets: []float64{0.001, 0.002}}, []string{"route"})
	reg.MustRegister(h)
	h.WithLabelValues("GET /v1/stats").Observe(0.0005)
	for _, d := range []float64{0.0005, 0.0015, 0.0015, 3} {
		h.WithLabelValues(filterRoute).Observe(d)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	got, err := parseCallDurations(rec.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := Histogram{Upper: []float64{0.001, 0.002, math.Inf(1)}, Counts: []uint64{1, 3, 4}}
	if len(got.Upper) != 3 || got.Upper[0] != 0.001 || got.Upper[1] != 0.002 || !math.IsInf(got.Upper[2], 1) ||
		got.Counts[0] != 1 || got.Counts[1] != 3 || got.Counts[2] != 4 {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
	if _, err := parseCallDurations([]byte(strings.ReplaceAll(rec.Body.String(), "/filter", "/check"))); err == nil {
		t.Error("an exposition without the one call's histogram parsed")
	}
}

// The stats are encoded from seenapi's own type, as GET /v1/stats answers.
func TestServerGCReadsTheCollectorFromStats(t *testing.T) {
	st := api.ServiceStats{Collector: api.CollectorStats{Cycles: 7, CPUSeconds: 1.25}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/stats" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(st)
	}))
	defer srv.Close()
	c := NewHTTPClient(strings.TrimPrefix(srv.URL, "http://"), 1)
	got, err := c.ServerGC(context.Background())
	if err != nil || got != (Collected{Cycles: 7, CPU: 1250 * time.Millisecond}) {
		t.Errorf("ServerGC = %+v, %v; want 7 cycles, 1.25s", got, err)
	}
}

func TestSelfGCCountsThisProcesssCollections(t *testing.T) {
	before := selfGC()
	runtime.GC()
	runtime.GC()
	if d := selfGC().Sub(before); d.Cycles < 2 || d.CPU <= 0 {
		t.Errorf("two forced collections read as %+v", d)
	}
}

func TestCollectedSubNeverGoesNegative(t *testing.T) {
	a, b := Collected{Cycles: 5, CPU: time.Second}, Collected{Cycles: 3, CPU: 2 * time.Second}
	if d := a.Sub(b); d.Cycles != 2 || d.CPU != 0 {
		t.Errorf("%+v - %+v = %+v", a, b, d)
	}
	if d := b.Sub(a); d.Cycles != 0 || d.CPU != time.Second {
		t.Errorf("%+v - %+v = %+v", b, a, d)
	}
}
