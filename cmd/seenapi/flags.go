package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
)

// options are the settings of every subcommand.
type options struct {
	addr            string
	dataDir         string
	cacheBytes      byteSize
	flushInterval   time.Duration
	sync            bool
	releaseEvery    time.Duration // --value-log-release-interval
	keysFile        string
	tlsCert         string
	tlsKey          string
	namespacesFile  string
	insecure        bool
	shutdownTimeout time.Duration
	drainDelay      time.Duration
	minFreeBytes    byteSize
	memoryLimit     string
	gcPercent       string
	heapLimit       int64    // of memoryLimit, set by check
	envHeapLimit    int64    // GOMEMLIMIT's, which the Go runtime takes in place of heapLimit (-1: none); set by check
	gc              gcPolicy // of gcPercent, set by check
	debugAddr       string
	logFormat       string
	logLevel        string
	limits          api.Config

	out, in         string // backup --out, restore --in
	merge           bool   // restore --merge
	discardExisting bool   // restore --discard-existing
	url, key        string // backup --url, --key: back up a running service
	caCert          string // backup --ca-cert
	skipDamaged     bool   // backup --skip-damaged

	imp importOptions // import-redis

	newKey newKeyOptions // new-key

	fromEnv map[string]bool // the flags the environment set (see named)
	given   map[string]bool // the flags the command line set
}

