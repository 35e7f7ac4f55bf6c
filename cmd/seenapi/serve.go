package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
)

// errPublicWithoutKeys refuses an open service on a non-loopback address.
var errPublicWithoutKeys = errors.New("refusing to listen on a non-loopback address without API keys: " +
	"set --keys-file or SEENAPI_KEYS, or pass --insecure")

// isLoopback reports whether addr (host and port), an address to listen
// on, is a loopback address: a loopback IP, or localhost. A name under
// .localhost is not: browsers keep such names to loopback, but Go's
// resolver asks DNS for them, which may answer one of the machine's other
// addresses, and a service without keys would then listen there.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return false
	}
	return api.LoopbackHost(addr)
}

// keys returns the API keys of the keys file and of SEENAPI_KEYS.
func keys(o *options, env environ) ([]api.Key, error) {
	var ks []api.Key
	if v, set := env("SEENAPI_KEYS_FILE"); set && v == "" && o.keysFile == "" {
		return nil, fmt.Errorf("SEENAPI_KEYS_FILE is set but empty; to serve without keys, leave it unset")
	}
	if o.keysFile != "" {
		k, err := api.LoadKeysFile(o.keysFile)
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			return nil, fmt.Errorf("--keys-file: %w", pe) // the error names only the path
		}
		if err != nil {
			return nil, err
		}
		// A keys file without a key is most likely a provisioning failure;
		// serving open would hide it. Open is asked for by giving no file.
		if len(k) == 0 {
			return nil, fmt.Errorf("--keys-file %s holds no key (want ROLE:KEY lines); to serve without keys, give no keys file", o.keysFile)
		}
		ks = append(ks, k...)
	}
	if list, set := env("SEENAPI_KEYS"); set {
		k, err := api.ParseKeysList(list)
		if err != nil {
			return nil, fmt.Errorf("SEENAPI_KEYS: %w", err)
		}
		// Set but holding no key ("", " ", ","): a secret that did not render,
		// as likely a provisioning failure as an empty keys file.
		if len(k) == 0 {
			return nil, fmt.Errorf("SEENAPI_KEYS is set but holds no key (want role:key,role:key); to serve without keys, leave it unset")
		}
		// A key in both would otherwise be refused later by its place in
		// the two lists together, which names neither.
		inFile := map[string]bool{}
		for _, f := range ks {
			inFile[f.Secret] = true
		}
		for _, e := range k {
			if inFile[e.Secret] {
				return nil, fmt.Errorf("SEENAPI_KEYS: key %s is also in --keys-file %s; give each key once, in one of them", e.ID(), o.keysFile)
			}
		}
		ks = append(ks, k...)
	}
	return ks, nil
}

// reloadOn reads the keys again (keys file and SEENAPI_KEYS) and gives
// them to srv each time hup fires, until ctx ends, reads the namespaces
// file again when there is one and gives it to hot, and reads the TLS
// certificate again when there is one (cert not nil). Keys, namespaces or
// a certificate that do not load leave the old ones in place. A service
// started without keys stays open (see api.Server.SetKeys): it has no keys
// to reload, and says nothing of them, unless a SIGHUP finds nothing at all
// to reload (see nothingToReload). Each SIGHUP is counted in srv's figures
// (api.Server.NoteReload), failed when some part did not load.
func reloadOn(ctx context.Context, hup <-chan os.Signal, o *options, env environ, srv *api.Server, keys []api.Key, hot namespaceSetter, cert *certificate, logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		if srv.Open() && o.namespacesFile == "" && cert == nil {
			logger.Warn(nothingToReload)
			srv.NoteReload(true)
			continue
		}
		ks, keysOK := reloadKeys(o, env, srv, keys, logger)
		if ks != nil {
			keys = ks
		}
		namespacesOK := reloadNamespaces(o, hot, logger)
		// The keys in force, reloaded or not: a namespace taken out
		// leaves a key that did not reload limited to it as well.
		warnUnservedScopes(keys, hot.Namespaces(), "seenapi: SIGHUP: ", logger)
		certOK := reloadCertificate(cert, logger)
		srv.NoteReload(keysOK && namespacesOK && certOK)
	}
}

