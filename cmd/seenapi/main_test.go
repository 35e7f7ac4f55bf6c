package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/bench"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

func TestParseDuration(t *testing.T) {
	for s, want := range map[string]time.Duration{
		"30d": 30 * 24 * time.Hour, "7.5d": 180 * time.Hour, "720h": 720 * time.Hour, "90m": 90 * time.Minute, "": 0, "0": 0,
	} {
		if got, err := parseDuration(s); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"30", "d", "-1d", "thirty days", "1w", "NaNd", "nand", "+Infd", "36501d"} {
		if _, err := parseDuration(s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}

func TestParseNamespaces(t *testing.T) {
	nss, err := parseNamespaces([]byte(`
feed:
  fp_rate: 0.001
  window: 30d
  granularity: 7.5d
  max_items: 100000
push:
  window: 168h
`))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nss {
		names = append(names, n.Name)
	}
	if !slices.Equal(names, []string{"default", "feed", "push"}) {
		t.Fatalf("names %v, want default added", names)
	}
	feed := nss[1].Profile
	if feed.FPRate != 0.001 || feed.Window != 720*time.Hour || feed.Granularity != 180*time.Hour || feed.MaxItems != 100000 || feed.Growth == 0 {
		t.Fatalf("feed %+v", feed)
	}
	if push := nss[2].Profile; push.Granularity != 42*time.Hour {
		t.Fatalf("push granularity %v, want window/4", push.Granularity)
	}
}

// A namespace chooses the compact kind by name, and its omitted fields
// take the compact kind's defaults, not the Bloom filter's.
func TestNamespacesFileChoosesTheCompactKind(t *testing.T) {
	nss, err := parseNamespaces([]byte("small:\n  kind: compact\nfast:\n  kind: compact\n  growth: 8\n"))
	if err != nil {
		t.Fatal(err)
	}
	small, fast := nss[2].Profile.WithDefaults(), nss[1].Profile.WithDefaults()
	if nss[2].Name != "small" || small.Kind != userfilter.KindCompact || small.InitialCapacity != userfilter.CompactInitialCapacity ||
		small.Growth != userfilter.CompactGrowth || small.Tightening != userfilter.CompactTightening {
		t.Fatalf("small: %+v", small)
	}
	if fast.Kind != userfilter.KindCompact || fast.Growth != 8 || fast.InitialCapacity != userfilter.CompactInitialCapacity {
		t.Fatalf("fast: %+v", fast)
	}
}

func TestParseNamespacesRejectsBadFiles(t *testing.T) {
	for name, text := range map[string]string{
		"bad name":               "Feed:\n  fp_rate: 0.01\n",
		"unknown field":          "feed:\n  fp: 0.01\n",
		"bad fp rate":            "feed:\n  fp_rate: 2\n",
		"bad kind":               "feed:\n  kind: cuckoo\n",
		"bad granularity":        "feed:\n  window: 30d\n  granularity: 7d\n",
		"sub-second granularity": "feed:\n  window: 10s\n",
		"not a map":              "- feed\n",
	} {
		if _, err := parseNamespaces([]byte(text)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A bad namespaces file is refused with an error that names the line, the
// namespace and the field, and says what the field takes, in the file's
// own words rather than Go's types; a count is never rounded.
func TestNamespacesFileErrorsNameLineNamespaceAndField(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"feed:\n  windw: 30d\n", `namespace feed: line 2: unknown field "windw" (known: kind, fp_rate, initial_capacity, growth, tightening, window, granularity, max_items)`},
		{"feed:\n  window: 30x\n", `namespace feed: line 2: window: bad duration "30x" (want e.g. 30d or 720h)`},
		{"feed:\n  window: -1d\n", `namespace feed: line 2: window: bad duration "-1d"`},
		{"feed:\n  window: NaNd\n", `namespace feed: line 2: window: bad duration "NaNd" (want e.g. 30d or 720h)`},
		{"feed:\n  max_items: -5\n", `namespace feed: line 2: max_items: "-5": want a whole number from 0 to 18446744073709551615`},
		{"feed:\n  max_items: 1.5\n", `namespace feed: line 2: max_items: "1.5": want a whole number`},
		{"feed:\n  initial_capacity: 5000000000\n", `namespace feed: line 2: initial_capacity: "5000000000": want a whole number from 0 to 4294967295`},
		{"feed:\n  fp_rate: abc\n", `namespace feed: line 2: fp_rate: "abc" is not a number`},
		{"feed:\n  kind: cuckoo\n", `namespace feed: line 2: kind: "cuckoo": want a filter kind (bloom, compact or staged)`},
		{"feed: &f\n  window: 1d\n  <<: *f\n", `namespace feed: line 1: the profile merges itself (<<)`},
		{"base: &b\n  window: 1d\nfeed: &f\n  <<: [*b, *f]\n", `namespace feed: line 3: the profile merges itself (<<)`},
		{"feed:\n  fp_rate: 0\n", `namespace feed: line 2: fp_rate: 0 is not a value it takes; leave the field out for the default`},
		{"feed:\n  growth: 0.0\n", `namespace feed: line 2: growth: 0 is not a value it takes`},
		{"feed:\n  tightening: 0\n", `namespace feed: line 2: tightening: 0 is not a value it takes`},
		{"feed:\n  initial_capacity: 0\n", `namespace feed: line 2: initial_capacity: 0 is not a value it takes`},
		{"feed:\n  growth: [2]\n", `namespace feed: line 2: growth: want a single value`},
		{"feed: [1, 2]\n", `namespace feed: line 1: want a map of fields (kind, fp_rate`},
		{"- feed\n", `line 1: want a map of namespace names to profiles`},
		{"feed:\n  window: 1d\nfeed:\n  window: 2d\n", `line 3: namespace feed is already defined at line 1`},
		{"feed:\n  window: 1d\n  window: 2d\n", `namespace feed: line 3: window is already set at line 2`},
		// A window of a few seconds has a default granularity under a
		// second: the error names the granularity, not the window.
		{"feed:\n  window: 2s\n", `namespace feed: userfilter: bad profile: granularity 500ms of window 2s must be a whole number of seconds, at least 1s (give one: the default is window/4)`},
		{"feed:\n  window: 1d\n  granularity: 7h\n", `namespace feed: userfilter: bad profile: window 1d must be a whole number of granularity 7h`},
		// A second document would be dropped, and its namespaces with it.
		{"feed:\n  window: 30d\n---\npush:\n  window: 7d\n", `line 4: a second YAML document (after ---): the file is one map of namespace names to profiles; put every namespace in it`},
	} {
		_, err := parseNamespaces([]byte(tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "main.") {
			t.Errorf("%q: error %v, want one containing %q", tc.text, err, tc.want)
		}
	}
	// What the file may say stays accepted: a count in float notation, a
	// field left empty, a profile taking another's fields, a document
	// marked by --- (and one left empty after it).
	if nss, err := parseNamespaces([]byte("---\nfeed:\n  window: 7d\n---\n")); err != nil || len(nss) != 2 {
		t.Errorf("a document between ---: %v, %v", nss, err)
	}
	nss, err := parseNamespaces([]byte("base: &b\n  window: 7d\n  max_items: 1e5\n  fp_rate:\nfeed:\n  <<: *b\n  fp_rate: 0.001\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nss {
		if n.Name == "feed" && (n.Profile.MaxItems != 100000 || n.Profile.Window != 7*24*time.Hour || n.Profile.FPRate != 0.001) {
			t.Errorf("feed %+v", n.Profile)
		}
		if n.Name == "base" && n.Profile.FPRate != 0.01 {
			t.Errorf("base %+v, want the default fp_rate", n.Profile)
		}
	}
	// As YAML merges: the profile's own fields win wherever "<<" stands,
	// and of several bases the first.
	nss, err = parseNamespaces([]byte("a: &a\n  fp_rate: 0.05\n  window: 1d\nb: &b\n  fp_rate: 0.02\n  window: 2d\n  max_items: 9\n" +
		"feed:\n  fp_rate: 0.001\n  <<: [*a, *b]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nss {
		if n.Name == "feed" && (n.Profile.FPRate != 0.001 || n.Profile.Window != 24*time.Hour || n.Profile.MaxItems != 9) {
			t.Errorf("feed %+v, want fp_rate 0.001 (its own), window 1d (from a), max_items 9 (from b)", n.Profile)
		}
	}
}

// FuzzParseNamespaces holds that any namespaces file gives namespaces or an
// error, and never brings the service down (a file is read by a hand-made
// walk over YAML's nodes).
func FuzzParseNamespaces(f *testing.F) {
	for _, seed := range []string{
		"feed:\n  fp_rate: 0.01\n  window: 30d\n  granularity: 7.5d\n  max_items: 100000\npush:\n  window: 7d\n",
		"base: &b\n  window: 7d\n  max_items: 1e5\nfeed:\n  <<: *b\n  fp_rate: 0.001\n",
		"a: &a\n  fp_rate: 0.05\nb: &b\n  window: 2d\nfeed:\n  <<: [*a, *b]\n",
		"feed: &f\n  <<: *f\n",
		"feed:\n  kind: bloom\n  initial_capacity: 12\n  growth: 1.5\n  tightening: 0.9\n",
		"feed:\n  kind: compact\n  max_items: 300\n  window: 2d\n",
		"- feed\n", "feed: [1]\n", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		nss, err := parseNamespaces([]byte(text))
		if err != nil {
			return
		}
		for _, n := range nss {
			if err := n.Profile.Validate(); err != nil {
				t.Fatalf("namespace %s: an invalid profile accepted: %v", n.Name, err)
			}
		}
	})
}

func TestDefaultNamespaceWithoutFile(t *testing.T) {
	nss, err := loadNamespaces("")
	if err != nil || len(nss) != 1 || nss[0].Name != "default" || nss[0].Profile.FPRate != 0.01 {
		t.Fatalf("%v %v", nss, err)
	}
}

func TestEnvironmentSetsFlagsAndFlagsWin(t *testing.T) {
	env := map[string]string{"SEENAPI_ADDR": "127.0.0.1:9999", "SEENAPI_CACHE_BYTES": "1GiB", "SEENAPI_SYNC": "true",
		"SEENAPI_FLUSH_INTERVAL": "5s"}
	var o options
	fs := newFlagSet("serve", &o, io.Discard)
	if err := parseFlags(fs, []string{"--flush-interval", "2s"}, mapEnv(env)); err != nil {
		t.Fatal(err)
	}
	if o.addr != "127.0.0.1:9999" || o.cacheBytes != 1<<30 || !o.sync || o.flushInterval != 2*time.Second {
		t.Fatalf("options %+v", o)
	}
	env["SEENAPI_CACHE_BYTES"] = "lots"
	fs = newFlagSet("serve", &o, io.Discard)
	if err := parseFlags(fs, nil, mapEnv(env)); err == nil {
		t.Fatal("a bad environment value must fail")
	}
	// The flag wins: the variable of a flag given on the command line is
	// not read, so its bad value does not stop the command.
	fs = newFlagSet("serve", &o, io.Discard)
	if err := parseFlags(fs, []string{"--cache-bytes", "2GiB"}, mapEnv(env)); err != nil {
		t.Fatalf("--cache-bytes 2GiB with SEENAPI_CACHE_BYTES=lots: %v", err)
	}
	if o.cacheBytes != 2<<30 {
		t.Fatalf("cache bytes %d, want %d", o.cacheBytes, 2<<30)
	}
}

// Every flag of bytes takes a size as --cache-bytes does, a unit or none:
// --max-body-bytes 2MiB is not refused for want of a plain number.
func TestByteLimitsTakeSizes(t *testing.T) {
	var o options
	fs := newFlagSet("serve", &o, io.Discard)
	err := parseFlags(fs, []string{"--max-body-bytes", "2MiB", "--max-import-bytes", "1GiB", "--max-item-bytes", "1KiB"},
		mapEnv(map[string]string{"SEENAPI_MAX_USER_BYTES": "512"}))
	if err != nil {
		t.Fatal(err)
	}
	if l := o.limits; l.MaxBodyBytes != 2<<20 || l.MaxImportBytes != 1<<30 || l.MaxItemBytes != 1024 || l.MaxUserBytes != 512 {
		t.Errorf("limits %d %d %d %d, want %d %d 1024 512", l.MaxBodyBytes, l.MaxImportBytes, l.MaxItemBytes, l.MaxUserBytes, 2<<20, 1<<30)
	}
}

// Values that cannot work are refused, naming the flag or variable and
// what it takes; 0 is never read as the default.
func TestFlagsRefuseValuesThatCannotWork(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string // "": accepted
	}{
		{args: []string{"--cache-bytes", "0"}, want: "-cache-bytes: want a positive size"},
		{args: []string{"--cache-bytes", "-1"}, want: "-cache-bytes: want a positive size"},
		{env: map[string]string{"SEENAPI_CACHE_BYTES": "0"}, want: `SEENAPI_CACHE_BYTES="0": want a positive size`},
		{args: []string{"--max-candidates", "0"}, want: "-max-candidates: want a whole number of at least 1"},
		{env: map[string]string{"SEENAPI_MAX_IN_FLIGHT": "0"}, want: `SEENAPI_MAX_IN_FLIGHT="0": want a whole number of at least 1`},
		{args: []string{"--flush-interval", "0"}, want: "-flush-interval: want a duration of at least 1ms"},
		{args: []string{"--flush-interval", "-1s"}, want: "-flush-interval: want a duration of at least 1ms"},
		// Positive, yet under what the service can honour.
		{args: []string{"--flush-interval", "1ns"}, want: "--flush-interval: want a duration of at least 1ms such as 5s"},
		{args: []string{"--flush-interval", "999us"}, want: "--flush-interval: want a duration of at least 1ms"},
		// Longer than the write-back loop counts (2^30 ms), cut short
		// without a word.
		{args: []string{"--flush-interval", "1000000h"}, want: "--flush-interval: want a duration of at most 288h such as 5s"},
		{env: map[string]string{"SEENAPI_FLUSH_INTERVAL": "289h"}, want: `SEENAPI_FLUSH_INTERVAL="289h": want a duration of at most 288h`},
		{args: []string{"--flush-interval", "288h"}},
		{args: []string{"--read-timeout", "1ns"}, want: "--read-timeout: want a duration of at least 100ms such as 5s"},
		{args: []string{"--write-timeout", "1ms"}, want: "--write-timeout: want a duration of at least 100ms"},
		{args: []string{"--idle-timeout", "99ms"}, want: "--idle-timeout: want a duration of at least 100ms"},
		{env: map[string]string{"SEENAPI_READ_TIMEOUT": "1us"}, want: `SEENAPI_READ_TIMEOUT="1us": want a duration of at least 100ms`},
		{args: []string{"--read-timeout", "100ms", "--write-timeout", "100ms", "--idle-timeout", "100ms"}},
		{env: map[string]string{"SEENAPI_SYNC": "yes"}, want: `SEENAPI_SYNC="yes": want true or false`},
		{env: map[string]string{"SEENAPI_SHUTDOWN_TIMEOUT": "soon"}, want: `SEENAPI_SHUTDOWN_TIMEOUT="soon": want 0 (no wait) or a duration`},
		{args: []string{"--shutdown-timeout", "-5s"}, want: "-shutdown-timeout: want 0 (no wait) or a duration of at least 100ms such as 30s"},
		{env: map[string]string{"SEENAPI_SHUTDOWN_TIMEOUT": "-1m"}, want: `SEENAPI_SHUTDOWN_TIMEOUT="-1m": want 0 (no wait) or a duration of at least 100ms`},
		{args: []string{"--shutdown-timeout", "0"}}, // no wait, as the help says
		{args: []string{"--shutdown-timeout", "100ms", "--drain-delay", "1s"}},
		{args: []string{"--drain-delay", "0"}, env: map[string]string{"SEENAPI_SHUTDOWN_TIMEOUT": "0s"}},
		// Over 0, yet too short to mean anything: shutdown looks at the
		// requests in flight every 100ms, and a load balancer at /readyz
		// once a second at the most often.
		{args: []string{"--shutdown-timeout", "1ns"}, want: "--shutdown-timeout: want 0 (no wait) or a duration of at least 100ms such as 30s"},
		{args: []string{"--shutdown-timeout", "99ms"}, want: "--shutdown-timeout: want 0 (no wait) or a duration of at least 100ms"},
		{args: []string{"--drain-delay", "1ns"}, want: "--drain-delay: want 0 (no drain) or a duration of at least 1s such as 10s"},
		{args: []string{"--drain-delay", "999ms"}, want: "--drain-delay: want 0 (no drain) or a duration of at least 1s"},
		{args: []string{"--drain-delay", "-1s"}, want: "--drain-delay: want 0 (no drain) or a duration of at least 1s"},
		{env: map[string]string{"SEENAPI_DRAIN_DELAY": "500ms"}, want: `SEENAPI_DRAIN_DELAY="500ms": want 0 (no drain) or a duration of at least 1s`},
		{env: map[string]string{"SEENAPI_DRAIN_DELAY": "soon"}, want: `SEENAPI_DRAIN_DELAY="soon": want 0 (no drain) or a duration of at least 1s`},
		// The flag wins: its variable, however bad, is not read.
		{args: []string{"--drain-delay", "2s"}, env: map[string]string{"SEENAPI_DRAIN_DELAY": "1ns"}},
		{args: []string{"--idempotency-ttl", "500ms"}, want: "-idempotency-ttl: want a duration of at least 1s"},
		{env: map[string]string{"SEENAPI_IDEMPOTENCY_TTL": "0"}, want: `SEENAPI_IDEMPOTENCY_TTL="0": want a duration of at least 1s`},
		{args: []string{"--idempotency-ttl", "1s"}},
		{args: []string{"--read-timeout", "0"}, want: "-read-timeout: want a duration of at least 100ms"},
		{env: map[string]string{"SEENAPI_IDLE_TIMEOUT": "soon"}, want: `SEENAPI_IDLE_TIMEOUT="soon": want a duration of at least 100ms`},
		{args: []string{"--read-timeout", "2m", "--write-timeout", "1m", "--idle-timeout", "30s"}},
		{args: []string{"--log-format", "xml"}, want: "-log-format: want text or json"},
		{env: map[string]string{"SEENAPI_LOG_LEVEL": "verbose"}, want: `SEENAPI_LOG_LEVEL="verbose": want debug, info, warn or error`},
		{args: []string{"--log-format", "json", "--log-level", "WARN"}},
		{args: []string{"--cache-bytes", "1MiB", "--max-candidates", "1", "--flush-interval", "1ms"}, env: map[string]string{"SEENAPI_SYNC": "1"}},
		{args: []string{"--rate-limit", "-1"}, want: `-rate-limit: want a number of requests a second such as 500 or 0.5, or "off"`},
		{args: []string{"--rate-limit", "Inf"}, want: `-rate-limit: want a number of requests a second`},
		{env: map[string]string{"SEENAPI_RATE_LIMIT": "fast"}, want: `SEENAPI_RATE_LIMIT="fast": want a number of requests a second`},
		{args: []string{"--rate-limit", "500", "--rate-burst", "0"}, want: "-rate-burst: want a whole number of at least 1"},
		{args: []string{"--rate-limit", "0.5", "--rate-burst", "3"}},
		// A rate near zero would answer Retry-After in years.
		{args: []string{"--rate-limit", "1e-300"}, want: `--rate-limit: want at least 0.001 requests a second (one every 1000s), or 0 or "off" for no limit`},
		{env: map[string]string{"SEENAPI_RATE_LIMIT": "0.0009"}, want: `SEENAPI_RATE_LIMIT="0.0009": want at least 0.001 requests a second`},
		{args: []string{"--rate-limit", "0.001"}},
		{args: []string{"--rate-limit", "off"}, env: map[string]string{"SEENAPI_RATE_LIMIT": "100"}},
		{args: []string{"--max-body-bytes", "0"}, want: "-max-body-bytes: want a size of at least 1 byte such as 1MiB or 1048576"},
		{env: map[string]string{"SEENAPI_MAX_ITEM_BYTES": "big"}, want: `SEENAPI_MAX_ITEM_BYTES="big": want a size of at least 1 byte`},
		// A longer user id than the store keeps would be taken, then
		// answered 503 as a storage failure at every call.
		{args: []string{"--max-user-bytes", "1MiB"}, want: "--max-user-bytes: want a size from 1 byte to 4KiB (the longest user id the store keeps) such as 256 or 1KiB"},
		{env: map[string]string{"SEENAPI_MAX_USER_BYTES": "4097"}, want: `SEENAPI_MAX_USER_BYTES="4097": want a size from 1 byte to 4KiB`},
		{args: []string{"--max-user-bytes", "0"}, want: "--max-user-bytes: want a size from 1 byte to 4KiB"},
		{args: []string{"--max-user-bytes", "4KiB"}},
	} {
		var o options
		fs := newFlagSet("serve", &o, io.Discard)
		err := parseFlags(fs, tc.args, mapEnv(tc.env))
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v %v: %v, want %q", tc.args, tc.env, err, tc.want)
		}
	}
	var out bytes.Buffer
	dir := filepath.Join(t.TempDir(), "data")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if code := run(ctx, []string{"--addr", "127.0.0.1:0", "--cache-bytes", "0", "--data-dir", dir}, noEnv, io.Discard, &out, func(string) { stop() }); code != 2 ||
		!strings.Contains(out.String(), "want a positive size") {
		t.Errorf("--cache-bytes 0: exit %d, want 2: %s", code, out.String())
	}
	// A negative shutdown timeout is refused the same way, before the
	// service starts, rather than read as 0.
	out.Reset()
	if code := run(ctx, []string{"--addr", "127.0.0.1:0", "--shutdown-timeout", "-5s", "--data-dir", dir}, noEnv, io.Discard, &out, func(string) { stop() }); code != 2 ||
		out.String() != "seenapi serve: invalid value \"-5s\" for flag --shutdown-timeout: want 0 (no wait) or a duration of at least 100ms such as 30s\n"+
			"Run 'seenapi help serve' for its flags.\n" {
		t.Errorf("--shutdown-timeout -5s: exit %d, want 2: %q", code, out.String())
	}
	// A duration under its floor too.
	out.Reset()
	if code := run(ctx, []string{"--addr", "127.0.0.1:0", "--flush-interval", "1ns", "--data-dir", dir}, noEnv, io.Discard, &out, func(string) { stop() }); code != 2 ||
		out.String() != "seenapi serve: invalid value \"1ns\" for flag --flush-interval: want a duration of at least 1ms such as 5s\n"+
			"Run 'seenapi help serve' for its flags.\n" {
		t.Errorf("--flush-interval 1ns: exit %d, want 2: %q", code, out.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused flag made the data directory (%v)", err)
	}
}

// The longest user id --max-user-bytes takes is one the store keeps: a
// batch of a user of that many bytes is served and recorded, not answered
// as a storage failure.
func TestLongestUserIDTheFlagTakesIsStored(t *testing.T) {
	s := startService(t, nil, "--data-dir", t.TempDir(), "--max-user-bytes", strconv.Itoa(storage.MaxUserLen), "--max-body-bytes", "64KiB")
	user := strings.Repeat("u", storage.MaxUserLen)
	for _, want := range []string{`"unseen":["a"]`, `"unseen":[]`} {
		resp, err := http.Post(s.url+"/v1/namespaces/default/filter", "application/json",
			strings.NewReader(`{"requests":[{"user":"`+user+`","candidates":["a"]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("a batch of a user of %d bytes: %d %.300s; want 200 and %s", len(user), resp.StatusCode, body, want)
		}
	}
}

// An empty --data-dir, or SEENAPI_DATA_DIR set but empty (a value that did
// not render), is a usage error of every command that takes the flag,
// refused before anything is read or made: read as ./data it would serve,
// back up or restore into another store than the one meant, and the store
// refused it only once serve had bound its port, with exit 1.
func TestEmptyDataDirIsRefusedByEveryCommand(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd) // where ./data would be made
	backupFile := filepath.Join(t.TempDir(), "backup")
	for _, cmd := range [][]string{{"serve", "--addr", "127.0.0.1:0"}, {"check"}, {"backup", "--out", backupFile}, {"restore", "--in", backupFile}} {
		for _, tc := range []struct {
			args []string
			env  map[string]string
			want string
		}{
			{args: []string{"--data-dir", ""}, want: `invalid value "" for flag --data-dir: want a directory's path; for ./data, give no --data-dir`},
			{env: map[string]string{"SEENAPI_DATA_DIR": ""}, want: `SEENAPI_DATA_DIR is set but empty; for ./data, leave it unset`},
		} {
			ctx, stop := context.WithCancel(context.Background())
			var stdout, stderr bytes.Buffer
			listened := false
			code := run(ctx, append(slices.Clone(cmd), tc.args...), mapEnv(tc.env), &stdout, &stderr, func(string) { listened = true; stop() })
			stop()
			want := "seenapi " + cmd[0] + ": " + tc.want + "\nRun 'seenapi help " + cmd[0] + "' for its flags.\n"
			if code != 2 || stderr.String() != want || stdout.Len() != 0 || listened {
				t.Errorf("%s %q %v: exit %d, listened %v, stdout %q, stderr %q; want exit 2 and %q", cmd[0], tc.args, tc.env, code, listened, stdout.String(), stderr.String(), want)
			}
		}
	}
	if entries, err := os.ReadDir(wd); err != nil || len(entries) != 0 {
		t.Errorf("the refused commands left %v in the working directory (%v)", entries, err)
	}
	// The flag wins over its variable, however set.
	var o options
	if err := parseFlags(newFlagSet("serve", &o, io.Discard), []string{"--data-dir", "d"}, mapEnv(map[string]string{"SEENAPI_DATA_DIR": ""})); err != nil || o.dataDir != "d" {
		t.Errorf("--data-dir d with SEENAPI_DATA_DIR set but empty: %q, %v", o.dataDir, err)
	}
}

// import-redis's --workers and --batch are counts like the limits: 0 is
// a usage error (exit 2) refused before Redis or the service is asked, as
// is more workers than it takes (each a goroutine, and room for four keys).
func TestImportRedisRefusesZeroWorkersOrBatch(t *testing.T) {
	for _, tc := range []struct{ flag, value, want string }{
		{"--workers", "0", "want a whole number from 1 to 1024"},
		{"--batch", "0", "want a whole number of at least 1"},
		{"--workers", "1025", "want a whole number from 1 to 1024"},
	} {
		var out bytes.Buffer
		args := []string{"import-redis", "--redis", "127.0.0.1:1", "--url", "http://127.0.0.1:1", tc.flag, tc.value}
		code := run(context.Background(), args, noEnv, io.Discard, &out, nil)
		want := "seenapi import-redis: invalid value \"" + tc.value + "\" for flag " + tc.flag + ": " + tc.want + "\n" +
			"Run 'seenapi help import-redis' for its flags.\n"
		if code != 2 || out.String() != want {
			t.Errorf("%s %s: exit %d, want 2: %q", tc.flag, tc.value, code, out.String())
		}
	}
	var out bytes.Buffer
	args := []string{"import-redis", "--redis", "127.0.0.1:1", "--url", "http://127.0.0.1:1"}
	if code := run(context.Background(), args, mapEnv(map[string]string{"SEENAPI_WORKERS": "100000000"}), io.Discard, &out, nil); code != 2 ||
		!strings.HasPrefix(out.String(), `seenapi import-redis: SEENAPI_WORKERS="100000000": want a whole number from 1 to 1024`) {
		t.Errorf("SEENAPI_WORKERS=100000000: exit %d, want 2: %q", code, out.String())
	}
}

// A --match without its one *, a --redis URL that does not parse or a
// --namespace that is no namespace name is a usage error (exit 2), as a bad
// value of any flag is, refused before Redis or the service is asked.
func TestImportRedisRefusesABadMatchOrRedisURLAsAUsageError(t *testing.T) {
	for _, tc := range []struct{ flag, value, want string }{
		{"--match", "seen", `--match "seen": want one * standing for the user id (e.g. seen:* or user:*:seen) and no other ?, [, ] or \`},
		{"--match", "seen:*:*", `--match "seen:*:*": want one *`},
		{"--redis", "redis://127.0.0.1:1/x", `--redis "redis://127.0.0.1:1/x": redis: invalid database number: "x"`},
		{"--namespace", "", `--namespace "": want a namespace name, [a-z0-9_-]{1,64}`},
		{"--namespace", "..", `--namespace "..": want a namespace name, [a-z0-9_-]{1,64}`},
		{"--namespace", "Default", `--namespace "Default": want a namespace name, [a-z0-9_-]{1,64}`},
	} {
		var stderr bytes.Buffer
		args := []string{"import-redis", "--redis", "127.0.0.1:1", "--url", "http://127.0.0.1:1", tc.flag, tc.value}
		code := run(context.Background(), args, noEnv, io.Discard, &stderr, nil)
		if code != 2 || !strings.HasPrefix(stderr.String(), "seenapi import-redis: "+tc.want) ||
			!strings.HasSuffix(stderr.String(), "\nRun 'seenapi help import-redis' for its flags.\n") {
			t.Errorf("%s %s: exit %d, want 2 and %q:\n%s", tc.flag, tc.value, code, tc.want, stderr.String())
		}
	}
}

// The password a --redis URL carries never reaches the output, however
// the URL fails: shown as Go shows a URL's (xxxxx), or, when the URL does
// not parse, everything before its host. A --url with a password is shown
// so too.
func TestClientCommandsNeverShowAURLsPassword(t *testing.T) {
	const secret = "s3cretPassw0rd"
	for _, tc := range []struct{ flag, value, want string }{
		{"--redis", "redis://:" + secret + "@127.0.0.1:1/x", `--redis "redis://:xxxxx@127.0.0.1:1/x": redis: invalid database number: "x"`},
		{"--redis", "redis://u:" + secret + "%zz@127.0.0.1:1/0", `--redis "redis://xxxxx@127.0.0.1:1/0": invalid URL escape "%zz"`},
		{"--redis", "redis://u:" + secret + "@127.0.0.1:1/0?bad_option=1", `--redis "redis://u:xxxxx@127.0.0.1:1/0?bad_option=1": redis: unexpected option: bad_option`},
		{"--url", "ftp://u:" + secret + "@127.0.0.1:1", `--url "ftp://u:xxxxx@127.0.0.1:1": want the service's URL`},
	} {
		var stderr bytes.Buffer
		args := []string{"import-redis", "--redis", "127.0.0.1:1", "--url", "http://127.0.0.1:1", tc.flag, tc.value}
		code := run(context.Background(), args, noEnv, io.Discard, &stderr, nil)
		if code != 2 || strings.Contains(stderr.String(), secret) || !strings.HasPrefix(stderr.String(), "seenapi import-redis: "+tc.want) {
			t.Errorf("%s %s: exit %d, want 2 and %q, without the password:\n%s", tc.flag, tc.value, code, tc.want, stderr.String())
		}
	}
}

// A bad --redis or --url set by SEENAPI_REDIS or SEENAPI_URL is named as
// that variable, where the user will look for it, and still without its
// password.
func TestClientCommandsNameTheVariableOfABadURL(t *testing.T) {
	const secret = "s3cretPassw0rd"
	out := filepath.Join(t.TempDir(), "b")
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"import-redis", "--url", "http://127.0.0.1:1"}, map[string]string{"SEENAPI_REDIS": "redis://:" + secret + "@127.0.0.1:1/x"},
			`SEENAPI_REDIS="redis://:xxxxx@127.0.0.1:1/x": redis: invalid database number: "x"`},
		{[]string{"import-redis", "--redis", "127.0.0.1:1"}, map[string]string{"SEENAPI_URL": "ftp://u:" + secret + "@127.0.0.1:1"},
			`SEENAPI_URL="ftp://u:xxxxx@127.0.0.1:1": want the service's URL`},
		{[]string{"backup", "--out", out}, map[string]string{"SEENAPI_URL": "127.0.0.1:8080"},
			`SEENAPI_URL="127.0.0.1:8080": want the service's URL`},
		// The command line wins, and is named so.
		{[]string{"backup", "--out", out, "--url", "127.0.0.1:8081"}, map[string]string{"SEENAPI_URL": "http://127.0.0.1:8080"},
			`--url "127.0.0.1:8081": want the service's URL`},
	} {
		var stderr bytes.Buffer
		code := run(context.Background(), tc.args, mapEnv(tc.env), io.Discard, &stderr, nil)
		if code != 2 || strings.Contains(stderr.String(), secret) || !strings.HasPrefix(stderr.String(), "seenapi "+tc.args[0]+": "+tc.want) {
			t.Errorf("%v %v: exit %d, want 2 and %q, without the password:\n%s", tc.args, tc.env, code, tc.want, stderr.String())
		}
	}
}

// A --url that names no service (host:port alone, as --redis takes it) is
// a usage error of backup and import-redis, refused before anything is
// read, saying what a URL looks like.
func TestClientCommandsRefuseAURLWithoutScheme(t *testing.T) {
	const want = "want the service's URL, http:// or https:// and its address, e.g. http://127.0.0.1:8080"
	out := filepath.Join(t.TempDir(), "b")
	for _, tc := range []struct {
		url  string
		args []string
	}{
		{"127.0.0.1:8080", []string{"backup", "--out", out}},
		{"127.0.0.1:8080", []string{"import-redis", "--redis", "127.0.0.1:1"}},
		{"ftp://127.0.0.1:8080", []string{"import-redis", "--redis", "127.0.0.1:1"}},
		{"http://", []string{"backup", "--out", out}},
	} {
		var log bytes.Buffer
		code := run(context.Background(), append(tc.args, "--url", tc.url), noEnv, io.Discard, &log, nil)
		if code != 2 || !strings.Contains(log.String(), fmt.Sprintf("--url %q: %s", tc.url, want)) {
			t.Errorf("%s --url %s: exit %d, want 2 and %q:\n%s", tc.args[0], tc.url, code, want, log.String())
		}
	}
}

// Bad values of --memory-limit, --gc-percent, --addr and --debug-addr are usage
// errors like those of the other flags: one line naming the flag and what it
// takes, the pointer to the help, exit 2, and nothing started: no profiler
// or service listening, no data directory made.
func TestBadServeFlagsAreRefusedBeforeAnythingStarts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"--memory-limit", "lots"}, want: `invalid value "lots" for flag --memory-limit: want a size such as 2GiB, auto or off`},
		{args: []string{"--memory-limit", "-1GiB"}, want: `invalid value "-1GiB" for flag --memory-limit: want a size such as 2GiB, auto or off`},
		{args: []string{"--gc-percent", "-3"}, want: `invalid value "-3" for flag --gc-percent: want a positive percentage, auto or off`},
		{args: []string{"--gc-percent", "4294967396"}, want: `invalid value "4294967396" for flag --gc-percent: want a percentage of at most 2147483647 (Go's collector takes no more), auto or off`},
		{env: map[string]string{"SEENAPI_GC_PERCENT": "lots"}, want: `SEENAPI_GC_PERCENT="lots": want a positive percentage, auto or off`},
		{env: map[string]string{"SEENAPI_MEMORY_LIMIT": "much"}, want: `SEENAPI_MEMORY_LIMIT="much": want a size such as 2GiB, auto or off`},
		// Only with --cache-bytes can the limit be judged: after every flag.
		{args: []string{"--memory-limit", "1GiB", "--cache-bytes", "1GiB"}, want: `--memory-limit "1GiB": want at least --cache-bytes + 48MiB (1072MiB), or auto or off`},
		{args: []string{"--debug-addr", "0.0.0.0:0"}, want: `invalid value "0.0.0.0:0" for flag --debug-addr: the profiler listens on loopback addresses only, e.g. 127.0.0.1:6060`},
		// A port alone is no address, rather than a public one that needs keys.
		{args: []string{"--addr", "8080"}, want: `invalid value "8080" for flag --addr: want HOST:PORT, e.g. 127.0.0.1:8080 (:8080 is every address of the machine)`},
		{args: []string{"--addr", "localhost"}, want: `invalid value "localhost" for flag --addr: want HOST:PORT, e.g. 127.0.0.1:8080 (:8080 is every address of the machine)`},
		{args: []string{"--addr", ":99999"}, want: `invalid value ":99999" for flag --addr: want HOST:PORT, e.g. 127.0.0.1:8080 (:8080 is every address of the machine)`},
		{args: []string{"--debug-addr", "6060"}, want: `invalid value "6060" for flag --debug-addr: want HOST:PORT, e.g. 127.0.0.1:8080 (:8080 is every address of the machine)`},
		// From the environment (a unit file's), the error names the
		// variable, not a flag the command line does not hold.
		{env: map[string]string{"SEENAPI_ADDR": "8080"}, want: `SEENAPI_ADDR="8080": want HOST:PORT, e.g. 127.0.0.1:8080 (:8080 is every address of the machine)`},
		{env: map[string]string{"SEENAPI_DEBUG_ADDR": "6060"}, want: `SEENAPI_DEBUG_ADDR="6060": want HOST:PORT, e.g. 127.0.0.1:8080 (:8080 is every address of the machine)`},
		{env: map[string]string{"SEENAPI_DEBUG_ADDR": "0.0.0.0:6060"}, want: `SEENAPI_DEBUG_ADDR="0.0.0.0:6060": the profiler listens on loopback addresses only, e.g. 127.0.0.1:6060`},
		{args: []string{"--rate-burst", "10"}, want: `--rate-burst needs --rate-limit: with no rate there is nothing to burst over`},
		{args: []string{"--shutdown-timeout", "1ns"}, want: `invalid value "1ns" for flag --shutdown-timeout: want 0 (no wait) or a duration of at least 100ms such as 30s`},
		{env: map[string]string{"SEENAPI_DRAIN_DELAY": "1ns"}, want: `SEENAPI_DRAIN_DELAY="1ns": want 0 (no drain) or a duration of at least 1s such as 10s`},
		{args: []string{"--max-import-bytes", "2MiB"}, env: map[string]string{"SEENAPI_MAX_BODY_BYTES_IN_FLIGHT": "1MiB"},
			want: `--max-body-bytes-in-flight 1MiB is less than the largest body a route takes (2MiB, of --max-body-bytes and --max-import-bytes): such a body could never be read`},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		var stdout, stderr bytes.Buffer
		listened := false
		args := []string{"--data-dir", dir, "--min-free-bytes", "-1"}
		// Free ports, but for an address the case gives in the
		// environment, which a flag would override.
		for _, name := range []string{"addr", "debug-addr"} {
			if _, set := tc.env[envName(name)]; !set {
				args = append(args, "--"+name, "127.0.0.1:0")
			}
		}
		args = append(args, tc.args...)
		ctx, stop := context.WithCancel(context.Background())
		code := run(ctx, args, mapEnv(tc.env), &stdout, &stderr, func(string) { listened = true; stop() })
		stop()
		if want := "seenapi serve: " + tc.want + "\nRun 'seenapi help serve' for its flags.\n"; code != 2 || stderr.String() != want || stdout.Len() != 0 {
			t.Errorf("%v %v: exit %d, stderr %q, stdout %q; want exit 2 and stderr %q", tc.args, tc.env, code, stderr.String(), stdout.String(), want)
		}
		if listened {
			t.Errorf("%v %v: the service listened", tc.args, tc.env)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%v %v: the data directory was made (%v)", tc.args, tc.env, err)
		}
	}
}

