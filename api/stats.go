package api

import (
	"errors"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/seenapi/seenapi/eviction"
)

// ServiceStats are the hot set's figures plus the API's own.
type ServiceStats struct {
	eviction.Stats
	StartedAt     time.Time         `json:"started_at"`
	UptimeSeconds float64           `json:"uptime_seconds"`
	InFlight      int64             `json:"in_flight"`   // requests being served now
	Connections   int64             `json:"connections"` // client connections open now
	Calls         map[string]uint64 `json:"calls"`       // calls per route, "METHOD /path/{param}"
	Degraded      uint64            `json:"degraded"`    // answers given unfiltered with on_error open
	// IdempotentReplays are answers given again to retries with the same
	// Idempotency-Key; IdempotencyKept and IdempotencyBytes the answers
	// kept for such retries now, and their bytes.
	IdempotentReplays uint64            `json:"idempotent_replays"`
	IdempotencyKept   int64             `json:"idempotency_kept"`
	IdempotencyBytes  int64             `json:"idempotency_bytes"`
	Errors            map[string]uint64 `json:"errors"` // error answers by HTTP status, but UsersNotFound and NotReady
	// UsersNotFound are the answers 404 user-not-found: a question about a
	// user with no history (its stats or its export), which the answer
	// settles. They are no fault of the service or of the request, so
	// Errors leaves them out: an operator looking users up in the
	// dashboard, or a client asking after users it has not recorded yet,
	// would otherwise raise the figure watched for faults.
	UsersNotFound uint64 `json:"users_not_found"`
	// NotReady are the answers 503 of /readyz (GET or HEAD) while the
	// service is not ready: starting (the journal not yet folded in) or
	// draining (shutting down). That is the probe working as designed, and
	// an orchestrator probes every few seconds through a long start, so
	// Errors leaves them out too. Any other 503 is an error.
	NotReady  uint64         `json:"not_ready"`
	Collector CollectorStats `json:"collector"`

	// BatchUserErrors are the errors of a batch's users, by their status:
	// the batch is answered 200, and Errors does not count them.
	BatchUserErrors map[string]uint64 `json:"batch_user_errors"`
}

// CollectorStats is the Go collector's work since the process started. With
// millions of users hot, every cycle marks all of them (about a second of
// CPU at a million), and calls that arrive meanwhile wait: the collector is
// where a large hot set's latency tail comes from, so the dashboard shows
// it. From runtime/metrics; the CPU figures are the runtime's estimates,
// without the marking the collector does on cores that would otherwise be
// idle (/cpu/classes/gc/mark/idle): it takes no CPU from calls, and on a
// quiet server it would make up most of the collector's share.
type CollectorStats struct {
	Cycles         uint64  `json:"cycles"`           // completed collections
	CPUSeconds     float64 `json:"cpu_seconds"`      // CPU the collector took from work: its assists, dedicated marking and pauses
	BusyCPUSeconds float64 `json:"busy_cpu_seconds"` // CPU the whole process took (the collector's included, its idle marking not)
	HeapLiveBytes  uint64  `json:"heap_live_bytes"`  // heap found live by the last collection
	HeapGoalBytes  uint64  `json:"heap_goal_bytes"`  // heap size at which the next one starts
	// AllocatedBytes is what the server allocated on the heap since it
	// started: the rate of it paces the collections.
	AllocatedBytes uint64 `json:"allocated_bytes"`
}

// collectorMetrics are the runtime/metrics CollectorStats reads, in
// readCollector's order.
var collectorMetrics = [...]string{"/gc/cycles/total:gc-cycles", "/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/total:cpu-seconds", "/cpu/classes/idle:cpu-seconds", "/gc/heap/live:bytes", "/gc/heap/goal:bytes",
	"/gc/heap/allocs:bytes", "/cpu/classes/gc/mark/idle:cpu-seconds"}

