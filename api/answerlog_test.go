package api

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
	"github.com/zeebo/xxh3"
)

func testAnswer(i int, at time.Time, body int) keptAnswer {
	return keptAnswer{Key: fmt.Sprintf("caller\x00/v1/namespaces/default/users/u%d/filter\x00key-%d", i, i),
		Request: xxh3.Uint128{Hi: uint64(i), Lo: ^uint64(i)}, Status: 200,
		Body: bytes.Repeat([]byte{byte('a' + i%26)}, body), At: at}
}

func logFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"+answerSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// What a log wrote is read back whole after a crash (no close), a record
// cut by the crash ends its file with a warning, and the next file begins
// after it.
func TestAnswerLogReadsBackWhatItWroteUpToATornRecord(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	var logged bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	l, kept, err := openAnswerLog(dir, 1<<20, time.Minute, now, logger, false)
	if err != nil || len(kept) != 0 {
		t.Fatalf("a new log: %v %v", kept, err)
	}
	var want []keptAnswer
	for i := range 3 {
		a := testAnswer(i, now.Add(time.Duration(i)*time.Second), 100+i)
		l.append(a)
		want = append(want, a)
	}
	l.flush(now.Add(3*time.Second), false)
	// A fourth record, cut short by the crash.
	torn := appendAnswer(nil, testAnswer(3, now, 50))
	f, err := os.OpenFile(l.path(l.id), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(torn[:len(torn)-7])
	f.Close()

	l2, kept, err := openAnswerLog(dir, 1<<20, time.Minute, now.Add(10*time.Second), logger, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range kept {
		kept[i].At = kept[i].At.UTC()
		want[i].At = want[i].At.UTC()
	}
	if !reflect.DeepEqual(kept, want) {
		t.Fatalf("read back %d answers:\n%v\nwant %d:\n%v", len(kept), kept, len(want), want)
	}
	if !bytes.Contains(logged.Bytes(), []byte("ends in a damaged record")) {
		t.Errorf("no warning of the torn record: %s", logged.String())
	}
	if l2.id != l.id+1 || len(logFiles(t, dir)) != 2 {
		t.Errorf("the next file is %d after %d; files %v", l2.id, l.id, logFiles(t, dir))
	}
}

// An answer whose record would be larger than a record may be read back
// is not written: read back, it would end its file, and the answers after
// it would be lost with it.
func TestAnswerLogLeavesOutAnAnswerLargerThanARecordReadsBack(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	logger := slog.New(slog.DiscardHandler)
	l, _, err := openAnswerLog(dir, 1<<30, time.Minute, now, logger, false)
	if err != nil {
		t.Fatal(err)
	}
	huge := testAnswer(0, now, 0)
	huge.Body = make([]byte, maxAnswerBytes)
	fits := testAnswer(1, now, 100)
	if n := answerPayload(fits); n != len(appendAnswer(nil, fits))-answerHeader {
		t.Fatalf("answerPayload %d, the record's payload %d", n, len(appendAnswer(nil, fits))-answerHeader)
	}
	l.append(huge)
	l.append(fits)
	l.flush(now, false)
	if err := l.close(false); err != nil {
		t.Fatal(err)
	}
	_, kept, err := openAnswerLog(dir, 1<<30, time.Minute, now, logger, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0].Key != fits.Key {
		keys := make([]string, len(kept))
		for i, a := range kept {
			keys[i] = strings.ReplaceAll(a.Key, "\x00", " ")
		}
		t.Fatalf("read back %d answers %q, want the one after the answer too large for a record", len(kept), keys)
	}
}

// Answers past their time to live are not read back, and a file holding
// none within it is deleted.
func TestAnswerLogDropsAnswersPastTheirTimeToLive(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	logger := slog.New(slog.DiscardHandler)
	l, _, err := openAnswerLog(dir, 1<<20, time.Minute, now, logger, false)
	if err != nil {
		t.Fatal(err)
	}
	l.append(testAnswer(1, now, 10))
	l.append(testAnswer(2, now.Add(50*time.Second), 10))
	l.flush(now.Add(50*time.Second), false)
	old := l.path(l.id)

	_, kept, err := openAnswerLog(dir, 1<<20, time.Minute, now.Add(70*time.Second), logger, false)
	if err != nil || len(kept) != 1 || kept[0].Key != testAnswer(2, now, 0).Key {
		t.Fatalf("70 s on: %v %v, want the second answer alone", kept, err)
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("the file with an answer still live is gone: %v", err)
	}
	_, kept, err = openAnswerLog(dir, 1<<20, time.Minute, now.Add(2*time.Minute), logger, false)
	if err != nil || len(kept) != 0 {
		t.Fatalf("2 min on: %v %v, want none", kept, err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the file past its time to live stays: %v", err)
	}
}

// The files hold at most the budget of answers besides the open file: the
// oldest go first, and the latest are read back.
func TestAnswerLogKeepsTheLatestWithinTheBudget(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	const budget = 512 << 10 // files of 64 KiB
	l, _, err := openAnswerLog(dir, budget, time.Hour, now, slog.New(slog.DiscardHandler), false)
	if err != nil {
		t.Fatal(err)
	}
	const n, body = 600, 4000 // 2.4 MB written
	for i := range n {
		l.append(testAnswer(i, now, body))
		l.flush(now, false)
	}
	var total int64
	for _, f := range logFiles(t, dir) {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		total += st.Size()
	}
	if total > budget+l.segment+body+100 {
		t.Errorf("the files hold %d bytes; budget %d and a file of %d", total, budget, l.segment)
	}
	_, kept, err := openAnswerLog(dir, budget, time.Hour, now, slog.New(slog.DiscardHandler), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) < budget/(body+200) || kept[len(kept)-1].Key != testAnswer(n-1, now, 0).Key {
		t.Fatalf("read back %d answers, the last %q; want at least %d, the last %q",
			len(kept), kept[len(kept)-1].Key, budget/(body+200), testAnswer(n-1, now, 0).Key)
	}
	if kept[0].Key == testAnswer(0, now, 0).Key {
		t.Errorf("the oldest answer is still there past the budget")
	}
}

// Closing with remove deletes every file; without, they stay for the next
// start. A closed log writes nothing more.
func TestAnswerLogCloseRemovesItsFilesWhenAsked(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, remove := range []bool{false, true} {
		dir := t.TempDir()
		l, _, err := openAnswerLog(dir, 1<<20, time.Hour, now, slog.New(slog.DiscardHandler), false)
		if err != nil {
			t.Fatal(err)
		}
		l.append(testAnswer(1, now, 10))
		l.flush(now, false)
		if err := l.close(remove); err != nil {
			t.Fatal(err)
		}
		l.append(testAnswer(2, now, 10)) // after the close: dropped
		l.flush(now, false)
		_, kept, err := openAnswerLog(dir, 1<<20, time.Hour, now, slog.New(slog.DiscardHandler), false)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 1, true: 0}[remove]; len(kept) != want {
			t.Errorf("close(%v): %d answers read back, want %d", remove, len(kept), want)
		}
	}
}

// Damage anywhere in a file never fails the start nor panics: the records
// before it are read back.
func TestAnswerLogSurvivesDamage(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var clean []byte
	for i := range 20 {
		clean = appendAnswer(clean, testAnswer(i, now, 30+i))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := bytes.Clone(clean)
		for range 1 + rng.IntN(3) {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		}
		got, _ := decodeAnswers(b[:rng.IntN(len(b)+1)])
		for i, a := range got {
			if want := testAnswer(i, now, 30+i); a.Key != want.Key || !bytes.Equal(a.Body, want.Body) {
				// A flip the CRC misses would be one in 2^32.
				t.Fatalf("answer %d read back as %q, want %q", i, a.Key, want.Key)
			}
		}
	}
}

// newTestServer is a server over a hot set of its own (the default
// namespace) on a store in a temp dir, closed when the test ends.
func newTestServer(t *testing.T) *Server {
	t.Helper()
	return newTestServerOf(t, Config{})
}

// newTestServerOf is newTestServer with cfg (its Logger set).
func newTestServerOf(t *testing.T, cfg Config) *Server {
	t.Helper()
	store, err := storage.Open(storage.DefaultOptions(t.TempDir()).WithMinFreeBytes(-1).WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	hot, err := eviction.New(store, []eviction.Namespace{{Name: "default", Profile: userfilter.DefaultProfile()}},
		eviction.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hot.Close(); store.Close() })
	cfg.Logger = slog.New(slog.DiscardHandler)
	srv, err := New(hot, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// A server's keyed answer reaches the log within its interval, without a
// close (a crash), and another server over the same directory answers the
// call's retry with it; a dry run's answer too, which no journal holds.
func TestAnswerLogOfAServerAnswersRetriesAfterACrash(t *testing.T) {
	dir := t.TempDir()
	serve := func() *Server { return newTestServer(t) }
	call := func(srv *Server, body string) (int, string, string) {
		req := httptest.NewRequest("POST", "/v1/namespaces/default/users/u/filter", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderIdempotencyKey, "key-"+fmt.Sprint(len(body)))
		resp, err := srv.App().Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get(HeaderReplayed), string(b)
	}
	one, dry := `{"candidates":["a","b","c"],"limit":1}`, `{"candidates":["x","y"],"record":"none"}`
	first := serve()
	if _, err := first.OpenAnswerLog(dir, false, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	_, _, a1 := call(first, one)
	_, _, a2 := call(first, dry)
	if _, err := first.OpenAnswerLog(dir, false, time.Second); err == nil {
		t.Errorf("a second log opened on the same server")
	}
	AnswersLogged(t, first) // no close

	second := serve()
	n, err := second.OpenAnswerLog(dir, false, 10*time.Millisecond)
	if err != nil || n != 2 {
		t.Fatalf("read back %d answers, %v; want 2", n, err)
	}
	defer second.CloseAnswerLog(true)
	for body, want := range map[string]string{one: a1, dry: a2} {
		if status, replayed, got := call(second, body); status != 200 || replayed != "true" || got != want {
			t.Errorf("retry of %s: %d replayed=%q %s; want %s", body, status, replayed, got, want)
		}
	}
	first.CloseAnswerLog(false)
}

// A write that fails stops the log, logged once; nothing else fails.
func TestAnswerLogStopsOnAFailedWrite(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var logged bytes.Buffer
	l, _, err := openAnswerLog(t.TempDir(), 1<<20, time.Hour, now, slog.New(slog.NewTextHandler(&logged, nil)), false)
	if err != nil {
		t.Fatal(err)
	}
	l.f.Close() // the next write fails, as on a disk gone bad
	for i := range 3 {
		l.append(testAnswer(i, now, 10))
		l.flush(now, false)
	}
	if n := bytes.Count(logged.Bytes(), []byte("stopped at a write")); n != 1 || !l.failed {
		t.Fatalf("logged %d times, failed %v: %s", n, l.failed, logged.String())
	}
	if len(l.pending) != 0 {
		t.Errorf("%d bytes pending after the log stopped", len(l.pending))
	}
}

// With a budget of one file or less, the files still hold what memory
// does: the file just closed stays, and an older one goes only once the
// newer hold the budget without it.
func TestAnswerLogHoldsTheBudgetWhenItIsOneFile(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	const budget, body = 64 << 10, 1400
	l, _, err := openAnswerLog(dir, budget, time.Hour, now, slog.New(slog.DiscardHandler), false)
	if err != nil {
		t.Fatal(err)
	}
	r := newReplays(budget, time.Hour, func() time.Time { return now })
	const n = 290
	for i := range n {
		a := testAnswer(i, now, body)
		p, _ := r.begin(a.Key, a.Request)
		r.finish(a.Key, p, 200, a.Body, false, time.Time{})
		l.append(a)
		l.flush(now, false)
	}
	inMemory, _ := r.usage()
	_, kept, err := openAnswerLog(dir, budget, time.Hour, now, slog.New(slog.DiscardHandler), false)
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	for _, a := range kept {
		read[a.Key] = true
	}
	for _, a := range r.answers() {
		if !read[a.Key] {
			t.Fatalf("memory holds %d answers; the files lack %q (%d read back)", inMemory, a.Key, len(kept))
		}
	}
}

// A file that does not read (here a directory in its place) costs its own
// answers only: the others are read back and the log goes on.
func TestAnswerLogSkipsAFileThatDoesNotRead(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	l, _, err := openAnswerLog(dir, 1<<20, time.Hour, now, slog.New(slog.DiscardHandler), false)
	if err != nil {
		t.Fatal(err)
	}
	l.append(testAnswer(1, now, 10))
	l.flush(now, false)
	if err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("%020d%s", 0, answerSuffix)), 0o755); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	l2, kept, err := openAnswerLog(dir, 1<<20, time.Hour, now, slog.New(slog.NewTextHandler(&logged, nil)), false)
	if err != nil || l2 == nil || len(kept) != 1 {
		t.Fatalf("%d answers read back, log %v, %v; want 1 and a log", len(kept), l2 != nil, err)
	}
	if !bytes.Contains(logged.Bytes(), []byte("does not read")) {
		t.Errorf("no warning: %s", logged.String())
	}
}

// A file read back ages from the read, on the monotonic clock, not from
// its latest stamp, a wall time: one whose stamps are ahead of the clock
// (stepped back since) goes once its answers are past their time to live
// from the read (less the clockEvery a crash counts), not after that and
// the step, and its answers are not read back again by the start after
// the next crash.
func TestAnswerLogFileReadBackAgesFromTheRead(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.DiscardHandler)
	ahead := time.Now().Add(time.Hour)
	first, _, err := openAnswerLog(dir, 1<<20, time.Minute, ahead, logger, false)
	if err != nil {
		t.Fatal(err)
	}
	first.append(testAnswer(1, ahead, 10))
	first.flush(ahead, false)
	first.close(false) // a crash, once the answer was written
	old := first.path(first.id)

	now := time.Now() // the clock stepped back an hour
	second, read, err := openAnswerLog(dir, 1<<20, time.Minute, now, logger, false)
	if err != nil || len(read) != 1 {
		t.Fatalf("read back %d answers, %v; want 1", len(read), err)
	}
	defer second.close(true)
	second.fileMu.Lock()
	second.retain(now.Add(time.Minute - clockEvery - time.Second))
	second.fileMu.Unlock()
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("the file read back went within its answers' time to live: %v", err)
	}
	second.fileMu.Lock()
	second.retain(now.Add(time.Minute - clockEvery))
	second.fileMu.Unlock()
	if _, err := os.Stat(old); err == nil {
		t.Errorf("a minute after it was read back, the file is still there: a crash would give its answers again")
	}
}

// After a crash, an answer stamped ahead of the clock (which has stepped
// back since) is given for its time to live from the start that read it
// back, not for that and the step.
func TestAnAnswerReadBackAheadOfTheClockLivesItsTimeToLive(t *testing.T) {
	dir := t.TempDir()
	const body = `{"candidates":["a","b"],"limit":1}`
	first := newTestServerOf(t, Config{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	if _, err := first.OpenAnswerLog(dir, false, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	keyedCall(t, first, "u", "k-u", body)
	AnswersLogged(t, first)     // the answer is in its file
	first.CloseAnswerLog(false) // as a crash: the files stay

	second := newTestServerOf(t, Config{IdempotencyTTL: 2 * time.Second})
	if _, err := second.OpenAnswerLog(dir, false, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	defer second.CloseAnswerLog(true)
	if _, replayed := keyedCall(t, second, "u", "k-u", body); !replayed {
		t.Fatal("after a crash, the retry was served anew; want the answer read back")
	}
	time.Sleep(2500 * time.Millisecond)
	if _, replayed := keyedCall(t, second, "u", "k-u", body); replayed {
		t.Errorf("past its time to live from the read, the answer read back was given again (stamped an hour ahead, it lived the hour too)")
	}
}

// An answer lives its time to live from when it was given in total, across
// restarts, whatever the wall clock does: stamped an hour ahead of a clock
// set back since, it is read back at a first start (after a crash), given
// for 40 s, and read back again at a second start, after a crash or a
// graceful stop, as the 40 s older it is, not as new again: 20 s on it is
// past its minute.
func TestAnAnswerLivesItsTimeToLiveInTotalAcrossRestarts(t *testing.T) {
	const body = `{"candidates":["a","b"],"limit":1}`
	for _, graceful := range []bool{false, true} {
		t.Run(fmt.Sprint("graceful=", graceful), func(t *testing.T) {
			dir := t.TempDir()
			ahead := func() time.Time { return time.Now().Add(time.Hour) }
			first := newTestServerOf(t, Config{Now: ahead, IdempotencyTTL: time.Minute})
			if _, err := first.OpenAnswerLog(dir, false, 5*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			keyedCall(t, first, "u", "k-u", body)
			AnswersLogged(t, first)
			first.CloseAnswerLog(false) // as a crash: the files stay

			var offset atomic.Int64 // the clock, set back an hour, moves on by offset
			clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
			second := newTestServerOf(t, Config{Now: clock, IdempotencyTTL: time.Minute})
			if _, err := second.OpenAnswerLog(dir, false, 5*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if _, replayed := keyedCall(t, second, "u", "k-u", body); !replayed {
				t.Fatal("after the first crash, the retry was served anew; want the answer read back")
			}
			offset.Store(int64(40 * time.Second))
			var snapshot bytes.Buffer
			if graceful {
				if _, err := second.SaveReplays(&snapshot); err != nil {
					t.Fatal(err)
				}
				second.CloseAnswerLog(true)
			} else {
				clockNoted(t, dir, 40*time.Second) // by the log's ticker, every clockEvery
				second.CloseAnswerLog(false)       // as a crash
			}

			third := newTestServerOf(t, Config{Now: clock, IdempotencyTTL: time.Minute})
			if graceful {
				if _, err := third.LoadReplays(&snapshot); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := third.OpenAnswerLog(dir, false, 5*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			defer third.CloseAnswerLog(true)
			if _, replayed := keyedCall(t, third, "u", "k-u", body); !replayed {
				t.Fatal("after the second restart, 40 s into its minute, the retry was served anew; want the answer read back")
			}
			offset.Store(int64(60 * time.Second))
			if _, replayed := keyedCall(t, third, "u", "k-u", body); replayed {
				t.Errorf("60 s after the first start read it back, the answer was given again: each start gave it its time to live anew")
			}
		})
	}
}

// clockNoted waits until the answers log in dir holds a clock mark d or
// more after its first answer.
func clockNoted(t *testing.T, dir string, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		var first, clock time.Time
		for _, f := range logFiles(t, dir) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			answers, _ := decodeAnswers(b)
			for _, a := range answers {
				switch {
				case a.Status == 200 && first.IsZero():
					first = a.At
				case a.Status == clockStatus:
					clock = later(clock, a.At)
				}
			}
		}
		if !first.IsZero() && !clock.Before(first.Add(d)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no clock mark %v after the first answer in a minute (the latest %v, the answer %v)", d, clock, first)
		}
	}
}

// The budget lets the oldest files go, never a newer one before an older:
// the small file a crash left open, newest of all, stays however much the
// older files hold, and its answers are read back.
func TestAnswerLogKeepsTheNewestFileOfACrash(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	const budget, body = 512 << 10, 4000 // files of 64 KiB
	logger := slog.New(slog.DiscardHandler)
	l, _, err := openAnswerLog(dir, budget, time.Hour, now, logger, false)
	if err != nil {
		t.Fatal(err)
	}
	// Answers until the first of a file past the budget's worth of them.
	n := 0
	for ; int64(l.id) <= budget/l.segment+2 || l.size == 0; n++ {
		l.append(testAnswer(n, now, body))
		l.flush(now, false)
	}
	l.close(false) // a crash: the open file, of one answer, stays
	second, _, err := openAnswerLog(dir, budget, time.Hour, now, logger, false)
	if err != nil {
		t.Fatal(err)
	}
	second.fileMu.Lock()
	second.retain(now) // as OpenAnswerLog does once memory holds what was read
	second.fileMu.Unlock()
	second.close(false)
	_, kept, err := openAnswerLog(dir, budget, time.Hour, now, logger, false)
	if err != nil {
		t.Fatal(err)
	}
	if last := testAnswer(n-1, now, 0).Key; len(kept) == 0 || kept[len(kept)-1].Key != last {
		t.Fatalf("after the start, %d answers read back, none the last one %q: the newest file went for the budget", len(kept), last)
	}
}

// The answers the journal alone holds age in the time answers are stamped
// in, as those of the log do. A start reads back a log stamped an hour
// ahead of its clock (set back since): its answers are stamped an hour
// ahead too. One given just before a crash, in the journal only, is read
// back after it as a second old, not as an hour old (the record's own time
// is the clock's); given to a retry 30 s on, and kept by the API since,
// it is past its minute 60 s on.
func TestAJournaledAnswerAgesInTheTimeOfTheAnswersAcrossAClockSetBack(t *testing.T) {
	second, want, offset := journaledAheadThenCrashed(t)
	const body = journaledBody
	resp, err := second.App().Test(httptest.NewRequest("GET", "/v1/namespaces/default/users/journaled", nil), -1)
	if err != nil { // the user loaded, its journal's answer read back
		t.Fatal(err)
	}
	resp.Body.Close()
	offset.Store(int64(30 * time.Second))
	if got, replayed := keyedCallBody(t, second, "journaled", "k-journaled", body); !replayed || got != want {
		t.Fatalf("after the crash, the retry got %s (replayed %v); want %s again (read back as an hour old?)", got, replayed, want)
	}
	// Kept by the API since the retry, it still ages from when it was given.
	offset.Store(int64(time.Minute))
	if _, replayed := keyedCallBody(t, second, "journaled", "k-journaled", body); replayed {
		t.Errorf("a minute after the start read it back, the journaled answer was given again")
	}
}

// The hot set reads the journal's answers back in the time answers are
// stamped in (api.New hands it the API's clock: SetReplyClock), not by the
// wall clock alone. With that time an hour ahead of the clock (set back
// since a log was stamped), a keyed call is journaled an hour ahead; after
// a crash, read back 40 s after the call, it is 40 s old. By the wall
// clock it was stamped in the future, as old as the read, and lived a
// whole minute from there.
func TestAJournaledAnswerReadBackLateIsAsOldAsItIsAcrossAClockSetBack(t *testing.T) {
	second, want, offset := journaledAheadThenCrashed(t)
	const body = journaledBody
	offset.Store(int64(40 * time.Second))
	// The retry loads the user: its journal's answer is read back now.
	if got, replayed := keyedCallBody(t, second, "journaled", "k-journaled", body); !replayed || got != want {
		t.Fatalf("40 s after the call, after the crash, the retry got %s (replayed %v); want %s again", got, replayed, want)
	}
	offset.Store(int64(70 * time.Second))
	if got, replayed := keyedCallBody(t, second, "journaled", "k-journaled", body); replayed {
		t.Errorf("70 s after the call, the journaled answer %s was given again: past its minute (aged from its read back 40 s on?)", got)
	}
}

// A keyed call's answer that the log has not written yet (its writer held
// up, as on a loaded machine) stays in the journal past the write-back of
// its user, however long after the hold that comes: a crash then still
// gives the call's retry its answer. The write-back retired the record
// once the hold (the flush interval, at most a second) was over, and the
// retry was served anew, recording the next items.
func TestAKeyedAnswerOutlivesAWriteBackBeforeTheLogWritesIt(t *testing.T) {
	dir, answers := t.TempDir(), t.TempDir()
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	open := func() (*Server, *eviction.HotSet, *storage.Store) {
		return openJournaledWith(t, dir, Config{Now: clock}, eviction.Options{Now: clock, FlushInterval: 10 * time.Second})
	}
	first, hot, store := open()
	// An hour between the log's writes: its writer is late past any hold.
	if _, err := first.OpenAnswerLog(answers, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	want, _ := keyedCallBody(t, first, "u", "k", journaledBody)
	// Past the flush interval and the hold: the next round writes u back.
	offset.Store(int64(30 * time.Second))
	for deadline := time.Now().Add(time.Minute); hot.Stats().FlushedUsers == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("u was not written back in a minute")
		}
	}
	if err := store.Close(); err != nil { // a crash: the log not flushed
		t.Fatal(err)
	}
	second, _, store := open()
	t.Cleanup(func() { store.Close() })
	if _, err := second.OpenAnswerLog(answers, false, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.CloseAnswerLog(true) })
	if got, replayed := keyedCallBody(t, second, "u", "k", journaledBody); !replayed || got != want {
		t.Fatalf("after a write-back and a crash before the log wrote the answer, the retry got %s (replayed %v); want %s again", got, replayed, want)
	}
}

// journaledBody is the one call journaledAheadThenCrashed makes.
const journaledBody = `{"candidates":["a","b"],"limit":1}`

// journaledAheadThenCrashed leaves the answers of a server stamped an
// hour ahead of the clock in a log, then has a server on the clock (set
// back an hour since) read it back and give user journaled's answer
// (returned) under k-journaled, which only the journal holds when the
// server crashes. It returns the server started after the crash, and the
// offset its clock moves on by.
func journaledAheadThenCrashed(t *testing.T) (second *Server, want string, offset *atomic.Int64) {
	t.Helper()
	dir, answers := t.TempDir(), t.TempDir()
	ahead := newTestServerOf(t, Config{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	if _, err := ahead.OpenAnswerLog(answers, false, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	keyedCall(t, ahead, "logged", "k-logged", journaledBody)
	AnswersLogged(t, ahead)
	ahead.CloseAnswerLog(false) // as a crash: the files stay

	offset = new(atomic.Int64) // the clock, set back an hour, moves on by offset
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	cfg := Config{Now: clock, IdempotencyTTL: time.Minute}
	first, _, store := openJournaledWith(t, dir, cfg, eviction.Options{Now: clock, ReplyTTL: time.Minute})
	// An hour between flushes of the log: the answer stays in the journal only.
	if _, err := first.OpenAnswerLog(answers, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	want, _ = keyedCallBody(t, first, "journaled", "k-journaled", journaledBody)
	if err := store.Close(); err != nil { // a crash: nothing written back, the log not flushed
		t.Fatal(err)
	}
	second, _, store = openJournaledWith(t, dir, cfg, eviction.Options{Now: clock, ReplyTTL: time.Minute})
	t.Cleanup(func() { store.Close() })
	if _, err := second.OpenAnswerLog(answers, false, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.CloseAnswerLog(true) })
	return second, want, offset
}

// keyedCallBody is keyedCall that returns the answer's body too.
func keyedCallBody(t *testing.T, srv *Server, user, key, body string) (string, bool) {
	t.Helper()
	return keyedPostOK(t, srv, user, "/v1/namespaces/default/users/"+user+"/filter", key, body, "")
}
