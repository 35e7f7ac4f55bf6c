package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seenapi/seenapi/bench"
)

// startRedis starts Debian's redis-server on a free loopback port and
// returns a client of it. Without redis-server the test is skipped, unless
// CI=true, where that fails it.
func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	rdb, _ := startRedisServer(t)
	return rdb
}

// startRedisServer is startRedis that returns the server too.
func startRedisServer(t *testing.T) (*redis.Client, *bench.RedisServer) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is missing (CI=true: install it, e.g. ./test.sh)")
		}
		t.Skip("redis-server is missing")
	}
	srv, err := bench.StartRedis(context.Background(), bin, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb, srv
}

// importFrom runs seenapi import-redis with args and returns its exit code
// and output.
func importFrom(rdb *redis.Client, s *service, env map[string]string, args ...string) (int, string) {
	var out bytes.Buffer
	code := run(context.Background(), append([]string{"import-redis", "--redis", rdb.Options().Addr, "--url", s.url}, args...),
		mapEnv(env), &out, &out, nil)
	return code, out.String()
}

// frontOf starts a proxy in front of the service s, as a load balancer or
// a captive portal may be, and returns its URL. Each recording call (POST
// .../seen) goes to seen first, which answers it itself (true) or passes it
// on to s (false, having written nothing).
func frontOf(t *testing.T, s *service, seen func(w http.ResponseWriter) bool) string {
	t.Helper()
	target, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/seen") && seen(w) {
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front.URL
}

// unseenOf returns how many of items user has not seen.
func unseenOf(t *testing.T, s *service, user string, items []string, header ...string) int {
	t.Helper()
	return strings.Count(fmt.Sprint(seenBy(t, s, user, items, header...)), "false")
}

// seenBy asks the service which of items user has seen.
func seenBy(t *testing.T, s *service, user string, items []string, header ...string) []bool {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"items": items})
	code, m := post(t, s.url+"/v1/namespaces/default/users/"+url.PathEscape(user)+"/check", string(body), header...)
	if code != 200 {
		t.Fatalf("check %s: %d %v", user, code, m)
	}
	var seen []bool
	for _, v := range m["seen"].([]any) {
		seen = append(seen, v.(bool))
	}
	return seen
}