// The store reads a minimum of 0 as its default; --min-free-bytes 0 is no
// minimum.
func TestMinFreeBytesZeroIsNoCheck(t *testing.T) {
	for v, want := range map[byteSize]int64{0: -1, -1: -1, 1 << 20: 1 << 20} {
		if got := (&options{minFreeBytes: v}).storeMinFreeBytes(); got != want {
			t.Errorf("--min-free-bytes %d: the store gets %d, want %d", v, got, want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{"512MiB": 512 << 20, "1GiB": 1 << 30, "1gb": 1e9, "4096": 4096, "1.5k": 1536, "-1": -1,
		"4KiB": 4 << 10, "4kb": 4000, "3MB": 3e6, "2TiB": 2 << 40, "2TB": 2e12, "10B": 10} {
		if got, err := parseBytes(s); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", s, got, err, want)
		}
	}
	// A size that is no whole number of bytes is refused, not cut down:
	// "--cache-bytes 1.5" was taken as 1 byte.
	for _, s := range []string{"1.5", "0.3KiB", "nan", "inf", "1e300"} {
		if got, err := parseBytes(s); err == nil {
			t.Errorf("%q: %d, want an error", s, got)
		}
	}
}

// A size is shown in the largest binary unit that divides it, and 0 (or a
// size no unit divides) as a plain number.
func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1536: "1536", 4 << 10: "4KiB", 512 << 20: "512MiB", 3 << 40: "3TiB", -1: "-1"} {
		if got := formatBytes(n); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}

func TestHelpDocumentsEveryFlagAndItsEnvironmentVariable(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, noEnv, &out, io.Discard, nil); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var o options
	newFlagSet("serve", &o, io.Discard).VisitAll(func(f *flag.Flag) {
		if !strings.Contains(out.String(), "--"+f.Name) || !strings.Contains(out.String(), envName(f.Name)) {
			t.Errorf("help lacks --%s or %s", f.Name, envName(f.Name))
		}
	})
	for _, want := range []string{"SEENAPI_KEYS", "backup", "restore", "import-redis", "window: 30d", "(0: it does not wait"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"help", "import-redis"}, noEnv, &out, &out, nil); code != 0 {
		t.Fatalf("help import-redis: exit %d", code)
	}
	newFlagSet("import-redis", &o, io.Discard).VisitAll(func(f *flag.Flag) {
		if !strings.Contains(out.String(), "--"+f.Name) || !strings.Contains(out.String(), envName(f.Name)) {
			t.Errorf("help import-redis lacks --%s or %s", f.Name, envName(f.Name))
		}
	})
	if strings.Contains(out.String(), "--data-dir") {
		t.Error("import-redis talks to the service, not to a data directory")
	}
	// Each command's help is true of it: backup reads an existing store
	// and has no free-space minimum; restore's minimum refuses the restore.
	for cmd, want := range map[string]struct{ has, lacks []string }{
		"version": {has: []string{"seenapi version", "no flags"}, lacks: []string{"--data-dir", "--min-free-bytes"}},
		"backup":  {has: []string{"--out", "(must exist)"}, lacks: []string{"created if missing", "--min-free-bytes"}},
		"restore": {has: []string{"--in", "(created if missing)", "--min-free-bytes", "refuse to restore"}, lacks: []string{"507"}},
	} {
		out.Reset()
		if code := run(context.Background(), []string{"help", cmd}, noEnv, &out, io.Discard, nil); code != 0 {
			t.Fatalf("help %s: exit %d", cmd, code)
		}
		for _, s := range want.has {
			if !strings.Contains(out.String(), s) {
				t.Errorf("help %s lacks %q:\n%s", cmd, s, out.String())
			}
		}
		for _, s := range want.lacks {
			if strings.Contains(out.String(), s) {
				t.Errorf("help %s has %q:\n%s", cmd, s, out.String())
			}
		}
	}
}

