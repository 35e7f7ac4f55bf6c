package eviction

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seenapi/seenapi/userfilter"
)

const crashChildEnv = "SEENAPI_CRASH_CHILD_DIR"

// TestMain lets the test binary act as the process the crash test kills.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir, os.Getenv("SEENAPI_CRASH_ROUND"))
		return
	}
	if dir := os.Getenv(capChildEnv); dir != "" {
		capChild(dir)
		return
	}
	os.Exit(m.Run())
}

// crashChild records impressions from 8 goroutines as fast as it can and
// prints each one after its call was acknowledged, until it is killed.
func crashChild(dir, round string) {
	st := openStoreOrDie(dir)
	h, err := New(st, defaultNS, Options{FlushInterval: 20 * time.Millisecond, CacheBytes: 256 << 10})
	if err != nil {
		panic(err)
	}
	go h.Recover()
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				user := fmt.Sprintf("user-%d", (g*7919+i)%300)
				item := fmt.Sprintf("r%s-g%d-i%d", round, g, i)
				if _, err := h.Filter("default", user, []string{item}, 0, userfilter.RecordReturned); err != nil {
					panic(err)
				}
				mu.Lock()
				fmt.Fprintf(out, "%s %s\n", user, item)
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func TestKill9LosesNoAcknowledgedImpression(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills child processes")
	}
	dir := t.TempDir()
	acked := map[string][]string{} // user -> items acknowledged
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for round := 0; round < 4; round++ {
		cmd, stdout := startChild(t, crashChildEnv+"="+dir, fmt.Sprintf("SEENAPI_CRASH_ROUND=%d", round))
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// The kill comes at a random moment after the child's first
		// acknowledgement, so a slow start (a loaded machine, the race
		// detector, a long replay) cannot leave a round with nothing.
		var killAt <-chan time.Time
		started := time.After(30 * time.Second) // a child that never acknowledges is killed too
		n := 0
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				user, item, _ := strings.Cut(l, " ")
				acked[user] = append(acked[user], item)
				if n++; n == 1 {
					killAt, started = time.After(time.Duration(100+rng.IntN(700))*time.Millisecond), nil
				}
			case <-started:
				cmd.Process.Signal(syscall.SIGKILL)
				started = nil
			case <-killAt:
				cmd.Process.Signal(syscall.SIGKILL)
				killAt = nil
			}
		}
		cmd.Wait()
		if n == 0 {
			t.Fatalf("round %d: the child acknowledged nothing", round)
		}
		t.Logf("round %d: %d acknowledged impressions before kill -9", round, n)
	}

	st := openStore(t, dir)
	defer st.Close()
	h, err := New(st, defaultNS, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	total, probes, fps := 0, 0, 0
	for user, items := range acked {
		got, err := h.Check("default", user, items, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, ok := range got {
			if !ok {
				t.Fatalf("%s: acknowledged item %s lost after kill -9", user, items[i])
			}
		}
		total += len(items)
		// Items never sent must not be invented beyond the false-positive rate.
		never := make([]string, 200)
		for i := range never {
			never[i] = fmt.Sprintf("never-%s-%d", user, i)
		}
		got, _ = h.Check("default", user, never, nil)
		for _, ok := range got {
			probes++
			if ok {
				fps++
			}
		}
	}
	rate := float64(fps) / float64(probes)
	t.Logf("%d acknowledged impressions all seen; %d/%d never-sent items seen (%.4f)", total, fps, probes, rate)
	if rate > 0.02 {
		t.Fatalf("never-sent items seen at %.4f, over twice the 1%% target", rate)
	}
}

// startChild starts this test binary again, running no test, with env
// added to its environment (the child's TestMain runs what it names), and
// returns it with its standard output.
func startChild(t *testing.T, env ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdout
}
