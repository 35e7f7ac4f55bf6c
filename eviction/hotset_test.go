package eviction

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

var defaultNS = []Namespace{
	{Name: "default", Profile: userfilter.DefaultProfile()},
	{Name: "push", Profile: userfilter.Profile{Window: 7 * 24 * time.Hour, Granularity: 24 * time.Hour}},
}

func openStore(t testing.TB, dir string) *storage.Store {
	t.Helper()
	st, err := storage.Open(storage.DefaultOptions(dir).WithMinFreeBytes(-1))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// fixture is a hot set over a real Badger store in a temp dir.
type fixture struct {
	t   testing.TB
	dir string
	st  *storage.Store
	h   *HotSet
	ns  []Namespace // nil: defaultNS
	// open opens the store in dir; nil: openStore.
	open func(t testing.TB, dir string) *storage.Store
}

func newFixture(t testing.TB, opts Options) *fixture {
	t.Helper()
	fx := &fixture{t: t, dir: t.TempDir()}
	fx.st = openStore(t, fx.dir)
	fx.h = fx.newHotSet(opts)
	t.Cleanup(func() {
		fx.h.Close()
		fx.st.Close()
	})
	return fx
}

func (fx *fixture) newHotSet(opts Options) *HotSet {
	if opts.FlushInterval == 0 {
		opts.FlushInterval = time.Hour // tests flush when they mean to
	}
	ns := fx.ns
	if ns == nil {
		ns = defaultNS
	}
	h, err := New(fx.st, ns, opts)
	if err != nil {
		fx.t.Fatal(err)
	}
	return h
}

// restart closes the store without flushing the hot set (as a crash would
// leave it, minus Badger's own clean close) and opens both again.
func (fx *fixture) restart(flush bool, opts Options) {
	fx.t.Helper()
	if flush {
		if err := fx.h.Close(); err != nil {
			fx.t.Fatal(err)
		}
	} else {
		close(fx.h.stop)
		<-fx.h.stopped
		fx.h.closed.Store(true)
	}
	if err := fx.st.Close(); err != nil {
		fx.t.Fatal(err)
	}
	if fx.open != nil {
		fx.st = fx.open(fx.t, fx.dir)
	} else {
		fx.st = openStore(fx.t, fx.dir)
	}
	fx.h = fx.newHotSet(opts)
}

// journalLen is how many journal records the store holds for the user.
func (fx *fixture) journalLen(ns, user string) int {
	fx.t.Helper()
	_, j, err := fx.st.Load(ns, user)
	if err != nil {
		fx.t.Fatal(err)
	}
	return len(j)
}

func record(t testing.TB, h *HotSet, ns, user string, items ...string) Result {
	t.Helper()
	res, err := h.Filter(ns, user, items, 0, userfilter.RecordReturned)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func seen(t testing.TB, h *HotSet, ns, user string, items ...string) []bool {
	t.Helper()
	out, err := h.Check(ns, user, items, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func allTrue(b []bool) bool {
	for _, v := range b {
		if !v {
			return false
		}
	}
	return true
}

func TestFilterReturnsUnseenAndRecords(t *testing.T) {
	fx := newFixture(t, Options{})
	res, err := fx.h.Filter("default", "u1", []string{"a", "b", "c", "a"}, 2, userfilter.RecordReturned)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Unseen) != "[a b]" || res.Recorded != 2 || res.SeenCount != 0 {
		t.Fatalf("first call: %+v", res)
	}
	res, _ = fx.h.Filter("default", "u1", []string{"a", "b", "c", "d"}, 0, userfilter.RecordNone)
	if fmt.Sprint(res.Unseen) != "[c d]" || res.SeenCount != 2 || res.Recorded != 0 {
		t.Fatalf("second call: %+v", res)
	}
}

func TestUnknownNamespace(t *testing.T) {
	fx := newFixture(t, Options{})
	if _, err := fx.h.Filter("nope", "u", []string{"a"}, 0, 0); !errors.Is(err, ErrUnknownNamespace) {
		t.Fatalf("err = %v", err)
	}
}

func TestWriteBackSurvivesRestart(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "u1", "a", "b")
	fx.restart(true, Options{})
	if got := seen(t, fx.h, "default", "u1", "a", "b", "zzz"); fmt.Sprint(got) != "[true true false]" {
		t.Fatalf("after restart: %v", got)
	}
	if n, _, _ := fx.st.Load("default", "u1"); n == nil {
		t.Fatal("no filter written back")
	}
}

func TestJournalReplaysWhatWasNotWrittenBack(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "u1", "a")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	record(t, fx.h, "default", "u1", "b") // journalled only
	fx.restart(false, Options{})
	if got := seen(t, fx.h, "default", "u1", "a", "b"); !allTrue(got) {
		t.Fatalf("after restart without write-back: %v", got)
	}
	// The replay is folded in at the next write-back, which empties the journal.
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, j, err := fx.st.Load("default", "u1"); err != nil || len(j) != 0 {
		t.Fatalf("journal after write-back: %d entries, err %v", len(j), err)
	}
}

func TestNoWriteForCallsThatChangeNothing(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "u1", "a")
	fx.h.Flush()
	before := fx.h.Stats()
	fx.h.Filter("default", "u1", []string{"a", "b"}, 0, userfilter.RecordNone)
	fx.h.Filter("default", "u1", []string{"a"}, 0, userfilter.RecordReturned) // a is seen: nothing returned
	fx.h.Check("default", "u1", []string{"a"}, nil)
	fx.h.Filter("default", "u1", []string{"a"}, 0, userfilter.RecordAll) // the seen route, of an item seen
	fx.h.Flush()
	after := fx.h.Stats()
	if after.JournalAppends != before.JournalAppends || after.FlushedUsers != before.FlushedUsers || after.DirtyUsers != 0 {
		t.Fatalf("calls that changed nothing wrote: before %+v after %+v", before, after)
	}
}

func TestConcurrentCallsForOneUserLoseNothing(t *testing.T) {
	fx := newFixture(t, Options{})
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				record(t, fx.h, "default", "hot", fmt.Sprintf("g%d-%d", g, i))
			}
		}()
	}
	wg.Wait()
	fx.restart(false, Options{})
	for g := 0; g < 16; g++ {
		for i := 0; i < 50; i++ {
			if !seen(t, fx.h, "default", "hot", fmt.Sprintf("g%d-%d", g, i))[0] {
				t.Fatalf("g%d-%d lost", g, i)
			}
		}
	}
}

func TestColdUserLoadsOnceUnderConcurrentCalls(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "cold", "a")
	fx.restart(true, Options{})
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if !seen(t, fx.h, "default", "cold", "a")[0] {
				t.Error("a unseen")
			}
		}()
	}
	close(start)
	wg.Wait()
	if l := fx.h.Stats().Loads; l != 1 {
		t.Fatalf("storage loads = %d, want 1", l)
	}
}

// NewUsers counts the users a recording call created from nothing: not a
// read of an unknown user, not a user loaded back from its filter, not one
// whose only trace is its journal.
func TestNewUsersCountsOnlyUsersCreatedFromNothing(t *testing.T) {
	fx := newFixture(t, Options{})
	want := func(loads, created uint64) {
		t.Helper()
		if st := fx.h.Stats(); st.Loads != loads || st.NewUsers != created {
			t.Fatalf("loads %d, new users %d; want %d and %d", st.Loads, st.NewUsers, loads, created)
		}
	}
	record(t, fx.h, "default", "written", "a")
	record(t, fx.h, "default", "written", "b") // hot: no read
	want(1, 1)
	if got := seen(t, fx.h, "default", "nobody", "a"); got[0] {
		t.Fatal("an unknown user has seen a")
	}
	want(2, 1)
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	// After the write-back: a user whose only trace will be its journal,
	// as a crash before its first write-back leaves it.
	record(t, fx.h, "default", "journalled", "a")
	want(3, 2)

	fx.restart(false, Options{})
	want(0, 0)
	record(t, fx.h, "default", "written", "c")
	record(t, fx.h, "default", "journalled", "b")
	if got := seen(t, fx.h, "default", "journalled", "a"); !got[0] {
		t.Fatal("the journalled user lost its item")
	}
	want(2, 0)
	record(t, fx.h, "default", "fresh", "a")
	want(3, 1)
}