// Help asked for goes to stdout with exit 0; an unknown command or flag is
// a usage error on stderr with exit 2, an unknown command listing them.
func TestHelpAskedForGoesToStdoutAndUsageErrorsToStderr(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		code      int
		stdout    string // "": nothing on stdout
		stderr    string // "": nothing on stderr
		notStderr string
	}{
		{args: []string{"--help"}, stdout: "Flags of serve"},
		{args: []string{"-h"}, stdout: "Flags of serve"},
		{args: []string{"help"}, stdout: "Flags of serve"},
		{args: []string{"backup", "--help"}, stdout: "Usage: seenapi backup"},
		{args: []string{"help", "bogus"}, code: 2, stderr: `unknown command "bogus"`, notStderr: "SEENAPI_DATA_DIR"},
		{args: []string{"bogus"}, code: 2, stderr: `unknown command "bogus"`, notStderr: "unexpected arguments"},
		{args: []string{"--bogus"}, code: 2, stderr: "seenapi serve: flag provided but not defined: --bogus\nRun 'seenapi help serve' for its flags.\n", notStderr: "Flags of serve"},
		{args: []string{"backup", "--cache-bytes", "1"}, code: 2, stderr: "Run 'seenapi help backup'", notStderr: "SEENAPI_DATA_DIR"},
		{args: []string{"version", "--help"}, stdout: "Usage: seenapi version"},
		{args: []string{"version", "--short"}, code: 2, stderr: "seenapi version: unexpected arguments: [\"--short\"]\nRun 'seenapi help version' for its flags.\n"},
		{args: []string{"--version", "now"}, code: 2, stderr: "seenapi version: unexpected arguments: [\"now\"]\nRun 'seenapi help version' for its flags.\n"},
		// A switch given its value as the next argument says how to give it.
		{args: []string{"--insecure", "yes"}, code: 2, stderr: "seenapi serve: unexpected arguments: [\"yes\"]; --insecure is a switch: give its value after =, as --insecure=true\nRun 'seenapi help serve'"},
		{args: []string{"restore", "-merge", "false", "--in", "x"}, code: 2, stderr: "unexpected arguments: [\"false\" \"--in\" \"x\"]; --merge is a switch: give its value after =, as --merge=false\nRun 'seenapi help restore'"},
		{args: []string{"--data-dir", "d", "extra"}, code: 2, stderr: "seenapi serve: unexpected arguments: [\"extra\"]\nRun 'seenapi help serve'"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, noEnv, &stdout, &stderr, nil)
		if code != tc.code || (tc.stdout == "") != (stdout.Len() == 0) || !strings.Contains(stdout.String(), tc.stdout) ||
			(tc.stderr == "") != (stderr.Len() == 0) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%q: exit %d, want %d; stdout %q, want %q; stderr %q, want %q",
				tc.args, code, tc.code, stdout.String(), tc.stdout, stderr.String(), tc.stderr)
		}
		if tc.code == 2 && !strings.Contains(tc.stderr, "Run 'seenapi help") && !strings.Contains(stderr.String(), "import-redis") {
			t.Errorf("%q: the commands are not listed:\n%s", tc.args, stderr.String())
		}
		if tc.notStderr != "" && strings.Contains(stderr.String(), tc.notStderr) {
			t.Errorf("%q: stderr has %q:\n%s", tc.args, tc.notStderr, stderr.String())
		}
	}
}

