package eviction

import (
	"fmt"
	"maps"
	"slices"
)

// NamespaceChanges is what SetNamespaces did.
type NamespaceChanges struct {
	Added, Changed []string // namespaces new to the hot set (or served again), and those whose profile changed
	// Removed are namespaces the hot set served that the new list leaves
	// out: they are no longer served, and their hot users were evicted
	// (those with changes are written back first; see SetNamespaces).
	Removed []string
}

// SetNamespaces serves namespaces from now on, without a restart: a new
// namespace is served at once, and a changed profile applies to the users
// whose filters are made from now on (a filter keeps the profile it was
// made with). A namespace left out is no longer served: calls for it fail
// with ErrUnknownNamespace, as after a restart without it, and its hot
// users are evicted, those with changes kept reachable until they are
// written back, which SetNamespaces asks for at once. Its users' data
// stays in the store, and a later list that has the namespace again
// serves them as they were. A call for such a namespace that was under
// way when SetNamespaces ran finishes, and may leave its user hot, to be
// evicted as the least recently used.
// A list with an invalid profile, a name twice, or more namespaces in all
// than the hot set can tell apart changes nothing.
func (h *HotSet) SetNamespaces(namespaces []Namespace) (NamespaceChanges, error) {
	h.nsMu.Lock()
	defer h.nsMu.Unlock()
	prev := h.nss.Load()
	t, ch, err := nextTable(prev, namespaces)
	if err != nil {
		return NamespaceChanges{}, err
	}
	h.nss.Store(t)
	if len(ch.Removed) > 0 {
		h.stored.add(ch.Removed...)
		var gone [maxNamespaces]bool
		for _, name := range ch.Removed {
			gone[prev.byName[name].index] = true
		}
		h.evictNamespaces(&gone)
	}
	return ch, nil
}

// evictNamespaces evicts every hot user of the namespaces whose index is
// set in gone, as trimLocked evicts the least recently used, and asks for
// a write-back round of those with changes. No lock held.
func (h *HotSet) evictNamespaces(gone *[maxNamespaces]bool) {
	var out []*entry
	for _, s := range h.shards {
		s.mu.Lock()
		for _, k := range s.lru.Keys() {
			if e, ok := s.lru.Peek(k); ok && gone[e.ns] {
				h.evictLocked(s, k, e)
				out = append(out, e)
			}
		}
		s.mu.Unlock()
	}
	if len(out) > 0 {
		h.kickFlush()
	}
}

// MaxNamespaces is how many namespaces a hot set serves since its start,
// those a SetNamespaces took out included: each user's entry tells its
// namespace by a byte.
const MaxNamespaces = maxNamespaces

// CheckNamespaces returns the error New would for namespaces, opening
// nothing: a profile that is not valid, a name twice, too many. seenapi
// check runs it on a namespaces file before the service is started or told
// to reload it.
func CheckNamespaces(namespaces []Namespace) error {
	_, _, err := nextTable(&nsTable{}, namespaces)
	return err
}

// nextTable is prev with namespaces served: a namespace served before
// (now or by an earlier table) keeps its index and counters, a new one
// takes the next index, and those of prev that namespaces leaves out are
// no longer served (they stay in byIndex).
func nextTable(prev *nsTable, namespaces []Namespace) (*nsTable, NamespaceChanges, error) {
	var ch NamespaceChanges
	t := &nsTable{byName: make(map[string]*nsInfo, len(prev.byIndex)+len(namespaces)),
		byIndex: slices.Clone(prev.byIndex)}
	for _, n := range namespaces {
		p := n.Profile.WithDefaults()
		if err := p.Validate(); err != nil {
			return nil, ch, fmt.Errorf("namespace %q: %w", n.Name, err)
		}
		if _, dup := t.byName[n.Name]; dup {
			return nil, ch, fmt.Errorf("namespace %q configured twice", n.Name)
		}
		made, err := emptyEncoding(p)
		if err != nil {
			return nil, ch, fmt.Errorf("namespace %q: %w", n.Name, err)
		}
		info := &nsInfo{Namespace: Namespace{Name: n.Name, Profile: p}, seed: nsSeed(n.Name), made: made}
		if old, ok := prev.byName[n.Name]; ok {
			info.index, info.c = old.index, old.c
			if old.Profile != p {
				ch.Changed = append(ch.Changed, n.Name)
			}
		} else if i := slices.IndexFunc(prev.byIndex, func(o *nsInfo) bool { return o.Name == n.Name }); i >= 0 {
			// Served again: its users may still be in memory under its
			// index (dirty ones wait for their write-back).
			info.index, info.c = prev.byIndex[i].index, prev.byIndex[i].c
			ch.Added = append(ch.Added, n.Name)
		} else {
			if len(t.byIndex) == maxNamespaces {
				return nil, ch, fmt.Errorf("more than %d namespaces configured (counting those served since the start)", maxNamespaces)
			}
			info.index, info.c = uint8(len(t.byIndex)), new(nsCounters)
			t.byIndex = append(t.byIndex, nil)
			if len(prev.byIndex) > 0 {
				ch.Added = append(ch.Added, n.Name)
			}
		}
		t.byIndex[info.index] = info
		t.byName[n.Name] = info
	}
	for _, name := range prev.names {
		if _, ok := t.byName[name]; !ok {
			ch.Removed = append(ch.Removed, name)
		}
	}
	t.names = slices.Sorted(maps.Keys(t.byName))
	return t, ch, nil
}

// Namespaces returns the configured namespaces sorted by name.
func (h *HotSet) Namespaces() []Namespace {
	t := h.nss.Load()
	out := make([]Namespace, len(t.names))
	for i, n := range t.names {
		out[i] = t.byName[n].Namespace
	}
	return out
}

// Namespace returns one namespace.
func (h *HotSet) Namespace(name string) (Namespace, bool) {
	info, ok := h.nss.Load().byName[name]
	if !ok {
		return Namespace{}, false
	}
	return info.Namespace, true
}