// readCollector reads the collector's figures now.
func readCollector() CollectorStats {
	var s [len(collectorMetrics)]metrics.Sample
	for i, name := range collectorMetrics {
		s[i].Name = name
	}
	metrics.Read(s[:])
	u := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	f := func(i int) float64 {
		if s[i].Value.Kind() == metrics.KindFloat64 {
			return s[i].Value.Float64()
		}
		return 0
	}
	idleMark := f(7)
	return CollectorStats{Cycles: u(0), CPUSeconds: max(0, f(1)-idleMark), BusyCPUSeconds: max(0, f(2)-f(3)-idleMark),
		HeapLiveBytes: u(4), HeapGoalBytes: u(5), AllocatedBytes: u(6)}
}

// counters are the API's figures: lock-free, one atomic per route and per
// error status, read at scrape time, and a histogram of handler time per
// route.
type counters struct {
	routes   []string // route names, indexed like calls
	calls    []*atomic.Uint64
	errors   [200]atomic.Uint64 // statuses 400..599
	notFound atomic.Uint64      // 404 user-not-found, not among errors (ServiceStats.UsersNotFound)
	notReady atomic.Uint64      // /readyz's 503 not ready, not among errors (ServiceStats.NotReady)
	degraded atomic.Uint64
	panics   atomic.Uint64 // recovered in handlers
	duration *prometheus.HistogramVec

	// batchErrors are a batch's users' errors, statuses 400..599.
	batchErrors [200]atomic.Uint64

	// The reloads of the service's configuration (Server.NoteReload): by
	// outcome, when the last one that loaded was (Unix nanoseconds; the
	// start's until one), and whether the last one failed.
	reloadsOK, reloadsFailed atomic.Uint64
	lastReloadOK             atomic.Int64
	lastReloadFailed         atomic.Bool
}

// NoteReload counts a reload of the service's configuration (the keys,
// namespaces and certificate that seenapi serve reads again on SIGHUP):
// ok, or failed in some part, the old one staying. /metrics has them
// (seenapi_config_reloads_total by result, and, as Prometheus's own, the
// time of the last that loaded and whether the last one did), so that a
// failed reload, otherwise only in the log, can raise an alert. The
// configuration read at the start counts as the first that loaded. Safe
// for concurrent use.
func (s *Server) NoteReload(ok bool) {
	if !ok {
		s.k.reloadsFailed.Add(1)
		s.k.lastReloadFailed.Store(true)
		return
	}
	s.k.reloadsOK.Add(1)
	s.k.lastReloadOK.Store(s.cfg.Now().UnixNano())
	s.k.lastReloadFailed.Store(false)
}

// durationBuckets are the upper bounds (seconds) of the request-duration
// histogram: 25 us to 10 s, each 1.5 times the last, fine enough to read a
// p99 of a few milliseconds to within a quarter of it.
var durationBuckets = prometheus.ExponentialBucketsRange(25e-6, 10, 33)

func newDurationHistogram() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "seenapi_http_request_duration_seconds",
		Help:    "Time from a request's routing to its handler's return, per route: the server's own share of a call's latency (reading the request and writing the answer excluded).",
		Buckets: durationBuckets,
	}, []string{"route"})
}

// countProblem counts an answer of problem p, for err: in errors by its
// status, unless it says that the user has no history, or is /readyz's
// answer that the service is not ready.
func (k *counters) countProblem(err error, p Problem) {
	if p.Type == ProblemBase+pUserNotFound.slug {
		k.notFound.Add(1)
		return
	}
	if ae := (*apiError)(nil); errors.As(err, &ae) && ae.notReady {
		k.notReady.Add(1)
		return
	}
	k.countError(p.Status)
}

func (k *counters) countError(status int) {
	if status >= 400 && status < 600 {
		k.errors[status-400].Add(1)
	}
}