func TestImportRedisRecordsEverySetAndSortedSet(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	big := make([]any, 2345) // three calls of --batch 1000
	bigItems := make([]string, len(big))
	for i := range big {
		bigItems[i] = fmt.Sprintf("item:%d", i)
		big[i] = bigItems[i]
	}
	for _, err := range []error{
		rdb.SAdd(ctx, "seen:u1", "a", "b", "c").Err(),
		rdb.ZAdd(ctx, "seen:u/2", redis.Z{Score: 1, Member: "x"}, redis.Z{Score: 2, Member: "y"}).Err(),
		rdb.SAdd(ctx, "seen:big", big...).Err(),
		rdb.Set(ctx, "seen:count", "3", 0).Err(),  // not a set: skipped
		rdb.SAdd(ctx, "other:u1", "z").Err(),      // does not match
		rdb.SAdd(ctx, "seen:u1:extra", "q").Err(), // matches: the user "u1:extra"
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := startService(t, nil, "--data-dir", t.TempDir())
	code, out := importFrom(rdb, s, nil, "--match", "seen:*")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	for user, items := range map[string][]string{"u1": {"a", "b", "c"}, "u/2": {"x", "y"}, "big": bigItems, "u1:extra": {"q"}} {
		if n := unseenOf(t, s, user, items); n != 0 {
			t.Errorf("%s has not seen %d of its %d items", user, n, len(items))
		}
	}
	if got := seenBy(t, s, "u1", []string{"z", "never"}); got[0] || got[1] {
		t.Errorf("u1 saw %v of items it was never shown", got)
	}
	if !strings.Contains(out, "users=4 ") || !strings.Contains(out, "items=2351 ") || !strings.Contains(out, "skipped=1 ") ||
		!strings.Contains(out, "failed=0 ") || !strings.Contains(out, "type=string key=seen:count") {
		t.Errorf("the summary miscounts:\n%s", out)
	}
	// Again: nothing new is recorded, and the count of u1's items is unchanged.
	code, out = importFrom(rdb, s, nil, "--match", "seen:*")
	if code != 0 || !strings.Contains(out, "newly_seen=0 ") {
		t.Fatalf("a second import: exit %d: %s", code, out)
	}
	resp, err := http.Get(s.url + "/v1/namespaces/default/users/u1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stats struct{ Items int }
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil || stats.Items != 3 {
		t.Errorf("u1 holds %d items after two imports, want 3 (%v)", stats.Items, err)
	}
}

func TestImportRedisReportsTheUsersItCannotImport(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	for _, key := range []string{"seen:ok", "seen:", "seen:bad\x01id", "seen:.", "seen:.."} {
		if err := rdb.SAdd(ctx, key, "i1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.SAdd(ctx, "seen:long", strings.Repeat("x", 300)).Err(); err != nil {
		t.Fatal(err)
	}
	s := startService(t, nil, "--data-dir", t.TempDir())
	code, out := importFrom(rdb, s, nil)
	if code != 1 || strings.Count(out, "user not imported") != 5 || !strings.Contains(out, "5 users were not imported") ||
		!strings.Contains(out, "failed=5 ") {
		t.Fatalf("exit %d, want 1 naming the five users:\n%s", code, out)
	}
	if !strings.Contains(out, "item-too-long") || !strings.Contains(out, "its * matched nothing") ||
		!strings.Contains(out, `does not accept the user id \".\"`) || !strings.Contains(out, `does not accept the user id \"..\"`) {
		t.Errorf("the log does not say why:\n%s", out)
	}
	if got := seenBy(t, s, "ok", []string{"i1"}); !got[0] {
		t.Error("the good user was not imported")
	}
}

// A call of --batch items too long to fit the service's --max-body-bytes is
// refused with what to change: --batch, or the service's limit.
func TestImportRedisSaysToLowerABatchOverTheBodyLimit(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	var items []any
	for i := range 5 {
		items = append(items, fmt.Sprintf("%03d%s", i, strings.Repeat("x", 247)))
	}
	if err := rdb.SAdd(ctx, "seen:long", items...).Err(); err != nil {
		t.Fatal(err)
	}
	s := startService(t, nil, "--data-dir", t.TempDir(), "--max-body-bytes", "1KiB")
	code, out := importFrom(rdb, s, nil)
	if code != 1 || !strings.Contains(out, "body-too-large") || !strings.Contains(out, "1 user was not imported (it is in the log)") ||
		!strings.Contains(out, "import again with a smaller --batch (the user's items are long), or raise the service's --max-body-bytes") {
		t.Fatalf("exit %d, want 1, a hint of --batch and \"1 user was not imported\":\n%s", code, out)
	}
	if code, out := importFrom(rdb, s, nil, "--batch", "2"); code != 0 {
		t.Fatalf("--batch 2: exit %d:\n%s", code, out)
	}
}

// The log names the Redis imported from as --redis gives it, a redis://
// URL's database included (the address alone would not say which of its
// databases was read), with xxxxx for its password.
func TestImportRedisLogsItsURLWithoutThePassword(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	const secret = "s3cret-of-redis"
	if err := rdb.ConfigSet(ctx, "requirepass", secret).Err(); err != nil {
		t.Fatal(err)
	}
	addr := rdb.Options().Addr
	db2 := redis.NewClient(&redis.Options{Addr: addr, Password: secret, DB: 2})
	defer db2.Close()
	if err := db2.SAdd(ctx, "seen:u1", "a", "b").Err(); err != nil {
		t.Fatal(err)
	}
	s := startService(t, nil, "--data-dir", t.TempDir())
	var out bytes.Buffer
	code := run(ctx, []string{"import-redis", "--redis", "redis://:" + secret + "@" + addr + "/2", "--url", s.url}, noEnv, &out, &out, nil)
	if want := "redis=redis://:xxxxx@" + addr + "/2 "; code != 0 || !strings.Contains(out.String(), want) {
		t.Fatalf("exit %d, want 0 and %q in the log:\n%s", code, want, out.String())
	}
	if strings.Contains(out.String(), secret) {
		t.Errorf("the log shows the password:\n%s", out.String())
	}
	if n := unseenOf(t, s, "u1", []string{"a", "b"}); n != 0 {
		t.Errorf("%d items unseen after the import", n)
	}
	// Redis wanting a password that --redis does not give: the error says how.
	out.Reset()
	code = run(ctx, []string{"import-redis", "--redis", addr, "--url", s.url}, noEnv, &out, &out, nil)
	if want := "redis at " + addr + ": NOAUTH Authentication required (give its password in a redis:// URL, --redis redis://:PASSWORD@" + addr +
		" or redis://USER:PASSWORD@..., better set as SEENAPI_REDIS)"; code != 1 || !strings.Contains(out.String(), want) {
		t.Errorf("no password: exit %d, want 1 and %q:\n%s", code, want, out.String())
	}
	// Redis refusing the password: the error names the URL the same way.
	out.Reset()
	code = run(ctx, []string{"import-redis", "--redis", "redis://:wrong-" + secret + "@" + addr + "/2", "--url", s.url}, noEnv, &out, &out, nil)
	if want := "redis at redis://:xxxxx@" + addr + "/2: WRONGPASS"; code != 1 || !strings.Contains(out.String(), want) || strings.Contains(out.String(), secret) {
		t.Errorf("a wrong password: exit %d, want 1 and %q, without the password:\n%s", code, want, out.String())
	}
}

// An import that finds no key says so, with how many keys the database
// holds: a --match that does not fit them, or the wrong database, would
// otherwise pass for an import done.
func TestImportRedisSaysWhenNoKeyMatches(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	if err := rdb.SAdd(ctx, "users:u1:seen", "a").Err(); err != nil {
		t.Fatal(err)
	}
	s := startService(t, nil, "--data-dir", t.TempDir())
	code, out := importFrom(rdb, s, nil)
	if want := `level=WARN msg="seenapi: no key matched --match; nothing was imported" match=seen:* keys_in_database=1`; code != 0 || !strings.Contains(out, want) {
		t.Errorf("exit %d, want 0 and %q:\n%s", code, want, out)
	}
	if code, out := importFrom(rdb, s, nil, "--match", "users:*:seen"); code != 0 || strings.Contains(out, "no key matched") {
		t.Errorf("--match users:*:seen: exit %d, want 0 and no warning:\n%s", code, out)
	}
}

// --batch is lowered to the most items the service takes in a call (GET
// /v1/auth's max_candidates): at the default 1000, a service started with a
// lower --max-candidates would refuse every user of more items than that.
func TestImportRedisLowersABatchTheServiceWouldRefuse(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	if err := rdb.SAdd(ctx, "seen:big", "1", "2", "3", "4", "5").Err(); err != nil {
		t.Fatal(err)
	}
	s := startService(t, nil, "--data-dir", t.TempDir(), "--max-candidates", "3")
	code, out := importFrom(rdb, s, nil)
	if code != 0 || !strings.Contains(out, "--batch lowered to the most items the service takes a call") || !strings.Contains(out, "batch=3") {
		t.Fatalf("exit %d, want 0 and --batch lowered to 3 in the log:\n%s", code, out)
	}
	if n := unseenOf(t, s, "big", []string{"1", "2", "3"}) + unseenOf(t, s, "big", []string{"4", "5"}); n != 0 {
		t.Errorf("%d items unseen after the import", n)
	}
}

func TestImportRedisNeedsAKeyThatMayRecord(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	if err := rdb.SAdd(ctx, "seen:u1", "a").Err(); err != nil {
		t.Fatal(err)
	}
	const readKey, writeKey = "r-0123456789abcdef", "w-0123456789abcdef"
	s := startService(t, map[string]string{"SEENAPI_KEYS": "read:" + readKey + ",write:" + writeKey}, "--data-dir", t.TempDir())
	for key, want := range map[string]string{"": "401 Unauthorized: send an API key", readKey: "the key's role is read",
		"x-0123456789abcdef": "the API key is not known (https://seenapi.dev/problems/unauthorized); give a key of the write role with --key or SEENAPI_KEY"} {
		code, out := importFrom(rdb, s, nil, "--key", key)
		if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "SEENAPI_KEY") {
			t.Errorf("key %q: exit %d, want 1 and %q, naming SEENAPI_KEY:\n%s", key, code, want, out)
		}
	}
	if got := seenBy(t, s, "u1", []string{"a"}, "Authorization", "Bearer "+readKey); got[0] {
		t.Fatal("a refused import recorded")
	}
	if code, out := importFrom(rdb, s, map[string]string{"SEENAPI_KEY": writeKey}); code != 0 {
		t.Fatalf("write key from SEENAPI_KEY: exit %d:\n%s", code, out)
	}
	if got := seenBy(t, s, "u1", []string{"a"}, "Authorization", "Bearer "+readKey); !got[0] {
		t.Fatal("not imported with a write key")
	}
	// A --url with the API's own path sends each call to no route.
	var out bytes.Buffer
	code := run(ctx, []string{"import-redis", "--redis", rdb.Options().Addr, "--url", s.url + "/v1", "--key", writeKey}, noEnv, &out, &out, nil)
	if want := "the call went to /v1/v1/auth: give --url the service's root, e.g. " + s.url; code != 1 || !strings.Contains(out.String(), want) {
		t.Errorf("--url %s/v1: exit %d, want 1 and %q:\n%s", s.url, code, want, out.String())
	}
	if code, out := importFrom(rdb, s, nil, "--key", writeKey, "--namespace", "nope"); code != 1 || !strings.Contains(out, "unknown-namespace") {
		t.Errorf("unknown namespace: exit %d:\n%s", code, out)
	}
	if code, out := importFrom(rdb, s, nil, "--key", writeKey, "--match", "seen:*:*"); code != 2 || !strings.Contains(out, "want one *") {
		t.Errorf("two stars: exit %d:\n%s", code, out)
	}
}

// A page in place of the service's answer (a captive portal's, a proxy's
// sign-in page, answered 200) is an error naming it, not a crash on a
// success without its JSON.
func TestImportRedisSaysWhatAPageInPlaceOfTheServiceIs(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	if err := rdb.SAdd(ctx, "seen:u1", "a").Err(); err != nil {
		t.Fatal(err)
	}
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>sign in to the network</html>"))
	}))
	defer portal.Close()
	var out bytes.Buffer
	code := run(ctx, []string{"import-redis", "--redis", rdb.Options().Addr, "--url", portal.URL}, noEnv, &out, &out, nil)
	if want := "200 answer's body is text/html, not the documented application/json: <html>sign in to the network</html>"; code != 1 || !strings.Contains(out.String(), want) {
		t.Errorf("exit %d, want 1 and %q:\n%s", code, want, out.String())
	}
}

