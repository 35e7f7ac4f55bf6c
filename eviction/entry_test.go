package eviction

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/seenapi/seenapi/userfilter"
)

// sizeClasses are Go's allocator size classes up to 512 bytes: an object
// takes the smallest one that fits it.
var sizeClasses = []uintptr{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240,
	256, 288, 320, 352, 384, 416, 448, 480, 512}

func TestEntryLayout(t *testing.T) {
	size := unsafe.Sizeof(entry{})
	own := size - unsafe.Sizeof(userfilter.Filter{})
	t.Logf("entry %d B: filter %d B, the hot set's own fields %d B with %d id bytes", size,
		unsafe.Sizeof(userfilter.Filter{}), own, idHeadLen)
	if !slices.Contains(sizeClasses, size) {
		t.Errorf("entry is %d B, not a size class: rebalance idHeadLen", size)
	}
	if own-idHeadLen > 28 {
		t.Errorf("the hot set's fields of an entry take %d B besides the id's first bytes, want at most 28", own-idHeadLen)
	}
}

func TestEntryAllocsFillSizeClasses(t *testing.T) {
	prev := -1
	for _, a := range entryAllocs {
		got := a.room + int(unsafe.Offsetof(entry{}.idHead))
		if !slices.Contains(sizeClasses, uintptr(got)) {
			t.Errorf("allocation of %d B (room %d) is not a size class", got, a.room)
		}
		if a.room <= prev {
			t.Errorf("room %d after %d: allocations must grow", a.room, prev)
		}
		prev = a.room
	}
	if prev < idOutside-1 {
		t.Errorf("largest room %d, want at least %d", prev, idOutside-1)
	}
}

func TestEntryKeepsIDAndNamespace(t *testing.T) {
	for _, n := range []int{0, 1, idHeadLen - 1, idHeadLen, idHeadLen + 1, 28, 29, 36, 253, idOutside - 1,
		idOutside, idOutside + 1, 1000} {
		buf := []byte(strings.Repeat("x", n))
		for i := range buf {
			buf[i] = byte('a' + i%26)
		}
		want := string(buf)
		// The entry must not alias the caller's bytes.
		user := unsafe.String(unsafe.SliceData(buf), len(buf))
		e := newEntry(7, user)
		for i := range buf {
			buf[i] = '#'
		}
		if got := e.id(); got != want || e.ns != 7 {
			t.Errorf("len %d: id %q ns %d, want %q ns 7", n, got, e.ns, want)
		}
	}
}

func TestEntryWithShortIDIsOneAllocation(t *testing.T) {
	for _, c := range []struct {
		id     string
		allocs float64
	}{{"user-0000001", 1}, {strings.Repeat("u", idOutside-1), 1}, {strings.Repeat("u", idOutside), 2}} {
		if got := testing.AllocsPerRun(100, func() { newEntry(0, c.id) }); got != c.allocs {
			t.Errorf("id of %d B: %v allocations, want %v", len(c.id), got, c.allocs)
		}
	}
}

