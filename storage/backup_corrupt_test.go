package storage

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// A backup of a store with a value damaged on disk fails with ErrCorrupt
// naming its user, rather than writing the value as empty: a backup that
// says it succeeded and restores the user as an empty value (or, with
// merge, fails to restore it) would carry the damage away unseen.
func TestBackupOfADamagedValueFailsNamingItsUser(t *testing.T) {
	s := damagedVictim(t)
	var backup bytes.Buffer
	err := s.Backup(&backup)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "feed/victim") {
		c, verr := VerifyBackup(bytes.NewReader(backup.Bytes()))
		dst := openTest(t, testOptions(t))
		rerr := dst.Restore(bytes.NewReader(backup.Bytes()), nil, nil)
		f, _, lerr := dst.Load("feed", "victim")
		t.Fatalf("Backup: %v, want ErrCorrupt naming feed/victim (VerifyBackup: %+v, %v; restored: %v; victim loads %d bytes, %v)",
			err, c, verr, rerr, len(f), lerr)
	}
}
