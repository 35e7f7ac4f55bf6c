package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seenapi/seenapi/api"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// checkConfig is seenapi check: it reads what serve reads at its start and
// on a SIGHUP (the API keys, the namespaces file, the TLS certificate),
// checks them and the flags as serve does, and says what it found. It
// writes no store (it reads the namespaces of one the service does not
// have open) and listens nowhere, so it runs beside a serving service,
// before a SIGHUP or a restart: an error here is one the service would log
// and refuse.
func checkConfig(o *options, env environ, w io.Writer, now time.Time) error {
	conf, err := loadConfig(o, env)
	if err != nil {
		return err
	}
	ks, nss := conf.keys, conf.namespaces
	// What api.New and eviction.New refuse at the start.
	cfg := o.limits
	cfg.Keys = ks
	if err := cfg.WithDefaults().Validate(); err != nil {
		return err
	}
	if err := eviction.CheckNamespaces(nss); err != nil {
		return err
	}
	var until time.Time
	if conf.cert != nil {
		// A certificate past its date loads, and every client refuses it.
		if until = conf.cert.cur.Load().Leaf.NotAfter; !now.Before(until) {
			return fmt.Errorf("--tls-cert %s: the certificate expired at %s", o.tlsCert, until.UTC().Format(time.RFC3339))
		}
	}

	from := "built in"
	if o.namespacesFile != "" {
		from = o.namespacesFile
	}
	fmt.Fprintf(w, "namespaces (%s): %d\n", from, len(nss))
	for _, n := range nss {
		fmt.Fprintf(w, "  %s: %s\n", n.Name, profileLine(n.Profile.WithDefaults()))
	}
	fmt.Fprintln(w, keysLine(ks, o.addr))
	for _, k := range ks {
		fmt.Fprintf(w, "  key %s\n", keyLine(k, nss))
	}
	for _, u := range unservedScopes(ks, nss) {
		fmt.Fprintf(w, "warning: key %s is limited to the namespace %s, which is not served\n", u.key, api.ShownScope(u.ns))
	}
	notServedLine(w, o.dataDir, nss)
	if conf.cert != nil {
		left := until.Sub(now)
		in := fmt.Sprintf("%d hours", int(left.Hours()))
		if left >= 48*time.Hour {
			in = fmt.Sprintf("%d days", int(left.Hours()/24))
		}
		fmt.Fprintf(w, "tls: %s, valid until %s (%s from now)\n", o.tlsCert, until.UTC().Format(time.RFC3339), in)
	} else {
		fmt.Fprintln(w, "tls: none, plain HTTP")
	}
	// What serve would warn of at its start: settings it takes, but that
	// are likely mistakes, best seen before the restart.
	warnSettings(o, o.addr, len(ks) > 0, conf.cert != nil, slog.New(warningLines{w}))
	fmt.Fprintln(w, "seenapi check: the configuration loads")
	return nil
}

// warningLines is a slog.Handler that writes each record as a line of
// check's output: "warning: " and the message, then its attributes.
type warningLines struct{ w io.Writer }

func (warningLines) Enabled(context.Context, slog.Level) bool { return true }

func (h warningLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("warning: " + strings.TrimPrefix(r.Message, "seenapi: "))
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	b.WriteByte('\n')
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h warningLines) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h warningLines) WithGroup(string) slog.Handler      { return h }

// peekLimit is where notServedLine stops counting a namespace's users: a
// million keys take about a second to read.
const peekLimit = 1_000_000

