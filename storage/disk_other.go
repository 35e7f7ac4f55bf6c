//go:build !unix

package storage

import "io/fs"

// freeBytes is unknown on this platform: report plenty.
func freeBytes(string) (int64, error) { return 1 << 62, nil }

func allocatedBytes(fi fs.FileInfo) int64 { return fi.Size() }

func isNoSpace(error) bool { return false }

// lockDir cannot take Badger's lock here: the empty files of a crash are
// left to Badger.
func lockDir(string) (func(), bool) { return nil, false }
