package api

import (
	"testing"
	"time"
)

// BodyBytesReserved is what the bodies being read hold of the budget
// (Config.MaxBodyBytesInFlight).
func BodyBytesReserved(s *Server) int { return s.bodies.inUse() }

// AnswersLogged waits until the answers log of s has written every answer
// given so far (its interval's flush, or its stop on a failed write): what
// a crash then leaves in its files. A test that slept past the interval
// instead lost the race to a loaded machine, which can keep the flush from
// running for longer than any sleep a test should take.
func AnswersLogged(t testing.TB, s *Server) {
	t.Helper()
	l := s.replays.log
	for deadline := time.Now().Add(time.Minute); !l.written(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the answers log did not write its answers in a minute")
		}
	}
}

// written reports whether no answer waits for a flush: none was appended
// since a flush took the pending ones, and that flush has ended (it holds
// fileMu while it writes).
func (l *answerLog) written() bool {
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending) == 0
}
