package userfilter

import (
	"encoding/binary"
	"math"
	"time"
	"unsafe"
)

// generation is the scalable Bloom filter of one time bucket: a chain of
// layers, the last one taking new items, all in one contiguous slab.
type generation struct {
	bucket int64    // absolute bucket number (unix seconds / granularity); 0 without a window
	slab   []uint64 // the layers' bits, back to back (a bitset.BitSet's words)
	// layers is a prefix of the profile's shared table when they match it
	// (always, for layers this process built), else the generation's own;
	// either way its capacity is its length, so appending copies and never
	// writes into the shared table.
	layers []layer
	n      uint32 // items in the last layer; every layer before it is full
}

// used returns the bits of the slab taken by layers.
func (g *generation) used() uint64 {
	if len(g.layers) == 0 {
		return 0
	}
	l := &g.layers[len(g.layers)-1]
	if l.compact() {
		return g.cused()
	}
	return uint64(l.off) + l.bits()
}

// itemsIn returns the items layer i holds (a full compact layer can hold
// more than its capacity after a merge: see mergeCompact).
func (g *generation) itemsIn(i int) uint32 {
	if i == len(g.layers)-1 {
		return g.n
	}
	if l := &g.layers[i]; l.compact() {
		return uint32(efLen(g.set(l)))
	}
	return g.layers[i].cap
}

// items returns the items g holds.
func (g *generation) items() uint64 {
	var n uint64
	for i := range g.layers {
		n += uint64(g.itemsIn(i))
	}
	return n
}

// Filter is one user's seen history. It is not safe for concurrent use: the
// hot set serializes calls per user.
//
// A Filter must not be copied by value (its gens may point into itself):
// use Replace to move one.
type Filter struct {
	_     noCopy
	p     *sharedProfile // shared by the filters of one profile and never changed (see share)
	gens  []generation   // by bucket, oldest first; exactly one (bucket 0) without a window
	first uint32         // stamps (see stamp) of the first and last recording; 0: never
	last  uint32
	// one holds the generation while there is at most one (always, without
	// a window): gens is then one[:len:1], so the filter is one heap object
	// instead of two and the collector, which marks a million hot filters
	// at a time, looks up one span less per filter. Zero whenever gens is
	// elsewhere, so that it keeps no slab alive.
	one [1]generation
}

// noCopy makes go vet's copylocks check report a Filter copied by value.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// inline reports whether f.gens is stored in f.one.
func (f *Filter) inline() bool { return cap(f.gens) > 0 && &f.gens[:1][0] == &f.one[0] }

// setGens makes f.gens n zero generations with room for c >= n: in f.one
// when c <= 1, else in a new array. f.one is cleared first, so f.gens must
// not be in it unless n is 0.
func (f *Filter) setGens(n, c int) {
	f.one = [1]generation{}
	if c <= 1 {
		f.gens = f.one[:n:1]
	} else {
		f.gens = make([]generation, n, c)
	}
}

// Replace makes f the filter g is and leaves g empty: g's contents move, so
// g must not be used afterwards (it panics if it is).
func (f *Filter) Replace(g *Filter) {
	// Field by field: a Filter is never copied whole (noCopy).
	f.p, f.first, f.last = g.p, g.first, g.last
	if g.inline() {
		f.one = g.one
		f.gens = f.one[:len(g.gens):1]
	} else {
		f.one = [1]generation{}
		f.gens = g.gens
	}
	g.p, g.gens, g.one, g.first, g.last = nil, nil, [1]generation{}, 0, 0
}

// stamp is unix time t in 32 bits, as seconds since timeEpoch plus one
// (0 is "never"): a hot user's filter is 8 bytes smaller than with two
// int64s, which lets the hot set's entry drop to a smaller size class.
// Times before timeEpoch read as timeEpoch (as they always were encoded)
// and times past 2160 as 2160.
func stamp(t int64) uint32 { return uint32(min(max(t-timeEpoch, 0)+1, math.MaxUint32)) }

// unstamp is the unix time of stamp s > 0.
func unstamp(s uint32) int64 { return timeEpoch + int64(s) - 1 }

// New returns an empty filter built with profile p (zero fields take their defaults).
func New(p Profile) (*Filter, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	f := &Filter{p: share(p)}
	f.setGens(0, 1)
	return f, nil
}

// Profile returns the parameters the filter was built with.
func (f *Filter) Profile() Profile { return f.p.Profile }