// countBatchError counts the error of one user of a batch.
func (k *counters) countBatchError(status int) {
	if status >= 400 && status < 600 {
		k.batchErrors[status-400].Add(1)
	}
}

// Stats returns the service's figures now. Safe for concurrent use.
func (s *Server) Stats() ServiceStats {
	now := s.cfg.Now()
	st := ServiceStats{
		Stats:         s.hot.Stats(),
		StartedAt:     s.started.UTC(),
		UptimeSeconds: now.Sub(s.started).Seconds(),
		InFlight:      s.inFlight.Load(),
		Connections:   s.conns.Load(),
		Calls:         make(map[string]uint64, len(s.k.routes)),
		Degraded:      s.k.degraded.Load(),
		Errors:        map[string]uint64{},
		UsersNotFound: s.k.notFound.Load(),
		NotReady:      s.k.notReady.Load(),
		Collector:     readCollector(),
	}
	st.BatchUserErrors = map[string]uint64{}
	st.Panics += s.k.panics.Load()
	kept, bytes := s.replays.usage()
	st.IdempotentReplays, st.IdempotencyKept, st.IdempotencyBytes = s.replays.replayed.Load(), int64(kept), bytes
	for i, r := range s.k.routes {
		st.Calls[r] = s.k.calls[i].Load()
	}
	for i := range s.k.errors {
		if n := s.k.errors[i].Load(); n > 0 {
			st.Errors[strconv.Itoa(400+i)] = n
		}
		if n := s.k.batchErrors[i].Load(); n > 0 {
			st.BatchUserErrors[strconv.Itoa(400+i)] = n
		}
	}
	return st
}

// collector exports Stats to Prometheus at scrape time.
type collector struct {
	s     *Server
	descs map[string]*prometheus.Desc
}

type metric struct {
	name, help string
	kind       prometheus.ValueType
	value      func(ServiceStats) float64
}

