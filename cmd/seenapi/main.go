package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(stopSignals(), os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr, nil))
}

// beforeUnregister, if not nil, runs between a stop signal's arrival and
// the signals' unregistering (tests slow that step down).
var beforeUnregister func()

// stopSignals is a context that ends on the first SIGTERM or SIGINT. The
// first signal begins a graceful stop; a second ends the process at once
// (the signal's default action), instead of being swallowed while the stop
// writes back: the journal keeps every acknowledged change, as after a
// crash. The context ends only once the signals are unregistered: ended
// first (as signal.NotifyContext's does), the stop could log "draining"
// while a second signal was still caught and dropped.
func stopSignals() context.Context {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		s := <-sig
		if beforeUnregister != nil {
			beforeUnregister()
		}
		signal.Stop(sig)
		cancel(fmt.Errorf("%v signal received", s))
	}()
	return ctx
}

// environ looks up an environment variable, telling set from unset
// (os.LookupEnv; a map in tests): SEENAPI_KEYS set but empty is a secret
// that did not render, not a request to serve without keys.
type environ func(string) (string, bool)

// get is the variable's value, "" when unset.
func (e environ) get(k string) string { v, _ := e(k); return v }

// run runs the subcommand in args and returns the exit code. onListen, if
// not nil, is told the serving address (tests listen on port 0).
func run(ctx context.Context, args []string, env environ, stdout, stderr io.Writer, onListen func(string)) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") { // else serve's flags
		cmd, args = args[0], args[1:]
	} else if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		cmd, args = "version", args[1:]
	}
	if cmd == "serve" {
		// SIGHUP reloads the keys once serving (see serve); until then, and
		// while shutting down, its default action would end the service.
		signal.Ignore(syscall.SIGHUP)
	}
	switch cmd {
	case "serve", "check", "backup", "restore", "import-redis", "new-key":
	case "version":
		// It takes no flags: asked for help, the help; anything else is a
		// usage error rather than ignored.
		if len(args) > 0 {
			if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
				usage(stdout, nil, cmd)
				return 0
			}
			fmt.Fprintf(stderr, "seenapi %s: unexpected arguments: %q\nRun 'seenapi help %s' for its flags.\n", cmd, args, cmd)
			return 2
		}
		fmt.Fprintln(stdout, version())
		return 0
	case "help":
		topic := "serve" // whose help lists the commands
		if len(args) > 0 && args[0] != "help" {
			topic = args[0]
		}
		if !slices.Contains(commands, topic) {
			return unknownCommand(stderr, topic)
		}
		var fs *flag.FlagSet
		if topic != "version" {
			fs = newFlagSet(topic, &options{}, io.Discard)
		}
		usage(stdout, fs, topic)
		return 0
	default:
		return unknownCommand(stderr, cmd)
	}
	var o options
	// The flag package writes its messages and the help to flagOut. Asked
	// for (--help, -h), the help goes to stdout. After a bad flag, the error
	// alone and where the help is: the whole help would scroll it away.
	var flagOut bytes.Buffer
	fs := newFlagSet(cmd, &o, &flagOut)
	given, fromEnv, err := parseFlagsFrom(fs, args, env)
	o.given, o.fromEnv = given, fromEnv
	if err == nil {
		err = o.check(cmd, env)
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			stdout.Write(flagOut.Bytes())
			return 0
		}
		fmt.Fprintf(stderr, "seenapi %s: %v\nRun 'seenapi help %s' for its flags.\n", cmd, err, cmd)
		return 2
	}
	logger := newLogger(stderr, o.logFormat, o.logLevel)
	switch cmd {
	case "serve":
		if err = serve(ctx, &o, env, logger, onListen); err == nil {
			logger.Info("seenapi: stopped; every change is written back")
		}
	case "backup":
		if o.url != "" {
			err = backupFromService(ctx, o.url, o.key, o.caCert, o.out, o.skipDamaged, logger)
		} else {
			err = backup(ctx, &o, logger)
		}
	case "check":
		err = checkConfig(&o, env, stdout, time.Now())
	case "restore":
		err = restore(ctx, &o, logger)
	case "import-redis":
		err = importRedis(ctx, &o.imp, logger)
	case "new-key":
		err = o.newKey.write(stdout, time.Now())
	}
	if wb, ok := err.(*writeBackError); ok { // the only failure (see serve)
		logger.Error("seenapi: stopped, but the final write-back failed; no acknowledged change is lost: the journal keeps every one, and the next start writes them back", "err", wb.err)
		return 1
	}
	if pb, ok := err.(*partialBackup); ok {
		logger.Warn("seenapi backup: the backup is written, but without the damaged users named above (--skip-damaged)",
			"out", pb.out, "skipped", pb.skipped)
		return exitPartialBackup
	}
	if err != nil {
		logger.Error("seenapi "+cmd+" failed", "err", err)
		return 1
	}
	return 0
}

// unknownCommand says cmd is none of the commands, lists them, and returns
// the exit code of a usage error.
func unknownCommand(stderr io.Writer, cmd string) int {
	fmt.Fprintf(stderr, "seenapi: unknown command %q\n\n%s", cmd, commandsHelp)
	return 2
}