// notServedLine says which namespaces hold users in the store of dataDir
// without being served by nss, as serve warns at its start: their data
// stays on disk unseen. It reads the store without writing to it; while
// the service has it open, it says so instead.
func notServedLine(w io.Writer, dataDir string, nss []eviction.Namespace) {
	served := func(ns string) bool {
		return slices.ContainsFunc(nss, func(n eviction.Namespace) bool { return n.Name == ns })
	}
	stored, err := storage.PeekNamespaces(storage.DefaultOptions(dataDir).WithLogger(slog.New(slog.DiscardHandler)), served, peekLimit, eviction.NoHistory())
	switch {
	case errors.Is(err, storage.ErrInUse):
		fmt.Fprintf(w, "store: --data-dir %s is in use (by the service, most likely%s) and was not read; "+
			"GET /v1/namespaces lists in not_served the namespaces it holds users of and does not serve\n", dataDir, servingAt(dataDir))
		return
	case errors.Is(err, storage.ErrNotClosed):
		fmt.Fprintf(w, "store: --data-dir %s was left open by a crash and was not read; the service's next start recovers it "+
			"and warns about the namespaces it holds users of and does not serve\n", dataDir)
		return
	case err != nil:
		fmt.Fprintf(w, "warning: the store in --data-dir %s does not read (%v); the namespaces it holds users of and does not serve are not known\n", dataDir, err)
		return
	case len(stored) == 0:
		return
	}
	names := make([]string, len(stored))
	for i, n := range stored {
		count := strconv.Itoa(n.Users)
		if n.AtLeast {
			count = "at least " + count
		}
		users := "users"
		if n.Users == 1 && !n.AtLeast {
			users = "user"
		}
		names[i] = fmt.Sprintf("%s (%s %s)", n.Namespace, count, users)
	}
	fmt.Fprintf(w, "warning: the store in %s holds users of namespaces that are not served (not in the namespaces file): %s; "+
		"they stay until the namespace is served again (put back in the file) or erased (DELETE /v1/namespaces/{ns}, role admin)\n",
		dataDir, strings.Join(names, ", "))
}

// profileLine says a profile in a line, in the namespaces file's words.
func profileLine(p userfilter.Profile) string {
	parts := []string{p.Kind.String(), "fp_rate " + strconv.FormatFloat(p.FPRate, 'g', -1, 64)}
	if p.Window > 0 {
		parts = append(parts, "window "+userfilter.FormatDuration(p.Window)+" in buckets of "+userfilter.FormatDuration(p.Granularity))
	} else {
		parts = append(parts, "no window")
	}
	if p.MaxItems > 0 {
		parts = append(parts, "max_items "+strconv.FormatUint(p.MaxItems, 10))
	} else {
		parts = append(parts, "no cap")
	}
	return strings.Join(parts, ", ")
}

// keysLine counts the keys by role, and those with a rate of their own.
func keysLine(ks []api.Key, addr string) string {
	if len(ks) == 0 {
		return "keys: none: the API is open to anyone who can reach " + addr
	}
	var by [api.RoleAdmin + 1]int
	own, limited := 0, 0
	for _, k := range ks {
		by[k.Role]++
		if k.Rate != 0 {
			own++
		}
		if k.Namespaces != nil {
			limited++
		}
	}
	var roles []string
	for r := api.RoleRead; r <= api.RoleAdmin; r++ {
		if by[r] > 0 {
			roles = append(roles, fmt.Sprintf("%d %s", by[r], r))
		}
	}
	line := fmt.Sprintf("keys: %d (%s)", len(ks), strings.Join(roles, ", "))
	if own > 0 {
		line += fmt.Sprintf("; %d with a rate of its own", own)
	}
	if limited > 0 {
		line += fmt.Sprintf("; %d limited to some namespaces", limited)
	}
	return line
}

// keyLine says a key in a line without the key: its id (as the log of
// admin actions names it), role, own rate and namespaces (those not served
// as api.ShownScope shows them).
func keyLine(k api.Key, served []eviction.Namespace) string {
	line := k.ID() + ": " + k.Role.String()
	switch {
	case math.IsInf(k.Rate, 1):
		line += ", no rate limit"
	case k.Rate > 0:
		line += ", rate " + strconv.FormatFloat(k.Rate, 'g', -1, 64) + "/s"
		if k.Burst > 0 {
			line += " burst " + strconv.Itoa(k.Burst)
		}
	}
	if k.Namespaces != nil {
		names := make([]string, len(k.Namespaces))
		for i, ns := range k.Namespaces {
			names[i] = ns
			if len(ns) >= api.MinKeyLength && !slices.ContainsFunc(served, func(n eviction.Namespace) bool { return n.Name == ns }) {
				names[i] = "(" + api.ShownScope(ns) + ")"
			}
		}
		line += ", namespaces " + strings.Join(names, ", ") + " only"
	}
	return line
}

// unservedScope is a namespace a key is limited to that is not served.
type unservedScope struct{ key, ns string }

// unservedScopes lists the namespaces keys are limited to that nss does not
// serve: most likely misspelt, leaving the key refused where it was meant
// to call.
func unservedScopes(ks []api.Key, nss []eviction.Namespace) []unservedScope {
	var out []unservedScope
	for _, k := range ks {
		for _, ns := range k.Namespaces {
			if !slices.ContainsFunc(nss, func(n eviction.Namespace) bool { return n.Name == ns }) {
				out = append(out, unservedScope{k.ID(), ns})
			}
		}
	}
	return out
}
