package api

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zeebo/xxh3"
)

// A crash loses the answers kept in memory for Idempotency-Key retries. The
// journal carries a keyed call's answer with its items only until the user
// is written back, a few seconds, so a crash loses the older answers, and a
// retry of one records the next items. answerLog closes that: each answer is
// added to a buffer as it is given, and the buffer is written to a file of
// a directory every interval, and the write-back leaves a keyed call's
// journal record until the file holds its answer (answerMarks), so the
// journal holds an answer until the file does, however late the writer
// comes round (a dry run's answer, which no journal holds, is written
// within the interval). The next
// start reads back the answers within their time to live. A graceful stop,
// whose snapshot (SaveReplays) holds them all, deletes the files. Writing
// each answer before it was sent cost 17% more time a keyed call
// (BenchmarkOneCall/journal=on/http-idempotency-key, six runs: one write a
// call, in turn); written every interval, the noise hides any cost.
//
// Files are numbered in order and hold records of
//
//	length uint32 | crc32c(payload) uint32 | payload
//	payload: uvarint len(key) | key | request 16 bytes | uvarint status |
//	         at (Unix nanoseconds) 8 bytes | body
//
// An erase mark is a record of status 0 (eraseStatus), a clock mark one of
// status 1 and no key (clockStatus: the time answers are stamped in, noted
// every clockEvery while one may be live; builds before it skip it as an
// answer not to keep).
//
// A damaged or cut record ends its file (a torn write at a crash). Old files
// go when every answer in them is past its time to live, or when the newer
// files hold the memory budget of answers, which they hold in fewer bytes
// than memory does. Memory shares its budget between callers (see
// replays.trimLocked), so one API key's flood of keyed calls leaves
// another key's older answers in memory while their files go: the answers
// of a file that goes that memory still keeps, and its erase marks within
// their time to live, are written again to the open file first. So the
// files always hold what memory does, in at most twice the budget.
type answerLog struct {
	mu           sync.Mutex // pending and pendingMarks, which append fills
	pending      []byte
	pendingMarks []keptAnswer // the erase marks in pending
	spare        []byte       // the buffer flush wrote last, for pending next
	stopped      atomic.Bool  // failed, for append: nothing more is written
	// upTo is the mark (replays.mark) below which every keyed call's
	// answer is written (see answerMarks).
	upTo atomic.Uint64

	fileMu  sync.Mutex // the rest
	dir     string
	f       *os.File
	id      uint64       // the open file's number
	size    int64        // its bytes
	newest  time.Time    // the clock's reading at its latest write (see answerFile)
	marks   []keptAnswer // its erase marks
	closed  []answerFile // oldest first
	segment int64        // bytes after which a new file is begun
	budget  int64
	ttl     time.Duration
	failed  bool // a write failed: the log stopped (logged once)
	dropped bool // its files went, once stopped (dropFiles)
	sync    bool // flushes are synced (OpenAnswerLog's sync)
	logger  *slog.Logger
	// floor is the time a start after a crash reads the files back no
	// earlier than (see lifeLocked): their latest stamp and clockEvery.
	floor time.Time
	// kept returns those of its answers that memory keeps as they were
	// (replays.keptOf), for retain to write again before their file goes
	// for the budget; nil: none (a log of no server's).
	kept func([]keptAnswer) []keptAnswer
}

type answerFile struct {
	id   uint64
	size int64
	// newest is the clock's reading at the file's latest write, from
	// which it ages on the monotonic clock, which a step of the wall
	// clock leaves alone; for a file read back from before a restart,
	// the reading its latest answer's stamp ages from (readBack).
	newest time.Time
	// marks are its erase marks within their time to live when it was
	// read or written: retain writes them again before it deletes the
	// file, since they void answers that other files or the snapshot of
	// a graceful stop may still hold.
	marks []keptAnswer
}

const (
	answerHeader   = 8
	answerSuffix   = ".log"
	maxAnswerBytes = 64 << 20 // no record is larger: a body is at most a batch's answer
)

var answerCRC = crc32.MakeTable(crc32.Castagnoli)