// reloadCertificate is what a SIGHUP does to the TLS certificate, if any
// (see reloadOn); false: it did not load.
func reloadCertificate(cert *certificate, logger *slog.Logger) bool {
	if cert == nil {
		return true
	}
	prev := cert.cur.Load()
	if err := cert.reload(); err != nil {
		logger.Error("seenapi: SIGHUP: the TLS certificate was not reloaded; the old one stays", "err", err)
		return false
	}
	// Its date tells a renewed certificate from the one before; a
	// SIGHUP sent before the files were replaced says so.
	leaf, msg := cert.cur.Load().Leaf, "seenapi: SIGHUP: TLS certificate reloaded"
	if bytes.Equal(leaf.Raw, prev.Leaf.Raw) {
		msg += ": the same certificate as before (to renew it, replace the files of --tls-cert and --tls-key, then send SIGHUP)"
	}
	logger.Info(msg, "cert", cert.certFile, "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	cert.warnIfExpired(time.Now(), "seenapi: SIGHUP: ", logger)
	return true
}

// reloadKeys is what a SIGHUP does to the API keys (see reloadOn), which
// were prev. It returns the keys reloaded, nil if none were (ok false if
// they did not load), and logs
// which keys it added, removed and changed (role, rate or namespaces), by
// their ids, so that the log shows a rotation took.
//
// A service started without keys has none to reload: it was given no keys
// file and no SEENAPI_KEYS (one holding no key is refused at the start), so
// a SIGHUP sent to it for its namespaces or its certificate is not about
// keys, and reloadKeys says nothing.
func reloadKeys(o *options, env environ, srv *api.Server, prev []api.Key, logger *slog.Logger) (_ []api.Key, ok bool) {
	if srv.Open() {
		return nil, true
	}
	ks, err := keys(o, env)
	if err == nil {
		err = srv.SetKeys(ks)
	}
	if err != nil {
		logger.Error("seenapi: SIGHUP: the API keys were not reloaded; the old ones stay", "err", err)
		return nil, false
	}
	logger.Info("seenapi: SIGHUP: API keys reloaded", append([]any{"keys", len(ks)}, keyChanges(prev, ks)...)...)
	warnKeysFileMode(o.keysFile, "seenapi: SIGHUP: ", logger)
	return ks, true
}

// nothingToReload is what a SIGHUP logs to a service started without keys,
// namespaces file or certificate: it reloads nothing, and whoever sent it
// most likely meant keys.
const nothingToReload = "seenapi: SIGHUP: nothing to reload: the service was started without API keys, namespaces file or TLS certificate, " +
	"and stays open; to require keys, restart it with --keys-file or SEENAPI_KEYS"

// keyChanges says, as log attributes, the ids of the keys in next and not
// in prev (added), in prev and not in next (removed), and in both with
// another role, rate or namespaces (changed); an empty list is left out.
func keyChanges(prev, next []api.Key) []any {
	was := make(map[string]api.Key, len(prev))
	for _, k := range prev {
		was[k.ID()] = k
	}
	var added, changed, removed []string
	for _, k := range next {
		p, ok := was[k.ID()]
		switch {
		case !ok:
			added = append(added, k.ID())
		case p.Role != k.Role || p.Rate != k.Rate || p.Burst != k.Burst || !slices.Equal(p.Namespaces, k.Namespaces):
			changed = append(changed, k.ID())
		}
		delete(was, k.ID())
	}
	for _, k := range prev {
		if _, ok := was[k.ID()]; ok {
			removed = append(removed, k.ID())
		}
	}
	var attrs []any
	for _, a := range []struct {
		name string
		ids  []string
	}{{"added", added}, {"removed", removed}, {"changed", changed}} {
		if len(a.ids) > 0 {
			attrs = append(attrs, a.name, strings.Join(a.ids, ","))
		}
	}
	return attrs
}

// warnUnservedScopes logs, after prefix, each namespace a key is limited to
// that nss does not serve.
func warnUnservedScopes(ks []api.Key, nss []eviction.Namespace, prefix string, logger *slog.Logger) {
	for _, u := range unservedScopes(ks, nss) {
		ns := u.ns
		if len(ns) >= api.MinKeyLength {
			ns = api.ShownScope(ns) // maybe a key (see api.ShownScope)
		}
		logger.Warn(prefix+"an API key is limited to a namespace that is not served", "key", u.key, "namespace", ns)
	}
}

// namespaceSetter is what a SIGHUP gives the namespaces file to
// (eviction.HotSet.SetNamespaces), and asks the namespaces served.
type namespaceSetter interface {
	SetNamespaces([]eviction.Namespace) (eviction.NamespaceChanges, error)
	Namespaces() []eviction.Namespace
}

// reloadNamespaces is what a SIGHUP does to the namespaces (see reloadOn):
// with a namespaces file, a namespace added to it is served at once, and a
// changed profile makes the filters of users who come from now on. False:
// the file did not load.
func reloadNamespaces(o *options, hot namespaceSetter, logger *slog.Logger) bool {
	if o.namespacesFile == "" {
		return true
	}
	nss, err := loadNamespaces(o.namespacesFile)
	var ch eviction.NamespaceChanges
	if err == nil {
		if ch, err = hot.SetNamespaces(nss); err != nil {
			err = fmt.Errorf("%s: %w", o.namespacesFile, err)
		}
	}
	if err != nil {
		logger.Error("seenapi: SIGHUP: the namespaces were not reloaded; the old ones stay", "err", err)
		return false
	}
	attrs := []any{"namespaces", len(nss)}
	for _, a := range []struct {
		key   string
		names []string
	}{{"added", ch.Added}, {"changed", ch.Changed}, {"removed", ch.Removed}} {
		if len(a.names) > 0 {
			attrs = append(attrs, a.key, strings.Join(a.names, ","))
		}
	}
	logger.Info("seenapi: SIGHUP: namespaces reloaded", attrs...)
	if len(ch.Removed) > 0 {
		logger.Warn("seenapi: SIGHUP: namespaces no longer in "+o.namespacesFile+" are not served from now on; "+
			"their users' changes are being written back, and their data stays in the store until the namespace is served again "+
			"or erased (DELETE /v1/namespaces/{ns}, role admin)",
			"removed", strings.Join(ch.Removed, ","))
	}
	return true
}

// config is what serve reads at its start, besides its flags, and check
// checks.
type config struct {
	keys       []api.Key
	namespaces []eviction.Namespace
	cert       *certificate // nil: plain HTTP
}

// loadConfig reads the API keys, the namespaces file and the TLS
// certificate, and refuses a public address without keys.
func loadConfig(o *options, env environ) (c config, err error) {
	if c.keys, err = keys(o, env); err != nil {
		return c, err
	}
	if len(c.keys) == 0 && !isLoopback(o.addr) && !o.insecure {
		return c, errPublicWithoutKeys
	}
	if c.namespaces, err = loadNamespaces(o.namespacesFile); err != nil {
		return c, err
	}
	if o.tlsCert != "" { // with --tls-key (options.check)
		if c.cert, err = loadCertificate(o.tlsCert, o.tlsKey); err != nil {
			return c, err
		}
	}
	return c, nil
}

// serve runs the service until ctx ends, then shuts down gracefully: stop
// accepting, finish requests in flight, write back, close the store.
func serve(ctx context.Context, o *options, env environ, logger *slog.Logger, onListen func(string)) (err error) {
	conf, err := loadConfig(o, env)
	if err != nil {
		return err
	}
	ks, namespaces, cert := conf.keys, conf.namespaces, conf.cert
	if o.debugAddr != "" { // a loopback address (options.check)
		dln, err := net.Listen("tcp", o.debugAddr)
		if err != nil {
			return fmt.Errorf("--debug-addr: %w", err)
		}
		defer dln.Close()
		go serveDebug(dln)
		logger.Info("seenapi: profiler", "url", "http://"+dln.Addr().String()+"/debug/pprof/")
	}
	if limit := o.heapLimit; limit > 0 { // checked with the flags (options.check)
		debug.SetMemoryLimit(limit)
		lb := byteSize(limit)
		logger.Info("seenapi: Go heap soft limit", "bytes", lb.String())
	} else if limit := o.envHeapLimit; limit >= 0 {
		lb := byteSize(limit)
		logger.Info("seenapi: Go heap soft limit", "bytes", lb.String(), "set_by", "GOMEMLIMIT")
	}

	// Bound before the store is opened, so that a taken address fails
	// before a data directory is made or a journal is touched.
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err) // "listen tcp ADDR: ...", as --debug-addr's
	}
	defer ln.Close() // Serve closes it too; this covers a failure before Serve
	scheme := "http"
	if cert != nil {
		ln, scheme = tls.NewListener(schemeGuard{Listener: ln, https: true}, cert.config()), "https"
	} else {
		ln = schemeGuard{Listener: ln}
	}

	// A large store takes seconds to open, while connections wait in the
	// listener's queue: the log says why nothing answers yet.
	logger.Info("seenapi: opening the store; connections wait until it is open", "data_dir", o.dataDir)
	opening := time.Now()
	store, err := storage.Open(storage.DefaultOptions(o.dataDir).WithSync(o.sync).
		WithMinFreeBytes(o.storeMinFreeBytes()).WithReleaseInterval(o.storeReleaseInterval()).WithLogger(logger))
	if err == nil {
		logger.Info("seenapi: store open", "took", time.Since(opening).Round(time.Millisecond))
	}
	if errors.Is(err, storage.ErrInUse) {
		return fmt.Errorf("--data-dir %s is in use, probably by another seenapi serving it%s: stop that one first, or give this one another --data-dir (%w)", o.dataDir, servingAt(o.dataDir), err)
	}
	if err != nil {
		return fmt.Errorf("--data-dir %s: %w", o.dataDir, err)
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
			if err == nil {
				err = &writeBackError{err: cerr}
			} else {
				err = errors.Join(err, fmt.Errorf("writing back: %w", cerr))
			}
		}
	}()
	stopGC := make(chan struct{})
	defer close(stopGC)
	go tuneGC(o.gc, hot, time.Second, stopGC, debug.SetGCPercent, logger)
	// closing is closed before the hot set and the store (defers run last
	// first): Recover failing after it only met the shutdown.
	closing := make(chan struct{})
	defer close(closing)
	journal := journalOf(store.OpenedAfterCrash())
	warnNotServed(hot.StoredNamespaces, logger)
	warnUnservedScopes(ks, namespaces, "seenapi: ", logger)

	cfg := o.limits
	cfg.Keys, cfg.Logger = ks, logger
	// Open to every caller, it listens on loopback only (unless --insecure):
	// answering only to loopback names keeps web pages out through DNS
	// rebinding too.
	cfg.LocalOnly = len(ks) == 0 && isLoopback(o.addr)
	cfg.Ready = func() error {
		if !hot.Ready() {
			return errors.New("folding in " + journal)
		}
		return nil
	}
	srv, err := api.New(hot, cfg)
	if err != nil {
		return err
	}
	loadKeptAnswers(srv, o.dataDir, logger)
	answers := filepath.Join(o.dataDir, answersLogDir)
	// Within the wait before a write-back, which keeps a keyed call's
	// journal record until the log holds its answer: written by then, the
	// user need not be written again to retire it.
	every := min(100*time.Millisecond, o.flushInterval/2)
	read, lerr := srv.OpenAnswerLog(answers, o.sync, max(every, time.Millisecond))
	if read > 0 {
		logger.Info("seenapi: answers kept for retries read back from their log", "answers", read)
	}
	if lerr != nil {
		logger.Warn("seenapi: cannot open the log of answers kept for retries; a crash would lose them", "dir", answers, "err", lerr)
	}
	dropKeptAnswers(o.dataDir, logger)
	// Once the answers kept are read back: the journal's answers, which
	// folding reads back, age in the time those set (api.Server).
	go foldJournal(hot.Recover, journal, closing, logger)
	addr := ln.Addr().String()
	shown := shownAddr(addr, o.addr)
	if srv.Open() {
		logger.Warn("seenapi: NO API KEYS: the API is open to anyone who can reach " + shown +
			"; set --keys-file or SEENAPI_KEYS to require keys")
	}
	warnSettings(o, shown, !srv.Open(), cert != nil, logger)
	if cert != nil {
		cert.warnIfExpired(time.Now(), "seenapi: ", logger)
	}
	// SIGHUP reloads the API keys, the namespaces and the TLS certificate,
	// to rotate or add them without a restart (which would empty the hot set).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Ignore(syscall.SIGHUP) // not Stop: the default action would end the shutdown
	go reloadOn(ctx, hup, o, env, srv, ks, hot, cert, logger)
	names := make([]string, len(namespaces))
	for i, n := range namespaces {
		names[i] = n.Name
	}
	attrs := []any{"version", version(), "url", scheme + "://" + shown, "data_dir", o.dataDir,
		"cache_bytes", o.cacheBytes.String(), "namespaces", strings.Join(names, ","), "keys", len(ks), "sync", o.sync}
	own := 0
	for _, k := range ks {
		if k.Rate != 0 {
			own++
		}
	}
	if own > 0 {
		attrs = append(attrs, "keys_with_own_rate", own)
	}
	if lim := cfg.WithDefaults(); lim.RateLimit > 0 {
		caller := "API key"
		if srv.Open() {
			caller = "client address"
		}
		attrs = append(attrs, "rate_limit", strconv.FormatFloat(lim.RateLimit, 'g', -1, 64)+"/s per "+caller, "rate_burst", lim.RateBurst)
	}
	logger.Info("seenapi: serving", attrs...)
	// The commands run on the directory while it is in use (backup,
	// restore, a second serve) read where the service answers, to say
	// which --url to call instead.
	urlFile := filepath.Join(o.dataDir, servingURLFile)
	if _, err := writeFileAtomic(urlFile, func(w io.Writer) (int, error) {
		return fmt.Fprintln(w, scheme+"://"+localAddr(addr, o.addr))
	}); err != nil {
		logger.Warn("seenapi: cannot note the service's URL in the data directory", "file", urlFile, "err", err)
	}
	defer os.Remove(urlFile)
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
	if o.drainDelay > 0 {
		// A load balancer that polls /readyz stops sending new requests
		// before the listener closes on them.
		srv.Drain()
		logger.Info("seenapi: draining: /readyz answers 503 while requests are still taken (--drain-delay); a second SIGINT or SIGTERM stops at once, the journal keeping every acknowledged change", "drain_delay", o.drainDelay)
		select {
		case err := <-served:
			return fmt.Errorf("serving: %w", err)
		case <-time.After(o.drainDelay):
		}
	}
	logger.Info("seenapi: shutting down: finishing requests in flight, then writing back; a second SIGINT or SIGTERM stops at once, the journal keeping every acknowledged change")
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Error("seenapi: requests still in flight at the shutdown timeout", "err", err)
	}
	// A stop that comes before Serve has begun finds no listener to close,
	// and Serve would then run on: closing it ends Serve in either case.
	ln.Close()
	<-served
	saved := saveKeptAnswers(srv, o.dataDir, logger)
	if err := srv.CloseAnswerLog(saved); err != nil {
		logger.Warn("seenapi: cannot close the log of answers kept for retries", "dir", answers, "err", err)
	}
	return nil // the deferred closes write back and close the store
}

