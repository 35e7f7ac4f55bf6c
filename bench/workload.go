package bench

import (
	"fmt"
	"math/rand"
	randv2 "math/rand/v2"
	"slices"
)

// Workload is the reference feed workload: Users users chosen per call by a
// Zipf law over their ranks (or uniformly), each with a pool of Pool items;
// a call offers Candidates items drawn from the user's pool and records the
// first Limit unseen ones. Everything derives from Seed.
type Workload struct {
	// Users is U, the number of distinct users. Required.
	Users int
	// Pool is P, the items each user's candidates are drawn from. Default 2000.
	Pool int
	// Candidates is the candidates per call. Default 200.
	Candidates int
	// Limit is the unseen items a call returns and records. Default 20.
	Limit int
	// Zipf is the exponent s of the Zipf law over user ranks; 0 means
	// uniform. DefaultWorkload sets 1.1.
	Zipf float64
	// Seed fixes every random choice. Default 0 (a fixed seed like any other).
	Seed uint64
}

// Workload defaults (see WORKLOAD.md).
const (
	DefaultPool       = 2000
	DefaultCandidates = 200
	DefaultLimit      = 20
	DefaultZipf       = 1.1
)

// DefaultWorkload returns the reference workload for users users.
func DefaultWorkload(users int) Workload {
	return Workload{Users: users, Pool: DefaultPool, Candidates: DefaultCandidates,
		Limit: DefaultLimit, Zipf: DefaultZipf, Seed: 1}
}

func (w Workload) withDefaults() Workload {
	if w.Pool == 0 {
		w.Pool = DefaultPool
	}
	if w.Candidates == 0 {
		w.Candidates = DefaultCandidates
	}
	if w.Limit == 0 {
		w.Limit = DefaultLimit
	}
	return w
}

// Validate reports whether w (after defaults) can generate calls.
func (w Workload) Validate() error {
	w = w.withDefaults()
	switch {
	case w.Users < 1 || w.Users > 1<<31:
		return fmt.Errorf("%w: users %d outside [1, 2^31]", ErrBadConfig, w.Users)
	case w.Pool < 1 || w.Pool > 1<<16:
		return fmt.Errorf("%w: pool %d outside [1, 65536]", ErrBadConfig, w.Pool)
	case w.Candidates < 1 || w.Candidates > w.Pool:
		return fmt.Errorf("%w: candidates %d outside [1, pool %d]", ErrBadConfig, w.Candidates, w.Pool)
	case w.Limit < 1:
		return fmt.Errorf("%w: limit %d < 1", ErrBadConfig, w.Limit)
	case w.Zipf != 0 && !(w.Zipf > 1):
		return fmt.Errorf("%w: zipf exponent %v must be > 1 (0 for uniform)", ErrBadConfig, w.Zipf)
	}
	return nil
}

// Item and user id lengths (bytes), from WORKLOAD.md.
const (
	MinItemLen = 8
	MaxItemLen = 24
	MinUserLen = 6
	MaxUserLen = 16
)

// idChars are the characters of rank and pool-index numbers (base 36).
const idChars = "0123456789abcdefghijklmnopqrstuvwxyz"

// fillChars are the characters of the hash-derived part of ids: URL- and
// JSON-safe, 64 of them so that one 64-bit hash gives 10 characters.
const fillChars = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_~"

// mix is the splitmix64 finalizer: a bijective 64-bit mixer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// appendBase36 appends v in base 36.
func appendBase36(dst []byte, v uint64) []byte {
	var tmp [13]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = idChars[v%36]
		v /= 36
		if v == 0 {
			break
		}
	}
	return append(dst, tmp[i:]...)
}

// fillPairs[v] is fillChars[v&63] then fillChars[v>>6]: two characters
// of filler a lookup, from 12 bits of the hash stream.
var fillPairs = func() (t [1 << 12][2]byte) {
	for v := range t {
		t[v] = [2]byte{fillChars[v&63], fillChars[v>>6]}
	}
	return t
}()