// envName is the environment variable of a flag: SEENAPI_ and the flag's
// name in upper case with - as _.
func envName(flagName string) string {
	return "SEENAPI_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// newFlagSet defines the flags of cmd on o.
func newFlagSet(cmd string, o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("seenapi "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	flagsOf := cmd
	if cmd == "check" {
		flagsOf = "serve" // check takes the command line of the service it checks
	}
	// import-redis is a client of the service: no data directory. Backup
	// only reads the store: no free-space minimum.
	dataDir := map[string]string{
		"serve":   "directory of the Badger store (created if missing)",
		"backup":  "directory of the Badger store to back up (must exist)",
		"restore": "directory of the Badger store to restore into (created if missing)",
	}
	minFree := map[string]string{
		"serve":   "refuse writes (507 storage-full) while the data directory's filesystem has less free space than this (0 or negative: no check)",
		"restore": "refuse to restore while the data directory's filesystem has less free space than this (0 or negative: no check)",
	}
	if cmd == "check" {
		// It reads the store, without writing to it or making it.
		dataDir[cmd] = "directory of the Badger store the service serves, read (never written) for the namespaces it holds users of that are not served"
	}
	if usage, ok := dataDir[cmd]; ok {
		o.dataDir = "./data"
		fs.Var(parsedString{&o.dataDir, func(s string) error {
			if s == "" {
				return errors.New("want a directory's path; for ./data, give no --data-dir")
			}
			return nil
		}}, "data-dir", usage)
	}
	if usage, ok := minFree[flagsOf]; ok {
		o.minFreeBytes = storage.DefaultMinFreeBytes
		fs.Var(&o.minFreeBytes, "min-free-bytes", usage)
	}
	switch flagsOf {
	case "serve":
		// Checked as it is set, so that an error names where the value
		// came from: --addr, or SEENAPI_ADDR in a unit file.
		o.addr = "127.0.0.1:8080"
		fs.Var(parsedString{&o.addr, checkListenAddr}, "addr", "address to listen on; a non-loopback address needs API keys or --insecure")
		o.cacheBytes = byteSize(512 << 20)
		fs.Var(positiveBytes{&o.cacheBytes}, "cache-bytes", "memory budget of hot user filters, e.g. 512MiB or 4GiB")
		o.flushInterval = eviction.DefaultFlushInterval
		fs.Var(durationFlag{p: &o.flushInterval, min: minFlushInterval, max: maxFlushInterval}, "flush-interval", "how long a changed filter waits to be written back, up to twice that when many are due (the journal keeps it durable meanwhile), at least 1ms, at most 288h")
		fs.BoolVar(&o.sync, "sync", false, "fsync every journal append and write-back (survives power loss, not only a crash)")
		o.releaseEvery = storage.DefaultReleaseInterval
		fs.Var(durationFlag{p: &o.releaseEvery, zeroOK: true, min: time.Second, eg: "10s", zero: "off"}, "value-log-release-interval",
			"how often the store syncs the value log and has the kernel take its pages out of the process's resident memory (Linux; Badger maps the value log, so every filter written back stayed resident), at least 1s (0: off)")
		// Given empty (--keys-file "$KEYS_FILE", the variable unset), it
		// would serve open: as likely a provisioning failure as
		// SEENAPI_KEYS_FILE set but empty, refused in keys.
		fs.Var(parsedString{&o.keysFile, func(s string) error {
			if s == "" {
				return errors.New("want a file's path; to serve without keys, give no --keys-file")
			}
			return nil
		}}, "keys-file", `file of API keys, one "ROLE:KEY" a line (roles read, write, admin), optionally followed by the key's own "rate=N burst=N" (or "rate=off") in place of --rate-limit and "namespaces=a,b" to limit it to those; # comments; one without a key is refused; SIGHUP reloads it; SEENAPI_KEYS="role:key,role:key" adds keys`)
		fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM file of the TLS certificate (with its chain) to serve HTTPS with, together with --tls-key; SIGHUP reloads both; empty: plain HTTP")
		fs.StringVar(&o.tlsKey, "tls-key", "", "PEM file of the private key of --tls-cert")
		fs.Var(durationFlag{p: &o.limits.HSTSMaxAge, zeroOK: true, min: time.Second, eg: "8760h", zero: "none sent"}, "hsts-max-age",
			"with --tls-cert, send Strict-Transport-Security with this max-age on every answer, e.g. 8760h (a year): browsers then call the host name by HTTPS only, on every port; 0: none")
		fs.StringVar(&o.namespacesFile, "namespaces", "", "YAML file of namespace profiles, read again on SIGHUP (see README); default: only the namespace \"default\"")
		fs.BoolVar(&o.insecure, "insecure", false, "allow listening on a non-loopback address without API keys")
		o.memoryLimit = "auto"
		fs.Var(parsedString{&o.memoryLimit, func(s string) error { _, _, err := parseMemoryLimit(s); return err }}, "memory-limit", `soft limit of the Go heap (Go's GOMEMLIMIT, which wins when set), e.g. 2GiB, at least --cache-bytes + 48MiB; "auto": 2 x --cache-bytes + 768MiB; "off" (or 0): none`)
		o.gcPercent = "auto"
		fs.Var(parsedString{&o.gcPercent, func(s string) error { _, err := parseGCPercent(s); return err }}, "gc-percent", `how far the Go heap may grow past what is live before a collection, in percent (Go's GOGC, which wins when set); "auto": 50 while the hot set is under its budget, 100 once it is full (evicting; --memory-limit then bounds the heap); "off": no collection`)
		fs.Var(parsedString{&o.debugAddr, func(s string) error {
			if s == "" {
				return nil // off
			}
			if err := checkListenAddr(s); err != nil {
				return err
			}
			// A usage error like any other value that cannot work,
			// refused before anything starts.
			if !isLoopback(s) {
				return errors.New("the profiler listens on loopback addresses only, e.g. 127.0.0.1:6060")
			}
			return nil
		}}, "debug-addr", "loopback address serving Go's profiler (/debug/pprof/) for diagnosing the service; empty: off")
		o.shutdownTimeout = 30 * time.Second
		fs.Var(durationFlag{p: &o.shutdownTimeout, zeroOK: true, min: minTimeout, eg: "30s", zero: "no wait"}, "shutdown-timeout", "how long shutdown waits for requests in flight, at least 100ms (0: it does not wait, and requests still in flight may fail)")
		fs.Var(durationFlag{p: &o.drainDelay, zeroOK: true, min: minDrainDelay, eg: "10s", zero: "no drain"}, "drain-delay", "on SIGTERM or SIGINT, how long /readyz answers 503 while requests are still taken, before the listener closes: time for a load balancer to stop sending new ones, at least 1s (0: it closes at once)")
		sizeVar(fs, &o.limits.MaxBodyBytes, "max-body-bytes", api.DefaultMaxBodyBytes, "largest JSON request body, e.g. 2MiB")
		sizeVar(fs, &o.limits.MaxImportBytes, "max-import-bytes", api.DefaultMaxImportBytes, "largest imported filter: its body, and its bits once decoded, e.g. 256MiB")
		sizeVar(fs, &o.limits.MaxBodyBytesInFlight, "max-body-bytes-in-flight", 0, "most bytes of request bodies read at once (each allocated whole from its Content-Length when its header is read); a body of a stated length over 16KiB past it is not read and is answered 503 overloaded; at least the larger of --max-body-bytes and --max-import-bytes (default 256MiB, or that if larger)")
		countVar(fs, &o.limits.MaxCandidates, "max-candidates", api.DefaultMaxCandidates, "most candidates (or items) in one call")
		sizeVar(fs, &o.limits.MaxItemBytes, "max-item-bytes", api.DefaultMaxItemBytes, "longest item id in bytes")
		o.limits.MaxUserBytes = api.DefaultMaxUserBytes
		fs.Var(sizeAtMost{(*size)(&o.limits.MaxUserBytes), storage.MaxUserLen, "the longest user id the store keeps"}, "max-user-bytes", "longest user id in bytes, at most "+formatBytes(storage.MaxUserLen)+" (the store's limit)")
		countVar(fs, &o.limits.MaxBatchUsers, "max-batch-users", api.DefaultMaxBatchUsers, "most users in one batch call")
		countVar(fs, &o.limits.MaxInFlight, "max-in-flight", api.DefaultMaxInFlight, "most requests served at once (the dashboard's files among them), the health probes and /metrics aside; beyond, 503 overloaded")
		countVar(fs, &o.limits.MaxConnections, "max-connections", api.DefaultMaxConnections, "most client connections open at once; one past it is answered 503 overloaded and closed")
		fs.Var(rateFlag{&o.limits.RateLimit}, "rate-limit", `most requests a second each API key (on an open server, each client address) makes to the API (a batch call takes one a user), e.g. 500 or 0.5, at least 0.001 (one every 1000s); beyond, 429 rate-limited with Retry-After; "off" or 0: no limit`)
		fs.Var((*burst)(&o.limits.RateBurst), "rate-burst", "most requests a caller makes at once before --rate-limit applies (default: one second's worth of --rate-limit)")
		o.limits.ReadTimeout = api.DefaultReadTimeout
		fs.Var(durationFlag{p: &o.limits.ReadTimeout, min: minTimeout}, "read-timeout", "how long a client may take to send one whole request, headers and body (an import of --max-import-bytes over a slow link needs more), at least 100ms; beyond, 408 request-timeout")
		o.limits.WriteTimeout = api.DefaultWriteTimeout
		fs.Var(durationFlag{p: &o.limits.WriteTimeout, min: minTimeout}, "write-timeout", "how long writing one answer may take, at least 100ms; a backup's stream may take longer (see --idle-timeout)")
		o.limits.IdleTimeout = api.DefaultIdleTimeout
		fs.Var(durationFlag{p: &o.limits.IdleTimeout, min: minTimeout}, "idle-timeout", "how long a keep-alive connection may wait for its next request before it is closed, and how long a backup's client may take no byte before it is cut off, at least 100ms")
		o.limits.IdempotencyBytes = api.DefaultIdempotencyBytes
		fs.Var(positiveBytes{(*byteSize)(&o.limits.IdempotencyBytes)}, "idempotency-bytes", "memory for the answers kept so that a call retried with the same Idempotency-Key gets its first answer again (least recently used out first); as much again for those read back from the journal after a crash, and at most twice as much in the files that keep them across a crash (<data-dir>/answers); shared between API keys")
		o.limits.IdempotencyTTL = api.DefaultIdempotencyTTL
		fs.Var(durationFlag{p: &o.limits.IdempotencyTTL, min: time.Second, eg: "5m"}, "idempotency-ttl", "how long such an answer is given again, at least 1s")
	case "backup":
		fs.StringVar(&o.out, "out", "", "file to write the backup to (required; never overwritten)")
		fs.StringVar(&o.url, "url", "", "back up the service running at this URL through its API (GET /v1/backup, an admin key) instead of --data-dir, which it does not take with it, e.g. http://127.0.0.1:8080")
		fs.StringVar(&o.key, "key", "", "with --url: API key of the admin role, when the service has keys (better given as SEENAPI_KEY)")
		fs.StringVar(&o.caCert, "ca-cert", "", caCertUsage)
		fs.BoolVar(&o.skipDamaged, "skip-damaged", false, "take the backup even while some users' stored values are damaged, leaving those users out: each is named in the log and in the backup (restore names them too), and the command exits with status 3; without it, a damaged user stops the backup")
	case "restore":
		fs.StringVar(&o.in, "in", "", "backup file to restore (required)")
		fs.BoolVar(&o.merge, "merge", false, "merge restored filters into stored ones instead of replacing them; a user whose stored filter was built with other parameters (made anew with a changed profile since the backup) keeps it and is named in the error (exit status 1)")
		fs.BoolVar(&o.discardExisting, "discard-existing", false, "discard what --data-dir holds (every user, the calls a crash left not yet written back, the answers kept for retries) before restoring, so that it holds the backup's data alone; without it or --merge, a --data-dir that holds users is refused")
	case "import-redis":
		fs.StringVar(&o.imp.redis, "redis", "127.0.0.1:6379", "Redis to read: host:port, or a redis:// or rediss:// URL (with a password or a database number)")
		fs.StringVar(&o.imp.match, "match", "seen:*", "pattern of the keys to import (Redis SCAN MATCH) whose one * is the user id, e.g. seen:* or user:*:seen; each key a SET or sorted set of item ids")
		fs.StringVar(&o.imp.url, "url", "http://127.0.0.1:8080", "the seenapi service to import into (it may be serving meanwhile)")
		fs.StringVar(&o.imp.key, "key", "", "API key of a write or admin role, when the service has keys (better given as SEENAPI_KEY)")
		fs.StringVar(&o.imp.caCert, "ca-cert", "", caCertUsage)
		fs.StringVar(&o.imp.namespace, "namespace", "default", "namespace the users' items are recorded in")
		o.imp.workers = 8
		fs.Var(countAtMost{(*count)(&o.imp.workers), maxImportWorkers}, "workers", "users imported at once, at most "+strconv.Itoa(maxImportWorkers))
		countVar(fs, &o.imp.batch, "batch", 1000, "items a call, at most the service's --max-candidates (a larger value is lowered to it)")
		o.imp.redisWait = 30 * time.Second
		fs.Var(durationFlag{p: &o.imp.redisWait, zeroOK: true, min: time.Second, eg: "30s", zero: "stop at once"}, "redis-wait",
			"how long a Redis that does not answer (not up yet when the import starts, restarting, failing over, LOADING, BUSY, MASTERDOWN) is waited for, the command it failed sent again, before the import stops, at least 1s (0: it stops at once, also when Redis restarts, which a user refused INFO cannot tell: its import lists keys again, skipping those listed)")
	case "new-key":
		fs.StringVar(&o.newKey.role, "role", "write", "role of the key: read, write or admin")
		fs.StringVar(&o.newKey.namespaces, "limit-namespaces", "", "the only namespaces the key may call, comma-separated (namespaces= in the keys file); empty: every one")
	}
	o.logFormat, o.logLevel = "text", "info"
	fs.Var(parsedString{&o.logFormat, parseLogFormat}, "log-format", `log lines as "text" (key=value) or "json" (one object a line)`)
	fs.Var(parsedString{&o.logLevel, parseLogLevel}, "log-level", `least level logged: debug (Badger's own messages too), info, warn or error`)
	fs.Usage = func() { usage(fs.Output(), fs, cmd) }
	return fs
}

// caCertUsage is the help of the client commands' --ca-cert.
const caCertUsage = "with an https --url: PEM file of the certificate authority that signed the service's certificate (or of its self-signed certificate), trusted besides the system's"

// commands are the subcommands; commandsHelp lists them.
var commands = []string{"serve", "check", "backup", "restore", "import-redis", "new-key", "version", "help"}

const commandsHelp = `Usage:
  seenapi [serve] [flags]            run the service (the default)
  seenapi check [flags]              check serve's keys, namespaces, certificate and flags, starting nothing
  seenapi backup --out FILE [flags]  back up a running service (--url), or --data-dir with it stopped
  seenapi restore --in FILE [flags]  restore a backup into --data-dir (service stopped)
  seenapi import-redis [flags]       record the items of Redis sets (one a user) in a running service
  seenapi new-key [flags]            make a random API key, as a line of a keys file
  seenapi version                    which build this is (also --version)
  seenapi help [COMMAND]             what a command does and its flags
`

// commandDoc says what each command with flags, serve aside, does.
var commandDoc = map[string]string{
	"check": `Reads what the service reads at its start and on a SIGHUP (the API keys of --keys-file and
SEENAPI_KEYS, the namespaces file, the TLS certificate) and checks them and the flags as serve
does, then says what it found: each namespace's profile, the keys by role and each by its id
(as the log names it), the certificate's date, and the warnings serve would log at its start
(a keys file others can read, keys in clear text off loopback, a budget over the machine's
memory, ...). It also reads --data-dir, without writing to it, and warns of the namespaces whose
users the store holds that the namespaces file leaves out; a store the service has open is not
read, and the check says so. It listens nowhere, so it runs beside a serving service, before a
SIGHUP or a restart. It takes serve's flags and environment; exit status 1 on an error, 2 on a
flag it cannot take.`,
	"backup": `Writes a snapshot of every user's filter, with the calls not yet written back, to one file:
from a running service through its API (--url, with a key of the admin role when it has keys),
or from --data-dir while no service holds it. An existing file is never overwritten. A user whose
stored value is damaged stops it, unless --skip-damaged leaves such users out: the backup is then
kept, naming them, and the exit status is 3 (1 on an error, 2 on a flag it cannot take).`,
	"restore": `Restores a backup file into --data-dir while no service holds it. The whole file is checked
before anything is written. A --data-dir that holds users is refused, unless --discard-existing
discards them (and the calls a crash left not yet written back) first, so that the directory
holds the backup's data alone, or --merge merges the backup's filters into the stored ones,
keeping the users the backup does not hold.`,
	"new-key": `Makes a random API key (130 bits from the system's random source) and writes it as a
keys file's line, after a comment naming it by its id as the log does, e.g.
seenapi new-key --role write >> keys, then a SIGHUP to the service.`,
	"import-redis": `Records the items of Redis sets or sorted sets, one key a user (--match), in a running
seenapi service (--url) through its API, for moving over from a Redis SET per user. Redis is
only read.`,
}

// usage writes the help of cmd to w: its flags are fs's (nil: none).
func usage(w io.Writer, fs *flag.FlagSet, cmd string) {
	switch cmd {
	case "serve":
		fmt.Fprint(w, `seenapi: "which of these items has this user not seen yet?" for recommender systems.

`+commandsHelp+`
Flags of serve (each also read from the environment variable shown; a flag wins):
`)
	case "version":
		fmt.Fprint(w, "Usage: seenapi version (or seenapi --version)\n\nSays which build this is. It takes no flags.\n")
		return
	default:
		fmt.Fprintf(w, "Usage: seenapi %s [flags]\n\n%s\n\nFlags (each also read from the environment variable shown):\n", cmd, commandDoc[cmd])
	}
	fs.VisitAll(func(f *flag.Flag) {
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			def = " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  --%s  [%s]\n      %s%s\n", f.Name, envName(f.Name), f.Usage, def)
	})
	if cmd == "serve" {
		fmt.Fprint(w, `
--cache-bytes, --flush-interval, the --read-, --write- and --idle-timeout, --idempotency-bytes
and the --max-* limits must be positive (0 is refused, not read as the default); --flush-interval
is at least 1ms and at most 288h, the timeouts at least 100ms. --shutdown-timeout and
--drain-delay take 0 for none, else at least 100ms and 1s.

API keys: SEENAPI_KEYS="write:KEY1,read:KEY2" adds keys to those of --keys-file.

Namespaces file (YAML; omitted fields take the defaults; durations like 30d or 720h):
  feed:
    fp_rate: 0.01
    window: 30d
    granularity: 7.5d
    max_items: 100000
  push:
    window: 7d
`)
	}
}

// switchHint is the hint for a switch (a bool flag) given its value as the
// next argument, "--insecure true": Go's flags take that value for the
// first argument that is no flag, and the switch for on.
func switchHint(fs *flag.FlagSet, args []string) string {
	i := len(args) - fs.NArg() - 1
	if i < 0 {
		return ""
	}
	name := strings.TrimLeft(args[i], "-")
	f := fs.Lookup(name)
	if f == nil || !strings.HasPrefix(args[i], "-") || strings.Contains(name, "=") {
		return ""
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
		return ""
	}
	v := strings.ToLower(args[i+1])
	switch v {
	case "true", "false", "yes", "no", "on", "off", "1", "0", "t", "f":
	default:
		return ""
	}
	want := "true"
	if v == "false" || v == "no" || v == "off" || v == "0" || v == "f" {
		want = "false"
	}
	return fmt.Sprintf("; --%s is a switch: give its value after =, as --%s=%s", name, name, want)
}

// parseFlags sets o from args, then from the environment for the flags
// args leave out: a flag on the command line wins, so the environment
// variable of a flag it gives is not read, and a bad value there (a stale
// SEENAPI_CACHE_BYTES in a unit file) cannot stop a command whose flag
// replaces it.
func parseFlags(fs *flag.FlagSet, args []string, env environ) error {
	_, _, err := parseFlagsFrom(fs, args, env)
	return err
}

// parseFlagsFrom is parseFlags, also returning the names of the flags the
// command line set (given), for o.check to tell flags that conflict, and
// of those whose value came from the environment, for the errors of
// o.check to name the variable that set a bad value (see options.named).
func parseFlagsFrom(fs *flag.FlagSet, args []string, env environ) (given, fromEnv map[string]bool, err error) {
	if err := fs.Parse(args); err != nil {
		return nil, nil, flagHint(fs, dashDash(err))
	}
	if fs.NArg() > 0 {
		return nil, nil, fmt.Errorf("unexpected arguments: %q%s", fs.Args(), switchHint(fs, args))
	}
	given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	fromEnv = map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		// Set but empty, it is most likely a value that did not render:
		// read as unset, the store of ./data would be served (or backed
		// up, or restored into) in place of the one meant.
		if v, set := env(envName(f.Name)); set && v == "" && f.Name == "data-dir" {
			err = fmt.Errorf("%s is set but empty; for ./data, leave it unset", envName(f.Name))
			return
		}
		if v := env.get(envName(f.Name)); v != "" {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, wants(f.Value, serr))
			}
			fromEnv[f.Name] = true
		}
	})
	return given, fromEnv, err
}