func TestNewRefusesMoreNamespacesThanEntriesTellApart(t *testing.T) {
	fx := newFixture(t, Options{})
	nss := make([]Namespace, maxNamespaces+1)
	for i := range nss {
		nss[i] = Namespace{Name: fmt.Sprintf("ns%d", i), Profile: userfilter.DefaultProfile()}
	}
	if _, err := New(fx.st, nss, Options{}); err == nil {
		t.Fatalf("%d namespaces accepted", len(nss))
	}
	h, err := New(fx.st, nss[:maxNamespaces], Options{})
	if err != nil {
		t.Fatalf("%d namespaces: %v", maxNamespaces, err)
	}
	defer h.Close()
	// Users of the first and the last namespace stay apart.
	if _, err := h.Record("ns0", "u", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	last := nss[maxNamespaces-1].Name
	if _, err := h.Record(last, "u", []string{"b"}); err != nil {
		t.Fatal(err)
	}
	got, err := h.Check(last, "u", []string{"a", "b"}, nil)
	if err != nil || fmt.Sprint(got) != "[false true]" {
		t.Fatalf("%s: %v %v, want [false true]", last, got, err)
	}
	if _, err := h.User(nss[1].Name, "u"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("user of another namespace: %v, want ErrUserNotFound", err)
	}
}

func TestFlushLagIsAgeOfOldestUnwrittenChange(t *testing.T) {
	clock, advance := newTestClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	fx := newFixture(t, Options{Now: clock})
	advance(time.Hour)
	record(t, fx.h, "default", "old", "a")
	advance(1500 * time.Millisecond)
	record(t, fx.h, "default", "new", "a")
	advance(250 * time.Millisecond)
	if lag := fx.h.Stats().FlushLag; lag != 1750*time.Millisecond {
		t.Fatalf("flush lag %v, want 1.75s", lag)
	}
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	if lag := fx.h.Stats().FlushLag; lag != 0 {
		t.Fatalf("flush lag after write-back %v, want 0", lag)
	}
}

// A limited write-back round (the loop's) writes at most its limit of the
// users that are due, and every user overdue by a whole interval more, so
// that each round stays short without a backlog ever growing.
func TestLimitedWriteBackRoundWritesAllOverdueUsers(t *testing.T) {
	clock, advance := newTestClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	// The loop's own rounds wait for users an hour old: they write none here.
	fx := newFixture(t, Options{Now: clock, FlushInterval: time.Hour})
	advance(time.Second)
	for i := range 100 {
		record(t, fx.h, "default", fmt.Sprintf("old-%d", i), "a")
	}
	advance(1500 * time.Millisecond)
	for i := range 50 {
		record(t, fx.h, "default", fmt.Sprintf("new-%d", i), "a")
	}
	round := func(limit int, wantWritten, wantDirty int) {
		t.Helper()
		before := fx.h.Stats().FlushedUsers
		if err := fx.h.flushSome(1000, limit); err != nil {
			t.Fatal(err)
		}
		st := fx.h.Stats()
		if got := int(st.FlushedUsers - before); got != wantWritten || st.DirtyUsers != int64(wantDirty) {
			t.Fatalf("round with limit %d: wrote %d, %d left dirty; want %d and %d", limit, got, st.DirtyUsers, wantWritten, wantDirty)
		}
	}
	// 100 users due (1.5 s old, with 1 s to wait), 50 not yet: 10 written.
	round(10, 10, 140)
	// A second later the 90 left of the old ones are overdue (2.5 s, at
	// least twice 1 s): all written, and 10 of the 50 now due.
	advance(time.Second)
	round(10, 100, 40)
	// No limit: the rest.
	round(0, 40, 0)
}

// The flush lag counts from a change until it is written, through failed
// write-backs: a user whose write failed is retried an interval later,
// and that wait is no sign that its change was written. After a failing
// disk's first round the figure restarted from 0 with each failed round.
func TestFlushLagCountsFromTheChangeThroughFailedWriteBacks(t *testing.T) {
	clock, advance := newTestClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	h, rs := refusingHotSet(t, Options{FlushInterval: time.Hour, Now: clock})
	advance(time.Hour)
	record(t, h, "default", "u", "a")
	rs.refuse.Store(true)
	for i := range 2 {
		advance(2 * time.Second)
		if err := h.Flush(); err == nil {
			t.Fatal("a write-back the store refused succeeded")
		}
		record(t, h, "default", "u", fmt.Sprint("b", i)) // changed again meanwhile
		advance(time.Second)
		if lag, want := h.Stats().FlushLag, time.Duration(3*(i+1))*time.Second; lag != want {
			t.Fatalf("after %d failed write-backs: flush lag %v, want %v, the age of the first change", i+1, lag, want)
		}
	}
	rs.refuse.Store(false)
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	if lag := h.Stats().FlushLag; lag != 0 {
		t.Fatalf("flush lag once written %v, want 0", lag)
	}
	record(t, h, "default", "u", "c")
	advance(time.Second)
	if lag := h.Stats().FlushLag; lag != time.Second {
		t.Fatalf("flush lag of a change after the write-back %v, want 1s", lag)
	}
}
