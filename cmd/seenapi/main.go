package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, nil))
}

// run runs the subcommand in args and returns the exit code. onListen, if
// not nil, is told the serving address (tests listen on port 0).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, onListen func(string)) int {
	cmd := "serve"
	if len(args) > 0 {
		switch args[0] {
		case "serve", "backup", "restore", "import-redis":
			cmd, args = args[0], args[1:]
		case "version", "--version", "-version":
			fmt.Fprintln(stdout, version())
			return 0
		case "help":
			if len(args) > 1 {
				cmd = args[1]
			}
			var o options
			fs := newFlagSet(cmd, &o, stdout)
			fs.Usage()
			return 0
		}
	}
	var o options
	fs := newFlagSet(cmd, &o, stderr)
	if err := parseFlags(fs, args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "seenapi %s: %v\n", cmd, err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	var err error
	switch cmd {
	case "serve":
		if err = serve(ctx, &o, getenv, logger, onListen); err == nil {
			logger.Info("seenapi: stopped; every change is written back")
		}
	case "backup":
		if o.url != "" {
			err = backupFromService(ctx, o.url, o.key, o.out, logger)
		} else {
			err = backup(&o, logger)
		}
	case "restore":
		err = restore(&o, logger)
	case "import-redis":
		err = importRedis(ctx, &o.imp, logger)
	}
	if err != nil {
		logger.Error("seenapi "+cmd+" failed", "err", err)
		return 1
	}
	return 0
}
