package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// logLines returns the lines a service logged so far.
func logLines(s *service) []string { return strings.Split(strings.TrimSpace(s.out.String()), "\n") }

// With --log-format json every line is one JSON object with its level and
// message, the serving line's URL a field of its own.
func TestLogFormatJSON(t *testing.T) {
	s := startService(t, nil, "--data-dir", t.TempDir(), "--log-format", "json")
	serving := false
	for _, line := range logLines(s) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		if m["level"] == nil || m["msg"] == nil || m["time"] == nil {
			t.Errorf("a line without time, level or msg: %q", line)
		}
		if m["msg"] == "seenapi: serving" {
			serving = m["url"] == s.url
		}
	}
	if !serving {
		t.Errorf("no serving line with url %s:\n%s", s.url, s.out.String())
	}
}

// --log-level sets the least level written: warn keeps the warning of an
// open service and drops the information; debug adds Badger's messages,
// which info leaves out.
func TestLogLevel(t *testing.T) {
	warn := startService(t, nil, "--data-dir", t.TempDir(), "--log-level", "warn")
	if out := warn.out.String(); strings.Contains(out, "level=INFO") || !strings.Contains(out, "level=WARN") || !strings.Contains(out, "NO API KEYS") {
		t.Errorf("--log-level warn:\n%s", out)
	}
	debug := startService(t, map[string]string{"SEENAPI_LOG_LEVEL": "debug"}, "--data-dir", t.TempDir())
	if out := debug.out.String(); !strings.Contains(out, `level=DEBUG msg="badger: `) || !strings.Contains(out, "level=INFO") {
		t.Errorf("--log-level debug (from the environment):\n%s", out)
	}
	info := startService(t, nil, "--data-dir", t.TempDir())
	if out := info.out.String(); strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "level=INFO") {
		t.Errorf("the default level:\n%s", out)
	}
}