// named is how an error of check names the flag name and its value shown
// (already quoted, and without a password): as given on the command line
// (--url "x") or, when the environment set it, as the variable that did
// (SEENAPI_URL="x"), which a user then looks for in the right place.
func (o *options) named(name, shown string) string {
	if o.fromEnv[name] {
		return envName(name) + "=" + shown
	}
	return "--" + name + " " + shown
}

// listenFlags are the names other servers give what --addr is: a new user
// types --port 8080 and would otherwise learn only that it is no flag.
var listenFlags = []string{"port", "listen", "bind", "host", "address", "listen-addr", "http-addr"}

// flagHint adds to err of an undefined flag (after dashDash) the flag of
// fs it most likely meant: --addr for the names other servers give it,
// else a flag it is a prefix of or that is a prefix of it, or that is it
// with _ for -.
func flagHint(fs *flag.FlagSet, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: --")
	if !ok {
		return err
	}
	if fs.Lookup("addr") != nil && slices.Contains(listenFlags, strings.ToLower(name)) {
		return fmt.Errorf("%w (the address to listen on is --addr HOST:PORT, e.g. --addr 127.0.0.1:8080)", err)
	}
	norm := strings.ToLower(strings.ReplaceAll(name, "_", "-"))
	var meant string
	fs.VisitAll(func(f *flag.Flag) {
		if meant == "" && len(norm) >= 3 && (strings.HasPrefix(f.Name, norm) || strings.HasPrefix(norm, f.Name) || f.Name == norm) {
			meant = f.Name
		}
	})
	if meant != "" {
		return fmt.Errorf("%w (did you mean --%s?)", err, meant)
	}
	return err
}

