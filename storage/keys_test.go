package storage

import (
	"bytes"
	"strings"
	"testing"
)

var keyPairs = append([][2]string{
	{"feed", "u"}, {"f", "eedu"}, {strings.Repeat("n", 200), "u"}, {"n", strings.Repeat("u", 300)},
	{"n", "\xff\xff"}, {"\xff", "\x00"},
}, prefixUsers...)

func TestKeysParseBack(t *testing.T) {
	for _, p := range keyPairs {
		ns, user, ok := parseFilterKey(filterKey(nil, p[0], p[1]))
		if !ok || string(ns) != p[0] || string(user) != p[1] {
			t.Errorf("filter key of %q parsed as %q, %q, %v", p, ns, user, ok)
		}
		k := journalKey(nil, p[0], p[1], 1<<40+7)
		if len(k) != journalKeyLen(p[0], p[1]) {
			t.Errorf("journal key of %q: %d bytes, journalKeyLen says %d", p, len(k), journalKeyLen(p[0], p[1]))
		}
		ns, user, seq, ok := parseJournalKey(k)
		if !ok || string(ns) != p[0] || string(user) != p[1] || seq != 1<<40+7 {
			t.Errorf("journal key of %q parsed as %q, %q, %d, %v", p, ns, user, seq, ok)
		}
	}
}

func TestNoUsersKeysArePrefixesOfAnothers(t *testing.T) {
	for _, a := range keyPairs {
		for _, b := range keyPairs {
			if a == b {
				continue
			}
			if bytes.HasPrefix(journalKey(nil, b[0], b[1], 5), journalPrefix(nil, a[0], a[1])) {
				t.Errorf("journal prefix of %q is a prefix of a journal key of %q", a, b)
			}
			if bytes.Equal(filterKey(nil, a[0], a[1]), filterKey(nil, b[0], b[1])) {
				t.Errorf("%q and %q share a filter key", a, b)
			}
			if a[0] != b[0] && bytes.HasPrefix(filterKey(nil, b[0], b[1]), appendNSPrefix(nil, prefixFilter, a[0])) {
				t.Errorf("namespace prefix of %q is a prefix of the filter key of %q", a[0], b)
			}
		}
	}
}

func TestJournalKeysSortInSequenceOrder(t *testing.T) {
	prev := journalKey(nil, "feed", "u", 0)
	for _, seq := range []uint64{1, 255, 256, 1 << 32, 1<<64 - 1} {
		k := journalKey(nil, "feed", "u", seq)
		if bytes.Compare(prev, k) >= 0 {
			t.Fatalf("journal key of seq %d does not sort after the previous one", seq)
		}
		prev = k
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a", "b"}, {"a\xff", "b"}, {"ab\xff\xff", "ac"}, {"\xff\xff", ""},
	} {
		if got := prefixEnd([]byte(tc.in)); string(got) != tc.want {
			t.Errorf("prefixEnd(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzParseKeys: parsing any bytes never panics, and what parses encodes
// back to the same bytes.
func FuzzParseKeys(f *testing.F) {
	for _, p := range keyPairs {
		f.Add(filterKey(nil, p[0], p[1]))
		f.Add(journalKey(nil, p[0], p[1], 42))
	}
	f.Add([]byte("j\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"))
	f.Add([]byte("f\x82\x00nsuser"))                                 // a non-canonical length
	f.Add([]byte("j\x01n\x81\x00u\x00\x00\x00\x00\x00\x00\x00\x01")) // likewise
	f.Fuzz(func(t *testing.T, key []byte) {
		if ns, user, ok := parseFilterKey(key); ok {
			if !bytes.Equal(filterKey(nil, string(ns), string(user)), key) {
				t.Fatalf("filter key %q parses as %q/%q but encodes differently", key, ns, user)
			}
		}
		if ns, user, seq, ok := parseJournalKey(key); ok {
			if !bytes.Equal(journalKey(nil, string(ns), string(user), seq), key) {
				t.Fatalf("journal key %q parses as %q/%q/%d but encodes differently", key, ns, user, seq)
			}
		}
		_ = checkBackupKey(key)
	})
}