// capacity of layer i: c0 * s^i, computed in integers so that every process
// derives the same sizes, and cut so that a capped user's last layer holds
// exactly what the cap leaves.
func (p *Profile) layerCapacity(i int, before uint64) uint64 {
	c := uint64(p.InitialCapacity)
	g := uint64(math.Round(p.Growth * 100))
	for j := 0; j < i && c < 1<<50; j++ {
		c = (c*g + 99) / 100
	}
	if p.MaxItems > 0 && before < p.MaxItems && c > p.MaxItems-before {
		c = p.MaxItems - before
	}
	return c
}

// layerError of layer i: p0 * r^i with p0 = p * (1 - r), so the compound rate
// sum_i p0 r^i stays under p however many layers there are.
func (p *Profile) layerError(i int) float64 {
	r := math.Round(p.Tightening*100) / 100
	return p.FPRate * (1 - r) * math.Pow(r, float64(i))
}

// bucketOf returns the bucket number of time t (0 without a window).
func (f *Filter) bucketOf(t time.Time) int64 {
	if f.p.Window == 0 {
		return 0
	}
	g := int64(f.p.Granularity / time.Second)
	s := t.Unix()
	b := s / g
	if s < 0 && s%g != 0 {
		b--
	}
	return b
}

// oldestLive returns the oldest bucket still inside the window at now.
func (f *Filter) oldestLive(now time.Time) int64 {
	if f.p.Window == 0 {
		return 0
	}
	return f.bucketOf(now) - int64(f.p.Window/f.p.Granularity)
}

// live returns the generations inside the window at now (a suffix of gens).
func (f *Filter) live(now time.Time) []generation {
	if f.p.Window == 0 {
		return f.gens
	}
	old := f.oldestLive(now)
	for i := range f.gens {
		if f.gens[i].bucket >= old {
			return f.gens[i:]
		}
	}
	return nil
}

// Expire drops generations that fell out of the window; it reports whether
// anything was dropped.
func (f *Filter) Expire(now time.Time) bool {
	l := f.live(now)
	if len(l) == len(f.gens) {
		return false
	}
	// l is in f.one only when empty: a single live generation that was
	// there would have left nothing to drop.
	f.setGens(len(l), len(l))
	copy(f.gens, l)
	return true
}

// Empty reports whether the filter holds no item at now.
func (f *Filter) Empty(now time.Time) bool {
	for _, g := range f.live(now) {
		if len(g.layers) > 1 || g.n > 0 {
			return false
		}
	}
	return true
}

// ExpiresAt returns when every item now in the filter will have left the
// window (zero time without a window or when empty).
func (f *Filter) ExpiresAt() time.Time {
	if f.p.Window == 0 || len(f.gens) == 0 {
		return time.Time{}
	}
	g := int64(f.p.Granularity / time.Second)
	end := (f.gens[len(f.gens)-1].bucket + 1) * g
	return time.Unix(end, 0).Add(f.p.Window)
}

// test reports whether g holds h; fpb is a staged profile's fpBits (nil
// for other kinds).
func (g *generation) test(h Hash, fpb []uint8) bool {
	if fpb != nil {
		v := g.stagedView()
		return g.stest(&v, h, fpb)
	}
	if len(g.layers) > 0 && g.layers[0].compact() {
		return g.ctest(h)
	}
	// Newest layers hold most items: test them first. The salt steps down
	// with the layer (saltOf(i) without a multiply).
	salt := saltOf(len(g.layers) - 1)
	for i := len(g.layers) - 1; i >= 0; i-- {
		if g.layers[i].test(g.slab, h, salt) {
			return true
		}
		salt -= golden
	}
	return false
}

func testLive(gens []generation, h Hash, fpb []uint8) bool {
	for i := len(gens) - 1; i >= 0; i-- {
		if gens[i].test(h, fpb) {
			return true
		}
	}
	return false
}

// items counts the items held at now.
func (f *Filter) items(now time.Time) uint64 {
	var n uint64
	live := f.live(now)
	for i := range live {
		n += live[i].items()
	}
	return n
}

// find returns the generation of bucket b, or nil.
func (f *Filter) find(b int64) *generation {
	for i := range f.gens {
		if f.gens[i].bucket == b {
			return &f.gens[i]
		}
	}
	return nil
}

