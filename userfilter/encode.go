package userfilter

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/bits-and-blooms/bitset"
)

// Encoding, version 1 (all integers uvarint unless said otherwise):
//
//	byte    version (1)
//	byte    hash version<<4 | kind
//	fp_rate in parts per million
//	initial capacity, growth*100-100, tightening*100
//	window seconds, granularity seconds, max items
//	first recording (minutes since 2024-01-01 UTC, plus one; 0: never), last minus first (minutes)
//	generation count, then per generation:
//	    bucket (zigzag varint, delta from the previous generation's), layer count, then per layer:
//	        items, byte (form<<6 | k), bits per slice, then the bits:
//	        form 0 (raw): ceil(k*slice/8) bytes, little-endian bit order;
//	        form 1 (sparse): count of set bits, then the gaps between set positions;
//	        a compact filter's layers instead: items, byte (2<<6), fingerprint
//	        bits f, then its fingerprints, sorted, in Elias-Fano form (see
//	        efset.go): the high part's items+buckets bits, then the items' low
//	        bits, each in ceil(bits/8) bytes, little-endian bit order.
//	uint32 CRC-32C (Castagnoli) of everything before it, little-endian
//
// A sparse form is chosen for a layer whenever it is shorter than the raw one.
const encodingVersion = 1

// timeEpoch (2024-01-01 UTC) keeps encoded times short.
const timeEpoch = 1704067200

// minuteOf is the minute of stamp s > 0 as encoded: minutes since
// timeEpoch, plus one (0 means never).
func minuteOf(s uint32) uint64 { return uint64(s-1)/60 + 1 }

// stampOfMinute is the stamp of the start of encoded minute m > 0.
func stampOfMinute(m uint64) uint32 { return stamp(timeEpoch + int64(m-1)*60) }

const (
	formRaw          = 0
	formSparse       = 1
	formFingerprints = 2
)

