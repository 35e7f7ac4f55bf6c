package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/userfilter"
)

// profileFields names the fields of a profile, in the order the errors list them.
const profileFields = "kind, fp_rate, initial_capacity, growth, tightening, window, granularity, max_items"

// decodeProfile reads one namespace's profile from its node into y; fields
// it leaves out stay zero, which Profile.WithDefaults reads as the default.
// Its errors name the line and the field, and say what the field takes.
// merging holds the profiles being read, whose fields a "<<" may not take
// again: an anchor that merges itself would never end.
func decodeProfile(n *yaml.Node, y *userfilter.Profile, merging map[*yaml.Node]bool) error {
	n = resolveAlias(n)
	if merging[n] {
		return fmt.Errorf("line %d: the profile merges itself (<<)", n.Line)
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // "feed:" alone: the defaults
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a map of fields (%s)", n.Line, profileFields)
	}
	merging[n] = true
	defer delete(merging, n)
	// "<<: *base" takes another profile's fields. As YAML merges them, the
	// profile's own fields win wherever they stand, and of "<<: [*a, *b]"
	// the first: so the bases are read first, the last of them first.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := n.Content[i], resolveAlias(n.Content[i+1]); isMerge(k) {
			bases := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				bases = v.Content
			}
			for j := len(bases) - 1; j >= 0; j-- {
				if err := decodeProfile(bases[j], y, merging); err != nil {
					return err
				}
			}
		}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolveAlias(n.Content[i+1])
		if isMerge(k) {
			continue
		}
		if line, ok := seen[k.Value]; ok {
			return fmt.Errorf("line %d: %s is already set at line %d", k.Line, k.Value, line)
		}
		seen[k.Value] = k.Line
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			continue // "window:" alone: the default
		}
		if k.Value != "kind" && v.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: want a single value", v.Line, k.Value)
		}
		var err error
		switch k.Value {
		case "kind":
			if v.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: kind: want a filter kind (bloom, compact or staged)", v.Line)
			}
			if y.Kind, err = userfilter.ParseKind(v.Value); err != nil {
				err = fmt.Errorf("%q: want a filter kind (bloom, compact or staged)", v.Value)
			}
		case "fp_rate":
			y.FPRate, err = nonZero(profileNumber(v.Value))
		case "growth":
			y.Growth, err = nonZero(profileNumber(v.Value))
		case "tightening":
			y.Tightening, err = nonZero(profileNumber(v.Value))
		case "initial_capacity":
			var c uint64
			c, err = nonZero(profileCount(v.Value, math.MaxUint32))
			y.InitialCapacity = uint32(c)
		case "max_items":
			y.MaxItems, err = profileCount(v.Value, math.MaxUint64)
		case "window":
			y.Window, err = parseDuration(v.Value)
		case "granularity":
			y.Granularity, err = parseDuration(v.Value)
		default:
			return fmt.Errorf("line %d: unknown field %q (known: %s)", k.Line, k.Value, profileFields)
		}
		if err != nil {
			return fmt.Errorf("line %d: %s: %w", v.Line, k.Value, err)
		}
	}
	return nil
}

func isMerge(k *yaml.Node) bool { return k.Value == "<<" && k.Tag == "!!merge" }

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// nonZero refuses a 0 written out for a field that has no use for it: a
// profile reads an omitted field's 0 as the default, which a written 0
// would silently become.
func nonZero[T float64 | uint64](v T, err error) (T, error) {
	if err == nil && v == 0 {
		return 0, errors.New("0 is not a value it takes; leave the field out for the default")
	}
	return v, err
}

// profileNumber reads a rate or a factor.
func profileNumber(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return f, nil
}

// profileCount reads a count of items: a whole number from 0 to most
// (written 100000 or 1e5), never rounded.
func profileCount(s string, most uint64) (uint64, error) {
	bad := fmt.Errorf("%q: want a whole number from 0 to %d", s, most)
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		if n > most {
			return 0, bad
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f != math.Trunc(f) || f > float64(most) {
		return 0, bad
	}
	return uint64(f), nil
}

// parseDuration reads a Go duration ("720h", "90m") or a number of days
// ("30d", "7.5d").
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		f, err := strconv.ParseFloat(days, 64)
		// NaN fails every comparison: refused with the days out of range,
		// not converted to a duration (a negative one, on amd64).
		if err != nil || !(f >= 0 && f <= 100*365) {
			return 0, fmt.Errorf("bad duration %q (want e.g. 30d or 720h)", s)
		}
		return time.Duration(f * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q (want e.g. 30d or 720h)", s)
	}
	return d, nil
}