// gen returns the generation of bucket b, creating it in order if needed.
func (f *Filter) gen(b int64) *generation {
	i := len(f.gens)
	for i > 0 && f.gens[i-1].bucket > b {
		i--
	}
	if i > 0 && f.gens[i-1].bucket == b {
		return &f.gens[i-1]
	}
	if len(f.gens) == cap(f.gens) && f.inline() {
		// Out of f.one, which must then keep no slab alive.
		gs := make([]generation, len(f.gens), 2*len(f.gens)+1)
		copy(gs, f.gens)
		f.one = [1]generation{}
		f.gens = gs
	}
	f.gens = append(f.gens, generation{})
	copy(f.gens[i+1:], f.gens[i:])
	f.gens[i] = generation{bucket: b}
	return &f.gens[i]
}

// addLayer appends a layer to g, growing the slab. It refuses (false) a
// layer that would take the filter past maxBitsTotal bits, the most Decode
// reads back (and below which every layer field fits in 32 bits), or,
// when maxEncoded > 0, its encoding past maxEncoded bytes (see encodedMax).
func (f *Filter) addLayer(g *generation, maxEncoded uint64) bool {
	if f.p.Kind == KindStaged {
		return f.addStaged(g, maxEncoded)
	}
	l, ok := f.nextLayer(g, maxEncoded)
	if !ok {
		return false
	}
	g.appendLayer(l, f.p.layers)
	return true
}

// nextLayer returns the layer addLayer would append to g (one of f.gens,
// or a generation not made yet), and whether the filter may grow by it.
func (f *Filter) nextLayer(g *generation, maxEncoded uint64) (layer, bool) {
	i := len(g.layers)
	var l layer
	if i < len(f.p.layers) {
		l = f.p.layers[i]
	} else {
		// Past the shared table (or a profile without one).
		var before uint64
		for j := range g.layers {
			before += uint64(g.layers[j].cap)
		}
		if f.p.Kind == KindCompact {
			var ok bool
			if l, ok = f.p.compactLayer(i, before, 0); !ok {
				return layer{}, false
			}
		} else {
			c, sh := f.p.plan(i, before)
			if c > maxBitsTotal {
				return layer{}, false
			}
			l = layer{slice: uint32(sh.slice), k: sh.k, cap: uint32(c)}
		}
	}
	// A set's words at its capacity, not its first word: it grows after
	// it opens, while other buckets of a window hold what they hold, and
	// Decode reads back no filter of more than maxBitsTotal bits.
	total := l.fullBits()
	for gi := range f.gens {
		total += f.gens[gi].used()
	}
	if total > maxBitsTotal {
		return layer{}, false
	}
	// The newest layer before l is full: its bound as the newest (its
	// capacity) is its bound as an older one (its items).
	if maxEncoded > 0 && f.encodedMax(f.gens)+f.newGenBytes(g)+layerBytes(&l, 0, true) > maxEncoded {
		return layer{}, false
	}
	return l, true
}

// Bounds of the parts of an encoding (see AppendBinary): encodedMax.
const (
	// Two bytes, ten varints and the checksum.
	maxHeaderBytes = 2 + 10*binary.MaxVarintLen64 + 4
	// The bucket's delta and the count of layers (at most maxLayers).
	maxGenBytes = binary.MaxVarintLen64 + 1
	// The items, the form and k, and the slice's bits (or the fingerprints').
	maxLayerHeader = 2*binary.MaxVarintLen64 + 1
)

// layerBytes bounds layer l's part of an encoding while it holds items,
// and, for its generation's newest layer, after any item it takes until it
// is full: a Bloom layer's bits are all there from the start (the sparse
// form is chosen only when shorter), a set of fingerprints is bounded at
// its capacity (its Elias-Fano form grows with its items).
func layerBytes(l *layer, items uint64, newest bool) uint64 {
	if !l.compact() {
		return maxLayerHeader + (l.bits()+7)/8
	}
	if newest {
		items = max(items, uint64(l.cap))
	}
	return maxLayerHeader + uint64(efBytes(items, uint(l.slice)))
}

// encodedMax bounds the length of the encoding of a filter of generations
// gens, now and after any item its layers take without a new one. A layer
// opens only while this bound with it stays within the limit the caller
// gives (addLayer), so a filter held to a limit from its start never
// encodes past it.
func (f *Filter) encodedMax(gens []generation) uint64 {
	n := uint64(maxHeaderBytes)
	for gi := range gens {
		g := &gens[gi]
		n += maxGenBytes
		for i := range g.layers {
			n += layerBytes(&g.layers[i], uint64(g.itemsIn(i)), i == len(g.layers)-1)
		}
	}
	return n
}