// Decoding limits: a filter claiming more than these is rejected as corrupt
// rather than allocated.
const (
	maxGenerations = 367
	maxLayers      = 48
	maxBitsTotal   = 1 << 30 // 128 MiB of bits per filter: about 5e7 items at 1%
	maxCapacity    = 1 << 40
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendBinary appends the filter's encoding to b.
func (f *Filter) AppendBinary(b []byte) ([]byte, error) {
	// Room for all of it at once: grown append by append, the encoding of a
	// 200-item filter allocated 3.6 times its size (BenchmarkMarshalBinary),
	// and write-back's encodings were a third of what a loaded server
	// allocates.
	b = slices.Grow(b, f.sizeHint())
	start := len(b)
	p := f.p.Profile
	b = append(b, encodingVersion, hashVersion<<4|byte(p.Kind))
	b = binary.AppendUvarint(b, uint64(math.Round(p.FPRate*1e6)))
	b = binary.AppendUvarint(b, uint64(p.InitialCapacity))
	b = binary.AppendUvarint(b, uint64(math.Round(p.Growth*100))-100)
	b = binary.AppendUvarint(b, uint64(math.Round(p.Tightening*100)))
	b = binary.AppendUvarint(b, uint64(p.Window/time.Second))
	b = binary.AppendUvarint(b, uint64(p.Granularity/time.Second))
	b = binary.AppendUvarint(b, p.MaxItems)
	first, last := uint64(0), uint64(0)
	if f.first > 0 {
		first = minuteOf(f.first)
		last = minuteOf(f.last) - first
	}
	b = binary.AppendUvarint(b, first)
	b = binary.AppendUvarint(b, last)
	b = binary.AppendUvarint(b, uint64(len(f.gens)))
	prev := int64(0)
	for _, g := range f.gens {
		b = binary.AppendVarint(b, g.bucket-prev)
		prev = g.bucket
		b = binary.AppendUvarint(b, uint64(len(g.layers)))
		for i := range g.layers {
			if g.layers[i].compact() {
				b = g.appendFingerprints(b, i)
				continue
			}
			b = appendLayer(b, g.slab, &g.layers[i], g.itemsIn(i))
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli)), nil
}

// sizeHint is about the length of f's encoding, at least it unless sparse
// layers make it shorter: a header of up to 24 bytes (its fields are small
// varints), each layer's raw bits and up to 4 bytes around them, and the
// checksum.
func (f *Filter) sizeHint() int {
	n := 24 + 4
	for gi := range f.gens {
		n += 4
		g := &f.gens[gi]
		for i := range g.layers {
			if l := &g.layers[i]; l.compact() {
				n += efBytes(uint64(g.itemsIn(i)), uint(l.slice)) + 12
				continue
			}
			n += int((g.layers[i].bits()+7)/8) + 4
		}
	}
	return n
}

func appendLayer(b []byte, w []uint64, l *layer, n uint32) []byte {
	b = binary.AppendUvarint(b, uint64(n))
	m := l.bits()
	rawLen := int((m + 7) / 8)
	set := l.bitsSet(w)
	// Encode the gaps between set bits when that is shorter than the raw bits.
	sparse := rawLen + 1
	if set == 0 {
		sparse = 1
	} else if set*4 < m {
		sparse = uvarintLen(set)
		var last uint64
		l.forEachSet(w, func(pos uint64) {
			sparse += uvarintLen(pos - last)
			last = pos
		})
	}
	if sparse < rawLen {
		b = append(b, formSparse<<6|byte(l.k))
		b = binary.AppendUvarint(b, uint64(l.slice))
		b = binary.AppendUvarint(b, set)
		var last uint64
		l.forEachSet(w, func(pos uint64) {
			b = binary.AppendUvarint(b, pos-last)
			last = pos
		})
		return b
	}
	b = append(b, formRaw<<6|byte(l.k))
	b = binary.AppendUvarint(b, uint64(l.slice))
	// Eight bytes at a time (little-endian, so the same bytes as one at a
	// time), then the rest.
	pos := uint64(0)
	for ; pos+64 <= m; pos += 64 {
		b = binary.LittleEndian.AppendUint64(b, bitsAt(w, uint64(l.off)+pos, 64))
	}
	for ; pos < m; pos += 8 {
		b = append(b, byte(bitsAt(w, uint64(l.off)+pos, uint(min(8, m-pos)))))
	}
	return b
}

// forEachSet calls fn with the position (relative to the layer) of every set bit.
func (l *layer) forEachSet(w []uint64, fn func(pos uint64)) {
	bs := bitset.From(w)
	end := uint(uint64(l.off) + l.bits())
	for i, ok := bs.NextSet(uint(l.off)); ok && i < end; i, ok = bs.NextSet(i + 1) {
		fn(uint64(i) - uint64(l.off))
	}
}

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// MarshalBinary returns the filter's encoding.
func (f *Filter) MarshalBinary() ([]byte, error) { return f.AppendBinary(nil) }

// UnmarshalBinary replaces f with the filter encoded in data.
func (f *Filter) UnmarshalBinary(data []byte) error {
	g, err := Decode(data)
	if err != nil {
		return err
	}
	f.Replace(g)
	return nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, a ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, a...)...)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return x
}

// Decode returns the filter encoded in data. Any byte string gives either a
// valid filter or an error wrapping ErrCorrupt or ErrVersion; it never panics.
func Decode(data []byte) (*Filter, error) { return decode(data, maxBitsTotal) }

// DecodeWithin is Decode for a filter whose layers' bits may take at most
// maxBytes of memory: a larger one is refused with an error wrapping
// ErrTooLarge before its bits are allocated. An encoding states each layer's
// size, and a sparse layer's bits take a few bytes, so a 29-byte encoding
// can be a filter of 2^30 bits (128 MiB) that has never seen an item.
func DecodeWithin(data []byte, maxBytes int64) (*Filter, error) {
	return decode(data, uint64(min(max(maxBytes, 0), maxBitsTotal/8))*8)
}

// NeverRecorded reports whether data encodes a filter without a window
// that never recorded an item: no first recording, and no item (a filter
// made by hand may hold items but no times). Only an encoding whose header
// says no window and no first recording is decoded, with its bits limited
// to neverRecordedBits: a longer one, or one that does not decode, is
// reported false. Safe for concurrent use.
func NeverRecorded(data []byte) bool {
	if len(data) < 5 || data[0] != encodingVersion {
		return false
	}
	d := &decoder{b: data[1 : len(data)-4]}
	d.byte()      // hash version and kind
	for range 4 { // fp rate, initial capacity, growth, tightening
		d.uvarint()
	}
	win := d.uvarint()
	d.uvarint() // granularity
	d.uvarint() // max items
	if first := d.uvarint(); d.err != nil || win != 0 || first != 0 {
		return false
	}
	f, err := decode(data, neverRecordedBits)
	return err == nil && f.Empty(time.Time{})
}

