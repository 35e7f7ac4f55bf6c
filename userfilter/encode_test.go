package userfilter

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func encode(t testing.TB, f *Filter) []byte {
	t.Helper()
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEncodingRoundTrip(t *testing.T) {
	for name, p := range profiles() {
		for _, n := range []int{0, 1, 10, 1000, 30000} {
			f := mustNew(t, p)
			its := items("rt", n)
			f.Add(its, t0)
			f.Add(items("later", n/3), t0.Add(25*time.Hour))
			b := encode(t, f)
			g, err := Decode(b)
			if err != nil {
				t.Fatalf("%s/%d: %v", name, n, err)
			}
			if !bytes.Equal(encode(t, g), b) {
				t.Fatalf("%s/%d: re-encoding differs", name, n)
			}
			now := t0.Add(25 * time.Hour)
			if f.Stats(now).Items != g.Stats(now).Items || g.Profile() != f.Profile() {
				t.Fatalf("%s/%d: stats or profile differ after decoding", name, n)
			}
			for i, ok := range g.Check(its, t0, nil) {
				if ok != f.Test(its[i], t0) {
					t.Fatalf("%s/%d: %q answers differently after decoding", name, n, its[i])
				}
			}
		}
	}
}

// kinds are the default profile of each kind.
var kinds = map[string]Profile{"bloom": {Kind: KindBloom}, "compact": {Kind: KindCompact}, "staged": {Kind: KindStaged}}

func TestSmallUserEncodesSmall(t *testing.T) {
	for name, p := range kinds {
		f := mustNew(t, p)
		f.Add(items("u", 10), t0)
		if b := encode(t, f); len(b) > 48 {
			t.Fatalf("%s: 10-item user encodes to %d bytes, want at most 48", name, len(b))
		}
	}
}

func TestEncodedNeverLargerThanMemory(t *testing.T) {
	for name, p := range kinds {
		f := mustNew(t, p)
		for n := 1; n <= 100000; n *= 2 {
			f.Add(items("e", n), t0)
			if enc, mem := len(encode(t, f)), f.MemoryBytes(); enc > mem {
				t.Fatalf("%s at %d items: encoded %d bytes > %d bytes in memory", name, n, enc, mem)
			}
		}
	}
}

func TestDecodeRejectsCorruption(t *testing.T) {
	for name, p := range kinds {
		t.Run(name, func(t *testing.T) { testDecodeRejectsCorruption(t, p) })
	}
}

func testDecodeRejectsCorruption(t *testing.T, p Profile) {
	f := mustNew(t, p)
	f.Add(items("c", 500), t0)
	b := encode(t, f)
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if _, err := Decode(c); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
			t.Fatalf("flipping byte %d: err = %v, want ErrCorrupt", i, err)
		}
	}
	for i := 0; i < len(b); i++ {
		if _, err := Decode(b[:i]); err == nil {
			t.Fatalf("truncated to %d bytes decodes", i)
		}
	}
}

// goldenCase builds the filters whose encodings are pinned in testdata: a
// change to hashing, bit positions or layout breaks stored filters and must
// show up here.
func goldenCases() map[string]*Filter {
	out := map[string]*Filter{}
	mk := func(name string, p Profile, n int, at time.Time) {
		f, err := New(p)
		if err != nil {
			panic(err)
		}
		f.Add(items("golden", n), at)
		out[name] = f
	}
	// The Bloom kind's, pinned since its first encoding (the files were
	// named default-* while Bloom was the default kind).
	mk("bloom-10", Profile{Kind: KindBloom}, 10, t0)
	mk("bloom-300", Profile{Kind: KindBloom}, 300, t0)
	mk("bloom-p0.001-50", Profile{Kind: KindBloom, FPRate: 0.001}, 50, t0)
	mk("bloom-window-40", Profile{Kind: KindBloom, Window: 72 * time.Hour, Granularity: 24 * time.Hour}, 40, t0)
	mk("compact-10", Profile{Kind: KindCompact}, 10, t0)
	mk("compact-3000", Profile{Kind: KindCompact}, 3000, t0)
	mk("compact-window-40", Profile{Kind: KindCompact, Window: 72 * time.Hour, Granularity: 24 * time.Hour}, 40, t0)
	mk("staged-10", Profile{Kind: KindStaged}, 10, t0)
	mk("staged-3000", Profile{Kind: KindStaged}, 3000, t0)
	mk("staged-small-700", Profile{Kind: KindStaged, InitialCapacity: 40, Growth: 2, Tightening: 0.8}, 700, t0)
	return out
}