var hotSetMetrics = []metric{
	{"seenapi_cache_budget_bytes", "The hot set's byte budget.", prometheus.GaugeValue, func(s ServiceStats) float64 { return float64(s.CacheBudgetBytes) }},
	{"seenapi_cache_hit_ratio", "Hits over hits plus misses (calls for users with no history left out). Calls are those that filter, check, record or forget a user's items, or import a filter; reading a user's stats or export is none.", prometheus.GaugeValue, func(s ServiceStats) float64 { return s.HitRatio }},
	{"seenapi_dirty_users", "Users with changes not yet written back, evicted ones waiting for their write-back included.", prometheus.GaugeValue, func(s ServiceStats) float64 { return float64(s.DirtyUsers) }},
	{"seenapi_flush_lag_seconds", "Age of the oldest change not yet written back.", prometheus.GaugeValue, func(s ServiceStats) float64 { return s.FlushLag.Seconds() }},
	{"seenapi_flushes_total", "Write-back rounds that had users to write.", prometheus.CounterValue, func(s ServiceStats) float64 { return float64(s.Flushes) }},
	{"seenapi_flushed_users_total", "Filters written back.", prometheus.CounterValue, func(s ServiceStats) float64 { return float64(s.FlushedUsers) }},
	{"seenapi_journal_appends_total", "Journal records appended.", prometheus.CounterValue, func(s ServiceStats) float64 { return float64(s.JournalAppends) }},
	{"seenapi_storage_errors_total", "Failed storage operations.", prometheus.CounterValue, func(s ServiceStats) float64 { return float64(s.StorageErrors) }},
	{"seenapi_panics_total", "Bugs met and recovered: requests answered 500, and steps on one user's data that failed, instead of the process ending (the log has each stack).", prometheus.CounterValue, func(s ServiceStats) float64 { return float64(s.Panics) }},
	{"seenapi_storage_bytes", "Bytes the store takes on disk.", prometheus.GaugeValue, func(s ServiceStats) float64 { return float64(s.StorageBytes) }},
	{"seenapi_storage_full", "1 while the store refuses writes for lack of disk space (free space under --min-free-bytes), else 0.", prometheus.GaugeValue, func(s ServiceStats) float64 {
		if s.StorageFull {
			return 1
		}
		return 0
	}},
	{"seenapi_uptime_seconds", "Seconds since the server started.", prometheus.GaugeValue, func(s ServiceStats) float64 { return s.UptimeSeconds }},
	{"seenapi_in_flight_requests", "Requests being served now that --max-in-flight bounds (the probes and this scrape are not).", prometheus.GaugeValue, func(s ServiceStats) float64 { return float64(s.InFlight) }},
	{"seenapi_connections_open", "Client connections open now.", prometheus.GaugeValue, func(s ServiceStats) float64 { return float64(s.Connections) }},
	{"seenapi_users_not_found_total", "Answers 404 user-not-found (a user's stats or export asked for a user with no history), which seenapi_http_errors_total leaves out.", prometheus.CounterValue, func(s ServiceStats) float64 { return float64(s.UsersNotFound) }},
	{"seenapi_not_ready_total", "Answers 503 of /readyz while the service was not ready (starting, its journal not yet folded in, or draining on SIGTERM): the probe working as designed, which seenapi_http_errors_total leaves out. Any other 503 is an error.", prometheus.CounterValue, func(s ServiceStats) float64 { return float64(s.NotReady) }},
	{"seenapi_degraded_total", "Answers given unfiltered because on_error was open.", prometheus.CounterValue, func(s ServiceStats) float64 { return float64(s.Degraded) }},
	{"seenapi_idempotent_replays_total", "Answers given again to retries with the same Idempotency-Key; each counts in seenapi_http_requests_total and in none of the hot set's figures.", prometheus.CounterValue, func(s ServiceStats) float64 { return float64(s.IdempotentReplays) }},
	{"seenapi_idempotency_kept", "Calls with an Idempotency-Key whose answers are kept for retries.", prometheus.GaugeValue, func(s ServiceStats) float64 { return float64(s.IdempotencyKept) }},
	{"seenapi_idempotency_bytes", "Bytes the answers kept for retries take.", prometheus.GaugeValue, func(s ServiceStats) float64 { return float64(s.IdempotencyBytes) }},
}

// userMetrics are the hot set's figures that each namespace has
// (eviction.NamespaceStats): exported for the service as seenapi_NAME and
// for each namespace as seenapi_namespace_NAME{namespace="..."}, whose sum
// over the namespaces is the service's.
var userMetrics = []struct {
	name, help string
	kind       prometheus.ValueType
	value      func(eviction.NamespaceStats) float64
}{
	{"hot_users", "Users whose filter is in memory.", prometheus.GaugeValue, func(n eviction.NamespaceStats) float64 { return float64(n.HotUsers) }},
	{"cache_bytes", "Bytes accounted to hot users.", prometheus.GaugeValue, func(n eviction.NamespaceStats) float64 { return float64(n.CacheBytes) }},
	{"cache_hits_total", "Calls that found the user hot (calls that filter, check, record or forget items, or import a filter; reading a user's stats or export is none).", prometheus.CounterValue, func(n eviction.NamespaceStats) float64 { return float64(n.Hits) }},
	{"cache_misses_total", "Calls that did not find the user hot and read its history from the store.", prometheus.CounterValue, func(n eviction.NamespaceStats) float64 { return float64(n.Misses) }},
	{"cache_no_history_total", "Calls that did not find the user hot and found no history stored (a new user's first call): neither hits nor misses.", prometheus.CounterValue, func(n eviction.NamespaceStats) float64 { return float64(n.NoHistory) }},
	{"loads_total", "Storage reads of cold users: a miss or a call for a user with no history takes one, and so do reads that are no call.", prometheus.CounterValue, func(n eviction.NamespaceStats) float64 { return float64(n.Loads) }},
	{"new_users_total", "Cold users with nothing stored whom a recording call or an import created.", prometheus.CounterValue, func(n eviction.NamespaceStats) float64 { return float64(n.NewUsers) }},
	{"evictions_total", "Users taken out of memory: the least recently used, to keep the budget, and every hot user of a namespace a reload takes out.", prometheus.CounterValue, func(n eviction.NamespaceStats) float64 { return float64(n.Evictions) }},
	{"candidates_total", "Distinct candidates the one call tested (filter and batch calls).", prometheus.CounterValue, func(n eviction.NamespaceStats) float64 { return float64(n.Candidates) }},
	{"candidates_seen_total", "Of the candidates, those that tested seen and were filtered out.", prometheus.CounterValue, func(n eviction.NamespaceStats) float64 { return float64(n.SeenCandidates) }},
	{"items_recorded_total", "Items recorded as seen, by every recording route.", prometheus.CounterValue, func(n eviction.NamespaceStats) float64 { return float64(n.Recorded) }},
}