// oneDocument parses the namespaces file, which is one YAML document:
// yaml.Unmarshal reads the first and drops the rest, so the namespaces of a
// file split by "---" (as Kubernetes manifests are) past the first would go
// unserved without a word. An empty document after it (a trailing "---")
// holds nothing to lose.
func oneDocument(data []byte) (yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return doc, err
	}
	for {
		var next yaml.Node
		switch err := dec.Decode(&next); {
		case errors.Is(err, io.EOF):
			return doc, nil
		case err != nil:
			return doc, err
		}
		if top := next.Content; len(top) > 0 && !(top[0].Kind == yaml.ScalarNode && top[0].Tag == "!!null") {
			return doc, fmt.Errorf("line %d: a second YAML document (after ---): the file is one map of namespace names to profiles; put every namespace in it", top[0].Line)
		}
	}
}

var namespaceName = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// parseNamespaces reads a namespaces file: a map of name to profile. The
// namespace "default" is added with the default profile unless the file
// defines it.
func parseNamespaces(data []byte) ([]eviction.Namespace, error) {
	doc, err := oneDocument(data)
	if err != nil {
		return nil, err
	}
	m := map[string]*userfilter.Profile{}
	if len(doc.Content) > 0 {
		top := resolveAlias(doc.Content[0])
		switch {
		case top.Kind == yaml.ScalarNode && top.Tag == "!!null": // an empty document
		case top.Kind != yaml.MappingNode:
			return nil, fmt.Errorf("line %d: want a map of namespace names to profiles", top.Line)
		default:
			lines := map[string]int{}
			for i := 0; i+1 < len(top.Content); i += 2 {
				k, v := top.Content[i], top.Content[i+1]
				if line, ok := lines[k.Value]; ok {
					return nil, fmt.Errorf("line %d: namespace %s is already defined at line %d", k.Line, k.Value, line)
				}
				lines[k.Value] = k.Line
				y := &userfilter.Profile{}
				if err := decodeProfile(v, y, map[*yaml.Node]bool{}); err != nil {
					return nil, fmt.Errorf("namespace %s: %w", k.Value, err)
				}
				m[k.Value] = y
			}
		}
	}
	if _, ok := m["default"]; !ok {
		m["default"] = nil
	}
	// Refused here, naming the file, rather than by the hot set once the
	// store is open (or at a SIGHUP, by an error that names no file).
	if len(m) > eviction.MaxNamespaces {
		return nil, fmt.Errorf("%d namespaces, counting \"default\" (always served): at most %d can be served", len(m), eviction.MaxNamespaces)
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]eviction.Namespace, 0, len(m))
	for _, name := range names {
		if !namespaceName.MatchString(name) {
			return nil, fmt.Errorf("namespace name %q: want [a-z0-9_-]{1,64}", name)
		}
		p := userfilter.DefaultProfile()
		if y := m[name]; y != nil {
			p = y.WithDefaults()
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("namespace %s: %w", name, err)
		}
		out = append(out, eviction.Namespace{Name: name, Profile: p})
	}
	return out, nil
}

// loadNamespaces reads the namespaces file at path ("" : default only).
// namesNone reports whether a parsed namespaces file names no namespace:
// no document, a null one, or an empty map ({}, what a template renders
// from an empty map).
func namesNone(doc *yaml.Node) bool {
	if len(doc.Content) == 0 {
		return true
	}
	top := resolveAlias(doc.Content[0])
	return top.Kind == yaml.ScalarNode && top.Tag == "!!null" || top.Kind == yaml.MappingNode && len(top.Content) == 0
}

func loadNamespaces(path string) ([]eviction.Namespace, error) {
	if path == "" {
		return parseNamespaces(nil)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--namespaces: %w", err) // the error names only the path
	}
	// A file that names no namespace (empty, or comments only) is most
	// likely one cut short or not yet written: served, it would take
	// every namespace but "default" out at the next SIGHUP.
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) == nil && namesNone(&doc) {
		return nil, fmt.Errorf("%s names no namespace (want a map of namespace names to profiles); to serve only \"default\", give no --namespaces", path)
	}
	nss, err := parseNamespaces(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nss, nil
}