// appendFiller appends n characters of fillChars drawn from the hash stream
// h: character k of each group of ten is fillChars[x>>(6k)&63] for the
// group's hash x. It writes whole groups, two characters at a time, and
// cuts the last: generating the candidates was about a third of the
// harness's CPU a call, taken from the server on a shared machine.
func appendFiller(dst []byte, h uint64, n int) []byte {
	start := len(dst)
	groups := (n + 9) / 10
	dst = slices.Grow(dst, groups*10)[:start+groups*10]
	for out := dst[start:]; len(out) >= 10; out = out[10:] {
		h = mix(h + 0x9e3779b97f4a7c15)
		p0, p1, p2, p3, p4 := fillPairs[h&4095], fillPairs[h>>12&4095], fillPairs[h>>24&4095],
			fillPairs[h>>36&4095], fillPairs[h>>48&4095]
		_ = out[9]
		out[0], out[1], out[2], out[3], out[4] = p0[0], p0[1], p1[0], p1[1], p2[0]
		out[5], out[6], out[7], out[8], out[9] = p2[1], p3[0], p3[1], p4[0], p4[1]
	}
	return dst[:start+n]
}

// AppendUser appends the id of the user of the given rank (0 is the most
// popular under Zipf): "u", the rank in base 36, "-", then filler, 6 to 16
// bytes in all, the length chosen by a hash of (seed, rank). Distinct ranks
// give distinct ids.
func (w Workload) AppendUser(dst []byte, rank int) []byte {
	h := mix(w.Seed ^ mix(uint64(rank)+0x5555))
	n := MinUserLen + int(h%uint64(MaxUserLen-MinUserLen+1))
	start := len(dst)
	dst = append(dst, 'u')
	dst = appendBase36(dst, uint64(rank))
	dst = append(dst, '-')
	if used := len(dst) - start; n > used {
		dst = appendFiller(dst, h, n-used)
	}
	return dst
}

// User returns the id of the user of the given rank.
func (w Workload) User(rank int) string { return string(w.AppendUser(nil, rank)) }

// AppendItem appends item j (0 <= j < Pool) of the user of the given rank:
// "i", j in base 36, ".", then filler, 8 to 24 bytes in all, everything a
// hash of (seed, rank, j). Items of one user are distinct; items of
// different users are distinct with overwhelming probability.
func (w Workload) AppendItem(dst []byte, rank, j int) []byte {
	h := mix(w.Seed ^ mix(uint64(rank)<<16|uint64(j)))
	n := MinItemLen + int(h%uint64(MaxItemLen-MinItemLen+1))
	start := len(dst)
	dst = append(dst, 'i')
	dst = appendBase36(dst, uint64(j))
	dst = append(dst, '.')
	return appendFiller(dst, h, n-(len(dst)-start))
}

// Item returns item j of the user of the given rank.
func (w Workload) Item(rank, j int) string { return string(w.AppendItem(nil, rank, j)) }

// Call is one generated request.
type Call struct {
	Rank       int      // the user's rank
	User       string   // the user's id
	Candidates []string // distinct items of the user's pool, in random order
	Limit      int      // unseen items to return and record
}

// Gen generates calls of one workload. It is deterministic for a given
// workload seed and stream number. Not safe for concurrent use: give each
// goroutine its own Gen (NewGen with distinct streams).
type Gen struct {
	w    Workload
	src  *Source
	rng  *randv2.Rand
	zipf *rand.Zipf
	perm []uint16 // a permutation of [0, Pool); candidates are its prefix after a partial shuffle
	buf  []byte
}

// pcgSource adapts a math/rand/v2 PCG to the math/rand Source rand.Zipf needs.
type pcgSource struct{ p *randv2.PCG }

func (s pcgSource) Int63() int64    { return int64(s.p.Uint64() >> 1) }
func (s pcgSource) Uint64() uint64  { return s.p.Uint64() }
func (s pcgSource) Seed(seed int64) { s.p.Seed(uint64(seed), 0) }

// NewGen returns the generator of stream number stream of w.
func NewGen(w Workload, stream uint64) (*Gen, error) {
	src, err := NewSource(w)
	if err != nil {
		return nil, err
	}
	return src.Gen(stream), nil
}

// Source is a workload whose generators draw independent streams of it.
// Safe for concurrent use.
//
// It once cached the pools of its 1,024 most popular users (100 MB), so
// that their calls cost no generation. On the two cores the harness shares
// with the system under test, whose data fills the caches too, reading a
// cached candidate missed the caches twice (its offset, then its bytes) and
// cost more than generating it: without the cache the harness took 77.6
// and 77.3 us of CPU a call against 85.0 and 96.2 with it (`seenbench
// --users 1e5 --systems seenapi-http --concurrency 64 --duration 15s`,
// alternated).
type Source struct {
	w Workload
}

