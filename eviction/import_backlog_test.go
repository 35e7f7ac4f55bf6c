package eviction

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// stuckStore is the real store whose write-backs of users other than
// spared fail, as a full disk's do: evicted users stay waiting for their
// write-back, over the backlog's limit.
type stuckStore struct {
	*storage.Store
	stuck  atomic.Bool
	spared string
}

var errStuck = errors.New("write-back refused")

func (s *stuckStore) WriteBack(writes []storage.Write, merge storage.MergeFunc) error {
	if s.stuck.Load() {
		for _, w := range writes {
			if w.User != s.spared {
				return errStuck
			}
		}
	}
	return s.Store.WriteBack(writes, merge)
}

// An import of a user not in memory holds the write-back lock while it
// loads the user, and a load waits for write-back rounds to bring the
// evicted users' backlog down (waitBacklog): it must not wait for rounds
// that cannot run while it holds the lock. It finishes, and write-back
// goes on.
func TestImportDoesNotWaitForABacklogItBlocks(t *testing.T) {
	st := openStore(t, t.TempDir())
	ss := &stuckStore{Store: st, spared: "imported"}
	h, err := New(ss, defaultNS, Options{CacheBytes: 64 << 10, Shards: 1, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	returned := false // whether the import returned
	t.Cleanup(func() {
		ss.stuck.Store(false)
		// An import that did not return holds up the write-back loop,
		// which Close would wait for: the hot set is then left as it
		// is, so that the failure ends the run instead of hanging it.
		if returned {
			h.Close()
		}
		st.Close()
	})
	items := candidates(100)
	if _, err := h.Record("default", "imported", items); err != nil { // stored, then out of memory
		t.Fatal(err)
	}
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	ss.stuck.Store(true)
	// Users of one item each: a user's bytes are mostly its entry's and
	// its filter's fixed cost then, and the backlog's 1 MiB fills with a
	// few thousand items recorded, not the 440,000 that fillers of 20,000
	// items took.
	for i := 0; h.evictedBytes.Load() <= h.backlogLimit; i++ {
		if i == 10000 {
			t.Fatalf("evicted users take %d bytes, not past the backlog's limit %d", h.evictedBytes.Load(), h.backlogLimit)
		}
		if _, err := h.Record("default", fmt.Sprint("filler-", i), items[:1]); err != nil {
			t.Fatal(err)
		}
	}
	f, err := userfilter.New(userfilter.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	f.Add([]string{"from-import"}, time.Now())
	data, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := h.Import("default", "imported", data, false, 1<<20); done <- err }()
	select {
	case err := <-done:
		returned = true
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("an import for a user not in memory did not return: it waits for write-back rounds that its own lock holds up")
	}
	if got := seen(t, h, "default", "imported", "from-import", items[0]); !allTrue(got) {
		t.Fatalf("after the import: %v, want both seen", got)
	}
}