func TestGoldenEncodings(t *testing.T) {
	for name, f := range goldenCases() {
		path := filepath.Join("testdata", "golden", name+".hex")
		got := hex.EncodeToString(encode(t, f))
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != strings.TrimSpace(string(want)) {
			t.Fatalf("%s: encoding changed:\n got %s\nwant %s", name, got, want)
		}
	}
}

func TestHashGoldenVectors(t *testing.T) {
	for item, want := range map[string]Hash{
		"":         {Lo: 0x6001c324468d497f, Hi: 0x99aa06d3014798d8},
		"i:981":    {Lo: 0xaebad50feec00999, Hi: 0x02a01bc1a30710ff},
		"video-42": {Lo: 0xb9ba62875b899446, Hi: 0xf47457642bba2b4d},
	} {
		if got := HashItem(item); got != want {
			t.Fatalf("HashItem(%q) = %#x, want %#x", item, got, want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, g := range goldenCases() {
		f.Add(encode(f, g))
	}
	f.Add([]byte{})
	f.Add([]byte{1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrVersion", err)
			}
			return
		}
		// A filter that decodes must work and re-encode to the same bytes.
		g.Add([]string{"x"}, t0)
		g.Stats(t0)
		if _, err := Decode(encode(t, g)); err != nil {
			t.Fatalf("re-encoded filter does not decode: %v", err)
		}
	})
}

// FuzzDecodeBody fuzzes what follows the checksum test: the input gets a
// valid CRC appended, so the fuzzer explores the structure itself.
func FuzzDecodeBody(f *testing.F) {
	for _, g := range goldenCases() {
		b := encode(f, g)
		f.Add(b[:len(b)-4])
	}
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, body []byte) {
		data := binary.LittleEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, castagnoli))
		g, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrVersion", err)
			}
			return
		}
		// DecodeWithin takes it within exactly its bits' bytes, not a byte less.
		var bits uint64
		for _, gen := range g.gens {
			for i := range gen.layers {
				if l := &gen.layers[i]; l.compact() {
					bits += 64 * uint64(efWords(uint64(gen.itemsIn(i)), uint(l.slice)))
				} else {
					bits += l.bits()
				}
			}
		}
		need := int64(bits+7) / 8
		if w, err := DecodeWithin(data, need); err != nil || !bytes.Equal(encode(t, w), encode(t, g)) {
			t.Fatalf("DecodeWithin its %d bytes of bits: %v", need, err)
		}
		if _, err := DecodeWithin(data, need-1); bits > 0 && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("DecodeWithin %d bytes, a byte short: %v", need-1, err)
		}
		// Its sets answer the same through a call's tables of bucket
		// starts (enough items for every layer to get one) as one by one.
		probe := items("probe", 64)
		for i, seen := range g.Check(probe, t0, nil) {
			if seen != g.Test(probe[i], t0) {
				t.Fatalf("Check and Test disagree on %q", probe[i])
			}
		}
		var s Scratch
		g.FilterAndRecord(probe, 0, RecordAll, t0, &s)
		g.Add([]string{"x"}, t0)
		g.Stats(t0)
		other := g.Clone()
		if err := g.Merge(other); err != nil {
			t.Fatalf("merging a decoded filter with its clone: %v", err)
		}
		if _, err := Decode(encode(t, g)); err != nil {
			t.Fatalf("re-encoded filter does not decode: %v", err)
		}
	})
}