// openAnswerLog reads the answers of dir's files that are within ttl of
// now (oldest first), begins a new file, and deletes the files past their
// time to live (those past the budget go once memory holds what was read:
// see OpenAnswerLog); its flushes are synced if sync. If it cannot begin a file, it
// returns the log stopped (its files still there: see dropFiles), the
// answers it read and the error.
func openAnswerLog(dir string, budget int64, ttl time.Duration, now time.Time, logger *slog.Logger, sync bool) (*answerLog, []keptAnswer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	l := &answerLog{dir: dir, budget: budget, ttl: ttl, segment: max(budget/8, 64<<10), logger: logger, sync: sync}
	names, err := filepath.Glob(filepath.Join(dir, "*"+answerSuffix))
	if err != nil {
		return nil, nil, err
	}
	var ids []uint64
	for _, name := range names {
		if id, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(name), answerSuffix), 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	type read struct {
		file    answerFile
		answers []keptAnswer
		newest  time.Time
	}
	var files []read
	for _, id := range ids {
		b, err := os.ReadFile(l.path(id))
		if err != nil { // one file that does not read costs its answers only
			logger.Warn("seenapi: a file of answers kept for retries does not read; its answers are lost", "file", l.path(id), "err", err)
			l.id = max(l.id, id)
			continue
		}
		answers, complete := decodeAnswers(b)
		if !complete {
			logger.Warn("seenapi: a file of answers kept for retries ends in a damaged record; the answers before it are read",
				"file", l.path(id), "answers", len(answers))
		}
		f := read{file: answerFile{id: id, size: int64(len(b))}, answers: answers}
		for _, a := range answers {
			f.newest = later(f.newest, a.At)
		}
		l.floor = later(l.floor, f.newest)
		files = append(files, f)
		l.id = id
	}
	if !l.floor.IsZero() {
		// Files left by a crash: what passed after their last clock mark
		// is lost, and counts as clockEvery (see lifeLocked).
		l.floor = l.floor.Add(clockEvery)
	}
	life := later(now.Round(0), l.floor)
	var kept []keptAnswer
	for _, f := range files {
		file, newest := f.file, f.newest
		for _, a := range f.answers {
			if born, live := readBack(now, life, a.At, ttl); live {
				kept = append(kept, a) // restore reads its age back
				if a.Status == eraseStatus {
					a.born = born
					file.marks = append(file.marks, a)
				}
			}
		}
		file.newest, _ = readBack(now, life, newest, ttl)
		l.closed = append(l.closed, file)
	}
	if err := l.begin(); err != nil {
		l.failed = true
		l.stopped.Store(true)
		return l, kept, err // what was read is still given back
	}
	l.retainFiles(now, false)
	return l, kept, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (l *answerLog) path(id uint64) string {
	return filepath.Join(l.dir, fmt.Sprintf("%020d%s", id, answerSuffix))
}

// begin opens the next file. l.fileMu held (or l not yet shared).
func (l *answerLog) begin() error {
	f, err := os.OpenFile(l.path(l.id+1), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	l.id++
	l.f, l.size, l.newest, l.marks = f, 0, time.Time{}, nil
	return nil
}

// append adds a to what the next flush writes, unless its record would be
// larger than maxAnswerBytes: read back, it would end its file as a
// damaged record does, and every answer after it in the file would be lost
// with it. Such an answer (a batch's, under a --max-body-bytes past 64 MiB)
// is kept in memory only.
func (l *answerLog) append(a keptAnswer) {
	if answerPayload(a) > maxAnswerBytes || l.stopped.Load() {
		return
	}
	l.mu.Lock()
	l.pending = appendAnswer(l.pending, a)
	if a.Status == eraseStatus {
		l.pendingMarks = append(l.pendingMarks, a)
	}
	l.mu.Unlock()
}

// flush writes what append added since the last flush to the open file,
// synced if sync, and begins a new file past the segment's size. A failure
// stops the log (logged once): the answers are still kept in memory.
func (l *answerLog) flush(now time.Time, sync bool) {
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	l.mu.Lock()
	buf, marks := l.pending, l.pendingMarks
	l.pending, l.spare, l.pendingMarks = l.spare[:0], nil, nil
	l.mu.Unlock()
	defer func() { l.spare = buf[:0] }()
	if len(buf) == 0 || l.failed || l.f == nil {
		return
	}
	if _, err := l.f.Write(buf); err != nil {
		l.fail("a write", err)
		return
	}
	l.size += int64(len(buf))
	l.newest = later(l.newest, now)
	l.marks = append(l.marks, marks...)
	if sync || l.size >= l.segment {
		if err := l.f.Sync(); err != nil {
			l.fail("a sync", err)
			return
		}
	}
	if l.size >= l.segment {
		l.f.Close()
		l.closed = append(l.closed, answerFile{id: l.id, size: l.size, newest: l.newest, marks: l.marks})
		if err := l.begin(); err != nil {
			l.f = nil
			l.fail("a new file", err)
			return
		}
		l.retain(now)
	}
}

// writeMark writes what append added, an erase mark last, before it
// returns. If the log has stopped, the mark cannot be written, and the
// files would give the erased user's answers written before back to a
// start after a crash: it deletes them all (dropFiles).
func (l *answerLog) writeMark(now time.Time) {
	l.flush(now, l.sync)
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	if l.failed {
		l.dropFiles()
	}
}

// dropFiles deletes the files of a log that has stopped. l.fileMu held.
func (l *answerLog) dropFiles() {
	if l.f != nil {
		l.f.Close()
		l.closed = append(l.closed, answerFile{id: l.id})
		l.f = nil
	}
	var err error
	for _, f := range l.closed {
		if rerr := os.Remove(l.path(f.id)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	l.closed = nil
	if err != nil {
		l.logger.Error("seenapi: an erase cannot write its mark in the stopped log of answers kept for retries, nor delete its files; "+
			"a start after a crash could give the erased user's answers again: delete them before the next start", "dir", l.dir, "err", err)
		return
	}
	if !l.dropped {
		l.dropped = true
		l.logger.Warn("seenapi: an erase cannot write its mark in the stopped log of answers kept for retries: its files are deleted, "+
			"so that no start after a crash gives the erased user's answers again", "dir", l.dir)
	}
}

func (l *answerLog) fail(what string, err error) {
	l.failed = true
	l.stopped.Store(true)
	l.logger.Error("seenapi: the log of answers kept for retries stopped at "+what+"; the answers stay in memory only, and a crash would lose them",
		"dir", l.dir, "err", err)
}

// retain deletes the closed files whose answers are all past their time to
// live, then the oldest while the newer closed files hold the budget
// without it. The erase marks of a file it deletes that are within their
// time to live are written to the open file first: the answers they void
// may be older than the file (in the snapshot of a graceful stop), and
// the newer files may not push them out of the budget (their answers
// erased too, say). So are the answers of a file that goes for the budget
// that memory still keeps (kept): another caller's than the one whose
// answers filled the budget. l.fileMu held, l.f open.
func (l *answerLog) retain(now time.Time) { l.retainFiles(now, true) }

// retainFiles is retain, past the budget too if budget. l.fileMu held
// (or l not yet shared), l.f open.
func (l *answerLog) retainFiles(now time.Time, budget bool) {
	var total int64
	for _, f := range l.closed {
		total += f.size
	}
	keep := l.closed[:0]
	for i, f := range l.closed {
		// Past the budget means the newer files hold the budget without
		// this one: memory, which counts more bytes an answer than a
		// record takes, cannot hold more of the answers of the caller
		// that fills it than they do. Once a file is kept, the rest are
		// newer: the files it counts then are older, and a small newest
		// one (left by a crash) would go before them.
		expired := now.Sub(f.newest) >= l.ttl
		over := budget && total-f.size >= l.budget
		if !expired && !over {
			budget = false
		}
		if expired || over {
			var answers []keptAnswer
			if !expired {
				answers = l.keptIn(f)
			}
			if !l.carry(f.marks, answers, now) {
				keep = append(keep, l.closed[i])
				continue
			}
			if err := os.Remove(l.path(f.id)); err != nil && !errors.Is(err, os.ErrNotExist) {
				l.logger.Warn("seenapi: cannot delete an old file of answers kept for retries", "err", err)
			}
			total -= f.size
			continue
		}
		keep = append(keep, l.closed[i])
	}
	clear(l.closed[len(keep):])
	l.closed = keep
}

// keptIn returns the answers of the closed file f that memory keeps as
// they were. A file that does not read now has none. l.fileMu held.
func (l *answerLog) keptIn(f answerFile) []keptAnswer {
	if l.kept == nil {
		return nil
	}
	b, err := os.ReadFile(l.path(f.id))
	if err != nil {
		return nil
	}
	answers, _ := decodeAnswers(b)
	answers = slices.DeleteFunc(answers, func(a keptAnswer) bool { return a.Status == eraseStatus })
	if len(answers) == 0 {
		return nil
	}
	return l.kept(answers)
}

// carry writes the marks within their time to live and answers to the
// open file (synced if the log is), and reports whether it did (or had
// none to write). l.fileMu held.
func (l *answerLog) carry(marks, answers []keptAnswer, now time.Time) bool {
	var buf []byte
	var live []keptAnswer
	for _, m := range marks {
		if now.Sub(m.born) < l.ttl {
			buf = appendAnswer(buf, m)
			live = append(live, m)
		}
	}
	for _, a := range answers {
		buf = appendAnswer(buf, a)
	}
	if len(buf) == 0 {
		return true
	}
	if l.f == nil || l.failed {
		return false
	}
	if _, err := l.f.Write(buf); err != nil {
		l.fail("a write", err)
		return false
	}
	l.size += int64(len(buf))
	l.newest = later(l.newest, now)
	l.marks = append(l.marks, live...)
	if l.sync {
		if err := l.f.Sync(); err != nil {
			l.fail("a sync", err)
			return false
		}
	}
	return true
}

// close closes the open file, and deletes every file if remove (a
// snapshot holds their answers).
func (l *answerLog) close(remove bool) error {
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	var err error
	if l.f != nil {
		err = l.f.Close()
		l.closed = append(l.closed, answerFile{id: l.id, size: l.size, newest: l.newest, marks: l.marks})
		l.f = nil
	}
	l.failed = true // no more writes
	l.stopped.Store(true)
	if remove {
		for _, f := range l.closed {
			if rerr := os.Remove(l.path(f.id)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
		l.closed = nil
	}
	return err
}

// answerPayload is the length of a's record after its header.
func answerPayload(a keptAnswer) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(len(a.Key))) + len(a.Key) + 16 +
		binary.PutUvarint(b[:], uint64(a.Status)) + 8 + len(a.Body)
}

// appendAnswer appends a's record to dst.
func appendAnswer(dst []byte, a keptAnswer) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, answerHeader)...)
	dst = binary.AppendUvarint(dst, uint64(len(a.Key)))
	dst = append(dst, a.Key...)
	dst = binary.LittleEndian.AppendUint64(dst, a.Request.Hi)
	dst = binary.LittleEndian.AppendUint64(dst, a.Request.Lo)
	dst = binary.AppendUvarint(dst, uint64(a.Status))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(a.At.UnixNano()))
	dst = append(dst, a.Body...)
	p := dst[start+answerHeader:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(p)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(p, answerCRC))
	return dst
}

