package api

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// bodyBudget bounds the bytes of the request bodies read at once
// (Config.MaxBodyBytesInFlight). fasthttp allocates a body's whole
// Content-Length as soon as it has read the header, and holds it until
// the body has come: without a bound, clients with a valid key (or any
// client of an open service) could make each of MaxConnections
// connections hold MaxBodyBytes, or an admin's MaxImportBytes, by sending
// headers and then the bodies slowly.
//
// A body of budgetFreeBytes or less takes nothing from it: connections
// hold buffers of that order anyway, which MaxConnections bounds, and the
// one call's body (a few KiB) stays off the lock. Nor does a body in
// chunks, whose buffer grows with what the client has sent. A larger body
// of a stated length reserves its length when its header is read
// (fasthttp's HeaderReceived, set in New) and gives it back once it has
// been read (the first middleware) or failed to be (Server.errorHandler);
// a request the budget cannot hold has its body left unread and is
// answered 503 overloaded.
//
// Reservations are kept by the request's header, which fasthttp keeps at
// one address for a connection's requests: a reservation that no answer
// gave back is given back when the next request's header is read there.
// Not every such header is read again: fasthttp closes a connection
// without an answer when it cannot write the "100 Continue" of a request
// that expects one (the client reset it), and pools its request context,
// which a garbage collection drops. So a reservation older than stale
// (Config.ReadTimeout, by which fasthttp has read the body or given up) is
// given back too, when the budget cannot hold a new one.
// Safe for concurrent use.
type bodyBudget struct {
	max   int
	stale time.Duration
	held  atomic.Int64 // reservations and refusals in by, read off the lock
	mu    sync.Mutex
	used  int                                     // bytes reserved; guarded by mu
	by    map[*fasthttp.RequestHeader]reservation // guarded by mu
}

// reservation is what a request's header holds of the budget.
type reservation struct {
	n  int // bytes, or refusedBody
	at time.Time
}

// budgetFreeBytes is the largest body that takes nothing from the budget.
const budgetFreeBytes = 16 << 10

// refusedBody marks a request whose body the budget could not hold.
const refusedBody = -1

func newBodyBudget(max int, stale time.Duration) *bodyBudget {
	return &bodyBudget{max: max, stale: stale, by: map[*fasthttp.RequestHeader]reservation{}}
}

// take reserves n bytes for the body of the request of header h, and
// reports whether the budget held them; if not, h is marked refused.
func (b *bodyBudget) take(h *fasthttp.RequestHeader, n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseLocked(h)
	now := time.Now()
	if b.used+n > b.max {
		for old, r := range b.by {
			if now.Sub(r.at) > b.stale {
				b.releaseLocked(old)
			}
		}
	}
	ok := b.used+n <= b.max
	if ok {
		b.used += n
		b.by[h] = reservation{n: n, at: now}
	} else {
		b.by[h] = reservation{n: refusedBody, at: now}
	}
	b.held.Store(int64(len(b.by)))
	return ok
}

// release gives back what the request of header h holds, and reports
// whether its body was refused.
func (b *bodyBudget) release(h *fasthttp.RequestHeader) (refused bool) {
	if b.held.Load() == 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.releaseLocked(h)
}

func (b *bodyBudget) releaseLocked(h *fasthttp.RequestHeader) (refused bool) {
	r, ok := b.by[h]
	if !ok {
		return false
	}
	delete(b.by, h)
	b.held.Store(int64(len(b.by)))
	if r.n == refusedBody {
		return true
	}
	b.used -= r.n
	return false
}

// inUse returns the bytes reserved.
func (b *bodyBudget) inUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// knownMethod reports whether fiber routes method m (its DefaultMethods,
// which the server keeps).
func knownMethod(m []byte) bool {
	for _, k := range fiber.DefaultMethods {
		if string(m) == k {
			return true
		}
	}
	return false
}
