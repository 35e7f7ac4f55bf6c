package eviction

import (
	"errors"
	"fmt"
	"testing"

	"github.com/seenapi/seenapi/userfilter"
)

// newCompactFixture is a fixture whose namespaces are defaultNS and
// "compact", of the filter kind that can forget items.
func newCompactFixture(t *testing.T) *fixture {
	fx := newFixture(t, Options{})
	fx.h.Close()
	fx.ns = append(append([]Namespace(nil), defaultNS...),
		Namespace{Name: "compact", Profile: userfilter.Profile{Kind: userfilter.KindCompact}})
	fx.h = fx.newHotSet(Options{})
	return fx
}

// TestForgetItemsHoldsThroughWriteBackAndCrash: forgotten items, one
// written back and one only journaled, stay forgotten through a write-back
// and a crash (neither the union of write-back nor the journal's replay
// brings them back), while the user's other items, and what is recorded
// after, stay seen.
func TestForgetItemsHoldsThroughWriteBackAndCrash(t *testing.T) {
	fx := newCompactFixture(t)
	record(t, fx.h, "compact", "u", "a", "b", "c")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	record(t, fx.h, "compact", "u", "d") // journaled, not written back
	n, err := fx.h.ForgetItems("compact", "u", []string{"a", "d", "never"})
	if err != nil || n != 2 {
		t.Fatalf("ForgetItems = %d, %v; want 2", n, err)
	}
	want := "[false true true false]"
	if got := seen(t, fx.h, "compact", "u", "a", "b", "c", "d"); fmt.Sprint(got) != want {
		t.Fatalf("after forgetting a and d: %v, want %s", got, want)
	}
	record(t, fx.h, "compact", "u", "e") // after the forget: must survive the crash
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	record(t, fx.h, "compact", "u", "f") // journaled only
	fx.restart(false, Options{})
	want = "[false true true false true true]"
	if got := seen(t, fx.h, "compact", "u", "a", "b", "c", "d", "e", "f"); fmt.Sprint(got) != want {
		t.Fatalf("after a crash: %v, want %s", got, want)
	}
}

// TestForgetItemsWithoutAFlushHoldsThroughCrash: the forget is in the store
// when ForgetItems returns, before any write-back.
func TestForgetItemsWithoutAFlushHoldsThroughCrash(t *testing.T) {
	fx := newCompactFixture(t)
	record(t, fx.h, "compact", "u", "a", "b")
	if n, err := fx.h.ForgetItems("compact", "u", []string{"b"}); err != nil || n != 1 {
		t.Fatalf("ForgetItems = %d, %v; want 1", n, err)
	}
	fx.restart(false, Options{})
	if got := seen(t, fx.h, "compact", "u", "a", "b"); fmt.Sprint(got) != "[true false]" {
		t.Fatalf("after a crash: %v, want [true false]", got)
	}
}

// TestForgetItemsRefusesBloomAndCreatesNoUser: a Bloom namespace answers
// ErrUnsupported and keeps the user's items; forgetting for a user with no
// filter forgets nothing and makes no user.
func TestForgetItemsRefusesBloomAndCreatesNoUser(t *testing.T) {
	fx := newCompactFixture(t)
	record(t, fx.h, "default", "u", "a")
	if _, err := fx.h.ForgetItems("default", "u", []string{"a"}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("ForgetItems in a Bloom namespace: %v, want ErrUnsupported", err)
	}
	if !seen(t, fx.h, "default", "u", "a")[0] {
		t.Fatal("a refused forget changed the user")
	}
	if n, err := fx.h.ForgetItems("compact", "nobody", []string{"a"}); err != nil || n != 0 {
		t.Fatalf("ForgetItems for no user = %d, %v; want 0, nil", n, err)
	}
	if _, err := fx.h.User("compact", "nobody"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("User after forgetting for no user: %v, want ErrUserNotFound", err)
	}
	if _, err := fx.h.ForgetItems("nope", "u", []string{"a"}); !errors.Is(err, ErrUnknownNamespace) {
		t.Fatalf("ForgetItems in an unknown namespace: %v", err)
	}
}

// A namespace changed from compact to Bloom filters keeps its users'
// compact filters, and they can still forget; its new users' Bloom filters
// cannot, and a forget for a user it does not have is refused as the
// namespace's, creating nobody.
func TestForgetItemsFollowsTheUsersFilterKind(t *testing.T) {
	fx := newCompactFixture(t)
	record(t, fx.h, "compact", "old", "a", "b")
	fx.h.Close()
	fx.ns[len(fx.ns)-1].Profile = userfilter.Profile{} // the default: Bloom
	fx.h = fx.newHotSet(Options{})
	record(t, fx.h, "compact", "new", "a")

	if n, err := fx.h.ForgetItems("compact", "old", []string{"a"}); err != nil || n != 1 {
		t.Fatalf("ForgetItems of a compact filter in a namespace now Bloom = %d, %v; want 1, nil", n, err)
	}
	if got := seen(t, fx.h, "compact", "old", "a", "b"); got[0] || !got[1] {
		t.Errorf("after forgetting a: seen %v, want [false true]", got)
	}
	if _, err := fx.h.ForgetItems("compact", "new", []string{"a"}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("ForgetItems of a Bloom filter: %v, want ErrUnsupported", err)
	}
	if !seen(t, fx.h, "compact", "new", "a")[0] {
		t.Error("a refused forget changed the user")
	}
	if _, err := fx.h.ForgetItems("compact", "nobody", []string{"a"}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("ForgetItems for no user in a Bloom namespace: %v, want ErrUnsupported", err)
	}
	if _, err := fx.h.User("compact", "nobody"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("User after a refused forget: %v, want ErrUserNotFound", err)
	}
}
