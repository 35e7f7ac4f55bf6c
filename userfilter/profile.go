package userfilter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind names a filter construction; the kind is stored in every encoded
// filter, so kinds live side by side.
type Kind uint8

const (
	// KindBloom is the scalable Bloom filter.
	KindBloom Kind = 1
	// KindCompact is the scalable filter whose layers are sorted sets of
	// fingerprints (see compact.go): memory that grows with the items.
	KindCompact Kind = 2
	// KindStaged is the scalable Bloom filter whose newest layer is staged
	// as a sorted set of fingerprints until it fills, then becomes a Bloom
	// layer (see staged.go): full layers are Bloom layers, and memory
	// grows with the items instead of a layer at a time.
	KindStaged Kind = 3
)

// String returns the kind's name as used in configuration and the API.
func (k Kind) String() string {
	switch k {
	case KindBloom:
		return "bloom"
	case KindCompact:
		return "compact"
	case KindStaged:
		return "staged"
	default:
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
}

// ParseKind is the inverse of Kind.String.
func ParseKind(s string) (Kind, error) {
	switch s {
	case "":
		return DefaultKind, nil
	case "bloom":
		return KindBloom, nil
	case "compact":
		return KindCompact, nil
	case "staged":
		return KindStaged, nil
	}
	return 0, fmt.Errorf("%w: unknown filter kind %q", ErrBadProfile, s)
}

// CapPolicy says what happens when a user reaches Profile.MaxItems.
type CapPolicy uint8

const (
	// CapSaturate keeps every item already recorded and stops recording new
	// ones: they keep testing unseen, and the call reports how many it could
	// not record. Memory stays bounded and nothing seen is ever forgotten.
	CapSaturate CapPolicy = 0
)

// Profile fixes how one namespace's filters are built. Its parameters are
// copied into every filter built from it and travel in the encoding, so a
// changed profile only affects filters created afterwards.
type Profile struct {
	// Kind of filter. Default DefaultKind.
	Kind Kind
	// FPRate is the target false-positive rate p the compound filter stays
	// under, however many items arrive. Default 0.01.
	FPRate float64
	// InitialCapacity is c0, the items the first layer holds. Default DefaultInitialCapacity.
	InitialCapacity uint32
	// Growth is s: layer i holds c0*s^i items. Default DefaultGrowth.
	Growth float64
	// Tightening is r: layer i has error p0*r^i with p0 = p*(1-r). Default DefaultTightening.
	Tightening float64
	// Window is the retention window: items recorded longer ago than Window
	// (plus at most one Granularity) test unseen again. Zero means forever.
	Window time.Duration
	// Granularity is the width of one time bucket of the window, a whole
	// number of seconds. Zero with a window set means Window/4.
	Granularity time.Duration
	// MaxItems caps the items one user holds (within the window, if any).
	// Zero means no cap. What happens at the cap is CapSaturate.
	MaxItems uint64
}

// Defaults chosen by measurement; see the package documentation.
const (
	// DefaultKind is the kind of the "default" namespace and of a profile
	// that names none: the staged Bloom filter, which holds its items in
	// about 1.55 times the Bloom bound where the Bloom kind needs 2.18.
	DefaultKind   = KindStaged
	DefaultFPRate = 0.01

	// The defaults of KindBloom.
	BloomInitialCapacity = 12
	BloomGrowth          = 1.5
	BloomTightening      = 0.9

	// The defaults of KindCompact, from BenchmarkProfiles (see the package doc).
	CompactInitialCapacity = 512
	CompactGrowth          = 4
	CompactTightening      = 0.6

	// The defaults of KindStaged, from BenchmarkProfiles (see the package doc).
	StagedInitialCapacity = 512
	StagedGrowth          = 4
	StagedTightening      = 0.6
)

// DefaultProfile is the profile of the "default" namespace: a staged Bloom
// filter at 1% false positives with no window and no cap.
func DefaultProfile() Profile { return Profile{}.WithDefaults() }

// WithDefaults returns p with every zero field set to its default: the
// kind's own initial capacity, growth and tightening.
func (p Profile) WithDefaults() Profile {
	if p.Kind == 0 {
		p.Kind = DefaultKind
	}
	d := Profile{FPRate: DefaultFPRate}
	switch p.Kind {
	case KindBloom:
		d.InitialCapacity, d.Growth, d.Tightening = BloomInitialCapacity, BloomGrowth, BloomTightening
	case KindCompact:
		d.InitialCapacity, d.Growth, d.Tightening = CompactInitialCapacity, CompactGrowth, CompactTightening
	case KindStaged:
		d.InitialCapacity, d.Growth, d.Tightening = StagedInitialCapacity, StagedGrowth, StagedTightening
	}
	if p.FPRate == 0 {
		p.FPRate = d.FPRate
	}
	if p.InitialCapacity == 0 {
		p.InitialCapacity = d.InitialCapacity
	}
	if p.Growth == 0 {
		p.Growth = d.Growth
	}
	if p.Tightening == 0 {
		p.Tightening = d.Tightening
	}
	if p.Window > 0 && p.Granularity == 0 {
		p.Granularity = p.Window / 4
	}
	return p
}

// Differences describes how o's parameters differ from p's, one
// "name p-value against o-value" a parameter, named and written as in a
// namespaces file (window 7d, not 168h0m0s); "" when they are the same.
// Errors about filters built with other parameters (a merge, an import)
// quote it instead of two raw structs.
func (p Profile) Differences(o Profile) string {
	var d []string
	diff := func(name string, a, b any) {
		if a != b {
			d = append(d, fmt.Sprintf("%s %v against %v", name, a, b))
		}
	}
	diff("kind", p.Kind, o.Kind)
	diff("fp_rate", p.FPRate, o.FPRate)
	diff("initial_capacity", p.InitialCapacity, o.InitialCapacity)
	diff("growth", p.Growth, o.Growth)
	diff("tightening", p.Tightening, o.Tightening)
	diff("window", FormatDuration(p.Window), FormatDuration(o.Window))
	diff("granularity", FormatDuration(p.Granularity), FormatDuration(o.Granularity))
	diff("max_items", p.MaxItems, o.MaxItems)
	return strings.Join(d, ", ")
}

// FormatDuration writes d as a namespaces file takes it, so that what a
// message or a listing says of a window or a granularity reads as the file
// the operator wrote: days from a day up when they are whole to two
// decimals (30d, 7.5d, 1.75d), else whole hours (6h, 25h) or minutes
// (90m), else Go's form (1.5s); 0 (no window) is "0".
func FormatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d >= 24*time.Hour && d%(24*time.Hour/100) == 0:
		// In hundredths of a day, which a float divides exactly enough
		// to print as written (30.01d, not 30.009999999999998d).
		return strconv.FormatFloat(float64(d/(24*time.Hour/100))/100, 'f', -1, 64) + "d"
	case d%time.Hour == 0:
		return strconv.Itoa(int(d.Hours())) + "h"
	case d%time.Minute == 0:
		return strconv.Itoa(int(d.Minutes())) + "m"
	}
	return d.String()
}