// neverRecordedBits bounds the bits NeverRecorded decodes: a filter made
// anew has none, and one exported before it recorded holds none either.
const neverRecordedBits = 1 << 19

// decode is Decode with the filter's bits limited to limit (at most
// maxBitsTotal; over it, the encoding is corrupt, under it, too large).
func decode(data []byte, limit uint64) (*Filter, error) {
	if len(data) < 5 { // a version byte and the checksum at least
		return nil, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(data))
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	if body[0] != encodingVersion {
		return nil, fmt.Errorf("%w: %d", ErrVersion, body[0])
	}
	d := &decoder{b: body[1:]}
	var p Profile
	kh := d.byte()
	p.Kind = Kind(kh & 15)
	if hv := kh >> 4; d.err == nil && hv != hashVersion {
		return nil, fmt.Errorf("%w: hash version %d", ErrVersion, hv)
	}
	p.FPRate = float64(d.uvarint()) / 1e6
	c0 := d.uvarint()
	p.Growth = float64(d.uvarint()+100) / 100
	p.Tightening = float64(d.uvarint()) / 100
	win, gran := d.uvarint(), d.uvarint()
	p.MaxItems = d.uvarint()
	first, last := d.uvarint(), d.uvarint()
	ngen := d.uvarint()
	if d.err != nil {
		return nil, d.err
	}
	if c0 > math.MaxUint32 || win > 1<<40 || gran > 1<<40 {
		return nil, fmt.Errorf("%w: parameters out of range", ErrCorrupt)
	}
	p.InitialCapacity = uint32(c0)
	p.Window, p.Granularity = time.Duration(win)*time.Second, time.Duration(gran)*time.Second
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	f := &Filter{p: share(p)}
	if first > 0 {
		if first > 1<<40 || last > 1<<40 {
			return nil, fmt.Errorf("%w: times out of range", ErrCorrupt)
		}
		f.first = stampOfMinute(first)
		f.last = stampOfMinute(first + last)
	}
	if ngen > maxGenerations || (p.Window == 0 && ngen > 1) {
		return nil, fmt.Errorf("%w: %d generations", ErrCorrupt, ngen)
	}
	var total uint64
	prev := int64(0)
	f.setGens(0, int(ngen))
	for gi := uint64(0); gi < ngen; gi++ {
		delta := d.varint()
		bucket := prev + delta
		if d.err != nil {
			return nil, d.err
		}
		if (gi > 0 && delta <= 0) || (p.Window == 0 && bucket != 0) || bucket < -(1<<40) || bucket > 1<<40 {
			return nil, fmt.Errorf("%w: bucket order", ErrCorrupt)
		}
		prev = bucket
		nl := d.uvarint()
		if d.err != nil {
			return nil, d.err
		}
		if nl > maxLayers {
			return nil, fmt.Errorf("%w: %d layers", ErrCorrupt, nl)
		}
		g := generation{bucket: bucket}
		if t := f.p.layers; p.Kind == KindBloom && nl > 0 && int(nl) <= len(t) && total+uint64(t[nl-1].off)+t[nl-1].bits() <= limit {
			// The slab at its final size at once, rather than grown (and
			// copied) layer by layer; a filter of other shapes grows as usual.
			g.slab = newSlab(slabWords(uint64(t[nl-1].off) + t[nl-1].bits()))[:0]
		}
		var before uint64
		for li := 0; li < int(nl); li++ {
			var l layer
			var err error
			switch p.Kind {
			case KindCompact:
				l, err = f.decodeFingerprints(d, &g, li, before, &total, limit)
			case KindStaged:
				l, err = f.decodeStaged(d, &g, li, int(nl), before, &total, limit)
			default:
				l, err = f.decodeLayer(d, &g, li, before, &total, limit)
			}
			if err != nil {
				return nil, err
			}
			before += uint64(l.cap)
		}
		f.gens = append(f.gens, g)
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.b))
	}
	return f, nil
}

// addBits adds a layer's m bits to the filter's total so far, refusing a
// filter past maxBitsTotal (corrupt) or past limit (too large), before its
// bits are allocated.
func addBits(total *uint64, m, limit uint64) error {
	*total += m
	if *total > maxBitsTotal {
		return fmt.Errorf("%w: more than %d bits", ErrCorrupt, uint64(maxBitsTotal))
	}
	if *total > limit {
		return fmt.Errorf("%w: its layers take more than %d bytes", ErrTooLarge, limit/8)
	}
	return nil
}

