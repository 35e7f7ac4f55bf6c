package api

import (
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// acceptRetrying is the listener Serve accepts from: when an accept fails
// for want of a resource that comes back as connections close (the
// process's file descriptors, ulimit -n, or the system's, or the kernel's
// buffers), it waits and accepts again, as net/http does. fasthttp takes
// any accept error that is not a timeout for the listener's end and stops
// serving, which ended the process: thousands of clients holding
// connections open would take the service down for every caller, where it
// should serve again once some close (the idle and read timeouts close
// them). Meanwhile new connections wait in the kernel's queue.
type acceptRetrying struct {
	net.Listener
	logger  *slog.Logger
	spell   atomic.Bool  // accepts are failing
	lastLog atomic.Int64 // unix ns of the last line logged
}

// Waits between accepts that fail for want of a resource: doubling from
// the first to the last.
const (
	firstAcceptWait = 5 * time.Millisecond
	lastAcceptWait  = time.Second
	// acceptLogEvery spaces the lines that say accepts fail.
	acceptLogEvery = time.Minute
)

func (l *acceptRetrying) Accept() (net.Conn, error) {
	var wait time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil || !outOfResources(err) {
			if err == nil && l.spell.Swap(false) {
				l.logger.Info("seenapi: accepting connections again")
			}
			return c, err
		}
		l.spell.Store(true)
		if now, last := time.Now().UnixNano(), l.lastLog.Load(); now-last >= int64(acceptLogEvery) && l.lastLog.CompareAndSwap(last, now) {
			l.logger.Error("seenapi: cannot accept connections; new ones wait until some close (raise ulimit -n, or lower --idle-timeout)",
				"err", err)
		}
		wait = min(max(2*wait, firstAcceptWait), lastAcceptWait)
		time.Sleep(wait)
	}
}

// outOfResources reports whether an accept failed for want of file
// descriptors or kernel memory, which connections closing give back.
func outOfResources(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}