// newGenBytes is what g adds to encodedMax when it is a generation not yet
// in f.gens (Full asks about one).
func (f *Filter) newGenBytes(g *generation) uint64 {
	for gi := range f.gens {
		if &f.gens[gi] == g {
			return 0
		}
	}
	return maxGenBytes
}

// Full reports whether the filter can record no new item at now: it holds
// MaxItems, or it needs a new layer for one (or a new time bucket) and none
// fits within maxBitsTotal bits or, when maxEncoded > 0, an encoding of
// maxEncoded bytes. Items it already holds are found seen all the same. A
// filter that grew past maxEncoded otherwise (merged, imported) is full.
// It changes nothing.
func (f *Filter) Full(now time.Time, maxEncoded int) bool {
	if f.p.MaxItems > 0 && f.items(now) >= f.p.MaxItems {
		return true
	}
	limit := uint64(max(maxEncoded, 0))
	if limit > 0 && f.encodedMax(f.live(now)) > limit {
		return true
	}
	b := f.bucketOf(now)
	g := f.find(b)
	if g != nil && len(g.layers) > 0 && g.n < g.layers[len(g.layers)-1].cap {
		return false // room in the newest layer
	}
	if g == nil {
		g = &generation{bucket: b}
	}
	if f.p.Kind == KindStaged {
		_, _, ok := f.nextStaged(g, limit)
		return !ok
	}
	_, ok := f.nextLayer(g, limit)
	return !ok
}

// plan returns the capacity and shape of a generation's layer i, given
// the capacity of the layers before it.
func (p *Profile) plan(i int, before uint64) (uint64, shape) {
	c := p.layerCapacity(i, before)
	return c, layerShape(c, p.layerError(i))
}

// appendLayer places l right after the last layer, growing the slab to
// fit, and starts counting its items. The layers stay a prefix of table
// (the profile's) while they match it. It returns l as placed.
func (g *generation) appendLayer(l layer, table []layer) layer {
	l.off = uint32(g.used())
	if n := slabWords(uint64(l.off) + l.openBits()); n > cap(g.slab) {
		ns := newSlab(n)
		copy(ns, g.slab)
		g.slab = ns
	} else if n > len(g.slab) {
		g.slab = g.slab[:n]
	}
	i := len(g.layers)
	if i < len(table) && table[i] == l && (i == 0 || &g.layers[0] == &table[0]) {
		g.layers = table[: i+1 : i+1]
	} else {
		own := make([]layer, i+1)
		copy(own, g.layers)
		own[i] = l
		g.layers = own
	}
	g.n = 0
	return l
}

// addResult is what add did with an item.
type addResult uint8

const (
	present addResult = iota // already there (or a false positive)
	added                    // recorded
	full                     // refused: the user is at the cap, or the filter at maxBitsTotal
)

// tally counts what add did with the items of one call.
type tally struct {
	added     int
	saturated bool // some item was refused (full)
}

// count counts r and reports whether the item was added.
func (t *tally) count(r addResult) bool {
	switch r {
	case added:
		t.added++
	case full:
		t.saturated = true
	}
	return r == added
}

// newSlab returns n zero words. Appending to an empty slice rounds the
// capacity up to the allocator's size class: MemoryBytes then counts what
// is really allocated, and the spare words host the next layer's start.
func newSlab(n int) []uint64 { return append(make([]uint64, 0), make([]uint64, n)...) }