func (f *Filter) decodeLayer(d *decoder, g *generation, li int, before uint64, total *uint64, limit uint64) (layer, error) {
	n := d.uvarint()
	fk := d.byte()
	slice := d.uvarint()
	if d.err != nil {
		return layer{}, d.err
	}
	form, k := fk>>6, uint64(fk&63)
	if k < 1 || k > 32 || slice < 8 || slice > maxBitsTotal {
		return layer{}, fmt.Errorf("%w: layer shape k=%d slice=%d", ErrCorrupt, k, slice)
	}
	m := k * slice
	if err := addBits(total, m, limit); err != nil {
		return layer{}, err
	}
	capacity := f.p.layerCapacity(li, before)
	if n > capacity || capacity > maxCapacity {
		return layer{}, fmt.Errorf("%w: layer %d holds %d items, capacity %d", ErrCorrupt, li, n, capacity)
	}
	// A layer has about 1.44*log2(1/e) bits an item: at most 64 even at the
	// smallest error a profile allows. Check before allocating anything.
	if m > 128*capacity+1024 {
		return layer{}, fmt.Errorf("%w: layer %d has %d bits for %d items", ErrCorrupt, li, m, capacity)
	}
	if form == formRaw && uint64(len(d.b)) < (m+7)/8 {
		return layer{}, fmt.Errorf("%w: truncated layer", ErrCorrupt)
	}
	if li > 0 && g.n != g.layers[li-1].cap {
		// A layer is only ever added once the one before it is full.
		return layer{}, fmt.Errorf("%w: layer %d follows a layer that is not full", ErrCorrupt, li)
	}
	l := g.appendLayer(layer{slice: uint32(slice), k: uint32(k), cap: uint32(capacity)}, f.p.layers)
	g.n = uint32(n)
	switch form {
	case formRaw:
		rawLen := int((m + 7) / 8)
		if len(d.b) < rawLen {
			return layer{}, fmt.Errorf("%w: truncated layer", ErrCorrupt)
		}
		// Eight bytes at a time, then the rest a byte at a time.
		i := 0
		for ; uint64(i+8)*8 <= m; i += 8 {
			orBitsAt(g.slab, uint64(l.off)+uint64(i)*8, binary.LittleEndian.Uint64(d.b[i:]), 64)
		}
		for ; i < rawLen; i++ {
			pos, c := uint64(i)*8, d.b[i]
			if n := m - pos; n < 8 && c>>n != 0 {
				return layer{}, fmt.Errorf("%w: bits past the layer's end", ErrCorrupt)
			}
			orBitsAt(g.slab, uint64(l.off)+pos, uint64(c), uint(min(8, m-pos)))
		}
		d.b = d.b[rawLen:]
	case formSparse:
		set := d.uvarint()
		if d.err != nil {
			return layer{}, d.err
		}
		if set > m || set > uint64(len(d.b)) {
			return layer{}, fmt.Errorf("%w: %d set bits", ErrCorrupt, set)
		}
		var pos uint64
		for i := uint64(0); i < set; i++ {
			gap := d.uvarint()
			if d.err != nil {
				return layer{}, d.err
			}
			if (i > 0 && gap == 0) || gap >= m || pos+gap >= m {
				return layer{}, fmt.Errorf("%w: bad sparse position", ErrCorrupt)
			}
			pos += gap
			orBitsAt(g.slab, uint64(l.off)+pos, 1, 1)
		}
	default:
		return layer{}, fmt.Errorf("%w: layer form %d", ErrCorrupt, form)
	}
	return l, nil
}

// efBytes is the length of the Elias-Fano form of n fingerprints of f bits
// in an encoding: the high part's bits, then the low parts', each in whole
// bytes.
func efBytes(n uint64, f uint) int {
	if n == 0 {
		return 0
	}
	l, hb := efShape(n, f)
	return int((n+uint64(1)<<hb+7)/8 + (n*uint64(l)+7)/8)
}