// A page answered 200 in place of a recording (a proxy's, a captive
// portal's) is an answer, not a call that got none: the user is reported at
// once with what came, not retried for a minute.
func TestImportRedisDoesNotRetryAPageInPlaceOfARecording(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	if err := rdb.SAdd(ctx, "seen:u1", "a").Err(); err != nil {
		t.Fatal(err)
	}
	front := frontOf(t, startService(t, nil, "--data-dir", t.TempDir()), func(w http.ResponseWriter) bool {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>sign in to the network</html>"))
		return true
	})
	var out bytes.Buffer
	code := run(ctx, []string{"import-redis", "--redis", rdb.Options().Addr, "--url", front}, noEnv, &out, &out, nil)
	want := "200 answer's body is text/html, not the documented application/json: <html>sign in to the network</html>"
	if code != 1 || !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "retries=0 ") ||
		!strings.Contains(out.String(), "1 user was not imported") {
		t.Fatalf("exit %d, want 1, no retry and %q:\n%s", code, want, out.String())
	}
}

// A JSON answer of GET /v1/auth without a role (a proxy's {} in front of
// the service, answered 200) is said to be no answer of seenapi's, rather
// than taken for a key of an empty role.
func TestImportRedisSaysAnAuthAnswerWithoutARoleIsNotTheService(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	if err := rdb.SAdd(ctx, "seen:u1", "a").Err(); err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string]string{
		"{}\n":            `GET /v1/auth was answered 200 with no role ({}): not by seenapi, most likely, but by a proxy or a load balancer in front of it, or another service at that address; check --url`,
		`{"role":"root"}`: `GET /v1/auth was answered 200 with a role seenapi does not have, root ({\"role\":\"root\"}): not by seenapi`,
	} {
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
		}))
		var out bytes.Buffer
		code := run(ctx, []string{"import-redis", "--redis", rdb.Options().Addr, "--url", proxy.URL}, noEnv, &out, &out, nil)
		proxy.Close()
		if code != 1 || !strings.Contains(out.String(), want) {
			t.Errorf("%q: exit %d, want 1 and %q:\n%s", body, code, want, out.String())
		}
	}
}

