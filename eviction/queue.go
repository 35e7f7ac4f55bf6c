package eviction

// queue is a shard's list of dirty entries, oldest first. The write-back
// takes from its front every few milliseconds: taking advances a head
// instead of moving the rest down. Moving thousands of pointers each round
// (a million users drawn uniformly leave that many dirty in a shard) cost
// about a tenth of the server's CPU while a collection was marking, every
// moved pointer passing the write barrier. Not safe for concurrent use: the
// shard lock guards it.
type queue struct {
	items []*entry // items[head:] are queued
	head  int
}

// minQueueCap is the capacity a queue keeps however few it holds.
const minQueueCap = 64

func (q *queue) len() int { return len(q.items) - q.head }

// at returns the i-th queued entry, 0 the oldest.
func (q *queue) at(i int) *entry { return q.items[q.head+i] }

// push queues e last.
func (q *queue) push(e *entry) {
	if len(q.items) == cap(q.items) && q.head >= len(q.items)/2 {
		// Full, and at least half of it taken: move the rest to the front
		// rather than grow. At most as many moves as pushes since the last.
		q.compact(cap(q.items))
	}
	q.items = append(q.items, e)
}

// drop takes the n oldest entries off the queue.
func (q *queue) drop(n int) {
	// Cleared: the GC scans the whole array, and stale pointers would keep
	// evicted users alive.
	clear(q.items[q.head : q.head+n])
	q.head += n
	if q.len() == 0 {
		q.items, q.head = q.items[:0], 0
	}
	if c := cap(q.items); c > minQueueCap && q.len() < c/4 {
		// A burst of changes is not memory kept for good.
		q.compact(max(2*q.len(), minQueueCap))
	}
}

// compact moves the queued entries to the front of an array of capacity c
// (the same one when c is its capacity).
func (q *queue) compact(c int) {
	live := q.items[q.head:]
	if c == cap(q.items) {
		n := copy(q.items, live)
		clear(q.items[n:])
		q.items = q.items[:n]
	} else {
		q.items = append(make([]*entry, 0, c), live...)
	}
	q.head = 0
}

// each calls f with every queued entry, oldest first.
func (q *queue) each(f func(*entry)) {
	for _, e := range q.items[q.head:] {
		f(e)
	}
}