// writeBackError is serve's error when the final write-back (a full disk,
// say) was its only failure: every change it did not write is in the
// journal, which the next start folds in, so nothing acknowledged is lost
// and the log says so rather than that serving failed.
type writeBackError struct{ err error }

func (e *writeBackError) Error() string { return "writing back: " + e.err.Error() }
func (e *writeBackError) Unwrap() error { return e.err }

// keptAnswersFile holds, across a graceful restart, the answers kept for
// retries of calls sent with an Idempotency-Key, until the next start's
// log takes them over; answersLogDir holds them across a crash, each
// written as it is given (api.Server.OpenAnswerLog), until a graceful stop
// has saved them all in keptAnswersFile.
const (
	keptAnswersFile = "kept-answers"
	answersLogDir   = "answers"
)

// saveKeptAnswers writes the answers kept for retries into the data
// directory at a graceful stop, so that a retry after a deploy gets its
// answer, and reports whether it did; a failure costs only those answers
// (the log of answers then stays), and is logged.
func saveKeptAnswers(srv *api.Server, dir string, logger *slog.Logger) bool {
	path := filepath.Join(dir, keptAnswersFile)
	n, err := writeFileAtomic(path, func(w io.Writer) (int, error) { return srv.SaveReplays(w) })
	if err != nil {
		logger.Warn("seenapi: cannot keep the answers for retries across the restart", "file", path, "err", err)
		return false
	}
	logger.Info("seenapi: answers kept for retries saved", "answers", n)
	return true
}