func newCollector(s *Server) *collector {
	c := &collector{s: s, descs: map[string]*prometheus.Desc{}}
	for _, m := range hotSetMetrics {
		c.descs[m.name] = prometheus.NewDesc(m.name, m.help, nil, nil)
	}
	for _, m := range userMetrics {
		c.descs[m.name] = prometheus.NewDesc("seenapi_"+m.name, m.help, nil, nil)
		c.descs["namespace_"+m.name] = prometheus.NewDesc("seenapi_namespace_"+m.name, m.help+" For the namespace in the label.", []string{"namespace"}, nil)
	}
	c.descs["calls"] = prometheus.NewDesc("seenapi_http_requests_total", "Requests per route, a HEAD with its GET; each of the dashboard's files under its own path (GET /app.js). A request refused before its route is found (for its head, its body over the limit, its slowness, a path or method no route takes) is in seenapi_http_errors_total only.", []string{"route"}, nil)
	c.descs["errors"] = prometheus.NewDesc("seenapi_http_errors_total", "Error answers per HTTP status, but 404 user-not-found (seenapi_users_not_found_total) and the 503 of /readyz while the service is not ready (seenapi_not_ready_total).", []string{"status"}, nil)
	c.descs["batch_errors"] = prometheus.NewDesc("seenapi_batch_user_errors_total", "Errors of a batch's users (each in its result of the batch's 200 answer) per their status.", []string{"status"}, nil)
	c.descs["level_tables"] = prometheus.NewDesc("seenapi_storage_level_tables", "Tables in each level of the store's LSM tree. Level 0 gains one at each memtable flush until a compaction merges it into the level below, rewriting about every user's key: a level 0 that empties marks one.", []string{"level"}, nil)
	c.descs["reloads"] = prometheus.NewDesc("seenapi_config_reloads_total", "Reloads of the configuration (keys, namespaces, TLS certificate) on SIGHUP, by result: ok, or failed (some part did not load and stays as it was; the log says which).", []string{"result"}, nil)
	c.descs["reload_time"] = prometheus.NewDesc("seenapi_config_last_reload_success_timestamp_seconds", "When the configuration last loaded whole: the last SIGHUP that did, else the start.", nil, nil)
	c.descs["reload_ok"] = prometheus.NewDesc("seenapi_config_last_reload_successful", "1 if the last reload of the configuration loaded whole (or none was asked since the start), 0 if some part failed.", nil, nil)
	c.descs["level_bytes"] = prometheus.NewDesc("seenapi_storage_level_bytes", "Bytes in each level of the store's LSM tree.", []string{"level"}, nil)
	return c
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	for _, m := range hotSetMetrics {
		ch <- prometheus.MustNewConstMetric(c.descs[m.name], m.kind, m.value(st))
	}
	for _, m := range userMetrics {
		ch <- prometheus.MustNewConstMetric(c.descs[m.name], m.kind, m.value(st.NamespaceStats))
		for name, n := range st.Namespaces {
			ch <- prometheus.MustNewConstMetric(c.descs["namespace_"+m.name], m.kind, m.value(n), name)
		}
	}
	for r, n := range st.Calls {
		ch <- prometheus.MustNewConstMetric(c.descs["calls"], prometheus.CounterValue, float64(n), r)
	}
	for code, n := range withZeros(st.Errors, errorStatuses) {
		ch <- prometheus.MustNewConstMetric(c.descs["errors"], prometheus.CounterValue, float64(n), code)
	}
	for code, n := range withZeros(st.BatchUserErrors, batchUserStatuses) {
		ch <- prometheus.MustNewConstMetric(c.descs["batch_errors"], prometheus.CounterValue, float64(n), code)
	}
	k := &c.s.k
	ch <- prometheus.MustNewConstMetric(c.descs["reloads"], prometheus.CounterValue, float64(k.reloadsOK.Load()), "ok")
	ch <- prometheus.MustNewConstMetric(c.descs["reloads"], prometheus.CounterValue, float64(k.reloadsFailed.Load()), "failed")
	ch <- prometheus.MustNewConstMetric(c.descs["reload_time"], prometheus.GaugeValue, float64(k.lastReloadOK.Load())/1e9)
	ok := 1.0
	if k.lastReloadFailed.Load() {
		ok = 0
	}
	ch <- prometheus.MustNewConstMetric(c.descs["reload_ok"], prometheus.GaugeValue, ok)
	for _, l := range st.StorageLevels {
		level := strconv.Itoa(l.Level)
		ch <- prometheus.MustNewConstMetric(c.descs["level_tables"], prometheus.GaugeValue, float64(l.Tables), level)
		ch <- prometheus.MustNewConstMetric(c.descs["level_bytes"], prometheus.GaugeValue, float64(l.Bytes), level)
	}
}

