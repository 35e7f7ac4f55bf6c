package bench

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisBin returns redis-server's path, skipping the test when it is missing
// unless CI=true, where its absence fails the test.
func redisBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is missing (CI=true: install it, e.g. ./test.sh)")
		}
		t.Skip("redis-server is missing")
	}
	return p
}

func setUp(t *testing.T, s System) {
	t.Helper()
	if err := s.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
}

func TestBloomParamsOfThePoolAtOnePercent(t *testing.T) {
	m, k := BloomParams(2000, 0.01)
	if m != 19171 || k != 7 {
		t.Errorf("BloomParams(2000, 0.01) = %d, %d; want 19171, 7", m, k)
	}
}

func TestBloomPositionsAreStableAndInRange(t *testing.T) {
	a := BloomPositions(nil, "i1.abcdef", 19171, 7)
	b := BloomPositions(nil, "i1.abcdef", 19171, 7)
	if len(a) != 7 || !slices.Equal(a, b) {
		t.Fatalf("positions %v then %v", a, b)
	}
	for _, p := range a {
		if p >= 19171 {
			t.Errorf("position %d >= m", p)
		}
	}
}

// testCalls checks the one call's contract on a fresh user of s: the first
// call returns the first limit candidates, the second the next ones.
func testCalls(t *testing.T, s System) {
	t.Helper()
	ctx := context.Background()
	w := DefaultWorkload(10)
	g, _ := NewGen(w, 1)
	var c Call
	g.Fill(&c, 3, 200, 20)
	got, err := s.Call(ctx, c.User, c.Candidates, 20)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, c.Candidates[:20]) {
		t.Fatalf("first call returned %d items %v..., want the first 20 candidates", len(got), got[:min(3, len(got))])
	}
	got, err = s.Call(ctx, c.User, c.Candidates, 20)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, c.Candidates[20:40]) {
		t.Fatalf("second call returned %v..., want candidates 20..39", got[:min(3, len(got))])
	}
}

var redisClients = []string{"go-redis", "resp"}

func TestRedisSetReturnsAndRecordsTheFirstUnseen(t *testing.T) {
	for _, client := range redisClients {
		t.Run(client, func(t *testing.T) {
			s := NewRedisSet(RedisOptions{Bin: redisBin(t), Client: client})
			setUp(t, s)
			testCalls(t, s)
		})
	}
}

func TestRedisBloomReturnsAndRecordsTheFirstUnseen(t *testing.T) {
	for _, client := range redisClients {
		t.Run(client, func(t *testing.T) {
			s := NewRedisBloom(RedisOptions{Bin: redisBin(t), Client: client})
			setUp(t, s)
			testCalls(t, s)
		})
	}
}

func TestRedisRejectsAnUnknownClient(t *testing.T) {
	s := NewRedisSet(RedisOptions{Bin: redisBin(t), Client: "telnet"})
	err := s.Setup(context.Background())
	s.Close()
	if !errors.Is(err, ErrBadConfig) {
		t.Errorf("err = %v, want ErrBadConfig", err)
	}
}

// A bitmap Bloom filter of m = 19171 bits, k = 7 holding its 2000 items has
// the false-positive rate (1 - e^(-kn/m))^k = 1.003%. Over 20,000 items never
// added the standard error is 0.07%; the test allows 0.3% (over 4 standard errors).
func TestRedisBloomFalsePositiveRateAtThePoolSize(t *testing.T) {
	for _, client := range redisClients {
		t.Run(client, func(t *testing.T) { testBloomFP(t, client) })
	}
}

func testBloomFP(t *testing.T, client string) {
	s := NewRedisBloom(RedisOptions{Bin: redisBin(t), Client: client})
	setUp(t, s)
	ctx := context.Background()
	w := DefaultWorkload(20)
	g, _ := NewGen(w, 1)
	var c Call
	g.Fill(&c, 0, DefaultPool, DefaultPool)
	user := c.User
	if got, err := s.Call(ctx, user, c.Candidates, DefaultPool); err != nil || len(got) < DefaultPool-5 {
		t.Fatalf("filling 2000 items: %d returned, %v", len(got), err)
	}
	var others []string
	for r := 1; r <= 10; r++ {
		for j := range DefaultPool {
			others = append(others, w.Item(r, j))
		}
	}
	// Ask with limit 0 items recorded: one call, limit len, then count.
	unseen, err := s.Call(ctx, user, others, len(others))
	if err != nil {
		t.Fatal(err)
	}
	fp := float64(len(others)-len(unseen)) / float64(len(others))
	if math.Abs(fp-0.01003) > 0.003 {
		t.Errorf("false-positive rate %.4f, want 0.0100 +- 0.003", fp)
	}
}

