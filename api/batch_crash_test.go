package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
	"github.com/zeebo/xxh3"
)

// A keyed batch's answer outlives a crash in its users' journal records
// alone (the crash came before the log of answers wrote it). The batch
// sent again with its requests in another order is another body, refused
// 422 as before the crash, and records nothing: keyed by their places in
// the batch, its users' calls were looked up under other keys than the
// first batch's, found nothing, and were served anew, each user recording
// the next items.
func TestAKeyedBatchReorderedAfterACrashIsRefused(t *testing.T) {
	dir := t.TempDir()
	open := func() (*Server, *eviction.HotSet, *storage.Store) { return openJournaled(t, dir, Config{}) }
	post := func(srv *Server, path, body string, key string) (int, string, string) {
		t.Helper()
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set(HeaderIdempotencyKey, key)
		}
		resp, err := srv.App().Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get(HeaderReplayed), string(b)
	}
	cands := func(from, to int) string {
		var q []string
		for i := from; i < to; i++ {
			q = append(q, fmt.Sprintf(`"item-%02d"`, i))
		}
		return strings.Join(q, ",")
	}
	a := `{"user":"a","candidates":[` + cands(0, 30) + `],"limit":10}`
	b := `{"user":"b","candidates":[` + cands(30, 60) + `],"limit":5}`
	batch, reordered := `{"requests":[`+a+`,`+b+`]}`, `{"requests":[`+b+`,`+a+`]}`
	const path = "/v1/namespaces/default/filter"

	first, _, store := open()
	status, _, answer := post(first, path, batch, "key-1")
	if status != 200 {
		t.Fatalf("first batch: %d %s", status, answer)
	}
	// A crash: the hot set is never closed, nothing is written back, and
	// no log of answers was open.
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	second, hot, store := open()
	t.Cleanup(func() { hot.Close(); store.Close() })
	if status, _, body := post(second, path, reordered, "key-1"); status != 422 || !strings.Contains(body, "idempotency-key-reused") {
		t.Errorf("the batch reordered after the crash, with its key: %d %s; want 422 idempotency-key-reused", status, body)
	}
	for user, want := range map[string]string{"a": `"items":10`, "b": `"items":5`} {
		req := httptest.NewRequest("GET", "/v1/namespaces/default/users/"+user, nil)
		resp, err := second.App().Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(st), want) {
			t.Errorf("user %s after the reordered batch: %s; want %s, the first batch's", user, st, want)
		}
	}
	if status, replayed, again := post(second, path, batch, "key-1"); status != 200 || replayed != "true" || again != answer {
		t.Errorf("the batch sent again after the crash: %d replayed=%q %s; want the first answer %s", status, replayed, again, answer)
	}
}