// add records h in bucket b unless it is already there, the user is at the
// cap or the filter cannot grow, and sets *grew when it added a layer.
// selected says Select found h unseen in this call and nothing but this
// call's adds changed the filter since, in its newest set only: a compact
// or staged filter then only looks for h in that set (see cadd), where an
// earlier item of the call may have put its fingerprint. Once a layer is
// added, an item may be a false positive of the set it sealed, so the
// caller passes selected false from then on (and add tests in full the
// item that adds it). An add then does what a replay of the journal
// (AddHashes, which tests every item in full) does, and a filter loaded
// again holds what it held, false positives included: otherwise an item a
// call found seen by a false positive, and so did not record, could test
// unseen once the user is loaded again.
//
// maxEncoded > 0 holds the filter's encoding to that many bytes: an item
// that needs a layer past it is refused as at the cap.
func (f *Filter) add(h Hash, b int64, now time.Time, held *uint64, selected bool, maxEncoded uint64, grew *bool) addResult {
	if f.p.MaxItems > 0 && *held >= f.p.MaxItems {
		return full
	}
	g := f.gen(b)
	grow := len(g.layers) == 0 || g.n >= g.layers[len(g.layers)-1].cap
	quick := selected && !grow && f.p.Kind != KindBloom
	if !quick && g.test(h, f.p.fpBits) {
		return present
	}
	if grow {
		if !f.addLayer(g, maxEncoded) {
			if len(g.layers) == 0 {
				f.dropGen(g) // made for this item: the encoding keeps no trace of it
			}
			return full
		}
		*grew = true
	}
	if l := &g.layers[len(g.layers)-1]; l.compact() {
		if !g.cadd(h, !quick) {
			return present
		}
	} else {
		l.set(g.slab, h, saltOf(len(g.layers)-1))
		g.n++
	}
	*held++
	return added
}

// dropGen takes g, a generation of f, out of f.gens.
func (f *Filter) dropGen(g *generation) {
	for i := range f.gens {
		if &f.gens[i] == g {
			n := len(f.gens)
			copy(f.gens[i:], f.gens[i+1:])
			f.gens[n-1] = generation{} // keeps no slab alive past the length
			f.gens = f.gens[:n-1]
			return
		}
	}
}

func (f *Filter) touch(now time.Time) {
	s := stamp(now.Unix())
	if f.first == 0 || s < f.first {
		f.first = s
	}
	if s > f.last {
		f.last = s
	}
}

// AddHashes records hashed items as seen at time at (used to replay the
// journal); items already present are not counted again. It returns how
// many were added and whether the cap (or the filter's largest size,
// maxBitsTotal, or an encoding of maxEncoded bytes when maxEncoded > 0:
// see Full) stopped any.
//
// room >= 0 is the room the cap left the call that recorded hs (Room, at
// its time), which a journal record keeps: the cap counts against it, not
// against what the filter holds at now. The items the cap counted for
// that call may have left the filter since without leaving the window
// (their journal record expired before this one), and counted from what
// it holds, the cap would let in items the call refused and so refuse
// later items that later calls recorded. An item of hs that the bucket
// already held counts against the room too: the call found none there
// (Select), so it is this record's own item replayed again (a backup's
// journal merged back, say), and the room it took then is taken. room < 0
// counts the cap from the items held at now.
func (f *Filter) AddHashes(hs []Hash, at, now time.Time, maxEncoded, room int) (n int, saturated bool) {
	b := f.bucketOf(at)
	if b < f.oldestLive(now) {
		return 0, false // already outside the window
	}
	if maxEncoded > 0 && f.encodedMax(f.live(now)) > uint64(maxEncoded) {
		return 0, len(hs) > 0 // grown past it otherwise (see Full)
	}
	held := f.items(now)
	var there []bool // hs[i] was in the bucket before any of hs was added
	if room >= 0 && f.p.MaxItems > 0 {
		held = f.p.MaxItems - min(uint64(room), f.p.MaxItems)
		if g := f.find(b); g != nil {
			there = make([]bool, len(hs))
			for i, h := range hs {
				there[i] = g.test(h, f.p.fpBits)
			}
		}
	}
	var t tally
	var grew bool
	for i, h := range hs {
		if there != nil && there[i] {
			held++
			continue
		}
		t.count(f.add(h, b, now, &held, false, uint64(max(maxEncoded, 0)), &grew))
	}
	if t.added > 0 {
		f.touch(at)
	}
	return t.added, t.saturated
}

// Add records items as seen at now and returns how many were new.
func (f *Filter) Add(items []string, now time.Time) (n int, saturated bool) {
	b := f.bucketOf(now)
	f.Expire(now)
	held := f.items(now)
	var t tally
	var grew bool
	for _, it := range items {
		t.count(f.add(HashItem(it), b, now, &held, false, 0, &grew))
	}
	if t.added > 0 {
		f.touch(now)
	}
	return t.added, t.saturated
}

// Check appends to out whether each item tests seen at now.
func (f *Filter) Check(items []string, now time.Time, out []bool) []bool {
	var s Scratch
	return f.CheckWith(items, now, out, &s)
}

