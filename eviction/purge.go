package eviction

import (
	"errors"
	"fmt"
	"slices"
)

// ErrNamespaceServed: the namespace is served, and PurgeNamespace refuses
// to erase it (take it out of the namespaces first).
var ErrNamespaceServed = errors.New("eviction: namespace is served")

// PurgeNamespace erases every user of a namespace the hot set does not
// serve, from the store and from memory, and returns how many users were
// stored. It is how the data of a namespace taken out of the list
// (SetNamespaces, or a restart without it) is given up: until then it
// stays, to be served again if the namespace comes back. A served
// namespace is refused with ErrNamespaceServed, and a name that was not
// served since New and holds nothing in the store is ErrUnknownNamespace.
// A SetNamespaces that serves the namespace again waits for the purge.
func (h *HotSet) PurgeNamespace(ns string) (int, error) {
	if h.closed.Load() {
		return 0, ErrClosed
	}
	h.nsMu.Lock()
	defer h.nsMu.Unlock()
	t := h.nss.Load()
	if _, ok := t.byName[ns]; ok {
		return 0, fmt.Errorf("%w: %q is served; take it out of the namespaces first", ErrNamespaceServed, ns)
	}
	known := slices.IndexFunc(t.byIndex, func(o *nsInfo) bool { return o.Name == ns })
	if known >= 0 {
		h.dropNamespace(uint8(known))
	}
	n, err := h.purgeStored(ns)
	if err != nil {
		h.storageErrors.Add(1)
		return 0, h.storageErr(err, "purging", ns, "*")
	}
	if n == 0 && known < 0 {
		return 0, fmt.Errorf("%w: %q is neither served nor stored", ErrUnknownNamespace, ns)
	}
	return n, nil
}

// purgeStored erases the namespace from the store. A panic in it fails
// the purge instead of the service.
func (h *HotSet) purgeStored(ns string) (n int, err error) {
	defer h.recovered(&err, "purging", ns, "*")
	return h.store.PurgeNamespace(ns)
}

// dropNamespace takes every user of the namespace at index out of memory
// without writing it back: those left hot by a call under way when the
// namespace was taken out, and those evicted with changes still waiting
// for their write-back (the purge erases their journal records). It holds
// flushMu, so no write-back round is writing them meanwhile.
func (h *HotSet) dropNamespace(index uint8) {
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	c := h.nss.Load().byIndex[index].c
	var out []*entry
	for _, s := range h.shards {
		s.mu.Lock()
		for _, k := range s.lru.Keys() {
			if e, ok := s.lru.Peek(k); ok && e.ns == index {
				s.lru.Remove(k)
				s.bytes -= int64(e.bytes)
				c.hotUsers.Add(-1)
				c.hotBytes.Add(-int64(e.bytes))
				out = append(out, e)
			}
		}
		for k, e := range s.evicted {
			if e.ns == index {
				h.letGoLocked(s, k, e)
				out = append(out, e)
			}
		}
		s.mu.Unlock()
	}
	for _, e := range out {
		// Unreachable now; a queued entry that is clean is skipped by
		// write-back.
		e.mu.Lock()
		h.markClean(e)
		e.mu.Unlock()
	}
}

// StoredNamespaces returns the namespaces that hold data in the store but
// are not served, sorted: what PurgeNamespace can erase.
func (h *HotSet) StoredNamespaces() ([]string, error) {
	names, err := h.store.Namespaces()
	if err != nil {
		h.storageErrors.Add(1)
		return nil, fmt.Errorf("%w: listing the stored namespaces: %w", ErrStorage, err)
	}
	served := h.nss.Load().byName
	out := []string{}
	for _, n := range names {
		if _, ok := served[n]; !ok {
			out = append(out, n)
		}
	}
	return out, nil
}