// Answers kept for retries are the caller's own after a crash too: another
// API key sending the same Idempotency-Key for the same user and body gets
// a call of its own, neither the answer the journal holds nor the one the
// answers log holds, while the first key's retry gets its answer.
func TestAnotherAPIKeysRetryAfterACrashIsNotGivenTheAnswer(t *testing.T) {
	dir, answers := t.TempDir(), t.TempDir()
	keys := []Key{{Role: RoleWrite, Secret: "secret-of-key-a-0123456789"}, {Role: RoleWrite, Secret: "secret-of-key-b-0123456789"}}
	var store *storage.Store
	open := func() *Server {
		var srv *Server
		srv, _, store = openJournaled(t, dir, Config{Keys: keys})
		if _, err := srv.OpenAnswerLog(answers, false, 5*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		return srv
	}
	post := func(srv *Server, user, secret string) (string, bool) {
		t.Helper()
		req := httptest.NewRequest("POST", "/v1/namespaces/default/users/"+user+"/filter",
			strings.NewReader(`{"candidates":["a","b","c"],"limit":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set(HeaderIdempotencyKey, "the-same-key")
		resp, err := srv.App().Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s by %s: %d %s", user, secret, resp.StatusCode, b)
		}
		return string(b), resp.Header.Get(HeaderReplayed) == "true"
	}
	first := open()
	logged, _ := post(first, "logged", keys[0].Secret)
	AnswersLogged(t, first) // in the answers log's file
	journaled, _ := post(first, "journaled", keys[0].Secret)
	// A crash at once: the second answer is in the journal only.
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	second := open()
	defer func() { second.CloseAnswerLog(true); store.Close() }()
	for user, answer := range map[string]string{"logged": logged, "journaled": journaled} {
		if got, replayed := post(second, user, keys[1].Secret); replayed || got == answer {
			t.Errorf("%s: the other API key's retry got %s (replayed %v): the first key's answer", user, got, replayed)
		}
		if got, replayed := post(second, user, keys[0].Secret); !replayed || got != answer {
			t.Errorf("%s: the first key's retry got %s (replayed %v), want %s again", user, got, replayed, answer)
		}
	}
}

// openJournaled opens a server of cfg over the store in dir whose calls
// stay in the journal (an hour between write-backs), for a crash: the
// caller closes the store without closing the hot set.
func openJournaled(t *testing.T, dir string, cfg Config) (*Server, *eviction.HotSet, *storage.Store) {
	t.Helper()
	return openJournaledWith(t, dir, cfg, eviction.Options{})
}

// openJournaledWith is openJournaled with the hot set's options opts (its
// Logger set, and its FlushInterval if none).
func openJournaledWith(t *testing.T, dir string, cfg Config, opts eviction.Options) (*Server, *eviction.HotSet, *storage.Store) {
	t.Helper()
	return openJournaledOver(t, dir, cfg, opts, nil)
}

// openJournaledOver is openJournaledWith over the store wrap makes of the
// one it opens (nil: that one).
func openJournaledOver(t *testing.T, dir string, cfg Config, opts eviction.Options, wrap func(*storage.Store) eviction.Store) (*Server, *eviction.HotSet, *storage.Store) {
	t.Helper()
	store, err := storage.Open(storage.DefaultOptions(dir).WithMinFreeBytes(-1).WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	var hotStore eviction.Store = store
	if wrap != nil {
		hotStore = wrap(store)
	}
	if opts.FlushInterval == 0 {
		opts.FlushInterval = time.Hour
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	hot, err := eviction.New(hotStore, []eviction.Namespace{{Name: "default", Profile: userfilter.DefaultProfile()}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	srv, err := New(hot, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, hot, store
}

// A keyed batch's answer that the journal alone held (a crash before the
// log of answers wrote it) is given again to a retry after the crash and
// kept by the API since: it ages from when the batch was first answered
// (eviction.Result.Born of its users' parts), not from the retry. Kept as
// a new answer, it was given again a whole time to live after the retry.
func TestAJournaledBatchAnswerKeptAgainAgesFromTheFirstCall(t *testing.T) {
	dir := t.TempDir()
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	open := func() (*Server, *eviction.HotSet, *storage.Store) {
		return openJournaledWith(t, dir, Config{Now: clock, IdempotencyTTL: time.Minute},
			eviction.Options{Now: clock, ReplyTTL: time.Minute})
	}
	post := func(srv *Server) (string, bool) {
		t.Helper()
		return keyedBatch(t, srv, "k-batch",
			`{"requests":[{"user":"a","candidates":["x","y","z"],"limit":1},{"user":"b","candidates":["x","y","z"],"limit":2}]}`)
	}
	first, _, store := open()
	answer, _ := post(first)
	if err := store.Close(); err != nil { // a crash: the answer is in the journal only
		t.Fatal(err)
	}
	second, hot, store := open()
	t.Cleanup(func() { hot.Close(); store.Close() })
	offset.Store(int64(30 * time.Second))
	if got, replayed := post(second); !replayed || got != answer {
		t.Fatalf("30 s on, after the crash: %s (replayed %v), want %s again from the journal", got, replayed, answer)
	}
	offset.Store(int64(45 * time.Second))
	if got, replayed := post(second); !replayed || got != answer {
		t.Fatalf("45 s on: %s (replayed %v), want %s again, kept since the retry", got, replayed, answer)
	}
	offset.Store(int64(61 * time.Second))
	if got, replayed := post(second); replayed {
		t.Errorf("61 s after the first call: %s given again, past its minute (aged from the retry 30 s on?)", got)
	}
}

// failingLoads is a store whose Load of the users named flaky... fails
// while armed.
type failingLoads struct {
	*storage.Store
	armed *atomic.Bool
}

func (s failingLoads) Load(ns, user string) ([]byte, []storage.JournalEntry, error) {
	if s.armed.Load() && strings.HasPrefix(user, "flaky") {
		return nil, nil, fmt.Errorf("failingLoads: cannot read %s", user)
	}
	return s.Store.Load(ns, user)
}

// A batch whose users' parts the journal gives again after a crash, each
// given first at another time (a user failed, its retry served it 40 s
// later), lives no longer than its oldest part, whatever its place in the
// batch: 61 s after the first answer, past its minute, the retry is served
// anew.
func TestABatchGivenAgainFromTheJournalAgesFromItsOldestPart(t *testing.T) {
	offset, open, failing := flakyServers(t)
	// The failed user last, then first.
	batches := map[string]string{
		"k-last":  `{"requests":[{"user":"ok","candidates":["x","y","z"],"limit":1},{"user":"flaky","candidates":["x","y","z"],"limit":1}]}`,
		"k-first": `{"requests":[{"user":"flaky2","candidates":["x","y","z"],"limit":1},{"user":"ok2","candidates":["x","y","z"],"limit":1}]}`,
	}
	first, _, store := open()
	failing(first, batches)
	offset.Store(int64(40 * time.Second))
	retries := map[string]string{}
	for key, body := range batches {
		if retries[key], _ = keyedBatch(t, first, key, body); strings.Contains(retries[key], `"error"`) {
			t.Fatalf("%s: the retry 40 s on: %s, want every user served", key, retries[key])
		}
	}
	if err := store.Close(); err != nil { // a crash: no log of answers, the journal alone holds them
		t.Fatal(err)
	}
	second, hot, store := open()
	t.Cleanup(func() { hot.Close(); store.Close() })
	offset.Store(int64(50 * time.Second))
	for key, body := range batches {
		if got, replayed := keyedBatch(t, second, key, body); !replayed || got != retries[key] {
			t.Fatalf("%s: 50 s on, after the crash: %s (replayed %v), want %s again from the journal", key, got, replayed, retries[key])
		}
	}
	offset.Store(int64(61 * time.Second))
	for key, body := range batches {
		if got, replayed := keyedBatch(t, second, key, body); replayed {
			t.Errorf("%s: 61 s after the first answer: %s given again, past its oldest part's minute", key, got)
		}
	}
}

// flakyServers returns a clock's offset and open, which opens a server
// over one data directory on that clock, with a minute's time to live for
// answers, and failing, which sends batches (by key) to such a server
// while its store fails the users named flaky..., and wants each answer
// to hold a user's failure.
func flakyServers(t *testing.T) (offset *atomic.Int64, open func() (*Server, *eviction.HotSet, *storage.Store),
	failing func(*Server, map[string]string)) {
	offset, armed, open := clockedServers(t, func(st *storage.Store, _ *atomic.Int64, armed *atomic.Bool) eviction.Store {
		return failingLoads{Store: st, armed: armed}
	})
	failing = func(srv *Server, batches map[string]string) {
		t.Helper()
		armed.Store(true)
		defer armed.Store(false)
		for key, body := range batches {
			if got, _ := keyedBatch(t, srv, key, body); !strings.Contains(got, `"error"`) {
				t.Fatalf("%s: the first batch %s, want a user's failure", key, got)
			}
		}
	}
	return offset, open, failing
}

// clockedServers returns a clock's offset, a switch, and open, which opens
// a server over one data directory on that clock, with a minute's time to
// live for answers, over the store wrap makes of the one it opens, given
// the offset and the switch.
func clockedServers(t *testing.T, wrap func(*storage.Store, *atomic.Int64, *atomic.Bool) eviction.Store) (offset *atomic.Int64,
	armed *atomic.Bool, open func() (*Server, *eviction.HotSet, *storage.Store)) {
	dir := t.TempDir()
	offset, armed = new(atomic.Int64), new(atomic.Bool)
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	open = func() (*Server, *eviction.HotSet, *storage.Store) {
		return openJournaledOver(t, dir, Config{Now: clock, IdempotencyTTL: time.Minute},
			eviction.Options{Now: clock, ReplyTTL: time.Minute},
			func(st *storage.Store) eviction.Store { return wrap(st, offset, armed) })
	}
	return offset, armed, open
}

// keyedBatch sends the batch body to srv's namespace default with the
// Idempotency-Key key, and returns its answer (a 200) and whether it was
// given again.
func keyedBatch(t *testing.T, srv *Server, key, body string) (string, bool) {
	t.Helper()
	return keyedPostOK(t, srv, "the keyed batch", "/v1/namespaces/default/filter", key, body, "")
}

// A kept answer with a failed user that is not a batch answer of its
// request (its results do not match the requests: not one this build
// keeps, but one read back may be) is given again whole to the batch's
// retry, counted as an answer given again, and kept again as it was: as
// old (it lives no longer than from when it was first given), and with
// its failure, which a restart reads back from its body, so that each
// retry is answered as the first was.
func TestAKeptAnswerGivenAgainWholeToABatchsRetryKeepsItsAge(t *testing.T) {
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	srv := newTestServerOf(t, Config{Now: clock, IdempotencyTTL: time.Minute})
	const path, key = "/v1/namespaces/default/filter", "k-odd"
	body := `{"requests":[{"user":"a","candidates":["x"]},{"user":"b","candidates":["x"]}]}`
	scoped := "\x00" + path + "\x00" + key // on an open server
	p, state := srv.replays.begin(scoped, xxh3.Hash128Seed([]byte(body), xxh3.HashString(path)))
	if state != replayNew {
		t.Fatalf("begin: %v", state)
	}
	odd := `{"results":[{"user":"a","error":{"status":503}}]}` // one result for two requests
	srv.replays.finish(scoped, p, 200, []byte(odd), true, time.Time{})
	for i, at := range []time.Duration{40 * time.Second, 50 * time.Second} {
		offset.Store(int64(at))
		if got, replayed := keyedBatch(t, srv, key, body); !replayed || got != odd {
			t.Fatalf("%v on: %s (replayed %v), want %s given again whole", at, got, replayed, odd)
		}
		if n := srv.Stats().IdempotentReplays; n != uint64(i+1) {
			t.Errorf("%v on: idempotent_replays %d, want %d", at, n, i+1)
		}
		srv.replays.mu.Lock()
		kept, ok := srv.replays.lru.Peek(scoped)
		srv.replays.mu.Unlock()
		if !ok || !kept.failed {
			t.Errorf("%v on: the answer is kept again without its failure (kept %v)", at, ok)
		}
	}
	offset.Store(int64(61 * time.Second))
	if got, replayed := keyedBatch(t, srv, key, body); replayed {
		t.Errorf("61 s after it was first given: %s given again, past its minute", got)
	}
}

// A batch's answer is one answer: its users served anew by its retry,
// while the others get their first results again, age with them from the
// first answer, after a crash too, when the journal alone holds their
// parts (no log of answers). Past the first answer's time to live, the
// retry after the crash serves every user anew; before, a user served
// anew by the retry (20 s after the first answer, or 40 s after it, by a
// retry after a first crash) got its part given again from the journal
// for a whole time to live from the retry, and the others none.
func TestABatchsUserServedAnewAgesWithItsFirstAnswerAfterACrash(t *testing.T) {
	offset, open, failing := flakyServers(t)
	crash := func(store *storage.Store) {
		t.Helper()
		if err := store.Close(); err != nil { // the hot set is left as a crash leaves it
			t.Fatal(err)
		}
	}
	// k-resumed's retry serves flaky in the same process (the answer kept
	// in memory gives ok's result again), k-crashed's after a crash (the
	// journal gives ok2's part again).
	batches := map[string]string{
		"k-resumed": `{"requests":[{"user":"ok","candidates":["x","y","z"],"limit":1},{"user":"flaky","candidates":["x","y","z"],"limit":1}]}`,
		"k-crashed": `{"requests":[{"user":"ok2","candidates":["x","y","z"],"limit":1},{"user":"flaky2","candidates":["x","y","z"],"limit":1}]}`,
	}
	first, _, store := open()
	failing(first, batches)
	retries := map[string]string{}
	offset.Store(int64(20 * time.Second))
	retries["k-resumed"], _ = keyedBatch(t, first, "k-resumed", batches["k-resumed"])
	crash(store)
	second, _, store := open()
	offset.Store(int64(40 * time.Second))
	retries["k-crashed"], _ = keyedBatch(t, second, "k-crashed", batches["k-crashed"])
	for key, got := range retries {
		if strings.Contains(got, `"error"`) {
			t.Fatalf("%s: the retry: %s, want every user served", key, got)
		}
	}
	crash(store)
	third, hot, store := open()
	t.Cleanup(func() { hot.Close(); store.Close() })
	offset.Store(int64(61 * time.Second))
	for key, body := range batches {
		// flaky's only part given before is the retry's, which it
		// answered x; served anew, it answers y.
		answer, replayed := keyedBatch(t, third, key, body)
		var got struct{ Results []struct{ Unseen []string } }
		if err := json.Unmarshal([]byte(answer), &got); err != nil || len(got.Results) != 2 {
			t.Fatalf("%s: %s: %v", key, answer, err)
		}
		if replayed || !slices.Equal(got.Results[1].Unseen, []string{"y"}) {
			t.Errorf("%s: 61 s after the first answer, after a crash: %s (replayed %v), want every user served anew, not the retry's part %s given again",
				key, answer, replayed, retries[key])
		}
	}
}

// slowAppends is a store whose Append of a user named slow... takes by of
// the clock offset (a slow disk), while armed.
type slowAppends struct {
	*storage.Store
	offset *atomic.Int64
	by     time.Duration
	armed  *atomic.Bool
}

func (s slowAppends) Append(ns, user string, value []byte, ttl time.Duration) (uint64, error) {
	seq, err := s.Store.Append(ns, user, value, ttl)
	if s.armed.Load() && strings.HasPrefix(user, "slow") {
		s.offset.Add(int64(s.by))
	}
	return seq, err
}

// slowBody is a batch whose first user's record takes 10 s to write (see
// slowBatch).
const slowBody = `{"requests":[{"user":"slow","candidates":["x","y","z"],"limit":1},{"user":"late","candidates":["x","y","z"],"limit":1}]}`

// slowBatch returns a clock's offset and open, which opens a server over
// one data directory on that clock, with a minute's time to live for
// answers, and answer, which sends slowBody to such a server with the key
// k-slow, its user late served 10 s after its start (the clock's offset is
// 10 s then), and returns the answer.
func slowBatch(t *testing.T) (offset *atomic.Int64, open func() (*Server, *eviction.HotSet, *storage.Store),
	answer func(*Server) string) {
	offset, armed, open := clockedServers(t, func(st *storage.Store, offset *atomic.Int64, armed *atomic.Bool) eviction.Store {
		return slowAppends{Store: st, offset: offset, by: 10 * time.Second, armed: armed}
	})
	answer = func(srv *Server) string {
		t.Helper()
		armed.Store(true)
		defer armed.Store(false)
		got, _ := keyedBatch(t, srv, "k-slow", slowBody)
		if offset.Load() != int64(10*time.Second) {
			t.Fatalf("the batch moved the clock %v, want 10s", time.Duration(offset.Load()))
		}
		return got
	}
	return offset, open, answer
}

// A keyed batch's answer kept in memory ages from the batch's start, as its
// parts in the journal do (see below), not from its end: 61 s after the
// start of a batch that took 10 s, its retry is served anew.
func TestAKeyedBatchsAnswerAgesFromItsStart(t *testing.T) {
	offset, open, answer := slowBatch(t)
	srv, hot, store := open()
	t.Cleanup(func() { hot.Close(); store.Close() })
	answered := answer(srv)
	offset.Store(int64(55 * time.Second))
	if got, replayed := keyedBatch(t, srv, "k-slow", slowBody); !replayed || got != answered {
		t.Fatalf("55 s after the batch's start: %s (replayed %v), want %s again", got, replayed, answered)
	}
	offset.Store(int64(61 * time.Second))
	if got, replayed := keyedBatch(t, srv, "k-slow", slowBody); replayed {
		t.Errorf("61 s after the batch's start: %s given again, past its minute (aged from its end?)", got)
	}
}

// A keyed batch's answer is one answer, as old as the batch's start, however
// long the batch took: read back from the journal after a crash, its later
// users' parts age with its first's. Each user's record kept its own call's
// second, so a retry after a crash, past the time to live of the first
// user's part but within that of the users the batch served 10 s later,
// served the first anew and gave the others their parts again.
func TestAKeyedBatchsPartsAgeFromItsStartAfterACrash(t *testing.T) {
	offset, open, answer := slowBatch(t)
	crash := func(store *storage.Store) {
		t.Helper()
		if err := store.Close(); err != nil { // no log of answers: the journal alone holds the parts
			t.Fatal(err)
		}
	}
	first, _, store := open()
	answered := answer(first)
	crash(store)
	// Within the minute of every part: the answer is given again whole.
	second, _, store := open()
	offset.Store(int64(55 * time.Second))
	if got, replayed := keyedBatch(t, second, "k-slow", slowBody); !replayed || got != answered {
		t.Fatalf("55 s after the batch's start, after a crash: %s (replayed %v), want %s again", got, replayed, answered)
	}
	crash(store)
	third, hot, store := open()
	t.Cleanup(func() { hot.Close(); store.Close() })
	offset.Store(int64(61 * time.Second))
	got, replayed := keyedBatch(t, third, "k-slow", slowBody)
	var res struct{ Results []struct{ Unseen []string } }
	if err := json.Unmarshal([]byte(got), &res); err != nil || len(res.Results) != 2 {
		t.Fatalf("%s: %v", got, err)
	}
	for i, r := range res.Results {
		if replayed || !slices.Equal(r.Unseen, []string{"y"}) {
			t.Errorf("user %d, 61 s after the batch's start, after a crash: %s (replayed %v), want every user served anew (y), not a part of %s given again",
				i, got, replayed, answered)
		}
	}
}

// A batch's answer kept again by the retry that serves its failed user
// anew is as old as the first answer, across a graceful restart too,
// whatever erases of other users came between: stamped just after the
// last erase of any user (30 s after the first answer here), it was read
// back after the restart that much younger, and given again past its
// minute.
func TestAResumedBatchsAnswerKeepsItsAgeAcrossARestartAfterAnErase(t *testing.T) {
	offset, open, failing := flakyServers(t)
	const body = `{"requests":[{"user":"ok","candidates":["x","y","z"],"limit":1},{"user":"flaky","candidates":["x","y","z"],"limit":1}]}`
	first, hot, store := open()
	failing(first, map[string]string{"k": body})
	offset.Store(int64(30 * time.Second))
	eraseUser(t, first, "other")
	offset.Store(int64(40 * time.Second))
	if got, replayed := keyedBatch(t, first, "k", body); replayed || strings.Contains(got, `"error"`) {
		t.Fatalf("the retry 40 s on: %s (replayed %v), want flaky served anew", got, replayed)
	}
	snapshot := snapshotOf(t, first) // a graceful stop
	hot.Close()
	store.Close()
	second, hot, store := open()
	t.Cleanup(func() { hot.Close(); store.Close() })
	if _, err := second.LoadReplays(bytes.NewReader(snapshot)); err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(55 * time.Second))
	if got, replayed := keyedBatch(t, second, "k", body); !replayed {
		t.Fatalf("55 s after the first answer, after the restart: %s served anew, want it given again", got)
	}
	offset.Store(int64(61 * time.Second))
	if got, replayed := keyedBatch(t, second, "k", body); replayed {
		t.Errorf("61 s after the first answer, after the restart: %s given again, past its minute", got)
	}
}
