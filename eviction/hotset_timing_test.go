package eviction

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// calls is a ring of pre-built one-call requests of the reference workload:
// a user drawn uniformly or by Zipf (s = 1.1) and 200 candidates from that
// user's pool of 2,000 items.
type calls struct {
	users []string
	who   []int
	cands [][]string
}

func newCalls(users int, zipf bool, n int) *calls {
	rng := rand.New(rand.NewPCG(42, uint64(users)))
	c := &calls{users: make([]string, users), who: make([]int, n), cands: make([][]string, n)}
	for u := range c.users {
		c.users[u] = fmt.Sprintf("user-%07d", u)
	}
	var z *rand.Zipf
	if zipf {
		z = rand.NewZipf(rng, 1.1, 1, uint64(users-1))
	}
	for i := range c.who {
		if z != nil {
			c.who[i] = int(z.Uint64())
		} else {
			c.who[i] = rng.IntN(users)
		}
		cs := make([]string, 200)
		for j := range cs {
			cs[j] = fmt.Sprintf("i:%s:%d", c.users[c.who[i]], rng.IntN(2000))
		}
		c.cands[i] = cs
	}
	return c
}

func benchStore(b *testing.B, sync bool) *storage.Store {
	st, err := storage.Open(storage.DefaultOptions(b.TempDir()).WithMinFreeBytes(-1).WithSync(sync))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

func runHotSet(b *testing.B, h *HotSet, c *calls) {
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1)) % len(c.who)
			if _, err := h.Filter("default", c.users[c.who[i]], c.cands[i], 20, userfilter.RecordReturned); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// warm runs each call of the ring once so users are hot and have history.
func warm(b *testing.B, h *HotSet, c *calls) {
	for i := range c.who {
		h.Filter("default", c.users[c.who[i]], c.cands[i], 20, userfilter.RecordReturned)
	}
}

// BenchmarkOneCall compares the one call through the hot set (journal off,
// on, and fsync'd; and journalled in a namespace with a cap, never
// reached, whose records note the room it leaves) with userfilter called
// directly under a per-user lock, all users hot, 16 callers.
func BenchmarkOneCall(b *testing.B) {
	const users = 10_000
	c := newCalls(users, false, 1<<15)
	b.Run("userfilter-direct", func(b *testing.B) {
		fs := make([]*userfilter.Filter, users)
		mus := make([]sync.Mutex, users)
		for i := range fs {
			fs[i], _ = userfilter.New(userfilter.DefaultProfile())
		}
		var pool sync.Pool
		pool.New = func() any { return new(userfilter.Scratch) }
		call := func(i int) {
			u := c.who[i]
			s := pool.Get().(*userfilter.Scratch)
			mus[u].Lock()
			res := fs[u].FilterAndRecord(c.cands[i], 20, userfilter.RecordReturned, time.Now(), s)
			out := make([]string, len(s.Unseen))
			for j, idx := range s.Unseen {
				out[j] = c.cands[i][idx]
			}
			mus[u].Unlock()
			pool.Put(s)
			_ = res
		}
		for i := range c.who {
			call(i)
		}
		var next atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				call(int(next.Add(1)) % len(c.who))
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	})
	for _, mode := range []string{"hotset-nojournal", "hotset-journal", "hotset-journal-sync", "hotset-journal-cap"} {
		b.Run(mode, func(b *testing.B) {
			st := benchStore(b, mode == "hotset-journal-sync")
			ns := defaultNS
			if mode == "hotset-journal-cap" {
				ns = []Namespace{{Name: "default", Profile: userfilter.Profile{MaxItems: 1 << 20}}}
			}
			h, err := New(st, ns, Options{NoJournal: mode == "hotset-nojournal", CacheBytes: 4 << 30})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			warm(b, h, c)
			b.SetParallelism(8)
			runHotSet(b, h, c)
		})
	}
}

// BenchmarkZipfOverBudget holds 10x more users than fit in the budget, users
// drawn by Zipf (s = 1.1), and reports the hit ratio.
func BenchmarkZipfOverBudget(b *testing.B) {
	const users = 100_000
	c := newCalls(users, true, 1<<16)
	for _, tc := range []struct {
		name   string
		budget int64
	}{{"all-fit", 4 << 30}, {"tenth-fits", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			st := benchStore(b, false)
			budget := tc.budget
			if budget == 0 {
				// Fill once to learn what all users take, then allow a tenth.
				h, _ := New(st, defaultNS, Options{CacheBytes: 4 << 30})
				for u := 0; u < users; u++ {
					h.Filter("default", c.users[u], c.cands[u%len(c.cands)][:20], 20, userfilter.RecordReturned)
				}
				budget = h.Stats().CacheBytes / 10
				h.Close()
			}
			h, err := New(st, defaultNS, Options{CacheBytes: budget})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			warm(b, h, c)
			before := h.Stats()
			b.SetParallelism(8)
			runHotSet(b, h, c)
			after := h.Stats()
			hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
			b.ReportMetric(float64(hits)/float64(hits+misses), "hit-ratio")
			b.ReportMetric(float64(after.HotUsers), "hot-users")
		})
	}
}

