package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"strings"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
)

// errPublicWithoutKeys refuses an open service on a non-loopback address.
var errPublicWithoutKeys = errors.New("refusing to listen on a non-loopback address without API keys: " +
	"set --keys-file or SEENAPI_KEYS, or pass --insecure")

// isLoopback reports whether addr's host is a loopback address.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// keys returns the API keys of the keys file and of SEENAPI_KEYS.
func keys(o *options, getenv func(string) string) ([]api.Key, error) {
	var ks []api.Key
	if o.keysFile != "" {
		k, err := api.LoadKeysFile(o.keysFile)
		if err != nil {
			return nil, err
		}
		ks = append(ks, k...)
	}
	if list := getenv("SEENAPI_KEYS"); list != "" {
		k, err := api.ParseKeysList(list)
		if err != nil {
			return nil, fmt.Errorf("SEENAPI_KEYS: %w", err)
		}
		ks = append(ks, k...)
	}
	return ks, nil
}

// serve runs the service until ctx ends, then shuts down gracefully: stop
// accepting, finish requests in flight, write back, close the store.
func serve(ctx context.Context, o *options, getenv func(string) string, logger *slog.Logger, onListen func(string)) (err error) {
	ks, err := keys(o, getenv)
	if err != nil {
		return err
	}
	if len(ks) == 0 && !isLoopback(o.addr) && !o.insecure {
		return errPublicWithoutKeys
	}
	if o.debugAddr != "" {
		if !isLoopback(o.debugAddr) {
			return fmt.Errorf("--debug-addr %s: the profiler listens on loopback addresses only", o.debugAddr)
		}
		dln, err := net.Listen("tcp", o.debugAddr)
		if err != nil {
			return fmt.Errorf("--debug-addr: %w", err)
		}
		defer dln.Close()
		go serveDebug(dln)
		logger.Info("seenapi: profiler", "url", "http://"+dln.Addr().String()+"/debug/pprof/")
	}
	if limit, err := memoryLimit(o, getenv); err != nil {
		return err
	} else if limit > 0 {
		debug.SetMemoryLimit(limit)
		lb := byteSize(limit)
		logger.Info("seenapi: Go heap soft limit", "bytes", lb.String())
	}
	if pct, ok := gcPercent(o, getenv); ok {
		debug.SetGCPercent(pct)
	}
	namespaces, err := loadNamespaces(o.namespacesFile)
	if err != nil {
		return err
	}

	store, err := storage.Open(storage.DefaultOptions(o.dataDir).WithSync(o.sync).
		WithMinFreeBytes(int64(o.minFreeBytes)).WithLogger(logger))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := store.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	hopts := o.hotSetOptions()
	hopts.Logger = logger
	hot, err := eviction.New(store, namespaces, hopts)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := hot.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("writing back: %w", cerr))
		}
	}()
	go func() {
		if err := hot.Recover(); err != nil && !errors.Is(err, eviction.ErrClosed) {
			logger.Error("seenapi: folding the journal left by a crash failed for some users", "err", err)
		}
	}()

	cfg := o.limits
	cfg.Keys, cfg.Logger = ks, logger
	cfg.Ready = func() error {
		if !hot.Ready() {
			return errors.New("folding the journal left by a crash")
		}
		return nil
	}
	srv, err := api.New(hot, cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	if srv.Open() {
		logger.Warn("seenapi: NO API KEYS: the API is open to anyone who can reach " + addr +
			"; set --keys-file or SEENAPI_KEYS to require keys")
	}
	names := make([]string, len(namespaces))
	for i, n := range namespaces {
		names[i] = n.Name
	}
	logger.Info("seenapi: serving", "url", "http://"+addr, "data_dir", o.dataDir,
		"cache_bytes", o.cacheBytes.String(), "namespaces", strings.Join(names, ","), "keys", len(ks), "sync", o.sync)
	if onListen != nil {
		onListen(addr)
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info("seenapi: shutting down: finishing requests in flight, then writing back")
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Error("seenapi: requests still in flight at the shutdown timeout", "err", err)
	}
	<-served
	return nil // the deferred closes write back and close the store
}

// serveDebug serves Go's profiler on ln (loopback only; see --debug-addr)
// until ln is closed.
func serveDebug(ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	_ = srv.Serve(ln) // ends when serve closes ln
}

// defaultGCPercent is --gc-percent's default. Go's own (100) lets the heap
// reach twice what is live between collections, and what is live is mostly
// the hot set; at 50, seenbench --users 1e5 measured about 23% less
// resident memory per user (2,921 and 2,928 B against 3,798 and 3,772 B,
// alternated runs) and no more server CPU per call (71.8 and 75.1 us
// against 83.2 and 84.0 us, a noisy machine): filters are pointer-free
// words the collector does not scan, so a cycle costs little.
const defaultGCPercent = 50

// gcPercent is the collector's target percentage to set, if any: none
// when Go's GOGC is set (the runtime has read it).
func gcPercent(o *options, getenv func(string) string) (int, bool) {
	if getenv("GOGC") != "" {
		return 0, false
	}
	return o.gcPercent, true
}

// memoryLimit is the Go heap's soft limit: without one the heap may grow to
// twice what is live before the collector runs (GOGC=100), which for a
// hot set of a few GiB is GiBs of resident memory over the budget. 0: no
// limit set here (off, or GOMEMLIMIT given to the Go runtime directly).
func memoryLimit(o *options, getenv func(string) string) (int64, error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	switch o.memoryLimit {
	case "off", "0":
		return 0, nil
	case "auto", "":
		return int64(o.cacheBytes)*5/4 + 768<<20, nil
	}
	var b byteSize
	if err := b.Set(o.memoryLimit); err != nil || b <= 0 {
		return 0, fmt.Errorf("--memory-limit %q: want a size such as 2GiB, auto or off", o.memoryLimit)
	}
	return int64(b), nil
}