// TestImportRedisRidesOutAServiceRestart restarts the service on the same
// address and data while an import runs: the calls that meet the shutdown
// or the closed port are retried until the new service answers.
func TestImportRedisRidesOutAServiceRestart(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	const users = 5000
	pipe := rdb.Pipeline()
	for u := range users {
		pipe.SAdd(ctx, fmt.Sprintf("seen:u%d", u), "a", "b")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := startService(t, nil, "--data-dir", dir)
	var out string
	code := make(chan int)
	go func() {
		c, o := importFrom(rdb, s, nil)
		out = o
		code <- c
	}()
	// Stop the service once the import is recording, not after a fixed
	// time: on a loaded machine its first checks could come after the
	// stop, and an import that nothing answers at its start fails at once.
	const seenRoute = "POST /v1/namespaces/{ns}/users/{user}/seen"
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		calls, _ := getJSON(t, s.url+"/v1/stats")["calls"].(map[string]any)
		if n, _ := calls[seenRoute].(float64); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s call within a minute of the import's start", seenRoute)
		}
	}
	if c := s.shutdown(); c != 0 {
		t.Fatalf("shutdown: exit %d", c)
	}
	addr := strings.TrimPrefix(s.url, "http://")
	s2 := startService(t, nil, "--data-dir", dir, "--addr", addr)
	if c := <-code; c != 0 || !strings.Contains(out, fmt.Sprintf("users=%d ", users)) || strings.Contains(out, "retries=0 ") {
		t.Fatalf("exit %d, want 0 with every user imported after retries:\n%s", c, out)
	}
	for u := 0; u < users; u += 97 {
		if n := unseenOf(t, s2, fmt.Sprintf("u%d", u), []string{"a", "b"}); n != 0 {
			t.Errorf("u%d has not seen %d of its items", u, n)
		}
	}
}

// An import leaves the users being served in memory: it records in bulk,
// and users the service does not hold stay in its store.
func TestImportRedisLeavesTheServedUsersInMemory(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	pipe := rdb.Pipeline()
	for i := range 3000 {
		pipe.SAdd(ctx, fmt.Sprint("seen:imported", i), "a", "b", "c", "d", "e")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	s := startService(t, nil, "--data-dir", t.TempDir(), "--cache-bytes", "64KiB")
	for i := range 20 {
		if code, m := post(t, fmt.Sprint(s.url, "/v1/namespaces/default/users/served", i, "/filter"), `{"candidates":["x","y"]}`); code != 200 {
			t.Fatalf("%d %v", code, m)
		}
	}
	if code, out := importFrom(rdb, s, nil); code != 0 || !strings.Contains(out, "users=3000 ") {
		t.Fatalf("exit %d: %s", code, out)
	}
	for i := range 20 {
		resp, err := http.Get(fmt.Sprint(s.url, "/v1/namespaces/default/users/served", i))
		if err != nil {
			t.Fatal(err)
		}
		var st struct{ Hot bool }
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || !st.Hot {
			t.Fatalf("served%d is no longer in memory after the import (%v)", i, err)
		}
	}
	if n := unseenOf(t, s, "imported2999", []string{"a", "b", "c", "d", "e"}); n != 0 {
		t.Fatalf("imported2999 has not seen %d of its items", n)
	}
}

// An overloaded service's 503 and 429 are retried, a 429's Retry-After
// waited out, and the import completes. A proxy in front of the real
// service answers the first recording calls so.
func TestImportRedisRetriesAnOverloadedService(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	for u := range 3 {
		if err := rdb.SAdd(ctx, fmt.Sprint("seen:u", u), "a", "b").Err(); err != nil {
			t.Fatal(err)
		}
	}
	s := startService(t, nil, "--data-dir", t.TempDir())
	var (
		mu        sync.Mutex
		refused   int
		refusedAt time.Time
		waited    time.Duration // from the 429 to the call after it
	)
	front := frontOf(t, s, func(w http.ResponseWriter) bool {
		mu.Lock()
		n := refused
		if n == 3 {
			waited = time.Since(refusedAt)
		}
		if n < 3 {
			refused++
			refusedAt = time.Now()
		}
		mu.Unlock()
		switch {
		case n < 2:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"type":"https://seenapi.dev/problems/overloaded","title":"Overloaded","status":503}`))
			return true
		case n == 2:
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"type":"https://seenapi.dev/problems/overloaded","title":"Overloaded","status":429}`))
			return true
		}
		return false
	})
	var out bytes.Buffer
	code := run(ctx, []string{"import-redis", "--redis", rdb.Options().Addr, "--url", front, "--workers", "1"}, noEnv, &out, &out, nil)
	if code != 0 || !strings.Contains(out.String(), "users=3 ") || !strings.Contains(out.String(), "retries=3 ") {
		t.Fatalf("exit %d, want 0 with 3 users after 3 retries:\n%s", code, out.String())
	}
	if waited < time.Second {
		t.Errorf("the call after a 429 with Retry-After: 1 came %v after it", waited)
	}
	for u := range 3 {
		if n := unseenOf(t, s, fmt.Sprint("u", u), []string{"a", "b"}); n != 0 {
			t.Errorf("u%d has not seen %d of its items", u, n)
		}
	}
}

// A Retry-After given as an HTTP date, as a proxy in front of the service
// may send it, is waited out as one in seconds is.
func TestImportRedisWaitsOutARetryAfterDate(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	if err := rdb.SAdd(ctx, "seen:u1", "a").Err(); err != nil {
		t.Fatal(err)
	}
	s := startService(t, nil, "--data-dir", t.TempDir())
	var (
		mu        sync.Mutex
		refusedAt time.Time
		waited    time.Duration // from the 503 to the call after it
	)
	front := frontOf(t, s, func(w http.ResponseWriter) bool {
		mu.Lock()
		defer mu.Unlock()
		if !refusedAt.IsZero() {
			waited = time.Since(refusedAt)
			return false
		}
		refusedAt = time.Now()
		// Whole seconds: 2 to 3 s from now.
		w.Header().Set("Retry-After", refusedAt.Add(3*time.Second).UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("<html>back soon</html>"))
		return true
	})
	var out bytes.Buffer
	code := run(ctx, []string{"import-redis", "--redis", rdb.Options().Addr, "--url", front}, noEnv, &out, &out, nil)
	if code != 0 || !strings.Contains(out.String(), "retries=1 ") {
		t.Fatalf("exit %d, want 0 after 1 retry:\n%s", code, out.String())
	}
	if waited < 1500*time.Millisecond {
		t.Errorf("the call after a 503 with Retry-After 2 to 3 s ahead came %v after it", waited)
	}
}