// decodeAnswers reads b's records up to the first damaged or cut one, and
// reports whether it read them all.
func decodeAnswers(b []byte) ([]keptAnswer, bool) {
	var out []keptAnswer
	for len(b) > 0 {
		if len(b) < answerHeader {
			return out, false
		}
		n := int(binary.LittleEndian.Uint32(b))
		if n > maxAnswerBytes || len(b)-answerHeader < n {
			return out, false
		}
		p := b[answerHeader : answerHeader+n]
		if crc32.Checksum(p, answerCRC) != binary.LittleEndian.Uint32(b[4:]) {
			return out, false
		}
		a, ok := decodeAnswer(p)
		if !ok {
			return out, false
		}
		out = append(out, a)
		b = b[answerHeader+n:]
	}
	return out, true
}

func decodeAnswer(p []byte) (keptAnswer, bool) {
	kl, n := binary.Uvarint(p)
	if n <= 0 || kl > uint64(len(p)-n) {
		return keptAnswer{}, false
	}
	p = p[n:]
	key := string(p[:kl])
	p = p[kl:]
	if len(p) < 16 {
		return keptAnswer{}, false
	}
	req := xxh3.Uint128{Hi: binary.LittleEndian.Uint64(p), Lo: binary.LittleEndian.Uint64(p[8:])}
	p = p[16:]
	status, n := binary.Uvarint(p)
	if n <= 0 || len(p)-n < 8 {
		return keptAnswer{}, false
	}
	p = p[n:]
	at := time.Unix(0, int64(binary.LittleEndian.Uint64(p)))
	body := append([]byte(nil), p[8:]...)
	return keptAnswer{Key: key, Request: req, Status: int(status), Body: body, At: at}, true
}