// flagErrorForms are the flag package's parsing errors that name a flag,
// which it spells -name: the text up to the name, and where it quotes the
// value (%q) before the name, the text after the value up to the name.
var flagErrorForms = []struct {
	before string
	quoted bool
	after  string
}{
	{before: "flag provided but not defined: -"},
	{before: "flag needs an argument: -"},
	{before: "invalid value ", quoted: true, after: " for flag -"},
	{before: "invalid boolean value ", quoted: true, after: " for -"},
	{before: "invalid boolean flag "}, // a bool flag whose Set("true") fails: the bare name
}

// dashDash is err of fs.Parse with the flag it names spelt --name, as the
// help, the README and the other errors spell it, and otherwise the same.
// Its other errors (bad flag syntax, which repeats the argument as given,
// and ErrHelp) are err itself.
func dashDash(err error) error {
	msg := err.Error()
	for _, f := range flagErrorForms {
		rest, ok := strings.CutPrefix(msg, f.before)
		if !ok {
			continue
		}
		head := f.before
		if f.quoted {
			// Skip the value whole: it may hold " for flag -" itself.
			q, qerr := strconv.QuotedPrefix(rest)
			if qerr != nil || !strings.HasPrefix(rest[len(q):], f.after) {
				return err
			}
			head += q + f.after
			rest = rest[len(q)+len(f.after):]
		}
		if strings.HasSuffix(head, "-") {
			return errors.New(head + "-" + rest)
		}
		return errors.New(head + "--" + rest)
	}
	return err
}