func TestBudgetHeldAndEvictedUsersKeepHistory(t *testing.T) {
	const users = 20000
	const budget = 1 << 20
	fx := newFixture(t, Options{CacheBytes: budget, Shards: 4})
	for u := 0; u < users; u++ {
		record(t, fx.h, "default", fmt.Sprintf("user-%d", u), fmt.Sprintf("item-%d", u), "common")
		if u%1000 == 0 {
			if b := fx.h.Stats().CacheBytes; b > budget {
				t.Fatalf("cache holds %d bytes over budget %d", b, budget)
			}
		}
	}
	st := fx.h.Stats()
	if st.CacheBytes > budget || st.Evictions == 0 || st.HotUsers >= users {
		t.Fatalf("budget not held: %+v", st)
	}
	for u := 0; u < users; u += 7 {
		if got := seen(t, fx.h, "default", fmt.Sprintf("user-%d", u), fmt.Sprintf("item-%d", u), "common"); !allTrue(got) {
			t.Fatalf("user-%d lost history through eviction: %v", u, got)
		}
	}
}

// A call for a hot user makes it the most recently used: a user called
// after every other user's call stays hot while the budget evicts the
// users called once, the least recently used first.
func TestEvictionTakesTheLeastRecentlyUsed(t *testing.T) {
	fx := newFixture(t, Options{CacheBytes: 64 << 10, Shards: 1})
	record(t, fx.h, "default", "regular", "a")
	// Clean: once evicted, only a load from the store brings it back.
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	for u := 0; fx.h.Stats().Evictions < 500; u++ {
		if u == 20000 {
			t.Fatalf("no eviction over budget: %+v", fx.h.Stats())
		}
		record(t, fx.h, "default", fmt.Sprintf("u%d", u), "x")
		misses := fx.h.Stats().Misses
		if !seen(t, fx.h, "default", "regular", "a")[0] {
			t.Fatal("regular lost a")
		}
		if fx.h.Stats().Misses != misses {
			t.Fatalf("regular, called after every other user, was evicted after u%d", u)
		}
	}
	if hotEntry(fx.h, "u0") != nil {
		t.Fatal("u0, the least recently used, is still hot after 500 evictions")
	}
}

func TestEvictedDirtyUsersSurviveWithoutJournal(t *testing.T) {
	fx := newFixture(t, Options{CacheBytes: 64 << 10, Shards: 1, NoJournal: true})
	for u := 0; u < 2000; u++ {
		record(t, fx.h, "default", fmt.Sprintf("u%d", u), "x")
	}
	for u := 0; u < 2000; u++ {
		if !seen(t, fx.h, "default", fmt.Sprintf("u%d", u), "x")[0] {
			t.Fatalf("u%d lost after eviction with no journal and no write-back yet", u)
		}
	}
}

func TestForgetErasesEverywhere(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "gone", "a")
	fx.h.Flush()
	record(t, fx.h, "default", "gone", "b") // dirty and journalled
	record(t, fx.h, "default", "kept", "a")
	if err := fx.h.Forget("default", "gone"); err != nil {
		t.Fatal(err)
	}
	fx.h.Flush() // a write-back after the erase must not bring it back
	if f, j, _ := fx.st.Load("default", "gone"); f != nil || len(j) != 0 {
		t.Fatalf("store still holds the user: filter %d bytes, %d journal entries", len(f), len(j))
	}
	if _, err := fx.h.User("default", "gone"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("User after Forget: %v", err)
	}
	fx.restart(false, Options{})
	if got := seen(t, fx.h, "default", "gone", "a", "b"); got[0] || got[1] {
		t.Fatalf("erased user came back after restart: %v", got)
	}
	if !seen(t, fx.h, "default", "kept", "a")[0] {
		t.Fatal("erasing one user hurt another")
	}
}

// ForgetThen says whether there was anything of the user to erase, as the
// erase found it: a user never seen, or erased already, had nothing; one
// with items in memory only (no journal, not yet written back), in the
// journal only (a crash before its write-back), written back and not in
// memory, or written back whose items have all left the window (gone, but
// still stored), had something.
func TestForgetSaysWhetherThereWasAnything(t *testing.T) {
	forget := func(t *testing.T, h *HotSet, ns, user string, want bool, when string) {
		t.Helper()
		had, err := h.ForgetThen(ns, user, nil)
		if err != nil {
			t.Fatal(err)
		}
		if had != want {
			t.Errorf("%s: ForgetThen says it had something to erase: %v, want %v", when, had, want)
		}
	}
	t.Run("journal", func(t *testing.T) {
		clock, advance := newTestClock(time.Now())
		fx := newFixture(t, Options{Now: clock})
		forget(t, fx.h, "default", "never", false, "never seen")
		record(t, fx.h, "default", "hot", "a")
		forget(t, fx.h, "default", "hot", true, "recorded, in memory")
		forget(t, fx.h, "default", "hot", false, "erased already")

		record(t, fx.h, "default", "cold", "a")
		record(t, fx.h, "push", "past", "a")
		if err := fx.h.Flush(); err != nil {
			t.Fatal(err)
		}
		record(t, fx.h, "default", "journalled", "a") // after the write-back: in the journal only
		fx.restart(false, Options{Now: clock})        // a crash: none of them in memory
		if raw, journal, err := fx.st.Load("default", "journalled"); err != nil || raw != nil || len(journal) != 1 {
			t.Fatalf("the store holds %d bytes and %d journal records of journalled (%v), want a record only", len(raw), len(journal), err)
		}
		forget(t, fx.h, "default", "cold", true, "written back, not in memory")
		advance(9 * 24 * time.Hour) // past push's window of 7 days
		if _, err := fx.h.User("push", "past"); !errors.Is(err, ErrUserNotFound) {
			t.Fatalf("a user past its window: %v, want ErrUserNotFound", err)
		}
		forget(t, fx.h, "push", "past", true, "gone past its window, still stored")
		forget(t, fx.h, "default", "journalled", true, "in the journal only")
	})
	t.Run("no journal", func(t *testing.T) {
		fx := newFixture(t, Options{NoJournal: true})
		record(t, fx.h, "default", "u", "a")
		if raw, journal, err := fx.st.Load("default", "u"); err != nil || raw != nil || len(journal) != 0 {
			t.Fatalf("the store holds u before its write-back: %d bytes, %d journal records, %v", len(raw), len(journal), err)
		}
		forget(t, fx.h, "default", "u", true, "in memory only")
		forget(t, fx.h, "default", "u", false, "erased already")
	})
}