// emptyHugeFilter is a valid 29-byte encoding of a filter of 2^30 bits that
// has never seen an item: one sparse layer of 8 slices of 2^27 bits, none set.
func emptyHugeFilter() []byte {
	b := []byte{encodingVersion, hashVersion<<4 | byte(KindBloom)}
	for _, v := range []uint64{10000, 1 << 24, 100, 85, 0, 0, 0, 0, 0, 1} { // fp ppm, c0, growth, tightening, window, granularity, max items, first, last, generations
		b = binary.AppendUvarint(b, v)
	}
	b = binary.AppendVarint(b, 0)      // bucket
	b = binary.AppendUvarint(b, 1)     // layers
	b = binary.AppendUvarint(b, 0)     // items
	b = append(b, formSparse<<6|8)     // k = 8
	b = binary.AppendUvarint(b, 1<<27) // bits a slice
	b = binary.AppendUvarint(b, 0)     // set bits
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// TestNeverRecorded: a filter without a window that never recorded an
// item is told from its encoding; one that recorded, one with a window, a
// damaged encoding, and one whose bits are past what it decodes are not.
func TestNeverRecorded(t *testing.T) {
	recorded := mustNew(t, DefaultProfile())
	recorded.Add([]string{"a"}, t0)
	for name, c := range map[string]struct {
		data []byte
		want bool
	}{
		"new":            {encode(t, mustNew(t, DefaultProfile())), true},
		"new compact":    {encode(t, mustNew(t, Profile{Kind: KindCompact})), true},
		"recorded":       {encode(t, recorded), false},
		"windowed":       {encode(t, mustNew(t, Profile{Window: 24 * time.Hour, Granularity: time.Hour})), false},
		"damaged":        {append(encode(t, mustNew(t, DefaultProfile()))[:18], 0), false},
		"huge":           {emptyHugeFilter(), false},
		"not a filter":   {[]byte("seenapi"), false},
		"nothing at all": {nil, false},
	} {
		if got := NeverRecorded(c.data); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

func TestDecodeWithinRefusesLargeFiltersBeforeAllocating(t *testing.T) {
	huge := emptyHugeFilter()
	for _, limit := range []int64{1 << 20, 64 << 20} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := DecodeWithin(huge, limit)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%d-byte encoding of 2^30 bits within %d bytes: %v, want ErrTooLarge", len(huge), limit, err)
		}
		// Within the limit, the slab its profile's first layer takes (28 MB
		// at this initial capacity) may be allocated before the encoding
		// says its layer is larger; never the 128 MiB.
		if a := after.TotalAlloc - before.TotalAlloc; a > uint64(limit)+1<<20 {
			t.Errorf("refusing it within %d bytes allocated %d bytes", limit, a)
		}
	}
	// Decode's own limit is 2^30 bits: the encoding is valid.
	if f, err := Decode(huge); err != nil || f.Stats(t0).Bits != 1<<30 {
		t.Fatalf("Decode: %v", err)
	}

	// A filter of several layers decodes within exactly its bits' bytes and
	// is refused a byte short of them.
	f, err := New(Profile{FPRate: 0.01, InitialCapacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		f.Add([]string{fmt.Sprint("item-", i)}, t0)
	}
	st := f.Stats(t0)
	if st.Layers < 3 {
		t.Fatalf("%d layers; the test wants several", st.Layers)
	}
	data := encode(t, f)
	need := int64(st.Bits+7) / 8
	g, err := DecodeWithin(data, need)
	if err != nil {
		t.Fatalf("within %d bytes: %v", need, err)
	}
	if !bytes.Equal(encode(t, g), data) {
		t.Error("the filter decoded within its limit differs")
	}
	if _, err := DecodeWithin(data, need-1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("within %d bytes: %v, want ErrTooLarge", need-1, err)
	}
	if _, err := DecodeWithin(data[:len(data)-1], need); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a cut encoding: %v, want ErrCorrupt", err)
	}
}

// FirstSeen and LastSeen answer what the encoding keeps (the minute), so a
// user's first and last seen do not move back when its filter is written
// back and loaded again.
func TestSeenTimesSurviveEncoding(t *testing.T) {
	f := mustNew(t, DefaultProfile())
	f.Add([]string{"a"}, t0.Add(43*time.Second))
	f.Add([]string{"b"}, t0.Add(2*time.Minute+50*time.Second))
	g, err := Decode(encode(t, f))
	if err != nil {
		t.Fatal(err)
	}
	if !f.FirstSeen().Equal(g.FirstSeen()) || !f.LastSeen().Equal(g.LastSeen()) {
		t.Fatalf("first and last seen %v and %v, after decoding %v and %v", f.FirstSeen(), f.LastSeen(), g.FirstSeen(), g.LastSeen())
	}
	if want := t0.Add(2 * time.Minute); !g.LastSeen().Equal(want) || !g.FirstSeen().Equal(t0) {
		t.Fatalf("after decoding first and last seen %v and %v, want %v and %v", g.FirstSeen(), g.LastSeen(), t0, want)
	}
}