// check checks what the flags of cmd say together, once they are parsed,
// so that a usage error is refused before anything starts.
func (o *options) check(cmd string, env environ) error {
	switch cmd {
	case "serve", "check":
		var err error
		if o.heapLimit, err = memoryLimit(o, env); err != nil {
			return err
		}
		o.envHeapLimit = goMemLimit(env)
		if o.gc, err = gcPercent(o, env); err != nil {
			return err
		}
		// --addr and --debug-addr were checked as they were set
		// (checkListenAddr): "8080" is refused as no address, not as a
		// public one wanting keys.
		if (o.tlsCert == "") != (o.tlsKey == "") {
			return errTLSPair
		}
		if o.limits.HSTSMaxAge > 0 && o.tlsCert == "" {
			return errors.New("--hsts-max-age needs --tls-cert and --tls-key: Strict-Transport-Security is sent over HTTPS only")
		}
		if o.limits.RateBurst != 0 && o.limits.RateLimit == 0 {
			return errors.New("--rate-burst needs --rate-limit: with no rate there is nothing to burst over")
		}
		if n, largest := o.limits.MaxBodyBytesInFlight, max(o.limits.MaxBodyBytes, o.limits.MaxImportBytes); n != 0 && n < largest {
			return fmt.Errorf("--max-body-bytes-in-flight %s is less than the largest body a route takes (%s, of --max-body-bytes and --max-import-bytes): such a body could never be read",
				formatBytes(int64(n)), formatBytes(int64(largest)))
		}
	case "backup":
		if o.out == "" {
			return errors.New("--out FILE is required")
		}
		if o.url != "" && o.given["data-dir"] {
			// The URL would be backed up, and the directory meant left
			// out without a word. SEENAPI_DATA_DIR is not refused: the
			// environment of the service's host often sets it.
			var unset string
			if o.fromEnv["url"] {
				unset = " (unset SEENAPI_URL for the directory's)"
			}
			return fmt.Errorf("%s and --data-dir %q: back up either the service running at the URL, through its API, or the data directory of a stopped service, not both%s",
				o.named("url", strconv.Quote(shownURL(o.url))), o.dataDir, unset)
		}
		if o.url != "" {
			if err := o.checkKey(&o.key); err != nil {
				return err
			}
			return o.checkServiceURL(o.url)
		}
		// Without --url they mean nothing: most likely --url was left
		// out, and the backup would be of --data-dir (./data by default).
		// SEENAPI_KEY and SEENAPI_CA_CERT are not refused: an operator's
		// environment may hold them for every backup.
		for _, name := range []string{"key", "ca-cert"} {
			if o.given[name] {
				return fmt.Errorf("--%s is for a backup of a running service through its API: give its --url too (without --url, backup reads --data-dir %s)", name, o.dataDir)
			}
		}
	case "import-redis":
		// Usage errors like the others (exit 2), before Redis is asked.
		if _, _, err := splitMatch(o.imp.match); err != nil {
			return err
		}
		// An empty name, "." or ".." would reach another route, whose 404
		// "no such route" would not say why.
		if !namespaceName.MatchString(o.imp.namespace) {
			return fmt.Errorf("%s: want a namespace name, [a-z0-9_-]{1,64}", o.named("namespace", strconv.Quote(o.imp.namespace)))
		}
		if strings.Contains(o.imp.redis, "://") {
			if _, err := redis.ParseURL(o.imp.redis); err != nil {
				// url.Parse's error quotes the URL whole, password and all.
				if ue := (*url.Error)(nil); errors.As(err, &ue) {
					err = ue.Err
				}
				return fmt.Errorf("%s: %w", o.named("redis", strconv.Quote(shownURL(o.imp.redis))), err)
			}
		}
		if err := o.checkKey(&o.imp.key); err != nil {
			return err
		}
		return o.checkServiceURL(o.imp.url)
	case "restore":
		if o.in == "" {
			return errors.New("--in FILE is required")
		}
		if o.merge && o.discardExisting {
			return errors.New("--merge and --discard-existing exclude each other: --merge keeps --data-dir's users, merging the backup into them; --discard-existing discards them first")
		}
	case "new-key":
		return o.newKey.check()
	}
	return nil
}