// A service started with --rate-limit answers the importer's calls past its
// rate 429 with Retry-After; the importer waits them out and imports every
// user.
func TestImportRedisWaitsOutTheServicesRateLimit(t *testing.T) {
	ctx := context.Background()
	rdb := startRedis(t)
	const users = 6
	for u := range users {
		if err := rdb.SAdd(ctx, fmt.Sprint("seen:u", u), "a", "b").Err(); err != nil {
			t.Fatal(err)
		}
	}
	s := startService(t, nil, "--data-dir", t.TempDir(), "--rate-limit", "4", "--rate-burst", "2")
	code, out := importFrom(rdb, s, nil, "--workers", "4")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("users=%d ", users)) || strings.Contains(out, "retries=0 ") {
		t.Fatalf("exit %d, want 0 with %d users imported after retries:\n%s", code, users, out)
	}
	time.Sleep(time.Second) // a token for each check below
	for u := range users {
		if n := unseenOf(t, s, fmt.Sprint("u", u), []string{"a", "b"}); n != 0 {
			t.Errorf("u%d has not seen %d of its items", u, n)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// A slow import's rate (a rate-limited key, a service restarting) is not
// logged as 0 users a second: 5 users in 10 s are 0.5.
func TestImportRedisLogsASlowRateAsItIs(t *testing.T) {
	var out bytes.Buffer
	im := &importer{logger: slog.New(slog.NewTextHandler(&out, nil)), start: time.Now().Add(-10 * time.Second)}
	im.users.Store(5)
	im.log("seenapi: import done")
	if !strings.Contains(out.String(), " users_per_s=0.5\n") {
		t.Errorf("want users_per_s=0.5 for 5 users in 10s:\n%s", out.String())
	}
	out.Reset()
	im.users.Store(12345)
	im.log("seenapi: import done")
	if !regexp.MustCompile(` users_per_s=123[45]\n`).MatchString(out.String()) {
		t.Errorf("want users_per_s=1234 or so, a whole number, for 12345 users in 10s:\n%s", out.String())
	}
}

// A --url where nothing listens (mistyped, or the service not started) is
// said at once, by the first check, not after a minute of retries as a
// recording that meets a restart is.
func TestImportRedisSaysAtOnceThatNothingAnswers(t *testing.T) {
	rdb := startRedis(t)
	if err := rdb.SAdd(context.Background(), "seen:u1", "a").Err(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	var out bytes.Buffer
	start := time.Now()
	code := run(context.Background(), []string{"import-redis", "--redis", rdb.Options().Addr, "--url", closed}, noEnv, &out, &out, nil)
	if took := time.Since(start); code != 1 || !strings.Contains(out.String(), "connection refused") || took > 10*time.Second {
		t.Fatalf("exit %d after %v, want 1 at once, saying the connection was refused:\n%s", code, took, out.String())
	}
}

// An import stopped (Ctrl-C) while a call waits out the service's refusal
// says what the service answered, not the interruption alone: here a 429
// of a key past its rate, whose Retry-After (10 s) the call waits for.
func TestImportRedisStoppedWhileRetryingSaysWhy(t *testing.T) {
	rdb := startRedis(t)
	for u := range 5 {
		if err := rdb.SAdd(context.Background(), fmt.Sprint("seen:u", u), "a").Err(); err != nil {
			t.Fatal(err)
		}
	}
	const writeKey, readKey = "w-0123456789abcdef", "r-0123456789abcdef"
	// A burst of 3: the two checks and the first user's recording.
	keys := writeFile(t, t.TempDir(), "keys", "write:"+writeKey+" rate=0.1 burst=3\nread:"+readKey+"\n")
	s := startService(t, nil, "--data-dir", t.TempDir(), "--keys-file", keys)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var out syncBuffer
	code := make(chan int)
	go func() {
		code <- run(ctx, []string{"import-redis", "--redis", rdb.Options().Addr, "--url", s.url, "--key", writeKey, "--workers", "1"},
			noEnv, &out, &out, nil)
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, s.url+"/v1/stats", nil)
		req.Header.Set("Authorization", "Bearer "+readKey)
		var stats struct{ Errors map[string]int }
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&stats)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if stats.Errors["429"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 429 within a minute of the import's start:\n%s", out.String())
		}
	}
	stop()
	select {
	case c := <-code:
		want := regexp.MustCompile(`import interrupted \(run it again to finish it\): Post \\"[^"]*/users/u\d/seen\?bulk=true\\": ` +
			`context canceled, while retrying after 429 Too many requests: this API key is past its rate limit .*\(https://seenapi.dev/problems/rate-limited\)`)
		if c != 1 || !want.MatchString(out.String()) {
			t.Fatalf("exit %d, want 1 naming the 429 the stopped call waited out:\n%s", c, out.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the import did not stop within 5 s of its interruption:\n%s", out.String())
	}
}

// With --redis-wait 0, a Redis that goes away in the middle of an import (killed here after the
// 20th recording), or that answers every command with an error of the
// whole server's (BUSY running a script), stops it, with one error naming
// Redis, rather than failing each key left of SCAN's page in turn (each
// after go-redis's retries, when it is gone) with a line of log, and then
// logging "import done". So does a Redis restarted at once (from its RDB
// file), which go-redis's own retries hide: it answers as another server,
// whose SCAN would list from the start again with no keys kept to skip.
func TestImportRedisStopsWhenRedisGoesAway(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*testing.T, *redis.Client, *bench.RedisServer) error
		want  string
	}{
		{"killed", func(_ *testing.T, _ *redis.Client, srv *bench.RedisServer) error {
			return syscall.Kill(srv.PID(), syscall.SIGKILL)
		}, ""},
		{"restarted", func(t *testing.T, rdb *redis.Client, srv *bench.RedisServer) error {
			dir, err := saveAndKill(rdb, srv)
			if err != nil {
				return err
			}
			return restartRedis(t, srv, dir)
		}, `redis restarted, or failed over, meanwhile \(it answers as another server, run_id \w+\), and with --redis-wait 0`},
		{"busy", func(_ *testing.T, rdb *redis.Client, _ *bench.RedisServer) error {
			// A script that runs until SCRIPT KILL: past the threshold
			// (100 ms), Redis answers every other command BUSY.
			go rdb.Eval(context.Background(), "while true do end", nil)
			time.Sleep(500 * time.Millisecond)
			return nil
		}, "BUSY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb, srv := startRedisServer(t)
			if err := rdb.ConfigSet(context.Background(), "busy-reply-threshold", "100").Err(); err != nil {
				t.Fatal(err)
			}
			fillSeen(t, rdb, 3000)
			s := startService(t, nil, "--data-dir", t.TempDir())
			front := faultAt(t, s, 20, func() {
				if err := tc.fault(t, rdb, srv); err != nil {
					t.Error(err)
				}
			})
			var out bytes.Buffer
			code := run(context.Background(), []string{"import-redis", "--redis", rdb.Options().Addr, "--url", front, "--redis-wait", "0"}, noEnv, &out, &out, nil)
			rdb.ScriptKill(context.Background()) // for the busy one's server to stop
			failed := strings.Count(out.String(), "user not imported")
			if code != 1 || failed > 0 || !strings.Contains(out.String(), "import stopped") || strings.Contains(out.String(), "import done") ||
				!regexp.MustCompile(`redis (at 127\.0\.0\.1:\d+: (TYPE|scan of set) seen:u\d+|SCAN): .*`+tc.want+`.*(run it again|run the import again) to finish it`).MatchString(out.String()) {
				t.Fatalf("exit %d with %d users logged as not imported, want 1, none, the import stopped and Redis named:\n%.3000s", code, failed, out.String())
			}
			// Redis's message may end in a period (BUSY's does): the
			// error's sentence goes on without a stray one.
			if strings.Contains(out.String(), ".;") || strings.Contains(out.String(), ". (") {
				t.Errorf("a period inside the error's sentence:\n%.3000s", out.String())
			}
			// The summary's keys are those gone through, not those SCAN
			// listed and the stop left untried.
			m := regexp.MustCompile(`msg="seenapi: import stopped" keys=(\d+) users=(\d+) .*skipped=(\d+) failed=(\d+) `).FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("no summary of the stopped import:\n%.3000s", out.String())
			}
			n := make([]int, 4)
			for i := range n {
				n[i], _ = strconv.Atoi(m[i+1])
			}
			if n[0] != n[1]+n[2]+n[3] {
				t.Errorf("summary keys=%d, want users+skipped+failed = %d: %s", n[0], n[1]+n[2]+n[3], m[0])
			}
		})
	}
}