// BenchmarkBytesPerHotUser measures the heap a hot user takes at 10, 200
// and 2,000 items against its filter's own size (the filters the hot set
// holds, not a reference one): the difference is the hot set's overhead
// per entry. Every user is dirty (nothing written back), so the overhead
// includes a slot of the shard's dirty list, which a user holds only until
// its write-back; dirty-list-B/user reports that part.
func BenchmarkBytesPerHotUser(b *testing.B) {
	for _, items := range []int{10, 200, 2000} {
		b.Run(fmt.Sprintf("items=%d", items), func(b *testing.B) {
			users := map[int]int{10: 200_000, 200: 100_000, 2000: 100_000}[items]
			st := benchStore(b, false)
			h, err := New(st, defaultNS, Options{CacheBytes: 8 << 30, NoJournal: true, FlushInterval: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			its := make([]string, items)
			for i := range its {
				its[i] = fmt.Sprintf("item-%06d", i)
			}
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			for u := 0; u < users; u++ {
				h.Filter("default", fmt.Sprintf("user-%07d", u), its, 0, userfilter.RecordAll)
			}
			runtime.GC()
			runtime.ReadMemStats(&m1)
			// What the collector pays for the hot set: a full collection
			// (the best of three) marks every hot user's objects, on every
			// core it can have (gcCPU: the CPU it took, the best of three).
			gc, gcCPU := time.Duration(math.MaxInt64), math.Inf(1)
			for range 3 {
				t0, c0 := time.Now(), collectorCPU()
				runtime.GC()
				gc, gcCPU = min(gc, time.Since(t0)), min(gcCPU, collectorCPU()-c0)
			}
			for b.Loop() {
			}
			var filterBytes, dirtyList int
			for _, s := range h.shards {
				s.mu.Lock()
				for _, e := range s.lru.Values() {
					filterBytes += e.f.MemoryBytes()
				}
				dirtyList += cap(s.dirty.items) * int(unsafe.Sizeof(s.dirty.items[0]))
				s.mu.Unlock()
			}
			perUser := float64(m1.HeapAlloc-m0.HeapAlloc) / float64(users)
			perFilter := float64(filterBytes) / float64(users)
			b.ReportMetric(perUser, "heap-B/user")
			b.ReportMetric(float64(m1.HeapObjects-m0.HeapObjects)/float64(users), "heap-objects/user")
			b.ReportMetric(float64(gc.Nanoseconds())/float64(users), "full-gc-ns/user")
			b.ReportMetric(gcCPU*1e9/float64(users), "full-gc-cpu-ns/user")
			b.ReportMetric(perFilter, "filter-B")
			b.ReportMetric(perUser-perFilter, "overhead-B/user")
			b.ReportMetric(float64(dirtyList)/float64(users), "dirty-list-B/user")
			b.ReportMetric(float64(h.Stats().CacheBytes)/float64(users), "accounted-B/user")
			runtime.KeepAlive(h)
		})
	}
}

// collectorCPU is the CPU the Go collector has taken so far, in seconds
// (runtime/metrics' estimate, which the runtime updates at each cycle's end).
func collectorCPU() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	return s[0].Value.Float64()
}

// BenchmarkMergeFilters is write-back's merge of a user's filter into the
// stored one in the usual case: what is stored is an earlier state of what
// is written (2,000 items stored, 20 more recorded since).
func BenchmarkMergeFilters(b *testing.B) {
	f, err := userfilter.New(userfilter.DefaultProfile())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	items := make([]string, 2020)
	for i := range items {
		items[i] = fmt.Sprintf("i:%08x", i)
	}
	f.Add(items[:2000], now)
	stored, _ := f.MarshalBinary()
	f.Add(items[2000:], now)
	value, _ := f.MarshalBinary()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MergeFilters(stored, value); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReapRound times one round of the reaper over 200,000 hot users
// of a windowed namespace, none of them gone: what the write-back loop
// pays for it, a round at a time, whatever the calls.
func BenchmarkReapRound(b *testing.B) {
	fx := newFixture(b, Options{CacheBytes: 1 << 30, FlushInterval: time.Hour})
	for u := range 200_000 {
		record(b, fx.h, "push", fmt.Sprintf("user-%07d", u), "a")
	}
	for b.Loop() {
		fx.h.reapSome(true)
	}
}
