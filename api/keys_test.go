package api

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

func TestParseKeysFile(t *testing.T) {
	keys, err := ParseKeys(`# recommenders
write:w-0123456789abcdef

  read:r-0123456789abcdef  
ADMIN:a-0123456789abcdef
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Key{{Role: RoleWrite, Secret: "w-0123456789abcdef"}, {Role: RoleRead, Secret: "r-0123456789abcdef"}, {Role: RoleAdmin, Secret: "a-0123456789abcdef"}}
	if len(keys) != len(want) {
		t.Fatalf("got %v", keys)
	}
	for i := range want {
		if !reflect.DeepEqual(keys[i], want[i]) {
			t.Errorf("key %d: %v, want %v", i, keys[i], want[i])
		}
	}
}

func TestParseKeysRejectsBadLines(t *testing.T) {
	for _, text := range []string{
		"write-0123456789abcdef",         // no role
		"owner:0123456789abcdef",         // unknown role
		"read:short",                     // too short
		"read:0123456789 abcdef",         // space
		"read:",                          // empty
		"read:0123456789abcdef\x01ghijk", // control character
	} {
		if _, err := ParseKeys(text); !errors.Is(err, ErrBadKeys) {
			t.Errorf("%q: err %v, want ErrBadKeys", text, err)
		}
	}
}

func TestParseKeysList(t *testing.T) {
	keys, err := ParseKeysList("read:r-0123456789abcdef, admin:a-0123456789abcdef,")
	if err != nil || len(keys) != 2 || keys[1].Role != RoleAdmin || keys[0].Secret != "r-0123456789abcdef" {
		t.Fatalf("%v %v", keys, err)
	}
	if _, err := ParseKeysList("read:r-0123456789abcdef,bogus"); !errors.Is(err, ErrBadKeys) {
		t.Fatalf("err %v", err)
	}
	// A keys file's lines in the variable (a secret made from the file).
	_, err = ParseKeysList("read:r-0123456789abcdef\nwrite:w-0123456789abcdef\n")
	if !errors.Is(err, ErrBadKeys) || !strings.Contains(err.Error(), "entry 1 holds a line break: the keys are separated by commas (role:key,role:key); give a file of one key a line with --keys-file") {
		t.Fatalf("keys a line: %v", err)
	}
	_, err = ParseKeysList("read:r-0123456789abcdef,write:w-0123456789abcdef,admin:r-0123456789abcdef")
	if !errors.Is(err, ErrBadKeys) || !strings.Contains(err.Error(), "entry 3: the same key as entry 1") {
		t.Fatalf("a key twice: %v", err)
	}
}

// A key given twice in a file is refused naming both lines (and not the key).
func TestKeyTwiceInAFileNamesBothLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "keys")
	text := "# team a\nread:r-0123456789abcdef\n\nwrite:w-0123456789abcdef\nadmin:r-0123456789abcdef\n"
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadKeysFile(p)
	if !errors.Is(err, ErrBadKeys) || !strings.Contains(err.Error(), p+": line 5: the same key as line 2") ||
		strings.Contains(err.Error(), "r-0123456789abcdef") {
		t.Fatalf("a key twice: %v", err)
	}
}

func TestLoadKeysFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte("admin:a-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := LoadKeysFile(p)
	if err != nil || len(keys) != 1 || keys[0].Role != RoleAdmin {
		t.Fatalf("%v %v", keys, err)
	}
	// Saved with a byte order mark (a Windows editor, PowerShell's Out-File).
	if err := os.WriteFile(p, []byte("\uFEFFwrite:w-0123456789abcdef\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if keys, err := LoadKeysFile(p); err != nil || len(keys) != 1 || keys[0].Role != RoleWrite {
		t.Fatalf("a file starting with a byte order mark: %v %v", keys, err)
	}
	if _, err := LoadKeysFile(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, ErrBadKeys) {
		t.Fatalf("missing file: %v", err)
	}
}

// A bad key's error says what, then where, then why, naming the package
// once: not "keys: line 2: api: bad API keys: ...".
func TestBadKeysSayWhereOnce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte("# keys\nadmin:short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, fileErr := LoadKeysFile(p)
	_, listErr := ParseKeysList("read:r-0123456789abcdef,bogus")
	_, textErr := ParseKeys("read:r-0123456789abcdef\nwho:w-0123456789abcdef")
	for err, want := range map[error]string{
		fileErr: "api: bad API keys: " + p + ": line 2: a key is shorter than 16 characters",
		listErr: "api: bad API keys: entry 2: want ROLE:KEY",
		textErr: "api: bad API keys: line 2: the text before the first colon is not a role: want read:KEY, write:KEY or admin:KEY",
	} {
		if err == nil || err.Error() != want || !errors.Is(err, ErrBadKeys) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}

func TestKeyringFindsTheRoleOfEachKey(t *testing.T) {
	kr := newKeyring([]Key{{Role: RoleRead, Secret: "r-0123456789abcdef"}, {Role: RoleAdmin, Secret: "a-0123456789abcdef"}}, callerRate{})
	for secret, want := range map[string]Role{
		"r-0123456789abcdef": RoleRead, "a-0123456789abcdef": RoleAdmin,
		"a-0123456789abcde": RoleNone, "": RoleNone, "a-0123456789abcdefg": RoleNone,
	} {
		if got := kr.match(secret).role; got != want {
			t.Errorf("%q: %v, want %v", secret, got, want)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"negative limit": {MaxCandidates: -1},
		"short key":      {Keys: []Key{{Role: RoleRead, Secret: "short"}}},
		"duplicate key":  {Keys: []Key{{Role: RoleRead, Secret: "k-0123456789abcdef"}, {Role: RoleAdmin, Secret: "k-0123456789abcdef"}}},
		"no role":        {Keys: []Key{{Role: RoleNone, Secret: "k-0123456789abcdef"}}},
		"negative rate":  {RateLimit: -1},
		"NaN rate":       {RateLimit: math.NaN()},
		"infinite rate":  {RateLimit: math.Inf(1)},
		"burst, no rate": {RateBurst: 10},
		"negative burst": {RateLimit: 5, RateBurst: -1},
	} {
		if _, err := New(nil, cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: err %v, want ErrBadConfig", name, err)
		}
	}
}

func TestTextProblem(t *testing.T) {
	for s, ok := range map[string]bool{
		"u:1001": true, "ü ☃": true, "a/b c": true, "": false, "a\x00": false, "a\x7f": false,
		"a\u0085": false, "\xff": false, "a\tb": false, string(make([]byte, 257)): false,
	} {
		if got := textProblem(s, 256) == ""; got != ok {
			t.Errorf("%q: valid %v, want %v", s, got, ok)
		}
	}
}

// TestTextProblemFastPath holds the eight-bytes-at-a-time path to the plain
// byte loop on random strings rich in the edge bytes. The function shares
// nothing between goroutines, and the race detector slows it from under a
// second to 3 s alone and up to 20 s beside the package's other tests:
// under -race it tries a fortieth of the inputs, and test.sh runs it in
// full without -race.
func TestTextProblemFastPath(t *testing.T) {
	inputs := 200000
	if raceEnabled {
		inputs /= 40
	}
	slow := func(s string) bool {
		if !utf8.ValidString(s) {
			return false
		}
		for _, r := range s {
			if unicode.IsControl(r) {
				return false
			}
		}
		return len(s) > 0
	}
	edge := []byte{0x00, 0x1f, 0x20, 'a', '~', 0x7f, 0x80, 0xc2, 0x85, 0xe2, 0x98, 0x83, 0xff}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 40)
	for range inputs {
		b := buf[:rng.IntN(len(buf)+1)]
		for i := range b {
			if rng.IntN(4) == 0 {
				b[i] = edge[rng.IntN(len(edge))]
			} else {
				b[i] = byte(0x20 + rng.IntN(0x5f))
			}
		}
		s := string(b)
		if got, want := textProblem(s, 256) == "", slow(s); got != want {
			t.Fatalf("%q: valid %v, want %v", s, got, want)
		}
	}
}

// BenchmarkTextProblem is the validation of one call's 200 candidates.
func BenchmarkTextProblem(b *testing.B) {
	items := make([]string, 200)
	for i := range items {
		items[i] = "item:" + string(rune('a'+i%26)) + "1234567"
	}
	for b.Loop() {
		for _, it := range items {
			if textProblem(it, 256) != "" {
				b.Fatal(it)
			}
		}
	}
}

// Whether a Content-Type names JSON is asked on every call: it allocates
// nothing, whatever its parameters.
func TestJSONMediaTypeAllocatesNothing(t *testing.T) {
	for _, ct := range []string{"application/json", "application/json; charset=utf-8",
		`application/json; profile="a;b"; charset="UTF\-8"`, "application/json; charset=latin1", "text/plain"} {
		b := []byte(ct)
		if n := testing.AllocsPerRun(100, func() { jsonMediaType(b) }); n != 0 {
			t.Errorf("jsonMediaType(%q): %v allocations, want none", ct, n)
		}
	}
}

func TestItemsOfAPrintableBodyNeedOnlyTheirLength(t *testing.T) {
	body := []byte(`{"candidates":["abc","defg"]}`)
	a, d := string(body[16:19]), string(body[22:26]) // copies: checked in full
	aliased := unsafe.String(&body[16], 3)
	if !printableASCII(body) || printableASCII([]byte("a\x7fb")) || printableASCII([]byte("abcdefgh\x1f")) ||
		printableASCII([]byte("ü")) {
		t.Fatal("printableASCII misjudges")
	}
	if !within(aliased, body) || within(a, body) || within(d, body) || within("", body) {
		t.Fatal("within misjudges which strings are pieces of the body")
	}
	if within(unsafe.String(&body[len(body)-2], 2), body[:len(body)-1]) {
		t.Fatal("a string running past the body's end counts as within it")
	}
}

func TestItemsAcceptUTF8AndRefuseControlsWhateverTheBody(t *testing.T) {
	s := &Server{cfg: Config{}.WithDefaults()}
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"items":["a","ü ☃","b"]}`, true},
		{`{"items":["a","b c~"]}`, true},
		{`{"items":["a","b\u0000"]}`, false},
		{"{\"items\":[\"a\",\"b\x7f\"]}", false},
		{`{"items":["a","\u0085"]}`, false},
	} {
		var req itemsRequest
		body := []byte(tc.body)
		if err := decode(body, &req); err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if err := s.items(req.Items, "/items", body); (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok %v", tc.body, err, tc.ok)
		}
	}
}