// fillSeen adds n users to rdb, seen:u0 to seen:u<n-1>, each a set of the
// items a and b.
func fillSeen(t *testing.T, rdb *redis.Client, n int) {
	t.Helper()
	pipe := rdb.Pipeline()
	for u := range n {
		pipe.SAdd(context.Background(), fmt.Sprint("seen:u", u), "a", "b")
	}
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// faultAt starts a proxy in front of s (see frontOf) that calls fault at
// the nth recording, in the middle of an import, and returns its URL.
func faultAt(t *testing.T, s *service, n int32, fault func()) string {
	t.Helper()
	var calls atomic.Int32
	return frontOf(t, s, func(http.ResponseWriter) bool {
		if calls.Add(1) == n {
			fault()
		}
		return false
	})
}

// replicate makes rdb a replica of master that serves no stale data (it
// answers MASTERDOWN while its master is away), once it has master's keys.
func replicate(t *testing.T, rdb *redis.Client, master *bench.RedisServer) {
	t.Helper()
	ctx := context.Background()
	host, port, _ := net.SplitHostPort(master.Addr)
	if err := rdb.ConfigSet(ctx, "replica-serve-stale-data", "no").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ReplicaOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := rdb.Info(ctx, "replication").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica has not synced with its master in 10 s:\n%s", info)
		}
	}
}

// saveAndKill saves rdb's keys to an RDB file (SAVE) and kills srv, its
// server, as a crash would; it returns once the port refuses connections,
// with the directory of the file, for restartRedis.
func saveAndKill(rdb *redis.Client, srv *bench.RedisServer) (dir string, err error) {
	ctx := context.Background()
	cfg, err := rdb.ConfigGet(ctx, "dir").Result()
	// A master whose replica has just synced may still be ending the
	// background save that fed it (its child not yet reaped), which SAVE
	// refuses: it is waited for.
	for deadline := time.Now().Add(10 * time.Second); err == nil; time.Sleep(20 * time.Millisecond) {
		err = rdb.Save(ctx).Err()
		if err == nil || !strings.Contains(err.Error(), "Background save already in progress") || time.Now().After(deadline) {
			break
		}
		err = nil
	}
	if err == nil {
		err = syscall.Kill(srv.PID(), syscall.SIGKILL)
	}
	for deadline := time.Now().Add(10 * time.Second); err == nil; time.Sleep(10 * time.Millisecond) {
		c, derr := net.Dial("tcp", srv.Addr)
		if derr != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			err = errors.New("redis-server still listens 10 s after SIGKILL")
		}
	}
	return cfg["dir"], err
}

