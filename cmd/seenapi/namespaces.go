package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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

// profileYAML is one namespace in the namespaces file. Omitted fields take
// the defaults of userfilter.Profile.
type profileYAML struct {
	Kind            string   `yaml:"kind"`
	FPRate          float64  `yaml:"fp_rate"`
	InitialCapacity uint32   `yaml:"initial_capacity"`
	Growth          float64  `yaml:"growth"`
	Tightening      float64  `yaml:"tightening"`
	Window          duration `yaml:"window"`
	Granularity     duration `yaml:"granularity"`
	MaxItems        uint64   `yaml:"max_items"`
}

// duration is a Go duration ("720h", "90m") or a number of days ("30d", "7.5d").
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = duration(v)
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		f, err := strconv.ParseFloat(days, 64)
		if err != nil || f < 0 || f > 100*365 {
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

var namespaceName = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// parseNamespaces reads a namespaces file: a map of name to profile. The
// namespace "default" is added with the default profile unless the file
// defines it.
func parseNamespaces(data []byte) ([]eviction.Namespace, error) {
	var m map[string]*profileYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if _, ok := m["default"]; !ok {
		if m == nil {
			m = map[string]*profileYAML{}
		}
		m["default"] = nil
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
			kind, err := userfilter.ParseKind(y.Kind)
			if err != nil {
				return nil, fmt.Errorf("namespace %s: %w", name, err)
			}
			p = userfilter.Profile{Kind: kind, FPRate: y.FPRate, InitialCapacity: y.InitialCapacity,
				Growth: y.Growth, Tightening: y.Tightening, Window: time.Duration(y.Window),
				Granularity: time.Duration(y.Granularity), MaxItems: y.MaxItems}.WithDefaults()
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("namespace %s: %w", name, err)
		}
		out = append(out, eviction.Namespace{Name: name, Profile: p})
	}
	return out, nil
}

// loadNamespaces reads the namespaces file at path ("" : default only).
func loadNamespaces(path string) ([]eviction.Namespace, error) {
	if path == "" {
		return parseNamespaces(nil)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--namespaces: %w", err) // the error names only the path
	}
	nss, err := parseNamespaces(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nss, nil
}