// The statuses the error counters of /metrics have a series for from the
// start, at 0 until one is counted: a counter whose series appears only at
// its first error has no rate until then, and an alert on its increase
// misses that first one. errorStatuses are those of every problem the
// service answers (problemKinds); batchUserStatuses those a batch's user
// can meet while being served, alone (the rest refuse the whole batch):
// its namespace taken out meanwhile, a corrupt filter or a bug, the store
// failing or the service stopping, the disk full.
var (
	errorStatuses     = statusesOf(problemKinds...)
	batchUserStatuses = statusesOf(pUnknownNamespace, pCorruptFilter, pInternal, pStorageUnavailable, pUnavailable, pStorageFull)
)

// statusesOf returns the distinct statuses of kinds, as labels.
func statusesOf(kinds ...problemKind) []string {
	var out []string
	for _, k := range kinds {
		if code := strconv.Itoa(k.status); !slices.Contains(out, code) {
			out = append(out, code)
		}
	}
	return out
}

// withZeros adds to counts, by status, each of statuses it lacks, at 0,
// and returns it.
func withZeros(counts map[string]uint64, statuses []string) map[string]uint64 {
	for _, code := range statuses {
		if _, ok := counts[code]; !ok {
			counts[code] = 0
		}
	}
	return counts
}

// namespaceGatherer is g with the series labelled with a namespace that m
// may not call left out.
type namespaceGatherer struct {
	g prometheus.Gatherer
	m keyMatch
}

// Gather implements prometheus.Gatherer.
func (n namespaceGatherer) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := n.g.Gather()
	for _, mf := range mfs {
		mf.Metric = slices.DeleteFunc(mf.Metric, func(m *dto.Metric) bool {
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" && !n.m.allows(l.GetValue()) {
					return true
				}
			}
			return false
		})
	}
	return slices.DeleteFunc(mfs, func(mf *dto.MetricFamily) bool { return len(mf.Metric) == 0 }), err
}