// Every flag error of every command names the flag --name, as the help and
// the README spell it, not -name as the flag package does, whichever way it
// was typed; the message is otherwise the flag package's, then the pointer
// to the help. Bad flag syntax repeats the argument as it was given.
func TestFlagErrorsNameTheFlagWithTwoDashes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		name string // the flag the error names; "": none
		want string // the error line, after "seenapi CMD: "
	}{
		{args: []string{"--bogus"}, name: "bogus", want: "flag provided but not defined: --bogus"},
		{args: []string{"-bogus"}, name: "bogus", want: "flag provided but not defined: --bogus"},
		{args: []string{"--cache-bytes", "xyz"}, name: "cache-bytes", want: `invalid value "xyz" for flag --cache-bytes: want a positive size such as 512MiB`},
		{args: []string{"-cache-bytes=xyz"}, name: "cache-bytes", want: `invalid value "xyz" for flag --cache-bytes: want a positive size such as 512MiB`},
		// The quoted value is passed over whole, whatever it holds.
		{args: []string{"--cache-bytes", `x" for flag -y`}, name: "cache-bytes", want: `invalid value "x\" for flag -y" for flag --cache-bytes: want a positive size such as 512MiB`},
		{args: []string{"--sync=maybe"}, name: "sync", want: `invalid boolean value "maybe" for --sync: parse error`},
		{args: []string{"--addr"}, name: "addr", want: "flag needs an argument: --addr"},
		{args: []string{"---bogus"}, want: "bad flag syntax: ---bogus"},
		{args: []string{"backup", "--bogus"}, name: "bogus", want: "flag provided but not defined: --bogus"},
		{args: []string{"backup", "--out"}, name: "out", want: "flag needs an argument: --out"},
		{args: []string{"restore", "--merge=2"}, name: "merge", want: `invalid boolean value "2" for --merge: parse error`},
		{args: []string{"restore", "--in"}, name: "in", want: "flag needs an argument: --in"},
		{args: []string{"import-redis", "--workers", "x"}, name: "workers", want: `invalid value "x" for flag --workers: want a whole number from 1 to 1024`},
		// Each worker takes a goroutine and room for four keys: a count
		// past what any service serves at once would take the memory.
		{args: []string{"import-redis", "--workers", "100000000"}, name: "workers", want: `invalid value "100000000" for flag --workers: want a whole number from 1 to 1024`},
		{args: []string{"import-redis", "--cache-bytes", "1"}, name: "cache-bytes", want: "flag provided but not defined: --cache-bytes"},
		// What the flag most likely meant, when something does.
		{args: []string{"--port", "8080"}, name: "port", want: "flag provided but not defined: --port (the address to listen on is --addr HOST:PORT, e.g. --addr 127.0.0.1:8080)"},
		{args: []string{"-listen=:8080"}, name: "listen", want: "flag provided but not defined: --listen (the address to listen on is --addr HOST:PORT, e.g. --addr 127.0.0.1:8080)"},
		{args: []string{"--cache-byte", "1GiB"}, name: "cache-byte", want: "flag provided but not defined: --cache-byte (did you mean --cache-bytes?)"},
		{args: []string{"--data_dir", "d"}, name: "data_dir", want: "flag provided but not defined: --data_dir (did you mean --data-dir?)"},
		{args: []string{"--namespaces-file", "ns.yaml"}, name: "namespaces-file", want: "flag provided but not defined: --namespaces-file (did you mean --namespaces?)"},
		{args: []string{"backup", "--port", "8080"}, name: "port", want: "flag provided but not defined: --port"},
	} {
		cmd, args := "serve", tc.args
		if !strings.HasPrefix(args[0], "-") {
			cmd, args = args[0], args[1:]
		}
		if cmd == "serve" { // nowhere it could serve or write, were a flag taken
			args = append([]string{"--addr", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), "data")}, args...)
		}
		ctx, stop := context.WithCancel(context.Background())
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{cmd}, args...), noEnv, &stdout, &stderr, func(string) { stop() })
		stop()
		want := "seenapi " + cmd + ": " + tc.want + "\nRun 'seenapi help " + cmd + "' for its flags.\n"
		if code != 2 || stderr.String() != want || stdout.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit 2 and stderr %q", tc.args, code, stderr.String(), stdout.String(), want)
		}
		if tc.name != "" && (!strings.Contains(stderr.String(), "--"+tc.name) || strings.Contains(stderr.String(), " -"+tc.name)) {
			t.Errorf("%q: %q does not name the flag --%s", tc.args, stderr.String(), tc.name)
		}
	}
	// A bool flag whose Set("true") fails is named bare by the flag package.
	if got := dashDash(errors.New("invalid boolean flag on: no")).Error(); got != "invalid boolean flag --on: no" {
		t.Errorf("invalid boolean flag: %q", got)
	}
	if err := dashDash(flag.ErrHelp); err != flag.ErrHelp {
		t.Errorf("ErrHelp became %v", err)
	}
}

// The help of each command says what it does before listing its flags.
func TestHelpOfACommandSaysWhatItDoes(t *testing.T) {
	for _, cmd := range []string{"backup", "restore", "import-redis"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"help", cmd}, noEnv, &stdout, &stderr, nil); code != 0 {
			t.Fatalf("help %s: exit %d: %s", cmd, code, stderr.String())
		}
		doc, flags := commandDoc[cmd], strings.Index(stdout.String(), "Flags")
		if doc == "" || !strings.Contains(stdout.String(), doc) || strings.Index(stdout.String(), doc) > flags {
			t.Errorf("help %s says nothing of what it does before its flags:\n%s", cmd, stdout.String())
		}
	}
}

// version names the build and the Go it was built with.
func TestVersionSaysWhichBuild(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		var out bytes.Buffer
		if code := run(context.Background(), []string{arg}, noEnv, &out, &out, nil); code != 0 {
			t.Fatalf("%s: exit %d", arg, code)
		}
		got := strings.TrimSpace(out.String())
		if !strings.HasPrefix(got, "seenapi ") || !strings.HasSuffix(got, " "+runtime.Version()) || strings.Count(got, "\n") != 0 {
			t.Errorf("%s printed %q, want one line: seenapi, the build, %s", arg, got, runtime.Version())
		}
	}
}

func noEnv(string) (string, bool) { return "", false }