func TestRedisMemoryAndCPUAreReported(t *testing.T) {
	s := NewRedisSet(RedisOptions{Bin: redisBin(t)})
	setUp(t, s)
	m0, err := s.Memory(context.Background())
	if err != nil || m0.Kind != "used_memory" || m0.Bytes <= 0 {
		t.Fatalf("memory %+v, %v", m0, err)
	}
	testCalls(t, s)
	m1, _ := s.Memory(context.Background())
	if m1.Bytes <= m0.Bytes {
		t.Errorf("used_memory %d after recording items, %d before", m1.Bytes, m0.Bytes)
	}
	if _, err := s.CPU(); err != nil {
		t.Errorf("CPU: %v", err)
	}
}

func TestRunOnRedisSetIsExactAndMeasuresEverything(t *testing.T) {
	s := NewRedisSet(RedisOptions{Bin: redisBin(t), Client: "resp"})
	res, err := Run(context.Background(), s, RunOptions{Workload: DefaultWorkload(300),
		Concurrency: 4, Warm: 200 * time.Millisecond, Duration: time.Second, Sample: 50})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Ran() {
		t.Fatalf("run did not complete: %+v", res)
	}
	c := res.Correctness
	if c.FalseNegatives != 0 || c.FalsePositives != 0 || c.NeverShown == 0 || c.Checks < 100 {
		t.Errorf("correctness %+v: want an exact system checked at least 100 times", c)
	}
	if res.MemPerUser < 1000 || res.Saturation.Rate <= 0 || res.Open.Latency.P99 <= 0 || res.CPUPerCall <= 0 {
		t.Errorf("memory/user %.0f, rate %.0f, open p99 %v, cpu/call %v: want all measured",
			res.MemPerUser, res.Saturation.Rate, res.Open.Latency.P99, res.CPUPerCall)
	}
}

// After Record, a call over the recorded items and as many others returns
// only the others (a few may be false positives for the Bloom filter).
func TestRedisRecordMarksItemsSeen(t *testing.T) {
	for _, client := range redisClients {
		for _, s := range []interface {
			System
			Recorder
		}{NewRedisSet(RedisOptions{Bin: redisBin(t), Client: client}), NewRedisBloom(RedisOptions{Bin: redisBin(t), Client: client})} {
			t.Run(s.Name()+"/"+client, func(t *testing.T) {
				setUp(t, s)
				w := DefaultWorkload(10)
				var recorded, others []string
				for j := range 200 {
					recorded = append(recorded, w.Item(1, j))
					others = append(others, w.Item(1, 1000+j))
				}
				if err := s.Record(context.Background(), w.User(1), recorded); err != nil {
					t.Fatal(err)
				}
				got, err := s.Call(context.Background(), w.User(1), append(slices.Clone(recorded), others...), 1000)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range got {
					if slices.Contains(recorded, it) {
						t.Fatalf("recorded item %q reported unseen", it)
					}
				}
				if len(got) < 190 {
					t.Errorf("%d of 200 unrecorded items reported unseen, want at least 190", len(got))
				}
			})
		}
	}
}

// The fill writes a user's bitmap whole: the same string, bit for bit and
// in length, as the calls' SETBITs make; and a user with a bitmap already
// gets the new bits added, not the bitmap replaced.
func TestRedisBloomRecordWritesTheBitmapSetbitWould(t *testing.T) {
	for _, client := range redisClients {
		t.Run(client, func(t *testing.T) {
			s := NewRedisBloom(RedisOptions{Bin: redisBin(t), Client: client})
			setUp(t, s)
			ctx := context.Background()
			w := DefaultWorkload(10)
			var items, more []string
			for j := range 200 {
				items = append(items, w.Item(1, j))
				more = append(more, w.Item(1, 1000+j))
			}
			if err := s.Record(ctx, "recorded", items); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Call(ctx, "called", items, len(items)); err != nil || len(got) != len(items) {
				t.Fatalf("the call returned %d of %d items unseen, %v", len(got), len(items), err)
			}
			recorded, err := s.rdb.Get(ctx, "b:recorded").Bytes()
			if err != nil {
				t.Fatal(err)
			}
			called, err := s.rdb.Get(ctx, "b:called").Bytes()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(recorded, called) {
				t.Fatalf("the recorded bitmap (%d bytes) differs from the called one (%d bytes)", len(recorded), len(called))
			}
			if err := s.Record(ctx, "recorded", more); err != nil {
				t.Fatal(err)
			}
			got, err := s.Call(ctx, "recorded", append(slices.Clone(items), more...), 1000)
			if err != nil || len(got) != 0 {
				t.Fatalf("after a second Record, %d of both lists unseen (%v), want none", len(got), err)
			}
		})
	}
}

