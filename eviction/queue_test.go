package eviction

import "testing"

// The queue hands entries back in the order pushed, keeps no pointer to
// one taken, and under a steady flow keeps a bounded array.
func TestQueueKeepsOrderAndBoundsItsArray(t *testing.T) {
	var q queue
	entries := make([]*entry, 10000)
	for i := range entries {
		entries[i] = new(entry)
	}
	next, taken := 0, 0
	for round := range 2000 {
		// Pushes and takes in bursts of different sizes, 1000 queued on average.
		for range 5 + round%7 {
			q.push(entries[next%len(entries)])
			next++
		}
		if q.len() > 1000 {
			n := min(q.len(), 3+round%11)
			for i := range n {
				if got, want := q.at(i), entries[(taken+i)%len(entries)]; got != want {
					t.Fatalf("round %d: entry %d of the queue is not the %d-th pushed", round, i, taken+i)
				}
			}
			q.drop(n)
			taken += n
		}
		if q.len() != next-taken {
			t.Fatalf("round %d: queue holds %d, want %d", round, q.len(), next-taken)
		}
		for i, e := range q.items[:q.head] {
			if e != nil {
				t.Fatalf("round %d: slot %d keeps an entry taken off the queue", round, i)
			}
		}
	}
	if c := cap(q.items); c > 4*1024 {
		t.Errorf("a queue of about 1000 keeps an array of %d", c)
	}
	seen := 0
	q.each(func(e *entry) {
		if e != entries[(taken+seen)%len(entries)] {
			t.Fatalf("each: entry %d out of order", seen)
		}
		seen++
	})
	if seen != q.len() {
		t.Errorf("each visited %d of %d", seen, q.len())
	}
	q.drop(q.len())
	if q.len() != 0 || cap(q.items) > minQueueCap {
		t.Errorf("emptied queue: %d queued, array of %d", q.len(), cap(q.items))
	}
}
