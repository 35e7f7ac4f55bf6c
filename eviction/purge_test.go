package eviction

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// refusingStore is the real store with write-backs of one namespace
// failing while refuse is set, so that its users stay in memory with
// changes not written back.
type refusingStore struct {
	*storage.Store
	ns     string
	refuse atomic.Bool
}

// refusingHotSet is a hot set of the default namespace over a
// refusingStore of a new store that refuses the default namespace's
// writes while refuse is set; cleanup lets them through to close.
func refusingHotSet(t *testing.T, opts Options) (*HotSet, *refusingStore) {
	t.Helper()
	st := openStore(t, t.TempDir())
	rs := &refusingStore{Store: st, ns: "default"}
	h, err := New(rs, defaultNS, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rs.refuse.Store(false)
		h.Close()
		st.Close()
	})
	return h, rs
}

func (r *refusingStore) WriteBack(writes []storage.Write, merge storage.MergeFunc) error {
	if r.refuse.Load() && slices.ContainsFunc(writes, func(w storage.Write) bool { return w.NS == r.ns }) {
		return errors.New("refused for the test")
	}
	return r.Store.WriteBack(writes, merge)
}

func storedUsers(t *testing.T, st Store, ns string) []string {
	t.Helper()
	users, err := st.Users(ns, "", 0, storage.Hidden{})
	if err != nil {
		t.Fatal(err)
	}
	return users
}

// A namespace taken out and purged is erased from the store and from
// memory: users written back, users whose changes were still waiting for
// their write-back, and a user left hot by a call. No later write-back,
// restart or return of the namespace brings any of them back, and the
// namespace that stays served is untouched.
func TestPurgeNamespaceErasesATakenOutNamespace(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	rs := &refusingStore{Store: st, ns: "push"}
	h, err := New(rs, defaultNS, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	record(t, h, "push", "written", "a")
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	rs.refuse.Store(true)
	record(t, h, "push", "written", "b")
	record(t, h, "push", "pending", "a")
	record(t, h, "default", "d", "a")
	if nss, err := h.StoredNamespaces(); err != nil || len(nss) != 0 {
		t.Fatalf("stored and not served while both are served: %v (err %v)", nss, err)
	}
	if _, err := h.SetNamespaces(defaultNS[:1]); err != nil {
		t.Fatal(err)
	}
	if nss, err := h.StoredNamespaces(); err != nil || !slices.Equal(nss, []string{"push"}) {
		t.Fatalf("stored and not served once push was taken out: %v (err %v), want [push]", nss, err)
	}
	if n, err := h.PurgeNamespace("push"); err != nil || n != 2 {
		t.Fatalf("PurgeNamespace: %d users, err %v; want 2", n, err)
	}
	rs.refuse.Store(false)
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	if users := storedUsers(t, st, "push"); len(users) != 0 {
		t.Fatalf("push's users after the purge and a write-back: %v", users)
	}
	stats := checkNamespaceStats(t, h)
	if n := stats.Namespaces["push"]; n.HotUsers != 0 || n.CacheBytes != 0 {
		t.Errorf("push in memory after the purge: %+v", n)
	}
	if stats.DirtyUsers != 0 || h.evictedBytes.Load() != 0 {
		t.Errorf("after the purge and a write-back: %d dirty users, %d evicted bytes", stats.DirtyUsers, h.evictedBytes.Load())
	}
	if nss, err := h.StoredNamespaces(); err != nil || len(nss) != 0 {
		t.Errorf("namespaces stored and not served after the purge: %v (err %v)", nss, err)
	}

	// Served again, it starts empty; the other namespace kept its user.
	if _, err := h.SetNamespaces(defaultNS); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"written", "pending"} {
		if _, err := h.User("push", user); !errors.Is(err, ErrUserNotFound) {
			t.Errorf("push/%s served again after the purge: %v, want ErrUserNotFound", user, err)
		}
	}
	if got := seen(t, h, "default", "d", "a"); !allTrue(got) {
		t.Errorf("default/d after push's purge: %v", got)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, dir)
	defer st.Close()
	if users := storedUsers(t, st, "push"); len(users) != 0 {
		t.Fatalf("push's users after a restart: %v", users)
	}
	if users := storedUsers(t, st, "default"); !slices.Equal(users, []string{"d"}) {
		t.Fatalf("default's users after a restart: %v", users)
	}
}