// loadKeptAnswers reads back what saveKeptAnswers wrote, if anything.
func loadKeptAnswers(srv *api.Server, dir string, logger *slog.Logger) {
	path := filepath.Join(dir, keptAnswersFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil {
		defer f.Close()
		var n int
		if n, err = srv.LoadReplays(bufio.NewReader(f)); err == nil {
			logger.Info("seenapi: answers kept for retries read back", "answers", n)
			return
		}
	}
	logger.Warn("seenapi: cannot read back the answers kept for retries; retries of calls before the restart are served anew", "file", path, "err", err)
}

// dropKeptAnswers deletes what saveKeptAnswers wrote, once the log of
// answers has opened: the log holds its answers from then on, for a start
// after a crash (api.Server.OpenAnswerLog), and only the log can void the
// answers of a user erased since. Left in place, the file would give them
// back after a crash. (A log that did not open holds none: a crash loses
// them, as the start's warning says.)
func dropKeptAnswers(dir string, logger *slog.Logger) {
	path := filepath.Join(dir, keptAnswersFile)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		logger.Error("seenapi: cannot delete the answers kept for retries across the last restart; "+
			"a start after a crash could give answers of users erased since", "file", path, "err", err)
	}
}

// writeFileAtomic writes path through fill in a file beside it, synced
// and renamed over it, so that a crash leaves the old file or the new one.
func writeFileAtomic(path string, fill func(io.Writer) (int, error)) (int, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing is there
	w := bufio.NewWriter(tmp)
	n, err := fill(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		if d, derr := os.Open(filepath.Dir(path)); derr == nil {
			err = d.Sync()
			d.Close()
		}
	}
	return n, err
}