// restartRedis starts redis-server again on srv's port and directory
// (which srv, killed, left), loading the dump.rdb that SAVE wrote there,
// with args added to its command line (e.g. --user, which the RDB file
// does not keep).
func restartRedis(t *testing.T, srv *bench.RedisServer, dir string, args ...string) error {
	_, port, _ := net.SplitHostPort(srv.Addr)
	cmd := exec.Command("redis-server", append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--loglevel", "warning"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return nil
}

// noInfo is the ACL rules of a user that may run every command but INFO,
// for asImporter (and restartRedis's --user importer).
var noInfo = []string{"on", ">pw-of-importer", "~*", "&*", "+@all", "-info"}

// asImporter adds to rdb the user importer, of the ACL rules given, and
// returns the redis:// URL of rdb that logs in as it.
func asImporter(t *testing.T, rdb *redis.Client, rules []string) string {
	t.Helper()
	setUser := []any{"ACL", "SETUSER", "importer"}
	for _, rule := range rules {
		setUser = append(setUser, rule)
	}
	if err := rdb.Do(context.Background(), setUser...).Err(); err != nil {
		t.Fatal(err)
	}
	return "redis://importer:pw-of-importer@" + rdb.Options().Addr
}

// With --redis-wait 0, an import whose user may not run INFO, which tells
// a restart, still imports every key once across a restart that go-redis's
// own retries hide (killed and started again at once from its RDB file):
// with no run_id to read, the restart cannot stop the import, so each new
// connection is taken for one, as with the wait on (SCAN lists from the
// start again, skipping the keys listed); the old server's cursor would
// have left keys unimported in an import that says done.
func TestImportRedisWithoutINFOImportsEveryKeyOnceAcrossARestart(t *testing.T) {
	const users = 3000
	rdb, srv := startRedisServer(t)
	fillSeen(t, rdb, users)
	from := asImporter(t, rdb, noInfo)
	s := startService(t, nil, "--data-dir", t.TempDir())
	front := faultAt(t, s, 20, func() {
		dir, err := saveAndKill(rdb, srv)
		if err == nil {
			err = restartRedis(t, srv, dir, append([]string{"--user", "importer"}, noInfo...)...)
		}
		if err != nil {
			t.Error(err)
		}
	})
	var out bytes.Buffer
	code := run(context.Background(), []string{"import-redis", "--redis", from, "--url", front, "--redis-wait", "0"}, noEnv, &out, &out, nil)
	if want := fmt.Sprintf(`msg="seenapi: import done" keys=%d users=%d items=%d newly_seen=%d skipped=0 failed=0 `, users, users, 2*users, 2*users); code != 0 || !strings.Contains(out.String(), want) {
		t.Fatalf("exit %d, want 0 and %q:\n%.5000s", code, want, out.String())
	}
	for u := range users {
		if n := unseenOf(t, s, fmt.Sprint("u", u), []string{"a", "b"}); n != 0 {
			t.Fatalf("u%d has not seen %d of its items", u, n)
		}
	}
}

// An import rides out a Redis that stops answering for less than
// --redis-wait: a restart (killed after the 20th recording, in the middle
// of SCAN, and started again 3 s later (longer than go-redis's own retries, which hide a shorter outage) on the same port from the RDB
// file it saved, as a Redis with persistence comes back), or a script
// running BUSY for 3 s. Every key is imported once: the restarted
// Redis's hash seed is new, so the cursor of SCAN the import held would
// list some keys twice and others never (SCAN starts again, skipping the
// keys listed), and the summary counts each user and item once. So too
// when the import's user may not run INFO (an ACL), which tells a
// restart: each new connection is then taken for one; and when the import
// reads a replica that serves no stale data and whose master restarts: the
// replica answers MASTERDOWN, then LOADING, until it has the master's keys.
func TestImportRedisWaitsOutARedisOutage(t *testing.T) {
	const users = 3000
	// restart kills Redis, having saved its keys, for recovery to start
	// it again with args.
	restart := func(args ...string) func(*redis.Client, *bench.RedisServer) (func() error, error) {
		return func(rdb *redis.Client, srv *bench.RedisServer) (func() error, error) {
			dir, err := saveAndKill(rdb, srv)
			return func() error { return restartRedis(t, srv, dir, args...) }, err
		}
	}
	for _, tc := range []struct {
		name string
		// fault makes the outage; its end, 3 s later, is recovery's.
		fault     func(*redis.Client, *bench.RedisServer) (recovery func() error, err error)
		restarted bool
		user      []string // the ACL rules of the import's user, importer; none: the default user
		replica   bool     // the import reads a replica; fault is its master's
	}{
		{"restarted", restart(), true, nil, false},
		{"restarted, INFO refused", restart(append([]string{"--user", "importer"}, noInfo...)...), false, noInfo, false},
		{"master down", restart(), false, nil, true},
		{"busy", func(rdb *redis.Client, _ *bench.RedisServer) (func() error, error) {
			go rdb.Eval(context.Background(), "while true do end", nil)
			return func() error { return rdb.ScriptKill(context.Background()).Err() }, nil
		}, false, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb, srv := startRedisServer(t)
			if err := rdb.ConfigSet(context.Background(), "busy-reply-threshold", "100").Err(); err != nil {
				t.Fatal(err)
			}
			faulty, faultySrv := rdb, srv
			if tc.replica {
				faulty, faultySrv = startRedisServer(t)
				fillSeen(t, faulty, users)
				replicate(t, rdb, faultySrv)
			} else {
				fillSeen(t, rdb, users)
			}
			from := rdb.Options().Addr
			if tc.user != nil {
				from = asImporter(t, rdb, tc.user)
			}
			s := startService(t, nil, "--data-dir", t.TempDir())
			recovered := make(chan error, 1)
			front := faultAt(t, s, 20, func() {
				recovery, err := tc.fault(faulty, faultySrv)
				if err != nil {
					recovered <- err
					return
				}
				time.AfterFunc(3*time.Second, func() { recovered <- recovery() })
			})
			var out bytes.Buffer
			code := run(context.Background(), []string{"import-redis", "--redis", from, "--url", front, "--redis-wait", "30s"},
				noEnv, &out, &out, nil)
			select {
			case err := <-recovered:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no outage made, or not ended:\n%.5000s", out.String())
			}
			if want := fmt.Sprintf(`msg="seenapi: import done" keys=%d users=%d items=%d newly_seen=%d skipped=0 failed=0 `, users, users, 2*users, 2*users); code != 0 || !strings.Contains(out.String(), want) {
				t.Fatalf("exit %d, want 0 and %q:\n%.5000s", code, want, out.String())
			}
			if n, m := strings.Count(out.String(), "redis does not answer; waiting for it"), strings.Count(out.String(), "redis answers again"); n != 1 || m != 1 {
				t.Errorf("logged %d times that it waits and %d times that Redis answers again, want once each:\n%.5000s", n, m, out.String())
			}
			if got := strings.Contains(out.String(), "redis answers as another server"); got != tc.restarted {
				t.Errorf("logged that Redis is another server: %v, want %v:\n%.5000s", got, tc.restarted, out.String())
			}
			if tc.replica && !strings.Contains(out.String(), `waiting for it" err="MASTERDOWN`) {
				t.Errorf("the replica did not answer MASTERDOWN while its master was away:\n%.5000s", out.String())
			}
			if n, want := strings.Count(out.String(), "redis refuses INFO"), len(tc.user) > 0; n > 1 || (n == 1) != want {
				t.Errorf("logged %d times that Redis refuses INFO, want once: %v:\n%.5000s", n, want, out.String())
			}
			for u := range users {
				if n := unseenOf(t, s, fmt.Sprint("u", u), []string{"a", "b"}); n != 0 {
					t.Fatalf("u%d has not seen %d of its items", u, n)
				}
			}
		})
	}
}

