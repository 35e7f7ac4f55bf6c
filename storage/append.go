package storage

import (
	"fmt"
	"sync"
	"time"
)

// appendReq is one queued journal append, waiting for its group commit.
type appendReq struct {
	ns, user string
	value    []byte
	ttl      time.Duration
	seq      uint64
	err      error
	done     chan struct{}
}

var appendReqPool = sync.Pool{New: func() any { return &appendReq{done: make(chan struct{}, 1)} }}

// Append adds one journal entry for the user and returns its sequence
// number once the entry is committed (fsync'd with Options.Sync).
// Concurrent appends are written together, in one write to the journal's
// active segment file, by a single writer goroutine (group commit), so each
// waits for at most one write in progress plus its own. The entry expires after ttl (<= 0: never).
// value must not be modified until Append returns.
func (s *Store) Append(ns, user string, value []byte, ttl time.Duration) (uint64, error) {
	if err := checkKey(ns, user); err != nil {
		return 0, opErr("append", err)
	}
	if err := s.enterWrite(); err != nil {
		return 0, opErr(fmt.Sprintf("append %s/%s", ns, user), err)
	}
	r := appendReqPool.Get().(*appendReq)
	r.ns, r.user, r.value, r.ttl = ns, user, value, ttl
	s.appends <- r
	s.leave() // Close waits for the writer, which answers every queued request
	<-r.done
	seq, err := r.seq, r.err
	*r = appendReq{done: r.done}
	appendReqPool.Put(r)
	if err != nil {
		return 0, opErr(fmt.Sprintf("append %s/%s", ns, user), err)
	}
	return seq, nil
}

// writer is the group-commit loop: it takes whatever appends are queued (at
// least one, at most MaxAppendBatch), writes them in one journal write and
// answers each. It returns when the queue is closed and drained.
func (s *Store) writer() {
	defer close(s.writerDone)
	max := s.opts.MaxAppendBatch
	batch := make([]*appendReq, 0, max)
	var recs []walAppend // the batch's records, reused from one commit to the next
	for r := range s.appends {
		batch = append(batch[:0], r)
	fill:
		for len(batch) < max {
			select {
			case r, ok := <-s.appends:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		recs = s.commitAppends(batch, recs[:0])
		clear(batch)
		clear(recs) // keep no request's user or value alive
	}
}

// commitAppends writes batch to the journal and answers every request. It
// builds the records in recs and returns it, for the next batch to reuse:
// what a recording call allocates is what paces the collector.
func (s *Store) commitAppends(batch []*appendReq, recs []walAppend) []walAppend {
	answer := func(rs []*appendReq, err error) {
		for _, r := range rs {
			r.err = err
			r.done <- struct{}{}
		}
	}
	if s.full.Load() {
		answer(batch, s.errFull())
		return recs
	}
	first, err := s.takeSeqs(uint64(len(batch)))
	if err != nil {
		answer(batch, err)
		return recs
	}
	now := time.Now()
	for i, r := range batch {
		r.seq = first + uint64(i)
		rec := walAppend{seq: r.seq, ns: r.ns, user: r.user, value: r.value}
		if r.ttl > 0 {
			rec.expiresAt = now.Add(r.ttl).Unix()
		}
		recs = append(recs, rec)
	}
	if err := s.wal.write(recs); err != nil {
		answer(batch, s.writeErr(err))
		return recs
	}
	answer(batch, nil)
	return recs
}
