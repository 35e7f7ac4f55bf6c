// Package userfilter holds one user's "seen" history: a scalable Bloom
// filter (Almeida, Baquero, Preguiça, Hutchison 2007), optionally split into
// time buckets for a retention window. It does no I/O.
//
// Three kinds share the chain of layers described below: KindBloom, the
// classic construction; KindStaged, the default, whose newest layer holds
// fingerprints until it fills and is then sealed into a Bloom layer; and
// KindCompact, whose layers all hold fingerprints and can forget items.
//
// # The filter
//
// A filter is a chain of partitioned Bloom layers. Layer i is built for
// c0*s^i items at error p0*r^i with p0 = p*(1-r), so the compound
// false-positive rate, at most sum_i p0*r^i = p, stays under the target p
// however many items arrive. A layer with capacity n and error e has k
// slices of m/k bits with k = floor or ceil of log2(1/e), whichever needs
// fewer bits, and m/k = -n / ln(1 - e^(1/k)): at capacity each slice is
// filled to e^(1/k) and the layer answers a false positive with probability
// e. An item already present is not added again (it would only inflate the
// fill), so Stats.Items counts what the filter holds, which falls short of
// the distinct items recorded by about the false-positive rate.
//
// A layer's shape follows from the profile and its index alone, and every
// layer but the newest is full, so the filters of one profile share one
// table of layers and a filter holds only its bits and the newest layer's
// count (a 200-item user: 616 bytes in memory, 512 of them its bit array).
//
// Each item is hashed once per call with XXH3-128; every layer derives its k
// positions from those 128 bits (see layer.go), so the cost of a candidate is
// one hash plus about two memory probes per layer for an absent item, with an
// early exit on the first zero bit. Hashes and positions are persisted and
// pinned by golden tests (testdata/golden).
//
// The Bloom kind's defaults (c0 = 12, s = 1.5, r = 0.9) come from BenchmarkProfiles:
// in-memory bits against the Bloom bound 1.44*log2(1/p) per item, averaged
// over n log-uniform in [100, 1e5] and at worst, the layers at 1e5 items and
// the ns per candidate of the one call at 1e5 items (one run, p = 1%):
//
//	c0  s    r     layers@1e5  ns/cand@1e5  mem/bound mean  worst
//	12  2    0.85  14          112          2.53            3.64
//	12  1.5  0.85  21          139          2.22            3.02
//	12  1.5  0.9   21          138          2.18            2.82
//	32  1.5  0.85  19          138          2.11            2.84
//	64  2    0.85  11           96          2.33            3.31
//	12  3    0.8    9           82          2.86            4.83
//
// Memory was chosen over speed (millions of users live in RAM): s = 1.5,
// r = 0.9. c0 = 12 keeps a 10-item user at most 48 bytes encoded; a larger
// c0 saves a little memory on large users but not on small ones.
//
// No choice gets a chain whose layers are allocated whole when they open
// to 1.7x the bound on average or 2.3x at worst: BenchmarkChainFloor, with
// ideal layers (no whole slices, no struct) over c0 up to 512, s from 1.1
// to 8 and r from 0.5 to 0.97, finds a best mean of 1.97x and a lowest
// worst case of 2.35x. The newest layer, half empty on average, is what
// costs; a newest layer whose memory grew with its items would allow about
// 1.3x, which takes another layer format: KindStaged (below) is that
// format for the Bloom chain.
//
// A chain with no Bloom layer at all does better: every layer its items'
// fingerprints of ceil(log2(c/e)) bits, sorted and stored as Elias-Fano
// codes ("fingerprint sets" in BenchmarkChainFloor). A layer's memory then
// grows with its items, and a full one costs about log2(1/e)+2 bits an
// item, under a Bloom layer's 1.44*log2(1/e) for e under 4%: 1.23x the
// bound on average and 1.45x at worst (c0 = 512, s = 3, r = 0.6; six layers
// at 1e5 items), inside both targets with room to spare.
// BenchmarkFingerprintSet measures such a layer (an efset, efset.go)
// against a Bloom layer of the same capacity and error (one run, e = 0.5%,
// lookups spread over layers of 819,200 items in all): full, it takes
// 0.95x to 1.05x the bound (the Bloom layer 1.00x), but looking up an
// absent item takes 34 to 45 ns against the Bloom layer's 7.3 to 8.4 ns
// when the layers are cold in the CPU's caches (and 10.5 to 10.9 ns
// against 6.8 ns for the prototype it came from, one layer of each, warm
// in the caches). An earlier prototype that took each step for eight
// lookups before the next, so that their reads overlap, gained little;
// finding the bucket from packed offsets (fpDirect) takes a quarter less
// time at 1.17x to 1.38x the bound.
//
// # The compact kind
//
// KindCompact is that chain (compact.go): every layer an efset of its
// items' fingerprints. A newest set of fewer than 1,024 takes each item in
// place (its parts shift up a word at a time); a larger one keeps new
// items in a short sorted buffer (at most a sixteenth of the set, a word
// each) that is merged in when it fills. The defaults come from
// BenchmarkProfiles (one run, p = 1%; the compact rows of the table
// above, measured the same way):
//
//	c0    s  r    layers@1e5  ns/cand@1e5  mem/bound mean  worst
//	512   3  0.6  6            89          1.387           1.612
//	256   2  0.7  9           103          1.439           1.663
//	512   4  0.6  5            72          1.406           1.650
//	512   8  0.6  4            70          1.423           1.651
//	1024  4  0.6  5            99          1.384           1.602
//	512   4  0.5  5            72          1.411           1.689
//
// c0 = 512, s = 4, r = 0.6: inside both memory targets (1.7 and 2.3),
// where the Bloom chain's defaults take 2.18x and 2.82x, and a 10-item
// user encodes to 47 bytes (s = 8 saves a layer and about 2 ns). The bits
// counted are the slab's words in use, as in the Bloom rows; counted by
// the slab's capacity (see growSlab), the compact chain takes 1.51x on
// average and 1.94x at worst, the Bloom chain 2.31x and 2.87x. In BenchmarkFilterAndRecord (six alternated
// runs, benchstat medians) a candidate costs 73.45 ns at 1e5 items against
// 49.88 ns for bits-and-blooms/bloom/v3 (BenchmarkBloomV3Reference): 1.47x,
// inside the speed target of 1.5x with little to spare (the Bloom chain:
// 62.23 ns, 1.25x); at 1e3 items 44.06 ns against 41.48 (1.06x); at 10,
// 7.84 against 41.44. Most of its time is finding a bucket (the select)
// and reading its low bits, a chain of dependent reads a layer; Select
// works out each layer's shape once a call (efView), and searches a big
// buffer by interpolation. A user who only meets new items, 20 recorded a
// call (BenchmarkFilterAndRecordGrowing), costs about 1.8 times what the
// Bloom chain does: 288 against 156 ns a candidate from 1e3 items. It
// encodes as form 2 (see encode.go) and merges by the union of each
// layer's fingerprints. It can also forget items (Forget, forget.go), which
// a Bloom layer cannot: an item's fingerprint leaves each layer that holds
// it, taking with it any other item of that layer with the same
// fingerprint (probability at most the layer's error), and the layers
// touched are rebuilt, so a full layer may then hold fewer than its
// capacity. BenchmarkForget (one run): forgetting 20 items takes 22 us at
// 1,000 items and 2.2 ms at 100,000, where merging a 20-item filter takes
// 21 us and 3.5 ms. A namespace chooses compact with kind: compact.
//
// # The staged kind
//
// KindStaged is the Bloom chain with its newest layer staged (staged.go):
// the newest layer holds its items' fingerprints in an efset, as a compact
// layer does, and when it fills it is sealed into a Bloom layer set from
// those fingerprints. Full layers are Bloom layers, tested with an early
// exit as the Bloom kind's are, and memory follows the items instead of
// opening a layer at a time. A sealed layer derives its positions from
// the fingerprint (its items' hashes are gone), so an absent item can
// match a fingerprint or, failing that, be a Bloom false positive: each
// takes half the layer's error (fingerprints of ceil(log2(2c/e)) bits, the
// Bloom layer built for e/2). BenchmarkChainFloor's ideal staged chain
// gets 1.41x the bound on average and 1.68x at worst; BenchmarkProfiles
// (one run, p = 1%; "alloc" counts the slabs' capacity, the other rows'
// figures the words in use):
//
//	c0    s    r    layers@1e5  ns/cand@1e5  mem/bound mean  worst  alloc mean  worst
//	512   4    0.6  5            88          1.552           1.785  1.732       2.007
//	256   4    0.6  6           115          1.570           1.824  1.747       2.175
//	512   3    0.6  6           119          1.556           1.823  1.724       1.960
//	1024  4    0.5  5           126          1.521           1.780  1.716       2.020
//	256   2    0.7  9           121          1.625           1.919  1.779       1.999
//	128   4    0.7  6            95          1.605           1.802  1.764       1.952
//	512   8    0.6  4            89          1.562           1.798  1.748       2.007
//
// (With the Bloom kind's c0 = 12, s = 1.5, r = 0.9, a staged filter takes
// 1.886 and 2.056: small layers seal often, and each sealed one is Bloom.)
// c0 = 512, s = 4, r = 0.6 keeps both memory targets (1.7 and 2.3) in the
// words in use, where the Bloom kind's defaults take 2.18x and 2.81x;
// counted by the slabs' capacity (room to grow ahead of the staged layer,
// see growSlab, and the allocator's size classes) it takes 1.732x, over
// 1.7 by 2%, and 2.007x (the Bloom kind 2.31x and 2.87x). A 10-item user
// encodes to 48 bytes. A staged filter costs about what a Bloom one does a
// candidate: in BenchmarkFilterAndRecord (one run) 9.50, 50.15 and 79.20 ns
// at 10, 1e3 and 1e5 items against bloom/v3's 44.69, 44.56 and 57.26
// (0.21x, 1.13x and 1.38x; the Bloom kind 9.36, 51.94 and 66.62), and in
// five more runs at 1e5 items 78 to 83 ns against 54 to 59. It takes a
// little more to grow (BenchmarkFilterAndRecordGrowing: 219 and 235 ns a
// candidate at 1e3 and 1e5 items against the Bloom kind's 182 and 186;
// compact 297 and 317), and allocates about what the Bloom kind does a
// feed call (BenchmarkFeedCall: 139 B against 149). Like a Bloom filter it
// cannot forget items.
//
// It is the default kind (DefaultKind): the Bloom kind's memory, a layer
// allocated whole when it opens, was the one target the Bloom chain could
// not reach with any c0, s and r. Filters keep the kind they were built
// with, so Bloom filters written before go on working.
//
// # Retention window
//
// A profile with a window W and granularity g keeps one scalable filter per
// time bucket, keyed by its absolute bucket number floor(t/g). A call at now
// tests the buckets from floor(now/g) - W/g to floor(now/g) and records into
// the newest, so an item recorded less than W ago always tests seen and one
// recorded more than W+g ago never does. Expiry drops whole buckets, so
// memory is bounded by what was seen inside the window. Time buckets were
// chosen over age-partitioned Bloom filters because each bucket is itself a
// scalable filter that starts small: heavy-tailed users pay for what they
// saw, not for a fixed size. An item recorded again (RecordAll, or Add) is
// added to the newest bucket if it is not there yet, so it stays seen for W
// after its latest recording.
//
// # Cap
//
// A profile's MaxItems bounds the items held (within the window). The layer
// that reaches the cap is sized for exactly what the cap leaves. At the cap
// the policy is CapSaturate: items already recorded stay seen, new ones are
// not recorded (they keep testing unseen) and the call says Saturated. A
// filter without a cap stops the same way at 2^30 bits (about 5e7 items at
// 1%), the largest filter Decode reads back.
//
// # Encoding
//
// AppendBinary/Decode use a versioned, CRC-32C-checksummed binary form (see
// encode.go) that carries the profile parameters, so a changed namespace
// profile never breaks stored filters. A sparse layer is stored as gaps
// between set bits when that is shorter than its raw bits. Decode never
// panics: any byte string gives a valid filter or an error wrapping
// ErrCorrupt or ErrVersion (FuzzDecode).
//
// # Merge
//
// Filters of one user built with the same parameters merge by OR (Merge):
// commutative, associative and idempotent, and no item seen by either input
// is unseen in the result. The hot set relies on it to write back without
// ever rolling a user back.
//
// # Concurrency
//
// A Filter is not safe for concurrent use; the caller serializes calls per
// user (the hot set holds a per-user lock). HashItem and New are safe for
// concurrent use. A Scratch belongs to one goroutine at a time.
package userfilter
