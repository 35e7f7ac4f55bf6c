package api_test

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// feedWorkload draws the workload's calls: a user, then 200 candidates from
// that user's pool of 2000 items (8 to 24 bytes), limit 20, record returned.
type feedWorkload struct {
	users int
	pools [][]string
}

func newFeedWorkload(users int) *feedWorkload {
	w := &feedWorkload{users: users, pools: make([][]string, users)}
	for u := range w.pools {
		r := rand.New(rand.NewPCG(uint64(u), 7))
		pool := make([]string, 2000)
		for j := range pool {
			pool[j] = fmt.Sprintf("i:%0*x", 6+r.IntN(17), r.Uint64())
		}
		w.pools[u] = pool
	}
	return w
}

func (w *feedWorkload) call(r *rand.Rand, cands []string) (user string, out []string) {
	u := r.IntN(w.users)
	pool := w.pools[u]
	for i := range 200 {
		cands[i] = pool[r.IntN(len(pool))]
	}
	return "u" + strconv.Itoa(u), cands[:200]
}

func benchHotSet(b *testing.B, noJournal bool) (*eviction.HotSet, func()) {
	store, err := storage.Open(storage.DefaultOptions(b.TempDir()).WithMinFreeBytes(-1).
		WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	hot, err := eviction.New(store, []eviction.Namespace{{Name: "default", Profile: userfilter.DefaultProfile()}},
		eviction.Options{Logger: slog.New(slog.DiscardHandler), NoJournal: noJournal})
	if err != nil {
		b.Fatal(err)
	}
	return hot, func() { hot.Close(); store.Close() }
}

// BenchmarkOneCall compares the one call over HTTP (a real server on a
// loopback port, a fasthttp client, JSON both ways) with the same calls
// made on the hot set in-process: the gap is what HTTP and the API cost.
// The target is HTTP at no less than half the in-process rate; the
// client shares the machine's cores with the server here. journal=off
// leaves out the journal commit each recording call waits for, to show the
// CPU cost of the layers alone.
func BenchmarkOneCall(b *testing.B) {
	const users = 1000
	w := newFeedWorkload(users)
	for _, noJournal := range []bool{false, true} {
		name := map[bool]string{false: "journal=on", true: "journal=off"}[noJournal]
		b.Run(name, func(b *testing.B) { benchOneCall(b, w, noJournal) })
	}
}

func benchOneCall(b *testing.B, w *feedWorkload, noJournal bool) {
	b.Run("in-process", func(b *testing.B) {
		hot, done := benchHotSet(b, noJournal)
		defer done()
		var seed atomic.Uint64
		b.ReportAllocs()
		b.SetParallelism(16) // calls wait for their journal commit: keep many in flight
		b.RunParallel(func(pb *testing.PB) {
			r := rand.New(rand.NewPCG(seed.Add(1), 1))
			cands := make([]string, 200)
			for pb.Next() {
				user, c := w.call(r, cands)
				if _, err := hot.Filter("default", user, c, 20, userfilter.RecordReturned); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("http", func(b *testing.B) { benchOneCallHTTP(b, w, noJournal, false, false) })
	// Every call with an Idempotency-Key of its own: what keeping the
	// answers for retries costs, in memory, and in memory and their log
	// (the service's way).
	b.Run("http-idempotency-key", func(b *testing.B) { benchOneCallHTTP(b, w, noJournal, true, false) })
	b.Run("http-idempotency-key-log", func(b *testing.B) { benchOneCallHTTP(b, w, noJournal, true, true) })
}

func benchOneCallHTTP(b *testing.B, w *feedWorkload, noJournal, keyed, answerLog bool) {
	{
		hot, done := benchHotSet(b, noJournal)
		defer done()
		srv, err := api.New(hot, api.Config{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		if answerLog {
			if _, err := srv.OpenAnswerLog(b.TempDir(), false, 100*time.Millisecond); err != nil {
				b.Fatal(err)
			}
			defer srv.CloseAnswerLog(true)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go srv.Serve(ln)
		defer srv.Shutdown(b.Context())
		hc := &fasthttp.HostClient{Addr: ln.Addr().String(), MaxConns: 64}
		prefix := "http://" + ln.Addr().String() + "/v1/namespaces/default/users/"
		var seed atomic.Uint64
		b.ReportAllocs()
		b.SetParallelism(16) // calls wait for their journal commit: keep many in flight
		b.RunParallel(func(pb *testing.PB) {
			g := seed.Add(1)
			r := rand.New(rand.NewPCG(g, 1))
			cands := make([]string, 200)
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			var body []byte
			for n := 0; pb.Next(); n++ {
				user, c := w.call(r, cands)
				req.SetRequestURI(prefix + user + "/filter")
				if keyed {
					req.Header.Set(api.HeaderIdempotencyKey, strconv.FormatUint(g, 10)+"-"+strconv.Itoa(n))
				}
				req.Header.SetMethod("POST")
				req.Header.SetContentType("application/json")
				body = append(body[:0], `{"limit":20,"candidates":[`...)
				for i, s := range c {
					if i > 0 {
						body = append(body, ',')
					}
					body = append(append(append(body, '"'), s...), '"') // the workload's ids need no escaping
				}
				body = append(body, "]}"...)
				req.SetBody(body)
				if err := hc.Do(req, resp); err != nil {
					b.Fatal(err)
				}
				if resp.StatusCode() != 200 {
					b.Fatalf("%d %s", resp.StatusCode(), resp.Body())
				}
			}
		})
	}
}
