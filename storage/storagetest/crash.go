package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CopyAsACrashLeaves copies the files of the store in dir, open and in
// use, to dst as a crash of its process would leave them: every file but
// Badger's LOCK, which a crash releases.
//
// The store's background work (Badger flushing a memtable to a table then
// deleting it, compacting tables, the journal deleting covered segments)
// goes on while the files are read one after the other. A copy that
// straddled such a change holds what no crash leaves: a manifest naming a
// table the copy lacks, or a segment gone whose covering write the copy
// lacks. So skipping a file that vanished is not enough: the copy is made
// again until the directory is the same after it as before (the same
// files, each with its inode, size and time of change).
func CopyAsACrashLeaves(t testing.TB, dir, dst string) {
	t.Helper()
	var last error
	for try := range 50 {
		time.Sleep(time.Duration(try) * 10 * time.Millisecond) // let a flush or compaction end
		before, err := dirFiles(dir)
		if err == nil {
			err = copyFiles(dir, dst, before)
		}
		if err == nil {
			var after map[string]fs.FileInfo
			if after, err = dirFiles(dir); err == nil {
				err = changed(before, after)
			}
		}
		if err == nil {
			return
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errChanged) {
			t.Fatalf("copying the store in %s: %v", dir, err)
		}
		t.Logf("copying the store in %s again: %v", dir, err)
		last = err
	}
	t.Fatalf("copying the store in %s: it changed during each of 50 copies, last: %v", dir, last)
}

var errChanged = errors.New("changed during the copy")

// dirFiles lists the directories and files under dir, Badger's LOCK left
// out, by their path relative to dir.
func dirFiles(dir string) (map[string]fs.FileInfo, error) {
	files := map[string]fs.FileInfo{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() == "LOCK" {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[rel] = fi
		return nil
	})
	return files, err
}

// changed names a path of before that after lacks or holds changed, or one
// new in after.
func changed(before, after map[string]fs.FileInfo) error {
	for rel, b := range before {
		a, ok := after[rel]
		switch {
		case !ok:
			return fmt.Errorf("%s %w: deleted", rel, errChanged)
		case !os.SameFile(a, b) || a.Size() != b.Size() || !a.ModTime().Equal(b.ModTime()):
			return fmt.Errorf("%s %w: %d B of %v, then %d B of %v", rel, errChanged, b.Size(), b.ModTime(), a.Size(), a.ModTime())
		}
	}
	for rel := range after {
		if _, ok := before[rel]; !ok {
			return fmt.Errorf("%s %w: created", rel, errChanged)
		}
	}
	return nil
}

// copyFiles copies the listed files under dir to dst, emptied first.
func copyFiles(dir, dst string, files map[string]fs.FileInfo) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for rel, fi := range files {
		if fi.IsDir() {
			if err := os.MkdirAll(filepath.Join(dst, rel), 0o755); err != nil {
				return err
			}
		}
	}
	for rel, fi := range files {
		if !fi.IsDir() {
			if err := copySparse(filepath.Join(dir, rel), filepath.Join(dst, rel)); err != nil {
				return err
			}
		}
	}
	return nil
}

// copySparse copies the file src to dst, leaving its blocks of zeros holes:
// Badger makes its value log (256 MiB) and memtable (32 MiB) files at their
// full size and writes their start, and written out whole a small store's
// copy took seconds of disk writes on a loaded machine. dst reads the same.
func copySparse(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	buf, zeros := make([]byte, 64<<10), make([]byte, 64<<10)
	var size int64
	for {
		n, err := io.ReadFull(in, buf)
		if n > 0 {
			var werr error
			if bytes.Equal(buf[:n], zeros[:n]) {
				_, werr = out.Seek(int64(n), io.SeekCurrent)
			} else {
				_, werr = out.Write(buf[:n])
			}
			if werr != nil {
				out.Close()
				return werr
			}
			size += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			out.Close()
			return err
		}
	}
	return errors.Join(out.Truncate(size), out.Close())
}