// Forget erases a user that was evicted while dirty and is waiting for a
// write-back that keeps failing: once write-back works again, it does not
// bring the user back.
func TestForgetErasesAUserEvictedBeforeItsWriteBack(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	log, _ := fileLogger(t)
	// A budget of one byte in one shard: each new user evicts the last.
	h, ps := overPanicky(t, st, "writeback", Options{CacheBytes: 1, Shards: 1, Logger: log})
	defer h.Close()
	record(t, h, "default", "boom", "a")
	ps.armed.Store(true)                 // boom's write-backs fail from here on
	record(t, h, "default", "kept", "a") // evicts boom, dirty
	s := h.shards[0]
	s.mu.Lock()
	evicted := len(s.evicted)
	s.mu.Unlock()
	if evicted != 1 {
		t.Fatalf("%d users evicted and waiting for write-back, want boom", evicted)
	}
	if err := h.Forget("default", "boom"); err != nil {
		t.Fatal(err)
	}
	ps.armed.Store(false)
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	if f, j := loadStored(t, st, "boom"); f != nil || len(j) != 0 {
		t.Fatalf("store holds the erased user: filter %d B, %d journal entries", len(f), len(j))
	}
	if _, err := h.User("default", "boom"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("User after Forget: %v, want ErrUserNotFound", err)
	}
	if !seen(t, h, "default", "kept", "a")[0] {
		t.Fatal("erasing one user hurt another")
	}
}

// An erase among calls and write-backs of its user: what was recorded
// before it does not come back.
func TestForgetRacingCallsNeverResurrects(t *testing.T) {
	fx := newFixture(t, Options{})
	var stop atomic.Bool
	var wg sync.WaitGroup
	var first sync.WaitGroup // every racer's first call answered
	first.Add(4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				_, err := fx.h.Filter("default", "racer", []string{fmt.Sprintf("x%d-%d", g, i)}, 0, userfilter.RecordReturned)
				fx.h.Flush()
				if i == 0 {
					if err != nil {
						t.Error(err)
					}
					first.Done()
				}
			}
		}()
	}
	// The erase waits for the first answers, not for a time: a loaded
	// machine answered x0-0 after it, which may then stay. The racers go
	// on calling and writing back throughout.
	first.Wait()
	if err := fx.h.Forget("default", "racer"); err != nil {
		t.Error(err)
	}
	stop.Store(true)
	wg.Wait()
	// Whatever the racers recorded after the erase may stay; what they
	// recorded before may not.
	if seen(t, fx.h, "default", "racer", "x0-0")[0] {
		t.Fatal("an item recorded before the erase is seen after it")
	}
}

func TestTwoWritersMergeInsteadOfOverwriting(t *testing.T) {
	fx := newFixture(t, Options{})
	other := fx.newHotSet(Options{}) // a second node over the same store
	defer other.Close()
	record(t, fx.h, "default", "shared", "from-a")
	record(t, other, "default", "shared", "from-b")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := other.Flush(); err != nil {
		t.Fatal(err)
	}
	fx.restart(false, Options{})
	if got := seen(t, fx.h, "default", "shared", "from-a", "from-b"); !allTrue(got) {
		t.Fatalf("a write-back rolled the other writer back: %v", got)
	}
}

// countingStore is the real store, counting the merges write-back makes.
type countingStore struct {
	*storage.Store
	merges atomic.Int64
}

func (c *countingStore) WriteBack(writes []storage.Write, merge storage.MergeFunc) error {
	if merge != nil {
		inner := merge
		merge = func(stored, value []byte) ([]byte, error) {
			c.merges.Add(1)
			return inner(stored, value)
		}
	}
	return c.Store.WriteBack(writes, merge)
}

