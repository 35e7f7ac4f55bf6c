package api_test

import (
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
)

// exhaustedListener is a loopback listener whose first accepts fail as
// accept4 does when the process has no file descriptor left (EMFILE).
type exhaustedListener struct {
	net.Listener
	fail atomic.Int32 // accepts still to fail
}

func (l *exhaustedListener) Accept() (net.Conn, error) {
	if l.fail.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestServeOutlivesRunningOutOfFileDescriptors: a process with as many
// connections open as its descriptor limit (ulimit -n) fails its accepts
// with EMFILE until some close. The service waits and accepts again; it
// does not stop serving, which would end the process for every caller.
func TestServeOutlivesRunningOutOfFileDescriptors(t *testing.T) {
	store, err := storage.Open(storage.DefaultOptions(t.TempDir()).WithMinFreeBytes(-1).
		WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	hot, err := eviction.New(store, nil, eviction.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer hot.Close()
	srv, err := api.New(hot, api.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &exhaustedListener{Listener: inner}
	ln.fail.Store(5)
	var serveErr error
	served := make(chan struct{})
	go func() { serveErr = srv.Serve(ln); close(served) }()
	defer func() {
		if err := srv.Shutdown(t.Context()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		inner.Close() // Serve may have returned without closing it
		<-served
	}()

	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + inner.Addr().String() + "/healthz")
	if err != nil {
		select {
		case <-served:
			t.Fatalf("the server stopped serving at an accept out of file descriptors: %v (the probe: %v)", serveErr, err)
		default:
		}
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d, want 200", resp.StatusCode)
	}
	select {
	case <-served:
		t.Fatalf("Serve returned: %v", serveErr)
	default:
	}
}
