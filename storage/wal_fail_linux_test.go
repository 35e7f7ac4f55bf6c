package storage

import (
	"slices"
	"syscall"
	"testing"
)

// A group commit whose journal write fails partway (here the file size
// limit, RLIMIT_FSIZE, as a full disk would: the kernel writes what fits,
// then refuses the rest) answers every caller of the batch with an error,
// and none of its records is replayed after a crash: not the whole ones
// written before the failure, nor those the next, shorter write leaves
// past its end. Their callers were told their impressions were not
// recorded.
func TestAFailedJournalWriteLeavesNoRecordToReplay(t *testing.T) {
	s := openTest(t, testOptions(t))
	mustAppend(t, s, "feed", "ok", "acknowledged")

	// Three records of one length; the limit lets the first two and half
	// of the third in. (Go ignores SIGXFSZ: the write fails with EFBIG.)
	batch := []*appendReq{}
	for _, user := range []string{"f1", "f2", "f3"} {
		batch = append(batch, &appendReq{ns: "feed", user: user, value: []byte("refused impression"), done: make(chan struct{}, 1)})
	}
	rec, _ := appendRecord(nil, kindAppend, 1, "feed", "f1", 0, 0, batch[0].value)
	s.wal.mu.RLock()
	end := s.wal.segs[len(s.wal.segs)-1].size
	s.wal.mu.RUnlock()
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Fatal(err)
	}
	limit := was
	limit.Cur = uint64(end) + 2*uint64(len(rec)) + uint64(len(rec))/2
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Fatal(err)
	}
	s.commitAppends(batch, nil)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Fatal(err)
	}
	for _, r := range batch {
		<-r.done
		if r.err == nil {
			t.Fatalf("%s: the append past the file size limit succeeded", r.user)
		}
	}

	replayed := func(s *Store, when string, want map[string]int) {
		t.Helper()
		for _, user := range []string{"ok", "f1", "f2", "f3", "after"} {
			if _, j := mustLoad(t, s, "feed", user); len(j) != want[user] {
				t.Errorf("%s: %s has %d journal records %q, want %d", when, user, len(j), journalValues(j), want[user])
			}
		}
	}
	replayed(crashCopy(t, s), "a crash after the failed write", map[string]int{"ok": 1})

	// The next write, shorter than the failed one, ends where its second
	// record began (a record of the same length).
	mustAppend(t, s, "feed", "after", "refused impression"[3:])
	replayed(crashCopy(t, s), "a crash after the next write", map[string]int{"ok": 1, "after": 1})
	if users := s.wal.users(); slices.ContainsFunc(users, func(u [2]string) bool { return u[1] == "f1" || u[1] == "f2" || u[1] == "f3" }) {
		t.Errorf("the failed records are indexed: %q", users)
	}
}