// The store's only writer writes back without reading and merging what is
// stored (its values include it), until something else writes: from then
// on it merges, so that write is not rolled back.
func TestOnlyWriterSkipsTheMergeUntilAnotherWrites(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	cs := &countingStore{Store: st}
	h, err := New(cs, defaultNS, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	flush := func() {
		t.Helper()
		if err := h.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	record(t, h, "default", "u", "a")
	flush()
	record(t, h, "default", "u", "b")
	flush()
	if n := cs.merges.Load(); n != 0 {
		t.Fatalf("the only writer merged %d times", n)
	}

	// Another writer puts an item into u's stored filter (an offline tool,
	// another node): its value is merged into what is stored.
	f, err := userfilter.New(userfilter.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	f.Add([]string{"x"}, time.Now())
	raw, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteBack([]storage.Write{{NS: "default", User: "u", Value: raw}}, MergeFilters); err != nil {
		t.Fatal(err)
	}
	record(t, h, "default", "u", "c")
	flush()
	if n := cs.merges.Load(); n == 0 {
		t.Fatal("write-back after another writer's write did not merge")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if h, err = New(cs, defaultNS, Options{FlushInterval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		h.Close()
		st.Close()
	}()
	if got := seen(t, h, "default", "u", "a", "b", "c", "x"); !allTrue(got) {
		t.Fatalf("after the other writer's write and a write-back: seen %v, want all", got)
	}
}

func TestCorruptUserFailsAloneAndClearly(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "good", "a")
	if err := fx.st.WriteBack([]storage.Write{{NS: "default", User: "bad", Value: []byte("not a filter at all")}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.h.Filter("default", "bad", []string{"a"}, 0, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt user: err = %v, want ErrCorrupt", err)
	}
	if !seen(t, fx.h, "default", "good", "a")[0] {
		t.Fatal("a corrupt user hurt another")
	}
	record(t, fx.h, "default", "other", "z")
}

func TestStorageFailureKeepsHotReadsWorking(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "hot", "a")
	fx.st.Close() // the store fails underneath
	if !seen(t, fx.h, "default", "hot", "a")[0] {
		t.Fatal("hot read failed with the store down")
	}
	_, err := fx.h.Filter("default", "hot", []string{"new"}, 0, userfilter.RecordReturned)
	if !errors.Is(err, ErrStorage) {
		t.Fatalf("recording with the store down: err = %v, want ErrStorage", err)
	}
	// The failed call changed nothing.
	if seen(t, fx.h, "default", "hot", "new")[0] {
		t.Fatal("an unacknowledged item was recorded")
	}
	if _, err := fx.h.Check("default", "cold", []string{"a"}, nil); !errors.Is(err, ErrStorage) {
		t.Fatalf("cold read with the store down: err = %v", err)
	}
	fx.st = openStore(t, t.TempDir()) // for cleanup
}

func TestExportImport(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "src", "a", "b")
	data, err := fx.h.Export("default", "src")
	if err != nil {
		t.Fatal(err)
	}
	record(t, fx.h, "default", "dst", "c")
	if _, err := fx.h.Import("default", "dst", data, false, 1<<20); err != nil {
		t.Fatal(err)
	}
	if got := seen(t, fx.h, "default", "dst", "a", "b", "c"); !allTrue(got) {
		t.Fatalf("merge import: %v", got)
	}
	if _, err := fx.h.Import("default", "dst", data, true, 1<<20); err != nil {
		t.Fatal(err)
	}
	fx.restart(true, Options{})
	if got := seen(t, fx.h, "default", "dst", "a", "b", "c"); fmt.Sprint(got) != "[true true false]" {
		t.Fatalf("replace import after restart: %v", got)
	}
	if _, err := fx.h.Import("default", "dst", []byte("junk"), false, 1<<20); !errors.Is(err, ErrBadImport) {
		t.Fatalf("junk import: %v", err)
	}
	if _, err := fx.h.Export("default", "nobody"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("export of unknown user: %v", err)
	}
}

// TestImportOfNoHistoryMakesNoUser: a filter that never recorded an item,
// imported for a user never seen in a namespace without a window, makes
// no user (none listed or with stats, in memory or once restarted, and
// Import says it wrote nothing), and
// replacing a user's filter is refused, changing nothing.
func TestImportOfNoHistoryMakesNoUser(t *testing.T) {
	fx := newFixture(t, Options{})
	empty := emptyOf(t, fx.h, "default")
	for _, replace := range []bool{false, true} {
		if imported, err := fx.h.Import("default", "none", empty, replace, 1<<20); err != nil || imported {
			t.Fatalf("import (replace %v) for a user never seen: imported %v, %v; want nothing written", replace, imported, err)
		}
	}
	record(t, fx.h, "default", "u", "a")
	if _, err := fx.h.Import("default", "u", empty, true, 1<<20); !errors.Is(err, ErrBadImport) {
		t.Errorf("a replace by a filter that never recorded: %v, want ErrBadImport", err)
	}
	for _, when := range []string{"imported", "restarted"} {
		if users, err := fx.h.Users("default", "", 0); err != nil || !slices.Equal(users, []string{"u"}) {
			t.Errorf("%s: users %q, %v; want u alone", when, users, err)
		}
		if st, err := fx.h.User("default", "none"); !errors.Is(err, ErrUserNotFound) {
			t.Errorf("%s: none has %d items, first seen %v, %v; want ErrUserNotFound", when, st.Items, st.FirstSeen, err)
		}
		if st, err := fx.h.User("default", "u"); err != nil || st.Items != 1 || st.FirstSeen.IsZero() {
			t.Errorf("%s: u has %d items, first seen %v, %v; want its item", when, st.Items, st.FirstSeen, err)
		}
		fx.restart(true, Options{})
	}
}

// recordedExport records items for the user and returns its export.
func recordedExport(t *testing.T, h *HotSet, ns, user string, items ...string) []byte {
	t.Helper()
	record(t, h, ns, user, items...)
	data, err := h.Export(ns, user)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestImportPastItsWindowMakesNoUser: an export whose items have all left
// the window since, imported for a user with no history (never seen, or
// gone past its window), makes no user either: Import says it wrote
// nothing, no new user is counted, nothing is listed or stored, in memory
// or once restarted.
func TestImportPastItsWindowMakesNoUser(t *testing.T) {
	clock, advance := newTestClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	fx := newFixture(t, Options{Now: clock})
	data := recordedExport(t, fx.h, "push", "src", "a")
	advance(9 * 24 * time.Hour) // past push's window of 7 days
	before := fx.h.Stats().Namespaces["push"].NewUsers
	for _, user := range []string{"never", "src"} {
		for _, replace := range []bool{false, true} {
			if imported, err := fx.h.Import("push", user, data, replace, 1<<20); err != nil || imported {
				t.Errorf("import (replace %v) for %s, of no history: imported %v, %v; want nothing written", replace, user, imported, err)
			}
		}
	}
	if n := fx.h.Stats().Namespaces["push"].NewUsers - before; n != 0 {
		t.Errorf("%d new users counted, want none", n)
	}
	if err := fx.h.Flush(); err != nil { // src's own record, written gone
		t.Fatal(err)
	}
	for _, when := range []string{"imported", "restarted"} {
		for _, user := range []string{"never", "src"} {
			neverSeen(t, fx.h, "push", user, when)
		}
		if users, err := fx.h.Users("push", "", 0); err != nil || len(users) != 0 {
			t.Errorf("%s: users %q, %v; want none", when, users, err)
		}
		fx.restart(false, Options{Now: clock})
	}
	offDisk(t, fx, "push", "never", "restarted")
}

// TestImportIntoAGoneUserTakesTheNamespacesProfile: a user gone past its
// window but still in memory takes an import as a call takes it: made
// anew with the namespace's profile of the day, so an export of that
// profile is imported, and one of the profile the user was gone with is
// refused, as it is once the user is no longer in memory.
func TestImportIntoAGoneUserTakesTheNamespacesProfile(t *testing.T) {
	clock, advance := newTestClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	fx := newFixture(t, Options{Now: clock})
	old := recordedExport(t, fx.h, "push", "gone", "a")
	longer := userfilter.Profile{Window: 14 * 24 * time.Hour, Granularity: 24 * time.Hour}
	if _, err := fx.h.SetNamespaces([]Namespace{defaultNS[0], {Name: "push", Profile: longer}}); err != nil {
		t.Fatal(err)
	}
	data := recordedExport(t, fx.h, "push", "src", "b")
	advance(8 * 24 * time.Hour) // past gone's window of 7 days, inside src's of 14
	if _, err := fx.h.Import("push", "gone", old, false, 1<<20); !errors.Is(err, ErrBadImport) {
		t.Errorf("an import of the profile gone was made with: %v, want ErrBadImport", err)
	}
	if imported, err := fx.h.Import("push", "gone", data, false, 1<<20); err != nil || !imported {
		t.Fatalf("an import of the namespace's profile: imported %v, %v", imported, err)
	}
	st, err := fx.h.User("push", "gone")
	if err != nil || st.Items != 1 || st.Window != int64(longer.Window/time.Second) {
		t.Fatalf("after the import: %d items, window %v, %v; want src's item and a window of %v", st.Items, st.Window, err, longer.Window)
	}
}

// TestStoredNoHistoryIsNeverSeen: a user of a namespace without a window
// whose stored filter never recorded an item (as builds that made a user
// of an import of such a filter wrote it) answers as a user never seen:
// no stats, no export, no peek, nothing seen; a call makes it anew.
func TestStoredNoHistoryIsNeverSeen(t *testing.T) {
	fx := newFixture(t, Options{})
	if err := fx.st.WriteBack([]storage.Write{{NS: "default", User: "old", Value: emptyOf(t, fx.h, "default")}}, nil); err != nil {
		t.Fatal(err)
	}
	fx.restart(true, Options{})
	if st, err := fx.h.Peek("default", "old"); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("Peek: %d items, first seen %v, %v; want ErrUserNotFound", st.Items, st.FirstSeen, err)
	}
	neverSeen(t, fx.h, "default", "old", "stored")
	if s := seen(t, fx.h, "default", "old", "a"); s[0] {
		t.Errorf("a seen by a user with no history")
	}
	record(t, fx.h, "default", "old", "a")
	if st, err := fx.h.User("default", "old"); err != nil || st.Items != 1 || st.FirstSeen.IsZero() {
		t.Errorf("after a call: %d items, first seen %v, %v; want its item", st.Items, st.FirstSeen, err)
	}
}

// TestStoredNoHistoryIsNotListed: a stored user without a window that
// never recorded an item, which answers as never seen, is not listed
// either, nor does it take a place in a page; a call that records makes it
// a listed user again.
func TestStoredNoHistoryIsNotListed(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "kept", "a")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := fx.st.WriteBack([]storage.Write{{NS: "default", User: "a-old", Value: emptyOf(t, fx.h, "default")}}, nil); err != nil {
		t.Fatal(err)
	}
	fx.restart(true, Options{})
	if users, err := fx.h.Users("default", "", 1); err != nil || !slices.Equal(users, []string{"kept"}) {
		t.Errorf("a page of one: %v, %v; want [kept]", users, err)
	}
	record(t, fx.h, "default", "a-old", "a")
	if users, err := fx.h.Users("default", "", 0); err != nil || !slices.Equal(users, []string{"a-old", "kept"}) {
		t.Errorf("after a call: %v, %v; want [a-old kept]", users, err)
	}
}

func TestImportRefusesAnotherNamespacesFilter(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "push", "src", "a") // a windowed namespace's filter
	data, err := fx.h.Export("push", "src")
	if err != nil {
		t.Fatal(err)
	}
	record(t, fx.h, "default", "dst", "c")
	for _, replace := range []bool{false, true} {
		for _, user := range []string{"dst", "newbie"} {
			_, err := fx.h.Import("default", user, data, replace, 1<<20)
			var ie *ImportError
			if !errors.As(err, &ie) || !errors.Is(err, ErrBadImport) || !errors.Is(err, userfilter.ErrIncompatible) {
				t.Fatalf("replace %v, %s: err = %v, want an ImportError", replace, user, err)
			}
			// The reason names what differs, the namespace's value first.
			if !strings.Contains(ie.Reason, "window 0 against 7d, granularity 0 against 1d") {
				t.Errorf("replace %v, %s: reason %q", replace, user, ie.Reason)
			}
		}
	}
	if got := seen(t, fx.h, "default", "dst", "a", "c"); fmt.Sprint(got) != "[false true]" {
		t.Fatalf("refused imports changed the user: %v", got)
	}
	if _, err := fx.h.User("default", "newbie"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("a refused import created the user: %v", err)
	}
	if n := fx.h.Stats().NewUsers; n != 2 {
		t.Fatalf("new users %d, want 2 (src and dst)", n)
	}
}

func TestImportAcrossAProfileChange(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "old", "a")
	record(t, fx.h, "default", "old2", "b")
	before, err := fx.h.Export("default", "old")
	if err != nil {
		t.Fatal(err)
	}
	// The namespace's profile changes; stored filters keep theirs.
	if err := fx.h.Close(); err != nil {
		t.Fatal(err)
	}
	fx.h, err = New(fx.st, []Namespace{{Name: "default", Profile: userfilter.Profile{FPRate: 0.001}}},
		Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	record(t, fx.h, "default", "fresh", "z")
	after, err := fx.h.Export("default", "fresh")
	if err != nil {
		t.Fatal(err)
	}
	// An export of the user's own parameters comes back, merged or not.
	if _, err := fx.h.Import("default", "old", before, false, 1<<20); err != nil {
		t.Fatalf("merge of the user's own export: %v", err)
	}
	// A replace may bring the namespace's profile to an older filter.
	if _, err := fx.h.Import("default", "old", after, true, 1<<20); err != nil {
		t.Fatalf("replace with the namespace's profile: %v", err)
	}
	if got := seen(t, fx.h, "default", "old", "a", "z"); fmt.Sprint(got) != "[false true]" {
		t.Fatalf("after the replace: %v", got)
	}
	// A merge cannot: the parameters differ from the user's filter.
	_, err = fx.h.Import("default", "old2", after, false, 1<<20)
	var ie *ImportError
	if !errors.As(err, &ie) || !strings.Contains(ie.Reason, "than the user's (the user's against the filter's): fp_rate 0.01 against 0.001") {
		t.Fatalf("merge across the change: %v", err)
	}
	if got := seen(t, fx.h, "default", "old2", "b", "z"); fmt.Sprint(got) != "[true false]" {
		t.Fatalf("a refused merge changed the user: %v", got)
	}
}

func TestFlushesCountsRoundsThatWrote(t *testing.T) {
	fx := newFixture(t, Options{})
	for range 3 {
		if err := fx.h.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if n := fx.h.Stats().Flushes; n != 0 {
		t.Fatalf("flushes %d after rounds with nothing to write, want 0", n)
	}
	record(t, fx.h, "default", "u", "a")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := fx.h.Stats(); st.Flushes != 1 || st.FlushedUsers != 1 {
		t.Fatalf("flushes %d, flushed users %d, want 1 and 1", st.Flushes, st.FlushedUsers)
	}
}

func TestDryRunCreatesNoUser(t *testing.T) {
	fx := newFixture(t, Options{})
	res, err := fx.h.Filter("default", "ghost", []string{"a", "b", "a", "c"}, 2, userfilter.RecordNone)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Unseen) != "[a b]" || res.SeenCount != 0 || res.Recorded != 0 {
		t.Fatalf("dry run of a new user: %+v", res)
	}
	if _, err := fx.h.User("default", "ghost"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("stats after a dry run: %v, want ErrUserNotFound", err)
	}
	if st := fx.h.Stats(); st.NewUsers != 0 || st.HotUsers != 0 {
		t.Fatalf("a dry run created a user: %+v", st)
	}
	// A known user's dry run still sees what it recorded.
	record(t, fx.h, "default", "ghost", "b")
	res, err = fx.h.Filter("default", "ghost", []string{"a", "b", "c"}, 0, userfilter.RecordNone)
	if err != nil || fmt.Sprint(res.Unseen) != "[a c]" || res.SeenCount != 1 {
		t.Fatalf("dry run of a known user: %+v, %v", res, err)
	}
}

func TestWindowedNamespaceForgetsOldItems(t *testing.T) {
	clock, advance := newTestClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	fx := newFixture(t, Options{Now: clock})
	record(t, fx.h, "push", "u", "old")
	advance(9 * 24 * time.Hour)
	record(t, fx.h, "push", "u", "new")
	if got := seen(t, fx.h, "push", "u", "old", "new"); fmt.Sprint(got) != "[false true]" {
		t.Fatalf("window: %v", got)
	}
	st, err := fx.h.User("push", "u")
	if err != nil || len(st.Generations) != 1 {
		t.Fatalf("stats %+v err %v: want one generation left", st, err)
	}
}

// In a windowed namespace the seen route records again an item seen in an
// older bucket only, so that it stays seen a whole window from this call,
// after a crash too (its journal record carries it, in this call's bucket);
// items the newest bucket holds are not recorded, so a user sending the
// same items again and again appends no journal record that no write-back
// would retire.
func TestSeenRouteRecordsAgainOnlyItemsOfOlderBuckets(t *testing.T) {
	day := 24 * time.Hour
	clock, advance := newTestClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	fx := newFixture(t, Options{Now: clock})
	rec := func(items ...string) Result {
		t.Helper()
		res, err := fx.h.Record("push", "u", items)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	rec("a", "b")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	before := fx.h.Stats()
	for range 3 {
		if res := rec("a", "b"); res.SeenCount != 2 || res.Recorded != 0 {
			t.Fatalf("/seen again in the same bucket: %+v, want 2 seen and none recorded", res)
		}
	}
	if after := fx.h.Stats(); after.JournalAppends != before.JournalAppends || after.DirtyUsers != 0 {
		t.Fatalf("/seen of items the newest bucket holds appended %d journal records (dirty users %d)",
			after.JournalAppends-before.JournalAppends, after.DirtyUsers)
	}
	if _, j, err := fx.st.Load("push", "u"); err != nil || len(j) != 0 {
		t.Fatalf("journal after /seen of items already in the newest bucket: %d records, err %v", len(j), err)
	}
	// A day later a is recorded again, in the new bucket, and journalled.
	advance(day)
	if res := rec("a"); res.SeenCount != 1 || res.Recorded != 1 {
		t.Fatalf("/seen of an item of an older bucket: %+v, want 1 seen and 1 recorded", res)
	}
	if got := fx.h.Stats().JournalAppends - before.JournalAppends; got != 1 {
		t.Fatalf("journal records after /seen of an item of an older bucket: %d, want 1", got)
	}
	// A crash, then a week after the first recording: b left the window,
	// a, replayed into the bucket it was recorded again in, did not.
	fx.restart(false, Options{Now: clock})
	advance(7 * day)
	if got := seen(t, fx.h, "push", "u", "a", "b"); fmt.Sprint(got) != "[true false]" {
		t.Fatalf("a and b seen %v after the crash, 8 days after b and 7 after a was recorded again; want [true false]", got)
	}
}

// ttlStore is the real store, keeping the expiry the hot set asks of each
// journal record (ttls) and of each written-back filter (filterTTLs), by
// namespace.
type ttlStore struct {
	*storage.Store
	mu         sync.Mutex
	ttls       map[string]time.Duration
	filterTTLs map[string]time.Duration
}

func newTTLStore(t *testing.T) *ttlStore {
	return &ttlStore{Store: openStore(t, t.TempDir()), ttls: map[string]time.Duration{},
		filterTTLs: map[string]time.Duration{}}
}

// newTTLHotSet is a hot set of defaultNS over a ttlStore, both closed at
// the test's end.
func newTTLHotSet(t *testing.T, opts Options) (*ttlStore, *HotSet) {
	t.Helper()
	st := newTTLStore(t)
	t.Cleanup(func() { st.Close() })
	if opts.FlushInterval == 0 {
		opts.FlushInterval = time.Hour
	}
	h, err := New(st, defaultNS, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return st, h
}

func (s *ttlStore) Append(ns, user string, value []byte, ttl time.Duration) (uint64, error) {
	s.mu.Lock()
	s.ttls[ns] = ttl
	s.mu.Unlock()
	return s.Store.Append(ns, user, value, ttl)
}

func (s *ttlStore) WriteBack(writes []storage.Write, merge storage.MergeFunc) error {
	s.mu.Lock()
	for _, w := range writes {
		s.filterTTLs[w.NS] = w.TTL
	}
	s.mu.Unlock()
	return s.Store.WriteBack(writes, merge)
}

// A journal record is kept as long as its items may test seen: in a
// windowed namespace up to the window plus one granularity after the
// call; without a window for good.
func TestJournalRecordsLastAsLongAsTheirItemsTestSeen(t *testing.T) {
	st, h := newTTLHotSet(t, Options{})
	record(t, h, "default", "u", "a")
	record(t, h, "push", "u", "a")
	st.mu.Lock()
	defer st.mu.Unlock()
	if ttl, ok := st.ttls["default"]; !ok || ttl != 0 {
		t.Errorf("default: journal record expires after %v (journalled %v), want never", ttl, ok)
	}
	p := defaultNS[1].Profile
	if ttl := st.ttls["push"]; ttl < p.Window+p.Granularity {
		t.Errorf("push: journal record expires after %v, want at least the window and a granularity, %v", ttl, p.Window+p.Granularity)
	}
}

// A written-back filter of a windowed namespace expires from the store
// once every item in it has left the window (so a user who stops coming
// takes no disk for good); one without a window never does.
func TestWrittenBackFilterExpiresWithItsWindow(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	st, h := newTTLHotSet(t, Options{Now: func() time.Time { return now }})
	record(t, h, "default", "u", "a")
	record(t, h, "push", "u", "a")
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if ttl, ok := st.filterTTLs["default"]; !ok || ttl != 0 {
		t.Errorf("default: written-back filter expires after %v (written %v), want never", ttl, ok)
	}
	p := defaultNS[1].Profile
	if ttl, ok := st.filterTTLs["push"]; !ok || ttl < p.Window || ttl > p.Window+p.Granularity {
		t.Errorf("push: written-back filter expires after %v (written %v), want between the window %v and a granularity more",
			ttl, ok, p.Window)
	}
}

func TestUserStats(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "s", "a", "b", "c")
	st, err := fx.h.User("default", "s")
	if err != nil {
		t.Fatal(err)
	}
	if st.Items != 3 || !st.Hot || !st.Dirty || st.LastSeen.IsZero() {
		t.Fatalf("stats %+v", st)
	}
	fx.restart(true, Options{})
	st, _ = fx.h.User("default", "s")
	if st.Items != 3 || st.Hot || st.Dirty {
		t.Fatalf("stats after restart %+v", st)
	}
}

func TestRecoverFoldsPendingJournals(t *testing.T) {
	fx := newFixture(t, Options{})
	for u := 0; u < 50; u++ {
		record(t, fx.h, "default", fmt.Sprintf("u%d", u), "a")
	}
	fx.restart(false, Options{})
	if fx.h.Ready() {
		t.Fatal("ready before Recover")
	}
	if _, err := fx.h.Recover(); err != nil {
		t.Fatal(err)
	}
	if !fx.h.Ready() {
		t.Fatal("not ready after Recover")
	}
	n := 0
	if err := fx.st.JournalUsers(func(ns, user string) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("%d users still have a journal after Recover (err %v)", n, err)
	}
	if !seen(t, fx.h, "default", "u7", "a")[0] {
		t.Fatal("recovered user lost its item")
	}
}

// Recover writes back the users whose journals it folds in, not those a
// call has changed since the start: the write-back loop writes those once
// they have been dirty for the flush interval, which lets the API's log of
// answers keep a keyed call's answer before its journal record goes.
// Written back by Recover, a call's record went at once, and a crash right
// after gave the call's retry the next items instead of its answer.
func TestRecoverLeavesCallsSinceTheStartToTheWriteBackLoop(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "old", "a")
	record(t, fx.h, "default", "called", "a")
	fx.restart(false, Options{})
	record(t, fx.h, "default", "called", "b") // loads it, journal and all
	record(t, fx.h, "default", "new", "a")
	if _, err := fx.h.Recover(); err != nil {
		t.Fatal(err)
	}
	journal := func(user string) int { return fx.journalLen("default", user) }
	if n := journal("old"); n != 0 {
		t.Fatalf("old: %d journal records after Recover, want none", n)
	}
	for _, user := range []string{"called", "new"} {
		if n := journal(user); n == 0 {
			t.Fatalf("%s: its call's journal record was written back by Recover", user)
		}
		if st, err := fx.h.User("default", user); err != nil || !st.Dirty {
			t.Fatalf("%s: %+v, %v; want dirty, for the write-back loop", user, st, err)
		}
	}
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"called", "new"} {
		if n := journal(user); n != 0 {
			t.Fatalf("%s: %d journal records after a write-back", user, n)
		}
		if !allTrue(seen(t, fx.h, "default", user, "a")) {
			t.Fatalf("%s lost its item", user)
		}
	}
}

// Recover folds in the journals it finds: a user whose journal is gone by
// the time Recover comes to it has nothing to fold in, and is no failure.
// Its journal expired (a windowed namespace's records outlive their window
// by one bucket only, and a process down longer finds them expired), or
// the user was erased meanwhile by a call: Recover failed with "user not
// found" for each such user, which the start logs as an error.
func TestRecoverPassesOverUsersWhoseJournalIsGone(t *testing.T) {
	fx := newFixture(t, Options{})
	fx.ns = append(append([]Namespace(nil), defaultNS...),
		Namespace{Name: "brief", Profile: userfilter.Profile{Window: time.Second, Granularity: time.Second}})
	fx.restart(true, Options{})
	record(t, fx.h, "brief", "expired", "a") // never written back: its journal only
	record(t, fx.h, "default", "kept", "a")
	fx.restart(false, Options{})
	time.Sleep(2*time.Second + 100*time.Millisecond) // past the window and its bucket
	if users, err := fx.h.Recover(); err != nil || users != 1 {
		t.Fatalf("Recover: %d users, %v; want 1 user (kept), no error", users, err)
	}
	if !seen(t, fx.h, "default", "kept", "a")[0] {
		t.Fatal("kept lost its item")
	}
}

func openStoreOrDie(dir string) *storage.Store {
	st, err := storage.Open(storage.DefaultOptions(dir).WithMinFreeBytes(-1))
	if err != nil {
		panic(err)
	}
	return st
}

// gatedStore is the real store with write-backs held at a gate: they start,
// say so on entered, and go on when release is closed.
type gatedStore struct {
	*storage.Store
	entered chan struct{}
	release chan struct{}
}

func (g *gatedStore) WriteBack(writes []storage.Write, merge storage.MergeFunc) error {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.release
	return g.Store.WriteBack(writes, merge)
}

// A call for a user that was evicted and whose write-back is under way is
// served from memory at once (it used to spin until the store write ended)
// and loses nothing, then or after a reload.
func TestCallDuringEvictedUsersWriteBack(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	g := &gatedStore{Store: st, entered: make(chan struct{}, 1), release: make(chan struct{})}
	// A budget of one byte in one shard: each new user evicts the last.
	h, err := New(g, defaultNS, Options{CacheBytes: 1, Shards: 1, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	record(t, h, "default", "a", "a1")
	record(t, h, "default", "b", "b1") // evicts a, dirty
	flushed := make(chan error, 1)
	go func() { flushed <- h.Flush() }()
	<-g.entered // a's write-back is under way and held

	answered := make(chan Result, 1)
	go func() {
		res, err := h.Filter("default", "a", []string{"a1", "a2"}, 0, userfilter.RecordReturned)
		if err != nil {
			t.Error(err)
		}
		answered <- res
	}()
	var res Result
	var open sync.Once
	select {
	case res = <-answered:
	case <-time.After(10 * time.Second):
		t.Error("a call for an evicted user waited for its write-back")
		open.Do(func() { close(g.release) })
		res = <-answered
	}
	if len(res.Unseen) != 1 || res.Unseen[0] != "a2" {
		t.Errorf("a during its write-back: unseen %v, want [a2]", res.Unseen)
	}
	open.Do(func() { close(g.release) })
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	record(t, h, "default", "c", "c1") // evicts a again
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := seen(t, h, "default", "a", "a1", "a2", "a3"); !got[0] || !got[1] || got[2] {
		t.Errorf("a after reload: seen %v, want [true true false]", got)
	}
}

// A burst of changes leaves no dirty-list array behind once written back.
func TestDirtyListShrinksAfterWriteBack(t *testing.T) {
	fx := newFixture(t, Options{Shards: 1})
	for u := range 1000 {
		record(t, fx.h, "default", fmt.Sprintf("u%d", u), "x")
	}
	s := fx.h.shards[0]
	s.mu.Lock()
	before := cap(s.dirty.items)
	s.mu.Unlock()
	if before < 1000 {
		t.Fatalf("dirty list holds %d slots for 1000 dirty users", before)
	}
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	after := cap(s.dirty.items)
	s.mu.Unlock()
	if after > 64 {
		t.Errorf("dirty list keeps %d slots after write-back (had %d)", after, before)
	}
}

func TestMergeFiltersKeepsTheValueWhenItCoversWhatIsStored(t *testing.T) {
	f, err := userfilter.New(userfilter.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	f.Add([]string{"a", "b"}, now)
	stored, _ := f.MarshalBinary()
	f.Add([]string{"c"}, now)
	value, _ := f.MarshalBinary()
	got, err := MergeFilters(stored, value)
	if err != nil {
		t.Fatal(err)
	}
	if &got[0] != &value[0] {
		t.Error("a value covering the stored filter was merged and encoded again")
	}
	// The other way round the stored filter has an item the value lacks:
	// the answer is a merge holding both.
	older, _ := userfilter.New(userfilter.DefaultProfile())
	older.Add([]string{"z"}, now)
	olderRaw, _ := older.MarshalBinary()
	got, err = MergeFilters(olderRaw, stored)
	if err != nil {
		t.Fatal(err)
	}
	m, err := userfilter.Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range []string{"a", "b", "z"} {
		if !m.Test(it, now) {
			t.Errorf("%q unseen after the merge", it)
		}
	}
}

// A user larger than a shard's share of the budget stays hot, and costs
// the other users of its shard nothing, while the whole set is under
// budget; once the set is over, the budget holds all the same.
func TestAUserLargerThanItsShardsShareStaysHot(t *testing.T) {
	const budget = 512 << 10 // 128 KiB a shard
	fx := newFixture(t, Options{CacheBytes: budget, Shards: 4})
	items := make([]string, 1000)
	// Usage and evictions, not Stats, which reads the store's size from
	// its directory: thousands of calls of it took this test half a
	// minute under the race detector on a loaded machine.
	for n := 0; ; n++ {
		if b, _ := fx.h.Usage(); b > budget/4+budget/8 {
			break
		}
		for i := range items {
			items[i] = fmt.Sprintf("item-%d-%d", n, i)
		}
		record(t, fx.h, "default", "huge", items...)
	}
	for u := 0; ; u++ {
		if b, _ := fx.h.Usage(); b >= budget*7/8 {
			break
		}
		record(t, fx.h, "default", fmt.Sprintf("u%d", u), "x")
		if n := evictions(fx.h); n != 0 {
			b, _ := fx.h.Usage()
			t.Fatalf("%d evictions with %d of %d bytes held, after u%d", n, b, budget, u)
		}
	}
	if hotEntry(fx.h, "huge") == nil {
		t.Fatal("the large user was evicted")
	}
	// Over budget: the shards over their share give users up.
	for u := 0; evictions(fx.h) < 2000; u++ {
		if u == 50000 {
			t.Fatalf("no eviction over budget: %+v", fx.h.Stats())
		}
		record(t, fx.h, "default", fmt.Sprintf("v%d", u), "x")
		if b, _ := fx.h.Usage(); b > budget {
			t.Fatalf("cache holds %d bytes over budget %d after v%d", b, budget, u)
		}
	}
}

// A budget of fewer users than shards holds: a shard over its share gives
// up its last user when the whole set is over budget.
func TestABudgetOfFewerUsersThanShardsHolds(t *testing.T) {
	const budget = 16 << 10
	fx := newFixture(t, Options{CacheBytes: budget}) // 64 shards of 256 bytes, under one user each
	for u := range 300 {
		record(t, fx.h, "default", fmt.Sprintf("u%d", u), "a", "b")
		if b := fx.h.Stats().CacheBytes; b > budget {
			t.Fatalf("cache holds %d bytes over budget %d after u%d", b, budget, u)
		}
	}
	for u := 0; u < 300; u += 7 {
		if got := seen(t, fx.h, "default", fmt.Sprintf("u%d", u), "a", "b"); !allTrue(got) {
			t.Fatalf("u%d lost history through eviction: %v", u, got)
		}
	}
}

// An import gives the user another filter, of any size: the user is
// accounted at that size and the budget holds, as after a call that
// grows a filter.
func TestImportedFiltersCountAgainstTheBudget(t *testing.T) {
	const budget = 256 << 10
	fx := newFixture(t, Options{CacheBytes: budget, Shards: 1})
	items := make([]string, 40000)
	for i := range items {
		items[i] = fmt.Sprintf("item-%d", i)
	}
	if _, err := fx.h.Record("default", "big", items); err != nil {
		t.Fatal(err)
	}
	data, err := fx.h.Export("default", "big")
	if err != nil {
		t.Fatal(err)
	}
	f, err := userfilter.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(f.MemoryBytes())
	if size < budget/4 {
		t.Fatalf("the exported filter takes %d bytes, want a quarter of the budget or more", size)
	}
	for _, replace := range []bool{true, false} {
		for u := range 6 {
			user := fmt.Sprintf("copy-%v-%d", replace, u)
			before := fx.h.Stats().CacheBytes
			if _, err := fx.h.Import("default", user, data, replace, 1<<30); err != nil {
				t.Fatal(err)
			}
			st := fx.h.Stats()
			if u == 0 && replace && st.CacheBytes-before < size/2 { // the budget takes it in without evicting
				t.Fatalf("import of %d bytes into %s (replace %v) accounted as %d bytes", size, user, replace, st.CacheBytes-before)
			}
			if st.CacheBytes > budget {
				t.Fatalf("cache holds %d bytes over budget %d after importing into %s (replace %v)", st.CacheBytes, budget, user, replace)
			}
		}
	}
	if b, sum := fx.h.Stats().CacheBytes, hotSize(fx.h); b != sum {
		t.Fatalf("cache bytes %d, but its users take %d", b, sum)
	}
}

// hotSize is what the hot users of h take, each measured anew.
// evictions is Stats().Evictions without the rest of Stats.
func evictions(h *HotSet) uint64 {
	var n uint64
	for _, info := range h.nss.Load().byIndex {
		n += info.c.evictions.Load()
	}
	return n
}

func hotSize(h *HotSet) int64 {
	var hot []*entry
	for _, s := range h.shards {
		s.mu.Lock()
		hot = append(hot, s.lru.Values()...)
		s.mu.Unlock()
	}
	var sum int64
	for _, e := range hot { // lock order is entry before shard
		e.mu.Lock()
		sum += int64(entrySize(e))
		e.mu.Unlock()
	}
	return sum
}

// Under calls from many goroutines for users of mixed sizes, a few of them
// larger than a shard's share, the accounting stays exact and the budget
// holds once one more call finds the set over it; evicted users keep their
// history. A shard over its share with one user can give up nothing: the
// budget holds but for such users' excess over their share.
func TestBudgetHeldUnderConcurrentCallsOfMixedSizes(t *testing.T) {
	const (
		budget  = 256 << 10 // the big users pass a share with 40,000 items each
		shards  = 4
		share   = budget / shards
		workers = 8
		small   = 3000 // users of a few items, more than the budget holds
		ops     = 200  // a worker's calls
	)
	fx := newFixture(t, Options{CacheBytes: budget, Shards: shards})
	var mu sync.Mutex
	want := map[string][]string{} // every item recorded, by user
	inParallel(t, workers, func(w int) error {
		for i := range ops {
			user := fmt.Sprintf("u%d", (w*7919+i*104729)%small)
			n := 1 + i%3
			if i%25 == 0 {
				// Two users grow past a share, a batch at a time.
				user, n = fmt.Sprintf("big%d", w%2), 1250
			}
			items := make([]string, n)
			for j := range items {
				items[j] = fmt.Sprintf("%d-%d-%d", w, i, j)
			}
			if _, err := fx.h.Record("default", user, items); err != nil {
				return err
			}
			mu.Lock()
			want[user] = append(want[user], items...)
			mu.Unlock()
			if i%5 == 0 {
				if _, err := fx.h.Check("default", fmt.Sprintf("big%d", i%2), items[:1], nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
	// The load stopped: one more call sweeps whatever a sweep running
	// concurrently with the last ones left over.
	record(t, fx.h, "default", "last", "x")
	mu.Lock()
	want["last"] = []string{"x"}
	mu.Unlock()
	for _, user := range []string{"big0", "big1"} {
		if st, err := fx.h.Peek("default", user); err != nil || st.MemoryBytes < share {
			t.Fatalf("%s takes %d bytes (%v), want more than a share (%d)", user, st.MemoryBytes, err, share)
		}
	}
	var sum int64
	var sh []string
	over := false
	for _, s := range fx.h.shards {
		s.mu.Lock()
		sum += s.bytes
		sh = append(sh, fmt.Sprintf("%d bytes in %d users", s.bytes, s.lru.Len()))
		over = over || s.bytes > s.budget && s.lru.Len() > 1
		s.mu.Unlock()
	}
	st := fx.h.Stats()
	if st.CacheBytes != sum || fx.h.hotBytes.Load() != sum {
		t.Fatalf("cache bytes %d, summed by shard %d, by the set %d", st.CacheBytes, sum, fx.h.hotBytes.Load())
	}
	if hot := hotSize(fx.h); st.CacheBytes != hot {
		t.Fatalf("cache bytes %d, but its users take %d", st.CacheBytes, hot)
	}
	if st.CacheBytes > budget && over {
		t.Fatalf("cache holds %d bytes over budget %d with a shard over its share that can give users up: %v", st.CacheBytes, budget, sh)
	}
	if st.Evictions == 0 {
		t.Fatalf("no eviction: %+v", st)
	}
	for user, items := range want {
		if got := seen(t, fx.h, "default", user, items...); !allTrue(got) {
			t.Fatalf("%s lost history: %d of %d items seen", user, len(items)-strings.Count(fmt.Sprint(got), "false"), len(items))
		}
	}
}

// A call that finds the set over budget while another call sweeps does not
// sweep; should the sweep have passed its shard already, the set stays
// over budget until a later call. The write-back loop sweeps then, so the
// budget holds within a round even when no call comes.
func TestBudgetHeldWhenASweepWasUnderWay(t *testing.T) {
	const budget = 64 << 10
	fx := newFixture(t, Options{CacheBytes: budget, Shards: 2})
	info := fx.h.nss.Load().byName["default"]
	// fill records new users of shard i until cond holds.
	u := 0
	fill := func(i int, cond func() bool) {
		for ; !cond(); u++ {
			user := fmt.Sprintf("u%d", u)
			if fx.h.shardOf(fx.h.key(info, user, 0)) == fx.h.shards[i] {
				record(t, fx.h, "default", user, "x")
			}
		}
	}
	s0, s1 := fx.h.shards[0], fx.h.shards[1]
	bytesOf := func(s *shard) int64 { s.mu.Lock(); defer s.mu.Unlock(); return s.bytes }
	// Shard 0 over its share while the set is under budget, then shard 1
	// under its share until the set is just under budget.
	fill(0, func() bool { return bytesOf(s0) > budget*3/4 })
	fill(1, func() bool { return fx.h.hotBytes.Load() > budget-1<<10 })
	if st := fx.h.Stats(); st.Evictions != 0 || st.CacheBytes > budget || bytesOf(s1) > s1.budget {
		t.Fatalf("want shard 0 over its share, shard 1 under, the set under budget and no eviction: %d and %d bytes, %+v", bytesOf(s0), bytesOf(s1), st)
	}
	// A sweep is under way (this test holds it) when a call takes the set
	// over budget in shard 1, under its share: nothing is evicted.
	fx.h.sweepMu.Lock()
	fill(1, func() bool { return fx.h.hotBytes.Load() > budget })
	fx.h.sweepMu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); fx.h.Stats().CacheBytes > budget; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the set stays at %d bytes over budget %d with shard 0 at %d, over its share", fx.h.Stats().CacheBytes, budget, bytesOf(s0))
		}
	}
}

// A user grown by calls in many goroutines at once is accounted at its
// size after the last of them: each call's size is applied in the order of
// the changes, so an earlier call's smaller size is never applied after a
// later one's.
func TestAUserGrownConcurrentlyIsAccountedAtItsLastSize(t *testing.T) {
	const workers, calls = 8, 100
	fx := newFixture(t, Options{})
	inParallel(t, workers, func(w int) error {
		for i := range calls {
			n := 1 + i%40
			if i == calls-1 {
				n = 1000 // the last calls grow the user at once
			}
			items := make([]string, n)
			for j := range items {
				items[j] = fmt.Sprintf("%d-%d-%d", w, i, j)
			}
			if _, err := fx.h.Record("default", "grown", items); err != nil {
				return err
			}
		}
		return nil
	})
	if st, hot := fx.h.Stats(), hotSize(fx.h); st.CacheBytes != hot {
		t.Fatalf("the user is accounted at %d bytes, but takes %d", st.CacheBytes, hot)
	}
}

// inParallel runs work(w) for w < workers in goroutines of their own, and
// fails t with the first error any returned once all are done.
func inParallel(t *testing.T, workers int, work func(w int) error) {
	t.Helper()
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := work(w); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// newTestClock returns a hot set's clock (Options.Now) that starts at t,
// and the function that moves it on; both safe for the hot set's
// goroutines.
func newTestClock(t time.Time) (now func() time.Time, advance func(time.Duration)) {
	var mu sync.Mutex
	now = func() time.Time { mu.Lock(); defer mu.Unlock(); return t }
	advance = func(d time.Duration) { mu.Lock(); t = t.Add(d); mu.Unlock() }
	return now, advance
}
