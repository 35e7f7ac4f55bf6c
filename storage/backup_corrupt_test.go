package storage

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A backup of a store with a value damaged on disk fails with ErrCorrupt
// naming its user, rather than writing the value as empty: a backup that
// says it succeeded and restores the user as an empty value (or, with
// merge, fails to restore it) would carry the damage away unseen.
func TestBackupOfADamagedValueFailsNamingItsUser(t *testing.T) {
	opts := testOptions(t).WithValueLogFileSize(1 << 20)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	var writes []Write
	for _, u := range []string{"before", "victim", "after"} {
		writes = append(writes, Write{NS: "feed", User: u, Value: bigValue(u)})
	}
	if err := s.WriteBack(writes, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 100 { // seal the first value-log file
		u := fmt.Sprint("filler", i)
		if err := s.WriteBack([]Write{{NS: "feed", User: u, Value: bigValue(u)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	damage(t, opts.Dir, bigValue("victim"))
	s = openTest(t, opts)
	var backup bytes.Buffer
	err = s.Backup(&backup)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "feed/victim") {
		c, verr := VerifyBackup(bytes.NewReader(backup.Bytes()))
		dst := openTest(t, testOptions(t))
		rerr := dst.Restore(bytes.NewReader(backup.Bytes()), nil)
		f, _, lerr := dst.Load("feed", "victim")
		t.Fatalf("Backup: %v, want ErrCorrupt naming feed/victim (VerifyBackup: %+v, %v; restored: %v; victim loads %d bytes, %v)",
			err, c, verr, rerr, len(f), lerr)
	}
}
