package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
)

// callerShareKeys are two API keys: A floods keyed calls, B makes a few.
var callerShareKeys = []Key{{Role: RoleWrite, Secret: "secret-of-key-a-0123456789"}, {Role: RoleWrite, Secret: "secret-of-key-b-0123456789"}}

// keyedCallBy is a keyed one call of body for user by the API key of
// secret; it returns the answer and whether it was given again.
func keyedCallBy(t *testing.T, srv *Server, secret, user, key, body string) (string, bool) {
	t.Helper()
	return keyedPostOK(t, srv, user+"'s call", "/v1/namespaces/default/users/"+user+"/filter", key, body, secret)
}

// floodBody is a call of 100 candidates of 40 bytes, answered whole.
func floodBody(record string) string {
	c := make([]string, 100)
	for i := range c {
		c[i] = fmt.Sprintf("%q", fmt.Sprintf("item-%035d", i))
	}
	return `{"candidates":[` + strings.Join(c, ",") + `],"record":"` + record + `"}`
}

// The answers log's files share their budget between API keys as memory
// does: one key's flood of keyed calls just before a crash, which pushes
// the log's older files out of the budget, leaves another key's answers
// that memory still kept in the files, and the start after the crash
// gives them to that key's retries. The calls are dry runs, which no
// journal holds: the files alone keep their answers.
func TestAnswerLogKeepsAnotherAPIKeysAnswersPastAFlood(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Keys: callerShareKeys, IdempotencyBytes: 256 << 10}
	a, b := callerShareKeys[0].Secret, callerShareKeys[1].Secret
	first := newTestServerOf(t, cfg)
	if _, err := first.OpenAnswerLog(dir, false, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	const small = `{"candidates":["x","y","z"],"record":"none"}`
	answers := map[string]string{}
	for i := range 3 {
		user := fmt.Sprint("b", i)
		answers[user], _ = keyedCallBy(t, first, b, user, "key-"+user, small)
	}
	AnswersLogged(t, first)
	flood := floodBody("none") // about 4.6 KB an answer: 150 fill the 256 KiB more than twice
	for i := range 150 {
		user := fmt.Sprint("a", i)
		keyedCallBy(t, first, a, user, "key-"+user, flood)
	}
	AnswersLogged(t, first)
	for user, want := range answers { // memory still keeps B's answers
		if got, replayed := keyedCallBy(t, first, b, user, "key-"+user, small); !replayed || got != want {
			t.Fatalf("before the crash, B's retry on %s got %s (replayed %v); want %s again", user, got, replayed, want)
		}
	}
	// A crash: the log is never closed.
	second := newTestServerOf(t, cfg)
	if _, err := second.OpenAnswerLog(dir, false, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	defer second.CloseAnswerLog(true)
	for user, want := range answers {
		if got, replayed := keyedCallBy(t, second, b, user, "key-"+user, small); !replayed || got != want {
			t.Errorf("after the crash, B's retry on %s got %s (replayed %v); want %s again: A's flood pushed it out of the files", user, got, replayed, want)
		}
	}
	if _, replayed := keyedCallBy(t, second, a, "a149", "key-a149", flood); !replayed {
		t.Errorf("after the crash, A's last retry was served anew")
	}
	first.CloseAnswerLog(false)
}

// The answers the hot set reads back from the journal after a crash share
// their budget between API keys too: A's retries, loading A's users after
// B's user was loaded, push out A's own answers read back, not B's, and
// B's retries get theirs. No answers log: the journal alone holds them.
func TestJournaledAnswersOfAnotherAPIKeyOutliveAFloodAfterACrash(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Keys: callerShareKeys}
	a, b := callerShareKeys[0].Secret, callerShareKeys[1].Secret
	opts := eviction.Options{ReplyBytes: 8 << 10} // about 20 answers of 40 indexes
	var store *storage.Store
	open := func() *Server {
		var srv *Server
		srv, _, store = openJournaledWith(t, dir, cfg, opts)
		return srv
	}
	first := open()
	body := `{"candidates":["a","b","c"],"limit":2}`
	answers := map[string]string{}
	for i := range 3 {
		user := fmt.Sprint("b", i)
		answers[user], _ = keyedCallBy(t, first, b, user, "key-"+user, body)
	}
	flood := floodBody("returned")
	for i := range 60 {
		user := fmt.Sprint("a", i)
		keyedCallBy(t, first, a, user, "key-"+user, flood)
	}
	// A crash: the hot set is never closed, nothing is written back.
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	second := open()
	defer store.Close()
	for user := range answers { // B's users loaded, by a look at their stats
		resp, err := second.App().Test(authed(httptest.NewRequest("GET", "/v1/namespaces/default/users/"+user, nil), b), -1)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for i := range 60 {
		user := fmt.Sprint("a", i)
		if _, replayed := keyedCallBy(t, second, a, user, "key-"+user, flood); !replayed {
			t.Fatalf("after the crash, A's retry on %s was served anew", user)
		}
	}
	for user, want := range answers {
		if got, replayed := keyedCallBy(t, second, b, user, "key-"+user, body); !replayed || got != want {
			t.Errorf("after the crash, B's retry on %s got %s (replayed %v); want %s again: A's answers pushed it out", user, got, replayed, want)
		}
	}
}

// authed sets the bearer secret on req.
func authed(req *http.Request, secret string) *http.Request {
	req.Header.Set("Authorization", "Bearer "+secret)
	return req
}

// A keyed batch's answer kept again by the retry that served its failed
// user anew is stamped as the answer it resumes, first given at the same
// time. When the file holding the first answer goes for the budget (A's
// flood) while memory keeps the resumed one, the first answer, with its
// failure, must not be written again after the resumed one: a start after
// a crash would read it back last, and the next retry would serve the
// failed user anew a second time, recording its next items.
func TestAResumedBatchsAnswerOutlivesItsFirstAnswersFileAfterACrash(t *testing.T) {
	dir, answers := t.TempDir(), t.TempDir()
	cfg := Config{Keys: callerShareKeys, IdempotencyBytes: 256 << 10}
	a, b := callerShareKeys[0].Secret, callerShareKeys[1].Secret
	armed := new(atomic.Bool)
	var store *storage.Store
	var hot *eviction.HotSet
	open := func() *Server {
		var srv *Server
		srv, hot, store = openJournaledOver(t, dir, cfg, eviction.Options{}, func(st *storage.Store) eviction.Store {
			return failingLoads{Store: st, armed: armed}
		})
		if _, err := srv.OpenAnswerLog(answers, false, 5*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		return srv
	}
	const path, key = "/v1/namespaces/default/filter", "k-batch"
	const body = `{"requests":[{"user":"ok","candidates":["x","y","z"],"limit":1},{"user":"flaky","candidates":["x","y","z"],"limit":1}]}`
	batch := func(srv *Server) (string, bool) {
		t.Helper()
		return keyedPostOK(t, srv, "B's keyed batch", path, key, body, b)
	}
	flood, floods := floodBody("none"), 0
	flooding := func(srv *Server, until func() bool) {
		t.Helper()
		for !until() {
			if floods++; floods > 400 {
				t.Fatal("A's flood did not move the answers log's files along")
			}
			user := fmt.Sprint("a", floods)
			keyedCallBy(t, srv, a, user, "key-"+user, flood)
			AnswersLogged(t, srv)
		}
	}
	first := open()
	log := first.replays.log
	fileOf := func() uint64 { log.fileMu.Lock(); defer log.fileMu.Unlock(); return log.id }
	armed.Store(true)
	if got, _ := batch(first); !strings.Contains(got, `"error"`) {
		t.Fatalf("the first batch: %s, want flaky's failure", got)
	}
	armed.Store(false)
	AnswersLogged(t, first)
	failedIn := fileOf()
	flooding(first, func() bool { return fileOf() != failedIn })
	resumed, replayed := batch(first)
	if replayed || strings.Contains(resumed, `"error"`) {
		t.Fatalf("the retry: %s (replayed %v), want flaky served anew", resumed, replayed)
	}
	AnswersLogged(t, first)
	resumedIn := fileOf()
	gone := func(id uint64) bool { _, err := os.Stat(log.path(id)); return os.IsNotExist(err) }
	flooding(first, func() bool { return gone(failedIn) })
	if gone(resumedIn) {
		t.Fatalf("the file of the resumed answer went with the first answer's: the flood is too long")
	}
	if got, replayed := batch(first); !replayed || got != resumed {
		t.Fatalf("before the crash, the batch's retry got %s (replayed %v); want %s again", got, replayed, resumed)
	}
	// The users written back, then a crash: the journal no longer holds
	// flaky's part, and the answers log is as the crash left it.
	if err := hot.Flush(); err != nil {
		t.Fatal(err)
	}
	first.CloseAnswerLog(false)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	second := open()
	t.Cleanup(func() { second.CloseAnswerLog(true); hot.Close(); store.Close() })
	if got, replayed := batch(second); !replayed || got != resumed {
		t.Errorf("after the crash, the batch's retry got %s (replayed %v); want %s again: flaky served anew twice", got, replayed, resumed)
	}
}
