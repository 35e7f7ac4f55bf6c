package api

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Role is what a key may do. Each role implies the ones below it:
// RoleAdmin > RoleWrite > RoleRead.
type Role uint8

const (
	// RoleNone is no role: only routes open to everyone.
	RoleNone Role = iota
	// RoleRead reads stats, namespaces and checks items.
	RoleRead
	// RoleWrite records: the one call, /seen, the batch call.
	RoleWrite
	// RoleAdmin erases users and exports and imports filters.
	RoleAdmin
)

// String returns the role's name as written in keys files.
func (r Role) String() string {
	switch r {
	case RoleNone:
		return "none"
	case RoleRead:
		return "read"
	case RoleWrite:
		return "write"
	case RoleAdmin:
		return "admin"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ParseRole is the inverse of Role.String for read, write and admin.
func ParseRole(s string) (Role, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "read":
		return RoleRead, nil
	case "write":
		return RoleWrite, nil
	case "admin":
		return RoleAdmin, nil
	}
	return RoleNone, fmt.Errorf("unknown role %q (want read, write or admin)", s)
}

// MinKeyLength is the shortest API key accepted.
const MinKeyLength = 16

// Key is one API key, its role, and optionally a rate limit of its own.
type Key struct {
	Role   Role
	Secret string
	// Rate is the requests a second this key may make, in place of the
	// server's Config.RateLimit: 0 takes the server's, math.Inf(1) is no
	// limit ("rate=off" in a keys file).
	Rate float64
	// Burst is the requests this key may make at once before Rate applies;
	// 0: one second's worth of Rate. Only with a Rate.
	Burst int
	// Namespaces are the only namespaces whose routes the key may call
	// ("namespaces=feed,push" in a keys file), sorted; nil: every one. A
	// key limited so cannot take a backup, which holds every namespace.
	Namespaces []string
}

// Validate says what is wrong with k, if anything, as the service refuses it
// in a keys file; errors never quote the key.
func (k Key) Validate() error {
	if k.Role < RoleRead || k.Role > RoleAdmin {
		return fmt.Errorf("bad role %v", k.Role)
	}
	if k.Rate < 0 || math.IsNaN(k.Rate) || math.IsInf(k.Rate, -1) {
		return errors.New("a key's rate is negative")
	}
	if k.Rate > 0 && k.Rate < MinRate {
		return fmt.Errorf("a key's rate is under %g requests a second (one every 1000s)", MinRate)
	}
	if k.Burst < 0 || (k.Burst > 0 && (k.Rate == 0 || math.IsInf(k.Rate, 1))) {
		return errors.New("a key's burst needs a rate of its own (rate=N on the same line) and must be at least 1")
	}
	if k.Namespaces != nil && len(k.Namespaces) == 0 {
		return errors.New("namespaces= names no namespace")
	}
	for i, ns := range k.Namespaces {
		if !validNamespaceName(ns) {
			return fmt.Errorf("namespaces=: %s is not a namespace name ([a-z0-9_-]{1,64})", ShownScope(ns))
		}
		if i > 0 && k.Namespaces[i-1] == ns {
			return fmt.Errorf("namespaces=: %s is given twice", ShownScope(ns))
		}
	}
	if len(k.Secret) < MinKeyLength {
		return fmt.Errorf("a key is shorter than %d characters", MinKeyLength)
	}
	for _, r := range k.Secret {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == ',' {
			return errors.New("a key contains a space, a control character or a comma")
		}
	}
	return nil
}

// ShownScope is how a name of a key's namespaces= is shown where keys are
// described (errors, the log, seenapi check): quoted, unless it is as long
// as an API key may be. In SEENAPI_KEYS a piece without a colon after
// namespaces= continues the list, so a second key given without its role
// reads as a namespace name, which would show it in the clear.
func ShownScope(ns string) string {
	if len(ns) < MinKeyLength {
		return strconv.Quote(ns)
	}
	return fmt.Sprintf("a name of %d characters, not shown (as long as an API key: a key given without its role after namespaces= reads as one)", len(ns))
}

// ParseKeys parses a keys file: one "ROLE:KEY" a line, optionally followed
// by the key's own rate limit, "rate=N" (requests a second, or "off" for
// none) and "burst=N", and the namespaces it is limited to,
// "namespaces=a,b", separated by spaces; blank lines and lines starting
// with # are ignored.
func ParseKeys(text string) ([]Key, error) {
	keys, err := parseKeys(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKeys, err)
	}
	return keys, nil
}