func TestRunStopsAtTheMemoryLimit(t *testing.T) {
	s := NewRedisSet(RedisOptions{Bin: redisBin(t)})
	// 3,000 users of 200 items take about 45 MB of used_memory: a 4 MB limit
	// stops the run (the watch polls every 500 ms, within the 2 s phases).
	res, err := Run(context.Background(), s, RunOptions{Workload: DefaultWorkload(3000), Concurrency: 4,
		Warm: 100 * time.Millisecond, Duration: 2 * time.Second, Sample: 10, MemoryLimit: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Stopped, ErrMemoryLimit.Error()) {
		t.Errorf("stopped %q, want the memory limit", res.Stopped)
	}
	if res.Err != "" {
		t.Errorf("error %q: the calls the stop cancelled are no error of the system's", res.Err)
	}
	if res.Ran() {
		t.Error("a stopped run reports it ran")
	}
}

// The fill's bitmap has the bits SETBIT sets at the edges of bytes and of
// the filter (bits 0, 7, 8 and m-1), and its length, with either client;
// and both clients write the same string.
func TestRedisBloomRecordSetsEdgeBitsAsSetbit(t *testing.T) {
	byClient := map[string][]byte{}
	for _, client := range redisClients {
		t.Run(client, func(t *testing.T) {
			s := NewRedisBloom(RedisOptions{Bin: redisBin(t), Client: client})
			setUp(t, s)
			ctx := context.Background()
			m, k := s.Params()
			var all []byte
			for _, target := range []uint64{0, 7, 8, m - 1} {
				// An item one of whose positions is target.
				var item string
				var pos []uint64
				for i := 0; ; i++ {
					item = "edge-" + strconv.Itoa(i)
					if pos = BloomPositions(pos[:0], item, m, k); slices.Contains(pos, target) {
						break
					}
				}
				user := "edge-" + strconv.FormatUint(target, 10)
				if err := s.Record(ctx, user, []string{item}); err != nil {
					t.Fatal(err)
				}
				for _, p := range pos {
					if err := s.rdb.SetBit(ctx, "b:setbit-"+user, int64(p), 1).Err(); err != nil {
						t.Fatal(err)
					}
				}
				got, err := s.rdb.Get(ctx, "b:"+user).Bytes()
				if err != nil {
					t.Fatal(err)
				}
				want, err := s.rdb.Get(ctx, "b:setbit-"+user).Bytes()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					i := 0
					for i < min(len(got), len(want)) && got[i] == want[i] {
						i++
					}
					t.Fatalf("bit %d: the fill wrote %d bytes, SETBIT makes %d; they differ from byte %d", target, len(got), len(want), i)
				}
				if bit, err := s.rdb.GetBit(ctx, "b:"+user, int64(target)).Result(); err != nil || bit != 1 {
					t.Fatalf("bit %d of the fill's bitmap is %d (%v)", target, bit, err)
				}
				all = append(all, got...)
			}
			byClient[client] = all
		})
	}
	if a, b := byClient["go-redis"], byClient["resp"]; a != nil && b != nil && !bytes.Equal(a, b) {
		t.Fatalf("the clients wrote different bitmaps (%d and %d bytes)", len(a), len(b))
	}
}

// A port another redis-server took between FreePort and the start is given
// up for another: the server returned is the one started, not the other,
// which would vanish with its own test.
func TestStartRedisUsesItsOwnServerWhenItsPortIsTaken(t *testing.T) {
	bin := redisBin(t)
	ctx := context.Background()
	other, err := StartRedis(ctx, bin, "")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	_, port, _ := strings.Cut(other.Addr, ":")
	taken, _ := strconv.Atoi(port)
	picks := 0
	r, err := startRedis(ctx, bin, "", func() (int, error) {
		if picks++; picks == 1 {
			return taken, nil
		}
		return FreePort()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer c.Close()
	pid, err := redisPID(ctx, c)
	if err != nil || pid != r.PID() || r.Addr == other.Addr {
		t.Fatalf("started pid %d on %s, where pid %d answers (%v); the port's other server is pid %d on %s",
			r.PID(), r.Addr, pid, err, other.PID(), other.Addr)
	}
}

// Where apt-get cannot run, the error says redis-server is missing and how
// to get it, and ends on the reason, not on an empty output.
func TestEnsureRedisWithoutAptGetSaysWhatIsMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // neither redis-server nor apt-get nor sudo
	_, err := EnsureRedis(context.Background(), func(string, ...any) {})
	if !errors.Is(err, ErrRedisMissing) || !strings.Contains(err.Error(), "install Debian's redis-server") ||
		!strings.HasSuffix(err.Error(), "executable file not found in $PATH") {
		t.Errorf("err = %v", err)
	}
}
