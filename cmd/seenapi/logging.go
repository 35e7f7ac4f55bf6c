package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// The log flags of every command: --log-format picks slog's text (key=value)
// or JSON handler, for log pipelines that read one JSON object a line;
// --log-level the least level written (debug adds Badger's own messages).

// logLevels are --log-level's values.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// parseLogFormat checks a value of --log-format.
func parseLogFormat(s string) error {
	if s != "text" && s != "json" {
		return fmt.Errorf("want text or json")
	}
	return nil
}

// parseLogLevel checks a value of --log-level.
func parseLogLevel(s string) error {
	if _, ok := logLevels[strings.ToLower(s)]; !ok {
		return fmt.Errorf("want debug, info, warn or error")
	}
	return nil
}

// newLogger is the logger of a command: format and level as --log-format
// and --log-level say (checked when parsed), writing to w.
func newLogger(w io.Writer, format, level string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: logLevels[strings.ToLower(level)]}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
