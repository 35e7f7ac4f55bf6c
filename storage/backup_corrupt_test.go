package storage

import (
	"bytes"
	"errors"
	"reflect"
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
		c, verr := VerifyBackup(bytes.NewReader(backup.Bytes()), Hidden{})
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
	_, err := VerifyBackup(bytes.NewReader(backup.Bytes()), Hidden{})
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

// Asked to, a backup leaves a damaged user out rather than stopping, and
// says so: its stream names the user, which a reader returns and a
// restore of it (bringing back every other user) reports, and the end
// mark's checksum covers that list as it covers the users' data.
func TestABackupSkippingDamagedUsersNamesThemInItsStream(t *testing.T) {
	s := damagedVictim(t)
	var backup bytes.Buffer
	skipped, err := s.BackupSkippingDamaged(&backup)
	if err != nil || len(skipped) != 1 || skipped[0].NS != "feed" || skipped[0].User != "victim" ||
		!strings.Contains(skipped[0].Reason, "corrupt") {
		t.Fatalf("BackupSkippingDamaged: %+v, %v; want feed/victim skipped for its damage", skipped, err)
	}
	c, err := VerifyBackup(bytes.NewReader(backup.Bytes()), Hidden{})
	if err != nil || !reflect.DeepEqual(c.Skipped, skipped) || c.Filters != 103 {
		t.Fatalf("VerifyBackup: %+v, %v; want 103 filters and %+v skipped", c, err, skipped)
	}
	dst := openTest(t, testOptions(t))
	if err := dst.Restore(bytes.NewReader(backup.Bytes()), nil, nil); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	for _, u := range []string{"before", "after", "filler7"} {
		if f, _ := mustLoad(t, dst, "feed", u); !bytes.Equal(f, bigValue(u)) {
			t.Errorf("restored %s: %d bytes, want its %d", u, len(f), len(bigValue(u)))
		}
	}
	if f, _ := mustLoad(t, dst, "feed", "victim"); f != nil {
		t.Errorf("restored the skipped victim as %d bytes", len(f))
	}
	// A byte of a skipped user's name changed: another user would be
	// reported skipped, and the one left out not named.
	damaged := bytes.Clone(backup.Bytes())
	i := bytes.LastIndex(damaged, []byte(`"victim"`))
	damaged[i+1] ^= 0x01
	if _, err := VerifyBackup(bytes.NewReader(damaged), Hidden{}); !errors.Is(err, ErrBadBackup) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("VerifyBackup of a skip mark with a byte changed: %v, want its checksum refused", err)
	}
}

// Without a damaged user, a backup skipping damaged users is the backup
// of Backup, byte for byte but for nothing: no skip mark.
func TestABackupSkippingNoUserHasNoSkipMark(t *testing.T) {
	s := openTest(t, testOptions(t))
	if err := s.WriteBack([]Write{{NS: "feed", User: "u", Value: bigValue("u")}}, nil); err != nil {
		t.Fatal(err)
	}
	var plain, skipping bytes.Buffer
	if err := s.Backup(&plain); err != nil {
		t.Fatal(err)
	}
	if skipped, err := s.BackupSkippingDamaged(&skipping); err != nil || skipped != nil {
		t.Fatalf("BackupSkippingDamaged: %+v, %v", skipped, err)
	}
	if !bytes.Equal(plain.Bytes(), skipping.Bytes()) {
		t.Fatalf("the backups differ: %d and %d bytes", plain.Len(), skipping.Len())
	}
}