// nextMark begins the log's next flush: it returns the mark below which
// every keyed call's answer is appended by now (that of the earliest call
// in flight, or the next), and moves the mark on, so that the journal
// records made from now on are past it. An answer appended later than the
// flush's take is written by the next. Under r.mu, as finish appends.
func (r *replays) nextMark() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.mark.Load() + 1
	upTo := next
	for _, p := range r.inFlight {
		upTo = min(upTo, p.mark)
	}
	r.mark.Store(next)
	return upTo
}

// answerMarks tells the hot set which keyed calls' answers the log has
// written (eviction.AnswerLog): it leaves their journal records in the
// journal until then.
type answerMarks struct {
	r *replays
	l *answerLog
}

func (m answerMarks) Mark() uint64 { return m.r.mark.Load() }

func (m answerMarks) Written() uint64 {
	if m.l.stopped.Load() {
		return math.MaxUint64 // it writes no more: holding records would not help
	}
	return m.l.upTo.Load()
}

// errAnswerLogOpen is OpenAnswerLog's when one is open already.
var errAnswerLogOpen = errors.New("api: the answers log is open already")

// OpenAnswerLog makes the answers kept for Idempotency-Key retries outlive
// a crash: it reads back those dir's files hold (the answers given before
// a crash, within their time to live and the budget), and from now on
// writes the answers given every interval, synced to the disk if sync.
// The hot set keeps a keyed call's journal record until the file holds its
// answer (HotSet.SetAnswerLog); with the interval shorter than its wait
// before it writes a changed user back (its flush interval), it need not
// write the user again to do so. It returns how many answers it
// read back. Call it before serving; CloseAnswerLog stops it.
//
// The answers already kept (LoadReplays' of a graceful stop's snapshot)
// are written to the new file before it returns, synced: from then on the
// files hold every answer a start after a crash may give, and the snapshot
// may be deleted. It must be, since only the files can void what an erase
// drops (their erase marks, or their deletion by a log that has stopped).
func (s *Server) OpenAnswerLog(dir string, sync bool, interval time.Duration) (int, error) {
	if s.replays.log != nil {
		return 0, errAnswerLogOpen
	}
	if interval <= 0 {
		return 0, fmt.Errorf("%w: the answers log's interval %v is not positive", ErrBadConfig, interval)
	}
	loaded := s.replays.answers() // from a snapshot
	l, read, err := openAnswerLog(dir, s.cfg.IdempotencyBytes, s.cfg.IdempotencyTTL, s.cfg.Now(), s.cfg.Logger, sync)
	// The erase marks void the answers of erased users given before them,
	// read back from the log or already kept (from the snapshot of a
	// graceful stop that a crash left in place).
	marks := erasedMarks{}
	kept := read[:0]
	for _, a := range read {
		if !marks.add(a) {
			a.users, a.failed = answerUsers(a.Key, a.Body)
			a.read = true
			kept = append(kept, a)
		}
	}
	kept = slices.DeleteFunc(kept, func(a keptAnswer) bool { return marks.void(a.Key, a.At, a.users) })
	var floor time.Time
	if l != nil {
		floor = l.floor
	}
	n := s.replays.restore(kept, floor)
	s.replays.dropErased(marks)
	if l != nil {
		// Stopped if err: an erase then deletes its files.
		s.replays.mu.Lock()
		s.replays.log = l
		s.replays.mu.Unlock()
	}
	if err != nil {
		return n, err
	}
	// Memory holds what was read back, shared between callers: the files
	// past the budget go now, their answers that memory keeps written again.
	l.fileMu.Lock()
	l.kept = s.replays.keptOf
	if l.f != nil && !l.failed {
		l.retain(s.cfg.Now())
	}
	l.fileMu.Unlock()
	if len(loaded) > 0 {
		for _, a := range s.replays.keptOf(loaded) {
			l.append(a)
		}
		l.flush(s.cfg.Now(), true)
	}
	// The write-back leaves a keyed call's journal record until the log
	// has written its answer, however late this writer comes round.
	if s.hot != nil {
		s.hot.SetAnswerLog(answerMarks{r: s.replays, l: l})
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	s.logStop = func() { close(done); <-stopped }
	go func() {
		defer close(stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.replays.noteClock()
				upTo := s.replays.nextMark()
				l.flush(s.cfg.Now(), sync)
				l.upTo.Store(upTo)
			case <-done:
				return
			}
		}
	}()
	return n, nil
}

// CloseAnswerLog writes what is left and closes the answers log, after the
// last call is answered; with remove (SaveReplays saved the answers) it
// deletes its files instead.
func (s *Server) CloseAnswerLog(remove bool) error {
	l := s.replays.log
	if l == nil || s.logStop == nil {
		return nil
	}
	s.logStop()
	s.logStop = nil
	if !remove {
		l.flush(s.cfg.Now(), true)
	}
	return l.close(remove)
}
