package eviction

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seenapi/seenapi/userfilter"
)

// Peek answers a cold user from the store, journal included, without
// bringing it into memory, and a hot one as User does.
func TestPeekReadsAColdUserWithoutLoadingIt(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "written", "a", "b")
	fx.restart(true, Options{}) // written back, then cold
	record(t, fx.h, "default", "journaled", "a", "b", "c")
	fx.restart(false, Options{}) // a crash: only its journal holds it

	for user, items := range map[string]uint64{"written": 2, "journaled": 3} {
		st, err := fx.h.Peek("default", user)
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		if st.Items != items || st.Hot || st.Dirty || st.LastSeen.IsZero() {
			t.Fatalf("%s: %d items, hot %v, dirty %v, last seen %v; want %d items, cold", user, st.Items, st.Hot, st.Dirty, st.LastSeen, items)
		}
	}
	if st := fx.h.Stats(); st.HotUsers != 0 || st.Hits != 0 || st.Misses != 0 {
		t.Fatalf("after peeking: %d hot users, %d hits, %d misses; want none", st.HotUsers, st.Hits, st.Misses)
	}

	record(t, fx.h, "default", "written", "c")
	hits := fx.h.Stats().Hits
	got, err := fx.h.Peek("default", "written")
	if err != nil {
		t.Fatal(err)
	}
	if n := fx.h.Stats().Hits; n != hits {
		t.Fatalf("peeking at a hot user counted a hit (%d, then %d)", hits, n)
	}
	want, err := fx.h.User("default", "written")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Hot || !got.Dirty || got.Items != 3 || got.Items != want.Items || !got.LastSeen.Equal(want.LastSeen) {
		t.Fatalf("a hot user: Peek %+v, User %+v", got, want)
	}

	if _, err := fx.h.Peek("default", "nobody"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("a user without history: %v, want ErrUserNotFound", err)
	}
	if _, err := fx.h.Peek("nope", "written"); !errors.Is(err, ErrUnknownNamespace) {
		t.Fatalf("an unknown namespace: %v, want ErrUnknownNamespace", err)
	}
	if st := fx.h.Stats(); st.HotUsers != 1 {
		t.Fatalf("%d hot users, want the one called", st.HotUsers)
	}
}

// Peeks go on while calls load, change and evict the same users (run with
// -race): every peek sees a user's history whole or not yet, never an error.
func TestPeekWhileCallsEvict(t *testing.T) {
	fx := newFixture(t, Options{CacheBytes: 64 << 10, Shards: 2, FlushInterval: 20 * time.Millisecond})
	const users = 200
	for u := range users {
		record(t, fx.h, "default", fmt.Sprint("u", u), "a")
	}
	stop := goLoops(2, func(g, i int) bool {
		_, err := fx.h.Filter("default", fmt.Sprint("u", (i*7+g)%users), []string{fmt.Sprint(i)}, 0, userfilter.RecordReturned)
		if err != nil {
			t.Error(err)
		}
		return err == nil
	})
	for round := range 20 {
		for u := range users {
			st, err := fx.h.Peek("default", fmt.Sprint("u", u))
			if err != nil || st.Items < 1 {
				t.Fatalf("round %d, u%d: %d items, %v", round, u, st.Items, err)
			}
		}
	}
	stop()
	checkNamespaceStats(t, fx.h)
}

// goLoops calls fn(g, i) for i = 0, 1, ... in each of n goroutines g,
// until fn returns false or stop is called; stop waits for them, and may
// be called again (deferred, for a test that ends early).
func goLoops(n int, fn func(g, i int) bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if !fn(g, i) {
					return
				}
			}
		}()
	}
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}