// checkListenAddr refuses an address to listen on that is not HOST:PORT
// (an empty host is every address), such as a port alone.
func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return errors.New("want HOST:PORT, e.g. 127.0.0.1:8080 (:8080 is every address of the machine)")
	}
	return nil
}

// checkKey trims the ends of *key, an API key to send (--key,
// SEENAPI_KEY): a key read from a secret's file often ends with a line
// break, which no key holds and a request header cannot carry (Go's client
// would refuse every request, saying only "invalid header field value").
// A space or a control character within it is refused, naming where the key
// came from but never showing it.
func (o *options) checkKey(key *string) error {
	*key = strings.TrimSpace(*key)
	if strings.IndexFunc(*key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		name := "--key"
		if o.fromEnv["key"] {
			name = "SEENAPI_KEY"
		}
		return fmt.Errorf("%s holds a space or a control character, which no API key does (a value cut or joined wrongly, most likely)", name)
	}
	return nil
}

// checkServiceURL refuses a --url that names no service: host:port alone,
// as --redis takes it, would otherwise fail at the first call with Go's
// "first path segment in URL cannot contain colon".
func (o *options) checkServiceURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: want the service's URL, http:// or https:// and its address, e.g. http://127.0.0.1:8080", o.named("url", strconv.Quote(shownURL(s))))
	}
	return nil
}

