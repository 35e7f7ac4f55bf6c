package eviction

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// fullHotSet is a hot set over a real store that refuses every write: the
// free space it requires (--min-free-bytes) is more than any disk has.
func fullHotSet(t *testing.T) *HotSet {
	t.Helper()
	st, err := storage.Open(storage.DefaultOptions(t.TempDir()).WithMinFreeBytes(1 << 62).
		WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(st, defaultNS, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Close()
		st.Close()
	})
	return h
}

// neverSeen fails the test unless the user of ns answers as one never
// seen (no stats, no export) and ns has no hot user.
func neverSeen(t *testing.T, h *HotSet, ns, user, when string) {
	t.Helper()
	if st, err := h.User(ns, user); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("%s: User(%s/%s) = %d items (hot %v), %v; want ErrUserNotFound", when, ns, user, st.Items, st.Hot, err)
	}
	if _, err := h.Export(ns, user); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("%s: Export(%s/%s): %v; want ErrUserNotFound", when, ns, user, err)
	}
	if n := h.Stats().Namespaces[ns]; n.HotUsers != 0 || n.CacheBytes != 0 {
		t.Errorf("%s: %s holds %d hot users in %d bytes, want none", when, ns, n.HotUsers, n.CacheBytes)
	}
}

// A call the store refuses for lack of space (here the free-space floor)
// leaves no user behind: the user it would have made answers as one never
// seen and is not counted hot, whether the call was the one call, a
// recording or an import, in a namespace with a window or without, and
// however many such calls come at once.
func TestARefusedCallLeavesNoUser(t *testing.T) {
	h := fullHotSet(t)
	// An export with an item: one that never recorded any makes no user,
	// and is written nowhere to be refused.
	f, err := userfilter.New(userfilter.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	f.Add([]string{"a"}, time.Now())
	exported, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"default", "push"} {
		calls := map[string]func(user string) error{
			"filter": func(user string) error {
				_, err := h.Filter(ns, user, []string{"a", "b"}, 0, userfilter.RecordReturned)
				return err
			},
			"record": func(user string) error {
				_, err := h.Record(ns, user, []string{"a"})
				return err
			},
		}
		if ns == "default" { // an export of the namespace's profile
			calls["import"] = func(user string) error { _, err := h.Import(ns, user, exported, false, 1<<20); return err }
		}
		for name, call := range calls {
			user := name + "-u"
			if err := call(user); !errors.Is(err, ErrStorageFull) {
				t.Fatalf("%s in %s on a full store: %v, want ErrStorageFull", name, ns, err)
			}
			neverSeen(t, h, ns, user, fmt.Sprintf("after a refused %s in %s", name, ns))
		}
		// Many refused calls for one user at once, and checks beside them.
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					seen(t, h, ns, "many", "a")
					return
				}
				if err := calls["filter"]("many"); !errors.Is(err, ErrStorageFull) {
					t.Errorf("filter in %s on a full store: %v, want ErrStorageFull", ns, err)
				}
			}()
		}
		wg.Wait()
		neverSeen(t, h, ns, "many", "after refused calls at once in "+ns)
	}
}

// refusingBigStore is the real store that refuses, as a full disk would,
// the journal records longer than limit bytes.
type refusingBigStore struct {
	*storage.Store
	limit int
}

func (r *refusingBigStore) Append(ns, user string, value []byte, ttl time.Duration) (uint64, error) {
	if len(value) > r.limit {
		return 0, fmt.Errorf("%w: refused for the test", storage.ErrFull)
	}
	return r.Store.Append(ns, user, value, ttl)
}

// A refused call drops no user another call recorded into, before it or
// at the same time: the recorded item stays seen.
func TestARefusedCallKeepsAnotherCallsUser(t *testing.T) {
	fx := newFixture(t, Options{})
	h, err := New(&refusingBigStore{Store: fx.st, limit: 400}, defaultNS, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	big := make([]string, 50) // a record of 50 hashes, refused
	for i := range big {
		big[i] = fmt.Sprint("big", i)
	}
	for i := range 100 {
		user := fmt.Sprint("u", i)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := h.Filter("default", user, big, 0, userfilter.RecordReturned); !errors.Is(err, ErrStorageFull) {
				t.Errorf("the big call: %v, want ErrStorageFull", err)
			}
		}()
		go func() {
			defer wg.Done()
			record(t, h, "default", user, "g")
		}()
		wg.Wait()
		if st, err := h.User("default", user); err != nil || st.Items != 1 || !seen(t, h, "default", user, "g")[0] {
			t.Fatalf("%s after a refused call beside a recorded one: %d items, %v; want g seen", user, st.Items, err)
		}
	}
}
