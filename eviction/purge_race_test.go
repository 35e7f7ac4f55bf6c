package eviction

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// heldLoadStore is the real store whose first load of user, once read,
// waits at a gate (it says so on entered, goes on once release is closed).
type heldLoadStore struct {
	*storage.Store
	user    string
	held    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *heldLoadStore) Load(ns, user string) ([]byte, []storage.JournalEntry, error) {
	f, j, err := g.Store.Load(ns, user)
	if user == g.user && !g.held.Swap(true) {
		g.entered <- struct{}{}
		<-g.release
	}
	return f, j, err
}

// A call under way for a namespace taken out, whose load of its user read
// the store before a purge of the namespace erased it, does not bring the
// purged history back: neither the one call, which would keep the user in
// memory to be written back, nor a bulk recording, which writes it.
func TestPurgeNamespaceDuringALoadErasesTheUser(t *testing.T) {
	for name, call := range map[string]func(h *HotSet) error{
		"filter": func(h *HotSet) error {
			_, err := h.Filter("push", "u", []string{"new"}, 0, userfilter.RecordReturned)
			return err
		},
		"bulk": func(h *HotSet) error {
			_, err := h.RecordBulk("push", "u", []string{"new"})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) { testPurgeDuringALoad(t, call) })
	}
}

func testPurgeDuringALoad(t *testing.T, call func(h *HotSet) error) {
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() })
	g := &heldLoadStore{Store: st, entered: make(chan struct{}, 1), release: make(chan struct{})}
	h1, err := New(g, defaultNS, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	record(t, h1, "push", "u", "old")
	if err := h1.Close(); err != nil { // written back; u is cold in the next
		t.Fatal(err)
	}
	h, err := New(g, defaultNS, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	g.user = "u"
	answered := make(chan error, 1)
	go func() { answered <- call(h) }()
	<-g.entered
	if _, err := h.SetNamespaces(defaultNS[:1]); err != nil {
		t.Fatal(err)
	}
	purged := make(chan error, 1)
	go func() {
		n, err := h.PurgeNamespace("push")
		if err == nil && n != 1 {
			err = fmt.Errorf("%d users purged, want 1", n)
		}
		purged <- err
	}()
	// The load goes on once the purge of push (index 1) has begun.
	for c := h.nss.Load().byIndex[1].c; c.purges.Load() == 0; {
		time.Sleep(time.Millisecond)
	}
	close(g.release)
	if err := <-purged; err != nil {
		t.Fatalf("PurgeNamespace: %v", err)
	}
	t.Logf("the call under way: %v", <-answered)
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.SetNamespaces(defaultNS); err != nil {
		t.Fatal(err)
	}
	if seen(t, h, "push", "u", "old")[0] {
		t.Error("an item of a purged namespace is seen after the purge")
	}
}
