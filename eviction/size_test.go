package eviction

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// syncBuffer is a log the hot set's goroutines write to while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A user that outgrows what the store keeps for one user (here a 1 MiB
// value-log file, Badger's smallest; 128 MiB by default) saturates as at
// max_items instead of becoming a user write-back can never store: the
// other users of its write-back batch are written, every journal is
// retired, no error carries a filter's bytes, and what it recorded
// survives a restart.
func TestAUserPastTheStoresLargestValueSaturates(t *testing.T) {
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	open := func(t testing.TB, dir string) *storage.Store {
		t.Helper()
		// No value-log GC: with files this small it runs while the test
		// writes, and Badger v4.9.6 races with itself there (see
		// storage's soak test).
		st, err := storage.Open(storage.DefaultOptions(dir).WithMinFreeBytes(-1).WithValueLogFileSize(1 << 20).
			WithGCInterval(-1).WithLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	dir := t.TempDir()
	fx := &fixture{t: t, dir: dir, open: open, st: open(t, dir)}
	fx.h = fx.newHotSet(Options{Logger: logger})
	t.Cleanup(func() {
		fx.h.Close()
		fx.st.Close()
	})
	h := fx.h

	// Calls of 10,000 new items each until the user saturates, each with
	// small users beside it, dirty in the same write-back batch.
	var acked []string // every item the big user holds as seen
	saturatedAt := -1
	for call := 0; call < 200 && saturatedAt < 0; call++ {
		items := make([]string, 10000)
		for i := range items {
			items[i] = fmt.Sprintf("i:%d:%d", call, i)
		}
		res, err := h.Filter("default", "big", items, 0, userfilter.RecordReturned)
		if err != nil {
			t.Fatalf("call %d: %v", call, err)
		}
		seen := make([]bool, 0, len(items))
		seen, err = h.Check("default", "big", items, seen)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range seen {
			if s {
				acked = append(acked, items[i])
			}
		}
		if res.Saturated {
			saturatedAt = call
		}
		record(t, h, "default", fmt.Sprintf("small%d", call), "a", "b")
	}
	if saturatedAt < 0 {
		t.Fatal("the user never saturated")
	}
	res := record(t, h, "default", "big", "one more", "and another")
	if res.Recorded != 0 || !res.Saturated {
		t.Fatalf("a call past saturation: recorded %d, saturated %v; want 0, true", res.Recorded, res.Saturated)
	}
	if got := seen(t, h, "default", "big", "one more"); got[0] {
		t.Fatal("an item past saturation tests seen")
	}
	u, err := h.User("default", "big")
	if err != nil {
		t.Fatal(err)
	}
	if !u.Saturated || u.EncodedBytes > int(fx.st.MaxValueBytes()) {
		t.Fatalf("user stats: saturated %v, %d bytes encoded; want saturated within %d", u.Saturated, u.EncodedBytes, fx.st.MaxValueBytes())
	}

	if err := h.Flush(); err != nil {
		t.Fatalf("write-back: %.300v", err)
	}
	st := h.Stats()
	if st.DirtyUsers != 0 || st.StorageErrors != 0 {
		t.Fatalf("after write-back: %d dirty users, %d storage errors", st.DirtyUsers, st.StorageErrors)
	}
	for call := 0; call <= saturatedAt; call++ {
		for _, user := range []string{"big", fmt.Sprintf("small%d", call)} {
			f, j, err := fx.st.Load("default", user)
			if err != nil || f == nil || len(j) != 0 {
				t.Fatalf("%s: stored %d bytes, %d journal records (%v); want written and its journal retired", user, len(f), len(j), err)
			}
		}
	}

	// Saturated calls journal nothing: the journal stays retired.
	record(t, h, "default", "big", "still more")
	if _, j, _ := fx.st.Load("default", "big"); len(j) != 0 {
		t.Fatalf("a saturated call left %d journal records", len(j))
	}

	fx.restart(false, Options{Logger: logger}) // a crash: no write-back at the stop
	if got := seen(t, fx.h, "default", "big", acked...); !allTrue(got) {
		n := 0
		for _, s := range got {
			if !s {
				n++
			}
		}
		t.Fatalf("after a restart, %d of the %d items the user held are unseen", n, len(acked))
	}
	if l := logs.String(); strings.Contains(l, "00000000") || strings.Contains(l, "exceeded") {
		t.Fatalf("the log quotes a filter: %.500s", l)
	}
}

// A user's journal is replayed into its filter as calls find it: expired
// at the load. Buckets past the window would count against the largest
// filter the store keeps, and could refuse at the replay an item its call
// recorded (its Select had expired them).
func TestLoadExpiresTheFilterBeforeItsJournalIsReplayed(t *testing.T) {
	clock, advance := newTestClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	fx := newFixture(t, Options{Now: clock})
	record(t, fx.h, "push", "u", "old")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	advance(9 * 24 * time.Hour)         // the stored filter's bucket is past the 7-day window
	record(t, fx.h, "push", "u", "new") // journalled only
	fx.restart(false, Options{Now: clock})
	info, err := fx.h.namespace("push")
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := fx.h.load(info, "u")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	all, err := userfilter.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	// Stats at a time before every bucket lists them all, expired or not.
	if gens := all.Stats(time.Time{}).Generations; len(gens) != 1 {
		t.Fatalf("the loaded filter holds %d buckets, want only the live one", len(gens))
	}
	if got := seen(t, fx.h, "push", "u", "old", "new"); fmt.Sprint(got) != "[false true]" {
		t.Fatalf("after the restart: %v", got)
	}
}