// BenchmarkItems is the validation of one call's 200 candidates as the
// handlers run it (body: the body checked once, then each candidate's
// length) against checking each candidate in full (each: no body given).
func BenchmarkItems(b *testing.B) {
	body := feedRequest(200)
	s := &Server{cfg: Config{}.WithDefaults()}
	var req filterRequest
	if err := decode(body, &req); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		body []byte
	}{{"body", body}, {"each", nil}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := s.items(req.Candidates, "/candidates", c.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestAStringLongerThanTheBodyIsNotWithinIt(t *testing.T) {
	buf := []byte("abcdefgh")
	if within(unsafe.String(&buf[1], 6), buf[:2]) || within(unsafe.String(&buf[0], 3), buf[:2]) {
		t.Fatal("a string longer than the body counts as within it")
	}
}

// A rate's default burst is one second's worth: at least one request, and
// a rate too high to count in an int still gives a burst that works.
func TestDefaultRateBurstIsOneSecondsWorth(t *testing.T) {
	for limit, want := range map[float64]int{0.01: 1, 0.5: 1, 1: 1, 2.5: 3, 500: 500, 1e300: 1 << 30} {
		if got := (Config{RateLimit: limit}).WithDefaults().RateBurst; got != want {
			t.Errorf("RateLimit %g: burst %d, want %d", limit, got, want)
		}
	}
}

// A key's line may give it a rate of its own: rate=N (or off) and burst=N,
// after the key. Bad options are refused without quoting the key.
func TestParseKeysWithRates(t *testing.T) {
	keys, err := ParseKeys("write:w-0123456789abcdef rate=500 burst=1000\nread:r-0123456789abcdef   rate=0.5\nadmin:a-0123456789abcdef rate=OFF\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []Key{{Role: RoleWrite, Secret: "w-0123456789abcdef", Rate: 500, Burst: 1000},
		{Role: RoleRead, Secret: "r-0123456789abcdef", Rate: 0.5}, {Role: RoleAdmin, Secret: "a-0123456789abcdef", Rate: math.Inf(1)}}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %+v, want %+v", keys, want)
	}
	if keys, err := ParseKeysList("write:w-0123456789abcdef rate=5, read:r-0123456789abcdef"); err != nil ||
		len(keys) != 2 || keys[0].Rate != 5 || keys[1].Rate != 0 {
		t.Fatalf("SEENAPI_KEYS with a rate: %+v %v", keys, err)
	}
	for line, want := range map[string]string{
		"write:w-0123456789abcdef rate=-1":              "rate=-1: want a positive number",
		"write:w-0123456789abcdef rate=0":               "rate=0: want a positive number",
		"write:w-0123456789abcdef rate=fast":            "rate=fast: want a positive number",
		"write:w-0123456789abcdef rate=Inf":             "rate=Inf: want a positive number",
		"write:w-0123456789abcdef rate=1e-300":          "rate=1e-300: want at least 0.001 requests a second",
		"write:w-0123456789abcdef burst=0 rate=1":       "burst=0: want a whole number of at least 1",
		"write:w-0123456789abcdef burst=5":              "burst needs a rate of its own",
		"write:w-0123456789abcdef rate=off burst=5":     "burst needs a rate of its own",
		"write:w-0123456789abcdef rate=1 rate=2":        "rate= is given twice",
		"write:w-0123456789abcdef colour=red":           "an unknown option after the key (its 2nd word)",
		"write:w-0123456789 abcdef-secret-part":         "a key holds no spaces",
		"write:":                                        "the key is empty",
		"write:w-0123456789abcdef rate=1 burst=2 x=y z": "an unknown option after the key (its 4th word)",
		"write:w-0123456789abcdef # the importer":       "a comment after the key (its 2nd word), or a space in the key: a comment takes a line of its own",
		"write:w-0123456789abcdef rate=1 #importer":     "a comment after the key (its 3rd word)",
		// A key with a space whose rest holds an "=" (base64's padding),
		// and a key with a colon on a line without its role: the error
		// quotes no part of either.
		"write:w-0123456789 abcdef-secret-part==": "a key holds no spaces",
		"abcdef-0123:456789abcdef":                "not a role",
	} {
		_, err := ParseKeys(line)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", line, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "abcdef") {
			t.Errorf("%q: the error %q quotes the key", line, err)
		}
	}
}

