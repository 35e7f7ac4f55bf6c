package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/zeebo/xxh3"
)

// EnsureRedis returns the path of redis-server, installing Debian's package
// with apt-get (through sudo when not root) if it is missing; logf is told
// when it installs.
func EnsureRedis(ctx context.Context, logf func(format string, a ...any)) (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	logf("redis-server is missing: installing Debian's redis-server with apt-get")
	var prefix []string
	if os.Geteuid() != 0 {
		prefix = []string{"sudo"}
	}
	for _, args := range [][]string{{"apt-get", "update", "-qq"},
		{"apt-get", "install", "-y", "-qq", "redis-server"}} {
		full := append(append([]string{}, prefix...), args...)
		cmd := exec.CommandContext(ctx, full[0], full[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			why := err.Error()
			if len(bytes.TrimSpace(out)) > 0 {
				why += ": " + lastLines(out, 5)
			}
			return "", fmt.Errorf("%w (install Debian's redis-server): %s: %s", ErrRedisMissing, strings.Join(full, " "), why)
		}
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("%w: not on PATH after apt-get install", ErrRedisMissing)
	}
	return p, nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// RedisServer is a redis-server process the harness started on a free
// loopback port with persistence off (--save "" --appendonly no).
type RedisServer struct {
	Addr string
	cmd  *exec.Cmd
	dir  string
	done chan error
}

// StartRedis starts bin on a free 127.0.0.1 port, its working directory a
// fresh temporary one, its log in logPath (or discarded if empty), and waits
// until it answers PING.
//
// The port is free when FreePort picks it, not when redis-server binds it:
// meanwhile another process may take it, most often another test's
// redis-server given the same port by its own FreePort (go test runs
// packages at once). Ours then exits on its bind error, while the PING,
// answered by the other, would pass: the caller would use (and write into)
// someone else's server, which vanishes when its test ends ("connection
// refused" in the middle of a test). So the server that answers must be
// ours, by its process id, and a port lost to another process is given up
// for a new one.
func StartRedis(ctx context.Context, bin, logPath string) (*RedisServer, error) {
	return startRedis(ctx, bin, logPath, FreePort)
}

// redisPortTries is how many ports startRedis tries before giving up.
const redisPortTries = 5

// errPortTaken says the port given to redis-server was another process's.
var errPortTaken = errors.New("the port was taken by another process")

// startRedis is StartRedis with the port picked by pick.
func startRedis(ctx context.Context, bin, logPath string, pick func() (int, error)) (*RedisServer, error) {
	var err error
	for range redisPortTries {
		var port int
		if port, err = pick(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrServer, err)
		}
		var r *RedisServer
		r, err = startRedisOn(ctx, bin, logPath, port)
		if !errors.Is(err, errPortTaken) {
			return r, err
		}
	}
	return nil, fmt.Errorf("%w: redis-server: %v, %d times", ErrServer, err, redisPortTries)
}

// startRedisOn starts bin on port and waits until it answers PING itself;
// errPortTaken when another process holds the port.
func startRedisOn(ctx context.Context, bin, logPath string, port int) (*RedisServer, error) {
	dir, err := os.MkdirTemp("", "seenbench-redis-")
	if err != nil {
		return nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--daemonize", "no", "--dir", dir, "--loglevel", "warning"}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w: start %s: %v", ErrServer, bin, err)
	}
	r := &RedisServer{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, dir: dir, done: make(chan error, 1)}
	go func() { r.done <- cmd.Wait() }()
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		pid, err := redisPID(pctx, c)
		cancel()
		switch {
		case err == nil && pid == r.PID():
			return r, nil
		case err == nil:
			r.Stop() // it cannot bind the port the other holds
			return nil, fmt.Errorf("%w: redis-server pid %d answers on %s", errPortTaken, pid, r.Addr)
		}
		select {
		case werr := <-r.done:
			os.RemoveAll(dir)
			// Its bind failed if the port is still held: by a server that
			// does not speak Redis, or a connection's end.
			l, lerr := net.Listen("tcp", r.Addr)
			if lerr != nil {
				return nil, fmt.Errorf("%w: redis-server exited: %v; %v", errPortTaken, werr, lerr)
			}
			l.Close()
			return nil, fmt.Errorf("%w: redis-server exited: %v (log: %s)", ErrServer, werr, logPath)
		case <-ctx.Done():
			r.Stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.Stop()
			return nil, fmt.Errorf("%w: redis-server on %s did not answer PING: %v", ErrServer, r.Addr, err)
		}
	}
}