// appendFingerprints appends compact layer i of g: its items, the form, its
// fingerprint bits and its fingerprints (the newest layer's buffer merged
// in, so that the encoding depends only on the set), copied from the set's
// words.
func (g *generation) appendFingerprints(b []byte, i int) []byte {
	l := &g.layers[i]
	f := uint(l.slice)
	n := uint64(g.itemsIn(i))
	b = binary.AppendUvarint(b, n)
	b = append(b, formFingerprints<<6)
	b = binary.AppendUvarint(b, uint64(f))
	if n == 0 {
		return b
	}
	w := g.set(l)
	if efLen(w) != n { // a buffer: the set as it will be once merged
		// Through pooled scratch lists: write-back encodes the users of
		// large sets often, and these were a sixth of what a loaded server
		// allocated with staged filters.
		fps := getFingerprints(int(n))
		defer putFingerprints(fps)
		*fps = g.fingerprints(i, *fps)
		set := getFingerprints(efWords(n, f))
		defer putFingerprints(set)
		w = (*set)[:efWords(n, f)]
		clear(w)
		efBuild(w, *fps, f)
	}
	ns, nh, nl := efParts(n, f)
	lo, hb := efShape(n, f)
	b = appendWordBytes(b, w[1+ns:1+ns+nh], (n+uint64(1)<<hb+7)/8)
	return appendWordBytes(b, w[1+ns+nh:1+ns+nh+nl], (n*uint64(lo)+7)/8)
}

// appendWordBytes appends the first n bytes of ws, little-endian.
func appendWordBytes(b []byte, ws []uint64, n uint64) []byte {
	for _, x := range ws {
		if n >= 8 {
			b = binary.LittleEndian.AppendUint64(b, x)
			n -= 8
			continue
		}
		for ; n > 0; n-- {
			b = append(b, byte(x))
			x >>= 8
		}
	}
	return b
}

// decodeFingerprints is decodeLayer for a compact filter's layer.
func (f *Filter) decodeFingerprints(d *decoder, g *generation, li int, before uint64, total *uint64, limit uint64) (layer, error) {
	n := d.uvarint()
	form := d.byte()
	fb := d.uvarint()
	if d.err != nil {
		return layer{}, d.err
	}
	var want layer
	var ok bool
	if f.p.Kind == KindStaged {
		want, ok = f.p.stagedLayer(li, before, g.used())
	} else {
		want, ok = f.p.compactLayer(li, before, 0)
	}
	if form != formFingerprints<<6 || !ok || fb != uint64(want.slice) {
		return layer{}, fmt.Errorf("%w: layer %d form %d, %d fingerprint bits", ErrCorrupt, li, form, fb)
	}
	// No check that the layer before is full, as a Bloom layer's: Forget
	// takes fingerprints out of full layers too.
	fp := uint(fb)
	// A merge can fill a layer past its capacity (see mergeCompact), but
	// not past its distinct fingerprints or what a uint32 counts.
	if (fp < 64 && n > uint64(1)<<fp) || n > math.MaxUint32 {
		return layer{}, fmt.Errorf("%w: layer %d holds %d items of %d bits", ErrCorrupt, li, n, fp)
	}
	if err := addBits(total, 64*uint64(efWords(n, fp)), limit); err != nil {
		return layer{}, err
	}
	size := efBytes(n, fp)
	if len(d.b) < size {
		return layer{}, fmt.Errorf("%w: truncated layer", ErrCorrupt)
	}
	fps := make([]uint64, 0, n)
	if n > 0 {
		lo, hb := efShape(n, fp)
		hbits := n + uint64(1)<<hb
		high := d.b[:(hbits+7)/8]
		low := d.b[len(high):size]
		bit := func(bs []byte, i uint64) uint64 { return uint64(bs[i>>3]>>(i&7)) & 1 }
		for pos := uint64(0); pos < uint64(len(high))*8; pos++ {
			if bit(high, pos) == 0 {
				continue
			}
			j := uint64(len(fps))
			if pos >= hbits || j >= n || pos-j >= uint64(1)<<hb {
				return layer{}, fmt.Errorf("%w: layer %d: bad fingerprints", ErrCorrupt, li)
			}
			x := (pos - j) << lo
			for k := uint64(0); k < uint64(lo); k++ {
				x |= bit(low, j*uint64(lo)+k) << k
			}
			if j > 0 && x <= fps[j-1] {
				return layer{}, fmt.Errorf("%w: layer %d: fingerprints out of order", ErrCorrupt, li)
			}
			fps = append(fps, x)
		}
		if uint64(len(fps)) != n || (n*uint64(lo)%8 != 0 && low[len(low)-1]>>(n*uint64(lo)%8) != 0) {
			return layer{}, fmt.Errorf("%w: layer %d: bad fingerprints", ErrCorrupt, li)
		}
	}
	d.b = d.b[size:]
	if f.p.Kind == KindStaged {
		g.placeStaged(f.p, want, fps)
		return g.layers[li], nil
	}
	return g.placeFingerprints(want, f.p.layers, fps), nil
}