// shownURL is the URL s (--redis, --url) as the output shows it: without
// the password it may carry (xxxxx in its place, as Go shows a URL's), and
// when s does not parse as a URL, without anything before its host, where
// the password would be.
func shownURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		if _, has := u.User.Password(); !has {
			return s // as given: Redacted would rewrite "http://" as "http:"
		}
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if i := strings.LastIndexByte(rest, '@'); ok && i >= 0 {
		return scheme + "://xxxxx" + rest[i:]
	}
	return s
}

// countVar defines a flag of a limit: a whole number of at least 1.
func countVar(fs *flag.FlagSet, p *int, name string, value int, usage string) {
	*p = value
	fs.Var((*count)(p), name, usage)
}

// count is a flag of a limit, which must be at least 1: a limit of 0
// would refuse everything, and 0 does not stand for the default (leaving
// the flag out does).
type count int

func (c *count) String() string { return strconv.Itoa(int(*c)) }

func (c *count) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 {
		return errors.New("want a whole number of at least 1")
	}
	*c = count(n)
	return nil
}

// countAtMost is a count flag with a ceiling.
type countAtMost struct {
	*count
	most int
}

func (c countAtMost) Set(s string) error {
	var n count
	if err := n.Set(s); err != nil || int(n) > c.most {
		return fmt.Errorf("want a whole number from 1 to %d", c.most)
	}
	*c.count = n
	return nil
}

// maxImportWorkers bounds import-redis's --workers: each is a goroutine
// with a connection to the service, and the channel of keys holds four a
// worker, so a mistyped count (--workers 100000000 took 24GB before
// importing a key) would take the machine's memory; the service serves
// --max-in-flight requests at once (4096 by default), and answers the
// rest 503.
const maxImportWorkers = 1024

func sizeVar(fs *flag.FlagSet, p *int, name string, value int, usage string) {
	*p = value
	fs.Var((*size)(p), name, usage)
}

// size is a flag of a limit in bytes, which must be at least 1: a number
// with an optional unit, as --cache-bytes takes (1MiB, 1048576), so that
// every flag of bytes reads the same.
type size int

func (z *size) String() string { return formatBytes(int64(*z)) }

func (z *size) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil || n < 1 || n > math.MaxInt {
		return errors.New("want a size of at least 1 byte such as 1MiB or 1048576")
	}
	*z = size(n)
	return nil
}

// sizeAtMost is a size flag with a ceiling, past which the service could
// not honour it: why says what sets it.
type sizeAtMost struct {
	*size
	most int
	why  string
}

func (z sizeAtMost) Set(s string) error {
	var n size
	if err := n.Set(s); err != nil || int(n) > z.most {
		return fmt.Errorf("want a size from 1 byte to %s (%s) such as 256 or 1KiB", formatBytes(int64(z.most)), z.why)
	}
	*z.size = n
	return nil
}

// rateFlag is a flag of requests a second: a positive number, or 0 or
// "off" for no limit.
type rateFlag struct{ p *float64 }

func (r rateFlag) String() string {
	if r.p == nil || *r.p == 0 {
		return "off"
	}
	return strconv.FormatFloat(*r.p, 'g', -1, 64)
}

func (r rateFlag) Set(s string) error {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "off") {
		*r.p = 0
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return errors.New(`want a number of requests a second such as 500 or 0.5, or "off"`)
	}
	if v > 0 && v < api.MinRate {
		// Its Retry-After would be up to 1/v seconds: years.
		return fmt.Errorf(`want at least %g requests a second (one every 1000s), or 0 or "off" for no limit`, api.MinRate)
	}
	*r.p = v
	return nil
}

// burst is --rate-burst: a whole number of at least 1, or left out for
// one second's worth of the rate (0, api.Config's default).
type burst int

func (b *burst) String() string { return strconv.Itoa(int(*b)) }

func (b *burst) Set(s string) error { return (*count)(b).Set(s) }

// parsedString is a string flag whose values parse must accept.
type parsedString struct {
	p     *string
	parse func(string) error
}

func (v parsedString) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v parsedString) Set(s string) error {
	if err := v.parse(s); err != nil {
		return err
	}
	*v.p = s
	return nil
}

// positiveBytes is a byteSize flag of a budget, which must be positive.
type positiveBytes struct{ *byteSize }

func (p positiveBytes) Set(s string) error {
	var b byteSize
	if err := b.Set(s); errors.Is(err, errNotWholeBytes) {
		return err
	} else if err != nil || b <= 0 {
		return errors.New("want a positive size such as 512MiB")
	}
	*p.byteSize = b
	return nil
}