// parseKeys is ParseKeys with errors that say where, not what failed: the
// callers put ErrBadKeys first, once.
func parseKeys(text string) ([]Key, error) {
	var keys []Key
	at := map[string]int{} // a key's line, to name both lines of one given twice
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := parseKey(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if first, ok := at[k.Secret]; ok {
			return nil, fmt.Errorf("line %d: the same key as line %d", n, first)
		}
		at[k.Secret] = n
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return keys, nil
}

// ParseKeysList parses the SEENAPI_KEYS form: "role:key,role:key", each
// entry as a keys file's line. A piece without a colon or a space continues
// the namespaces= list that ends the entry before it ("write:KEY
// namespaces=a,b"): every entry has a colon, and namespace names have none.
func ParseKeysList(list string) ([]Key, error) {
	var items []string
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if n := len(items); n > 0 && item != "" && !strings.ContainsAny(item, ": ") && endsWithNamespaces(items[n-1]) {
			items[n-1] += "," + item
			continue
		}
		items = append(items, item)
	}
	var keys []Key
	at := map[string]int{}
	for i, item := range items {
		if item == "" {
			continue
		}
		// A keys file's text put in the variable (a secret made from the
		// file) would otherwise read as a key followed by unknown options.
		if strings.ContainsAny(item, "\r\n") {
			return nil, fmt.Errorf("%w: entry %d holds a line break: the keys are separated by commas (role:key,role:key); give a file of one key a line with --keys-file", ErrBadKeys, i+1)
		}
		k, err := parseKey(item)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d: %w", ErrBadKeys, i+1, err)
		}
		if first, ok := at[k.Secret]; ok {
			return nil, fmt.Errorf("%w: entry %d: the same key as entry %d", ErrBadKeys, i+1, first)
		}
		at[k.Secret] = i + 1
		keys = append(keys, k)
	}
	return keys, nil
}

// endsWithNamespaces reports whether an entry's last option is namespaces=.
func endsWithNamespaces(entry string) bool {
	f := strings.Fields(entry)
	return len(f) > 1 && strings.HasPrefix(f[len(f)-1], "namespaces=")
}

// LoadKeysFile reads and parses a keys file.
func LoadKeysFile(path string) ([]Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKeys, err)
	}
	// A byte order mark, which Windows editors and PowerShell's Out-File
	// put first, would read as part of line 1's role.
	keys, err := parseKeys(strings.TrimPrefix(string(b), "\uFEFF"))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadKeys, path, err)
	}
	return keys, nil
}

// parseKey parses "ROLE:KEY [rate=N|off] [burst=N] [namespaces=a,b]". A key holds no space,
// so whatever follows one is the key's options. Errors never quote the key.
func parseKey(s string) (Key, error) {
	role, rest, ok := strings.Cut(s, ":")
	if !ok {
		return Key{}, errors.New("want ROLE:KEY")
	}
	r, err := ParseRole(role)
	if err != nil {
		// Not quoted: a key with a colon in it, on a line without its
		// role, would have its first part in the log.
		return Key{}, errors.New("the text before the first colon is not a role: want read:KEY, write:KEY or admin:KEY")
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return Key{}, errors.New("want ROLE:KEY: the key is empty")
	}
	k := Key{Role: r, Secret: fields[0]}
	seen := map[string]bool{}
	for i, opt := range fields[1:] {
		name, v, _ := strings.Cut(opt, "=")
		if seen[name] {
			return Key{}, fmt.Errorf("%s= is given twice", name)
		}
		seen[name] = true
		switch name {
		case "rate":
			if strings.EqualFold(v, "off") {
				k.Rate = math.Inf(1)
				break
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0) || math.IsInf(f, 0) {
				return Key{}, fmt.Errorf("rate=%s: want a positive number of requests a second, or off", v)
			}
			if f < MinRate {
				return Key{}, fmt.Errorf("rate=%s: want at least %g requests a second (one every 1000s), or off", v, MinRate)
			}
			k.Rate = f
		case "burst":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return Key{}, fmt.Errorf("burst=%s: want a whole number of at least 1", v)
			}
			k.Burst = n
		case "namespaces":
			k.Namespaces = strings.Split(v, ",")
			if v == "" {
				k.Namespaces = []string{}
			}
			slices.Sort(k.Namespaces)
		default:
			// Quote none of it: it may be the rest of a key with a space
			// in it, and a key's own "=" (base64's padding) would make it
			// look like an option.
			if strings.HasPrefix(opt, "#") {
				// "write:KEY # importer", as many files take comments.
				return Key{}, fmt.Errorf("a comment after the key (its %s word), or a space in the key: a comment takes a line "+
					"of its own, beginning with # (as the one seenapi new-key writes before its key)", ordinal(i+2))
			}
			return Key{}, fmt.Errorf("an unknown option after the key (its %s word), or a space in the key: a key holds no spaces, "+
				"and options are rate=N, burst=N or namespaces=a,b", ordinal(i+2))
		}
	}
	return k, k.Validate()
}