// redisPID is the process id of the redis-server c reaches (INFO server's
// process_id).
func redisPID(ctx context.Context, c *redis.Client) (int, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("bench: no process_id in INFO server")
}

// PID returns the server's process id.
func (r *RedisServer) PID() int { return r.cmd.Process.Pid }

// Stop terminates the server (SIGTERM, then SIGKILL after 10s) and removes its directory.
func (r *RedisServer) Stop() error {
	defer os.RemoveAll(r.dir)
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	return nil
}

// BloomParams returns m (bits) and k (hashes) of the classic Bloom filter
// for n items at false-positive rate p: m = ceil(-n ln p / ln² 2), k = round(m/n ln 2).
func BloomParams(n int, p float64) (m uint64, k int) {
	m = uint64(math.Ceil(-float64(n) * math.Log(p) / (math.Ln2 * math.Ln2)))
	k = int(math.Round(float64(m) / float64(n) * math.Ln2))
	if k < 1 {
		k = 1
	}
	return m, k
}

// RedisOptions configure the two Redis systems.
type RedisOptions struct {
	// Bin is the redis-server binary. Default: found (or installed) by EnsureRedis.
	Bin string
	// Conns is the client's connection pool size. Default 64.
	Conns int
	// LogDir receives redis-server's log. Default: discarded.
	LogDir string
	// BloomItems and BloomFP size the bitmap Bloom filter. Default 2000 and 0.01.
	BloomItems int
	BloomFP    float64
	// Logf receives notices (installing redis-server). Default: discarded.
	Logf func(format string, a ...any)
	// Client is the client of the load: "go-redis" (default) or "resp", a
	// minimal pipelining client without per-command allocations, to see
	// how much of the figures is go-redis's own cost.
	Client string
}

func (o RedisOptions) withDefaults() RedisOptions {
	if o.Conns == 0 {
		o.Conns = 64
	}
	if o.BloomItems == 0 {
		o.BloomItems = DefaultPool
	}
	if o.BloomFP == 0 {
		o.BloomFP = 0.01
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Client == "" {
		o.Client = "go-redis"
	}
	return o
}

// redisSystem is what both Redis systems share: the server and the client.
type redisSystem struct {
	name string
	opts RedisOptions
	srv  *RedisServer
	rdb  *redis.Client
	resp *respPool // with Client "resp"
}

func (s *redisSystem) Name() string { return s.name }

func (s *redisSystem) Setup(ctx context.Context) error {
	bin := s.opts.Bin
	if bin == "" {
		var err error
		if bin, err = EnsureRedis(ctx, s.opts.Logf); err != nil {
			return err
		}
	}
	logPath := ""
	if s.opts.LogDir != "" {
		logPath = filepath.Join(s.opts.LogDir, s.name+".log")
	}
	srv, err := StartRedis(ctx, bin, logPath)
	if err != nil {
		return err
	}
	s.srv = srv
	s.rdb = redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: s.opts.Conns,
		PipelinePoolSize: s.opts.Conns, MaxRetries: -1, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, Protocol: 2})
	switch s.opts.Client {
	case "go-redis":
	case "resp":
		s.resp = newRespPool(srv.Addr, s.opts.Conns)
	default:
		return fmt.Errorf("%w: unknown Redis client %q (go-redis or resp)", ErrBadConfig, s.opts.Client)
	}
	return nil
}

