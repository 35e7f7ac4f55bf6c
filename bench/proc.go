package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100
// on every Linux architecture this runs on.
const clockTicks = 100

// ProcCPU returns the user + system CPU time of process pid from /proc/<pid>/stat.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: parse after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: unreadable /proc/%d/stat", pid)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	st, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bench: bad utime/stime in /proc/%d/stat", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// ProcessCPU is process pid's CPU figure, for System.CPU: its CPU time and
// its threads' wait for a core. The wait is left at 0 where the kernel does
// not keep schedstat: a diagnostic, not worth failing a run for.
func ProcessCPU(pid int) (CPU, error) {
	t, err := ProcCPU(pid)
	if err != nil {
		return CPU{}, err
	}
	w, _ := ProcWaited(pid)
	return CPU{Time: t, Waited: w}, nil
}

// ProcWaited returns how long the threads of process pid have spent ready
// to run but waiting for a core (run_delay, the second field of
// /proc/<pid>/task/<tid>/schedstat, summed over its threads; threads that
// ended are not counted). On a machine whose cores the client and the
// server share, it is how much of a latency tail is the wait for a core.
func ProcWaited(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil {
		return 0, err
	}
	if len(tasks) == 0 {
		return 0, fmt.Errorf("bench: no /proc/%d/task/*/schedstat", pid)
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := bytes.Fields(b)
		if len(f) < 2 {
			return 0, fmt.Errorf("bench: short %s", t)
		}
		ns, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: bad run_delay in %s", t)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// ProcRSS returns the resident set size of process pid (VmRSS of
// /proc/<pid>/status) in bytes, and its anonymous part (RssAnon: the heap,
// as opposed to mapped files such as Badger's memory-mapped tables and logs).
func ProcRSS(pid int) (rss, anon int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		for _, f := range []struct {
			prefix string
			dst    *int64
		}{{"VmRSS:", &rss}, {"RssAnon:", &anon}} {
			rest, ok := bytes.CutPrefix(line, []byte(f.prefix))
			if !ok {
				continue
			}
			fields := bytes.Fields(rest)
			if len(fields) < 1 {
				continue
			}
			kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
			if err != nil {
				return 0, 0, err
			}
			*f.dst = kb * 1024
			found++
		}
	}
	if found < 2 {
		return 0, 0, fmt.Errorf("bench: no VmRSS or RssAnon in /proc/%d/status", pid)
	}
	return rss, anon, nil
}

// DiskUsage returns the bytes the files under dir occupy on disk (allocated
// blocks, as du counts them: preallocated sparse files count what they hold).
func DiskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += info.Size()
		}
		return nil
	})
	return total, err
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// MachineBusy returns the CPU time all processes of the machine have spent
// (user, nice, system, irq, softirq, steal of /proc/stat's cpu line), to tell
// how much of a phase's CPU went to processes outside the run, and of it the
// steal: time this virtual machine's cores were ready to run but the host
// ran something else. Steal stalls every process at once, for tens of
// milliseconds when the host is busy, so the run reports it next to the
// latency tail.
func MachineBusy() (busy, steal time.Duration, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0, 0, errors.New("bench: unreadable /proc/stat")
	}
	var ticks, stolen uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		v, err := strconv.ParseUint(string(f[i]), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("bench: bad /proc/stat: %w", err)
		}
		ticks += v
		if i == 8 {
			stolen = v
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, time.Duration(stolen) * time.Second / clockTicks, nil
}