// ordinal writes n as "2nd", "3rd", "4th"...
func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return strconv.Itoa(n) + suffix
}

func digest(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// ID names the key as the log of admin actions and GET /v1/auth do.
func (k Key) ID() string { return keyID(digest(k.Secret)) }

// keyring answers which role a presented key has. Keys are kept as SHA-256
// digests and compared in constant time against every key, so neither the
// time taken nor an early exit tells which key, or how much of one, matched.
type keyring struct {
	digests [][32]byte
	roles   []Role
	keys    []keyMatch // each key as a request that presents it is admitted with
}

func newKeyring(keys []Key, server callerRate) *keyring {
	kr := &keyring{}
	for _, k := range keys {
		d := digest(k.Secret)
		kr.digests = append(kr.digests, d)
		kr.roles = append(kr.roles, k.Role)
		kr.keys = append(kr.keys, keyMatch{role: k.Role, id: d, rate: server.of(k), scope: k.Namespaces})
	}
	return kr
}

// open reports whether no keys are configured.
func (kr *keyring) open() bool { return len(kr.digests) == 0 }

// match returns the key secret is (a zero role if it is none).
func (kr *keyring) match(secret string) keyMatch {
	d := digest(secret)
	if at := kr.find(d); at >= 0 {
		return kr.keys[at]
	}
	return keyMatch{id: d}
}

// find returns the index of the key of digest d, or -1. The index is
// selected in constant time like the role; only once it matched is it
// used.
func (kr *keyring) find(d [32]byte) int {
	role, at := RoleNone, -1
	for i := range kr.digests {
		eq := subtle.ConstantTimeCompare(d[:], kr.digests[i][:])
		role = Role(subtle.ConstantTimeSelect(eq, int(kr.roles[i]), int(role)))
		at = subtle.ConstantTimeSelect(eq, i, at)
	}
	if role == RoleNone {
		return -1
	}
	return at
}

// keyMatch is the key a request presented.
type keyMatch struct {
	role  Role     // RoleNone: no key of the ring
	id    [32]byte // the key's digest, which names it to its rate limit and in the log without keeping it
	rate  callerRate
	scope []string // the namespaces it is limited to, sorted; nil: every one
}

// allows reports whether the key may call the routes of namespace ns.
func (m keyMatch) allows(ns string) bool {
	_, ok := slices.BinarySearch(m.scope, ns)
	return m.scope == nil || ok
}

// scopeError is the problem of a key limited to namespaces other than ns.
func (s *Server) scopeError(m keyMatch, ns string) error {
	return newError(pForbidden, "this API key is limited to the namespaces %s, not %q", s.scopeWords(m), ns)
}

// shownScope is what the holder of a key limited to namespaces is shown of
// them (a 403's detail, GET /v1/auth): the served ones, and those too short
// to be a key. A name as long as a key that no namespace is served under may
// be a second key given without its role after namespaces= in SEENAPI_KEYS
// (see ShownScope), which the first key's holder must not read: it is only
// counted. The key could not call such a namespace anyway.
func (s *Server) shownScope(m keyMatch) (shown []string, hidden int) {
	shown = make([]string, 0, len(m.scope))
	for _, ns := range m.scope {
		if _, served := s.hot.Namespace(ns); served || len(ns) < MinKeyLength {
			shown = append(shown, ns)
		} else {
			hidden++
		}
	}
	return shown, hidden
}

// scopeWords lists a key's namespaces as its holder is shown them.
func (s *Server) scopeWords(m keyMatch) string {
	shown, hidden := s.shownScope(m)
	words := strings.Join(shown, ", ")
	if hidden > 0 {
		if words != "" {
			words += " and "
		}
		words += fmt.Sprintf("%d more not served (not shown)", hidden)
	}
	return words
}