// durationFlag is a duration flag with a floor: it must be at least min
// (at least 1ns without one), or with zeroOK may also be 0, which stands
// for none; a negative value is refused either way.
type durationFlag struct {
	p      *time.Duration
	zeroOK bool
	min    time.Duration // the least it takes, when over zero
	eg     string        // a value it takes, for the error of one under min
	zero   string        // with zeroOK, what 0 stands for, for the error
	max    time.Duration // the most it takes (0: no most)
}

// The floors of the flags whose smaller values the service cannot honour:
// the write-back counts a changed filter's wait in whole milliseconds (a
// shorter interval is 0, every filter written at once, round after
// round); a timeout of a few milliseconds cuts off every request that
// is not in a single packet, and the cut-off of a backup's stream is
// checked every 20ms. Shutdown looks at the requests still in flight
// every 100ms (fasthttp's Server.ShutdownWithContext): a shorter
// --shutdown-timeout ends before its first look, as 0 does. A drain
// shorter than a second ends before a load balancer polling /readyz once
// a second (a Kubernetes readiness probe's shortest period) has looked.
const (
	minFlushInterval = time.Millisecond
	minTimeout       = 100 * time.Millisecond
	minDrainDelay    = time.Second
)

// maxFlushInterval is the longest --flush-interval: the write-back loop
// counts a filter's wait in milliseconds up to 2^30 (12.4 days), so a
// longer interval was cut to that without a word. 12 days, in hours as
// Go durations are written.
const maxFlushInterval = 288 * time.Hour

func (d durationFlag) String() string {
	if d.p == nil { // the flag package's zero value, for its default check
		return "0s"
	}
	return shortDuration(*d.p)
}

// shortDuration writes d as Go does without its trailing zero units (5m,
// not 5m0s; 1h30m, not 1h30m0s), as the README and a user write it.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (d durationFlag) Set(s string) error {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	switch {
	case d.zeroOK && err == nil && v == 0:
	case d.zeroOK && (err != nil || v < d.min):
		return fmt.Errorf("want 0 (%s) or a duration of at least %v such as %s", d.zero, shortDuration(d.min), d.eg)
	case d.min > 0 && (err != nil || v < d.min):
		eg := cmp.Or(d.eg, "5s")
		return fmt.Errorf("want a duration of at least %v such as %s", shortDuration(d.min), eg)
	case !d.zeroOK && (err != nil || v <= 0):
		return errors.New("want a positive duration such as 5s or 1m")
	case d.max > 0 && v > d.max:
		return fmt.Errorf("want a duration of at most %v such as %s", shortDuration(d.max), cmp.Or(d.eg, "5s"))
	}
	*d.p = v
	return nil
}

// wants is err of setting v, saying what v takes when v is of the flag
// package's own kinds, whose errors say only "parse error".
func wants(v flag.Value, err error) error {
	g, ok := v.(flag.Getter)
	if !ok {
		return err
	}
	switch g.Get().(type) {
	case bool:
		return errors.New("want true or false (also 1 or 0, t or f)")
	case int:
		return errors.New("want a whole number")
	case time.Duration:
		return errors.New("want a duration such as 30s or 2m")
	}
	return err
}

// byteSize is a flag of bytes: a number with an optional unit (B, KB, KiB,
// MB, MiB, GB, GiB, TB, TiB), or a negative number.
type byteSize int64

func (b *byteSize) String() string { return formatBytes(int64(*b)) }

func (b *byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

var byteUnits = []struct {
	suffix string
	mult   float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40}, {"b", 1},
}

// errNotWholeBytes is parseBytes's error for a size of a fraction of a
// byte ("1.5"), which it used to cut down.
var errNotWholeBytes = errors.New("not a whole number of bytes")

func parseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1.0
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	n := f * mult
	// NaN fails every comparison: it is refused with the sizes out of range.
	if err != nil || !(n <= 1<<62 && n >= -(1<<62)) {
		return 0, fmt.Errorf("not a byte size: %q (want e.g. 512MiB)", s)
	}
	if n != math.Trunc(n) {
		return 0, fmt.Errorf("%w: %q is %g bytes", errNotWholeBytes, s, n)
	}
	return int64(n), nil
}

func formatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// storeMinFreeBytes is --min-free-bytes for the store, which takes 0 for
// its default: a minimum of 0 bytes is no minimum.
func (o *options) storeMinFreeBytes() int64 {
	if o.minFreeBytes == 0 {
		return -1
	}
	return int64(o.minFreeBytes)
}

// storeReleaseInterval is the store's ReleaseInterval of
// --value-log-release-interval (0: off, which the store reads as negative).
func (o *options) storeReleaseInterval() time.Duration {
	if o.releaseEvery == 0 {
		return -1
	}
	return o.releaseEvery
}

// hotSetOptions are the hot set's options from o.
func (o *options) hotSetOptions() eviction.Options {
	// The answers of keyed calls read back from the journal after a
	// restart are given for as long as, and take as much memory again as,
	// the answers kept in memory.
	return eviction.Options{CacheBytes: int64(o.cacheBytes), FlushInterval: o.flushInterval,
		ReplyTTL: o.limits.IdempotencyTTL, ReplyBytes: o.limits.IdempotencyBytes}
}
