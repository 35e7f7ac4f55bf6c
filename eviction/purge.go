package eviction

import (
	"errors"
	"fmt"
	"slices"
	"sync"
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
// A SetNamespaces that serves the namespace again waits for the purge. A
// call made before the namespace was taken out that is loading its user
// when the purge begins, or loads it while the purge runs, fails with
// ErrUnknownNamespace, as a call made after does.
func (h *HotSet) PurgeNamespace(ns string) (int, error) {
	if h.closed.Load() {
		return 0, ErrClosed
	}
	h.nsMu.Lock()
	defer h.nsMu.Unlock()
	t := h.nss.Load()
	if _, ok := t.byName[ns]; ok {
		return 0, fmt.Errorf("%w: %q is served", ErrNamespaceServed, ns)
	}
	known := slices.IndexFunc(t.byIndex, func(o *nsInfo) bool { return o.Name == ns })
	if known >= 0 {
		// A call under way when the namespace was taken out may be loading
		// one of its users, from what the purge is about to erase: marked
		// as running, the purge makes such loads fail (purgedSince), and
		// waits for those in flight, which may write (RecordBulk), before
		// it erases the store.
		c := t.byIndex[known].c
		c.purges.Add(1)
		defer c.purges.Add(1)
		h.waitLoads(uint8(known))
		h.dropNamespace(uint8(known))
		h.replies.erase(uint8(known), "")
	}
	n, err := h.purgeStored(ns)
	if err != nil {
		h.storageErrors.Add(1)
		return 0, h.storageErr(err, "purging", ns, "*")
	}
	h.stored.remove(ns)
	if n == 0 && known < 0 {
		return 0, fmt.Errorf("%w: %q is neither served nor stored", ErrUnknownNamespace, ns)
	}
	return n, nil
}

// purgedSince reports whether a purge of info's namespace ran since, or
// was running when, its purges counter read gen.
func purgedSince(info *nsInfo, gen uint64) bool {
	return gen&1 != 0 || info.c.purges.Load() != gen
}

// errPurged is the error of a call whose user's namespace was purged while
// the call loaded the user: not served, as for a call made after.
func errPurged(info *nsInfo) error {
	return fmt.Errorf("%w: %q was purged while the call loaded its user", ErrUnknownNamespace, info.Name)
}

// waitLoads waits until no load of a user of the namespace at index is in
// flight, among those claimed before it looked at each shard.
func (h *HotSet) waitLoads(index uint8) {
	for _, s := range h.shards {
		for {
			var wait *loadCall
			s.mu.Lock()
			for _, lc := range s.loading {
				if lc.ns == index {
					wait = lc
					break
				}
			}
			s.mu.Unlock()
			if wait == nil {
				break
			}
			<-wait.done
		}
	}
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
	defer h.lockForChange()()
	var out []*entry
	for _, s := range h.shards {
		s.mu.Lock()
		for _, k := range s.lru.Keys() {
			if e, ok := s.lru.Peek(k); ok && e.ns == index {
				h.removeLocked(s, k, e)
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

// storedSet is the names of the namespaces that may hold data in the
// store, served or not: read from the store once (the first time
// StoredNamespaces is asked), then kept up to date by SetNamespaces (a
// namespace taken out may hold data) and PurgeNamespace (a purged one
// holds none). Listing them from the store at every call would step over
// every key a purge deleted until compaction drops them: 386 ms after a
// purge of a million users (BenchmarkPurgeNamespace).
type storedSet struct {
	mu    sync.Mutex
	read  bool
	names map[string]struct{}
}

func (s *storedSet) add(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		s.names[n] = struct{}{}
	}
}

func (s *storedSet) remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.names, name)
}

// StoredNamespaces returns the namespaces that hold users in the store but
// are not served, sorted: what PurgeNamespace can erase.
func (h *HotSet) StoredNamespaces() ([]string, error) {
	s := &h.stored
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.read {
		names, err := h.store.Namespaces()
		if err != nil {
			h.storageErrors.Add(1)
			return nil, fmt.Errorf("%w: listing the stored namespaces: %w", ErrStorage, err)
		}
		for _, n := range names {
			s.names[n] = struct{}{}
		}
		s.read = true
	}
	served := h.nss.Load().byName
	out := []string{}
	for n := range s.names {
		if _, ok := served[n]; ok {
			continue
		}
		// One seek: a namespace taken out with nothing stored (its users
		// erased one by one, or never written) is not listed, and cannot
		// gain data until it is served again.
		users, err := h.store.Users(n, "", 1, NoHistory())
		if err != nil {
			h.storageErrors.Add(1)
			return nil, fmt.Errorf("%w: listing the stored namespaces: %w", ErrStorage, err)
		}
		if len(users) == 0 {
			delete(s.names, n)
			continue
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}
