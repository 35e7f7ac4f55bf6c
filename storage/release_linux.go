//go:build linux

package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// canPageOut: the value log's pages can be released here (see ReleaseInterval).
const canPageOut = true

// errPageOutUnsupported: the kernel has no MADV_PAGEOUT (before Linux 5.4).
var errPageOutUnsupported = errors.New("madvise(MADV_PAGEOUT) is not supported by this kernel (Linux 5.4 or later has it)")

// pageOutValueLog asks the kernel to reclaim the resident pages of this
// process's mappings of the value-log files in dir, and returns how many
// bytes of mappings it advised.
//
// Badger maps every value-log file and writes values by copying them into
// the map, so every filter written back stays resident in the process
// (charged to its container's memory) though the hot set holds the user
// in the Go heap and only a load after an eviction reads it again.
//
// Safe whatever the maps hold by the time of the advice: MADV_PAGEOUT is
// only a reclaim hint and never changes the contents of memory. Dirty file
// pages are kept until the kernel has written them out, clean ones are
// read again from the file when next touched, and anonymous memory stays
// where there is no swap (and is read back from swap where there is). So a
// mapping Badger unmaps between the read of /proc/self/maps and the
// advice, and an address the Go runtime maps again meanwhile, come to no
// harm; an address no longer mapped is refused (ENOMEM), and skipped.
func pageOutValueLog(dir string) (int64, error) {
	advised, err := adviseValueLog(dir, unix.MADV_PAGEOUT)
	if err == unix.EINVAL {
		err = errPageOutUnsupported
	}
	return advised, err
}

// readValueLogAtRandom asks the kernel to read no more of the value-log
// files in dir than the pages touched (MADV_RANDOM over this process's
// mappings of them), and returns how many bytes of mappings it advised.
//
// A load reads one user's value, a few hundred bytes to a few kilobytes
// at a random place in the file; by default each such page fault read
// ahead up to the device's read_ahead_kb (8 MiB on some virtual disks)
// into the page cache and mapped the neighbouring pages (fault-around), so
// a hot set evicting and loading users held hundreds of megabytes of the
// value log resident between two releases. Like MADV_PAGEOUT it is a hint
// that never changes the contents of memory (see pageOutValueLog). Badger
// reads the value log in order only when it replays it at open, before
// this advice, and in its garbage collection, which runs in the
// background and then reads a page a fault.
func readValueLogAtRandom(dir string) (int64, error) {
	return adviseValueLog(dir, unix.MADV_RANDOM)
}

// adviseValueLog gives advice to every mapping of a value-log file in dir
// (see pageOutValueLog for why that is safe) and returns how many bytes of
// mappings it advised. EINVAL, the kernel not knowing the advice, ends it.
func adviseValueLog(dir string, advice int) (int64, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	var advised int64
	for line := range bytes.Lines(maps) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		if !mapsValueLog(string(line), dir) {
			continue
		}
		rng, _, _ := bytes.Cut(line, []byte(" "))
		lo, hi, _ := bytes.Cut(rng, []byte("-"))
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		// A raw madvise over an address range, rather than unix.Madvise
		// over a slice made of it: the range is not memory Go knows of.
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), uintptr(advice))
		switch errno {
		case 0:
			advised += int64(end - start)
		case unix.ENOMEM: // unmapped meanwhile
		default:
			return advised, errno
		}
	}
	return advised, nil
}

// mapsValueLog reports whether a mapping's line of /proc/self/maps (the
// header of its entry in /proc/self/smaps) maps a value-log file in dir.
func mapsValueLog(line, dir string) bool {
	// "start-end perms offset dev inode path": only the path has a slash,
	// and it may hold spaces.
	i := strings.IndexByte(line, '/')
	return i >= 0 && filepath.Ext(line[i:]) == ".vlog" && filepath.Dir(line[i:]) == dir
}