// Memory returns INFO memory's used_memory.
func (s *redisSystem) Memory(ctx context.Context) (Memory, error) {
	info, err := s.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return Memory{}, err
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "used_memory:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return Memory{Bytes: n, Kind: "used_memory"}, err
		}
	}
	return Memory{}, errors.New("bench: no used_memory in INFO memory")
}

// CPU returns redis-server's CPU time from /proc.
func (s *redisSystem) CPU() (CPU, error) {
	return ProcessCPU(s.srv.PID())
}

func (s *redisSystem) Close() error {
	var err error
	if s.resp != nil {
		s.resp.close()
		s.resp = nil
	}
	if s.rdb != nil {
		err = s.rdb.Close()
	}
	if s.srv != nil {
		if e := s.srv.Stop(); err == nil {
			err = e
		}
	}
	s.rdb, s.srv = nil, nil
	return err
}

// RedisSet is a SET per user (key "s:<user>"): SMISMEMBER of the candidates,
// then SADD of the returned ones. The SADD depends on the SMISMEMBER reply,
// so a call is two round trips of one command each. Exact: no false
// positives.
type RedisSet struct{ redisSystem }

// NewRedisSet returns the Redis SET system.
func NewRedisSet(opts RedisOptions) *RedisSet {
	return &RedisSet{redisSystem{name: "redis-set", opts: opts.withDefaults()}}
}

var argsPool = sync.Pool{New: func() any { s := make([]any, 0, 4*DefaultCandidates); return &s }}

// Call is the one call on a Redis SET. Safe for concurrent use.
func (s *RedisSet) Call(ctx context.Context, user string, candidates []string, limit int) ([]string, error) {
	if s.resp != nil {
		return s.callResp(ctx, user, candidates, limit)
	}
	key := "s:" + user
	ap := argsPool.Get().(*[]any)
	defer argsPool.Put(ap)
	args := (*ap)[:0]
	for _, c := range candidates {
		args = append(args, c)
	}
	member, err := s.rdb.SMIsMember(ctx, key, args...).Result()
	if err != nil {
		return nil, err
	}
	if len(member) != len(candidates) {
		return nil, fmt.Errorf("%w: SMISMEMBER returned %d answers for %d members", ErrBadAnswer, len(member), len(candidates))
	}
	unseen := make([]string, 0, min(limit, len(candidates)))
	args = args[:0]
	for i, c := range candidates {
		if len(unseen) == limit {
			break
		}
		if !member[i] {
			unseen = append(unseen, c)
			args = append(args, c)
		}
	}
	*ap = args[:0]
	if len(args) > 0 {
		if err := s.rdb.SAdd(ctx, key, args...).Err(); err != nil {
			return nil, err
		}
	}
	return unseen, nil
}