// mapEnv is an environment of the variables in m.
func mapEnv(m map[string]string) environ {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestRefusesPublicAddressWithoutKeys(t *testing.T) {
	// failedStart stops a service that starts: a broken check fails here
	// at once rather than serving until the test times out.
	if out := failedStart(t, "--addr", "0.0.0.0:0"); !strings.Contains(out, "refusing to listen on a non-loopback address") {
		t.Fatalf("want a refusal: %s", out)
	}
}

// A taken address fails before anything touches the data directory, names
// its flag, and says nothing of a crash.
func TestTakenAddressFailsBeforeTheDataDirIsMade(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := filepath.Join(t.TempDir(), "data")
	var out bytes.Buffer
	code := run(context.Background(), []string{"--addr", ln.Addr().String(), "--data-dir", dir, "--min-free-bytes", "-1"}, noEnv, &out, &out, nil)
	if code == 0 || !strings.Contains(out.String(), "--addr: listen tcp "+ln.Addr().String()) ||
		!strings.Contains(out.String(), "address already in use") || strings.Contains(out.String(), "crash") {
		t.Fatalf("exit %d, want a failure naming --addr and the taken address only:\n%s", code, out.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the data directory was made (%v)", err)
	}
}

// A --data-dir the store cannot open (a file, a directory it may not
// write) is named as the flag.
func TestStoreThatCannotOpenNamesTheDataDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := failedStart(t, "--data-dir", file); !strings.Contains(out, "err=\"--data-dir "+file+": storage: open "+file+": not a directory\"") {
		t.Fatalf("want the failure to name --data-dir:\n%s", out)
	}
}

// foldJournal logs how many users it folded in, claiming a crash only
// after one, an error when folding fails, and nothing when it failed only
// because of the shutdown.
func TestFoldJournalLogsRecoveryAndOnlyRealFailures(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	for _, tc := range []struct {
		err     error
		users   int
		crashed bool
		closing chan struct{}
		want    string // "": nothing logged
	}{
		{users: 3, crashed: true, closing: make(chan struct{}), want: `level=INFO msg="seenapi: folded in the journal left by a crash" users=3`},
		{users: 3, closing: make(chan struct{}), want: `level=INFO msg="seenapi: folded in the journal of calls not yet written back" users=3`},
		{users: 0, crashed: true, closing: make(chan struct{})},
		{err: errors.New("disk on fire"), users: 3, crashed: true, closing: make(chan struct{}), want: `level=ERROR msg="seenapi: folding in the journal left by a crash failed`},
		{err: errors.New("disk on fire"), users: 3, closing: make(chan struct{}), want: `level=ERROR msg="seenapi: folding in the journal of calls not yet written back failed`},
		{err: fmt.Errorf("storage: journal users: %w", storage.ErrClosed), crashed: true, closing: closed},
	} {
		var out bytes.Buffer
		foldJournal(func() (int, error) { return tc.users, tc.err }, journalOf(tc.crashed), tc.closing, slog.New(slog.NewTextHandler(&out, nil)))
		if got := out.String(); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("err %v, %d users, crashed %v, closing %v: logged %q, want %q", tc.err, tc.users, tc.crashed, tc.closing == closed, got, tc.want)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8080": true, "[::1]:80": true, "localhost:1": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.1:80": false, "example.com:80": false,
		// Go's resolver asks DNS for a name under .localhost.
		"seen.localhost:8080": false, "SEEN.LOCALHOST:8080": false} {
		if got := isLoopback(addr); got != want {
			t.Errorf("%s: %v", addr, got)
		}
	}
}

// The profiler answers to loopback names only: a web page whose own name
// resolves to 127.0.0.1 (DNS rebinding) gets 403 for its Host, as the API
// of a service without keys does.
func TestProfilerAnswersLoopbackNamesOnly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go serveDebug(ln)
	for host, want := range map[string]int{"": http.StatusOK, "localhost": http.StatusOK, "[::1]:6060": http.StatusOK,
		"rebound.example.com": http.StatusForbidden, "127.0.0.1.nip.io:6060": http.StatusForbidden} {
		req, err := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/debug/pprof/cmdline", nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// service runs `seenapi serve` in-process on a loopback port until stop.
type service struct {
	t    *testing.T
	url  string
	out  *syncBuffer
	stop context.CancelFunc
	code chan int
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func startService(t *testing.T, env map[string]string, args ...string) *service {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &service{t: t, out: &syncBuffer{}, stop: cancel, code: make(chan int, 1)}
	addr := make(chan string, 1)
	go func() {
		s.code <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--min-free-bytes", "-1"}, args...),
			mapEnv(env), s.out, s.out, func(a string) { addr <- a })
	}()
	select {
	case a := <-addr:
		s.url = "http://" + a
	case code := <-s.code:
		t.Fatalf("serve exited %d: %s", code, s.out.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	t.Cleanup(func() { s.shutdown() })
	return s
}

// shutdown cancels the service (as SIGTERM does) and returns its exit code.
func (s *service) shutdown() int {
	s.stop()
	select {
	case code := <-s.code:
		s.code <- code
		return code
	case <-time.After(30 * time.Second):
		s.t.Fatal("serve did not stop")
		return -1
	}
}

func post(t *testing.T, url, body string, header ...string) (int, map[string]any) {
	t.Helper()
	status, _, m := postHeaders(t, url, body, header...)
	return status, m
}

// postHeaders is post with the answer's headers.
func postHeaders(t *testing.T, url, body string, header ...string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, m
}

// openHotSet opens the data directory dir, which no service has open, with
// a fresh store and hot set of the default namespace; done closes both.
func openHotSet(t *testing.T, dir string) (hot *eviction.HotSet, done func()) {
	t.Helper()
	store, err := storage.Open(storage.DefaultOptions(dir).WithMinFreeBytes(-1))
	if err != nil {
		t.Fatal(err)
	}
	nss, _ := loadNamespaces("")
	hot, err = eviction.New(store, nss, eviction.Options{})
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	return hot, func() { hot.Close(); store.Close() }
}

// seenAfterRestart opens the data directory with a fresh store and hot set
// and returns whether the user has seen each item.
func seenAfterRestart(t *testing.T, dir, ns, user string, items ...string) []bool {
	t.Helper()
	hot, done := openHotSet(t, dir)
	defer done()
	seen, err := hot.Check(ns, user, items, nil)
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

// A service asked to listen on 0.0.0.0 logs that address, not the "[::]"
// Go reports for it.
func TestWildcardAddressIsLoggedAsAsked(t *testing.T) {
	s := startService(t, nil, "--addr", "0.0.0.0:0", "--insecure", "--data-dir", t.TempDir())
	out := s.out.String()
	if !strings.Contains(out, "url=http://0.0.0.0:") || !strings.Contains(out, "who can reach 0.0.0.0:") || strings.Contains(out, "[::]") {
		t.Errorf("the log does not give 0.0.0.0:\n%s", out)
	}
}

func TestServeAnswersAndShutsDownKeepingEveryCall(t *testing.T) {
	dir := t.TempDir()
	s := startService(t, nil, "--data-dir", dir, "--flush-interval", "1h")
	status, m := post(t, s.url+"/v1/namespaces/default/users/u1/filter", `{"candidates":["a","b","c"],"limit":2}`)
	if status != 200 || fmt.Sprint(m["unseen"]) != "[a b]" {
		t.Fatalf("%d %v", status, m)
	}
	if !strings.Contains(s.out.String(), "NO API KEYS") {
		t.Errorf("an open service must say so loudly: %s", s.out.String())
	}
	if code := s.shutdown(); code != 0 {
		t.Fatalf("exit %d: %s", code, s.out.String())
	}
	if got := seenAfterRestart(t, dir, "default", "u1", "a", "b", "c"); !slices.Equal(got, []bool{true, true, false}) {
		t.Fatalf("after shutdown the user saw %v, want a and b", got)
	}
}

// --rate-limit (here from its environment variable) reaches the API: a
// caller past its burst is answered 429 with Retry-After, the probes are
// not limited.
func TestRateLimitFlagLimitsEachCaller(t *testing.T) {
	s := startService(t, map[string]string{"SEENAPI_RATE_LIMIT": "0.01"}, "--data-dir", t.TempDir(), "--rate-burst", "2")
	url := s.url + "/v1/namespaces/default/users/u1/filter"
	for i := range 2 {
		if status, m := post(t, url, `{"candidates":["a"]}`); status != 200 {
			t.Fatalf("call %d of the burst: %d %v", i, status, m)
		}
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"candidates":["a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// A token every 100 s: Retry-After is close to that, whatever the time
	// the two calls took.
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusTooManyRequests || ra < 90 || ra > 100 {
		t.Fatalf("past the burst: %d, Retry-After %q; want 429 and about 100", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp, err := http.Get(s.url + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz past the rate: %v %v", resp, err)
	}
	if !strings.Contains(s.out.String(), `rate_limit="0.01/s per client address" rate_burst=2`) {
		t.Errorf("the start-up line does not say the rate limit:\n%s", s.out.String())
	}
	if code := s.shutdown(); code != 0 {
		t.Fatalf("exit %d: %s", code, s.out.String())
	}
}

// --read-timeout bounds how long a request may take to arrive: a body
// that stops coming is refused with 408 after it, not after the default.
func TestReadTimeoutFlagBoundsARequest(t *testing.T) {
	s := startService(t, nil, "--data-dir", t.TempDir(), "--read-timeout", "300ms")
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	io.WriteString(conn, "POST /v1/namespaces/default/users/u/filter HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n{")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second)) // half the default
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer within 5 s: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("a body that stops coming: %d, want 408", resp.StatusCode)
	}
	t.Logf("refused after %v", time.Since(start))
}

// A stop writes every changed user back before the service ends: the
// next start finds each filter stored and no journal left to fold in.
func TestShutdownWritesEveryUserBack(t *testing.T) {
	dir := t.TempDir()
	s := startService(t, nil, "--data-dir", dir, "--flush-interval", "1h")
	users := []string{"u1", "u2", "u3"}
	for _, u := range users {
		if status, m := post(t, s.url+"/v1/namespaces/default/users/"+u+"/seen", `{"items":["x","y"]}`); status != 200 {
			t.Fatalf("%s: %d %v", u, status, m)
		}
	}
	if code := s.shutdown(); code != 0 {
		t.Fatalf("exit %d: %s", code, s.out.String())
	}
	store, err := storage.Open(storage.DefaultOptions(dir).WithMinFreeBytes(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, u := range users {
		filter, journal, err := store.Load("default", u)
		if err != nil || filter == nil || len(journal) != 0 {
			t.Errorf("%s after shutdown: filter stored %v, %d journal records left, err %v; want the filter and no journal",
				u, filter != nil, len(journal), err)
		}
	}
}

// A stop that comes as soon as the service listens (before it serves)
// still ends it.
func TestStopRightAtStartEndsTheService(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	code := make(chan int, 1)
	var out syncBuffer
	go func() {
		code <- run(ctx, []string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--min-free-bytes", "-1"},
			noEnv, &out, &out, func(string) { stop() })
	}()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d: %s", c, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("still serving 30s after the stop: %s", out.String())
	}
}

func TestKeysFromFileAndEnvironment(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("# keys\nread:r-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startService(t, map[string]string{"SEENAPI_KEYS": "write:w-0123456789abcdef"},
		"--data-dir", t.TempDir(), "--keys-file", keys)
	url := s.url + "/v1/namespaces/default/users/u/filter"
	if status, _ := post(t, url, `{"candidates":["a"]}`); status != 401 {
		t.Fatalf("no key: %d", status)
	}
	if status, _ := post(t, url, `{"candidates":["a"]}`, "Authorization", "Bearer r-0123456789abcdef"); status != 403 {
		t.Fatalf("read key: %d", status)
	}
	if status, _ := post(t, url, `{"candidates":["a"]}`, "Authorization", "Bearer w-0123456789abcdef"); status != 200 {
		t.Fatalf("write key: %d", status)
	}
	if strings.Contains(s.out.String(), "NO API KEYS") {
		t.Error("a service with keys claims to be open")
	}
}

// A key given both in the keys file and in SEENAPI_KEYS is refused naming
// it by its id and both places, not by its place in the two lists together.
func TestAKeyInBothKeysFileAndEnvironmentIsNamed(t *testing.T) {
	dir := t.TempDir()
	keys := writeFile(t, dir, "keys", "read:r-0123456789abcdef\nwrite:w-0123456789abcdef\n")
	env := map[string]string{"SEENAPI_KEYS": "admin:a-0123456789abcdef,read:w-0123456789abcdef"}
	id := api.Key{Secret: "w-0123456789abcdef"}.ID()
	want := "SEENAPI_KEYS: key " + id + " is also in --keys-file " + keys + "; give each key once, in one of them"
	code, _, logged := runCheck(t, env, "--keys-file", keys, "--data-dir", filepath.Join(dir, "data"))
	if code != 1 || !strings.Contains(logged, want) {
		t.Fatalf("exit %d, logged %q; want 1 and %q", code, logged, want)
	}
}

// A key's own rate in the keys file limits that key, in place of
// --rate-limit (none here), and the start-up line counts such keys; a key
// without one is not limited.
func TestKeysFileGivesAKeyItsOwnRate(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("write:w-0123456789abcdef rate=0.01 burst=2\nwrite:v-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startService(t, nil, "--data-dir", t.TempDir(), "--keys-file", keys)
	url := s.url + "/v1/namespaces/default/users/u/filter"
	var got []int
	for range 3 {
		status, _ := post(t, url, `{"candidates":["a"]}`, "Authorization", "Bearer w-0123456789abcdef")
		got = append(got, status)
	}
	if got[0] != 200 || got[1] != 200 || got[2] != 429 {
		t.Errorf("the limited key's three calls: %v, want 200, 200, 429", got)
	}
	for i := range 5 {
		if status, m := post(t, url, `{"candidates":["a"]}`, "Authorization", "Bearer v-0123456789abcdef"); status != 200 {
			t.Fatalf("the other key's call %d: %d %v", i, status, m)
		}
	}
	if !strings.Contains(s.out.String(), "keys_with_own_rate=1") {
		t.Errorf("the start-up line does not count the key with its own rate:\n%s", s.out.String())
	}
}

// A namespaces file that cannot be read is named by its flag: the error of
// opening it says only a path.
func TestMissingNamespacesFileNamesTheFlag(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "ns.yaml")
	if out := failedStart(t, "--namespaces", missing); !strings.Contains(out, "--namespaces: open "+missing) {
		t.Fatalf("want a failure naming --namespaces:\n%s", out)
	}
}

// A namespaces file that names no namespace (empty, comments only) is
// refused at start, by check and by a reload: cut short or not yet
// written, it would take every namespace but "default" out of service.
func TestNamespacesFileNamingNoNamespaceIsRefused(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"empty": "", "comments": "# feed:\n#   fp_rate: 0.001\n", "null": "~\n",
		"empty map": "{}  # rendered from an empty map\n", "empty map document": "--- {}\n"} {
		f := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if out := failedStart(t, "--namespaces", f); !strings.Contains(out, "names no namespace") {
			t.Errorf("%s file: want a refusal saying it names no namespace:\n%s", name, out)
		}
		var out bytes.Buffer
		if code := run(context.Background(), []string{"check", "--namespaces", f, "--data-dir", t.TempDir()}, noEnv, &out, &out, nil); code == 0 ||
			!strings.Contains(out.String(), "names no namespace") {
			t.Errorf("check of the %s file: exit %d:\n%s", name, code, out.String())
		}
	}
	only := filepath.Join(dir, "default.yaml")
	if err := os.WriteFile(only, []byte("default:\n  fp_rate: 0.001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if nss, err := loadNamespaces(only); err != nil || len(nss) != 1 || nss[0].Profile.FPRate != 0.001 {
		t.Errorf("a file naming default alone: %v %v", nss, err)
	}
}

// A key's own rate near zero, which would answer Retry-After in years, is
// refused at the start as --rate-limit's is, naming the file.
func TestKeysFileRefusesARateNearZero(t *testing.T) {
	keys := writeFile(t, t.TempDir(), "keys", "write:w-0123456789abcdef rate=1e-300\n")
	out := failedStart(t, "--keys-file", keys)
	if want := "rate=1e-300: want at least 0.001 requests a second (one every 1000s), or off"; !strings.Contains(out, want) || !strings.Contains(out, keys) {
		t.Fatalf("want a failure naming %s and %q:\n%s", keys, want, out)
	}
}

// failedStart runs serve with args after a loopback address, a fresh data
// directory and no free-space check (a flag given again wins), wants it to
// fail, and returns what it wrote.
func failedStart(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	base := []string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--min-free-bytes", "-1"}
	if code := run(ctx, append(base, args...), noEnv, &out, &out, func(string) { stop() }); code == 0 {
		t.Fatalf("%q: exit 0, want a failure:\n%s", args, out.String())
	}
	return out.String()
}

// A bad namespaces file stops the start before anything else is done or
// logged: the error is the one line out, and no data directory is made.
func TestBadNamespacesFileIsTheOnlyLineOut(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "ns.yaml")
	if err := os.WriteFile(bad, []byte("feed:\n  windw: 30d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	out := failedStart(t, "--data-dir", data, "--debug-addr", "127.0.0.1:0", "--memory-limit", "2GiB", "--namespaces", bad)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `unknown field \"windw\"`) {
		t.Fatalf("want a failure whose one line is the file's error:\n%s", out)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("data directory after a failed start: %v, want none", err)
	}
}

// A keys file that cannot be read is named by its flag, as the namespaces
// file is.
func TestMissingKeysFileNamesTheFlag(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "keys")
	if out := failedStart(t, "--keys-file", missing); !strings.Contains(out, "--keys-file: open "+missing+": no such file") || strings.Contains(out, "bad API keys") {
		t.Fatalf("want a failure naming --keys-file:\n%s", out)
	}
}

// A keys file that yields no key refuses to start rather than serve open.
func TestKeysFileWithoutKeysRefusesToStart(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("# keys, one ROLE:KEY a line\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
	}{
		{args: []string{"--keys-file", keys}},
		{env: map[string]string{"SEENAPI_KEYS_FILE": keys}},
		// A secret that rendered blank is no more a choice to serve open.
		{env: map[string]string{"SEENAPI_KEYS": " "}},
		{env: map[string]string{"SEENAPI_KEYS": ""}},
		{env: map[string]string{"SEENAPI_KEYS_FILE": ""}},
		{env: map[string]string{"SEENAPI_KEYS": ","}},
	} {
		var out bytes.Buffer
		args := append([]string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--min-free-bytes", "-1"}, tc.args...)
		ctx, stop := context.WithCancel(context.Background())
		code := run(ctx, args, mapEnv(tc.env), &out, &out, func(string) { stop() }) // served: stop
		stop()
		if code == 0 || !strings.Contains(out.String(), "holds no key") && !strings.Contains(out.String(), "set but empty") ||
			strings.Contains(out.String(), "NO API KEYS") {
			t.Errorf("%v %v: exit %d, want a refusal naming the keys' empty source:\n%s", tc.args, tc.env, code, out.String())
		}
	}
}

// --keys-file "" (a unit's --keys-file "$KEYS_FILE" whose variable did not
// render) is refused as a flag value, by serve and check alike, as
// SEENAPI_KEYS_FILE set but empty is: serving open is asked for by giving
// no keys file.
func TestKeysFileFlagGivenEmptyIsRefused(t *testing.T) {
	for _, cmd := range [][]string{nil, {"check"}} {
		var out bytes.Buffer
		args := append(cmd, "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--min-free-bytes", "-1", "--keys-file", "")
		ctx, stop := context.WithCancel(context.Background())
		code := run(ctx, args, mapEnv(nil), &out, &out, func(string) { stop() }) // served: stop
		stop()
		if code != 2 || !strings.Contains(out.String(), `invalid value "" for flag --keys-file`) || strings.Contains(out.String(), "NO API KEYS") {
			t.Errorf("%v: exit %d, want 2 and a refusal of the empty --keys-file:\n%s", args, code, out.String())
		}
	}
}

func TestNamespacesFileServesItsProfiles(t *testing.T) {
	f := filepath.Join(t.TempDir(), "ns.yaml")
	if err := os.WriteFile(f, []byte("feed:\n  window: 30d\n  max_items: 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startService(t, nil, "--data-dir", t.TempDir(), "--namespaces", f)
	resp, err := http.Get(s.url + "/v1/namespaces/feed")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	if resp.StatusCode != 200 || m["window"] != float64(30*24*3600) || m["max_items"] != float64(7) {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
}

// stoppedServiceData returns the data directory of a service that served
// and stopped, u1 of default having seen x and y.
func stoppedServiceData(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := startService(t, nil, "--data-dir", dir)
	post(t, s.url+"/v1/namespaces/default/users/u1/seen", `{"items":["x","y"]}`)
	if code := s.shutdown(); code != 0 {
		t.Fatal(s.out.String())
	}
	return dir
}

// backupOf backs dir up offline into a new file, and returns the file and
// what the command logged.
func backupOf(t *testing.T, dir string) (file, log string) {
	t.Helper()
	file = filepath.Join(t.TempDir(), "backup")
	var out bytes.Buffer
	if code := run(context.Background(), []string{"backup", "--data-dir", dir, "--out", file}, noEnv, &out, &out, nil); code != 0 {
		t.Fatalf("backup exit %d: %s", code, out.String())
	}
	return file, out.String()
}

// SIGINT or SIGTERM (the context of run) stops an offline backup, which
// keeps no file, and a restore, which while it checks the backup writes
// nothing: both used to read or write on, Ctrl-C caught and unheeded.
func TestBackupAndRestoreStopOnASignal(t *testing.T) {
	dir := stoppedServiceData(t)
	stopped, stop := context.WithCancel(context.Background())
	stop()
	file := filepath.Join(t.TempDir(), "backup")
	var out bytes.Buffer
	code := run(stopped, []string{"backup", "--data-dir", dir, "--out", file}, noEnv, &out, &out, nil)
	if _, err := os.Stat(file); code != 1 || !strings.Contains(out.String(), "backup interrupted; "+file+" was not kept") || !os.IsNotExist(err) {
		t.Fatalf("backup stopped: exit %d, %s kept: %v, want 1 and none:\n%s", code, file, err == nil, out.String())
	}
	file, _ = backupOf(t, dir)
	out.Reset()
	restored := filepath.Join(t.TempDir(), "restored")
	code = run(stopped, []string{"restore", "--data-dir", restored, "--in", file, "--min-free-bytes", "-1"}, noEnv, &out, &out, nil)
	if _, err := os.Stat(restored); code != 1 || !strings.Contains(out.String(), "restore interrupted while checking "+file+"; nothing was restored") || !os.IsNotExist(err) {
		t.Fatalf("restore stopped: exit %d, data directory made: %v, want 1 and none:\n%s", code, err == nil, out.String())
	}
}

// An --in that is a directory (the data directory, say) is named as one,
// not as a file without a backup's header.
func TestRestoreOfADirectorySaysSo(t *testing.T) {
	in := t.TempDir()
	var out bytes.Buffer
	code := run(context.Background(), []string{"restore", "--data-dir", filepath.Join(t.TempDir(), "data"), "--in", in}, noEnv, &out, &out, nil)
	if want := "--in " + in + " is a directory; give the backup file (backup's --out)"; code != 1 || !strings.Contains(out.String(), want) {
		t.Fatalf("exit %d, want 1 and %q:\n%s", code, want, out.String())
	}
}

// A --data-dir restore cannot make (under a file) is named as the flag.
func TestRestoreNamesTheDataDirItCannotMake(t *testing.T) {
	file, _ := backupOf(t, stoppedServiceData(t))
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code := run(context.Background(), []string{"restore", "--data-dir", filepath.Join(notDir, "data"), "--in", file}, noEnv, &out, &out, nil)
	if want := "--data-dir: mkdir " + notDir + ": not a directory; nothing was restored"; code != 1 || !strings.Contains(out.String(), want) {
		t.Fatalf("restore into a file's path: exit %d, want 1 and %q:\n%s", code, want, out.String())
	}
}

func TestBackupAndRestore(t *testing.T) {
	dir := stoppedServiceData(t)
	file, log := backupOf(t, dir)
	// Each says what the backup holds: u1's filter, written back at the stop.
	if !strings.Contains(log, "backup written") || !strings.Contains(log, "filters=1 no_history=0 journal_records=0") {
		t.Fatalf("the backup's log does not say what it holds:\n%s", log)
	}
	var out bytes.Buffer
	restored := filepath.Join(t.TempDir(), "restored")
	if code := run(context.Background(), []string{"restore", "--data-dir", restored, "--in", file, "--min-free-bytes", "-1"}, noEnv, &out, &out, nil); code != 0 {
		t.Fatalf("restore exit %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "backup restored") || !strings.Contains(out.String(), "filters=1 no_history=0 journal_records=0") {
		t.Fatalf("the restore's log does not say what it restored:\n%s", out.String())
	}
	if got := seenAfterRestart(t, restored, "default", "u1", "x", "y", "z"); !slices.Equal(got, []bool{true, true, false}) {
		t.Fatalf("restored user saw %v", got)
	}
	if code := run(context.Background(), []string{"backup", "--data-dir", dir}, noEnv, &out, &out, nil); code == 0 {
		t.Fatal("backup without --out must fail")
	}
}

// restore --merge merges each restored filter into the one stored: a user
// keeps what they saw on both sides.
func TestRestoreMergeKeepsWhatEachSideSaw(t *testing.T) {
	seenOn := func(dir, item string) {
		t.Helper()
		s := startService(t, nil, "--data-dir", dir)
		if status, m := post(t, s.url+"/v1/namespaces/default/users/u1/seen", `{"items":["`+item+`"]}`); status != 200 {
			t.Fatalf("%d %v", status, m)
		}
		if code := s.shutdown(); code != 0 {
			t.Fatal(s.out.String())
		}
	}
	from, into := t.TempDir(), t.TempDir()
	seenOn(from, "x")
	seenOn(into, "y")
	file := filepath.Join(t.TempDir(), "backup")
	var out bytes.Buffer
	if code := run(context.Background(), []string{"backup", "--data-dir", from, "--out", file}, noEnv, &out, &out, nil); code != 0 {
		t.Fatalf("backup exit %d: %s", code, out.String())
	}
	if code := run(context.Background(), []string{"restore", "--merge", "--data-dir", into, "--in", file, "--min-free-bytes", "-1"}, noEnv, &out, &out, nil); code != 0 {
		t.Fatalf("restore --merge exit %d: %s", code, out.String())
	}
	if got := seenAfterRestart(t, into, "default", "u1", "x", "y", "z"); !slices.Equal(got, []bool{true, true, false}) {
		t.Fatalf("after restore --merge the user saw %v, want x from the backup and y from before", got)
	}
}

// A running service notes its URL in its data directory, so that backup
// and a second serve on the directory name the --url to call instead of a
// fixed one; the note goes when the service stops.
func TestCommandsOnADirectoryInUseNameTheServicesURL(t *testing.T) {
	dir := t.TempDir()
	s := startService(t, nil, "--data-dir", dir)
	out := filepath.Join(t.TempDir(), "seenapi.backup")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "--data-dir", dir, "--out", out}, "seenapi backup --url " + s.url + " --out " + out + ";"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--min-free-bytes", "-1"}, "serving it at " + s.url + ":"},
	} {
		var log bytes.Buffer
		if code := run(context.Background(), tc.args, noEnv, &log, &log, nil); code == 0 {
			t.Fatalf("%s: exit 0 on a directory in use\n%s", tc.args[0], log.String())
		}
		if !strings.Contains(log.String(), tc.want) {
			t.Errorf("%s: the error does not say %q:\n%s", tc.args[0], tc.want, log.String())
		}
	}
	if code := s.shutdown(); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s.out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, servingURLFile)); !os.IsNotExist(err) {
		t.Errorf("the service's URL is still noted after it stopped (%v)", err)
	}
}

func TestLocalAddrCallsAnUnspecifiedHostOnLoopback(t *testing.T) {
	for _, tc := range []struct{ listened, asked, want string }{
		{"127.0.0.1:8080", "127.0.0.1:8080", "127.0.0.1:8080"},
		{"10.0.0.5:8080", "10.0.0.5:8080", "10.0.0.5:8080"},
		{"[::]:8080", "0.0.0.0:8080", "127.0.0.1:8080"},
		{"[::]:8080", ":8080", "[::1]:8080"},
		{"0.0.0.0:8080", ":8080", "127.0.0.1:8080"},
		{"[::1]:9000", "[::1]:9000", "[::1]:9000"},
	} {
		if got := localAddr(tc.listened, tc.asked); got != tc.want {
			t.Errorf("localAddr(%q, %q) = %q, want %q", tc.listened, tc.asked, got, tc.want)
		}
	}
}

// Backup and restore of the data directory of a running service fail,
// saying the directory is in use and how a running service is backed up;
// a second service on it fails saying the directory is in use.
func TestBackupAndRestoreOfADirectoryInUseSayHowToBackUpTheService(t *testing.T) {
	dir := t.TempDir()
	store, err := storage.Open(storage.DefaultOptions(dir).WithMinFreeBytes(-1).WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	in := filepath.Join(t.TempDir(), "whole.backup")
	var b bytes.Buffer
	if err := store.Backup(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "seenapi.backup")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"backup", "--data-dir", dir, "--out", out},
			[]string{"--data-dir " + dir + " is in use", "GET /v1/backup", "seenapi backup --url"}},
		{[]string{"restore", "--data-dir", dir, "--in", in, "--min-free-bytes", "-1"},
			[]string{"--data-dir " + dir + " is in use", "stop it"}},
		// A second service on the same directory: which one to stop, or
		// that this one wants a directory of its own.
		{[]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--min-free-bytes", "-1"},
			[]string{"--data-dir " + dir + " is in use", "another --data-dir"}},
	} {
		var log bytes.Buffer
		code := run(context.Background(), tc.args, noEnv, &log, &log, nil)
		if code == 0 {
			t.Errorf("%s: exit 0 on a directory in use\n%s", tc.args[0], log.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(log.String(), w) {
				t.Errorf("%s: the error does not say %q:\n%s", tc.args[0], w, log.String())
			}
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused backup left --out (%v)", err)
	}
}

// A backup that cannot be read is named by its flag, and the data
// directory is not made.
func TestMissingBackupFileNamesTheFlag(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "seenapi.backup")
	restored := filepath.Join(t.TempDir(), "restored")
	var log bytes.Buffer
	code := run(context.Background(), []string{"restore", "--data-dir", restored, "--in", missing, "--min-free-bytes", "-1"}, noEnv, &log, &log, nil)
	if code == 0 || !strings.Contains(log.String(), "--in: open "+missing+": no such file") {
		t.Errorf("exit %d, want a failure naming --in:\n%s", code, log.String())
	}
	if _, err := os.Stat(restored); !os.IsNotExist(err) {
		t.Errorf("a refused restore made the data directory (%v)", err)
	}
}

// An offline backup of a directory that holds no store (a wrong or
// mistyped --data-dir) fails, saying so, and writes nothing: neither a
// store into that directory nor an empty backup that would pass for one.
func TestBackupOfADirectoryWithoutAStoreFails(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "namespaces.yaml", "feed:\n")
	out := filepath.Join(t.TempDir(), "seenapi.backup")
	for _, tc := range []struct{ dir, want string }{
		{dir, "--data-dir " + dir + " holds no seenapi store, so nothing was backed up"},
		{filepath.Join(dir, "missing"), "--data-dir " + filepath.Join(dir, "missing") + " does not exist"},
	} {
		if code, log := backupCmd(nil, "--data-dir", tc.dir, "--out", out); code != 1 || !strings.Contains(log, tc.want) {
			t.Errorf("backup of %s: exit %d, want 1 and %q:\n%s", tc.dir, code, tc.want, log)
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 {
		t.Errorf("the directory holds %d entries (%v), want its one file", len(entries), err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed backup left %s (%v)", out, err)
	}
}

// A required flag left out is a usage error: one line naming it, the
// pointer to the command's help, exit 2, and nothing done.
func TestMissingRequiredFlagIsAUsageError(t *testing.T) {
	dir := t.TempDir()
	restored := filepath.Join(t.TempDir(), "restored")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{args: []string{"backup", "--data-dir", dir}, want: "seenapi backup: --out FILE is required\nRun 'seenapi help backup' for its flags.\n"},
		{args: []string{"backup", "--url", "http://127.0.0.1:1"}, want: "seenapi backup: --out FILE is required\nRun 'seenapi help backup' for its flags.\n"},
		{args: []string{"restore", "--data-dir", restored}, want: "seenapi restore: --in FILE is required\nRun 'seenapi help restore' for its flags.\n"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tc.args, noEnv, &stdout, &stderr, nil); code != 2 || stderr.String() != tc.want || stdout.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit 2 and stderr %q", tc.args, code, stderr.String(), stdout.String(), tc.want)
		}
	}
	if _, err := os.Stat(restored); !os.IsNotExist(err) {
		t.Errorf("restore without --in made the data directory (%v)", err)
	}
}

// built is the command built once for the tests that run the binary:
// each building its own took seconds of linking, most of such a test's time.
var built bench.SharedBuild

func TestMain(m *testing.M) {
	if os.Getenv(secondSignalChild) != "" {
		secondSignalRightAfterTheFirst()
	}
	code := m.Run()
	built.Remove()
	os.Exit(code)
}

// buildBinary builds the command once for all the tests (skipping the
// test under -short) and returns its path.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := built.Bin("../..")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestBinaryShutsDownGracefullyOnSIGTERM builds the command, serves, sends
// SIGTERM, and checks the answered call survived into a second run.
// binaryRun is the built binary serving on a loopback port.
type binaryRun struct {
	cmd *exec.Cmd
	url string
	log *syncBuffer
	// read is closed once the child's stderr is read to its end: Wait
	// closes the pipe when the child exits, so the log is complete only
	// after read, and Wait comes after it.
	read chan struct{}
}

// startBinary starts bin with args on a free loopback port and returns it
// once it logs its URL.
func startBinary(t *testing.T, bin string, args ...string) *binaryRun {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--addr", "127.0.0.1:0", "--min-free-bytes", "-1"}, args...)...)
	cmd.Env = append(os.Environ(), "SEENAPI_ADDR=") // the flag wins anyway
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b := &binaryRun{cmd: cmd, log: &syncBuffer{}, read: make(chan struct{})}
	t.Cleanup(b.kill) // none outlives its test, whatever the test does
	url := make(chan string, 1)
	go func() {
		defer close(b.read)
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`url=(http://\S+)`)
		for sc.Scan() {
			b.log.Write(append(sc.Bytes(), '\n'))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				url <- m[1]
			}
		}
	}()
	select {
	case b.url = <-url:
		return b
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no url logged: %s", b.log.String())
	}
	return nil
}

// kill ends the binary as a crash would (kill -9) and waits for it; once
// it has ended, kill does nothing.
func (b *binaryRun) kill() {
	b.cmd.Process.Kill()
	<-b.read
	b.cmd.Wait()
}

// A second SIGINT during a graceful stop (here a long --drain-delay) ends
// the process at once, as an operator pressing Ctrl-C twice expects, and
// loses nothing acknowledged: the next start replays the journal.
func TestASecondSignalStopsAtOnce(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	b := startBinary(t, bin, "--data-dir", dir, "--flush-interval", "1h", "--drain-delay", "1m")
	if status, m := post(t, b.url+"/v1/namespaces/default/users/u/seen", `{"items":["a"]}`); status != 200 {
		b.cmd.Process.Kill()
		t.Fatalf("%d %v", status, m)
	}
	if err := b.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(b.log.String(), "seenapi: draining"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.cmd.Process.Kill()
			t.Fatalf("no shutdown after SIGINT:\n%s", b.log.String())
		}
	}
	if err := b.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		<-b.read
		done <- b.cmd.Wait()
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		b.cmd.Process.Kill()
		t.Fatalf("still running 20 s after a second SIGINT, in a drain of a minute:\n%s", b.log.String())
	}
	after := startBinary(t, bin, "--data-dir", dir)
	defer func() { after.cmd.Process.Signal(syscall.SIGTERM); after.cmd.Wait() }()
	if status, m := post(t, after.url+"/v1/namespaces/default/users/u/check", `{"items":["a","b"]}`); status != 200 || fmt.Sprint(m["seen"]) != "[true false]" {
		t.Fatalf("after the second signal and a restart: %d %v", status, m)
	}
}

// secondSignalChild, set in the environment, makes the test binary run
// secondSignalRightAfterTheFirst instead of the tests.
const secondSignalChild = "SEENAPI_TEST_SECOND_SIGNAL_CHILD"

// secondSignalRightAfterTheFirst sends itself a SIGINT, and a second one
// as soon as the stop begins (what serve's "draining" line tells an
// operator), with the signals' unregistering slowed down. It exits 0 only
// if it outlives the second.
func secondSignalRightAfterTheFirst() {
	beforeUnregister = func() { time.Sleep(time.Second) }
	ctx := stopSignals()
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	<-ctx.Done()
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	time.Sleep(10 * time.Second) // the default action ends it long before
	fmt.Println("still running 10 s after the second SIGINT")
	os.Exit(0)
}

// A second signal sent the instant the first one's stop begins ends the
// process, however late the signals' unregistering runs: nothing tells of
// the stop before a second signal would end it.
func TestASecondSignalRightAfterTheFirstStopsAtOnce(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), secondSignalChild+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the second SIGINT, sent as the stop began, did not end the process (%v):\n%s", err, out)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Fatalf("not ended by the second SIGINT (%v):\n%s", err, out)
	}
}

