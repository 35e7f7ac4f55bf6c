package storage

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"
)

// testLogger sends warnings to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tbWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tbWriter struct{ t testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimSpace(p)))
	return len(p), nil
}

// testOptions are the defaults in a fresh temp dir, logging to the test.
func testOptions(t testing.TB) Options {
	return DefaultOptions(t.TempDir()).WithLogger(testLogger(t))
}

// openTest opens a store that is closed when the test ends.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func mustAppend(t testing.TB, s *Store, ns, user, value string) uint64 {
	t.Helper()
	seq, err := s.Append(ns, user, []byte(value), 0)
	if err != nil {
		t.Fatalf("Append(%s/%s): %v", ns, user, err)
	}
	return seq
}

func mustLoad(t testing.TB, s *Store, ns, user string) ([]byte, []JournalEntry) {
	t.Helper()
	f, j, err := s.Load(ns, user)
	if err != nil {
		t.Fatalf("Load(%s/%s): %v", ns, user, err)
	}
	return f, j
}

// journalValues renders a journal as "seq:value" strings.
func journalValues(j []JournalEntry) []string {
	out := make([]string, len(j))
	for i, e := range j {
		out[i] = fmt.Sprintf("%d:%s", e.Seq, e.Value)
	}
	return out
}

// orMerge merges by bitwise OR, the way Bloom filters merge.
func orMerge(stored, value []byte) ([]byte, error) {
	if len(stored) != len(value) {
		return nil, fmt.Errorf("lengths differ: %d and %d", len(stored), len(value))
	}
	out := make([]byte, len(value))
	for i := range out {
		out[i] = stored[i] | value[i]
	}
	return out, nil
}
