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

// The stream of a backup stopped so ends with a stop mark naming the user
// and the damage, which a reader of the stream (a client downloading it
// from the service, whose status was sent before) reports as such rather
// than as a backup cut short, and a restore refuses.
func TestABackupStoppedByADamagedValueSaysWhyInItsStream(t *testing.T) {
	s := damagedVictim(t)
	var backup bytes.Buffer
	if err := s.Backup(&backup); err == nil {
		t.Fatal("Backup of a damaged store succeeded")
	}
	_, err := VerifyBackup(bytes.NewReader(backup.Bytes()))
	var stopped *BackupStoppedError
	if !errors.As(err, &stopped) || stopped.NS != "feed" || stopped.User != "victim" ||
		!strings.Contains(stopped.Reason, "corrupt") || !errors.Is(err, ErrBadBackup) {
		t.Fatalf("VerifyBackup of the stopped stream: %v, want a BackupStoppedError (ErrBadBackup) naming feed/victim and the damage", err)
	}
	dst := openTest(t, testOptions(t))
	if err := dst.Restore(bytes.NewReader(backup.Bytes()), nil, nil); !errors.As(err, &stopped) {
		t.Fatalf("Restore of the stopped stream: %v, want a BackupStoppedError", err)
	}
}