func TestBinaryShutsDownGracefullyOnSIGTERM(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	start := func() (*exec.Cmd, string, *syncBuffer, chan struct{}) {
		b := startBinary(t, bin, "--data-dir", dir, "--flush-interval", "1h")
		return b.cmd, b.url, b.log, b.read
	}
	cmd, url, log, read := start()
	if status, m := post(t, url+"/v1/namespaces/default/users/u/filter", `{"candidates":["a","b"]}`); status != 200 {
		t.Fatalf("%d %v", status, m)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		<-read
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, log.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no exit after SIGTERM: %s", log.String())
	}
	if !strings.Contains(log.String(), "written back") {
		t.Errorf("shutdown log: %s", log.String())
	}
	// Every user written back, the journal is left empty: nothing to
	// replay at the next start, nothing a rollback would misread.
	if segs, _ := filepath.Glob(filepath.Join(dir, "journal", "*.wal")); len(segs) != 0 {
		t.Errorf("journal segments after a clean stop: %v", segs)
	}
	cmd, url, _, read = start()
	status, m := post(t, url+"/v1/namespaces/default/users/u/check", `{"items":["a","b","c"]}`)
	if status != 200 || fmt.Sprint(m["seen"]) != "[true true false]" {
		cmd.Process.Kill()
		t.Fatalf("after restart: %d %v", status, m)
	}
	// A crash (kill -9) with a call only journaled (--flush-interval 1h):
	// the next start folds that user's journal in and says so.
	if status, m := post(t, url+"/v1/namespaces/default/users/v/seen", `{"items":["x"]}`); status != 200 {
		cmd.Process.Kill()
		t.Fatalf("%d %v", status, m)
	}
	cmd.Process.Kill()
	<-read
	cmd.Wait()
	cmd, url, log, _ = start()
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	if status, m := post(t, url+"/v1/namespaces/default/users/v/check", `{"items":["x"]}`); status != 200 || fmt.Sprint(m["seen"]) != "[true]" {
		t.Fatalf("after kill -9: %d %v", status, m)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), `msg="seenapi: folded in the journal left by a crash" users=1`) {
		if time.Now().After(deadline) {
			t.Fatalf("no line about the journal folded in after kill -9:\n%s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want gcPolicy
		bad  bool
	}{
		{want: gcPolicy{auto: true, set: true}},
		{args: []string{"--gc-percent", "80"}, want: gcPolicy{fixed: 80, set: true}},
		{env: map[string]string{"SEENAPI_GC_PERCENT": "25"}, want: gcPolicy{fixed: 25, set: true}},
		{args: []string{"--gc-percent", "off"}, want: gcPolicy{fixed: -1, set: true}},
		{args: []string{"--gc-percent", "80"}, env: map[string]string{"GOGC": "200"}}, // the runtime's own
		{args: []string{"--gc-percent", "0"}, bad: true},
		{args: []string{"--gc-percent", "lots"}, bad: true},
		{args: []string{"--gc-percent", "-3"}, env: map[string]string{"GOGC": "200"}, bad: true}, // a typo is refused all the same
		// The most the Go runtime takes, and past it, what it would wrap
		// to a negative (no collection) or to 100.
		{args: []string{"--gc-percent", "2147483647"}, want: gcPolicy{fixed: math.MaxInt32, set: true}},
		{args: []string{"--gc-percent", "2147483648"}, bad: true},
		{env: map[string]string{"SEENAPI_GC_PERCENT": "4294967396"}, bad: true},
	} {
		o := &options{}
		env := mapEnv(tc.env)
		// A value that is no percentage is refused with the flags.
		var got gcPolicy
		err := parseFlags(newFlagSet("serve", o, io.Discard), tc.args, env)
		if err == nil {
			got, err = gcPercent(o, env)
		}
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("%v %v: %+v, %v; want %+v (error %v)", tc.args, tc.env, got, err, tc.want, tc.bad)
		}
	}
}

