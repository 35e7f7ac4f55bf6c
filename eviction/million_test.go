package eviction

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seenapi/seenapi/userfilter"
)

// rssBytes reads this process's resident set size.
func rssBytes(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

// TestMillionUsersThroughTenthBudget records for 1e6 distinct users through
// a budget that fits about 1e5 of them, and checks that the hot set kept to
// its budget, that the process stayed under budget plus a fixed allowance
// for the store and runtime, and that every sampled user's history survived
// eviction, write-back and reload.
func TestMillionUsersThroughTenthBudget(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("a million users: run without -race and -short (test.sh does)")
	}
	const users = 1_000_000
	// The accounted bytes of a 2-item user with an 11-byte id: the budget
	// fits about 100,000 of them.
	ref, err := userfilter.New(userfilter.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	ref.Add([]string{"common", "item-0"}, time.Now())
	perUser := int64(ref.MemoryBytes() + entryOverhead + len("user-123456"))
	budget := 100_000 * perUser
	// Badger's memtables (3 x 16 MiB) and table
	// indexes, Go's heap goal (GOGC lets garbage reach the live heap's size:
	// a million cold loads and write-backs make plenty) and the test's own
	// data. Measured RSS here: 283 to 424 MiB.
	const allowance = 640 << 20
	fx := newFixture(t, Options{CacheBytes: budget, FlushInterval: 200 * time.Millisecond})
	var wg sync.WaitGroup
	var maxHot, maxBacklog int64
	var mu sync.Mutex
	start := time.Now()
	const callers = 64 // enough concurrent calls for the journal to group its commits
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := g; u < users; u += callers {
				user := "user-" + strconv.Itoa(u)
				record(t, fx.h, "default", user, "common", "item-"+strconv.Itoa(u))
				if u%50_000 < callers {
					b := fx.h.Stats().CacheBytes
					mu.Lock()
					maxHot = max(maxHot, b)
					maxBacklog = max(maxBacklog, fx.h.evictedBytes.Load())
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	st := fx.h.Stats()
	rss := rssBytes(t)
	t.Logf("1e6 users in %v: hot %d users / %d bytes (budget %d, max seen %d), evictions %d, RSS %d MiB",
		time.Since(start).Round(time.Millisecond), st.HotUsers, st.CacheBytes, int64(budget), maxHot, st.Evictions, rss>>20)
	// While calls run, each may hold a user it took in and the sweep has
	// not yet made room for; once they stop, the budget holds.
	if st.CacheBytes > budget || maxHot > budget+callers*perUser {
		t.Fatalf("hot set over budget: %d (max %d) > %d", st.CacheBytes, maxHot, budget)
	}
	// Evicted users waiting for write-back are outside the budget: calls
	// wait for the write-back past backlogLimit (a sixteenth of it).
	t.Logf("evicted and waiting for write-back: at most %d bytes seen (limit %d)", maxBacklog, fx.h.backlogLimit)
	if maxBacklog > budget/4 {
		t.Fatalf("evicted backlog reached %d bytes, a quarter of the budget is %d", maxBacklog, budget/4)
	}
	if st.HotUsers > 110_000 {
		t.Fatalf("%d users hot, budget fits about 100,000", st.HotUsers)
	}
	if rss > budget+allowance {
		t.Fatalf("RSS %d MiB over budget %d MiB + allowance %d MiB", rss>>20, budget>>20, allowance>>20)
	}
	for u := 0; u < users; u += 97 {
		user := "user-" + strconv.Itoa(u)
		if got := seen(t, fx.h, "default", user, "common", "item-"+strconv.Itoa(u)); !allTrue(got) {
			t.Fatalf("%s lost history through eviction: %v", user, got)
		}
	}
	fx.restart(false, Options{CacheBytes: budget})
	for u := 5; u < users; u += 997 {
		user := fmt.Sprintf("user-%d", u)
		if got := seen(t, fx.h, "default", user, "common", "item-"+strconv.Itoa(u)); !allTrue(got) {
			t.Fatalf("%s lost history across a restart: %v", user, got)
		}
	}
}