// An import started with its Redis (which does not listen yet: connection
// refused) waits for it as for one that stops answering meanwhile, up to
// --redis-wait, and imports every key once it answers.
func TestImportRedisWaitsForARedisNotUpYet(t *testing.T) {
	const users = 100
	rdb, srv := startRedisServer(t)
	fillSeen(t, rdb, users)
	dir, err := saveAndKill(rdb, srv)
	if err != nil {
		t.Fatal(err)
	}
	s := startService(t, nil, "--data-dir", t.TempDir())
	started := make(chan error, 1)
	// 5 s: longer than go-redis's own retries of a refused dial (up to
	// 4 tries of a command, each dialling 5 times), which hide a shorter wait.
	time.AfterFunc(5*time.Second, func() { started <- restartRedis(t, srv, dir) })
	ctx := context.Background()
	var out bytes.Buffer
	code := run(ctx, []string{"import-redis", "--redis", srv.Addr, "--url", s.url, "--redis-wait", "30s"}, noEnv, &out, &out, nil)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`msg="seenapi: import done" keys=%d users=%d items=%d `, users, users, 2*users); code != 0 || !strings.Contains(out.String(), want) {
		t.Fatalf("exit %d, want 0 and %q:\n%.3000s", code, want, out.String())
	}
	if !strings.Contains(out.String(), "redis does not answer; waiting for it") || !strings.Contains(out.String(), "redis answers again") {
		t.Errorf("the log does not say that the import waited for Redis:\n%.3000s", out.String())
	}
	for u := range users {
		if n := unseenOf(t, s, fmt.Sprint("u", u), []string{"a", "b"}); n != 0 {
			t.Fatalf("u%d has not seen %d of its items", u, n)
		}
	}
}

// A Redis that never answers within --redis-wait (not up when the import
// starts) stops the import saying how long it waited for it to answer, not
// to answer "again": it never did.
func TestImportRedisSaysItWaitedForARedisThatNeverAnswered(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String() // a port where nothing listens, once closed
	l.Close()
	s := startService(t, nil, "--data-dir", t.TempDir())
	var out bytes.Buffer
	code := run(context.Background(), []string{"import-redis", "--redis", addr, "--url", s.url, "--redis-wait", "1s"}, noEnv, &out, &out, nil)
	want := "redis at " + addr + ": dial tcp " + addr + ": connect: connection refused; waited 1s (--redis-wait) for it to answer\""
	if code != 1 || !strings.Contains(out.String(), want) {
		t.Fatalf("exit %d, want 1 and %s:\n%.3000s", code, want, out.String())
	}
}

// A Redis that stays away past --redis-wait stops the import with Redis's
// error, saying how long it waited.
func TestImportRedisStopsWhenRedisStaysAwayPastTheWait(t *testing.T) {
	rdb, srv := startRedisServer(t)
	fillSeen(t, rdb, 3000)
	s := startService(t, nil, "--data-dir", t.TempDir())
	var killed time.Time
	front := faultAt(t, s, 20, func() {
		killed = time.Now()
		if err := syscall.Kill(srv.PID(), syscall.SIGKILL); err != nil {
			t.Error(err)
		}
	})
	var out bytes.Buffer
	code := run(context.Background(), []string{"import-redis", "--redis", rdb.Options().Addr, "--url", front, "--redis-wait", "2s"}, noEnv, &out, &out, nil)
	took := time.Since(killed)
	want := regexp.MustCompile(`redis (at 127\.0\.0\.1:\d+: (TYPE|scan of set) seen:u\d+|SCAN): .*connection refused; waited 2s \(--redis-wait\) for it to answer again[;(].*run (it|the import) again to finish it`)
	if code != 1 || !want.MatchString(out.String()) || strings.Contains(out.String(), "import done") {
		t.Fatalf("exit %d, want 1 and an error matching %s:\n%.5000s", code, want, out.String())
	}
	if took < 2*time.Second {
		t.Errorf("stopped %v after Redis was killed, before --redis-wait 2s", took)
	}
	if n := strings.Count(out.String(), "redis does not answer; waiting for it"); n != 1 || strings.Contains(out.String(), "redis answers again") {
		t.Errorf("logged %d times that it waits, want once, and never that Redis answers again:\n%.5000s", n, out.String())
	}
}

// The keys an import lists are each added once to those it remembers: a
// key listed again (by one SCAN while Redis grows its table, or by the
// SCAN that starts over after a restart) is found, whichever of its
// hash's neighbours came before or after it.
func TestImportRedisRemembersEachListedKeyOnce(t *testing.T) {
	const n = 200_000
	listed := newListedKeys()
	rng := rand.New(rand.NewPCG(1, 2))
	order := append(rng.Perm(n), rng.Perm(n)...)
	added := make([]bool, n)
	for i, k := range order {
		if got := listed.add(fmt.Sprint("seen:u", k)); got == added[k] {
			t.Fatalf("add %d (seen:u%d) = %v, want %v", i, k, got, !added[k])
		}
		added[k] = true
	}
}