// Validate reports whether p (after WithDefaults) describes a filter that can
// be built and encoded.
func (p Profile) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadProfile}, a...)...)
	}
	switch {
	case p.Kind != KindBloom && p.Kind != KindCompact && p.Kind != KindStaged:
		return bad("unknown kind %d", p.Kind)
	case !(p.FPRate >= 1e-6 && p.FPRate <= 0.5):
		return bad("fp_rate %v outside [1e-6, 0.5]", p.FPRate)
	case p.InitialCapacity < 1 || p.InitialCapacity > 1<<24:
		return bad("initial_capacity %d outside [1, 16777216]", p.InitialCapacity)
	case !(p.Growth >= 1.1 && p.Growth <= 8) || math.Abs(p.Growth*100-math.Round(p.Growth*100)) > 1e-9:
		return bad("growth %v must be in [1.1, 8] with two decimals at most", p.Growth)
	case !(p.Tightening >= 0.1 && p.Tightening <= 0.99) || math.Abs(p.Tightening*100-math.Round(p.Tightening*100)) > 1e-9:
		return bad("tightening %v must be in [0.1, 0.99] with two decimals at most", p.Tightening)
	case p.Window < 0 || p.Granularity < 0:
		return bad("negative window or granularity")
	case p.Window > 0 && (p.Granularity < time.Second || p.Granularity%time.Second != 0):
		// Buckets are numbered, and the granularity encoded, in whole
		// seconds: 2.5s would work as 2s, its items leaving the window
		// early, and come back from the store as another profile. Checked
		// before the window's division so that a short window's default
		// (2s/4) is named as the granularity at fault, not the window.
		return bad("granularity %s of window %s must be a whole number of seconds, at least 1s (give one: the default is window/4)", FormatDuration(p.Granularity), FormatDuration(p.Window))
	case p.Window > 0 && p.Window%p.Granularity != 0:
		return bad("window %s must be a whole number of granularity %s", FormatDuration(p.Window), FormatDuration(p.Granularity))
	case p.Window > 0 && p.Window/p.Granularity > 366:
		return bad("window %s has more than 366 buckets of %s", FormatDuration(p.Window), FormatDuration(p.Granularity))
	case p.Window == 0 && p.Granularity != 0:
		return bad("granularity without a window")
	}
	return nil
}

// Mode says which candidates of a call become seen.
type Mode uint8

const (
	// RecordReturned records the unseen candidates that are returned (after limit).
	RecordReturned Mode = iota
	// RecordNone records nothing: a dry check.
	RecordNone
	// RecordAll records every candidate.
	RecordAll
)