// journalOf names the journal a start folds in: left by a crash when the
// store says the last process did not close it. Otherwise what it holds
// was not written back for another reason, most often a restore (a backup
// of a running service carries its calls not yet written back as journal
// records), and no crash is claimed.
func journalOf(crashed bool) string {
	if crashed {
		return "the journal left by a crash"
	}
	return "the journal of calls not yet written back"
}

// foldJournal runs fold (the hot set's Recover) and logs its outcome:
// how many users' journals were folded in, or why some were not; journal
// names them (journalOf). A failure once closing is closed only met the
// shutdown, and the journal is still there for the next start: not an
// error.
func foldJournal(fold func() (int, error), journal string, closing <-chan struct{}, logger *slog.Logger) {
	users, err := fold()
	switch {
	case err != nil:
		select {
		case <-closing:
			return
		default:
		}
		logger.Error("seenapi: folding in "+journal+" failed for some users", "err", err)
	case users > 0:
		logger.Info("seenapi: folded in "+journal, "users", users)
	}
}

// warnNotServed says at the start which namespaces hold users in the
// store without being served (left out of the namespaces file): their data
// would otherwise stay on disk unseen. It reads a few keys a namespace
// (more for a while after a large purge: 0.4 s after a million users). An
// error says nothing: the list is a courtesy, and the store's failures
// show in the calls.
func warnNotServed(stored func() ([]string, error), logger *slog.Logger) {
	if names, err := stored(); err == nil && len(names) > 0 {
		logger.Warn("seenapi: the store holds users of namespaces that are not served (not in the namespaces file); "+
			"they stay until the namespace is served again or erased (DELETE /v1/namespaces/{ns}, role admin)",
			"not_served", strings.Join(names, ","))
	}
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
	// Loopback names only: a web page whose own name resolves to
	// 127.0.0.1 (DNS rebinding) is same-origin with the profiler in the
	// browser, and could read its dumps and keep the CPU profiling.
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !api.LoopbackHost(r.Host) {
			http.Error(w, "the profiler answers to loopback names only (localhost, 127.0.0.1, [::1])", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: local, ReadHeaderTimeout: 10 * time.Second}
	_ = srv.Serve(ln) // ends when serve closes ln
}

// gcPolicy is what --gc-percent asks of the collector.
type gcPolicy struct {
	auto  bool
	fixed int  // GOGC to set when not auto
	set   bool // false: leave the runtime's own (GOGC given to it)
}

// The percentages of --gc-percent auto. Go's own, 100, lets the heap reach
// twice what is live between collections. While the hot set is under its
// budget, what is live is mostly filters (pointer-free words the collector
// does not scan): at 50, seenbench --users 1e5 --systems seenapi-http
// measured a fifth less resident memory per user than at 100 for about an
// eighth more server CPU a call (medians of five alternated pairs: 2,786 B
// and 76.2 us against 3,503 B and 67.9 us; an earlier pair of runs had
// shown no CPU difference, within that day's noise). Once it is
// full, every cold user loaded and every user evicted allocates and frees,
// collections come often, and --memory-limit bounds the heap anyway:
// seenbench --users 2e6 --cache-bytes 260MiB (a tenth hot) measured 95.8
// and 104 us of CPU a call at 50 against 80.8 and 85.3 us at 100, with
// resident memory per user within 5%.
const (
	gcPercentFilling = 50
	gcPercentFull    = 100
)

// gcPercent reads --gc-percent.
func gcPercent(o *options, env environ) (gcPolicy, error) {
	if env.get("GOGC") != "" {
		return gcPolicy{}, nil
	}
	p, err := parseGCPercent(o.gcPercent)
	if err != nil {
		return gcPolicy{}, fmt.Errorf("--gc-percent %q: %w", o.gcPercent, err)
	}
	return p, nil
}

// parseGCPercent reads a value of --gc-percent.
func parseGCPercent(s string) (gcPolicy, error) {
	switch s {
	case "auto", "":
		return gcPolicy{auto: true, set: true}, nil
	case "off":
		return gcPolicy{fixed: -1, set: true}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return gcPolicy{}, errors.New("want a positive percentage, auto or off")
	}
	// debug.SetGCPercent takes it as an int32: past that it would wrap,
	// 2147483648 to a negative (no collection), 4294967396 to 100.
	if n > math.MaxInt32 {
		return gcPolicy{}, fmt.Errorf("want a percentage of at most %d (Go's collector takes no more), auto or off", math.MaxInt32)
	}
	return gcPolicy{fixed: n, set: true}, nil
}

// hotSetUsage is what tuneGC watches: the hot set's bytes and budget.
type hotSetUsage interface{ Usage() (bytes, budget int64) }

// tuneGC applies p until stop is closed: a fixed percentage once, or with
// auto, gcPercentFilling while the hot set is under 90% of its budget and
// gcPercentFull from then until it falls under 80%, checked every tick.
func tuneGC(p gcPolicy, hot hotSetUsage, tick time.Duration, stop <-chan struct{}, set func(int) int, logger *slog.Logger) {
	if !p.set {
		logger.Info("seenapi: collector set by GOGC")
		return
	}
	if !p.auto {
		set(p.fixed)
		logger.Info("seenapi: collector", "gc_percent", p.fixed)
		return
	}
	full := false
	set(gcPercentFilling)
	logger.Info("seenapi: collector", "gc_percent", gcPercentFilling, "then", fmt.Sprintf("%d once the hot set is full", gcPercentFull))
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		used, budget := hot.Usage()
		switch {
		case !full && used >= budget/10*9:
			full = true
			set(gcPercentFull)
			logger.Info("seenapi: hot set full: collector", "gc_percent", gcPercentFull)
		case full && used < budget/10*8:
			full = false
			set(gcPercentFilling)
			logger.Info("seenapi: hot set under its budget again: collector", "gc_percent", gcPercentFilling)
		}
	}
}