func (s *RedisSet) callResp(ctx context.Context, user string, candidates []string, limit int) ([]string, error) {
	key := "s:" + user
	var member []int64
	err := s.resp.do(ctx, func(b []byte) []byte {
		b = appendArrayHeader(b, 2+len(candidates))
		b = appendBulk(b, "SMISMEMBER")
		b = appendBulk(b, key)
		for _, c := range candidates {
			b = appendBulk(b, c)
		}
		return b
	}, func(c *respConn) (err error) {
		member, err = c.readIntArray(make([]int64, 0, len(candidates)))
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(member) != len(candidates) {
		return nil, fmt.Errorf("%w: SMISMEMBER returned %d answers for %d members", ErrBadAnswer, len(member), len(candidates))
	}
	unseen := make([]string, 0, min(limit, len(candidates)))
	for i, c := range candidates {
		if len(unseen) == limit {
			break
		}
		if member[i] == 0 {
			unseen = append(unseen, c)
		}
	}
	if len(unseen) == 0 {
		return unseen, nil
	}
	err = s.respSADD(ctx, key, unseen)
	return unseen, err
}

// respSADD adds members to the set at key through the minimal RESP client.
func (s *RedisSet) respSADD(ctx context.Context, key string, members []string) error {
	return s.resp.do(ctx, func(b []byte) []byte {
		b = appendArrayHeader(b, 2+len(members))
		b = appendBulk(b, "SADD")
		b = appendBulk(b, key)
		for _, m := range members {
			b = appendBulk(b, m)
		}
		return b
	}, func(c *respConn) error {
		_, err := c.readInt()
		return err
	})
}

// RedisBloom is a Bloom filter on a bitmap per user (key "b:<user>"), the
// classic SETBIT/GETBIT recipe: m bits and k hashes of a filter sized for
// the pool at the target rate, the same for every user; bit positions by
// double hashing of the item's 128-bit xxh3 (h1 + i*h2 mod m). A call is one
// pipeline of k GETBITs per candidate, then one pipeline of k SETBITs per
// returned item.
type RedisBloom struct {
	redisSystem
	m uint64
	k int
}

// NewRedisBloom returns the Redis bitmap Bloom system.
func NewRedisBloom(opts RedisOptions) *RedisBloom {
	opts = opts.withDefaults()
	m, k := BloomParams(opts.BloomItems, opts.BloomFP)
	return &RedisBloom{redisSystem: redisSystem{name: "redis-bloom", opts: opts}, m: m, k: k}
}

// Params returns the filter's m (bits) and k (hashes).
func (s *RedisBloom) Params() (m uint64, k int) { return s.m, s.k }

// BloomPositions appends the k bit positions of item in a filter of m bits.
func BloomPositions(dst []uint64, item string, m uint64, k int) []uint64 {
	h := xxh3.HashString128(item)
	for i := 0; i < k; i++ {
		dst = append(dst, (h.Lo+uint64(i)*h.Hi)%m)
	}
	return dst
}

// Call is the one call on a bitmap Bloom filter. Safe for concurrent use.
func (s *RedisBloom) Call(ctx context.Context, user string, candidates []string, limit int) ([]string, error) {
	key := "b:" + user
	pos := make([]uint64, 0, len(candidates)*s.k)
	for _, c := range candidates {
		pos = BloomPositions(pos, c, s.m, s.k)
	}
	if s.resp != nil {
		return s.callResp(ctx, key, candidates, limit, pos)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(pos))
	for i, p := range pos {
		cmds[i] = pipe.GetBit(ctx, key, int64(p))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	unseen := make([]string, 0, min(limit, len(candidates)))
	var set []uint64
	for i, c := range candidates {
		if len(unseen) == limit {
			break
		}
		for j := 0; j < s.k; j++ {
			if cmds[i*s.k+j].Val() == 0 {
				unseen = append(unseen, c)
				set = append(set, pos[i*s.k:(i+1)*s.k]...)
				break
			}
		}
	}
	if len(set) > 0 {
		pipe := s.rdb.Pipeline()
		for _, p := range set {
			pipe.SetBit(ctx, key, int64(p), 1)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
	}
	return unseen, nil
}

func (s *RedisBloom) callResp(ctx context.Context, key string, candidates []string, limit int, pos []uint64) ([]string, error) {
	bits := make([]int64, 0, len(pos))
	err := s.resp.do(ctx, func(b []byte) []byte {
		for _, p := range pos {
			b = appendArrayHeader(b, 3)
			b = appendBulk(b, "GETBIT")
			b = appendBulk(b, key)
			b = appendBulkInt(b, p)
		}
		return b
	}, func(c *respConn) error {
		for range pos {
			v, err := c.readInt()
			if err != nil {
				return err
			}
			bits = append(bits, v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	unseen := make([]string, 0, min(limit, len(candidates)))
	var set []uint64
	for i, c := range candidates {
		if len(unseen) == limit {
			break
		}
		for j := 0; j < s.k; j++ {
			if bits[i*s.k+j] == 0 {
				unseen = append(unseen, c)
				set = append(set, pos[i*s.k:(i+1)*s.k]...)
				break
			}
		}
	}
	if len(set) == 0 {
		return unseen, nil
	}
	err = s.resp.do(ctx, func(b []byte) []byte {
		for _, p := range set {
			b = appendArrayHeader(b, 4)
			b = appendBulk(b, "SETBIT")
			b = appendBulk(b, key)
			b = appendBulkInt(b, p)
			b = appendBulk(b, "1")
		}
		return b
	}, func(c *respConn) error {
		for range set {
			if _, err := c.readInt(); err != nil {
				return err
			}
		}
		return nil
	})
	return unseen, err
}

// Record adds items to the user's SET with one SADD (the fill phase).
func (s *RedisSet) Record(ctx context.Context, user string, items []string) error {
	if len(items) == 0 {
		return nil
	}
	key := "s:" + user
	if s.resp != nil {
		return s.respSADD(ctx, key, items)
	}
	args := make([]any, len(items))
	for i, c := range items {
		args[i] = c
	}
	return s.rdb.SAdd(ctx, key, args...).Err()
}

// Record sets the items' bits (the fill phase). A user the fill reaches
// first (every user, as it runs) gets its bitmap built here and written
// whole with one SET NX: the same bits SETBIT would set, which numbers bit
// p as the bit 0x80>>(p%8) of byte p/8, and the same length, up to the
// byte of the highest bit. One BITFIELD SET u1 per bit took Redis about a
// millisecond a user (880 users a second, 19 minutes for a million), SET
// about a microsecond per 100 bytes. The string is as long as SETBIT's
// would be, but SETBIT, growing a string bit by bit, may leave it room
// to spare (Redis grows strings by doubling), so Redis's memory per user
// may be a little under what the calls alone would have made. A user that
// has a bitmap already gets its bits with one BITFIELD.
func (s *RedisBloom) Record(ctx context.Context, user string, items []string) error {
	if len(items) == 0 {
		return nil
	}
	key := "b:" + user
	pos := make([]uint64, 0, len(items)*s.k)
	for _, c := range items {
		pos = BloomPositions(pos, c, s.m, s.k)
	}
	bitmap := make([]byte, slices.Max(pos)/8+1)
	for _, p := range pos {
		bitmap[p/8] |= 0x80 >> (p % 8)
	}
	if s.resp == nil {
		if set, err := s.rdb.SetNX(ctx, key, bitmap, 0).Result(); set || err != nil {
			return err
		}
		args := make([]any, 0, 4*len(pos))
		for _, p := range pos {
			args = append(args, "SET", "u1", p, 1)
		}
		return s.rdb.BitField(ctx, key, args...).Err()
	}
	var set bool
	err := s.resp.do(ctx, func(b []byte) []byte {
		b = appendArrayHeader(b, 4)
		b = appendBulk(b, "SET")
		b = appendBulk(b, key)
		b = appendBulk(b, string(bitmap))
		return appendBulk(b, "NX")
	}, func(c *respConn) (err error) {
		set, err = c.readOK()
		return err
	})
	if set || err != nil {
		return err
	}
	return s.resp.do(ctx, func(b []byte) []byte {
		b = appendArrayHeader(b, 2+4*len(pos))
		b = appendBulk(b, "BITFIELD")
		b = appendBulk(b, key)
		for _, p := range pos {
			b = appendBulk(b, "SET")
			b = appendBulk(b, "u1")
			b = appendBulkInt(b, p)
			b = appendBulk(b, "1")
		}
		return b
	}, func(c *respConn) error {
		_, err := c.readIntArray(make([]int64, 0, len(pos)))
		return err
	})
}