// String returns the mode's name as used in the API.
func (m Mode) String() string {
	switch m {
	case RecordReturned:
		return "returned"
	case RecordNone:
		return "none"
	case RecordAll:
		return "all"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode is the inverse of Mode.String; "" means RecordReturned.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "returned", "":
		return RecordReturned, nil
	case "none":
		return RecordNone, nil
	case "all":
		return RecordAll, nil
	}
	return 0, fmt.Errorf("unknown record mode %q (want returned, none or all)", s)
}

// LayerStats describes one Bloom layer.
type LayerStats struct {
	Capacity uint64  `json:"capacity"`
	Items    uint64  `json:"items"`
	Bits     uint64  `json:"bits"`
	BitsSet  uint64  `json:"bits_set"`
	Hashes   uint32  `json:"hashes"`
	Fill     float64 `json:"fill"`
	FPRate   float64 `json:"fp_rate"` // this layer's false-positive rate now, from its fill
}

// GenerationStats describes one time bucket of a windowed filter (the only
// one, numbered 0, without a window).
type GenerationStats struct {
	Bucket int64        `json:"bucket"` // absolute bucket number: start time / granularity
	Start  time.Time    `json:"start"`  // bucket * granularity: the Unix epoch for a filter without a window
	Items  uint64       `json:"items"`
	Layers []LayerStats `json:"layers"`
}

// Stats are exact figures of one filter at one instant.
type Stats struct {
	Kind         string            `json:"kind"`
	Items        uint64            `json:"items"` // items added inside the window, once a bucket (see Filter.Select)
	Layers       int               `json:"layers"`
	Bits         uint64            `json:"bits"`
	BitsSet      uint64            `json:"bits_set"`
	FPRate       float64           `json:"fp_rate"` // estimated false-positive rate now
	TargetFPRate float64           `json:"target_fp_rate"`
	EncodedBytes int               `json:"encoded_bytes"`
	MemoryBytes  int               `json:"memory_bytes"`
	Saturated    bool              `json:"saturated"` // at MaxItems: new items are not recorded
	Generations  []GenerationStats `json:"generations"`
}

// shared holds one copy of each profile in use, which the filters built
// with it point to: a hot user's filter then carries 8 bytes of parameters
// instead of 64, and no table of layers (the hot set holds millions). A
// profile is never changed once shared. At most maxShared are kept
// (namespaces times the profiles they had, plus imported filters of other
// parameters); past that, a filter gets a copy of its own, without a
// table of layers (its generations hold their own).
var shared struct {
	sync.RWMutex
	m map[Profile]*sharedProfile
}

// sharedProfile is a profile and the layers its filters build, in order:
// a generation's layers are a prefix of them (see layer).
type sharedProfile struct {
	Profile
	layers []layer
	// A staged profile's layers as a generation holds them while layer i
	// is its newest: staged[i] is layers[:i] then layer i's set of
	// fingerprints (see staged.go); fpBits[i] is layer i's fingerprint
	// bits, which its Bloom form derives its positions from. Computed for
	// every staged profile, shared or not.
	staged [][]layer
	fpBits []uint8
}

const maxShared = 1024

// share returns the shared copy of p. Safe for concurrent use.
func share(p Profile) *sharedProfile {
	shared.RLock()
	s, ok := shared.m[p]
	shared.RUnlock()
	if ok {
		return s
	}
	shared.Lock()
	defer shared.Unlock()
	if s, ok := shared.m[p]; ok {
		return s
	}
	s = &sharedProfile{Profile: p}
	if shared.m == nil {
		shared.m = map[Profile]*sharedProfile{}
	}
	if len(shared.m) < maxShared {
		s.layers = p.layerTable()
		shared.m[p] = s
	}
	if p.Kind == KindStaged {
		s.stagedTables()
	}
	return s
}

// layerTable returns the layers one generation grows through, as
// addLayer places them, up to maxLayers or maxBitsTotal bits.
func (p *Profile) layerTable() []layer {
	var t []layer
	var before, total uint64
	for i := 0; i < maxLayers; i++ {
		if p.Kind == KindCompact {
			l, ok := p.compactLayer(i, before, total)
			if !ok {
				break
			}
			t = append(t, l)
			total += uint64(efWords(uint64(l.cap), uint(l.slice))) * 64
			before += uint64(l.cap)
			continue
		}
		c, sh := p.plan(i, before)
		if p.Kind == KindStaged {
			c, sh = p.stagedPlan(i, before)
		}
		bits := uint64(sh.k) * sh.slice
		if c == 0 || c > maxBitsTotal || total+bits > maxBitsTotal {
			break
		}
		t = append(t, layer{off: uint32(total), slice: uint32(sh.slice), k: sh.k, cap: uint32(c)})
		total += bits
		before += c
	}
	return t[:len(t):len(t)]
}