// badgerHeapBytes is what Badger keeps on the Go heap at most: its
// memtables (48MiB; the store keeps no block cache).
const badgerHeapBytes = storage.DefaultNumMemtables * storage.DefaultMemTableSize

// autoMemoryLimit is --memory-limit auto: twice the budget, room for
// GOGC=100's doubling of a hot set that fills it, plus 768MiB for Badger
// and the rest. At ten million users with a 1300MiB budget, 1.25 x the
// budget + 768MiB (2.4GiB) kept the heap so near the limit that the
// collector took a fifth of the server's CPU (seenbench, a CPU profile of
// the saturation phase): 83.4 us a call and 0.62x the calls/s at 1e5. With
// this limit 68.8 us and 0.87x (no limit: 66.6 us, 0.78x), at 11% more
// anonymous memory (23% without a limit).
//
// Where the process may use less memory than that (memory, a container's
// limit or the machine's; 0 if unknown), the limit is 90% of it, so that
// the collector holds the heap back before the container is killed for
// lack of memory, but not under the budget and Badger's heap.
func autoMemoryLimit(cacheBytes, memory int64) int64 {
	limit := 2*cacheBytes + 768<<20
	if memory > 0 {
		limit = min(limit, max(memory/10*9&^(1<<20-1), cacheBytes+badgerHeapBytes)) // in whole MiB
	}
	return limit
}