// CheckWith is Check with the buffers of s, in which it works out the
// layers' views once for all the items, as Select does.
func (f *Filter) CheckWith(items []string, now time.Time, out []bool, s *Scratch) []bool {
	live := f.live(now)
	f.prepare(live, s, len(items))
	compact, fpb := f.p.Kind == KindCompact, f.p.fpBits
	for _, it := range items {
		h := HashItem(it)
		var seen bool
		switch { // as in Select
		case compact:
			seen = testViews(s.views, h)
		case fpb != nil:
			seen = testStaged(live, s.views, h, fpb)
		default:
			seen = testLive(live, h, nil)
		}
		out = append(out, seen)
	}
	return out
}

// prepare works out in s, once for a call's lookups, what testing items in
// the live generations needs: a compact filter's layers' views (testViews),
// a staged filter's staged layers' views (testStaged), and their tables of
// bucket starts where those pay (efView.index).
func (f *Filter) prepare(live []generation, s *Scratch, lookups int) {
	switch f.p.Kind {
	case KindCompact:
		s.views = compactViews(live, s.views)
	case KindStaged:
		s.views = stagedViews(live, s.views)
	default:
		s.views = s.views[:0]
	}
	// Newest first, as the lookups go: when the tables would pass
	// indexMaxTable together, the older layers do without.
	s.starts = s.starts[:0]
	for i := len(s.views) - 1; i >= 0; i-- {
		s.starts = s.views[i].index(s.starts, lookups)
	}
}

// Test reports whether one item tests seen at now.
func (f *Filter) Test(item string, now time.Time) bool {
	return testLive(f.live(now), HashItem(item), f.p.fpBits)
}

// Scratch holds the buffers of FilterAndRecord so that a call allocates
// nothing per candidate. Reuse one per goroutine; not safe for concurrent use.
type Scratch struct {
	hashes []Hash
	table  []uint64 // open addressing over Hash.Lo|1, for in-request duplicates
	// ToRecord holds the hashes Select chose to record.
	ToRecord []Hash
	// Unseen holds the indexes (into candidates) of the unseen candidates returned.
	Unseen []int32
	// Recorded holds the hashes this call added, for the journal.
	Recorded []Hash
	views    []efView // the layers' views a call works out once (see prepare)
	starts   []uint32 // the views' tables of bucket starts (see efView.index)
	// selected says every hash in ToRecord tested unseen in Select (any
	// mode but RecordAll), which spares Commit testing them again; with
	// RecordAll, fresh[i] says it of ToRecord[i]: the seen route records
	// new impressions mostly, and testing each again in the current
	// generation, without Select's views, took a fifth of its time
	// (BenchmarkRecordAll).
	selected bool
	fresh    []bool
}

// CallResult is what FilterAndRecord found.
type CallResult struct {
	Distinct  int  // distinct candidates tested
	SeenCount int  // distinct candidates that tested seen
	Recorded  int  // items that became seen
	Saturated bool // the cap stopped some items from being recorded
}

// FilterAndRecord is the one call: it tests every distinct candidate,
// returns in s.Unseen the indexes of the unseen ones in order (at most limit;
// limit <= 0 means all), and records per mode: RecordReturned the returned
// ones, RecordAll every candidate, RecordNone nothing. The hashes actually
// added are left in s.Recorded. It is Select followed by Commit.
func (f *Filter) FilterAndRecord(candidates []string, limit int, mode Mode, now time.Time, s *Scratch) CallResult {
	res := f.Select(candidates, limit, mode, now, s)
	res.Recorded, res.Saturated = f.Commit(now, s, 0)
	return res
}

