package eviction

import (
	"errors"
	"slices"
	"testing"

	"github.com/seenapi/seenapi/userfilter"
)

// Users lists each user with a history from its first acknowledged call,
// before any write-back, until it is forgotten; not a user only asked
// about, nor one that recorded nothing; the same after a crash.
func TestUsersListsEachUserWithAHistory(t *testing.T) {
	fx := newFixture(t, Options{})
	users := func() []string {
		t.Helper()
		got, err := fx.h.Users("default", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	record(t, fx.h, "default", "written", "a")
	fx.h.Flush()
	record(t, fx.h, "default", "journaled", "a") // not written back
	record(t, fx.h, "default", "gone", "a")
	seen(t, fx.h, "default", "asked", "a") // a check creates no user
	if _, err := fx.h.Filter("default", "dry", []string{"a"}, 0, userfilter.RecordNone); err != nil {
		t.Fatal(err)
	}
	if err := fx.h.Forget("default", "gone"); err != nil {
		t.Fatal(err)
	}
	want := []string{"journaled", "written"}
	if got := users(); !slices.Equal(got, want) {
		t.Fatalf("users %v, want %v", got, want)
	}
	if got, err := fx.h.Users("default", "journaled", 1); err != nil || !slices.Equal(got, []string{"written"}) {
		t.Fatalf("the page after journaled: %v %v, want [written]", got, err)
	}
	fx.restart(false, Options{})
	if got := users(); !slices.Equal(got, want) {
		t.Fatalf("after a crash: users %v, want %v", got, want)
	}
	if _, err := fx.h.Users("nope", "", 0); !errors.Is(err, ErrUnknownNamespace) {
		t.Fatalf("unknown namespace: %v, want ErrUnknownNamespace", err)
	}
}