// TestAutoGCFollowsTheHotSetsFill runs a real hot set into its budget and
// back: the collector's percentage is 50 while it fills, 100 once it is
// full, and 50 again after it is emptied.
func TestAutoGCFollowsTheHotSetsFill(t *testing.T) {
	store, err := storage.Open(storage.DefaultOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ns, err := loadNamespaces("")
	if err != nil {
		t.Fatal(err)
	}
	hot, err := eviction.New(store, ns, eviction.Options{CacheBytes: 200 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer hot.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	set := make(chan int, 16)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		tuneGC(gcPolicy{auto: true, set: true}, hot, 5*time.Millisecond, stop, func(p int) int { set <- p; return 0 }, quiet)
		close(done)
	}()
	next := func() int {
		select {
		case p := <-set:
			return p
		case <-time.After(10 * time.Second):
			t.Fatal("no change of the collector's percentage")
			return 0
		}
	}
	if p := next(); p != gcPercentFilling {
		t.Fatalf("filling: %d, want %d", p, gcPercentFilling)
	}
	items := make([]string, 50)
	for i := range items {
		items[i] = fmt.Sprint("item-", i)
	}
	users := 0
	for ; ; users++ {
		if b, budget := hot.Usage(); b >= budget/10*9 {
			break
		}
		if _, err := hot.Filter("default", fmt.Sprint("user-", users), items, 50, userfilter.RecordAll); err != nil {
			t.Fatal(err)
		}
	}
	if p := next(); p != gcPercentFull {
		t.Fatalf("full after %d users: %d, want %d", users, p, gcPercentFull)
	}
	for u := range users {
		if err := hot.Forget("default", fmt.Sprint("user-", u)); err != nil {
			t.Fatal(err)
		}
	}
	if p := next(); p != gcPercentFilling {
		t.Fatalf("emptied: %d, want %d", p, gcPercentFilling)
	}
	close(stop)
	<-done
	fixed := make([]int, 0, 1)
	tuneGC(gcPolicy{fixed: 80, set: true}, hot, time.Millisecond, stop, func(p int) int { fixed = append(fixed, p); return 0 }, quiet)
	tuneGC(gcPolicy{}, hot, time.Millisecond, stop, func(p int) int { fixed = append(fixed, p); return 0 }, quiet)
	if !slices.Equal(fixed, []int{80}) {
		t.Fatalf("fixed and runtime's own: set %v, want [80]", fixed)
	}
}

func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		flag, env string
		want      int64
		bad       bool
	}{
		{flag: "auto", want: 2<<30 + 768<<20},
		{flag: "off", want: 0},
		{flag: "3GiB", want: 3 << 30},
		{flag: "auto", env: "2GiB", want: 0}, // GOMEMLIMIT is the runtime's own
		{flag: "lots", bad: true},
		{flag: "10", bad: true},
		{flag: "1GiB", bad: true}, // not even the hot set's budget
		{flag: "1071MiB", bad: true},
		{flag: "1072MiB", want: 1<<30 + 48<<20}, // the budget and Badger's memtables
	} {
		o := &options{cacheBytes: 1 << 30, memoryLimit: tc.flag}
		got, err := memoryLimit(o, mapEnv(map[string]string{"GOMEMLIMIT": tc.env}))
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("--memory-limit %q GOMEMLIMIT %q: %d, %v; want %d (error %v)", tc.flag, tc.env, got, err, tc.want, tc.bad)
		}
	}
}

// SIGHUP reloads the keys file: a rotated key works at once and the
// replaced one is refused; a keys file that no longer loads leaves the
// keys as they were.
func TestSIGHUPReloadsTheKeys(t *testing.T) {
	const oldKey, newKey = "w-old-0123456789abcdef", "w-new-0123456789abcdef"
	keys := filepath.Join(t.TempDir(), "keys")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(keys, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("write:" + oldKey + "\n")
	s := startService(t, nil, "--data-dir", t.TempDir(), "--keys-file", keys)
	status := func(key string) int {
		t.Helper()
		code, _ := post(t, s.url+"/v1/namespaces/default/users/u/seen", `{"items":["a"]}`, "Authorization", "Bearer "+key)
		return code
	}
	hup := func(want string) { t.Helper(); hupUntilLogged(t, s, want) }
	if got := status(oldKey); got != 200 {
		t.Fatalf("the first key: %d", got)
	}
	// The log names the keys added and removed by their ids, so that an
	// operator sees the rotation took.
	oldID, newID := api.Key{Secret: oldKey}.ID(), api.Key{Secret: newKey}.ID()
	write("# rotated\nwrite:" + newKey + "\n")
	hup(`msg="seenapi: SIGHUP: API keys reloaded" keys=1 added=` + newID + " removed=" + oldID + "\n")
	if replaced, rotated := status(oldKey), status(newKey); replaced != 401 || rotated != 200 {
		t.Fatalf("after the reload: the replaced key %d (want 401), the new one %d (want 200)", replaced, rotated)
	}
	write("# emptied by mistake\n")
	hup("the old ones stay")
	if got := status(newKey); got != 200 {
		t.Fatalf("after a reload that failed: %d", got)
	}
	// Reloaded keys limited to namespaces: to those only, and one that is
	// not served is warned about, by the key's id.
	write("write:" + newKey + " namespaces=default\nread:r-0123456789abcdef namespaces=default,fed\n")
	hup(`level=WARN msg="seenapi: SIGHUP: an API key is limited to a namespace that is not served" key=` +
		api.Key{Secret: "r-0123456789abcdef"}.ID() + " namespace=fed")
	readID := api.Key{Secret: "r-0123456789abcdef"}.ID()
	if want := `msg="seenapi: SIGHUP: API keys reloaded" keys=2 added=` + readID + " changed=" + newID + "\n"; !strings.Contains(s.out.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, s.out.String())
	}
	if got := status(newKey); got != 200 {
		t.Fatalf("the key limited to default, in default: %d", got)
	}
	if code, _ := post(t, s.url+"/v1/namespaces/other/users/u/seen", `{"items":["a"]}`, "Authorization", "Bearer "+newKey); code != 403 {
		t.Fatalf("the key limited to default, in another namespace: %d", code)
	}
	// A keys file others can read, as an editor or a copy may leave it, is
	// warned of at a reload as at the start.
	if err := os.Chmod(keys, 0o644); err != nil {
		t.Fatal(err)
	}
	hup(`level=WARN msg="seenapi: SIGHUP: the keys file can be read by other users of this machine; chmod 600 it" file=` + keys + " mode=-rw-r--r--\n")
}

// SIGHUP reloads the namespaces file: a namespace added to it is served at
// once and a changed profile is what /v1/namespaces says; a file that no
// longer loads leaves the namespaces as they were, and a namespace left out
// is no longer served, with a warning that says so.
func TestSIGHUPReloadsTheNamespaces(t *testing.T) {
	file := filepath.Join(t.TempDir(), "namespaces.yaml")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("feed:\n  window: 7d\n")
	s := startService(t, nil, "--data-dir", t.TempDir(), "--namespaces", file)
	call := func(ns string) int {
		t.Helper()
		code, _ := post(t, s.url+"/v1/namespaces/"+ns+"/users/u/filter", `{"candidates":["a","b"],"limit":1}`)
		return code
	}
	profile := func(ns string) map[string]any {
		t.Helper()
		resp, err := http.Get(s.url + "/v1/namespaces/" + ns)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /v1/namespaces/%s: %d %v", ns, resp.StatusCode, err)
		}
		return m
	}
	hup := func(want string) { t.Helper(); hupUntilLogged(t, s, want) }
	if feed, email := call("feed"), call("email"); feed != 200 || email != 404 {
		t.Fatalf("before the reload: feed %d (want 200), email %d (want 404)", feed, email)
	}

	write("feed:\n  window: 1d\nemail:\n  fp_rate: 0.001\n")
	hup(`msg="seenapi: SIGHUP: namespaces reloaded" namespaces=3 added=email changed=feed`)
	if feed, email := call("feed"), call("email"); feed != 200 || email != 200 {
		t.Fatalf("after the reload: feed %d, email %d (want 200)", feed, email)
	}
	if w, fp := profile("feed")["window"], profile("email")["fp_rate"]; fmt.Sprint(w, " ", fp) != "86400 0.001" {
		t.Fatalf("after the reload: feed's window %v, email's fp_rate %v", w, fp)
	}

	write("email: [\n")
	hup("the namespaces were not reloaded; the old ones stay")
	if got := call("email"); got != 200 {
		t.Fatalf("after a reload that failed: email %d", got)
	}

	write("feed:\n  window: 1d\n")
	hup(`msg="seenapi: SIGHUP: namespaces reloaded" namespaces=2 removed=email`)
	if got := call("email"); got != 404 {
		t.Fatalf("email, left out of the file: %d (want 404)", got)
	}
	if log := s.out.String(); !strings.Contains(log, `are not served from now on`) || !strings.Contains(log, `removed=email`) {
		t.Fatalf("no warning names the namespace removed:\n%s", log)
	}

	write("feed:\n  window: 1d\nemail:\n  fp_rate: 0.001\n")
	hup(`msg="seenapi: SIGHUP: namespaces reloaded" namespaces=3 added=email`)
	if got := call("email"); got != 200 {
		t.Fatalf("email, back in the file: %d (want 200)", got)
	}
}

// A SIGHUP that takes a namespace out warns of the keys limited to it
// even when the keys file does not load meanwhile: the keys in force are
// still limited to it.
func TestSIGHUPWarnsOfKeysLimitedToANamespaceTakenOutWhenTheKeysDoNotLoad(t *testing.T) {
	dir := t.TempDir()
	const pushKey = "w-push-0123456789abcdef"
	keys := writeFile(t, dir, "keys", "write:"+pushKey+" namespaces=push\nadmin:a-0123456789abcdef\n")
	file := writeFile(t, dir, "namespaces.yaml", "push:\n  window: 7d\n")
	s := startService(t, nil, "--data-dir", t.TempDir(), "--keys-file", keys, "--namespaces", file)
	writeFile(t, dir, "keys", "write:short\n")
	writeFile(t, dir, "namespaces.yaml", "feed:\n  window: 7d\n")
	hupUntilLogged(t, s, `msg="seenapi: SIGHUP: namespaces reloaded" namespaces=2 added=feed removed=push`)
	want := `level=WARN msg="seenapi: SIGHUP: an API key is limited to a namespace that is not served" key=` +
		api.Key{Secret: pushKey}.ID() + " namespace=push\n"
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(s.out.String(), want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q logged after SIGHUP:\n%s", want, s.out.String())
		}
	}
	if !strings.Contains(s.out.String(), "the API keys were not reloaded; the old ones stay") {
		t.Fatalf("the keys file that does not load is not said to:\n%s", s.out.String())
	}
}

// manyNamespaces is a namespaces file's text naming n namespaces, n0 on.
func manyNamespaces(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "n%d:\n  window: 7d\n", i)
	}
	return b.String()
}