// A served namespace is refused and keeps its users; a name never served
// and not stored is unknown.
func TestPurgeNamespaceRefusesAServedOrUnknownNamespace(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "push", "p", "a")
	if _, err := fx.h.PurgeNamespace("push"); !errors.Is(err, ErrNamespaceServed) {
		t.Fatalf("purging a served namespace: %v, want ErrNamespaceServed", err)
	}
	if got := seen(t, fx.h, "push", "p", "a"); !allTrue(got) {
		t.Fatalf("p after a refused purge: %v", got)
	}
	if _, err := fx.h.PurgeNamespace("never"); !errors.Is(err, ErrUnknownNamespace) {
		t.Fatalf("purging a namespace never served nor stored: %v, want ErrUnknownNamespace", err)
	}
	// Taken out with nothing stored (its only user erased): known, so
	// purging it erases nothing and is no error.
	if err := fx.h.Forget("push", "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.h.SetNamespaces(defaultNS[:1]); err != nil {
		t.Fatal(err)
	}
	if nss, err := fx.h.StoredNamespaces(); err != nil || len(nss) != 0 {
		t.Fatalf("a namespace taken out with nothing stored is listed as stored: %v (err %v)", nss, err)
	}
	if n, err := fx.h.PurgeNamespace("push"); err != nil || n != 0 {
		t.Fatalf("purging a taken-out namespace with nothing stored: %d users, err %v", n, err)
	}
}

// After a restart without a namespace, its stored users are listed as
// stored and not served, and purging it erases them.
func TestPurgeNamespaceLeftOutAtTheStart(t *testing.T) {
	fx := newFixture(t, Options{})
	for i := range 5 {
		record(t, fx.h, "push", fmt.Sprint("p", i), "a")
	}
	record(t, fx.h, "default", "d", "a")
	fx.ns = defaultNS[:1]
	fx.restart(true, Options{})
	if nss, err := fx.h.StoredNamespaces(); err != nil || !slices.Equal(nss, []string{"push"}) {
		t.Fatalf("stored and not served after the restart: %v (err %v), want [push]", nss, err)
	}
	if n, err := fx.h.PurgeNamespace("push"); err != nil || n != 5 {
		t.Fatalf("PurgeNamespace: %d users, err %v; want 5", n, err)
	}
	if users := storedUsers(t, fx.st, "push"); len(users) != 0 {
		t.Fatalf("push's users after the purge: %v", users)
	}
	if n, err := fx.h.PurgeNamespace("push"); !errors.Is(err, ErrUnknownNamespace) || n != 0 {
		t.Fatalf("purging it again: %d users, err %v; want ErrUnknownNamespace", n, err)
	}
	if got := seen(t, fx.h, "default", "d", "a"); !allTrue(got) {
		t.Fatalf("default/d after the purge: %v", got)
	}
}

// Purges and reloads run while calls go on in the namespace that stays
// (run with -race): every call is answered, and what it recorded stays.
func TestPurgeNamespaceWhileCallsGoOn(t *testing.T) {
	fx := newFixture(t, Options{FlushInterval: time.Millisecond, CacheBytes: 64 << 10})
	stop := goLoops(4, func(g, i int) bool {
		user := fmt.Sprint("g", g, "-", i%50)
		if _, err := fx.h.Filter("default", user, []string{fmt.Sprint("item", i)}, 0, userfilter.RecordReturned); err != nil {
			t.Error(err)
			return false
		}
		return true
	})
	defer stop()
	for round := range 20 {
		if _, err := fx.h.SetNamespaces(defaultNS); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			record(t, fx.h, "push", fmt.Sprint("p", i), fmt.Sprint("r", round))
		}
		if _, err := fx.h.SetNamespaces(defaultNS[:1]); err != nil {
			t.Fatal(err)
		}
		if n, err := fx.h.PurgeNamespace("push"); err != nil || n != 20 {
			t.Fatalf("round %d: PurgeNamespace: %d users, err %v; want 20", round, n, err)
		}
	}
	stop()
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	if users := storedUsers(t, fx.st, "push"); len(users) != 0 {
		t.Fatalf("push's users after the last purge: %v", users)
	}
	if users := storedUsers(t, fx.st, "default"); len(users) != 200 {
		t.Fatalf("default has %d users stored, want 200", len(users))
	}
}

// A write-back that fails batch after batch (a full disk) says so in a
// few of them and how many more: its error is logged on one line, which
// listed every batch, 165 KB at a stop of 200,000 users.
func TestAWriteBackFailingInManyBatchesSaysSoBriefly(t *testing.T) {
	h, rs := refusingHotSet(t, Options{FlushInterval: time.Hour})
	const users = 10 * writeBatch
	for u := range users {
		record(t, h, "default", fmt.Sprint("u", u), "a")
	}
	rs.refuse.Store(true)
	err := h.Flush()
	if err == nil {
		t.Fatal("a write-back the store refused succeeded")
	}
	if n := strings.Count(err.Error(), "refused for the test"); n > 3 || !strings.Contains(err.Error(), "and 7 more") {
		t.Fatalf("the store's error %d times in the write-back's, want 3 and how many more: %.300s", n, err)
	}
	if st := h.Stats(); st.DirtyUsers != users {
		t.Fatalf("%d users left dirty, want all %d", st.DirtyUsers, users)
	}
}