// Select does the testing half of FilterAndRecord and changes nothing but
// expiry: it fills s.Unseen and leaves the hashes to record in s.ToRecord,
// so that the caller can make them durable before Commit applies them.
func (f *Filter) Select(candidates []string, limit int, mode Mode, now time.Time, s *Scratch) CallResult {
	f.Expire(now)
	n := len(candidates)
	if cap(s.hashes) < n {
		s.hashes = make([]Hash, n)
	}
	hs := s.hashes[:n]
	size := 16
	for size < 2*n {
		size <<= 1
	}
	if cap(s.table) < size {
		s.table = make([]uint64, size)
	}
	table := s.table[:size]
	clear(table)
	mask := uint64(size - 1)
	s.Unseen = s.Unseen[:0]
	s.ToRecord = s.ToRecord[:0]
	s.fresh = s.fresh[:0]
	s.Recorded = s.Recorded[:0]
	live := f.live(now)
	f.prepare(live, s, n)
	// The test's kind is settled here and its switch written out in the
	// loop (and again in CheckWith): a function doing the switch for each
	// candidate, even one handed the kind and the views, took Select 10
	// to 16% longer in BenchmarkSelectColdWarm, for the call it adds.
	compact, fpb := f.p.Kind == KindCompact, f.p.fpBits
	// With RecordAll and a window, a seen item is recorded again in the
	// newest bucket, cur (nil: not made yet), unless cur holds it already.
	refresh := mode == RecordAll && f.p.Window > 0
	var cur *generation
	if refresh {
		cur = f.find(f.bucketOf(now))
	}
	var res CallResult
	for i, c := range candidates {
		h := HashItem(c)
		hs[i] = h
		key := h.Lo | 1
		j := (h.Hi * golden) >> 32 & mask
		dup := false
		for table[j] != 0 {
			if table[j] == key {
				dup = true
				break
			}
			j = (j + 1) & mask
		}
		if dup {
			continue
		}
		table[j] = key
		res.Distinct++
		var seen bool
		switch {
		case compact:
			seen = testViews(s.views, h)
		case fpb != nil:
			seen = testStaged(live, s.views, h, fpb)
		default:
			seen = testLive(live, h, nil)
		}
		if seen {
			res.SeenCount++
			if refresh && (cur == nil || !cur.test(h, fpb)) {
				// Seen in an older bucket only, it is recorded again in the
				// newest. One the newest holds (or, without a window, the
				// one bucket) is not: recording it would change nothing,
				// and the journal record made for it would stay live, since
				// no write-back follows a call that changes nothing. (Commit
				// tested it in the newest bucket anyway.)
				s.ToRecord = append(s.ToRecord, h)
				s.fresh = append(s.fresh, false)
			}
			continue
		}
		if limit <= 0 || len(s.Unseen) < limit {
			s.Unseen = append(s.Unseen, int32(i))
			if mode != RecordNone {
				s.ToRecord = append(s.ToRecord, h)
			}
		} else if mode == RecordAll {
			s.ToRecord = append(s.ToRecord, h)
		}
		if mode == RecordAll {
			s.fresh = append(s.fresh, true)
		}
	}
	s.selected = mode != RecordAll
	return res
}

// Expect returns what Commit is about to report for the hashes Select
// chose to record, for a journal that keeps the answer with the items: the
// items that tested unseen, as many as the cap leaves room for. Commit can
// find fewer where an item's fingerprint is another's of the same call
// (about a layer's error), where the filter reached its largest size, and,
// with RecordAll, more where an item seen in an older time bucket is
// recorded again in the newest. maxEncoded is Commit's.
func (f *Filter) Expect(now time.Time, s *Scratch, maxEncoded int) (recorded int, saturated bool) {
	n := len(s.ToRecord)
	if n > 0 && f.Full(now, maxEncoded) {
		return 0, true
	}
	if !s.selected && len(s.fresh) == n {
		n = 0
		for _, fresh := range s.fresh {
			if fresh {
				n++
			}
		}
	}
	if room := f.Room(now); room >= 0 && n > room {
		return room, true
	}
	return n, false
}

// Room returns how many more items the cap lets the filter take at now
// (0 at or past it), or -1 without a cap. A journal record keeps it for
// AddHashes.
func (f *Filter) Room(now time.Time) int {
	if f.p.MaxItems == 0 {
		return -1
	}
	held := f.items(now)
	if held >= f.p.MaxItems {
		return 0
	}
	return int(min(f.p.MaxItems-held, math.MaxInt32))
}

// Commit records the hashes in s.ToRecord at now and leaves those actually
// added in s.Recorded; it returns how many were added and whether the cap
// stopped any. maxEncoded > 0 holds the filter's encoding to that many
// bytes as the cap holds its items (see Full): the largest value a store
// keeps for a user, say.
func (f *Filter) Commit(now time.Time, s *Scratch, maxEncoded int) (recorded int, saturated bool) {
	s.Recorded = s.Recorded[:0]
	selected, fresh := s.selected, s.fresh
	s.selected, s.fresh = false, s.fresh[:0] // for this Select's hashes only
	if len(fresh) != len(s.ToRecord) {
		fresh = nil
	}
	if len(s.ToRecord) == 0 {
		return 0, false
	}
	b := f.bucketOf(now)
	held := f.items(now)
	limit := uint64(max(maxEncoded, 0))
	var t tally
	var grew bool // see add
	for i, h := range s.ToRecord {
		quick := !grew && (selected || fresh != nil && fresh[i])
		if t.count(f.add(h, b, now, &held, quick, limit, &grew)) {
			s.Recorded = append(s.Recorded, h)
		}
	}
	if t.added > 0 {
		f.touch(now)
	}
	return t.added, t.saturated
}