// A namespaces file naming more namespaces than the service can serve is
// refused as it is read, naming the file and the limit, before the store
// is opened; a SIGHUP that reads such a file keeps the namespaces served.
func TestNamespacesFileOfTooManyNamespacesIsRefusedByName(t *testing.T) {
	dir := t.TempDir()
	// With "default", 257 namespaces.
	file := writeFile(t, dir, "namespaces.yaml", manyNamespaces(eviction.MaxNamespaces))
	data := filepath.Join(dir, "data")
	out := failedStart(t, "--data-dir", data, "--namespaces", file)
	want := file + `: 257 namespaces, counting \"default\" (always served): at most 256 can be served`
	if !strings.Contains(out, want) || strings.Contains(out, "opening the store") {
		t.Fatalf("want a failure before the store opens saying %q:\n%s", want, out)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused file let the data directory be made (%v)", err)
	}
	// 255 besides "default" are served.
	if err := os.WriteFile(file, []byte(manyNamespaces(eviction.MaxNamespaces-1)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startService(t, nil, "--data-dir", data, "--namespaces", file)
	call := func(ns string) int {
		t.Helper()
		code, _ := post(t, s.url+"/v1/namespaces/"+ns+"/users/u/filter", `{"candidates":["a"]}`)
		return code
	}
	if got := call("n254"); got != 200 {
		t.Fatalf("n254 of 256 namespaces: %d, want 200", got)
	}
	if err := os.WriteFile(file, []byte("feed:\n  window: 7d\n"+manyNamespaces(eviction.MaxNamespaces)), 0o600); err != nil {
		t.Fatal(err)
	}
	hupUntilLogged(t, s, "the namespaces were not reloaded; the old ones stay")
	if !strings.Contains(s.out.String(), file+`: 258 namespaces, counting \"default\" (always served): at most 256 can be served`) {
		t.Fatalf("the SIGHUP's error names neither the file nor the limit:\n%s", s.out.String())
	}
	if n254, feed := call("n254"), call("feed"); n254 != 200 || feed != 404 {
		t.Fatalf("after the refused reload: n254 %d (want 200), feed %d (want 404)", n254, feed)
	}
}

// hupUntilLogged sends this process (the in-process service s) SIGHUP and
// waits until s logs want once more.
func hupUntilLogged(t *testing.T, s *service, want string) {
	t.Helper()
	before := strings.Count(s.out.String(), want)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); strings.Count(s.out.String(), want) == before; {
		if time.Now().After(deadline) {
			t.Fatalf("no %q logged after SIGHUP:\n%s", want, s.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A SIGHUP to a service started without keys, namespaces file or
// certificate has nothing to reload: one warning says so, that it stays
// open and how to require keys, and no error.
func TestSIGHUPToAnOpenServiceWarnsItStaysOpen(t *testing.T) {
	s := startService(t, nil, "--data-dir", t.TempDir())
	const want = `level=WARN msg="seenapi: SIGHUP: nothing to reload: the service was started without API keys, namespaces file or TLS certificate, ` +
		`and stays open; to require keys, restart it with --keys-file or SEENAPI_KEYS"`
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(s.out.String(), `msg="seenapi: SIGHUP`); {
		if time.Now().After(deadline) {
			t.Fatalf("nothing logged after SIGHUP:\n%s", s.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, m := post(t, s.url+"/v1/namespaces/default/users/u/seen", `{"items":["a"]}`); code != 200 {
		t.Fatalf("after SIGHUP, the open service answered %d %v", code, m)
	}
	log := s.out.String()
	if strings.Count(log, `msg="seenapi: SIGHUP`) != 1 || !strings.Contains(log, want) || strings.Contains(log, "level=ERROR") {
		t.Errorf("after SIGHUP, want the one line %s and no error:\n%s", want, log)
	}
}

// Each SIGHUP to the binary is counted in /metrics by its outcome, a
// reload failed by a keys file or a namespaces file that does not load as
// well, with the time of the last that loaded whole (the start's until
// one) and whether the last one did, for an alert to find what the log
// alone says.
func TestSIGHUPOutcomesAreInTheMetrics(t *testing.T) {
	dir := t.TempDir()
	const key = "r-0123456789abcdef"
	keys := writeFile(t, dir, "keys", "read:"+key+"\n")
	nss := writeFile(t, dir, "namespaces.yaml", "feed:\n  window: 7d\n")
	b := startBinary(t, buildBinary(t), "--data-dir", t.TempDir(), "--keys-file", keys, "--namespaces", nss)
	defer func() { b.cmd.Process.Signal(syscall.SIGTERM); <-b.read; b.cmd.Wait() }()
	metrics := func() (ok, failed, last, successful float64) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, b.url+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		values := map[string]float64{}
		for line := range strings.Lines(string(body)) {
			if name, v, found := strings.Cut(strings.TrimSpace(line), " "); found && strings.HasPrefix(name, "seenapi_config_") {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				values[name] = f
			}
		}
		if len(values) != 4 {
			t.Fatalf("/metrics (%d) has %v of the reloads' 4 series:\n%s", resp.StatusCode, values, body)
		}
		return values[`seenapi_config_reloads_total{result="ok"}`], values[`seenapi_config_reloads_total{result="failed"}`],
			values["seenapi_config_last_reload_success_timestamp_seconds"], values["seenapi_config_last_reload_successful"]
	}
	// hup sends SIGHUP and returns the figures once the reload is counted.
	hup := func() (ok, failed, last, successful float64) {
		t.Helper()
		ok0, failed0, _, _ := metrics()
		if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if ok, failed, last, successful = metrics(); ok+failed > ok0+failed0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no reload counted after SIGHUP:\n%s", b.log.String())
			}
		}
	}
	ok, failed, started, successful := metrics()
	if now := float64(time.Now().Unix()); ok != 0 || failed != 0 || successful != 1 || started < now-60 || started > now+1 {
		t.Fatalf("at the start: %v ok, %v failed, last loaded at %v (now %v), successful %v; want 0, 0, the start, 1", ok, failed, started, now, successful)
	}
	writeFile(t, dir, "namespaces.yaml", "feed: [\n")
	if ok, failed, last, successful := hup(); ok != 0 || failed != 1 || last != started || successful != 0 {
		t.Fatalf("after a namespaces file that does not load: %v ok, %v failed, last loaded at %v, successful %v; want 0, 1, %v, 0", ok, failed, last, successful, started)
	}
	writeFile(t, dir, "namespaces.yaml", "feed:\n  window: 1d\n")
	time.Sleep(10 * time.Millisecond) // the timestamp's resolution is finer: a later one shows
	ok, failed, reloaded, successful := hup()
	if ok != 1 || failed != 1 || reloaded <= started || successful != 1 {
		t.Fatalf("after a reload that loaded: %v ok, %v failed, last loaded at %v, successful %v; want 1, 1, after %v, 1", ok, failed, reloaded, successful, started)
	}
	writeFile(t, dir, "keys", "read:short\n")
	if ok, failed, last, successful := hup(); ok != 1 || failed != 2 || last != reloaded || successful != 0 {
		t.Fatalf("after a keys file that does not load: %v ok, %v failed, last loaded at %v, successful %v; want 1, 2, %v, 0", ok, failed, last, successful, reloaded)
	}
	if !strings.Contains(b.log.String(), "the API keys were not reloaded; the old ones stay") {
		t.Fatalf("the failed reload of the keys is not logged:\n%s", b.log.String())
	}
}

// A SIGHUP to an open service with a namespaces file is sent for the
// namespaces: it reloads them and says nothing of keys, which the service
// was never given.
func TestSIGHUPToAnOpenServiceSaysNothingOfKeys(t *testing.T) {
	file := writeFile(t, t.TempDir(), "namespaces.yaml", "feed:\n  window: 7d\n")
	s := startService(t, nil, "--data-dir", t.TempDir(), "--namespaces", file)
	hupUntilLogged(t, s, `msg="seenapi: SIGHUP: namespaces reloaded" namespaces=2`)
	for line := range strings.Lines(s.out.String()) {
		if strings.Contains(line, `msg="seenapi: SIGHUP`) && (strings.Contains(line, "keys") || !strings.Contains(line, "level=INFO")) {
			t.Errorf("a SIGHUP for the namespaces of an open service logged %s", line)
		}
	}
}

// SIGHUPs all through the start (the store opening, the hot set set up,
// before the keys can be reloaded) leave the service running. They begin
// at its first log line: before its main runs, a process cannot have
// asked for anything.
func TestSIGHUPWhileStartingIsHarmless(t *testing.T) {
	bin := buildBinary(t)
	cmd := exec.Command(bin, "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--min-free-bytes", "-1")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	url, first := make(chan string, 1), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`url=(http://\S+)`)
		for n := 0; sc.Scan(); n++ {
			if n == 0 {
				close(first)
			}
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				url <- m[1]
			}
		}
		close(url)
	}()
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("nothing logged")
	}
	var u string
	for deadline := time.Now().Add(30 * time.Second); u == ""; {
		cmd.Process.Signal(syscall.SIGHUP)
		select {
		case got, ok := <-url:
			if !ok {
				t.Fatalf("the service ended while starting: %v", cmd.Wait())
			}
			u = got
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no url logged")
		}
	}
	cmd.Process.Signal(syscall.SIGHUP) // serving: an open service logs that it has nothing to reload
	resp, err := http.Get(u + "/healthz")
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("after SIGHUPs: %v", err)
	}
	resp.Body.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// A restart without a namespace whose users are stored says so in the
// log, naming it; the namespace is erased through the API, and the next
// start says nothing.
func TestStartNamesTheNamespacesStoredAndNotServed(t *testing.T) {
	dir, file := t.TempDir(), filepath.Join(t.TempDir(), "namespaces.yaml")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const warning = "namespaces that are not served"
	write("feed: {}\npush: {}\n")
	s := startService(t, nil, "--data-dir", dir, "--namespaces", file)
	for _, ns := range []string{"feed", "push"} {
		if code, _ := post(t, s.url+"/v1/namespaces/"+ns+"/users/u/filter", `{"candidates":["a"]}`); code != 200 {
			t.Fatalf("%s: %d", ns, code)
		}
	}
	if code := s.shutdown(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	write("feed: {}\n")
	s = startService(t, nil, "--data-dir", dir, "--namespaces", file)
	want := `not_served=push`
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(s.out.String(), want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q logged at the start:\n%s", want, s.out.String())
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, s.url+"/v1/namespaces/push", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || got["users_erased"] != float64(1) {
		t.Fatalf("DELETE /v1/namespaces/push: %d %v %v", resp.StatusCode, got, err)
	}
	if code := s.shutdown(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	s = startService(t, nil, "--data-dir", dir, "--namespaces", file)
	if code, _ := post(t, s.url+"/v1/namespaces/feed/users/u/filter", `{"candidates":["a"]}`); code != 200 {
		t.Fatalf("feed after the purge: %d", code)
	}
	if strings.Contains(s.out.String(), warning) {
		t.Fatalf("a start after the purge warns:\n%s", s.out.String())
	}
}

// Settings that work but were met as mistakes are named at start: a
// free-space minimum under what the store takes at once, a cache budget
// over the machine's memory, a keys file others can read. Sane ones are
// not.
func TestRiskySettingsAreWarnedOfAtStart(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("admin:a-0123456789abcdef\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keys, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	s := startService(t, nil, "--data-dir", t.TempDir(), "--keys-file", keys, "--min-free-bytes", "4MiB")
	s.shutdown()
	for _, want := range []string{"--min-free-bytes is under what the store may take at once", "the keys file can be read by other users"} {
		if !strings.Contains(s.out.String(), want) {
			t.Errorf("no warning %q:\n%s", want, s.out.String())
		}
	}
	if total := totalMemory(); total > 0 {
		s := startService(t, nil, "--data-dir", t.TempDir(), "--cache-bytes", fmt.Sprint(2*total), "--memory-limit", "off")
		s.shutdown()
		if !strings.Contains(s.out.String(), "--cache-bytes is more than this machine's memory") {
			t.Errorf("no warning of a budget twice the machine's memory:\n%s", s.out.String())
		}
		// Within the memory, but --memory-limit auto past it: the budget
		// and Badger's heap are more than the memory.
		s = startService(t, nil, "--data-dir", t.TempDir(), "--cache-bytes", fmt.Sprint(total-40<<20))
		s.shutdown()
		if out := s.out.String(); !strings.Contains(out, "the Go heap's soft limit (--memory-limit) is more than this machine's memory") ||
			strings.Contains(out, "--cache-bytes is more than") {
			t.Errorf("no warning (or the budget's) of a heap limit past the memory, with a budget 40 MiB under it:\n%s", out)
		}
	}
	if err := os.Chmod(keys, 0o600); err != nil {
		t.Fatal(err)
	}
	s = startService(t, nil, "--data-dir", t.TempDir(), "--keys-file", keys)
	s.shutdown()
	if strings.Contains(s.out.String(), "level=WARN") {
		t.Errorf("warnings with sane settings:\n%s", s.out.String())
	}
}

// The README's configuration table and seenapi --help agree: every flag
// of serve has a row naming it, its environment variable and its default
// as the help gives it ("none" for an empty one, or, for a default the
// help words in its usage, the same first words); every row is a flag; and
// the variables the table names are those the help names, SEENAPI_KEYS,
// which no flag reads, among them.
func TestREADMEConfigurationTableMatchesTheFlags(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| (`--[a-z-]+`(?:, `--[a-z-]+`)*) \\| (`SEENAPI_[A-Z_]+`(?:, `SEENAPI_[A-Z_]+`)*) \\| ([^|]+) \\|")
	type doc struct{ env, def string }
	rows := map[string]doc{}
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		names, envs := strings.Split(m[1], ", "), strings.Split(m[2], ", ")
		for i, n := range names {
			rows[strings.Trim(n, "`")] = doc{strings.Trim(envs[min(i, len(envs)-1)], "`"), strings.TrimSpace(m[3])}
		}
	}
	var o options
	seen := map[string]bool{}
	newFlagSet("serve", &o, io.Discard).VisitAll(func(f *flag.Flag) {
		name := "--" + f.Name
		seen[name] = true
		d, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("the README's configuration table has no row for %s", name)
		case d.env != envName(f.Name):
			t.Errorf("%s: the README names %s, the flag reads %s", name, d.env, envName(f.Name))
		case d.def == "none" && f.DefValue != "":
			t.Errorf("%s: the README says no default, the help %q", name, f.DefValue)
		case strings.HasPrefix(d.def, "`") && strings.Trim(d.def, "`") != f.DefValue:
			t.Errorf("%s: the README's default is %s, the help's %q", name, d.def, f.DefValue)
		case d.def != "none" && !strings.HasPrefix(d.def, "`"):
			// A default that depends on other flags is worded in the
			// usage, "(default 256MiB, or that if larger)": the README's
			// starts as the help's does.
			first, _, _ := strings.Cut(d.def, ",")
			if !regexp.MustCompile(`\(default:? ` + regexp.QuoteMeta(first) + `\b`).MatchString(f.Usage) {
				t.Errorf("%s: the README's default is %q, the help's usage %q", name, d.def, f.Usage)
			}
		}
	})
	for name := range rows {
		if !seen[name] {
			t.Errorf("the README's configuration table has a row for %s, which is no flag of serve", name)
		}
	}

	table := regexp.MustCompile(`(?ms)^## Configuration\n.*?^\| Flag \| Environment \|.*?\n\n`).Find(readme)
	var help bytes.Buffer
	usage(&help, newFlagSet("serve", &options{}, io.Discard), "serve")
	variables := regexp.MustCompile(`(?m)^\| [^|]+ \| ([^|]+) \|`)
	env := regexp.MustCompile(`SEENAPI_[A-Z_]+`)
	inTable := map[string]bool{}
	for _, m := range variables.FindAllSubmatch(table, -1) {
		for _, v := range env.FindAll(m[1], -1) {
			inTable[string(v)] = true
		}
	}
	inHelp := map[string]bool{}
	for _, v := range env.FindAll(help.Bytes(), -1) {
		inHelp[string(v)] = true
	}
	if len(inTable) == 0 {
		t.Fatal("found no configuration table in the README")
	}
	for v := range inHelp {
		if !inTable[v] {
			t.Errorf("seenapi --help names %s, which the README's configuration table does not", v)
		}
	}
	for v := range inTable {
		if !inHelp[v] {
			t.Errorf("the README's configuration table names %s, which seenapi --help does not", v)
		}
	}
}

// SEENAPI_KEYS or SEENAPI_KEYS_FILE set but empty is refused by check as
// by serve, goes unread by the commands that take no keys, and on a SIGHUP
// leaves the keys in place, logged.
func TestKeysSetButEmptyInEveryCommand(t *testing.T) {
	for _, env := range []map[string]string{{"SEENAPI_KEYS": ""}, {"SEENAPI_KEYS_FILE": ""}, {"SEENAPI_KEYS": " , "}} {
		code, out, logged := runCheck(t, env, "--data-dir", t.TempDir())
		if code == 0 || !strings.Contains(logged, "set but") || !strings.Contains(logged, "leave it unset") {
			t.Errorf("check with %v: exit %d, want a refusal naming the variable:\n%s%s", env, code, out, logged)
		}
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"new-key", "--role", "read"}, mapEnv(env), &stdout, &stderr, nil); code != 0 {
			t.Errorf("new-key with %v: exit %d: %s", env, code, stderr.String())
		}
		dir := t.TempDir()
		if st, err := storage.Open(storage.DefaultOptions(dir).WithMinFreeBytes(-1)); err != nil {
			t.Fatal(err)
		} else if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		backupFile := filepath.Join(t.TempDir(), "backup")
		for _, args := range [][]string{
			{"backup", "--data-dir", dir, "--out", backupFile},
			{"restore", "--data-dir", t.TempDir(), "--in", backupFile, "--min-free-bytes", "-1"},
		} {
			stdout.Reset()
			stderr.Reset()
			if code := run(context.Background(), args, mapEnv(env), &stdout, &stderr, nil); code != 0 {
				t.Errorf("%s with %v: exit %d: %s", args[0], env, code, stderr.String())
			}
		}

		const key = "write:w-old-0123456789abcdef"
		ks, err := api.ParseKeysList(key)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := api.New(nil, api.Config{Keys: ks})
		if err != nil {
			t.Fatal(err)
		}
		var log syncBuffer
		if got, ok := reloadKeys(&options{}, mapEnv(env), srv, nil, slog.New(slog.NewTextHandler(&log, nil))); got != nil || ok || srv.Open() ||
			!strings.Contains(log.String(), "the API keys were not reloaded; the old ones stay") || !strings.Contains(log.String(), "set but") {
			t.Errorf("SIGHUP with %v: reloaded %v, open %v; want the old key kept and the refusal logged:\n%s", env, got, srv.Open(), log.String())
		}
	}
}

// With --drain-delay, a SIGTERM first makes /readyz answer 503 while the
// service goes on taking connections and calls, for a load balancer to
// stop sending new ones; then it shuts down as without it.
func TestDrainDelayKeepsServingWhileNotReady(t *testing.T) {
	bin := buildBinary(t)
	run := startBinary(t, bin, "--data-dir", t.TempDir(), "--drain-delay", "8s", "--shutdown-timeout", "5s")
	if status, m := post(t, run.url+"/v1/namespaces/default/users/u/seen", `{"items":["a"]}`); status != 200 {
		t.Fatalf("before the signal: %d %v", status, m)
	}
	signalled := time.Now()
	run.cmd.Process.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(run.url + "/readyz")
		if err != nil {
			t.Fatalf("/readyz during the drain: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after the signal", resp.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A new connection, and a call on it, are served meanwhile.
	http.DefaultClient.CloseIdleConnections()
	if status, m := post(t, run.url+"/v1/namespaces/default/users/u/check", `{"items":["a"]}`); status != 200 || fmt.Sprint(m["seen"]) != "[true]" {
		t.Fatalf("a call during the drain: %d %v", status, m)
	}
	if !strings.Contains(run.log.String(), `msg="seenapi: draining: /readyz answers 503 while requests are still taken (--drain-delay); a second SIGINT or SIGTERM stops at once, the journal keeping every acknowledged change" drain_delay=8s`) {
		t.Errorf("no line about the drain:\n%s", run.log.String())
	}
	// Then it shuts down, cleanly, once the delay is over.
	<-run.read
	if err := run.cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, run.log.String())
	}
	if waited := time.Since(signalled); waited < 8*time.Second {
		t.Fatalf("exited %v after the signal, within the drain delay of 8s", waited)
	}
}

// The start says it is opening the store before it does, and when it is
// open: a large store takes seconds, in which the bound port answers
// nothing.
func TestStartSaysWhileTheStoreOpens(t *testing.T) {
	run := startBinary(t, buildBinary(t), "--data-dir", t.TempDir())
	log := run.log.String()
	opening := strings.Index(log, `msg="seenapi: opening the store; connections wait until it is open"`)
	open := strings.Index(log, `msg="seenapi: store open" took=`)
	serving := strings.Index(log, `msg="seenapi: serving"`)
	if opening < 0 || open < opening || serving < open {
		t.Fatalf("want the lines opening the store, store open, serving, in that order:\n%s", log)
	}
}