// memoryLimit is the Go heap's soft limit: without one the heap may grow to
// twice what is live before the collector runs (GOGC=100), which for a
// hot set of a few GiB is GiBs of resident memory over the budget. 0: no
// limit set here (off, or GOMEMLIMIT given to the Go runtime directly).
func memoryLimit(o *options, env environ) (int64, error) {
	if env.get("GOMEMLIMIT") != "" {
		return 0, nil
	}
	limit, auto, err := parseMemoryLimit(o.memoryLimit)
	switch {
	case err != nil:
		return 0, fmt.Errorf("--memory-limit %q: %w", o.memoryLimit, err)
	case auto:
		return autoMemoryLimit(int64(o.cacheBytes), totalMemory()), nil
	case limit == 0:
		return 0, nil
	}
	// Below the hot set's budget plus Badger's memtables,
	// all on the Go heap, the collector would run all the time once the
	// hot set is full.
	if least := int64(o.cacheBytes) + badgerHeapBytes; limit < least {
		return 0, fmt.Errorf("--memory-limit %q: want at least --cache-bytes + %s (%s), or auto or off",
			o.memoryLimit, formatBytes(badgerHeapBytes), formatBytes(least))
	}
	return limit, nil
}

// goMemLimit is the soft limit GOMEMLIMIT gives the Go runtime, which
// takes it in place of --memory-limit: -1 when unset, off, or not a size
// (the runtime refuses to start with such a value anyway). 0 is a limit,
// of no bytes: the collector runs all the time.
func goMemLimit(env environ) int64 {
	v := env.get("GOMEMLIMIT")
	if v == "" || v == "off" {
		return -1
	}
	n, err := parseBytes(v)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// parseMemoryLimit reads a value of --memory-limit: a size, auto, or off
// (0: no limit). How it compares with --cache-bytes is memoryLimit's check.
func parseMemoryLimit(s string) (limit int64, auto bool, err error) {
	switch s {
	case "off", "0":
		return 0, false, nil
	case "auto", "":
		return 0, true, nil
	}
	var b byteSize
	if err := b.Set(s); err != nil || b <= 0 {
		return 0, false, errors.New("want a size such as 2GiB, auto or off")
	}
	return int64(b), false, nil
}

// shownAddr is the address the logs give: the listener's, with the host
// asked for when that is 0.0.0.0 (Go listens there on every address, IPv6
// too, and reports "[::]", which reads as IPv6 only).
func shownAddr(listened, asked string) string {
	host, _, err := net.SplitHostPort(asked)
	ip := net.ParseIP(host)
	if err != nil || ip == nil || !ip.IsUnspecified() || ip.To4() == nil {
		return listened
	}
	_, port, err := net.SplitHostPort(listened)
	if err != nil {
		return listened
	}
	return net.JoinHostPort(host, port)
}

// servingURLFile holds, in the data directory of a running service, the
// URL it answers at from this machine; removed when it stops. A crash
// leaves it, stale, until the next start rewrites it: it is read only
// while the directory is in use.
const servingURLFile = "serving-url"

// servingURL returns the URL the service holding dir noted, "" if none.
func servingURL(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, servingURLFile))
	if err != nil {
		return ""
	}
	u := strings.TrimSpace(string(b))
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return ""
	}
	return u
}

