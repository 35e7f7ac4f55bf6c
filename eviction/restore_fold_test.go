package eviction

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// numbered returns n items named prefix:i.
func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s:%d", prefix, i)
	}
	return out
}

// pendingCalls runs 8 calls of 500 candidates for user u of "default"
// that record what they return, after a first call recording stored (700
// items) written back: the calls fill and seal layers past the stored
// filter's, and are in the journal alone. It returns every item the user
// has seen: stored, and each candidate, found seen or recorded.
func pendingCalls(t *testing.T, fx *fixture, stored, prefix string) []string {
	t.Helper()
	if _, err := fx.h.Filter("default", "u", numbered(stored, 700), 0, userfilter.RecordAll); err != nil {
		t.Fatal(err)
	}
	if err := fx.h.Flush(); err != nil {
		t.Fatal(err)
	}
	return append(numbered(stored, 700), manyCalls(t, fx, prefix)...)
}

// manyCalls runs the 8 calls of pendingCalls and returns their candidates.
func manyCalls(t *testing.T, fx *fixture, prefix string) []string {
	t.Helper()
	var seen []string
	for call := range 8 {
		cands := numbered(fmt.Sprintf("%s%d", prefix, call), 500)
		if _, err := fx.h.Filter("default", "u", cands, 0, userfilter.RecordReturned); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, cands...)
	}
	return seen
}

// checkSeen fails the test for every item of seen that user u of
// "default" has not seen.
func checkSeen(t *testing.T, fx *fixture, seen []string, when string) {
	t.Helper()
	got, err := fx.h.Check("default", "u", seen, nil)
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for i, s := range got {
		if !s {
			lost = append(lost, seen[i])
		}
	}
	if len(lost) > 0 {
		t.Errorf("%s: %d of the %d items the user saw test unseen: %v", when, len(lost), len(seen), lost)
	}
}

// A merging restore into a store whose calls since the last write-back
// were lost to a crash (their journal records pending): what the calls
// found seen, false positives included, stays seen, and so do the items
// they recorded and the backup's, after the restore and after a crash
// that follows it (the records are replayed onto the merged filter).
func TestMergingRestoreKeepsWhatPendingCallsFoundSeen(t *testing.T) {
	for name, p := range map[string]userfilter.Profile{
		"default": userfilter.DefaultProfile(),
		"window":  {Window: 7 * 24 * time.Hour, Granularity: 24 * time.Hour},
		"capped":  {MaxItems: 10000},
		"compact": {Kind: userfilter.KindCompact},
		"staged":  {Kind: userfilter.KindStaged, InitialCapacity: 40, Growth: 2, Tightening: 0.8, FPRate: 0.001},
	} {
		t.Run(name, func(t *testing.T) { testMergingRestoreFolds(t, []Namespace{{Name: "default", Profile: p}}) })
	}
}

func testMergingRestoreFolds(t *testing.T, ns []Namespace) {
	fixture := func() *fixture {
		fx := newFixture(t, Options{})
		fx.ns = ns
		fx.restart(true, Options{})
		return fx
	}
	other := fixture() // the backup: another store's user u
	if _, err := other.h.Filter("default", "u", numbered("b", 900), 0, userfilter.RecordAll); err != nil {
		t.Fatal(err)
	}
	if err := other.h.Flush(); err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	if err := other.h.Backup(&backup); err != nil {
		t.Fatal(err)
	}

	fx := fixture()
	seen := append(numbered("b", 900), pendingCalls(t, fx, "s", "c")...)
	fx.restart(false, Options{}) // a crash
	for _, when := range []string{"after the restore", "after a crash and the restore run again"} {
		if err := fx.st.Restore(bytes.NewReader(backup.Bytes()), MergeRestored, FoldJournal(fx.st.MaxValueBytes())); err != nil {
			t.Fatal(err)
		}
		checkSeen(t, fx, seen, when)
		fx.restart(false, Options{})
	}
}

// A merging restore of a backup taken after a crash of its service (the
// calls since the user's last write-back in its journal only) into a store
// that holds the user: what those calls found seen, false positives
// included, stays seen, as do the items they recorded and the store's.
func TestMergingRestoreKeepsWhatTheBackupsPendingCallsFoundSeen(t *testing.T) {
	other := newFixture(t, Options{}) // the backup's store
	seen := pendingCalls(t, other, "s", "c")
	other.restart(false, Options{}) // a crash
	var backup bytes.Buffer
	if err := other.st.Backup(&backup); err != nil {
		t.Fatal(err)
	}

	fx := newFixture(t, Options{})
	if _, err := fx.h.Filter("default", "u", numbered("b", 900), 0, userfilter.RecordAll); err != nil {
		t.Fatal(err)
	}
	seen = append(seen, numbered("b", 900)...)
	fx.restart(true, Options{})
	for _, when := range []string{"after the restore", "after a crash and the restore run again"} {
		if err := fx.st.Restore(bytes.NewReader(backup.Bytes()), MergeRestored, FoldJournal(fx.st.MaxValueBytes())); err != nil {
			t.Fatal(err)
		}
		checkSeen(t, fx, seen, when)
		fx.restart(false, Options{})
	}
}

// A merging restore where one side's user u has a stored filter that never
// recorded an item (earlier builds stored one of an import of such a
// filter), and calls since in the journal alone (a crash): the calls found
// the user never seen and ran on a filter made anew, which the restore
// folds their records into, as a load would: what they found seen stays
// seen, as do the items they recorded and the other side's, after the
// crash, after the restore and after a crash that follows it.
func TestMergingRestoreFoldsCallsOfAStoredUserWithNoHistory(t *testing.T) {
	// noHistoryCalls makes u a stored user with no history in fx, runs the
	// calls, and leaves them pending.
	noHistoryCalls := func(fx *fixture) []string {
		if err := fx.st.WriteBack([]storage.Write{{NS: "default", User: "u", Value: emptyOf(t, fx.h, "default")}}, nil); err != nil {
			t.Fatal(err)
		}
		fx.restart(true, Options{})
		seen := manyCalls(t, fx, "c")
		fx.restart(false, Options{}) // a crash
		checkSeen(t, fx, seen, "after a crash")
		fx.restart(false, Options{}) // the calls' records still pending
		return seen
	}
	// history gives u of fx the items b:0 to b:899, written back.
	history := func(fx *fixture) []string {
		if _, err := fx.h.Filter("default", "u", numbered("b", 900), 0, userfilter.RecordAll); err != nil {
			t.Fatal(err)
		}
		fx.restart(true, Options{})
		return numbered("b", 900)
	}
	for name, side := range map[string]func(fx, other *fixture) []string{
		"stored": func(fx, other *fixture) []string { return append(history(other), noHistoryCalls(fx)...) },
		"backup": func(fx, other *fixture) []string { return append(noHistoryCalls(other), history(fx)...) },
		// Nothing to merge into: a load replays the records.
		"backup, none stored": func(fx, other *fixture) []string { return noHistoryCalls(other) },
	} {
		t.Run(name, func(t *testing.T) {
			fx, other := newFixture(t, Options{}), newFixture(t, Options{})
			seen := side(fx, other)
			var backup bytes.Buffer
			if err := other.st.Backup(&backup); err != nil {
				t.Fatal(err)
			}
			for _, when := range []string{"after the restore", "after a crash and the restore run again"} {
				if err := fx.st.Restore(bytes.NewReader(backup.Bytes()), MergeRestored, FoldJournal(fx.st.MaxValueBytes())); err != nil {
					t.Fatal(err)
				}
				checkSeen(t, fx, seen, when)
				fx.restart(false, Options{})
			}
		})
	}
}
