// Package inproc is the in-process seenapi system of the benchmark harness:
// seenapi's hot set called directly, the ceiling of what the server can do.
// It lives apart from package bench so that the harness builds without the
// service's packages.
//
// Its Call is safe for concurrent use; its other methods are called by one
// goroutine (see bench.System).
package inproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/bench"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// Options configure the in-process seenapi system.
type Options struct {
	// DataParent is where the fresh data directory is made. Default os.TempDir().
	DataParent string
	// CacheBytes is the hot set's byte budget. Default: the hot set's.
	CacheBytes int64
	// NoJournal turns the journal off. Default false: journaled, as the server.
	NoJournal bool
	// FlushInterval is the hot set's write-back interval (the server's
	// --flush-interval). Default: the hot set's.
	FlushInterval time.Duration
	// Window and Granularity set the default namespace's retention window.
	// Default none (the default profile).
	Window, Granularity time.Duration
	// Now is the hot set's clock. Default time.Now.
	Now func() time.Time
	// HTTP serves the hot set with seenapi's API (package api) on a
	// loopback port inside the harness and calls it over HTTP: the system
	// "seenapi-http-inproc", whose CPU profile (--cpuprofile) shows what the
	// HTTP layer costs. Default false: the hot set is called directly.
	HTTP bool
	// Conns caps the HTTP client's connections. Default 64.
	Conns int
}

// System is seenapi's hot set (eviction over userfilter and a
// Badger store) called in-process: the ceiling of what the server can do,
// the gap to bench.SeenapiHTTP being what HTTP costs. Its CPU figure is the
// harness process's, client included; its memory figure is the hot set's
// accounted bytes.
type System struct {
	opts  Options
	dir   string
	store *storage.Store
	hs    *eviction.HotSet
	srv   *api.Server
	srvCh chan error
	cl    *bench.HTTPClient
}

// New returns the in-process seenapi system.
func New(opts Options) *System { return &System{opts: opts} }

// Name returns "seenapi-inproc", or "seenapi-http-inproc" with Options.HTTP.
func (s *System) Name() string {
	if s.opts.HTTP {
		return "seenapi-http-inproc"
	}
	return "seenapi-inproc"
}

// Setup opens a hot set over a store in a fresh directory, with the
// default namespace.
func (s *System) Setup(ctx context.Context) error {
	dir, err := os.MkdirTemp(s.opts.DataParent, "seenbench-inproc-")
	if err != nil {
		return err
	}
	s.dir = dir
	return s.open()
}

func (s *System) open() error {
	store, err := storage.Open(storage.DefaultOptions(s.dir))
	if err != nil {
		return fmt.Errorf("%w: %v", bench.ErrServer, err)
	}
	profile := userfilter.DefaultProfile()
	profile.Window, profile.Granularity = s.opts.Window, s.opts.Granularity
	hs, err := eviction.New(store, []eviction.Namespace{{Name: "default", Profile: profile}},
		eviction.Options{CacheBytes: s.opts.CacheBytes, NoJournal: s.opts.NoJournal, Now: s.opts.Now,
			FlushInterval: s.opts.FlushInterval})
	if err != nil {
		store.Close()
		return fmt.Errorf("%w: %v", bench.ErrServer, err)
	}
	s.store, s.hs = store, hs
	if !s.opts.HTTP {
		return nil
	}
	srv, err := api.New(hs, api.Config{})
	if err != nil {
		s.shut()
		return fmt.Errorf("%w: %v", bench.ErrServer, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.shut()
		return fmt.Errorf("%w: %v", bench.ErrServer, err)
	}
	s.srv, s.srvCh = srv, make(chan error, 1)
	go func() { s.srvCh <- srv.Serve(ln) }()
	conns := s.opts.Conns
	if conns == 0 {
		conns = 64
	}
	s.cl = bench.NewHTTPClient(ln.Addr().String(), conns)
	for i := 0; ; i++ {
		if ok, _ := s.cl.Ready(); ok {
			return nil
		}
		if i == 500 {
			s.shut()
			return fmt.Errorf("%w: in-process API not ready", bench.ErrServer)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Call is the one call on the hot set. Safe for concurrent use.
func (s *System) Call(ctx context.Context, user string, candidates []string, limit int) ([]string, error) {
	if s.cl != nil {
		return s.cl.Call(ctx, user, candidates, limit)
	}
	res, err := s.hs.Filter("default", user, candidates, limit, userfilter.RecordReturned)
	return res.Unseen, err
}

// Memory returns the bytes the hot set accounts to hot users.
func (s *System) Memory(context.Context) (bench.Memory, error) {
	return bench.Memory{Bytes: s.hs.Stats().CacheBytes, Kind: "cache_bytes"}, nil
}

// CPU returns the harness process's CPU time (client included).
func (s *System) CPU() (bench.CPU, error) {
	c, err := bench.ProcessCPU(os.Getpid())
	c.InclClient = true
	return c, err
}

// CacheStats returns the hot set's hits and misses.
func (s *System) CacheStats(context.Context) (hits, misses uint64, err error) {
	st := s.hs.Stats()
	return st.Hits, st.Misses, nil
}

// Backlog returns the hot set's dirty users and flush lag.
func (s *System) Backlog(context.Context) (bench.Backlog, error) {
	st := s.hs.Stats()
	return bench.Backlog{Users: st.DirtyUsers, Lag: st.FlushLag}, nil
}

// FlushDisk writes every dirty filter back, closes the hot set and the
// store, and returns the data directory's size: what seenapi-http gives
// after its server's shutdown. Measured with the store open it counted
// Badger's memtable log and the journal too, several times the rest at
// small user counts. Restart opens them again.
func (s *System) FlushDisk(context.Context) (int64, error) {
	if err := s.shut(); err != nil {
		return 0, err
	}
	return bench.DiskUsage(s.dir)
}

// Restart closes the hot set and the store and opens them again on the same data.
func (s *System) Restart(context.Context) error {
	if err := s.shut(); err != nil {
		return err
	}
	return s.open()
}

func (s *System) shut() error {
	var err error
	if s.srv != nil {
		s.cl.CloseIdle()
		err = s.srv.Shutdown(context.Background())
		<-s.srvCh
		s.srv, s.cl = nil, nil
	}
	if s.hs != nil {
		if e := s.hs.Close(); err == nil {
			err = e
		}
	}
	if s.store != nil {
		if e := s.store.Close(); err == nil {
			err = e
		}
	}
	s.hs, s.store = nil, nil
	return err
}

// Close closes the hot set and the store and removes the data directory.
func (s *System) Close() error {
	err := s.shut()
	if s.dir != "" {
		if e := os.RemoveAll(s.dir); err == nil {
			err = e
		}
		s.dir = ""
	}
	return err
}
