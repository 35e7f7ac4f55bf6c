package api

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
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

// Key is one API key and its role.
type Key struct {
	Role   Role
	Secret string
}

func (k Key) validate() error {
	if k.Role < RoleRead || k.Role > RoleAdmin {
		return fmt.Errorf("bad role %v", k.Role)
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

// ParseKeys parses a keys file: one "ROLE:KEY" a line; blank lines and lines
// starting with # are ignored.
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
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return keys, nil
}

// ParseKeysList parses the SEENAPI_KEYS form: "role:key,role:key".
func ParseKeysList(list string) ([]Key, error) {
	var keys []Key
	for i, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, err := parseKey(item)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d: %w", ErrBadKeys, i+1, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// LoadKeysFile reads and parses a keys file.
func LoadKeysFile(path string) ([]Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKeys, err)
	}
	keys, err := parseKeys(string(b))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadKeys, path, err)
	}
	return keys, nil
}

func parseKey(s string) (Key, error) {
	role, secret, ok := strings.Cut(s, ":")
	if !ok {
		return Key{}, errors.New("want ROLE:KEY")
	}
	r, err := ParseRole(role)
	if err != nil {
		return Key{}, err
	}
	k := Key{Role: r, Secret: strings.TrimSpace(secret)}
	return k, k.validate()
}

func digest(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// keyring answers which role a presented key has. Keys are kept as SHA-256
// digests and compared in constant time against every key, so neither the
// time taken nor an early exit tells which key, or how much of one, matched.
type keyring struct {
	digests [][32]byte
	roles   []Role
}

func newKeyring(keys []Key) *keyring {
	kr := &keyring{}
	for _, k := range keys {
		kr.digests = append(kr.digests, digest(k.Secret))
		kr.roles = append(kr.roles, k.Role)
	}
	return kr
}

// open reports whether no keys are configured.
func (kr *keyring) open() bool { return len(kr.digests) == 0 }

// role returns the role of secret, RoleNone if it is no key.
func (kr *keyring) role(secret string) Role {
	r, _ := kr.match(secret)
	return r
}

// match returns the role of secret, RoleNone if it is no key, and its
// digest, which names the key (to its rate limit) without keeping it.
func (kr *keyring) match(secret string) (Role, [32]byte) {
	d := digest(secret)
	role := RoleNone
	for i := range kr.digests {
		eq := subtle.ConstantTimeCompare(d[:], kr.digests[i][:])
		role = Role(subtle.ConstantTimeSelect(eq, int(kr.roles[i]), int(role)))
	}
	return role, d
}