// servingAt is " at URL" for the service holding dir, "" when it noted none.
func servingAt(dir string) string {
	if u := servingURL(dir); u != "" {
		return " at " + u
	}
	return ""
}

// localAddr is the address a client on this machine calls the service at:
// the listened one, with an unspecified host (--addr 0.0.0.0:PORT, :PORT)
// made the loopback one of its family.
func localAddr(listened, asked string) string {
	host, port, err := net.SplitHostPort(listened)
	if err != nil {
		return listened
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsUnspecified() {
		return listened
	}
	if ah, _, err := net.SplitHostPort(asked); err == nil {
		if aip := net.ParseIP(ah); aip != nil && aip.To4() != nil {
			return net.JoinHostPort("127.0.0.1", port)
		}
	}
	if ip.To4() != nil {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return net.JoinHostPort("::1", port)
}

// storeDescriptors is what the service keeps for itself besides its
// connections when --max-connections is weighed against ulimit -n.
const storeDescriptors = 1024

// warnSettings logs the settings that the service takes but that are
// likely to hurt it: each works, and each was met as a mistake. serve logs
// them at its start and check prints them, so that they are seen before a
// restart. addr is the address as the log shows it.
func warnSettings(o *options, addr string, keyed, https bool, logger *slog.Logger) {
	if keyed && !https && !isLoopback(o.addr) {
		logger.Warn("seenapi: API keys cross the network in clear text on " + addr +
			": serve HTTPS (--tls-cert and --tls-key) or put a TLS proxy in front")
	}
	// Badger takes the disk a value-log file or a memtable file at a time,
	// through memory maps: a disk that fills inside one stops the process
	// with SIGBUS instead of a refused write.
	const atOnce = storage.DefaultValueLogFileSize + storage.DefaultMemTableSize
	if m := o.storeMinFreeBytes(); m > 0 && m < atOnce {
		logger.Warn("seenapi: --min-free-bytes is under what the store may take at once (a 128 MiB value-log file and a 16 MiB memtable): "+
			"a disk that fills may stop the process (SIGBUS) before writes are refused", "min_free_bytes", m, "at_least", int64(atOnce))
	}
	// The memory the process may use is a container's limit where there
	// is one: a budget or heap limit past it is an out-of-memory kill.
	if total := totalMemory(); total > 0 && int64(o.cacheBytes) > total {
		logger.Warn("seenapi: --cache-bytes is more than this machine's memory (or its container's limit): the process would be killed for lack of memory "+
			"before it evicts a user", "cache_bytes", int64(o.cacheBytes), "memory_bytes", total)
	} else if total > 0 && o.heapLimit > total {
		logger.Warn("seenapi: the Go heap's soft limit (--memory-limit) is more than this machine's memory (or its container's limit): "+
			"once the hot set fills, the process may be killed for lack of memory before the collector holds it back; "+
			"lower --cache-bytes, or set --memory-limit under the memory", "heap_limit", o.heapLimit, "memory_bytes", total)
	}
	// GOMEMLIMIT is taken as it is, unchecked by memoryLimit: one under
	// what --memory-limit may be would have the collector run all the time
	// once the hot set fills, for as much CPU as the calls.
	if limit, least := o.envHeapLimit, int64(o.cacheBytes)+badgerHeapBytes; limit >= 0 && limit < least {
		logger.Warn("seenapi: GOMEMLIMIT, which takes the place of --memory-limit, is under --cache-bytes + "+formatBytes(badgerHeapBytes)+
			": once the hot set fills, the collector would run all the time; raise GOMEMLIMIT or lower --cache-bytes, or unset GOMEMLIMIT",
			"gomemlimit", limit, "at_least", least)
	}
	// Each connection holds a descriptor; the store holds hundreds (its
	// tables, value-log files and journal segments).
	if fds := descriptorLimit(); fds > 0 && uint64(o.limits.MaxConnections)+storeDescriptors > fds {
		logger.Warn("seenapi: --max-connections leaves the store fewer descriptors than it may need under ulimit -n: "+
			"raise ulimit -n or lower --max-connections", "max_connections", o.limits.MaxConnections,
			"descriptors", fds, "store_needs", storeDescriptors)
	}
	warnKeysFileMode(o.keysFile, "seenapi: ", logger)
}

// warnKeysFileMode logs, after prefix, that the keys file at path (none
// when "") can be read by other users of the machine, if it can: at the
// start, and at each SIGHUP, since an editor or a copy that replaced the
// file may have left it so.
func warnKeysFileMode(path, prefix string, logger *slog.Logger) {
	if path == "" {
		return
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		logger.Warn(prefix+"the keys file can be read by other users of this machine; chmod 600 it",
			"file", path, "mode", fi.Mode().Perm().String())
	}
}
