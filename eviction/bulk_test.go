package eviction

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// A bulk load of many users leaves the hot set as it was: the served users
// stay in memory, and the loaded ones are in the store, across a restart.
func TestRecordBulkLeavesTheHotSetAlone(t *testing.T) {
	fx := newFixture(t, Options{CacheBytes: 64 << 10, Shards: 1})
	for i := range 20 {
		record(t, fx.h, "default", fmt.Sprint("served", i), "a", "b")
	}
	before := fx.h.Stats()
	for i := range 2000 {
		res, err := fx.h.RecordBulk("default", fmt.Sprint("imported", i), []string{"x", "y", "x"})
		if err != nil || res.Recorded != 2 || res.SeenCount != 0 {
			t.Fatalf("bulk %d: %+v %v", i, res, err)
		}
	}
	after := fx.h.Stats()
	if after.HotUsers != before.HotUsers || after.Evictions != before.Evictions {
		t.Fatalf("the bulk load changed the hot set: %d hot users, %d evictions before; %d, %d after",
			before.HotUsers, before.Evictions, after.HotUsers, after.Evictions)
	}
	if after.NewUsers != before.NewUsers+2000 {
		t.Errorf("new users %d, want %d", after.NewUsers, before.NewUsers+2000)
	}
	for i := range 20 {
		if st, err := fx.h.User("default", fmt.Sprint("served", i)); err != nil || !st.Hot {
			t.Fatalf("served%d after the bulk load: hot %v, %v", i, st.Hot, err)
		}
	}
	// Again: what is there is counted as seen, the new is recorded.
	res, err := fx.h.RecordBulk("default", "imported7", []string{"x", "z"})
	if err != nil || res.Recorded != 1 || res.SeenCount != 1 {
		t.Fatalf("bulk again: %+v %v", res, err)
	}
	fx.restart(false, Options{CacheBytes: 64 << 10, Shards: 1})
	for _, u := range []string{"imported0", "imported1999"} {
		if got := seen(t, fx.h, "default", u, "x", "y", "z"); !slices.Equal(got, []bool{true, true, false}) {
			t.Fatalf("%s after a restart: %v", u, got)
		}
	}
	if got := seen(t, fx.h, "default", "imported7", "x", "y", "z"); !allTrue(got) {
		t.Fatalf("imported7 after a restart: %v", got)
	}
}

// A user in memory is recorded as by Record, and stays in memory.
func TestRecordBulkOfAHotUser(t *testing.T) {
	fx := newFixture(t, Options{})
	record(t, fx.h, "default", "u", "a")
	res, err := fx.h.RecordBulk("default", "u", []string{"a", "b"})
	if err != nil || res.Recorded != 1 || res.SeenCount != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if st, err := fx.h.User("default", "u"); err != nil || !st.Hot || st.Items != 2 {
		t.Fatalf("stats %+v %v", st, err)
	}
}

// Bulk recordings and the one call for the same cold user, at once, lose
// nothing: each waits for the other's hold on the user.
func TestRecordBulkBesideTheOneCall(t *testing.T) {
	fx := newFixture(t, Options{})
	var wg sync.WaitGroup
	var items []string
	for g := range 8 {
		for i := range 25 {
			items = append(items, fmt.Sprint("g", g, "-", i))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				it := fmt.Sprint("g", g, "-", i)
				var err error
				if g%2 == 0 {
					_, err = fx.h.RecordBulk("default", "shared", []string{it})
				} else {
					_, err = fx.h.Filter("default", "shared", []string{it}, 0, 0)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	fx.restart(true, Options{})
	if got := seen(t, fx.h, "default", "shared", items...); !allTrue(got) {
		t.Fatalf("lost items: %v", got)
	}
}
