package eviction

import (
	"bytes"
	"fmt"
	"testing"
)

// TestForgottenItemsStayForgottenThroughARestoreIntoTheStore: a backup
// restored, merging, into the store that holds the user (taken after the
// user's items were forgotten, so neither side holds them) leaves them
// forgotten after a restart too: the journal record that first recorded
// them, covered by a write-back and still in a journal segment kept for
// another user's record, is not replayed into the filter.
func TestForgottenItemsStayForgottenThroughARestoreIntoTheStore(t *testing.T) {
	fx := newCompactFixture(t)
	record(t, fx.h, "compact", "u", "a", "b")
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	record(t, fx.h, "compact", "v", "x") // a live record: its segment stays
	if n, err := fx.h.ForgetItems("compact", "u", []string{"a"}); err != nil || n != 1 {
		t.Fatalf("ForgetItems = %d, %v; want 1", n, err)
	}
	var backup bytes.Buffer
	if err := fx.h.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	if err := fx.st.Restore(bytes.NewReader(backup.Bytes()), MergeRestored, FoldJournal(fx.st.MaxValueBytes())); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	fx.restart(false, Options{})
	if got := seen(t, fx.h, "compact", "u", "a", "b"); fmt.Sprint(got) != "[false true]" {
		t.Fatalf("after the restore and a restart: %v, want [false true] (a was forgotten)", got)
	}
	if got := seen(t, fx.h, "compact", "v", "x"); !got[0] {
		t.Fatal("v lost x")
	}
}
