// Package storagetest helps the tests of packages that keep data through
// storage damage a store's files on disk as a failing disk would, copy
// them as a crash would leave them, or make values as earlier builds
// stored them, so that each tests its answer to that damage, crash or
// legacy with the real store.
package storagetest

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// DamageValueLog flips the byte at offset from the start of the first
// occurrence of marker (a stored value, or a filter key, whose value
// follows it) in whichever value-log file of the store in dir holds it.
// The byte is written in place: the file is neither truncated nor moved.
func DamageValueLog(t testing.TB, dir string, marker []byte, offset int) {
	t.Helper()
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	for _, path := range vlogs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(data, marker)
		if i < 0 {
			continue
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{data[i+offset] ^ 0xff}, int64(i+offset)); err != nil {
			f.Close()
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%q is in no value-log file of %s", marker, dir)
}

// DamageFilter flips a byte of the stored filter of user of ns, a filter
// of more than 100 bytes (one in the value log, which Badger checksums),
// so that reading it fails as a failing disk's would.
func DamageFilter(t testing.TB, dir, ns, user string) {
	t.Helper()
	// The filter key without its kind byte: uvarint(len(ns)) | ns | user.
	key := append(append(binary.AppendUvarint(nil, uint64(len(ns))), ns...), user...)
	DamageValueLog(t, dir, key, len(key)+100)
}