// FirstSeen and LastSeen return when the filter first and last recorded an
// item (zero if never), to the minute: the encoding keeps minutes, and
// answering the seconds only while the filter is in memory would move a
// user's last seen back when it is written back and loaded again.
func (f *Filter) FirstSeen() time.Time { return minuteOrZero(f.first) }

// LastSeen: see FirstSeen.
func (f *Filter) LastSeen() time.Time { return minuteOrZero(f.last) }

// minuteOrZero is the time of stamp s truncated to the minute, as
// AppendBinary encodes it; zero for s = 0 (never).
func minuteOrZero(s uint32) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(unstamp(stampOfMinute(minuteOf(s))), 0).UTC()
}

// MemoryBytes is the filter's in-memory size: bit slabs plus structures.
func (f *Filter) MemoryBytes() int {
	n := int(unsafe.Sizeof(*f))
	if !f.inline() {
		n += cap(f.gens) * int(unsafe.Sizeof(generation{}))
	}
	for i := range f.gens {
		n += cap(f.gens[i].slab) * 8
		if l := f.gens[i].layers; !f.p.sharesLayers(l) {
			n += cap(l) * int(unsafe.Sizeof(layer{})) // its own, not the profile's
		}
	}
	return n
}

// Stats returns exact figures of the filter at now.
func (f *Filter) Stats(now time.Time) Stats {
	st := Stats{Kind: f.p.Kind.String(), TargetFPRate: f.p.FPRate, MemoryBytes: f.MemoryBytes()}
	notFP := 1.0
	g := int64(f.p.Granularity / time.Second)
	for _, gen := range f.live(now) {
		// Without a window the one bucket is numbered 0 and starts at the epoch.
		gs := GenerationStats{Bucket: gen.bucket, Start: time.Unix(gen.bucket*g, 0).UTC()}
		for i := range gen.layers {
			l := &gen.layers[i]
			n := gen.itemsIn(i)
			var set, m uint64
			var fp float64
			if l.compact() {
				// A set's bits are its words; it has no fill but its items'
				// share of capacity, and n fingerprints of f bits match an
				// absent item with probability n/2^f.
				m = 64 * uint64(efWords(efLen(gen.set(l)), uint(l.slice)))
				if i == len(gen.layers)-1 {
					m += 64 * uint64(len(gen.buffer()))
				}
				set = uint64(n)
				fp = float64(n) / math.Exp2(float64(l.slice))
			} else {
				set = l.bitsSet(gen.slab)
				m = l.bits()
				fp = l.fpRate(gen.slab, n)
				if f.p.fpBits != nil {
					// A sealed layer also matches an absent item whose
					// fingerprint one of its items has.
					fp += float64(n) / math.Exp2(float64(f.p.fpBits[i]))
				}
			}
			notFP *= 1 - fp
			gs.Items += uint64(n)
			gs.Layers = append(gs.Layers, LayerStats{Capacity: uint64(l.cap), Items: uint64(n), Bits: m, BitsSet: set,
				Hashes: l.k, Fill: layerFill(l, set, m, n), FPRate: fp})
			st.Bits += m
			st.BitsSet += set
			st.Layers++
		}
		st.Items += gs.Items
		st.Generations = append(st.Generations, gs)
	}
	st.FPRate = 1 - notFP
	st.Saturated = f.p.MaxItems > 0 && st.Items >= f.p.MaxItems
	if b, err := f.AppendBinary(nil); err == nil {
		st.EncodedBytes = len(b)
	}
	return st
}

// layerFill is a layer's fill: the share of its bits set, or a compact
// layer's items against its capacity.
func layerFill(l *layer, set, m uint64, n uint32) float64 {
	if l.compact() {
		return float64(n) / float64(l.cap)
	}
	return float64(set) / float64(m)
}