// A key's line may limit it to some namespaces: namespaces=a,b, kept
// sorted. SEENAPI_KEYS, whose entries are separated by commas, takes the
// same, a piece without a colon continuing the list before it.
func TestParseKeysWithNamespaces(t *testing.T) {
	keys, err := ParseKeys("write:w-0123456789abcdef namespaces=push,feed rate=5\nread:r-0123456789abcdef namespaces=feed\nadmin:a-0123456789abcdef\n")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys[0].Namespaces, []string{"feed", "push"}) || keys[0].Rate != 5 ||
		!slices.Equal(keys[1].Namespaces, []string{"feed"}) || keys[2].Namespaces != nil {
		t.Fatalf("keys %+v", keys)
	}
	list, err := ParseKeysList("write:w-0123456789abcdef namespaces=push,feed, read:r-0123456789abcdef namespaces=email,admin:a-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || !slices.Equal(list[0].Namespaces, []string{"feed", "push"}) ||
		!slices.Equal(list[1].Namespaces, []string{"email"}) || list[2].Namespaces != nil || list[2].Role != RoleAdmin {
		t.Fatalf("SEENAPI_KEYS with namespaces: %+v", list)
	}
	for line, want := range map[string]string{
		"write:w-0123456789abcdef namespaces=":               "names no namespace",
		"write:w-0123456789abcdef namespaces=Feed":           `"Feed" is not a namespace name`,
		"write:w-0123456789abcdef namespaces=feed,,push":     `"" is not a namespace name`,
		"write:w-0123456789abcdef namespaces=feed,feed":      `"feed" is given twice`,
		"write:w-0123456789abcdef namespaces=a namespaces=b": "namespaces= is given twice",
	} {
		_, err := ParseKeys(line)
		if !errors.Is(err, ErrBadKeys) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "0123456789") {
			t.Errorf("%q: %v, want %q without the key", line, err, want)
		}
	}
	// In SEENAPI_KEYS, a piece without a colon that does not follow a
	// namespaces= list is an entry without a role.
	for _, list := range []string{"write:w-0123456789abcdef rate=5,feed", "write:w-0123456789abcdef namespaces=push rate=5,feed"} {
		if _, err := ParseKeysList(list); !errors.Is(err, ErrBadKeys) {
			t.Errorf("%q, a stray piece: %v", list, err)
		}
	}
}

func TestKeyringKnowsEachKeysNamespaces(t *testing.T) {
	kr := newKeyring([]Key{{Role: RoleWrite, Secret: "w-0123456789abcdef", Namespaces: []string{"feed", "push"}},
		{Role: RoleAdmin, Secret: "a-0123456789abcdef"}}, callerRate{})
	w, a := kr.match("w-0123456789abcdef"), kr.match("a-0123456789abcdef")
	if !w.allows("feed") || !w.allows("push") || w.allows("email") || w.allows("") {
		t.Errorf("the limited key allows %v", w.scope)
	}
	if !a.allows("email") || !a.allows("feed") {
		t.Error("a key without namespaces= is limited")
	}
}