// NewSource returns a source of w.
func NewSource(w Workload) (*Source, error) {
	w = w.withDefaults()
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return &Source{w: w}, nil
}

// Workload returns the source's workload, defaults applied.
func (s *Source) Workload() Workload { return s.w }

// Gen returns the generator of stream number stream. Generators of one
// source with distinct streams draw independent calls.
func (s *Source) Gen(stream uint64) *Gen {
	w := s.w
	pcg := randv2.NewPCG(mix(w.Seed), mix(stream+0x1234567))
	g := &Gen{w: w, src: s, rng: randv2.New(pcg), perm: make([]uint16, w.Pool)}
	for i := range g.perm {
		g.perm[i] = uint16(i)
	}
	if w.Zipf > 0 && w.Users > 1 {
		zpcg := randv2.NewPCG(mix(w.Seed+1), mix(stream+0x7654321))
		g.zipf = rand.NewZipf(rand.New(pcgSource{zpcg}), w.Zipf, 1, uint64(w.Users-1))
	}
	return g
}

// fillOrderStream is the stream FillOrder draws from, apart from every
// phase's (those count up from 1).
const fillOrderStream = 1 << 63

// FillOrder returns the ranks 0..Users-1 in the order a fill visits them:
// by when a stream of Users calls of the workload last drew each, those it
// never drew first (least popular first). A hot set that keeps the users
// used last (seenapi's LRU) then ends the fill holding what a long run of
// the workload would leave in it. Filled in rank order, it would end
// holding the least popular users instead, and the measured phases would
// see it in a transient far from its steady state: with 1.6 of ten
// million users fitting, a simulated LRU filled in a random order hits
// 0.78 of the first 200,000 calls and 0.90 after three million, against
// about 0.93 at its steady state (Che's approximation) and 0.95 right
// after this fill.
func (s *Source) FillOrder() []int32 {
	n := s.w.Users
	g := s.Gen(fillOrderStream)
	draws := make([]int32, n)
	for i := range draws {
		draws[i] = int32(g.Rank())
	}
	seen := make([]bool, n)
	order := make([]int32, n)
	next := n - 1
	for i := n - 1; i >= 0; i-- { // latest draws go last
		if r := draws[i]; !seen[r] {
			seen[r] = true
			order[next] = r
			next--
		}
	}
	for r := 0; next >= 0; r++ { // the more popular nearer the drawn ones
		if !seen[r] {
			order[next] = int32(r)
			next--
		}
	}
	return order
}

// Workload returns the generator's workload, defaults applied.
func (g *Gen) Workload() Workload { return g.w }

// Rank draws a user rank: Zipf (rank 0 most likely) or uniform.
func (g *Gen) Rank() int {
	if g.zipf != nil {
		return int(g.zipf.Uint64())
	}
	return g.rng.IntN(g.w.Users)
}

// Next fills c with a call of the workload: a user drawn by Rank, Candidates
// items from its pool, limit Limit.
func (g *Gen) Next(c *Call) { g.Fill(c, g.Rank(), g.w.Candidates, g.w.Limit) }

// Fill fills c with a call for the user of the given rank offering n
// distinct random items of its pool (n <= Pool) with the given limit. The
// strings of c share one allocation; they stay valid after the next Fill.
func (g *Gen) Fill(c *Call, rank, n, limit int) {
	if n > len(g.perm) {
		n = len(g.perm)
	}
	if cap(c.Candidates) < n {
		c.Candidates = make([]string, n)
	}
	c.Candidates = c.Candidates[:n]
	b := g.buf[:0]
	b = g.w.AppendUser(b, rank)
	userEnd := len(b)
	var ends [DefaultCandidates + 1]int
	endsBuf := ends[:0]
	if n+1 > len(ends) {
		endsBuf = make([]int, 0, n+1)
	}
	endsBuf = append(endsBuf, userEnd)
	for i := 0; i < n; i++ {
		k := i + g.rng.IntN(len(g.perm)-i)
		g.perm[i], g.perm[k] = g.perm[k], g.perm[i]
		b = g.w.AppendItem(b, rank, int(g.perm[i]))
		endsBuf = append(endsBuf, len(b))
	}
	g.buf = b
	s := string(b) // the one allocation
	c.Rank, c.User, c.Limit = rank, s[:userEnd], limit
	for i := 0; i < n; i++ {
		c.Candidates[i] = s[endsBuf[i]:endsBuf[i+1]]
	}
}
