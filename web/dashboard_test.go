package web_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/seenapi/seenapi/client"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// fragment is the page's deep link to a user, encoded as the page encodes it
// (encodeURIComponent; the page decodes any %XX).
func fragment(ns, user string) string {
	return "#/ns/" + ns + "/users/" + strings.ReplaceAll(url.QueryEscape(user), "+", "%20")
}

// userItems returns the user's item count from the API, or -1 when the user is unknown.
func userItems(t *testing.T, s *suite, ns, user string) int64 {
	t.Helper()
	resp, err := s.svc.api(t, s.keys.read).GetUserWithResponse(context.Background(), ns, user)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case resp.JSON200 != nil:
		return resp.JSON200.Items
	case resp.StatusCode() == http.StatusNotFound:
		return -1
	}
	t.Fatalf("get user: HTTP %d: %s", resp.StatusCode(), resp.Body)
	return 0
}

// The inspector of a namespace lists its users, each linking to its page,
// a page at a time: 51 users, whose ids sort before the other tests', fill
// the first page of 50 and one more comes with "More users", which gives
// it the focus. Choosing another namespace lists its users instead.
func TestInspectorListsTheNamespacesUsers(t *testing.T) {
	s := setup(t)
	prefix := "!list " + userID(t) + " " // '!' and ' ' sort before the other tests' ids
	var ids []string
	for i := range 51 {
		ids = append(ids, fmt.Sprintf("%s%02d", prefix, i))
		s.svc.record(t, s.keys.write, "classic", ids[i], "i:1")
	}
	// They go with the test: those of an earlier run of it (go test
	// -count) sort before these and would fill the first page.
	t.Cleanup(func() {
		admin := s.svc.api(t, s.keys.admin)
		for _, id := range ids {
			r, err := admin.ForgetUserWithResponse(context.Background(), "classic", id)
			if err != nil {
				t.Fatal(err)
			}
			if r.StatusCode() != http.StatusNoContent {
				t.Errorf("erase %q: %s %s", id, r.Status(), r.Body)
			}
		}
	})
	tb := s.readTab(t)
	tb.open("#/ns/classic")
	tb.waitJS(`document.querySelectorAll('#user-list a').length === 50`, "the first page of 50 users")
	links := eval[[]string](tb, `[...document.querySelectorAll('#user-list a')].map((a) => a.textContent)`)
	if !slices.Equal(links, ids[:50]) {
		t.Fatalf("first page %q, want the 50 first of %q", links, ids)
	}
	if !strings.Contains(tb.text("#user-list-note"), "more after these") {
		t.Errorf("note %q does not say more users follow", tb.text("#user-list-note"))
	}
	// Each row gives the user's summary: one item, recorded moments ago,
	// its filter's memory, in memory.
	row := eval[[]string](tb, `[...document.querySelector('#user-list tbody tr').children].map((c) => c.textContent)`)
	if len(row) != 5 || row[0] != ids[0] || row[1] != "1" || !strings.Contains(row[2], " ago)") ||
		!regexp.MustCompile(`^[0-9.]+\x{a0}(B|KiB)$`).MatchString(row[3]) || row[4] != "yes" {
		t.Errorf("the first user's row reads %q", row)
	}
	tb.click("#user-list-more")
	tb.waitJS(`[...document.querySelectorAll('#user-list a')].some((a) => a.textContent === `+strconv.Quote(ids[50])+`)`, "the 51st user after More")
	// The focus goes on from the first user added, not to the page's body.
	if got := eval[string](tb, `document.activeElement.closest('#user-list') ? document.activeElement.textContent : document.activeElement.tagName`); got != ids[50] {
		t.Errorf("after More users the focus is on %q, want the 51st user's link", got)
	}
	// Each name links to the user's page.
	tb.click(`#user-list a`)
	tb.waitText("#user-items", "1")
	if got, want := eval[string](tb, "decodeURIComponent(location.hash)"), "#/ns/classic/users/"+ids[0]; got != want {
		t.Errorf("the first link led to %q, want %q", got, want)
	}
	// Another namespace chosen: its users, not these.
	tb.open("#/users")
	tb.waitJS(`!!document.querySelector('#lookup-ns option[value="small"]')`, "the namespace list")
	eval[bool](tb, `(() => { const sel = document.querySelector('#lookup-ns'); sel.value = 'small'; return sel.dispatchEvent(new Event('change')); })()`)
	tb.waitText("#user-list-title", "Users in small")
	tb.waitJS(`!document.querySelector('#user-list-note').textContent.startsWith('Loading')`, "the list of small")
	if got := eval[int](tb, `[...document.querySelectorAll('#user-list a')].filter((a) => a.textContent.startsWith(`+strconv.Quote(prefix)+`)).length`); got != 0 {
		t.Errorf("the list of small shows %d users of classic", got)
	}
}

// classicTab records an item for a user in the namespace classic, on a
// service of the test's own, and opens a tab of it on the dashboard with a
// read key limited to classic; it returns the tab, the service, its write
// key and the user.
func (s *suite) classicTab(t *testing.T) (tb *tab, svc *service, write, user string) {
	t.Helper()
	read := newKey()
	write = newKey()
	svc = s.keyedService(t, "read:"+read+" namespaces=classic\nwrite:"+write+"\n")
	user = userID(t)
	svc.record(t, write, "classic", user, "a")
	tb = s.newTab(t, svc)
	tb.open("")
	tb.useKey(read)
	return tb, svc, write, user
}

// The user inspector of a key limited to a namespace other than default
// lists the users of the namespace its select shows, one the key may call,
// not default's (which the key is refused).
func TestInspectorOfAKeyLimitedToANamespaceListsItsUsers(t *testing.T) {
	s := setup(t)
	tb, _, _, user := s.classicTab(t)
	tb.open("#/users")
	tb.waitJS(`[...document.querySelectorAll('#user-list a')].some((a) => a.textContent === `+strconv.Quote(user)+`)`,
		"classic's user in the list")
	if got := tb.text("#user-list-title"); got != "Users in classic" {
		t.Errorf("the list is titled %q", got)
	}
	if got := eval[string](tb, `document.querySelector('#lookup-ns').value`); got != "classic" {
		t.Errorf("the select shows %q", got)
	}
	if got := tb.text("#user .problem"); got != "" {
		t.Errorf("the inspector shows the problem %q", got)
	}
	if got := tb.namespacesCalled(); !slices.Equal(got, []string{"classic"}) {
		t.Errorf("the page called the routes of namespaces %q, want classic's alone", got)
	}
}

// namespacesCalled returns the namespaces whose routes (/v1/namespaces/{ns}...) the page
// has called so far, sorted, each once.
func (tb *tab) namespacesCalled() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var names []string
	for _, id := range tb.order {
		u, err := url.Parse(tb.exchanges[id].url)
		if err != nil {
			continue
		}
		if rest, ok := strings.CutPrefix(u.EscapedPath(), "/v1/namespaces/"); ok {
			ns, _, _ := strings.Cut(rest, "/")
			if !slices.Contains(names, ns) {
				names = append(names, ns)
			}
		}
	}
	slices.Sort(names)
	return names
}

// A key whose namespaces= names only what no namespace is served under, a
// name as long as a key among them (a second key given without its role,
// which GET /v1/auth leaves out), is shown as calling no served namespace,
// and the name is nowhere on the page.
func TestAKeyLimitedToNoServedNamespaceSaysSo(t *testing.T) {
	s := setup(t)
	const swallowed = "second0key0given0without0its0role"
	read := newKey()
	svc := s.keyedService(t, "read:"+read+" namespaces="+swallowed+"\n")

	tb := s.newTab(t, svc)
	tb.open("")
	tb.useKey(read)
	tb.waitText("#role", "role: read · no served namespace")
	tb.open(fragment("default", userID(t)))
	got := tb.waitText("#ns-barred", "default")
	if want := "This key cannot call namespace default: it may call no served namespace. "; !strings.HasPrefix(got, want) {
		t.Errorf("the page says %q, want it to begin %q", got, want)
	}
	if html := eval[string](tb, `document.documentElement.outerHTML`); strings.Contains(html, swallowed) {
		t.Errorf("the page shows the name %s", swallowed)
	}
}

// A user page whose address names a namespace the key may not call says so
// plainly and does not offer that namespace in the select, nor call it (each
// call would be refused 403).
func TestInspectorSaysTheKeyCannotCallTheNamespaceOfTheAddress(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "feed", user, "a")
	tb := s.keyTab(t, s.keys.limited, "")
	tb.open(fragment("feed", user)) // a fresh load: the key's check and the page start together
	got := tb.waitText("#ns-barred", "feed")
	if want := "This key cannot call namespace feed: it may call namespace default only."; !strings.HasPrefix(got, want) {
		t.Errorf("the page says %q, want it to begin %q", got, want)
	}
	tb.waitJS(`!!document.querySelector('#lookup-ns option[value="default"]')`, "the namespace list")
	if got := eval[[]string](tb, `[...document.querySelectorAll('#lookup-ns option')].map((o) => o.value)`); slices.Contains(got, "feed") {
		t.Errorf("the select offers %q, feed among them", got)
	}
	if got := eval[string](tb, `document.querySelector('#lookup-user').value`); got != user {
		t.Errorf("the user field holds %q, want the address's %q", got, user)
	}
	tb.waitJS(`!document.querySelector('#user-list-note') || !document.querySelector('#user-list-note').textContent.startsWith('Loading')`, "the list of users")
	tb.mu.Lock()
	for _, id := range tb.order {
		if x := tb.exchanges[id]; strings.Contains(x.url, "/v1/namespaces/feed") {
			t.Errorf("the page called %s %s", x.method, strings.TrimPrefix(x.url, tb.base))
		}
	}
	tb.mu.Unlock()
}

// The page of a namespace the key may not call, opened without a user, says
// so and lists the users of a namespace the key may call, one of its own:
// not default's, which it may not call either, each call refused 403 and
// counted in the service's errors.
func TestANamespacePageTheKeyCannotCallListsOneItCan(t *testing.T) {
	s := setup(t)
	tb, svc, write, user := s.classicTab(t)
	tb.open("#/ns/feed") // a fresh load: the key's check and the page start together
	got := tb.waitText("#ns-barred", "feed")
	if want := "This key cannot call namespace feed: it may call namespace classic only."; !strings.HasPrefix(got, want) {
		t.Errorf("the page says %q, want it to begin %q", got, want)
	}
	tb.waitJS(`[...document.querySelectorAll('#user-list a')].some((a) => a.textContent === `+strconv.Quote(user)+`)`,
		"classic's user in the list")
	if got := tb.text("#user-list-title"); got != "Users in classic" {
		t.Errorf("the list is titled %q", got)
	}
	if got := eval[[]string](tb, `[...document.querySelectorAll('#lookup-ns option')].map((o) => o.value)`); !slices.Equal(got, []string{"classic"}) {
		t.Errorf("the select offers %q, want classic alone", got)
	}
	if got := tb.namespacesCalled(); !slices.Equal(got, []string{"classic"}) {
		t.Errorf("the page called the routes of namespaces %q, want classic's alone", got)
	}
	r, err := svc.api(t, write).GetStatsWithResponse(context.Background())
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	if n := r.JSON200.Errors["403"]; n != 0 {
		t.Errorf("the service counts %d 403 answers", n)
	}
}

// On a slow service, the user inspector says it is loading while the key's
// role is asked (the page waits for it, to know which namespaces the key may
// call), instead of an empty page under the form.
func TestTheInspectorSaysItIsLoadingWhileTheKeyIsChecked(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "default", user, "a")
	svc, hold, answer := s.slowAuth(t)
	tb := s.newTab(t, svc)
	tb.open("")
	tb.useKey(s.keys.read)
	hold()
	tb.open(fragment("default", user))
	tb.waitText("#role", "checking")
	// Well before the page gives the check up (ANSWER_MS, 10 s) and goes on without it.
	tb.waitJSWithin(`document.querySelector('#user').textContent.includes('Loading')`, "the inspector to say it is loading", 5*time.Second)
	answer()
	tb.waitText("#user-items", "1")
}

// reverseProxy passes what it serves on to the service at base, as a proxy
// in front of it would.
func reverseProxy(t *testing.T, base string) *httputil.ReverseProxy {
	t.Helper()
	up, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return httputil.NewSingleHostReverseProxy(up)
}

// slowAuth serves the suite's service through a proxy that, from hold on,
// holds every GET /v1/auth until answer: the page's check of the key's role
// on a slow service.
func (s *suite) slowAuth(t *testing.T) (svc *service, hold, answer func()) {
	t.Helper()
	pass := reverseProxy(t, s.svc.base)
	var held atomic.Bool
	release := make(chan struct{})
	var once sync.Once
	answer = func() { once.Do(func() { close(release) }) }
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/auth" && held.Load() {
			<-release
		}
		pass.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	t.Cleanup(answer) // before the proxy closes, which waits for the requests it holds
	return &service{base: proxy.URL}, func() { held.Store(true) }, answer
}

// The answer to the page's check of the role, coming while a key is typed,
// leaves the focus in the key's field: the inspector gave it to the user
// id's field, where the key's last characters then went.
func TestTheRolesAnswerLeavesTheFocusWhereTheUserTypes(t *testing.T) {
	s := setup(t)
	svc, hold, answer := s.slowAuth(t)
	tb := s.newTab(t, svc)
	tb.open("")
	tb.useKey(s.keys.read)
	hold()
	tb.open("#/users")
	tb.waitText("#role", "checking")
	key := s.keys.write
	tb.fill("#key-input", key[:len(key)/2])
	answer()
	// The list is drawn as the field would be given the focus, in the same task.
	tb.waitJS(`!!document.querySelector('#user-list')`, "the inspector, drawn once the role is known")
	tb.do("type the rest of the key", chromedp.KeyEvent(key[len(key)/2:]))
	if got := eval[string](tb, `document.activeElement.id || document.activeElement.tagName`); got != "key-input" {
		t.Errorf("after the role's answer the focus is on %s, want the key's field, where the key was being typed", got)
	}
	if got := eval[string](tb, `document.querySelector('#key-input').value`); got != key {
		t.Errorf("the key's field holds %q after %q was typed (%q went to the user id's field)", got, key, eval[string](tb, `document.querySelector('#lookup-user').value`))
	}
}

func TestLookUpFormLinksToTheUser(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "default", user, "i:1", "i:2", "i:3")

	tb := s.keyTab(t, s.keys.read, "#/users")
	tb.waitJS(`!!document.querySelector('#lookup-ns option[value="default"]')`, "the namespace list")
	tb.do("choose the namespace", chromedp.SetValue(chromedp.CSS("#lookup-ns"), "default"))
	tb.fill("#lookup-user", user)
	tb.click(`#lookup button[type="submit"]`)

	tb.waitText("#user-items", "3")
	if got, want := eval[string](tb, "location.hash"), fragment("default", user); got != want {
		t.Errorf("after the lookup the address is %q, want the deep link %q", got, want)
	}
}

// The look-up takes the user id as typed: a user whose id begins with a
// space (which the service takes) is found, not the user without it, and
// its title says the space is there.
func TestLookUpKeepsTheSpacesOfAnID(t *testing.T) {
	s := setup(t)
	user := " " + userID(t)
	s.svc.record(t, s.keys.write, "default", user, "i:1")

	lookUpSpacedID(t, s.keyTab(t, s.keys.read, "#/users"), "default", user, "1", "(the id begins with a space)")
}

// lookUpSpacedID looks up user in ns with the inspector's form, waits for
// its page to show items items, and checks its address and the title's
// note of the id's spaces.
func lookUpSpacedID(t *testing.T, tb *tab, ns, user, items, note string) {
	t.Helper()
	tb.waitJS(`!!document.querySelector('#lookup-ns option[value="`+ns+`"]')`, "the namespace list")
	tb.do("choose "+ns, chromedp.SetValue(chromedp.CSS("#lookup-ns"), ns))
	tb.fill("#lookup-user", user)
	tb.click(`#lookup button[type="submit"]`)
	tb.waitText("#user-items", items)
	if got, want := eval[string](tb, "location.hash"), fragment(ns, user); got != want {
		t.Errorf("after the lookup the address is %q, want %q", got, want)
	}
	if got := tb.text("#user-space"); got != note {
		t.Errorf("the title's note reads %q, want %q", got, note)
	}
}

// An empty user id is no id, and a key of nothing no key: rather than do
// nothing, the look-up says so in the page, and the key in the banner as
// its other errors, each tied to its field as the page's other errors of a
// field (the browser's own check of the required field, which stopped the
// look-up before the page's, left the field said valid to a screen reader;
// its bubble of the key's left the field described by its role alone);
// typing again clears it.
func TestAnEmptyLookUpOrKeySaysWhy(t *testing.T) {
	s := setup(t)
	tb := s.keyTab(t, s.keys.read, "#/users")
	tb.fill("#lookup-user", "")
	tb.click(`#lookup button[type="submit"]`)
	const want = "Enter a user id."
	if got := tb.waitText("#lookup-empty", "Enter"); got != want {
		t.Errorf("the empty look-up says %q, want %q", got, want)
	}
	tb.wantTied("#lookup-user", "after an empty look-up", want)
	if got := eval[string](tb, `document.activeElement.id`); got != "lookup-user" {
		t.Errorf("after an empty look-up the focus is on %q, want the user id's field", got)
	}
	if got := eval[string](tb, "location.hash"); got != "#/users" {
		t.Errorf("the empty look-up went to %q", got)
	}
	tb.do("type a letter", chromedp.SendKeys(chromedp.CSS("#lookup-user"), "a"))
	tb.wantUntied("#lookup-user", "after typing", want, "")
	if eval[bool](tb, `!!document.querySelector('#lookup-empty')`) {
		t.Errorf("after typing the page still says %q", tb.text("#lookup-empty"))
	}

	tb.fill("#key-input", "  ")
	tb.click(`#key-form button[type="submit"]`)
	const noKey = "Paste a key first: the field is empty."
	tb.wantTied("#key-input", "after a key of spaces", noKey)
	if got := tb.waitText("#banner-detail", "Paste"); got != noKey {
		t.Errorf("the banner says %q, want %q", got, noKey)
	}
	if got := eval[string](tb, `document.activeElement.id`); got != "key-input" {
		t.Errorf("after a key of spaces the focus is on %q, want the key's field", got)
	}
	tb.do("type a letter", chromedp.SendKeys(chromedp.CSS("#key-input"), "a"))
	tb.wantUntied("#key-input", "after typing", noKey, "")
	if !eval[bool](tb, `document.querySelector('#banner').hidden`) {
		t.Errorf("after typing the banner still says %q", tb.text("#banner"))
	}
	if got := tb.text("#role"); got != "role: read" {
		t.Errorf("the role reads %q, want the read key's still", got)
	}
}

// recordItems records n items ("item:0", ...) for user in the default
// namespace and returns the user's stats as the API gives them.
func (s *suite) recordItems(t *testing.T, ns, user string, n int) *client.UserStats {
	t.Helper()
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("item:%d", i)
	}
	s.svc.record(t, s.keys.write, ns, user, items...)
	resp, err := s.svc.api(t, s.keys.read).GetUserWithResponse(context.Background(), ns, user)
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("get user: %v %s", err, resp.Body)
	}
	return resp.JSON200
}

// readTab opens a tab on the dashboard with the read key in use.
func (s *suite) readTab(t *testing.T) *tab {
	t.Helper()
	return s.keyTab(t, s.keys.read, "")
}

// keyTab opens a tab of the shared service on the dashboard at frag,
// then enters key (the page is first drawn without it, as for someone
// following a link).
func (s *suite) keyTab(t *testing.T, key, frag string) *tab {
	t.Helper()
	tb := s.newTab(t, nil)
	tb.open(frag)
	tb.useKey(key)
	return tb
}

// userTab records items (distinct) for a user no other test uses, in the
// namespace ns, and opens its page in a tab with key, once it shows them;
// it returns the tab and the user.
func (s *suite) userTab(t *testing.T, key, ns string, items ...string) (*tab, string) {
	t.Helper()
	user := userID(t)
	s.svc.record(t, s.keys.write, ns, user, items...)
	tb := s.keyTab(t, key, fragment(ns, user))
	tb.waitText("#user-items", strconv.Itoa(len(items)))
	return tb, user
}

// showUser opens the page of user, of namespace ns, and waits until it
// shows the user's items.
func (tb *tab) showUser(ns, user string, items int) {
	tb.t.Helper()
	tb.open(fragment(ns, user))
	tb.waitText("#user-items", strconv.Itoa(items))
}

// A user's page is read once, not followed: it says when it was read, and
// the footer, which follows the overview's figures every 2 s on every
// page, says whose they are there, so that it does not seem to speak of
// the user's.
func TestAUsersPageSaysWhenItWasRead(t *testing.T) {
	s := setup(t)
	tb, _ := s.userTab(t, s.keys.read, "default", "w:1")
	if got := tb.text("#user-read-at"); !regexp.MustCompile(`^As read at \d{1,2}:\d\d:\d\d`).MatchString(got) {
		t.Errorf("the user's page says %q, not when it was read", got)
	}
	if got := tb.waitText("#updated", "Figures updated"); !strings.HasSuffix(got, " · the overview's figures, not this page's") {
		t.Errorf("on a user's page the footer reads %q", got)
	}
	tb.click(`[data-nav="overview"]`)
	tb.waitJS(`!!document.querySelector('#card-calls')`, "the overview")
	if got := tb.text("#updated"); strings.Contains(got, "not this page's") {
		t.Errorf("on the overview the footer reads %q", got)
	}
}

func TestDeepLinkShowsTheUsersFilter(t *testing.T) {
	s := setup(t)
	user := "web/deep link é+?&#" + userID(t) // every character that needs encoding in a path or a fragment
	// 600 items fill the default (staged) filter's first layer (512), which
	// is sealed, and start a second.
	api := s.recordItems(t, "default", user, 600)
	tb := s.readTab(t)
	tb.showUser("default", user, int(api.Items))
	if got := tb.text("#user-title"); !strings.Contains(got, user) {
		t.Errorf("title %q does not name the user %q", got, user)
	}
	if api.Layers != 2 {
		t.Fatalf("600 items made %d layers; the test wants two", api.Layers)
	}
	if got := eval[int](tb, `document.querySelectorAll('#layers .layer .bar').length`); got != api.Layers {
		t.Errorf("%d layer fill bars, the API says %d layers", got, api.Layers)
	}
	// The sealed layer is a Bloom layer of several hashes, the staged one a
	// set of fingerprints.
	details := eval[[]string](tb, `[...document.querySelectorAll('#layers .layer-detail')].map((d) => d.textContent)`)
	if len(details) != 2 || !strings.Contains(details[0], "512 of 512\u00a0items") || !strings.Contains(details[0], "\u00a0hashes · ") || !strings.Contains(details[1], "a fingerprint an item") {
		t.Errorf("layer details %q, want a full Bloom layer of hashes then one of fingerprints", details)
	}
	if got := tb.text("#user-fp-target"); got != "1%" {
		t.Errorf("target FP rate shown as %q, want 1%%", got)
	}
	if got := tb.text("#user-fp"); !strings.HasSuffix(got, "%") {
		t.Errorf("FP rate now shown as %q, want a percentage", got)
	}
	for _, sel := range []string{"#user-first", "#user-last"} {
		if got := tb.text(sel); !strings.Contains(got, "ago") {
			t.Errorf("%s = %q, want a time and how long ago", sel, got)
		} else if regexp.MustCompile(`\d:\d\d:\d\d`).MatchString(got) {
			t.Errorf("%s = %q shows seconds; the service keeps it to the minute", sel, got)
		} else if !regexp.MustCompile(`\(under (a minute|2\x{a0}min) ago\)$`).MatchString(got) {
			// Recorded moments ago, in a minute that began up to a minute before.
			t.Errorf("%s = %q, want it recorded under a minute (or 2 min) ago, not a count of seconds since the minute began", sel, got)
		}
	}
	if got := tb.text("#user-hot"); got != "hot" {
		t.Errorf("hot tag = %q, want hot (just recorded)", got)
	}
}

// TestFalsePositiveRateShowsItsShareOfTheTarget checks the share of the
// target a user's rate reads as: a small one nonzero, to two significant
// digits, not 0%; a whole one in tens with its zero, 30% not 3%.
func TestFalsePositiveRateShowsItsShareOfTheTarget(t *testing.T) {
	s := setup(t)
	tb := s.readTab(t)
	// The shares are those of a fresh filter of the Bloom kind (1% target):
	// seven items fill its first layer to about 0.0017%, 0.17% of the
	// target; 57 to about 0.3%, 30% of it.
	for _, tc := range []struct {
		items int
		ok    func(share float64) bool
		want  func(share float64) string
	}{
		{7, func(v float64) bool { return v >= 0.01 && v < 0.5 },
			func(v float64) string { return strconv.FormatFloat(v, 'g', 2, 64) }},
		{57, func(v float64) bool { return v >= 9.5 && math.Mod(math.Round(v), 10) == 0 },
			func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }},
	} {
		user := userID(t)
		st := s.recordItems(t, "classic", user, tc.items)
		share := float64(st.FpRate) / float64(st.TargetFpRate) * 100
		if !tc.ok(share) {
			t.Fatalf("%d items: the user's rate is %v%% of the target, not the share the test wants", tc.items, share)
		}
		tb.showUser("classic", user, tc.items)
		want := tc.want(share) + "% of the target rate."
		if got := tb.text("#user-fp-ratio"); got != want {
			t.Errorf("%d items: the rate's share of the target reads %q, want %q", tc.items, got, want)
		}
	}
}

// A share short of the whole does not read 100%: a hit ratio of one miss
// in 2,500 calls reads 99.96%. The miss is a user with a history, stored
// by a service before this one: a new user's first call is no miss.
func TestAShareShortOfTheWholeIsNotShownAs100(t *testing.T) {
	s := setup(t)
	data, user := "data-"+userID(t), userID(t)
	before, err := s.startServiceWith(data, s.keysArg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(before.stop)
	before.record(t, s.keys.write, "default", user, "a")
	before.stop()
	svc, tb := s.ownOverviewOf(t, data)
	c := svc.api(t, s.keys.read)
	for range 2500 { // the first finds the user cold: the miss
		if r, err := c.CheckSeenWithResponse(context.Background(), "default", user, client.ItemsRequest{Items: []string{"a"}}); err != nil || r.JSON200 == nil {
			t.Fatalf("check: %v", err)
		}
	}
	if got := tb.waitText("#card-hit-ratio .sub", "2,499\u00a0hits"); got != "99.96% since start · 2,499\u00a0hits, 1\u00a0miss" {
		t.Errorf("the hit ratio card reads %q, want 99.96%% since start · 2,499 hits, 1 miss", got)
	}
}

// The rates beside the bars keep to one line however long their text: a
// fresh user's rate, "< 0.0001%", broke onto two in a column sized for
// "100%".
func TestRatesBesideTheBarsKeepToOneLine(t *testing.T) {
	s := setup(t)
	tb := s.readTab(t)
	user := userID(t)
	s.recordItems(t, "classic", user, 3) // a Bloom filter: of a staged one, 3 items read 0.0011%
	tb.showUser("classic", user, 3)
	if got := tb.text("#user-fp"); got != "<\u00a00.0001%" {
		t.Fatalf("a 3-item user's rate reads %q; the test wants the longest text, < 0.0001%%", got)
	}
	if n := eval[int](tb, linesOf+`(document.querySelector('#user-fp'))`); n != 1 {
		t.Errorf("the rate %q takes %d lines, want 1", tb.text("#user-fp"), n)
	}
}

// A figure keeps to its word or unit in a phone's window: "cap 100,000
// items", "< 0.0001%", the overview's "3,099 evicted" and "Last 5 min" are
// joined by a no-break space, as "30 d" and "1.00 GiB" are, so that a line
// does not end in the figure and leave its word alone on the next.
func TestAFigureKeepsToItsWordOnAPhone(t *testing.T) {
	s := setup(t)
	tb := s.phoneTab(t)
	tb.waitText("#card-hit-ratio .sub", "since start")
	split := eval[[]string](tb, `[...document.querySelectorAll('.card .sub, #routes th')].map(e => e.textContent).filter(t => /[0-9] [a-z]/.test(t))`)
	if len(split) > 0 {
		t.Errorf("the overview has a figure and its word an ordinary space apart, which a line may break: %q", split)
	}
	if got := tb.text("#card-hit-ratio .sub"); !regexp.MustCompile(`[0-9]\x{a0}hits?, [0-9,]+\x{a0}miss`).MatchString(got) {
		t.Errorf("the hit ratio card reads %q, want each figure joined to its word by a no-break space", got)
	}
	windowed, fresh := userID(t), userID(t)
	s.svc.record(t, s.keys.write, "feed", windowed, "f:1")
	tb.showUser("feed", windowed, 1)
	if got, want := tb.text("#user-profile"), "cap 100,000\u00a0items"; !strings.Contains(got, want) {
		t.Errorf("profile line = %q, want the cap joined to its word: %q", got, want)
	}
	s.recordItems(t, "classic", fresh, 3)
	tb.showUser("classic", fresh, 3)
	if got, want := tb.text("#user-fp"), "<\u00a00.0001%"; got != want {
		t.Errorf("a 3-item user's rate reads %q, want %q", got, want)
	}
}

// In a phone's window a check's verdict beside an item too long for one
// line stays one line, at the item's first: "not seen" broke in two, in a
// pill stretched as tall as the item.
func TestAVerdictBesideALongItemKeepsToOneLine(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "default", user, "a")
	tb := s.phoneTab(t)
	tb.showUser("default", user, 1)
	tb.fill("#check-items", "a\nan-item-with-a-rather-long-name-"+strings.Repeat("0123456789abcdef", 3))
	tb.click(`#check-form button[type="submit"]`)
	tb.waitText("#check-result .done", " seen.")
	got := eval[[]string](tb, `[...document.querySelectorAll('#check-result .tag')].filter((e) => {
		return `+linesOf+`(e) > 1 || e.getBoundingClientRect().height > 1.5 * parseFloat(getComputedStyle(e).lineHeight);
	}).map((e) => e.textContent)`)
	if len(got) > 0 {
		t.Errorf("verdicts %q take more than one line beside a long item, want each on one", got)
	}
}

func TestCheckSaysWhichItemsWereSeen(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "default", user, "i:a", "i:b,c")
	// An item id may hold a comma: the box takes one item a line.
	items := []string{"i:a", "i:never-shown", "i:b,c", "i:b"}
	resp, err := s.svc.api(t, s.keys.read).CheckSeenWithResponse(context.Background(), "default", user, client.ItemsRequest{Items: items})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("check: %v %s", err, resp.Body)
	}
	want := make([][]string, len(items))
	for i, it := range items {
		want[i] = []string{it, map[bool]string{true: "seen", false: "not seen"}[resp.JSON200.Seen[i]]}
	}
	if want[0][1] != "seen" || want[2][1] != "seen" || want[3][1] != "not seen" {
		t.Fatalf("the API forgot recorded items: %v", want)
	}

	tb := s.keyTab(t, s.keys.read, fragment("default", user))
	tb.waitText("#user-items", "2")
	tb.fill("#check-items", "i:a\ni:never-shown\n\ni:b,c\ni:b")
	tb.click(`#check-form button[type="submit"]`)

	tb.waitText("#check-result .done", "of 4 seen")
	got := eval[[][]string](tb, `[...document.querySelectorAll('#check-result li')].map((li) => [li.querySelector('code').textContent, li.querySelector('.tag').textContent])`)
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("page says %v, the API says %v", got, want)
	}
	if n := userItems(t, s, "default", user); n != 2 {
		t.Errorf("after a check the user has %d items, want 2 (a check records nothing)", n)
	}
}

// An item is its line as typed: the service takes spaces at an item's
// ends, so " sp " is an item apart from "sp". A check answers for the item
// typed and shows its spaces; a record marks it, not the item without them.
func TestItemsKeepTheSpacesAtTheirEnds(t *testing.T) {
	s := setup(t)
	tb, user := s.userTab(t, s.keys.write, "default", " sp ")
	tb.fill("#check-items", " sp \nsp")
	tb.click(`#check-form button[type="submit"]`)
	tb.waitText("#check-result .done", "of 2 seen")
	got := eval[[][]string](tb, `[...document.querySelectorAll('#check-result li')].map((li) => [li.querySelector('code').innerText, li.querySelector('.tag').textContent])`)
	if want := [][]string{{" sp ", "seen"}, {"sp", "not seen"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("the check shows %q, want %q", got, want)
	}

	tb.fill("#record-items", "  r:1\nr:2 ")
	tb.click(`#record-form button[type="submit"]`)
	tb.waitText("#record-result .done", "Recorded 2 new")
	items := []string{"  r:1", "r:2 ", "r:1", "r:2"}
	resp, err := s.svc.api(t, s.keys.read).CheckSeenWithResponse(context.Background(), "default", user, client.ItemsRequest{Items: items})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("check: %v %s", err, resp.Body)
	}
	if want := []bool{true, true, false, false}; !slices.Equal(resp.JSON200.Seen, want) {
		t.Errorf("after recording %q the API says %q seen: %v, want %v", items[:2], items, resp.JSON200.Seen, want)
	}
}

// A line of spaces alone before another item is an item, as the service
// takes it: the page sends it and shows how many spaces it is; only empty
// lines separate.
func TestALineOfSpacesIsAnItem(t *testing.T) {
	s := setup(t)
	tb, user := s.userTab(t, s.keys.write, "default", "   ")
	tb.fill("#check-items", "   \n \n\nsp")
	tb.click(`#check-form button[type="submit"]`)
	tb.waitText("#check-result .done", " seen.")
	if got := tb.text("#check-result .done"); got != "1 of 3 seen." {
		t.Errorf("the check says %q, want 1 of 3 seen.", got)
	}
	got := eval[[][]string](tb, `[...document.querySelectorAll('#check-result li')].map((li) => [li.querySelector('code').textContent, li.firstElementChild.textContent, li.querySelector('.tag').textContent])`)
	want := [][]string{{"   ", "    (3\u00a0spaces)", "seen"}, {" ", "  (1\u00a0space)", "not seen"}, {"sp", "sp", "not seen"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("the check shows %q, want %q", got, want)
	}

	tb.fill("#record-items", " \n\nsp")
	tb.click(`#record-form button[type="submit"]`)
	tb.waitText("#record-result .done", "Recorded 2 new")
	resp, err := s.svc.api(t, s.keys.read).CheckSeenWithResponse(context.Background(), "default", user, client.ItemsRequest{Items: []string{" ", "  "}})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("check: %v %s", err, resp.Body)
	}
	if want := []bool{true, false}; !slices.Equal(resp.JSON200.Seen, want) {
		t.Errorf("after recording a line of one space the API says [\" \", \"  \"] seen: %v, want %v", resp.JSON200.Seen, want)
	}
}

// Lines of spaces alone after the last item, as a paste or an editor
// leaves them, are no items, in every box of items: the page does not send
// them, and says so with the outcome; a box holding nothing else says how
// a line of spaces is sent.
func TestLinesOfSpacesAfterTheLastItemAreNotSent(t *testing.T) {
	s := setup(t)
	tb, user := s.userTab(t, s.keys.write, "small", "r:0")
	for _, c := range []struct{ box, items, done string }{
		{"record", "r:1\nr:2\n   \n", "Recorded 2 new, 0 already seen. 1\u00a0line of spaces alone after the last item was not sent."},
		{"check", "r:1\n \n\n  ", "1 of 1 seen. 2\u00a0lines of spaces alone after the last item were not sent."},
		{"forget", "r:2\n ", "Forgot 1\u00a0item. 1\u00a0line of spaces alone after the last item was not sent."},
	} {
		tb.fill("#"+c.box+"-items", c.items)
		tb.click("#" + c.box + "-run")
		tb.waitText("#"+c.box+"-result .done", c.done)
		if got := tb.text("#" + c.box + "-result .done"); got != c.done {
			t.Errorf("the %s of %q says %q, want %q", c.box, c.items, got, c.done)
		}
		tb.waitJS(fmt.Sprintf(`document.querySelector('#announce').textContent === %q`, c.done), "the outcome to be read out whole")
	}
	resp, err := s.svc.api(t, s.keys.read).CheckSeenWithResponse(context.Background(), "small", user, client.ItemsRequest{Items: []string{"r:0", "r:1", "r:2", "   "}})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("check: %v %s", err, resp.Body)
	}
	if want := []bool{true, true, false, false}; !slices.Equal(resp.JSON200.Seen, want) {
		t.Errorf("the API says r:0, r:1, r:2 and a line of 3 spaces seen: %v, want %v", resp.JSON200.Seen, want)
	}

	tb.fill("#record-items", "  \n ")
	tb.click("#record-run")
	const want = "Enter at least one item: a line of spaces alone is one only when another item follows it."
	tb.waitText("#record-result", "Enter at least one item")
	if got := tb.text("#record-result"); got != want {
		t.Errorf("a record of lines of spaces alone says %q, want %q", got, want)
	}
	if n := userItems(t, s, "small", user); n != 2 {
		t.Errorf("the API says %d items, want 2", n)
	}
}

// A user id of spaces alone is an id the service takes: the look-up opens
// its page, which says what the id is, since it shows as nothing.
func TestAUserIDOfSpacesCanBeLookedUp(t *testing.T) {
	s := setup(t)
	user := "       " // no other test's: the ids of the other tests hold their names
	s.svc.record(t, s.keys.write, "small", user, "i:1", "i:2")
	lookUpSpacedID(t, s.keyTab(t, s.keys.read, "#/users"), "small", user, "2", "(the id is 7\u00a0spaces alone)")
}

// In the list of a namespace's users, an id's spaces at its ends are said
// beside it, as on its page: an id of spaces alone would be a link of
// nothing, one with a space at its start the same link as without it.
func TestTheUserListSaysTheSpacesOfAnID(t *testing.T) {
	s := setup(t)
	spaces := "     " // no other test's: the ids of the other tests hold their names
	begins := " " + userID(t)
	for _, u := range []string{spaces, begins} {
		s.svc.record(t, s.keys.write, "small", u, "i:1")
	}
	tb := s.keyTab(t, s.keys.read, "#/ns/small")
	links := map[string]string{}
	for _, u := range []string{spaces, begins} {
		href := strings.TrimPrefix(fragment("small", u), "#")
		tb.waitJS(fmt.Sprintf(`!!document.querySelector('#user-list a[href="#%s"]')`, href), "the user's link")
		links[u] = eval[string](tb, fmt.Sprintf(`document.querySelector('#user-list a[href="#%s"]').textContent`, href))
	}
	if got, want := links[spaces], spaces+" (the id is 5\u00a0spaces alone)"; got != want {
		t.Errorf("the link of an id of 5 spaces reads %q, want %q", got, want)
	}
	if got, want := links[begins], begins+" (the id begins with a space)"; got != want {
		t.Errorf("the link of %q reads %q, want %q", begins, got, want)
	}
}

func TestRecordChangesTheItemCount(t *testing.T) {
	s := setup(t)
	tb, user := s.userTab(t, s.keys.write, "default", "r:0")
	tb.fill("#record-items", "r:1\nr:2\nr:3\nr:0")
	tb.click(`#record-form button[type="submit"]`)

	tb.waitText("#record-result .done", "Recorded 3 new, 1 already seen")
	tb.waitText("#user-items", "4")
	if n := userItems(t, s, "default", user); n != 4 {
		t.Errorf("the API says %d items, want 4", n)
	}
}

// A user's page, drawn again after a record, keeps what was typed in its
// boxes of items: a list pasted to check is not lost to a record made
// meanwhile, nor the items just recorded, to check them next.
func TestARecordKeepsWhatWasTypedInTheBoxes(t *testing.T) {
	s := setup(t)
	tb, _ := s.userTab(t, s.keys.write, "small", "k:0")
	tb.fill("#check-items", "k:0\nk:1")
	tb.fill("#forget-items", "k:9")
	tb.fill("#record-items", "k:1")
	tb.click("#record-run")
	tb.waitText("#record-result .done", "Recorded 1 new")
	tb.waitText("#user-items", "2")
	got := eval[[]string](tb, `['check', 'record', 'forget'].map((id) => document.querySelector('#' + id + '-items').value)`)
	if want := []string{"k:0\nk:1", "k:1", "k:9"}; !slices.Equal(got, want) {
		t.Errorf("after the record the boxes hold %q, want %q", got, want)
	}
	tb.click("#check-run")
	tb.waitText("#check-result .done", "2 of 2 seen.")
}

// An item the service refuses is named by its place among the items entered
// (blank lines skip) and its text, escaped so that a control character
// shows, not by the JSON pointer of the request's body; nothing is recorded.
func TestARefusedItemIsNamedByItsPlaceAndText(t *testing.T) {
	s := setup(t)
	tb, user := s.userTab(t, s.keys.write, "default", "r:0")
	long := strings.Repeat("x", 300)
	for _, c := range []struct{ items, detail, li string }{
		{"r:1\n\n" + long + "\nr:2", `item 2 ("` + long[:40] + `…") is 300 bytes; at most 256`,
			`item 2 ("` + long[:40] + `…"): the item is 300 bytes; at most 256`},
		{"r:1\na\tb", `item 2 ("a\tb") contains a control character`, `item 2 ("a\tb"): the item contains a control character`},
		// A bidi control shows escaped: it would turn the words after it around.
		{"r:1\n\u202e" + long, `item 2 ("\u202e` + long[:39] + `…") is 303 bytes; at most 256`,
			`item 2 ("\u202e` + long[:39] + `…"): the item is 303 bytes; at most 256`},
	} {
		tb.do("enter the items", chromedp.Evaluate[chromedp.Void](`document.querySelector('#record-result').replaceChildren(); `+
			`document.querySelector('#record-items').value = `+strconv.Quote(c.items)))
		tb.click(`#record-form button[type="submit"]`)
		tb.waitJS(`!!document.querySelector('#record-result .problem')`, "the refusal")
		if got := tb.text("#record-result .problem .detail"); got != c.detail {
			t.Errorf("the refusal reads %q, want %q", got, c.detail)
		}
		if got := tb.text("#record-result .problem li"); got != c.li {
			t.Errorf("its item's line reads %q, want %q", got, c.li)
		}
	}
	if n := userItems(t, s, "default", user); n != 1 {
		t.Errorf("the API says %d items, want 1: a refused call records nothing", n)
	}
}

// More items than the service takes in one call (its --max-candidates,
// which GET /v1/auth says) are not sent: the page says how many were
// entered and the limit, in each box of items, as the service would refuse
// them whole.
func TestTooManyItemsAreRefusedBeforeTheyAreSent(t *testing.T) {
	s := setup(t)
	svc, err := s.startServiceWith("data-"+userID(t), s.keysArg, "", "--max-candidates=3")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	user := userID(t)
	svc.record(t, s.keys.write, "small", user, "m:0")
	tb := s.newTab(t, svc)
	tb.open(fragment("small", user))
	tb.useKey(s.keys.write)
	tb.waitText("#user-items", "1")
	tb.refusedBeforeSending(user, "4\u00a0items",
		"4\u00a0items entered; the service takes at most 3 in one call. Send them in parts of 3 or fewer.",
		func(box string) { tb.fill("#"+box+"-items", "a\nb\nc\nd") })
}

// limitLowered starts a service with flags first, records one item of a
// new user, opens the user's page with the read key, and then restarts
// the service on the same address and data with then: a limit lowered
// since the page asked for it. It returns the restarted service, the user
// and the page's tab.
func (s *suite) limitLowered(t *testing.T, first []string, then string) (*service, string, *tab) {
	t.Helper()
	data := "data-" + userID(t)
	svc, err := s.startServiceWith(data, s.keysArg, "", first...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	user := userID(t)
	svc.record(t, s.keys.write, "default", user, "m:0")
	tb := s.newTab(t, svc)
	tb.open(fragment("default", user))
	tb.useKey(s.keys.read)
	tb.waitText("#user-items", "1")
	svc.stop()
	if svc, err = s.startServiceWith(data, s.keysArg, strings.TrimPrefix(svc.base, "http://"), then); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	return svc, user, tb
}

// refusedBeforeSending enters items into each of the check, record and
// forget boxes of user's page (of the namespace small) with enter, and
// runs it: each must read want (which contains has) and read it out, and
// none may have been sent; a check of three items then goes through.
func (tb *tab) refusedBeforeSending(user, has, want string, enter func(box string)) {
	t := tb.t
	t.Helper()
	for _, box := range []string{"check", "record", "forget"} {
		enter(box)
		tb.click("#" + box + "-run")
		tb.waitText("#"+box+"-result", has)
		if got := tb.text("#" + box + "-result"); got != want {
			t.Errorf("the %s reads %q, want %q", box, got, want)
		}
		tb.waitJS(fmt.Sprintf(`document.querySelector('#announce').textContent === %q`, want), "the refusal to be read out")
	}
	for _, route := range []string{"check", "seen", "items"} {
		for _, method := range []string{http.MethodPost, http.MethodDelete} {
			if n := tb.apiCalls(method, "/v1/namespaces/small/users/"+user+"/"+route); n != 0 {
				t.Errorf("the page sent %s %s %d times, want none", method, route, n)
			}
		}
	}
	tb.fill("#check-items", "a\nb\nm:0")
	tb.click("#check-run")
	tb.waitText("#check-result .done", "1 of 3 seen.")
}

// A service whose limit was lowered since the page asked it (a restart with
// another --max-candidates) refuses the items the page sent: the refusal
// speaks of the items entered, not of the request body's JSON pointer. The
// page then learns the new limit, and refuses the next list over it before
// sending it.
func TestTooManyItemsAreSaidOfTheItemsEntered(t *testing.T) {
	s := setup(t)
	svc, user, tb := s.limitLowered(t, []string{"--max-candidates=4"}, "--max-candidates=3")
	status, detail := svc.problemDetail(t, http.MethodPost, "/v1/namespaces/default/users/"+user+"/check", s.keys.read, `{"items":["a","b","c","d"]}`)
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("4 items of at most 3: HTTP %d, want 413", status)
	}
	tb.fill("#check-items", "a\nb\nc\nd")
	tb.click("#check-run")
	tb.waitText("#check-result .problem", "413")
	if got := tb.text("#check-result .problem .detail"); got != detail {
		t.Errorf("the refusal reads %q, the API's detail is %q", got, detail)
	}
	if got := tb.text("#check-result .problem li"); !strings.HasPrefix(got, "the 4\u00a0items entered: ") {
		t.Errorf("the refusal's line reads %q, want it to begin with the 4 items entered", got)
	}

	checks := "/v1/namespaces/default/users/" + user + "/check"
	tb.fill("#check-items", "e\nf\ng\nh")
	tb.checkRefusedUnsent(checks, "4\u00a0items entered; the service takes at most 3 in one call. Send them in parts of 3 or fewer.")
}

// checkRefusedUnsent runs the check box as it is, after a 413 for the
// route checks: the page, having learnt the limit again, must say want
// and send nothing.
func (tb *tab) checkRefusedUnsent(checks, want string) {
	t := tb.t
	t.Helper()
	sent := tb.apiCalls(http.MethodPost, checks)
	tb.click("#check-run")
	tb.waitJS(`!document.querySelector('#check-result').textContent.includes('Working')`, "the second check's outcome")
	if got := tb.text("#check-result"); got != want {
		t.Errorf("after the 413, the check reads %q, want %q", got, want)
	}
	if n := tb.apiCalls(http.MethodPost, checks); n != sent {
		t.Errorf("after the 413, the page sent the check again (%d more), want none", n-sent)
	}
}

// Items each within --max-item-bytes can together make a body over the
// service's --max-body-bytes, which GET /v1/auth says: the page does not
// send them, and says which limit, by how many bytes they pass it, and in
// how many parts to send them, in each box of items.
func TestItemsOverTheBodyLimitAreRefusedBeforeTheyAreSent(t *testing.T) {
	s := setup(t)
	svc, err := s.startServiceWith("data-"+userID(t), s.keysArg, "", "--max-body-bytes=120")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	user := userID(t)
	svc.record(t, s.keys.write, "small", user, "m:0")
	tb := s.newTab(t, svc)
	tb.open(fragment("small", user))
	tb.useKey(s.keys.write)
	tb.waitText("#user-items", "1")
	// {"items":["x…é",…]}: 12 bytes, and for each item its 31 bytes of UTF-8, its quotes and
	// a comma but the first's.
	items := strings.TrimSuffix(strings.Repeat(strings.Repeat("x", 29)+"é\n", 5), "\n")
	const want = "The 5\u00a0items entered make a request body of 181\u00a0bytes; the service takes at most 120\u00a0bytes " +
		"in one call (its --max-body-bytes): 61\u00a0bytes over. Send them in 2 parts or more."
	tb.refusedBeforeSending(user, "5\u00a0items", want, func(box string) {
		tb.do("enter the items", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector('#%s-items').value = %q`, box, items)))
	})
}

// A service whose body limit was lowered since the page asked it (a restart
// with another --max-body-bytes) refuses the items the page sent, 413
// body-too-large: the page shows the refusal, learns the new limit and
// says, beside the refusal, what it makes of the items; and it refuses the
// next list over it before sending it.
func TestTheBodyLimitIsLearntAgainAfterA413(t *testing.T) {
	s := setup(t)
	svc, user, tb := s.limitLowered(t, nil, "--max-body-bytes=100")
	checks := "/v1/namespaces/default/users/" + user + "/check"
	items := strings.TrimSuffix(strings.Repeat(strings.Repeat("y", 30)+"\n", 4), "\n")
	status, detail := svc.problemDetail(t, http.MethodPost, checks, s.keys.read,
		`{"items":["`+strings.ReplaceAll(items, "\n", `","`)+`"]}`)
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body of 143 bytes, of at most 100: HTTP %d, want 413", status)
	}
	tb.do("enter the items", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector('#check-items').value = %q`, items)))
	tb.click("#check-run")
	tb.waitText("#check-result .problem", "413")
	if got := tb.text("#check-result .problem .detail"); got != detail {
		t.Errorf("the refusal reads %q, the API's detail is %q", got, detail)
	}
	const want = "The 4\u00a0items entered make a request body of 143\u00a0bytes; the service takes at most 100\u00a0bytes " +
		"in one call (its --max-body-bytes): 43\u00a0bytes over. Send them in 2 parts or more."
	if got := tb.text("#check-result .problem .hint"); got != "The service's limits changed since the page learnt them. "+want {
		t.Errorf("the refusal's hint reads %q, want the limit learnt again: %q", got, want)
	}

	tb.checkRefusedUnsent(checks, want)
}

// An admin's export downloads the user's encoded filter, the bytes the
// export route answers, as a file named after the namespace and the user;
// a read key's is disabled, saying the role it needs.
func TestExportDownloadsTheUsersFilter(t *testing.T) {
	s := setup(t)
	user := "web/export é " + userID(t)
	api := s.recordItems(t, "default", user, 600)
	resp, err := s.svc.api(t, s.keys.admin).ExportUserWithResponse(context.Background(), "default", user)
	if err != nil || resp.StatusCode() != http.StatusOK {
		t.Fatalf("export: %v %s", err, resp.Body)
	}
	exported := resp.Body

	dir := t.TempDir()
	tb := s.newTab(t, nil)
	if _, err := chromedp.Call(tb.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir}); err != nil {
		t.Fatalf("allow downloads: %v", err)
	}
	t.Cleanup(func() { // the browser is the other tests' too
		chromedp.Call(tb.tabc, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorDefault})
	})
	tb.open(fragment("default", user))
	tb.useKey(s.keys.admin)
	tb.waitText("#user-items", commas(api.Items))
	tb.waitJS(`!!document.querySelector('#export-run')`, "the export's button")
	tb.click("#export-run")
	tb.waitText("#export-result .done", fmt.Sprintf("Exported %s:", bytesText(len(exported))))
	name := regexp.MustCompile(`[^A-Za-z0-9._-]+`).ReplaceAllString("default-"+user, "_")
	name = name[:min(len(name), 120)] + ".filter"
	if got := tb.text("#export-link"); got != name {
		t.Errorf("the file is named %q, want %q", got, name)
	}
	deadline := time.Now().Add(waitFor)
	for {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil && slices.Equal(got, exported) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the download %s reads %d bytes (%v), want the %d the export route answers", name, len(got), err, len(exported))
		}
		time.Sleep(50 * time.Millisecond)
	}

	tb.useKey(s.keys.read)
	tb.waitText("#export-run ~ .need", "needs an admin key; this key is read")
	if !eval[bool](tb, `document.querySelector('#export-run').disabled`) {
		t.Errorf("a read key's export is enabled")
	}
}

// bytesText writes n bytes as the page does under 1 KiB, or in KiB with two
// decimals under 10 KiB.
func bytesText(n int) string {
	if n < 1024 {
		return fmt.Sprintf("%d\u00a0B", n)
	}
	return fmt.Sprintf("%.2f\u00a0KiB", float64(n)/1024)
}

// Recording many new items at once, some test seen against those the same
// call recorded before them (false positives) and are not added: the
// message accounts for every item sent, not only those recorded or seen.
func TestRecordAccountsForEveryItemSent(t *testing.T) {
	s := setup(t)
	user := userID(t)
	tb := s.keyTab(t, s.keys.write, fragment("default", user))
	tb.waitJS(`!!document.querySelector('#user-missing')`, "the page of a user without history")
	const n = 3000
	tb.do("enter the items", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
		`document.querySelector('#record-items').value = Array.from({length: %d}, (_, i) => 'fp:' + i).join('\n')`, n)))
	tb.click(`#record-form button[type="submit"]`)
	msg := tb.waitText("#record-result .done", "Recorded")
	m := regexp.MustCompile(`^Recorded ([0-9,]+) new, 0 already seen; ([0-9,]+) more tested seen against items recorded before them in this call \(false positives, at the filter's rate\), so were not added\.$`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("the message reads %q", msg)
	}
	recorded, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
	rest, _ := strconv.Atoi(strings.ReplaceAll(m[2], ",", ""))
	if recorded+rest != n {
		t.Errorf("the message accounts for %d + %d items, want %d", recorded, rest, n)
	}
	if got := userItems(t, s, "default", user); got != int64(recorded) {
		t.Errorf("the API says %d items, the message %d recorded", got, recorded)
	}
}

// In a namespace with a window, an item seen only in an earlier time bucket
// is recorded again in the current one and counts both as recorded and as
// seen (SeenResponse): the message neither calls it new nor counts an item
// sent twice, and says so only when the counts show it.
func TestRecordInAWindowCallsNoItemSeenBeforeNew(t *testing.T) {
	s := setup(t)
	user := userID(t)
	// The feed namespace's profile (namespacesYAML), with items recorded 8
	// days ago: in the bucket before the current one of 7.5 days.
	p := userfilter.Profile{FPRate: 0.01, Window: 30 * 24 * time.Hour, Granularity: 180 * time.Hour, MaxItems: 100000}.WithDefaults()
	f, err := userfilter.New(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Add([]string{"old:1", "old:2", "old:3"}, time.Now().Add(-8*24*time.Hour))
	raw, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.svc.api(t, s.keys.admin).ImportUserWithBodyWithResponse(context.Background(), "feed", user, nil,
		"application/octet-stream", bytes.NewReader(raw))
	if err != nil || resp.StatusCode() != http.StatusNoContent {
		t.Fatalf("import: %v %s", err, resp.Body)
	}

	tb := s.keyTab(t, s.keys.write, fragment("feed", user))
	tb.waitText("#user-items", "3")
	tb.do("enter the items", chromedp.Evaluate[chromedp.Void](
		`document.querySelector('#record-items').value = 'old:1\nold:2\nold:3\nnew:1\nnew:2'`))
	tb.click(`#record-form button[type="submit"]`)
	msg := tb.waitText("#record-result .done", "Recorded")
	// The service records the 3 seen again in the current bucket and the 2
	// new ones, and says 3 were seen: 5 and 3 for 5 items sent.
	const want = "Recorded 5, 3 already seen: 3 of those were seen only in an earlier time bucket of the window, so are recorded again in the current one and counted in both."
	if msg != want {
		t.Errorf("the message reads %q, want %q", msg, want)
	}

	// An item seen in the current bucket is not recorded again: what is
	// recorded then is new, and nothing is said of earlier buckets.
	tb.do("enter the items", chromedp.Evaluate[chromedp.Void](
		`document.querySelector('#record-result').replaceChildren(); document.querySelector('#record-items').value = 'new:1\nnew:3'`))
	tb.click(`#record-form button[type="submit"]`)
	if msg, want := tb.waitText("#record-result .done", "Recorded"), "Recorded 1 new, 1 already seen."; msg != want {
		t.Errorf("the message reads %q, want %q", msg, want)
	}
}

func TestEraseAsksForConfirmation(t *testing.T) {
	s := setup(t)
	tb, user := s.userTab(t, s.keys.admin, "default", "e:1")
	tb.click("#erase-open")
	tb.waitJS(`document.querySelector('#erase-dialog').open`, "the confirmation dialog")
	if got := tb.text("#erase-dialog"); !strings.Contains(got, user) || !strings.Contains(got, "cannot be undone") {
		t.Errorf("the confirmation %q does not name the user and say it is final", got)
	}
	tb.click("#erase-cancel")
	tb.waitJS(`!document.querySelector('#erase-dialog').open`, "the dialog to close")
	if n := userItems(t, s, "default", user); n != 1 {
		t.Errorf("after cancelling, the API says %d items, want 1", n)
	}
}

// A user whose stored filter is corrupt fails every call on it but the
// erase: its page says what the problem is and offers the erase, which lets
// the user start afresh.
func TestCorruptUserCanBeErasedFromItsPage(t *testing.T) {
	s := setup(t)
	data := "data-" + userID(t)
	st, err := storage.Open(storage.DefaultOptions(filepath.Join(s.dir, data)).WithMinFreeBytes(-1))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteBack([]storage.Write{{NS: "default", User: "bad", Value: []byte("not a filter at all")}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	svc, err := s.startServiceWith(data, s.keysArg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	tb := s.newTab(t, svc)
	tb.open(fragment("default", "bad"))
	tb.useKey(s.keys.admin)

	tb.waitText("#user .problem", "500 Corrupt filter:")
	tb.waitText("#user-corrupt", "Erasing the user lets it start afresh")
	if n := eval[int](tb, `document.querySelectorAll('#check-form, #record-form').length`); n != 0 {
		t.Errorf("the page offers %d actions that the corrupt filter fails", n)
	}
	tb.click("#erase-open")
	tb.waitJS(`document.querySelector('#erase-dialog').open`, "the confirmation")
	tb.click("#erase-confirm")
	tb.waitText("#erase-result", "was erased")
	tb.waitText("#user-missing", "No history")
	status, _ := svc.problemDetail(t, http.MethodGet, "/v1/namespaces/default/users/bad", s.keys.read, "")
	if status != http.StatusNotFound {
		t.Errorf("after the erase the user answers HTTP %d, want 404", status)
	}
}

func TestEraseWithAnAdminKeyForgetsTheUser(t *testing.T) {
	s := setup(t)
	tb, user := s.userTab(t, s.keys.admin, "default", "e:1", "e:2")
	tb.click("#erase-open")
	tb.waitJS(`document.querySelector('#erase-dialog').open`, "the confirmation dialog")
	tb.click("#erase-confirm")

	tb.waitText("#erase-result .done", "was erased")
	tb.waitText("#user-missing", "No history")
	if n := userItems(t, s, "default", user); n != -1 {
		t.Errorf("after the erase the API still has the user (%d items)", n)
	}
	if got := tb.text("#role"); got != "role: admin" {
		t.Errorf("role after an erase = %q, want role: admin", got)
	}
}

// Looking up a user with no history says so, and adds nothing to the
// errors the service counts (an operator browsing the dashboard would
// otherwise raise the figure watched for faults): the service counts the
// answer apart, which the overview's table of errors says below it.
func TestLookingUpAUserWithNoHistoryIsNoError(t *testing.T) {
	s := setup(t)
	svc := s.keyedService(t, "read:"+s.keys.read+"\n")
	tb := s.newTab(t, svc)
	tb.open(fragment("default", userID(t)))
	tb.useKey(s.keys.read)
	tb.waitText("#user-missing", "No history")
	r, err := svc.api(t, s.keys.read).GetStatsWithResponse(context.Background())
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	if len(r.JSON200.Errors) != 0 {
		t.Errorf("after a look-up of a user with no history the service counts the error answers %v, want none", r.JSON200.Errors)
	}
	if r.JSON200.UsersNotFound != 1 {
		t.Errorf("the service counts %d answers of a user with no history, want 1", r.JSON200.UsersNotFound)
	}
	tb.open("#/")
	tb.waitText("#errors #users-not-found", "1\u00a0look-up of a user with no history (404 user-not-found), not errors")
	if got := tb.text("#errors tbody"); got != "None." {
		t.Errorf("the overview's errors read %q, want None.", got)
	}
}

// A service draining (SIGTERM with --drain-delay) answers /readyz 503, for a
// load balancer to stop sending it calls, as it does while it starts: the
// probe working as designed, which an orchestrator polls every few
// seconds. The service counts those answers apart from its errors, and the
// overview's table of errors stays empty, saying below it how many there
// were.
func TestReadinessProbesOfADrainingServiceAreNoError(t *testing.T) {
	s := setup(t)
	svc := s.keyedService(t, "read:"+s.keys.read+"\n", "--drain-delay", "60s") // its stop's second signal ends the drain
	if err := svc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	probes := svc.notReady // the start's, if the harness's first probe came early
	for drained, deadline := 0, time.Now().Add(waitFor); drained < 3; {
		resp, err := http.Get(svc.base + "/readyz")
		if err != nil {
			t.Fatalf("/readyz while draining: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			probes++
			drained++
			continue
		}
		if resp.StatusCode != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("/readyz after SIGTERM: %d, want 503 within %v", resp.StatusCode, waitFor)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r, err := svc.api(t, s.keys.read).GetStatsWithResponse(context.Background())
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	if len(r.JSON200.Errors) != 0 || r.JSON200.NotReady != probes {
		t.Errorf("after %d answers of /readyz 503 not ready the service counts the error answers %v and %d not ready, want none and %d",
			probes, r.JSON200.Errors, r.JSON200.NotReady, probes)
	}
	tb := s.newTab(t, svc)
	tb.open("#/")
	tb.useKey(s.keys.read)
	tb.waitText("#errors #not-ready", fmt.Sprintf("%d\u00a0answers of /readyz 503 not ready (starting or draining), not errors", probes))
	if got := tb.text("#errors tbody"); got != "None." {
		t.Errorf("the overview's errors read %q, want None.", got)
	}
}

// The erase answers 204 whether or not the user had a history, and says
// which in Data-Erased: the page says that a user with none had nothing to
// erase, so that a mistyped id does not read as erased.
func TestErasingAUserWithNoHistorySaysThereWasNothingToErase(t *testing.T) {
	s := setup(t)
	user := userID(t)
	tb := s.keyTab(t, s.keys.admin, fragment("default", user))
	tb.waitText("#user-missing", "No history")
	tb.click("#erase-open")
	tb.waitJS(`document.querySelector('#erase-dialog').open`, "the confirmation dialog")
	tb.click("#erase-confirm")
	tb.waitJS(`!!document.querySelector('#erase-result .done')`, "the erase's outcome")
	want := user + " had no history in default: nothing to erase."
	if got := tb.text("#erase-result .done"); got != want {
		t.Errorf("erasing a user with no history reads %q, want %q", got, want)
	}
}

// A user recorded after the page last looked (a recommender's call while
// the confirmation was open) had something to erase: the page says what
// the erase itself found, not what an earlier look-up did.
func TestErasingAUserRecordedSinceTheLookUpSaysItWasErased(t *testing.T) {
	s := setup(t)
	user := userID(t)
	tb := s.keyTab(t, s.keys.admin, fragment("default", user))
	tb.waitText("#user-missing", "No history")
	// The recommender's call lands just before the erase does.
	path := "/v1/namespaces/default/users/" + url.PathEscape(user)
	eval[bool](tb, fmt.Sprintf(`(() => {
		const fetch = window.fetch;
		window.fetch = async (input, init) => {
			if (init && init.method === 'DELETE' && new URL(String(input), location.href).pathname === %q) {
				const r = await fetch(%q, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: %q },
					body: JSON.stringify({ items: ['late'] }) });
				if (!r.ok) throw new Error('the recommender call failed: ' + r.status);
			}
			return fetch(input, init);
		};
		return true;
	})()`, path, path+"/seen", "Bearer "+s.keys.write))
	tb.click("#erase-open")
	tb.waitJS(`document.querySelector('#erase-dialog').open`, "the confirmation dialog")
	tb.click("#erase-confirm")
	tb.waitJS(`!!document.querySelector('#erase-result .done')`, "the erase's outcome")
	if want, got := "User "+user+" was erased from default.", tb.text("#erase-result .done"); got != want {
		t.Errorf("erasing a user recorded since the look-up reads %q, want %q", got, want)
	}
	if n := userItems(t, s, "default", user); n != -1 {
		t.Errorf("after the erase the API has the user (%d items), want none", n)
	}
}

// actionState is what the user page offers a key: its role as shown, whether
// the record and erase buttons are enabled, and the hints beside them: the
// role an action needs, shown only to a key that lacks it.
type actionState struct {
	Role       string `json:"role"`
	Record     bool   `json:"record"`
	Erase      bool   `json:"erase"`
	RecordHint string `json:"recordHint"`
	EraseHint  string `json:"eraseHint"`
}

const actions = `(() => {
	const q = (sel) => document.querySelector(sel);
	return { role: q('#role').textContent, record: !q('#record-form button[type="submit"]').disabled,
		erase: !q('#erase-open').disabled, recordHint: q('#record-form .need').textContent,
		eraseHint: q('#erase-open ~ .need').textContent };
})()`

// A key with a rate limit of its own, or limited to some namespaces, shows
// it beside its role, as GET /v1/auth answers it; a key without either
// shows its role alone.
func TestAKeysRateLimitShowsBesideItsRole(t *testing.T) {
	s := setup(t)
	tb := s.keyTab(t, s.keys.limited, "")
	tb.waitText("#role", "role: read · at most 1,000\u00a0requests/s · namespace default only")
	tb.useKey(s.keys.read)
	tb.waitJS(`document.querySelector('#role').textContent === 'role: read'`, "a key without a rate: its role alone")
	// Its tooltip names the key as the log of admin actions does.
	d := sha256.Sum256([]byte(s.keys.read))
	id := hex.EncodeToString(d[:4])
	tb.waitJS(`document.querySelector('#role').title.startsWith('Key `+id+`: ')`, "the key's id in the role's tooltip")
	// A screen reader names it by what it shows, the tooltip after: named by its tooltip, it
	// was heard as the key's id, its role never said.
	if n := tb.ax("#role"); n.name != "role: read" || !strings.HasPrefix(n.description, "Key "+id+": ") {
		t.Errorf("the role is named %q and described %q, want its text %q and its tooltip", n.name, n.description, "role: read")
	}
}

// A key limited to some namespaces sees their rows alone in the overview's
// table by namespace, and the service's whole totals in its cards: the
// overview says so, lest the cards be read as its namespaces' sums. A key
// of every namespace is told nothing of the kind.
func TestTheOverviewOfAKeyLimitedToANamespaceSaysWhoseFiguresAreWhose(t *testing.T) {
	s := setup(t)
	tb := s.keyTab(t, s.keys.limited, "#/")
	tb.waitJS(`!!document.querySelector('#ns-stats tr[data-ns="default"]')`, "the default namespace's row")
	if names := eval[[]string](tb, `[...document.querySelectorAll('#ns-stats tbody tr')].map((r) => r.dataset.ns)`); !slices.Equal(names, []string{"default"}) {
		t.Fatalf("rows %v, want default's alone", names)
	}
	const want = "This key may call namespace default only: the table by namespace shows its figures, the cards and the other tables the whole service's."
	// The figures may be drawn before the key's look-up has answered,
	// which the note waits for.
	tb.waitJS(`!!document.querySelector('#overview-scope')`, "the note of whose figures are whose")
	if got := tb.text("#overview"); !strings.HasPrefix(got, want) {
		t.Errorf("the overview of a key limited to default begins %q, want %q", got[:min(len(got), len(want))], want)
	}
	tb.useKey(s.keys.read)
	tb.waitJS(`!!document.querySelector('#ns-stats tr[data-ns="classic"]')`, "the classic namespace's row")
	if n := eval[int](tb, `document.querySelectorAll('#overview-scope').length`); n != 0 {
		t.Errorf("the overview of a key of every namespace says whose figures are whose (%d)", n)
	}
}

// A key of one request a second, twice what the overview's refresh takes,
// opens a user's page and checks items: the calls the page makes at once,
// which the service refuses past the key's rate (429 with Retry-After,
// before doing anything), are sent again after it instead of the page
// showing the refusal.
func TestAKeyOfOneRequestASecondOpensAUsersPage(t *testing.T) {
	s := setup(t)
	svc, tb := s.ownOverview(t, "--rate-limit", "1")
	user := userID(t)
	svc.record(t, s.keys.write, "default", user, "a", "b", "c")
	tb.open(fragment("default", user))
	tb.waitText("#user-items", "3")
	tb.fill("#check-items", "a\nz")
	tb.click("#check-form button")
	tb.waitText("#check-result", "1 of 2 seen.")
	// The key's look-up may be waiting for its own Retry-After still.
	if got := tb.waitText("#role", "requests/s"); got != "role: read · at most 1.0\u00a0requests/s" {
		t.Errorf("the role reads %q", got)
	}
	// The page did meet the key's rate (the admin key has a rate of its own).
	r, err := svc.api(t, s.keys.admin).GetStatsWithResponse(context.Background())
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	if r.JSON200.Errors["429"] == 0 {
		t.Errorf("no call of the page was refused for its rate: the test proves nothing")
	}
}

func TestEachKeyShowsItsExactRole(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "default", user, "x:1")
	for _, c := range []struct {
		key  string
		want actionState
	}{
		{s.keys.read, actionState{Role: "role: read",
			RecordHint: "needs a write key; this key is read", EraseHint: "needs an admin key; this key is read"}},
		{s.keys.write, actionState{Role: "role: write", Record: true,
			EraseHint: "needs an admin key; this key is write"}},
		{s.keys.admin, actionState{Role: "role: admin", Record: true, Erase: true}},
	} {
		t.Run(strings.TrimPrefix(c.want.Role, "role: "), func(t *testing.T) {
			tb := s.newTab(t, nil)
			tb.open(fragment("default", user))
			tb.waitText("#role", "no key")
			tb.useKey(c.key)
			tb.waitText("#user-items", "1")
			// A refresh of the figures after the key: the page has settled.
			tb.waitText("#updated", "Figures updated")
			if got := eval[actionState](tb, actions); got != c.want {
				t.Errorf("the page offers %+v, want %+v", got, c.want)
			}
			if n := tb.apiCalls(http.MethodGet, "/v1/auth"); n != 1 {
				t.Errorf("the page asked GET /v1/auth %d times, want once, for the key (without one, GET /healthz says a key is needed)", n)
			}
		})
	}
}

func TestOpenServiceShowsAdminToEveryone(t *testing.T) {
	s := setup(t)
	svc, err := s.startServiceWith("data-"+userID(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	user := userID(t)
	tb := s.newTab(t, svc)
	tb.open(fragment("default", user))
	tb.waitText("#user-missing", "No history")
	tb.waitText("#role", "open service")
	want := actionState{Role: "role: admin (open service, no keys configured)", Record: true, Erase: true}
	if got := eval[actionState](tb, actions); got != want {
		t.Errorf("the page offers %+v, want %+v", got, want)
	}
}

// A namespace added by a SIGHUP while the dashboard is open is in the user
// inspector's choice of namespaces at the next look-up, without reloading
// the page.
func TestInspectorOffersANamespaceAddedByAReload(t *testing.T) {
	s := setup(t)
	file := filepath.Join(s.dir, "namespaces-"+userID(t)+".yaml")
	if err := os.WriteFile(file, []byte("feed:\n  window: 30d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svc, err := s.startServiceWith("data-"+userID(t), "", "", "--namespaces", file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	options := `[...document.querySelectorAll('#lookup-ns option')].map((o) => o.value).join(',')`
	tb := s.newTab(t, svc)
	tb.open(fragment("feed", "u1"))
	tb.waitText("#user-missing", "No history")
	tb.waitJS(options+` === 'default,feed'`, "the choice of default and feed")

	if err := os.WriteFile(file, []byte("feed:\n  window: 30d\npush:\n  window: 1d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := svc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	served := func() bool {
		resp, err := http.Get(svc.base + "/v1/namespaces/push")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	for deadline := time.Now().Add(waitFor); !served(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("push is not served after SIGHUP")
		}
	}
	// The next look-up, from the page's own form: the page is not loaded again.
	tb.do("look up u2", chromedp.SetValue(chromedp.CSS("#lookup-user"), "u2"),
		chromedp.Click(chromedp.CSS(`#lookup button[type="submit"]`)))
	tb.waitText("#user-missing", "u2")
	tb.mu.Lock()
	n := tb.pages
	tb.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d pages loaded, want the look-up in the one page", n)
	}
	tb.waitJS(options+` === 'default,feed,push'`, "push in the choice of namespaces")
	if got := eval[string](tb, `document.querySelector('#lookup-ns').value`); got != "feed" {
		t.Errorf("the namespace chosen is %q, want the page's feed", got)
	}

	// Taken out again: the overview keeps its row, saying so, without a
	// link to its users.
	if err := os.WriteFile(file, []byte("feed:\n  window: 30d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := svc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(waitFor); served(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("push is still served after a SIGHUP that took it out")
		}
	}
	tb.open("#/")
	row := `document.querySelector('#ns-stats tr[data-ns="push"] th')`
	tb.waitJS(row+` !== null && `+row+`.textContent === 'push (no longer served)'`, "push's row to say it is no longer served")
	if links := eval[int](tb, row+`.querySelectorAll('a').length`); links != 0 {
		t.Errorf("push's row links to its users (%d links)", links)
	}
}

func TestRefusalOfAStaleRoleShowsTheProblemDetail(t *testing.T) {
	s := setup(t)
	key := newKey()
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("write:"+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := "data-" + userID(t)
	svc, err := s.startServiceWith(data, keys, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	user := userID(t)
	svc.record(t, key, "default", user, "x:1")

	tb := s.newTab(t, svc)
	tb.open(fragment("default", user))
	tb.useKey(key)
	tb.waitText("#user-items", "1")
	if got := tb.text("#role"); got != "role: write" {
		t.Fatalf("role = %q, want role: write", got)
	}

	// The operator demotes the key and restarts the service; the page still
	// believes the key may record.
	svc.stop()
	if err := os.WriteFile(keys, []byte("read:"+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svc, err = s.startServiceWith(data, keys, strings.TrimPrefix(svc.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	status, detail := svc.problemDetail(t, http.MethodPost, "/v1/namespaces/default/users/"+url.PathEscape(user)+"/seen",
		key, `{"items":["x:2"]}`)
	if status != http.StatusForbidden {
		t.Fatalf("recording with the demoted key: HTTP %d, want 403", status)
	}

	tb.fill("#record-items", "x:2")
	tb.click(`#record-form button[type="submit"]`)
	tb.waitText("#record-result .problem", "403")
	if got := tb.text("#record-result .problem .detail"); got != detail {
		t.Errorf("the page shows %q, the API's detail is %q", got, detail)
	}
	// What happened, and what to do about it.
	if got, want := tb.text("#record-result .problem .hint"), "The service refused this key: enter a write key (or an admin key) in the bar at the top to do this."; got != want {
		t.Errorf("the refusal's hint reads %q, want %q", got, want)
	}
	tb.waitText("#role", "role: read")
	want := actionState{Role: "role: read",
		RecordHint: "needs a write key; this key is read", EraseHint: "needs an admin key; this key is read"}
	if got := eval[actionState](tb, actions); got != want {
		t.Errorf("after the refusal the page offers %+v, want %+v", got, want)
	}
	resp, err := svc.api(t, key).GetUserWithResponse(context.Background(), "default", user)
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("get user: %v %d %s", err, resp.StatusCode(), resp.Body)
	}
	if resp.JSON200.Items != 1 {
		t.Errorf("a refused record changed the user: %d items, want 1", resp.JSON200.Items)
	}
}

// routeCalls returns the total and the calls/s the overview's route table
// shows for route (0 and -1 when the route has no row).
const routeCalls = `((route) => {
	const row = [...document.querySelectorAll('#routes tbody tr')].find((r) => r.cells[0].textContent === route);
	if (!row) return [0, -1];
	return [Number(row.cells[2].textContent.replace(/,/g, '')), Number(row.cells[1].textContent.replace(/,/g, ''))];
})`

// newUsersJS reads the new users out of the hot users card's line
// ("N storage reads (M new users) · E evicted", in the singular for one);
// -1 when it does not read so.
const newUsersJS = `(line) => {
	const m = /^[0-9,]+\u00a0storage reads? \(([0-9,]+)\u00a0new users?\) · [0-9,]+\u00a0evicted$/.exec(line);
	return m ? Number(m[1].replace(/,/g, '')) : -1;
}`

// newUsersShown returns the new users the hot users card shows now.
func newUsersShown(t *testing.T, tb *tab) int {
	t.Helper()
	n := eval[int](tb, fmt.Sprintf(`(%s)(document.querySelector('#card-hot-users .sub').textContent)`, newUsersJS))
	if n < 0 {
		t.Fatalf("hot users card reads %q", tb.text(`#card-hot-users .sub`))
	}
	return n
}

func TestOverviewNumbersMoveAfterCalls(t *testing.T) {
	s := setup(t)
	const route = "POST /v1/namespaces/{ns}/users/{user}/filter"
	tb := s.keyTab(t, s.keys.read, "#/")
	// Two refreshes: rates need a previous figure.
	tb.passTimeUntil(`!!document.querySelector('#card-calls svg polyline')`, "a calls/s sparkline", 5*time.Second)
	before := eval[[]float64](tb, routeCalls+"("+strconv.Quote(route)+")")
	hotBefore, err := strconv.Atoi(strings.ReplaceAll(tb.text(`[data-k="hot-users"]`), ",", ""))
	if err != nil {
		t.Fatalf("hot users: %v", err)
	}
	newBefore := newUsersShown(t, tb)

	w := s.svc.api(t, s.keys.write)
	const users, callsPerUser = 5, 6
	base := userID(t)
	for u := range users {
		for c := range callsPerUser {
			resp, err := w.FilterUserWithResponse(context.Background(), "default", fmt.Sprintf("%s-%d", base, u), nil,
				client.FilterRequest{Candidates: []string{fmt.Sprintf("c:%d", c), fmt.Sprintf("c:%d", c+1)}})
			if err != nil || resp.JSON200 == nil {
				t.Fatalf("filter: %v %s", err, resp.Body)
			}
		}
	}

	// A call retried with its Idempotency-Key: the second answer is the
	// first one given again.
	key := base + "-retried"
	for range 2 {
		resp, err := w.FilterUserWithResponse(context.Background(), "default", base+"-0", &client.FilterUserParams{IdempotencyKey: &key},
			client.FilterRequest{Candidates: []string{"r:1"}})
		if err != nil || resp.JSON200 == nil {
			t.Fatalf("filter: %v %s", err, resp.Body)
		}
	}

	// The first refresh to show the calls shows their rate too: the one before it did not count them.
	want := before[0] + users*callsPerUser + 2
	tb.passTimeUntil(fmt.Sprintf(`%s(%q)[0] >= %v`, routeCalls, route, want),
		fmt.Sprintf("the filter route to show %v calls", want), 5*time.Second)
	if got := eval[[]float64](tb, routeCalls+"("+strconv.Quote(route)+")"); got[1] <= 0 {
		t.Errorf("the filter route shows %v calls at %v/s, want a rate above 0", got[0], got[1])
	}
	if got, err := strconv.Atoi(strings.ReplaceAll(tb.text(`[data-k="hot-users"]`), ",", "")); err != nil || got < hotBefore+users {
		t.Errorf("hot users read %d (%v), want %d or more", got, err, hotBefore+users)
	}
	// Each of the users is new: nothing was stored for them.
	if got := newUsersShown(t, tb); got < newBefore+users {
		t.Errorf("the hot users card counts %d new users, want %d or more", got, newBefore+users)
	}
	if dirty := tb.text(`#card-dirty .sub`); !regexp.MustCompile(`^flush lag .+ · [0-9,]+\x{a0}written back$`).MatchString(dirty) {
		t.Errorf("dirty users card reads %q", dirty)
	}
	if seen := tb.text(`#card-seen .sub`); !regexp.MustCompile(`^[0-9.]+% since start · [1-9][0-9,]*\x{a0}candidates? · [1-9][0-9,]*\x{a0}items? recorded$`).MatchString(seen) {
		t.Errorf("candidates card reads %q", seen)
	}
	if got := tb.text(`#card-degraded .sub`); !regexp.MustCompile(`^fail-open answers · .+/s now · [1-9][0-9,]*\x{a0}retr(y|ies) answered again$`).MatchString(got) {
		t.Errorf("degraded answers card reads %q, want the retry answered again", got)
	}
	if st := tb.text(`#card-storage .sub`); !regexp.MustCompile(`^[0-9,]+\x{a0}storage errors? · [0-9,]+\x{a0}journal appends? · [0-9,]+\x{a0}tables? in level 0$`).MatchString(st) {
		t.Errorf("storage card reads %q", st)
	}
	if got := tb.text(`#panics`); got != "0\u00a0panics recovered" {
		t.Errorf("errors table's footer reads %q, want no panics", got)
	}
	if got := tb.text(`[data-k="calls"]`); got == "–" || got == "" {
		t.Errorf("calls/s card shows %q", got)
	}
	// The users' filters are a sliver of the budget, shown as such, not 0%.
	cache := tb.text(`#card-cache .sub`)
	if m := regexp.MustCompile(`^of [0-9.]+\x{a0}[KMG]iB budget \(((<\x{a0})?[0-9.]+)%\)$`).FindStringSubmatch(cache); m == nil || m[1] == "0" {
		t.Errorf("cache card reads %q, want the share of the budget above 0%%", cache)
	}
	// The collector's card: its share of the server's CPU, the collections
	// and the heap (the server has collected at least once by now).
	gc := tb.text(`#card-collector`)
	if ok, _ := regexp.MatchString(`^Collector share of CPU[0-9.]+%[0-9.]+% since start · [1-9][0-9,]*\x{a0}collections? · heap [0-9.]+\x{a0}[KMG]iB live, next at [0-9.]+\x{a0}[KMG]iB`, gc); !ok {
		t.Errorf("collector card reads %q", gc)
	}
}

// A fresh service has looked up no user and filtered no candidate: its hit
// ratio and share of candidates already seen read "–", as in the table by
// namespace, not 0%, which would say every lookup missed. The first call,
// for a new user, gives the share of candidates a figure but not the hit
// ratio: no cache could have held a user with no history, so the call is
// no miss, and the card says it was left out. Idle, it has no call in
// flight but the page's own request for the figures, which it counts among
// those it serves: 0.
func TestAFreshServiceShowsNoShareOfNothing(t *testing.T) {
	s := setup(t)
	svc, tb := s.ownOverview(t)
	tb.waitJS(`!!document.querySelector('#card-seen .sub')`, "the figures")
	if got := tb.text("#card-calls .sub"); !strings.HasSuffix(got, " · 0\u00a0in flight besides this page's") {
		t.Errorf("an idle service's calls read %q, want 0 in flight", got)
	}
	for _, id := range []string{"hit-ratio", "seen"} {
		if v, sub := tb.text(`[data-k="`+id+`"]`), tb.text(`#card-`+id+` .sub`); v != "–" || !strings.HasPrefix(sub, "– since start · 0\u00a0") {
			t.Errorf("a fresh service's %s card reads %q, %q; want – since start", id, v, sub)
		}
	}
	resp, err := svc.api(t, s.keys.write).FilterUserWithResponse(context.Background(), "default", userID(t), nil,
		client.FilterRequest{Candidates: []string{"f:1"}})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("filter: %v %s", err, resp.Body)
	}
	tb.waitText("#card-seen .sub", "0% since start · 1\u00a0candidate")
	if got := tb.waitText("#card-hit-ratio .sub", "no history"); got != "– since start · 0\u00a0hits, 0\u00a0misses · 1\u00a0call for a user with no history, not counted" {
		t.Errorf("after a new user's first call the hit ratio card reads %q, want no miss and the call counted apart", got)
	}
	if v := tb.text(`[data-k="hit-ratio"]`); v != "–" {
		t.Errorf("after a new user's first call the hit ratio reads %q, want –", v)
	}
}

// Looking users up in the dashboard is no call of the recommender's: the
// hit ratio the operators watch, and the card that shows it, stay as the
// calls left them, whether the user looked up was in memory or had no
// history.
func TestLookingUpUsersLeavesTheHitRatio(t *testing.T) {
	s := setup(t)
	svc, tb := s.ownOverview(t)
	user := userID(t)
	svc.record(t, s.keys.write, "default", user, "a") // a call for a user with no history
	tb.showUser("default", user, 1)
	tb.open(fragment("default", "nobody-"+user))
	tb.waitJS(`!!document.querySelector('#user-missing')`, "the page of a user with no history")
	tb.open("#/")
	const want = "– since start · 0\u00a0hits, 0\u00a0misses · 1\u00a0call for a user with no history, not counted"
	if got := tb.waitText("#card-hit-ratio .sub", "no history"); got != want {
		t.Errorf("after looking up a hot user and one with no history the hit ratio card reads %q, want %q as the one call left it", got, want)
	}
}

// An idle service's calls per second read 0: every open dashboard asks
// GET /v1/stats every 2 s, which the figure leaves out, saying so, while
// the table of routes still counts it.
func TestAnIdleServiceShowsNoCallsPerSecond(t *testing.T) {
	s := setup(t)
	_, tb := s.ownOverview(t)
	// The page's look-up of its key's role may fall between its first two
	// figures: the third rate is of a refresh without it.
	tb.passTimeUntil(`(() => { const l = document.querySelector('#card-calls svg polyline'); return !!l && l.points.length >= 3; })()`,
		"three calls/s figures", 7*time.Second)
	if got := tb.text(`[data-k="calls"]`); got != "0.0" {
		t.Errorf("an idle service shows %s calls/s, want 0.0", got)
	}
	if got := tb.text("#card-calls .sub"); !strings.Contains(got, "since start, besides GET /v1/stats (the dashboards' own)") {
		t.Errorf("the calls card reads %q; want it to say GET /v1/stats is left out", got)
	}
	if n := eval[[]float64](tb, routeCalls+`("GET /v1/stats")`); n[0] < 2 {
		t.Errorf("the table of routes shows %v calls of GET /v1/stats, want the page's own", n[0])
	}
}

// The overview's table by namespace shows each namespace's hot users and
// its share of the cache, largest first, and follows the calls.
func TestOverviewShowsEachNamespacesShare(t *testing.T) {
	s := setup(t)
	tb := s.keyTab(t, s.keys.read, "#/")
	const rowJS = `((ns) => { const r = document.querySelector('#ns-stats tr[data-ns="' + ns + '"]'); return r ? [...r.children].map((c) => c.textContent) : null; })`
	tb.waitJS(rowJS+`("classic") !== null`, "the classic namespace's row")
	names := eval[[]string](tb, `[...document.querySelectorAll('#ns-stats tbody tr')].map((r) => r.dataset.ns)`)
	if want := []string{"classic", "default", "feed", "push", "small"}; !slices.Equal(slices.Sorted(slices.Values(names)), want) {
		t.Fatalf("rows %v, want one for each of %v", names, want)
	}
	hotBefore, err := strconv.Atoi(strings.ReplaceAll(eval[[]string](tb, rowJS+`("classic")`)[1], ",", ""))
	if err != nil {
		t.Fatalf("classic's hot users: %v", err)
	}

	w := s.svc.api(t, s.keys.write)
	base := userID(t)
	const users = 3
	// The first user twice: its second call is a hit, so that the row has a
	// hit ratio whatever ran before (calls for new users are no misses).
	for u := range users + 1 {
		resp, err := w.FilterUserWithResponse(context.Background(), "classic", fmt.Sprintf("%s-%d", base, u%users), nil,
			client.FilterRequest{Candidates: []string{"a", "b"}})
		if err != nil || resp.JSON200 == nil {
			t.Fatalf("filter: %v %s", err, resp.Body)
		}
	}
	tb.waitJS(fmt.Sprintf(`Number(%s("classic")[1].replace(/,/g, '')) >= %d`, rowJS, hotBefore+users),
		fmt.Sprintf("classic's hot users to reach %d", hotBefore+users))
	row := eval[[]string](tb, rowJS+`("classic")`)
	if !regexp.MustCompile(`^[0-9.]+\x{a0}(B|[KMG]iB)$`).MatchString(row[2]) || row[2] == "0\u00a0B" {
		t.Errorf("classic's cache bytes read %q", row[2])
	}
	if !regexp.MustCompile(`^(<\x{a0})?[0-9.]+%$`).MatchString(row[3]) || !regexp.MustCompile(`^[0-9.]+%$`).MatchString(row[4]) {
		t.Errorf("classic's share of the budget reads %q and its hit ratio %q", row[3], row[4])
	}
	if !regexp.MustCompile(`^[0-9,]+ \([0-9,]+\x{a0}new users?\)$`).MatchString(row[5]) {
		t.Errorf("classic's storage reads read %q", row[5])
	}
	// The calls offered candidates: the row gives the share of them that
	// its users had already seen, out of how many.
	if len(row) != 9 || !regexp.MustCompile(`^[0-9.]+% of [0-9,]+$`).MatchString(row[7]) {
		t.Errorf("classic's candidates already seen read %q", row[7:])
	}
	// Largest share first.
	sizes := eval[[]float64](tb, `[...document.querySelectorAll('#ns-stats tbody tr')].map((r) => {
		const [v, u] = r.children[2].textContent.split('\u00a0');
		return Number(v) * ({B: 1, KiB: 1024, MiB: 1 << 20, GiB: 1 << 30})[u];
	})`)
	if !slices.IsSortedFunc(sizes, func(a, b float64) int { return cmp.Compare(b, a) }) {
		t.Errorf("rows not by cache bytes, largest first: %v", sizes)
	}
	if href := eval[string](tb, `document.querySelector('#ns-stats tr[data-ns="classic"] a').getAttribute('href')`); href != "#/ns/classic" {
		t.Errorf("classic's link goes to %q", href)
	}
}

// A size of a whole number of a unit shows in that unit: a budget of
// exactly 1 GiB reads 1.00 GiB, not 1024 MiB.
// The table by namespace gives each namespace's items recorded, by every
// recording route, as /v1/stats counts them: a recommender's impressions,
// namespace by namespace.
func TestOverviewShowsEachNamespacesItemsRecorded(t *testing.T) {
	s := setup(t)
	svc, tb := s.ownOverview(t)
	w := svc.api(t, s.keys.write)
	user := userID(t)
	resp, err := w.FilterUserWithResponse(context.Background(), "classic", user, nil,
		client.FilterRequest{Candidates: []string{"a", "b", "c"}})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("filter: %v %s", err, resp.Body)
	}
	items := make([]string, 1500)
	for i := range items {
		items[i] = fmt.Sprintf("i:%d", i)
	}
	svc.record(t, s.keys.write, "feed", user, items...)

	r, err := svc.api(t, s.keys.admin).GetStatsWithResponse(context.Background())
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	for ns, want := range map[string]string{
		"classic": strconv.FormatInt(r.JSON200.Namespaces["classic"].Recorded, 10),
		"feed":    commas(r.JSON200.Namespaces["feed"].Recorded),
		"default": "0",
	} {
		tb.waitJS(fmt.Sprintf(`(() => { const th = [...document.querySelectorAll('#ns-stats thead th')].map((c) => c.textContent);
			const r = document.querySelector('#ns-stats tr[data-ns=%q]');
			return !!r && r.children[th.indexOf('Items recorded')]?.textContent === %q; })()`, ns, want),
			fmt.Sprintf("%s's items recorded to read %s", ns, want))
	}
	if r.JSON200.Namespaces["feed"].Recorded < 1000 {
		t.Errorf("feed recorded %d items: the test wants a figure in thousands", r.JSON200.Namespaces["feed"].Recorded)
	}
}

// commas writes n as the page does (en-US): 1,234,567.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func TestCacheBudgetOfAWholeUnitShowsInIt(t *testing.T) {
	s := setup(t)
	_, tb := s.ownOverview(t, "--cache-bytes", "1GiB")
	if got := tb.waitText("#card-cache .sub", "budget"); !strings.HasPrefix(got, "of 1.00\u00a0GiB budget") {
		t.Errorf("cache card reads %q, want the budget as 1.00 GiB", got)
	}
}

func TestNamespacesTableShowsTheDefaultProfile(t *testing.T) {
	s := setup(t)
	tb := s.keyTab(t, s.keys.read, "#/ns")
	tb.waitJS(`!!document.querySelector('#namespaces tr[data-ns="default"]')`, "the default namespace's row")
	cells := eval[[]string](tb, `[...document.querySelector('#namespaces tr[data-ns="default"]').cells].map((c) => c.textContent)`)
	if len(cells) < 4 || cells[0] != "default" || cells[1] != "staged" || cells[2] != "1%" || cells[3] != "none" {
		t.Errorf("default namespace row = %q, want default, staged, 1%%, none, ...", cells)
	}
}

func TestKeyIsKeptForTheSessionOnly(t *testing.T) {
	s := setup(t)
	tb := s.keyTab(t, s.keys.read, "#/")
	tb.open("#/ns") // a fresh page load in the same tab
	tb.waitJS(`!!document.querySelector('#namespaces tr[data-ns="default"]')`, "the namespaces, read with the kept key")
	tb.waitText("#role", "role: read")
	if got := tb.text("#role"); got != "role: read" {
		t.Errorf("role after a reload = %q, want role: read", got)
	}
	if eval[string](tb, `sessionStorage.getItem('seenapi.key')`) != s.keys.read || eval[int](tb, `localStorage.length`) != 0 {
		t.Errorf("the key is not in sessionStorage alone")
	}
	if eval[string](tb, `document.querySelector('#key-input').value`) != "" {
		t.Errorf("the key stays visible in the key field")
	}
	tb.click("#key-forget")
	tb.waitText("#role", "no key")
	if eval[bool](tb, `sessionStorage.getItem('seenapi.key') !== null`) {
		t.Errorf("Forget key left the key in sessionStorage")
	}
}

func TestWrongKeyShowsTheUnauthorizedDetail(t *testing.T) {
	s := setup(t)
	_, detail := s.svc.problemDetail(t, http.MethodGet, "/v1/stats", "not-a-key-of-this-service", "")
	tb := s.keyTab(t, "not-a-key-of-this-service", "#/")
	tb.waitText("#role", "key rejected")
	tb.waitText("#overview-error .problem", "401")
	if got := tb.text("#overview-error .problem .detail"); got != detail {
		t.Errorf("the page shows %q, the API's detail is %q", got, detail)
	}
	// Its text, as read aloud or copied, has the words apart.
	if got, want := eval[string](tb, `document.querySelector('#overview-error .problem').innerText.split('\n')[0]`),
		"Refreshing the figures failed. 401 Unauthorized: "+detail; got != want {
		t.Errorf("the problem's text reads %q, want %q", got, want)
	}
	// The hint speaks of the key entered, not of entering one.
	if got := tb.text("#overview-error .problem .hint"); !strings.HasPrefix(got, "The service does not take the key entered") {
		t.Errorf("the hint under a rejected key reads %q", got)
	}
}

// A key pasted as a line of a keys file (seenapi new-key writes "write:KEY")
// is sent as entered, a key may hold a colon, and the service's 401 then
// says what it begins with and that the key follows the colon; one pasted
// with the scheme of its header ("Bearer KEY") is refused at its entry,
// saying so, not as a key holding a space.
func TestAKeyPastedWithItsRoleOrSchemeSaysSo(t *testing.T) {
	s := setup(t)
	tb := s.newTab(t, nil)
	tb.open("#/")
	tb.waitText("#role", "no key")
	tb.useKey("read:" + s.keys.read)
	tb.waitText("#role", "key rejected")
	want := `The service does not take the key entered, which begins with "read:" as a line of a keys file does (seenapi new-key writes one): the key is what follows the colon. Enter it alone in the bar at the top.`
	if got := tb.waitText("#overview-error .problem .hint", "begins with"); got != want {
		t.Errorf("the hint under the 401 reads %q, want %q", got, want)
	}
	tb.useKey(s.keys.read)
	tb.waitText("#role", "role: read")
	for _, c := range []struct{ entered, scheme string }{
		{"Bearer " + s.keys.admin, "Bearer"},
		{"Authorization: Bearer " + s.keys.admin, "Authorization: Bearer"},
	} {
		tb.do("enter the key", chromedp.Evaluate[chromedp.Void](`document.querySelector('#key-input').value = `+strconv.Quote(c.entered)),
			chromedp.Click(chromedp.CSS(`#key-form button[type="submit"]`)))
		want := fmt.Sprintf(`the key begins with "%s", which the page puts before it itself: paste the key alone.`, c.scheme)
		if got := tb.waitText("#banner .detail", "begins with"); got != want {
			t.Errorf("entered %q: the banner reads %q, want %q", c.scheme+" KEY", got, want)
		}
		if got := tb.text("#role"); got != "role: read" {
			t.Errorf("entered %q: the role reads %q, want the read key's still", c.scheme+" KEY", got)
		}
		tb.click("#banner button")
	}
}

// A key pasted with a character no request header of the page can carry
// (here a zero-width space) is refused at its entry, saying which and
// where, instead of every call failing as if the service did not answer;
// the key in use stays in use.
func TestAKeyThePageCannotSendIsRefusedAtItsEntry(t *testing.T) {
	s := setup(t)
	tb := s.readTab(t)
	tb.waitText("#updated", "Figures updated")
	// As pasted: typing cannot enter a zero-width space.
	tb.do("enter the key", chromedp.Evaluate[chromedp.Void](`document.querySelector('#key-input').value = `+strconv.Quote(s.keys.admin+"\u200b")),
		chromedp.Click(chromedp.CSS(`#key-form button[type="submit"]`)))
	want := fmt.Sprintf("the key holds U+200B (its character %d), which the page cannot send", len(s.keys.admin)+1)
	tb.waitText("#banner", want)
	if got := tb.text("#role"); got != "role: read" {
		t.Errorf("the role reads %q, want the read key's still", got)
	}
	if got := tb.text("#overview-error"); got != "" {
		t.Errorf("the overview shows %q", got)
	}
}

// The banner of a key the page does not send says what happened, by the
// problem's title, as every problem box does, and what to do: it read
// "Error: the key holds a space ...".
func TestTheKeysBannerSaysWhatHappened(t *testing.T) {
	s := setup(t)
	tb := s.newTab(t, nil)
	tb.open("")
	for _, c := range []struct{ key, want string }{
		{"a b", "Key not used: the key holds a space (its character 2), which the page cannot send: a key is printable ASCII without spaces. Paste it again without it."},
		{"", "Key not used: Paste a key first: the field is empty."},
	} {
		tb.fill("#key-input", c.key)
		tb.click(`#key-form button[type="submit"]`)
		tb.waitJS(`!document.querySelector('#banner').hidden`, "the banner")
		if got := eval[string](tb, `(() => { const b = document.querySelector('#banner').cloneNode(true); b.querySelector('button').remove(); return b.textContent; })()`); got != c.want {
			t.Errorf("the key %q entered: the banner reads %q, want %q", c.key, got, c.want)
		}
		tb.click("#banner button")
	}
}

// Dismissing the banner with the keyboard takes its button away: the focus
// goes on to the page, not back to the start of the document.
func TestDismissingTheBannerKeepsTheFocusInThePage(t *testing.T) {
	s := setup(t)
	tb := s.readTab(t)
	tb.do("enter a key with a space", chromedp.Evaluate[chromedp.Void](`document.querySelector('#key-input').value = 'a b'`),
		chromedp.Click(chromedp.CSS(`#key-form button[type="submit"]`)))
	tb.waitText("#banner", "the key holds a space")
	tb.do("press Dismiss", chromedp.Focus(chromedp.CSS("#banner button")), chromedp.KeyEvent(kb.Enter))
	tb.waitJS(`document.querySelector('#banner').hidden`, "the banner to go")
	if got := eval[string](tb, `document.activeElement.id || document.activeElement.tagName`); got != "view" {
		t.Errorf("after the banner was dismissed the focus is on %s, want the page (view)", got)
	}
}

// A page without a key, on a service with keys, learns so from GET /healthz
// and sends none of the API's calls, GET /v1/auth included: each would be
// one more 401 in the service's errors, which its operators watch, at every
// load of the page. The pages still say a key is needed; a key entered
// starts the refresh of the figures.
func TestAPageWithoutAKeyCallsNoRouteNeedingOne(t *testing.T) {
	s := setup(t)
	svc, err := s.startService("data-" + userID(t)) // its own counters of errors
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	overview := s.newTab(t, svc)
	overview.open("#/")
	overview.waitText("#updated", "Figures not refreshed")
	overview.waitText("#overview-error .problem .hint", "Enter an API key")
	overview.waitText("#role", "role: no key (the service needs one)")
	overview.passTime(3*time.Second, true) // a refresh and a half
	if got := overview.text("#updated"); !strings.HasSuffix(got, "(asked again once a key is entered)") {
		t.Errorf("the footer reads %q, not saying when the figures are asked again", got)
	}
	// What the page says, the service not asked: its own words, not a 401's.
	want := "Refreshing the figures failed. API key needed: the service has API keys and none was entered; nothing was sent"
	if got := eval[string](overview, `document.querySelector('#overview-error .problem').innerText.split('\n')[0]`); got != want {
		t.Errorf("the overview's problem reads %q, want %q", got, want)
	}
	// The overview's clock stays stopped: the other pages load in a tab of their own.
	tb := s.newTab(t, svc)
	tb.open(fragment("default", userID(t)))
	tb.waitText("#user .problem .hint", "Enter an API key")
	tb.open("#/ns")
	tb.waitText("#view .problem .hint", "Enter an API key")
	var sent []string
	for _, page := range []*tab{overview, tb} {
		page.mu.Lock()
		for _, id := range page.order {
			if x := page.exchanges[id]; !strings.HasSuffix(x.url, "/healthz") {
				sent = append(sent, x.method+" "+strings.TrimPrefix(x.url, svc.base))
			}
		}
		page.mu.Unlock()
	}
	if len(sent) > 0 {
		t.Errorf("without a key the page called %q", sent)
	}
	if n := overview.apiCalls(http.MethodGet, "/healthz") + tb.apiCalls(http.MethodGet, "/healthz"); n != 3 {
		t.Errorf("the page asked GET /healthz %d times in 3 loads, want 3", n)
	}
	r, err := svc.api(t, s.keys.admin).GetStatsWithResponse(context.Background())
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	if len(r.JSON200.Errors) != 0 || r.JSON200.NotReady != svc.notReady {
		t.Errorf("the service counts the error answers %v and %d answers not ready after 3 loads of the page without a key, want none and the harness's %d",
			r.JSON200.Errors, r.JSON200.NotReady, svc.notReady)
	}
	tb.useKey(s.keys.read)
	tb.waitText("#updated", "Figures updated")
	tb.waitJS(`!!document.querySelector('#namespaces tr[data-ns="default"]')`, "the namespaces, read with the key")
}

// Behind a proxy that passes the dashboard and /v1/ alone, GET /healthz is
// not answered: a page without a key then learns that the service needs
// one from GET /v1/auth's 401, says so, and calls nothing else until a key
// is entered. The proxy's refusal is a 404 (a path it does not route, here
// the service's own 404) or a 403 (a path it denies).
func TestAPageWithoutAKeyAsksAuthWhenHealthzIsNotAnswered(t *testing.T) {
	s := setup(t)
	pass := reverseProxy(t, s.svc.base)
	for _, status := range []int{http.StatusNotFound, http.StatusForbidden} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/healthz" {
					if status != http.StatusNotFound {
						proxyProblem(w, status, "this path is not served here")
						return
					}
					r.URL.Path = "/not-passed" // the service's own 404, as a proxy's would be
				}
				pass.ServeHTTP(w, r)
			}))
			t.Cleanup(proxy.Close)
			tb := s.newTab(t, &service{base: proxy.URL})
			tb.open("#/")
			tb.waitText("#role", "role: no key (the service needs one)")
			tb.waitText("#overview-error .problem", "401 Unauthorized")
			tb.waitText("#overview-error .problem .hint", "Enter an API key")
			tb.mu.Lock()
			var sent []string
			for _, id := range tb.order {
				x := tb.exchanges[id]
				sent = append(sent, fmt.Sprintf("%s %s %d", x.method, strings.TrimPrefix(x.url, proxy.URL), x.status))
			}
			tb.mu.Unlock()
			if want := []string{fmt.Sprintf("GET /healthz %d", status), "GET /v1/auth 401"}; !slices.Equal(sent, want) {
				t.Errorf("without a key the page called %q, want %q", sent, want)
			}
			tb.useKey(s.keys.read)
			tb.waitText("#role", "role: read")
			tb.waitText("#updated", "Figures updated")
		})
	}
}

// Behind a proxy answering GET /healthz 502 (the service restarting behind
// it, say), 408 (its wait for the service timed out) or 429 (its own rate
// limit, to be asked again later) while it passes /v1/ on, a page without a
// key cannot learn whether the service needs one: it sends no GET /v1/auth
// without a key, which a service with keys would count as a 401 in its
// errors, and asks GET /healthz again at its refreshes until it is answered.
func TestAPageWithoutAKeySendsNoAuthWhileHealthzFails(t *testing.T) {
	s := setup(t)
	pass := reverseProxy(t, s.svc.base)
	for _, status := range []int{http.StatusBadGateway, http.StatusRequestTimeout, http.StatusTooManyRequests} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			var failing atomic.Bool
			failing.Store(true)
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/healthz" && failing.Load() {
					if status == http.StatusTooManyRequests {
						// Later than the page waits for one call: it gives the call up at once.
						w.Header().Set("Retry-After", "60")
					}
					proxyProblem(w, status, "the service does not answer")
					return
				}
				pass.ServeHTTP(w, r)
			}))
			t.Cleanup(proxy.Close)
			tb := s.newTab(t, &service{base: proxy.URL})
			tb.open("#/")
			tb.waitJS(`!document.querySelector('#role').textContent.includes('checking')`, "the role's check to end")
			if n := tb.apiCalls(http.MethodGet, "/v1/auth"); n != 0 {
				t.Fatalf("GET /healthz answered %d, the page sent GET /v1/auth without a key %d times, want none", status, n)
			}
			tb.waitText("#role", "role: unknown")
			tb.waitText("#overview-error .problem", strconv.Itoa(status))
			// A refresh while GET /healthz fails asks it again, and still nothing needing a key.
			for deadline := time.Now().Add(waitFor); tb.apiCalls(http.MethodGet, "/healthz") < 2; time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the page asked GET /healthz %d times in %v while it failed, want it asked again", tb.apiCalls(http.MethodGet, "/healthz"), waitFor)
				}
			}
			if n := tb.apiCalls(http.MethodGet, "/v1/auth"); n != 0 {
				t.Errorf("while GET /healthz failed the page sent GET /v1/auth without a key %d times, want none", n)
			}
			failing.Store(false)
			tb.waitText("#role", "role: no key (the service needs one)")
			tb.waitText("#overview-error .problem .hint", "Enter an API key")
			tb.mu.Lock()
			defer tb.mu.Unlock()
			for _, id := range tb.order {
				if x := tb.exchanges[id]; x.status == http.StatusUnauthorized {
					t.Errorf("the page sent %s %s without a key: 401", x.method, strings.TrimPrefix(x.url, proxy.URL))
				}
			}
		})
	}
}

// proxyProblem answers status as a proxy does of its own, not passing the
// request on (502 while the service behind it is down, 403 for a path it
// denies): as a problem (as openapi.yaml's default answer is), the way a
// proxy configured with error pages of its own does.
func proxyProblem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail})
}

func TestUnknownNamespaceShowsTheProblemDetail(t *testing.T) {
	s := setup(t)
	status, detail := s.svc.problemDetail(t, http.MethodGet, "/v1/namespaces/no-such-ns/users/42", s.keys.read, "")
	if status != http.StatusNotFound {
		t.Fatalf("unknown namespace: HTTP %d, want 404", status)
	}
	tb := s.keyTab(t, s.keys.read, "#/ns/no-such-ns/users/42")
	tb.waitText("#user .problem", "404")
	if got := tb.text("#user .problem .detail"); got != detail {
		t.Errorf("the page shows %q, the API's detail is %q", got, detail)
	}
	// The detail speaks of GET /v1/namespaces: the page links to its own list.
	if got := eval[string](tb, `document.querySelector('#user .problem .hint a')?.getAttribute('href') || ''`); got != "#/ns" {
		t.Fatalf("the problem links to %q, want the Namespaces page (#/ns)", got)
	}
	tb.click("#user .problem .hint a")
	tb.waitJS(`!!document.querySelector('#namespaces tr[data-ns="default"]')`, "the Namespaces page")
	// The namespace's page: the problem, and no empty table of users under it.
	tb.open("#/ns/no-such-ns")
	tb.waitText("#user .problem", "404")
	if eval[bool](tb, `document.getElementById('user-list').hidden`) != true {
		t.Errorf("an empty table of users stays under the problem")
	}
}

// The user ids "." and "..", which the service refuses as no path can carry
// them, are said so: the page does not send a call the browser would
// resolve to another address (.../users/.. is .../default/).
func TestDotUserIDsAreSaidUnusable(t *testing.T) {
	s := setup(t)
	tb := s.readTab(t)
	for _, id := range []string{".", ".."} {
		tb.open(fragment("default", id))
		tb.waitText("#user .problem", `a user id cannot be "`+id+`": a path cannot carry it, so the service refuses it`)
	}
	for _, path := range []string{"/v1/namespaces/default/users/", "/v1/namespaces/default/"} {
		if n := tb.apiCalls(http.MethodGet, path); n != 0 {
			t.Errorf("the page sent GET %s %d times", path, n)
		}
	}
}

// afterIt says whether what follows the element sel (its next sibling,
// text or element) starts after it as the text reads: to the right of its
// last line, or on a line below.
const afterIt = `((sel) => {
	const el = document.querySelector(sel);
	const r = document.createRange();
	r.selectNode(el.nextSibling);
	const lines = el.getClientRects(); const last = lines[lines.length - 1];
	const next = r.getClientRects()[0];
	return next.left >= last.right - 0.5 || next.top >= last.bottom - 0.5;
})`

// A user id holding a bidi control (U+202E, right-to-left override) cannot
// turn the text after it around: the title, the note of a user without
// history and the erase dialog read "User ID in NS ..." in that order, not
// with the namespace and the words after the id reversed before it.
func TestAUserIDCannotTurnTheTextAroundIt(t *testing.T) {
	s := setup(t)
	user := "x\u202e" + userID(t)
	s.svc.record(t, s.keys.write, "default", user, "a")

	tb := s.keyTab(t, s.keys.admin, fragment("default", user))
	tb.waitText("#user-items", "1")
	for _, sel := range []string{"#user-title code:first-of-type", "#user-title code:nth-of-type(2)"} {
		if !eval[bool](tb, afterIt+"("+strconv.Quote(sel)+")") {
			t.Errorf("the title reads %q with what follows %s before it", tb.text("#user-title"), sel)
		}
	}
	tb.click("#erase-open")
	tb.waitJS(`document.querySelector('#erase-dialog').open`, "the confirmation")
	if !eval[bool](tb, afterIt+`('#erase-dd code')`) {
		t.Errorf("the erase dialog reads %q with what follows the user before it", tb.text("#erase-dd"))
	}
	tb.click("#erase-cancel")

	tb.open(fragment("default", "y\u202e"+userID(t)))
	tb.waitJS(`!!document.querySelector('#user-missing')`, "the note of a user without history")
	if !eval[bool](tb, afterIt+`('#user-missing bdi')`) {
		t.Errorf("the note reads %q with what follows the user before it", tb.text("#user-missing"))
	}
	if got := eval[string](tb, `document.title`); !strings.HasPrefix(got, "\u2068y\u202e") || !strings.Contains(got, "\u2069 in default") {
		t.Errorf("the page's title %q does not isolate the user id", got)
	}
}

// User ids and items are the service's data, which anyone with a write key
// sets: markup in them (a script, an image's onerror, a javascript: URL, a
// quote that would end an attribute) is shown as text wherever the page
// shows them (the user list, a user's page and title, the erase dialog,
// the answer of a check, a refused item's problem), never parsed: no
// element of theirs appears, nothing of theirs runs, and each link stays
// a link within the page. The policy would block an inline handler, and
// the tab reports its violations; this holds without it.
func TestMarkupInIDsAndItemsIsShownAsText(t *testing.T) {
	s := setup(t)
	suffix := " " + userID(t)
	users := []string{ // '!' sorts them before the other tests' users of small
		`!<img src=x onerror="window.pwned='img'">` + suffix,
		`!<script>window.pwned='script'</script>` + suffix,
		`!javascript:window.pwned='href'//` + suffix,
		`!" onmouseover="window.pwned='attr'` + suffix,
	}
	items := []string{`<img src=x onerror="window.pwned='item'">`, `</code><b id="injected">b</b>`, `javascript:window.pwned='item-href'`}
	for _, u := range users {
		s.svc.record(t, s.keys.write, "small", u, items...)
	}
	// What the page would hold if any of it were parsed as markup.
	const injected = `document.querySelectorAll('#view img, #view script, #view b, body > img, body > script:not([src]), [onerror], [onmouseover]').length + ` +
		`(window.pwned === undefined ? 0 : 100)`

	tb := s.keyTab(t, s.keys.admin, "#/ns/small")
	for _, u := range users {
		tb.waitJS(`[...document.querySelectorAll('#user-list a')].some((a) => a.textContent === `+strconv.Quote(u)+`)`, "the user "+u+" in the list")
	}
	hrefs := eval[[]string](tb, `[...document.querySelectorAll('#user-list a')].map((a) => a.getAttribute('href'))`)
	for _, h := range hrefs {
		if !strings.HasPrefix(h, "#/ns/small/users/") {
			t.Errorf("a user's link leads to %q, out of the page", h)
		}
	}
	if n := eval[int](tb, injected); n != 0 {
		t.Fatalf("the user list parsed markup of a user id (%d)", n)
	}

	for _, u := range users {
		tb.open(fragment("small", u))
		tb.waitText("#user-items", strconv.Itoa(len(items)))
		if got := tb.text("#user-title code:first-of-type"); got != u {
			t.Errorf("the title shows the user as %q, want %q", got, u)
		}
		if got := eval[string](tb, `document.title`); !strings.Contains(got, u) {
			t.Errorf("the page's title %q does not show the user id as text", got)
		}
		tb.fill("#check-items", strings.Join(items, "\n"))
		tb.click(`#check-form button[type="submit"]`)
		tb.waitText("#check-result .done", "of 3 seen")
		if got := eval[[]string](tb, `[...document.querySelectorAll('#check-result li code')].map((c) => c.textContent)`); !slices.Equal(got, items) {
			t.Errorf("the check shows the items %q, want %q", got, items)
		}
		// A refused item's problem quotes it.
		tb.do("enter the items", chromedp.Evaluate[chromedp.Void](`document.querySelector('#check-items').value = `+strconv.Quote("ok\n</code><b>b</b>\tx")))
		tb.click(`#check-form button[type="submit"]`)
		tb.waitJS(`!!document.querySelector('#check-result .problem')`, "the refusal")
		if got := tb.text("#check-result .problem .detail"); !strings.Contains(got, `"</code><b>b</b>\tx"`) {
			t.Errorf("the refusal reads %q, without the item as text", got)
		}
		tb.click("#erase-open")
		tb.waitJS(`document.querySelector('#erase-dialog').open`, "the confirmation")
		if got := tb.text("#erase-dd code"); got != u {
			t.Errorf("the erase dialog shows the user as %q, want %q", got, u)
		}
		tb.click("#erase-cancel")
		if n := eval[int](tb, injected); n != 0 {
			t.Fatalf("the page of %q parsed markup of its id or items (%d)", u, n)
		}
	}
}

// A user's address with its id deleted, as one would in the address bar,
// is its namespace's page of users, not an unknown page.
func TestAUsersAddressWithoutItsIDListsTheNamespacesUsers(t *testing.T) {
	s := setup(t)
	tb := s.keyTab(t, s.keys.read, "")
	for _, frag := range []string{"#/ns/classic/users/", "#/ns/classic/users"} {
		tb.open(frag)
		if got := tb.waitText("#user-list-title", "Users in"); got != "Users in classic" {
			t.Errorf("%s: the list is titled %q", frag, got)
		}
	}
}

func TestUnknownAddressSaysSo(t *testing.T) {
	s := setup(t)
	tb := s.newTab(t, nil)
	tb.open("#/no/such/page")
	tb.waitText("#view h2", "Not a page")
	if got := tb.text("#view"); !strings.Contains(got, "#/no/such/page") {
		t.Errorf("the page %q does not name the address", got)
	}
}

// stoppedOverview opens the overview of a service of its own, once it
// shows its figures stops the service, and returns once the page says so.
func (s *suite) stoppedOverview(t *testing.T) *tab {
	t.Helper()
	svc, tb := s.ownOverview(t)
	tb.waitJS(`!!document.querySelector('[data-k="hot-users"]')`, "the figures")
	svc.stop()
	tb.waitText("#overview-error .problem", "did not answer")
	return tb
}

func TestPageStaysUpWhenTheServiceStops(t *testing.T) {
	s := setup(t)
	tb := s.stoppedOverview(t)
	tb.waitText("#updated", "not refreshed")
	if !eval[bool](tb, `!!document.querySelector('[data-k="hot-users"]')`) {
		t.Errorf("the last figures disappeared when the service stopped")
	}
}

// A service that stops answering without closing its connections (a stopped
// process, a stalled host, a lost network) is said so on the overview within
// the page's time for an answer, rather than its last figures standing as
// current; they come back when it answers again.
func TestOverviewSaysAStalledServiceDoesNotAnswer(t *testing.T) {
	s := setup(t)
	svc, tb := s.ownOverview(t)
	tb.waitJS(`!!document.querySelector('[data-k="hot-users"]')`, "the figures")

	resume := svc.pause(t)
	// 10 s for the answer, after a refresh that may wait 2 s.
	tb.passTime(13*time.Second, false)
	if !eval[bool](tb, `(document.querySelector('#overview-error .problem')?.textContent || '').includes('did not answer within 10\u00a0s')`) {
		t.Fatalf("13 s into the stall the overview's problem reads %q, want it to say the service did not answer within 10 s", tb.text("#overview-error"))
	}
	if got := tb.text("#updated"); !regexp.MustCompile(`^Figures of .+, not refreshed since: The service did not answer within 10\x{a0}s`).MatchString(got) {
		t.Errorf("the footer reads %q, want the time of the figures shown and why they are not refreshed", got)
	}
	if !eval[bool](tb, `!!document.querySelector('[data-k="hot-users"]')`) {
		t.Errorf("the last figures disappeared while the service stalled")
	}

	resume()
	tb.passTime(3*time.Second, true) // the next refresh, answered
	if !eval[bool](tb, `!document.querySelector('#overview-error .problem') && document.querySelector('#updated').textContent.startsWith('Figures updated')`) {
		t.Errorf("a refresh after the service resumed: the footer reads %q, want the figures refreshed again", tb.text("#updated"))
	}
}

// ownOverview starts a service of the test's own (with the flags extra),
// stopped when the test ends, and opens its overview with the read key.
func (s *suite) ownOverview(t *testing.T, extra ...string) (*service, *tab) {
	t.Helper()
	return s.ownOverviewOf(t, "data-"+userID(t), extra...)
}

// ownOverviewOf is ownOverview on the data directory data under s.dir.
func (s *suite) ownOverviewOf(t *testing.T, data string, extra ...string) (*service, *tab) {
	t.Helper()
	svc, err := s.startServiceWith(data, s.keysArg, "", extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	tb := s.newTab(t, svc)
	tb.open("#/")
	tb.useKey(s.keys.read)
	return svc, tb
}

// labelled lists the page's controls that have no accessible name, and counts them all.
const labelled = `(() => {
	const bad = [];
	const controls = [...document.querySelectorAll('input, select, textarea, button, [role="img"]')]
		.filter((e) => e.type !== 'hidden');
	for (const e of controls) {
		const label = [...(e.labels || [])].map((l) => l.textContent.trim()).join('') ||
			e.getAttribute('aria-label') || (e.getAttribute('aria-labelledby') || '').split(' ')
				.map((id) => document.getElementById(id)?.textContent.trim() || '').join('') ||
			(e.tagName === 'BUTTON' ? e.textContent.trim() : '');
		if (!label) bad.push(e.outerHTML.slice(0, 120));
	}
	return { count: controls.length, bad };
})()`

type labelReport struct {
	Count int      `json:"count"`
	Bad   []string `json:"bad"`
}

func TestEveryControlHasALabel(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "default", user, "l:1")
	tb := s.keyTab(t, s.keys.read, "#/")
	tb.waitJS(`!!document.querySelector('#card-calls svg polyline')`, "the overview's charts")
	pages := []struct{ name, frag, ready string }{
		{"overview", "#/", `!!document.querySelector('#card-calls svg')`},
		{"namespaces", "#/ns", `!!document.querySelector('#namespaces tbody tr')`},
		{"user", fragment("default", user), `!!document.querySelector('#layers .bar')`},
	}
	for _, p := range pages {
		tb.open(p.frag)
		tb.waitJS(p.ready, p.name+" page")
		r := eval[labelReport](tb, labelled)
		if r.Count < 3 {
			t.Errorf("%s: only %d controls found; the check is not looking", p.name, r.Count)
		}
		for _, b := range r.Bad {
			t.Errorf("%s: control without an accessible name: %s", p.name, b)
		}
	}
}

// Every table is named, and its header cells say what they head: a screen
// reader announces a table by its name, and reads a cell with the headers of
// its row and column. The tables of the namespaces, of a namespace's users
// and of the namespaces stored and not served had no name, where those of the
// overview have their captions.
func TestEveryTableIsNamedAndItsHeadersScoped(t *testing.T) {
	s := setup(t)
	svc, _ := s.notServedService(t)
	tb := s.newTab(t, svc)
	pages := []struct{ frag, ready string }{
		{"#/", `!!document.querySelector('#ns-stats tbody tr')`},
		{"#/ns", `!!document.querySelector('#not-served tbody tr')`},
		{"#/ns/feed", `!!document.querySelector('#user-list tbody tr')`},
	}
	tables := 0
	for _, p := range pages {
		tb.open(p.frag)
		tb.waitJS(p.ready, p.frag+"'s tables")
		for _, n := range tb.axTree() {
			if n.role != "table" {
				continue
			}
			tables++
			if strings.TrimSpace(n.name) == "" {
				t.Errorf("%s: a table has no accessible name", p.frag)
			}
		}
		if bad := eval[[]string](tb, `[...document.querySelectorAll('th:not([scope="col"]):not([scope="row"])')].map((th) => th.textContent)`); len(bad) > 0 {
			t.Errorf("%s: header cells without a scope: %q", p.frag, bad)
		}
	}
	if tables < 5 {
		t.Errorf("%d tables found; the check is not looking", tables)
	}
}

// colours defines, for the checks of contrast, parse (a computed colour),
// over (a colour over another), lum (relative luminance), background (the
// colour behind an element, its ancestors' blended) and ratio (WCAG's
// contrast ratio of two colours).
const colours = `
	const parse = (c) => {
		const m = /rgba?\(([^)]+)\)/.exec(c);
		if (!m) return null;
		const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
		return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 };
	};
	const over = (top, under) => ({ r: top.r * top.a + under.r * (1 - top.a), g: top.g * top.a + under.g * (1 - top.a),
		b: top.b * top.a + under.b * (1 - top.a), a: 1 });
	const lum = (c) => {
		const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
		return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
	};
	const background = (el) => {
		const chain = [];
		for (let e = el; e; e = e.parentElement) chain.unshift(e);
		let bg = { r: 255, g: 255, b: 255, a: 1 };
		for (const e of chain) {
			const c = parse(getComputedStyle(e).backgroundColor);
			if (c && c.a > 0) bg = over(c, bg);
		}
		return bg;
	};
	const ratio = (x, y) => { const [hi, lo] = [lum(x), lum(y)].sort((a, b) => b - a); return (hi + 0.05) / (lo + 0.05); };
`

// lowContrast lists the visible text whose contrast with its background is
// under WCAG AA: 4.5:1, or 3:1 for large text. Disabled controls are exempt.
const lowContrast = `(() => {` + colours + `
	const bad = [];
	let checked = 0;
	for (const el of document.querySelectorAll('body *')) {
		if (!el.checkVisibility() || el.closest('svg, :disabled, noscript')) continue;
		if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
		const cs = getComputedStyle(el);
		const bg = background(el);
		const fg = over(parse(cs.color), bg);
		const r = ratio(fg, bg);
		const size = parseFloat(cs.fontSize);
		const large = size >= 24 || (Number(cs.fontWeight) >= 700 && size >= 18.66);
		checked++;
		if (r < (large ? 3 : 4.5)) bad.push(r.toFixed(2) + ':1 ' + cs.color + ' on ' + JSON.stringify(bg) + ': ' + el.textContent.trim().slice(0, 60));
	}
	return { count: checked, bad };
})()`

// weakFocus focuses each control of the page in turn, as Tab would, and
// lists those whose focus ring is missing or has a contrast under 3:1 with
// the page behind it (WCAG's for a state of a control).
const weakFocus = `(() => {` + colours + `
	const bad = [];
	let checked = 0;
	for (const el of document.querySelectorAll('a[href], button, input, select, textarea, [tabindex="0"]')) {
		if (!el.checkVisibility() || el.disabled) continue;
		el.focus({ focusVisible: true });
		if (document.activeElement !== el) continue;
		checked++;
		const cs = getComputedStyle(el);
		const name = el.id || el.getAttribute('aria-label') || el.textContent.trim().slice(0, 40) || el.outerHTML.slice(0, 80);
		if (cs.outlineStyle === 'none' || parseFloat(cs.outlineWidth) < 2) { bad.push('no focus ring: ' + name); continue; }
		// The ring is drawn outside the control, over what is behind it.
		const bg = background(el.parentElement);
		const r = ratio(over(parse(cs.outlineColor), bg), bg);
		if (r < 3) bad.push(r.toFixed(2) + ':1 ' + cs.outlineColor + ' on ' + JSON.stringify(bg) + ': ' + name);
	}
	document.activeElement.blur();
	return { count: checked, bad };
})()`

// The focus ring of every control stands out from the page behind it, in
// both colour schemes, so that a keyboard user sees where the focus is: the
// amber ring was 2:1 on the light scheme's white, under the 3:1 a state of
// a control needs.
func TestTheFocusRingIsSeenInBothSchemes(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "default", user, "r:1")
	s.inBothSchemes(t, s.keys.admin, func(tb *tab) {
		check := func(page string) { tb.findsNone(page, weakFocus, "controls focused", "") }
		tb.waitJS(`!!document.querySelector('#ns-stats tbody a')`, "the table by namespace")
		check("overview")
		tb.open(fragment("default", user))
		tb.waitText("#user-items", "1")
		tb.fill("#check-items", "r:1")
		tb.click("#check-run")
		tb.waitText("#check-result .done", "seen")
		check("user")
	})
}

// inBothSchemes runs check in a subtest for each colour scheme, light and
// dark, on a tab of its own opened on the overview in that scheme, with key
// in use.
func (s *suite) inBothSchemes(t *testing.T, key string, check func(tb *tab)) {
	t.Helper()
	for _, scheme := range []string{"light", "dark"} {
		t.Run(scheme, func(t *testing.T) {
			tb := s.newTab(t, nil)
			if _, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
				t.Fatal(err)
			}
			tb.open("#/")
			tb.useKey(key)
			check(tb)
		})
	}
}

// findsNone runs the check js (a labelReport of what it looked at) on the
// page and fails the test for each thing it finds, each said after prefix,
// or when it looked at fewer than ten (looked, what it counts).
func (tb *tab) findsNone(page, js, looked, prefix string) {
	tb.t.Helper()
	r := eval[labelReport](tb, js)
	if r.Count < 10 {
		tb.t.Errorf("%s: only %d %s; the check is not looking", page, r.Count, looked)
	}
	for _, b := range r.Bad {
		tb.t.Errorf("%s: %s%s", page, prefix, b)
	}
}

// phoneTab opens a tab as wide as a phone's window (360 px) on the
// overview, with the read key in use.
func (s *suite) phoneTab(t *testing.T) *tab {
	t.Helper()
	return s.phoneTabOf(t, 360)
}

// phoneTabOf is phoneTab in a window width px wide.
func (s *suite) phoneTabOf(t *testing.T, width int64) *tab {
	t.Helper()
	tb := s.newTab(t, nil)
	tb.narrow(width, 740)
	tb.open("#/")
	tb.useKey(s.keys.read)
	return tb
}

// narrow makes the tab's window width by height px, a phone's.
func (tb *tab) narrow(width, height int64) {
	tb.t.Helper()
	if _, err := chromedp.Call(tb.ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
		Width: width, Height: height, DeviceScaleFactor: 1, Mobile: true}); err != nil {
		tb.t.Fatal(err)
	}
}

// linesOf counts the lines an element's text takes: the distinct tops of
// the boxes of its text.
const linesOf = `((e) => { const r = document.createRange(); r.selectNodeContents(e);
	return new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size; })`

// In a phone's window (375 px) the figures of the tables keep to one
// line, the table scrolling sideways as it does already: "5,684 (4,000
// new users)" and "0.1% of 263,115" in the table by namespace, and a
// user's last recording, "11/29/2026, 7:39 AM (4 min ago)", took two or
// three lines each, making each row three lines tall (a page of 50 users
// some 4,600 px).
func TestATablesFiguresKeepToOneLineOnAPhone(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "default", user, "p:1")
	tb := s.phoneTabOf(t, 375)
	broken := func(page, cells string) {
		t.Helper()
		got := eval[[]string](tb, `[...document.querySelectorAll(`+strconv.Quote(cells)+`)].filter((e) => `+linesOf+`(e) > 1).map((e) => e.textContent)`)
		if len(got) > 0 {
			t.Errorf("%s: figures %q take more than one line, want each on one", page, got)
		}
		if got := eval[[]int](tb, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`); got[0] > got[1] {
			t.Errorf("%s: the page is %d px wide in a window of %d", page, got[0], got[1])
		}
	}
	tb.waitJS(`!!document.querySelector('#ns-stats tr[data-ns="default"]')`, "the table by namespace")
	if got := tb.text(`#ns-stats tr[data-ns="default"] td:nth-of-type(5)`); !strings.Contains(got, " (") {
		t.Fatalf("default's storage reads read %q; the test wants the longest, with the new users", got)
	}
	broken("overview", "#ns-stats td")
	tb.open("#/ns/default")
	tb.waitJS(`!!document.querySelector('#user-list tbody tr')`, "the users page")
	if n := eval[int](tb, `document.querySelectorAll('#user-list tbody td:nth-child(3)').length`); n == 0 {
		t.Fatalf("the users page lists no user's last recording")
	}
	broken("users", "#user-list tbody td:nth-child(n+2)")
}

// In a phone's narrow window the pages keep to its width: a table of more
// columns than it holds scrolls sideways in its own box, a long id or item
// (a hash, without a place to break) wraps, and the top bar, the headings
// and the other panels stay in view.
func TestANarrowWindowScrollsTablesNotThePage(t *testing.T) {
	s := setup(t)
	hash := strings.Repeat("0123456789abcdef", 4)
	user := userID(t) + hash
	s.svc.record(t, s.keys.write, "default", user, "n:1")
	tb := s.phoneTab(t)
	for _, p := range []struct{ name, frag, ready, table string }{
		{"overview", "#/", `!!document.querySelector('#ns-stats tbody tr')`, "#ns-stats"},
		{"namespaces", "#/ns", `!!document.querySelector('#namespaces tbody tr')`, "#namespaces"},
		{"users", "#/ns/default", `!!document.querySelector('#user-list tbody tr')`, "#user-list"},
		{"user", fragment("default", user), `!!document.querySelector('#layers .bar')`, ""},
		{"check", "", `!!document.querySelector('#check-result li')`, ""},
	} {
		if p.frag == "" { // a check of a long item, on the user's page
			tb.fill("#check-items", hash+hash)
			tb.click(`#check-form button[type="submit"]`)
		} else {
			tb.open(p.frag)
		}
		tb.waitJS(p.ready, p.name+" page")
		if got := eval[[]int](tb, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`); got[0] > got[1] {
			t.Errorf("%s: the page is %d px wide in a window of %d", p.name, got[0], got[1])
		}
		if p.table == "" {
			continue
		}
		// The table does not fit: its box scrolls, which is what keeps the page to the window.
		if got := eval[[]int](tb, fmt.Sprintf(`(() => { const b = document.querySelector(%q).parentElement; return [b.scrollWidth, b.clientWidth]; })()`, p.table)); got[0] <= got[1] {
			t.Errorf("%s: %s is %d px wide in a box of %d: the test needs a table wider than the window", p.name, p.table, got[0], got[1])
		}
		// A user's id in the list breaks where it must, not into a column of a few letters
		// each line: the table scrolls first.
		if p.name == "users" {
			if got := eval[float64](tb, `document.querySelector('#user-list td').getBoundingClientRect().width`); got < 100 {
				t.Errorf("users: the list's column of users is %.0f px wide", got)
			}
		}
	}
	// The narrowest phones' 320 px: the top bar's links go onto a second line rather than
	// past the window's edge.
	tb.narrow(320, 640)
	tb.open("#/users")
	tb.waitJS(`!!document.querySelector('#user-list tbody tr')`, "the users page")
	if got := eval[[]int](tb, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`); got[0] > got[1] {
		t.Errorf("the users page is %d px wide in a window of %d", got[0], got[1])
	}
}

// In the narrowest phones' window (320 px) every view keeps to its width,
// a confirmation's dialog too, whatever the key's role says: the role of an
// open service ("role: admin (open service, no keys configured)") or of a
// key with a rate and namespaces kept to one line, 349 px wide, and widened
// every page past the window.
func TestEveryViewKeepsToThe320PxWindow(t *testing.T) {
	s := setup(t)
	fits := func(tb *tab, page string) {
		t.Helper()
		if got := eval[[]int](tb, `[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]`); got[0] > got[1] {
			t.Errorf("%s (%s): the page is %d px wide in a window of %d", page, tb.text("#role"), got[0], got[1])
		}
		if got := eval[[]int](tb, `(() => { const d = document.querySelector('dialog[open]'); return d ? [Math.ceil(d.getBoundingClientRect().right), document.scrollingElement.clientWidth] : [0, 0]; })()`); got[0] > got[1] {
			t.Errorf("%s: the dialog ends at %d px in a window of %d", page, got[0], got[1])
		}
	}
	svc, _ := s.notServedService(t) // open: no keys
	tb := s.newTab(t, svc)
	tb.narrow(320, 640)
	for _, v := range []struct{ frag, ready, dialog string }{
		{"#/", `!!document.querySelector('#ns-stats tbody tr')`, ""},
		{"#/ns", `!!document.querySelector('#not-served button')`, "#not-served button"},
		{"#/ns/feed", `!!document.querySelector('#user-list tbody tr')`, ""},
		{fragment("feed", "f1"), `!!document.querySelector('#user-items')`, "#erase-open"},
		{"#/no-such-page", `!!document.querySelector('#view h2')`, ""},
	} {
		tb.open(v.frag)
		tb.waitJS(v.ready, v.frag)
		fits(tb, v.frag)
		if v.dialog != "" {
			tb.click(v.dialog)
			tb.waitJS(`!!document.querySelector('dialog[open]')`, "the dialog of "+v.frag)
			fits(tb, v.frag+", its dialog open")
			tb.do("press Escape", chromedp.KeyEvent(kb.Escape))
		}
	}
	limited := s.keyTab(t, s.keys.limited, "")
	limited.narrow(320, 640)
	limited.open("#/users")
	limited.waitJS(`!!document.querySelector('#user-list-note') && !document.querySelector('#role').textContent.includes('checking')`, "the users page")
	fits(limited, "#/users")
}

// A namespace's name may be 64 characters, one word: in a phone's window
// the inspector's select of namespaces, and the table of those stored and
// no longer served, keep to its width.
func TestALongNamespaceNameKeepsToANarrowWindow(t *testing.T) {
	s := setup(t)
	ns := strings.Repeat("n", 20) + "-" + strings.Repeat("x", 43)
	file := filepath.Join(s.dir, "namespaces-"+userID(t)+".yaml")
	if err := os.WriteFile(file, []byte(ns+":\n  kind: bloom\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svc, err := s.startServiceWith("data-"+userID(t), "", "", "--namespaces", file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	svc.record(t, "", ns, "u1", "a")
	tb := s.newTab(t, svc)
	tb.narrow(360, 740)
	fits := func(page string) {
		t.Helper()
		if got := eval[[]int](tb, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`); got[0] > got[1] {
			t.Errorf("%s: the page is %d px wide in a window of %d", page, got[0], got[1])
		}
	}
	tb.open(fragment(ns, "u1"))
	tb.waitText("#user-items", "1")
	tb.waitJS(`!!document.querySelector('#lookup-ns option[value="default"]')`, "the namespace list")
	fits("the user's page")
	if err := os.WriteFile(file, []byte("classic:\n  kind: bloom\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := svc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(waitFor); ; {
		tb.open("#/ns")
		tb.waitJS(`!!document.querySelector('#namespaces')`, "the namespaces")
		if eval[bool](tb, `!!document.querySelector('#not-served')`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listed as stored and not served after the SIGHUP", ns)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fits("the namespaces page")
}

// A user id of one long word (up to the 256 bytes the service takes, or
// past them) wraps in the notes and problems that name it, as in the
// page's title, instead of stretching the page sideways.
func TestALongUserIDKeepsToThePage(t *testing.T) {
	s := setup(t)
	tb := s.readTab(t)
	for _, c := range []struct{ user, ready string }{
		{strings.Repeat("L", 256), `!!document.querySelector('#user-missing')`},  // no history
		{strings.Repeat("L", 300), `!!document.querySelector('#user .problem')`}, // refused: too long
	} {
		tb.open(fragment("default", c.user))
		tb.waitJS(c.ready, "the user's page")
		if got := eval[[]int](tb, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`); got[0] > got[1] {
			t.Errorf("with a user id of %d bytes the page is %d px wide in a window of %d", len(c.user), got[0], got[1])
		}
	}
}

// A user id longer than the service takes (GET /v1/auth's max_user_bytes)
// is refused by the page, in the look-up (tied to its field) or on the
// page of its address, and not sent: the service would refuse it, one more
// 400 in its errors. One as long as it takes is looked up.
func TestAUserIDTooLongIsRefusedUnsent(t *testing.T) {
	s := setup(t)
	tb := s.keyTab(t, s.keys.read, "")
	long := strings.Repeat("é", 128) + "x" // 257 bytes
	tb.open(fragment("default", long))
	want := "The user id is 257\u00a0bytes; the service takes at most 256\u00a0bytes (its --max-user-bytes)."
	if got := tb.waitText("#user-too-long", "257"); got != want {
		t.Errorf("the page says %q, want %q", got, want)
	}
	tb.open("#/users")
	tb.fill("#lookup-user", long)
	tb.click(`#lookup button[type="submit"]`)
	// Tied to the field, as the page's other errors of a field: the browser's bubble left it
	// described by nothing to a screen reader.
	tb.wantTied("#lookup-user", "after the look-up", want)
	if got := tb.waitText("#lookup-too-long", "257"); got != want {
		t.Errorf("the look-up says %q, want %q", got, want)
	}
	if got := eval[string](tb, "location.hash"); got != "#/users" {
		t.Errorf("the look-up went to %q", got)
	}
	tb.do("type a letter", chromedp.SendKeys(chromedp.CSS("#lookup-user"), "a"))
	tb.wantUntied("#lookup-user", "after typing", want, "")
	if eval[bool](tb, `!!document.querySelector('#lookup-too-long')`) {
		t.Errorf("after typing the page still says %q", tb.text("#lookup-too-long"))
	}
	tb.fill("#lookup-user", long[:len(long)-1]) // 256 bytes
	tb.click(`#lookup button[type="submit"]`)
	tb.waitJS(`!!document.querySelector('#user-missing')`, "the page of the id of 256 bytes")
	tb.mu.Lock()
	for _, id := range tb.order {
		if x := tb.exchanges[id]; strings.Contains(x.url, "/users/"+url.PathEscape(long)) {
			t.Errorf("the page sent %s %s", x.method, strings.TrimPrefix(x.url, tb.base))
		}
	}
	tb.mu.Unlock()
}

// A user id refused (too long, or no path can carry it) is one message of
// its field at a time: looking it up again, or another id too long, from
// the page of an address the page refused, replaces the address's refusal.
// Both showed, two alerts saying the same ("The user id is 257 bytes")
// one under the other, the second read out as the first still showed.
func TestARefusedUserIDIsSaidOnce(t *testing.T) {
	s := setup(t)
	tb := s.keyTab(t, s.keys.read, "")
	const alerts = `[...document.querySelectorAll('#view [role="alert"]')].map((e) => e.textContent)`
	for _, c := range []struct{ address, typed, want string }{
		{strings.Repeat("u", 257), "", "The user id is 257"}, // the same id again
		{strings.Repeat("u", 257), strings.Repeat("u", 300), "The user id is 300"},
		{"..", strings.Repeat("u", 300), "The user id is 300"},
	} {
		tb.open(fragment("default", c.address))
		tb.waitJS(`!!document.querySelector('#user .problem')`, "the refusal of the address's id")
		if c.typed != "" {
			tb.fill("#lookup-user", c.typed)
		}
		tb.click(`#lookup button[type="submit"]`)
		tb.waitJS(`!!document.querySelector('#lookup-too-long')`, "the look-up's refusal")
		if got := eval[[]string](tb, alerts); len(got) != 1 || !strings.HasPrefix(got[0], c.want) {
			t.Errorf("address %.5q..., then %.5q... looked up: the page shows the alerts %q, want one, %q...", c.address, c.typed, got, c.want)
		}
		tb.wantTied("#lookup-user", "after the look-up", c.want)
	}
}

// A problem quoting a long item keeps to its panel: its words break
// rather than run out of its box over the next panel.
func TestARefusedLongItemKeepsToItsPanel(t *testing.T) {
	s := setup(t)
	tb, _ := s.userTab(t, s.keys.write, "default", "r:0")
	tb.fill("#record-items", strings.Repeat("x", 300))
	tb.click("#record-run")
	tb.waitJS(`!!document.querySelector('#record-result .problem')`, "the refusal")
	if got := eval[[]int](tb, `(() => { const p = document.querySelector('#record-result .problem'); return [p.scrollWidth, p.clientWidth]; })()`); got[0] > got[1] {
		t.Errorf("the refusal's text is %d px wide in its box of %d", got[0], got[1])
	}
}

// The overview, drawn anew every 2 s, keeps what its reader did: a table
// scrolled sideways in a narrow window stays where it was scrolled to, and
// the focus stays on the namespace's link it was on.
func TestTheOverviewsRefreshKeepsTheScrollAndTheFocus(t *testing.T) {
	s := setup(t)
	tb := s.phoneTab(t)
	tb.waitJS(`!!document.querySelector('#ns-stats tr[data-ns="default"] a')`, "the table by namespace")
	eval[bool](tb, `(() => { document.querySelector('#ns-stats tr[data-ns="default"] a').focus(); `+
		`document.querySelector('#ns-stats').parentElement.scrollLeft = 100; return true; })()`)
	// A refresh draws a new table.
	eval[bool](tb, `(() => { document.querySelector('#ns-stats').dataset.old = '1'; return true; })()`)
	tb.waitJS(`!!document.querySelector('#ns-stats') && !document.querySelector('#ns-stats').dataset.old`, "a refresh")
	if got := eval[int](tb, `document.querySelector('#ns-stats').parentElement.scrollLeft`); got != 100 {
		t.Errorf("after a refresh the table by namespace is scrolled by %d px, want 100", got)
	}
	if got := eval[string](tb, `document.activeElement.closest('#ns-stats tr') ? document.activeElement.textContent : document.activeElement.tagName`); got != "default" {
		t.Errorf("after a refresh the focus is on %s, want the link to default", got)
	}
}

func TestTextContrastIsReadable(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "default", user, "c:1")
	s.inBothSchemes(t, s.keys.read, func(tb *tab) {
		check := func(page string) { tb.findsNone(page, lowContrast, "texts checked", "low contrast ") }
		tb.open("#/ns")
		tb.waitJS(`!!document.querySelector('#namespaces tbody tr')`, "the namespaces")
		check("namespaces")
		// The user page with check results, a problem box and the role hints.
		tb.open(fragment("default", user))
		tb.waitText("#user-items", "1")
		tb.waitText("#record-form .need", "this key is read")
		tb.fill("#check-items", "c:1\nc:2")
		tb.click(`#check-form button[type="submit"]`)
		tb.waitText("#check-result .done", "seen")
		check("user")
		tb.fill("#check-items", strings.Repeat("c", 300))
		tb.click(`#check-form button[type="submit"]`)
		tb.waitText("#check-result .problem", "400")
		check("user with a problem")
		// The overview last: its charts need two refreshes, for which the page's
		// clock is moved on, and stays stopped after.
		tb.open("#/")
		tb.passTimeUntil(`!!document.querySelector('#card-calls svg polyline')`, "the overview's charts", 5*time.Second)
		check("overview")
	})
}

func TestKeyboardAloneLooksUpRecordsAndClosesTheDialog(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "default", user, "k:0")
	tb := s.newTab(t, nil)
	tb.open("#/users")

	// tabTo presses Tab until the element sel has the focus.
	tabTo := func(sel string) {
		t.Helper()
		for range 40 {
			if eval[bool](tb, fmt.Sprintf(`document.activeElement === document.querySelector(%q)`, sel)) {
				return
			}
			tb.do("press Tab", chromedp.KeyEvent(kb.Tab))
		}
		t.Fatalf("40 presses of Tab never reached %s", sel)
	}
	tabTo("#key-input")
	tb.do("type the key", chromedp.KeyEvent(s.keys.admin+kb.Enter))
	tb.waitText("#role", "role: admin")

	tabTo("#lookup-user")
	tb.do("type the user", chromedp.KeyEvent(user+kb.Enter))
	tb.waitText("#user-items", "1")

	tabTo("#record-items")
	tb.do("type an item", chromedp.KeyEvent("k:1"))
	tabTo(`#record-form button[type="submit"]`)
	tb.do("press Enter", chromedp.KeyEvent(kb.Enter))
	tb.waitText("#user-items", "2")

	tabTo("#erase-open")
	tb.do("press Enter", chromedp.KeyEvent(kb.Enter))
	tb.waitJS(`document.querySelector('#erase-dialog').open && document.activeElement.id === 'erase-cancel'`,
		"the dialog, with the focus on Cancel")
	tb.do("press Escape", chromedp.KeyEvent(kb.Escape))
	tb.waitJS(`!document.querySelector('#erase-dialog').open`, "Escape to close the dialog")
	if n := userItems(t, s, "default", user); n != 2 {
		t.Errorf("the API says %d items, want 2", n)
	}
}

// An action's button keeps the focus once it is done, so that a keyboard
// goes on from there: a check's, though it was disabled while it ran, and
// a record's, though the user's page is drawn again after it. Ctrl+Enter
// in an items box sends them, and the focus stays in the box.
func TestTheFocusStaysOnAnActionsButton(t *testing.T) {
	s := setup(t)
	tb, _ := s.userTab(t, s.keys.write, "default", "f:0")
	ctrlEnter := chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierCtrl))
	for _, c := range []struct {
		id, items, done string
		key             chromedp.Action[chromedp.Void]
		focus           string
	}{
		{"check", "f:0", "1 of 1 seen", chromedp.KeyEvent(kb.Tab + kb.Enter), "check-run"},
		{"record", "f:1", "Recorded 1 new", chromedp.KeyEvent(kb.Tab + kb.Enter), "record-run"},
		{"check", "f:2", "0 of 1 seen", ctrlEnter, "check-items"},
		{"record", "f:2", "Recorded 1 new", ctrlEnter, "record-items"},
	} {
		tb.do("clear the result", chromedp.Evaluate[chromedp.Void](`document.querySelector('#`+c.id+`-result').replaceChildren()`))
		tb.fill("#"+c.id+"-items", c.items)
		tb.do("press the keys", c.key)
		tb.waitText("#"+c.id+"-result .done", c.done)
		if got := eval[string](tb, `document.activeElement.id || document.activeElement.tagName`); got != c.focus {
			t.Errorf("after the %s of %s the focus is on %s, want %s", c.id, c.items, got, c.focus)
		}
	}
	tb.waitText("#user-items", "3")
}

// liveRegions marks the page's live regions as there before an action, and
// readOutBy lists those whose text holds a text, each said "new" unless
// marked: a region is read out when it changes, not when it is put in the
// page.
const (
	liveRegions = `[aria-live]:not([aria-live="off"]), [role="status"], [role="alert"], output`
	markRegions = `document.querySelectorAll('` + liveRegions + `').forEach((e) => { e.seenapiTestBefore = true; })`
	readOutBy   = `[...document.querySelectorAll('` + liveRegions + `')].filter((e) => e.textContent.includes(%q)).map((e) => (e.id || e.tagName) + (e.seenapiTestBefore ? '' : ' (new)'))`
)

// The outcome of each action on a user's page is read out by a screen
// reader once: by a live region already in the page when the outcome came,
// though the page is drawn anew after a record or an erasure.
func TestTheOutcomeOfAnActionIsReadOut(t *testing.T) {
	s := setup(t)
	tb, user := s.userTab(t, s.keys.admin, "default", "o:0")
	for _, c := range []struct {
		what    string
		act     func()
		outcome string
	}{
		{"a check", func() { tb.fill("#check-items", "o:0"); tb.click("#check-run") }, "1 of 1 seen."},
		{"a record", func() { tb.fill("#record-items", "o:1"); tb.click("#record-run") }, "Recorded 1 new, 0 already seen."},
		{"a record of nothing", func() { tb.fill("#record-items", "\n"); tb.click("#record-run") }, "Enter at least one item."},
		{"an erasure", func() { tb.click("#erase-open"); tb.click("#erase-confirm") }, "User " + user + " was erased from default."},
	} {
		tb.do("mark the live regions", chromedp.Evaluate[chromedp.Void](markRegions))
		c.act()
		tb.waitJS(fmt.Sprintf(`[...document.querySelectorAll('`+liveRegions+`')].some((e) => e.textContent.includes(%q))`, c.outcome),
			fmt.Sprintf("a live region to say %q", c.outcome))
		tb.waitJS(fmt.Sprintf(`document.body.textContent.includes(%q)`, c.outcome), "the outcome")
		if got := eval[[]string](tb, fmt.Sprintf(readOutBy, c.outcome)); len(got) != 1 || strings.HasSuffix(got[0], " (new)") {
			t.Errorf("after %s, %q is in the live regions %q; want it in one that was in the page before", c.what, c.outcome, got)
		}
	}
	if n := userItems(t, s, "default", user); n != -1 {
		t.Errorf("the API says the erased user has %d items", n)
	}
}

// A service that stopped is said so on the overview by an alert, drawn
// once: drawn anew at every refresh, it would be read out every 2 s.
func TestAStoppedServiceIsAlertedOnce(t *testing.T) {
	s := setup(t)
	tb := s.stoppedOverview(t)
	tb.do("mark the alert", chromedp.Evaluate[chromedp.Void](`document.querySelector('#overview-error .problem').seenapiTestBefore = true`))
	// Two more refreshes sent means one more answered (a refused connection fails at once).
	n := tb.apiCalls("GET", "/v1/stats")
	tb.passTime(5*time.Second, true)
	if got := tb.apiCalls("GET", "/v1/stats") - n; got < 2 {
		t.Fatalf("the overview asked for the figures %d times in 5 s after the alert, want 2 or more", got)
	}
	if got := eval[[]string](tb, fmt.Sprintf(readOutBy, "did not answer")); len(got) != 1 || strings.HasSuffix(got[0], " (new)") {
		t.Errorf("after another refresh the alerts saying the service did not answer are %q; want the one first drawn", got)
	}
}

// An error of what was typed is tied to its field: the field is said
// invalid (aria-invalid) and is described by the error (aria-describedby),
// so that a screen reader back in the field hears what is wrong with it,
// until it is changed. The boxes of items, the key's field and the user
// id's were described by their help alone, whatever was refused.
func TestAnErrorIsTiedToItsField(t *testing.T) {
	s := setup(t)
	tb, _ := s.userTab(t, s.keys.write, "default", "e:0")

	// Refused by the page: no item.
	tb.fill("#check-items", "\n")
	tb.click("#check-run")
	tb.waitText("#check-result", "Enter at least one item.")
	tb.wantTied("#check-items", "no item entered", "Enter at least one item.")
	tb.fill("#check-items", "e:0")
	tb.wantUntied("#check-items", "an item typed after", "Enter at least one item.", "Ctrl+Enter in the box sends them.")

	// Refused by the service: an item over its limit, named by the problem.
	tb.fill("#record-items", strings.Repeat("e", 300))
	tb.click("#record-run")
	tb.waitText("#record-result .problem", "400")
	tb.wantTied("#record-items", "an item too long", tb.text("#record-result .problem .detail"))
	tb.fill("#record-items", "e:1")
	tb.wantUntied("#record-items", "an item typed after", "", "Ctrl+Enter in the box sends them.")

	// A key the page cannot send, said in the banner.
	tb.fill("#key-input", "a b")
	tb.click(`#key-form button[type="submit"]`)
	tb.waitJS(`!document.querySelector('#banner').hidden`, "the banner")
	tb.wantTied("#key-input", "a key with a space", "the key holds a space")
	tb.fill("#key-input", "ab")
	tb.wantUntied("#key-input", "a key typed after", "the key holds a space", "role: write")

	// A user id over the service's limit in the page's address, refused unsent.
	tb.open(fragment("default", strings.Repeat("u", 257)))
	tb.waitText("#user-too-long", "257")
	tb.wantTied("#lookup-user", "a user id too long", "The user id is 257")
	tb.fill("#lookup-user", "u")
	tb.wantUntied("#lookup-user", "a user id typed after", "The user id is 257", "")

	// A user id no path can carry, in the page's address, refused unsent.
	for _, id := range []string{".", ".."} {
		tb.open(fragment("default", id))
		tb.waitText("#user .problem", "Unusable id")
		tb.wantTied("#lookup-user", fmt.Sprintf("the user id %q", id), `a user id cannot be "`+id+`"`)
		tb.fill("#lookup-user", "u")
		tb.wantUntied("#lookup-user", "a user id typed after", `a user id cannot be "`+id+`"`, "")
	}
}

// Each view of the dashboard has a title of its own, naming it as its
// heading does: a screen reader says the title first of a page, and the
// browser's tabs and history show it. Every view but a user's was titled
// "seenapi" alone.
func TestEachViewIsTitledAsItsHeading(t *testing.T) {
	s := setup(t)
	tb := s.keyTab(t, s.keys.read, "#/")
	titles := map[string]string{}
	for _, frag := range []string{"#/", "#/ns", "#/users", "#/ns/default", "#/no-such-page"} {
		tb.open(frag)
		tb.waitJS(`!!document.querySelector('#view h2')`, frag+"'s heading")
		want := tb.text("#view h2") + " · seenapi"
		got := eval[string](tb, `document.title`)
		if got != want {
			t.Errorf("%s is titled %q, want %q", frag, got, want)
		}
		titles[got] = frag
	}
	if len(titles) < 4 {
		t.Errorf("five views have %d titles between them, want one each for the four kinds of view: %q", len(titles), titles)
	}
}

// A look-up's result is read out once the user's page is drawn: the focus
// goes to the page as the look-up starts, when it says "Loading…", and
// nothing told a screen reader when the user's figures, or its lack of a
// history, came.
func TestALookUpsResultIsReadOut(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "default", user, "a:0", "a:1")
	tb := s.keyTab(t, s.keys.read, "#/users")
	for _, c := range []struct{ user, said string }{
		{user, "User \u2068" + user + "\u2069 in default: 2\u00a0items recorded."},
		{user + "-none", "No history: user \u2068" + user + "-none\u2069 has seen nothing in default."},
	} {
		tb.fill("#lookup-user", c.user)
		tb.do("press Enter", chromedp.KeyEvent(kb.Enter))
		tb.waitJS(fmt.Sprintf(`document.querySelector('#announce').textContent === %q`, c.said), fmt.Sprintf("%q to be read out", c.said))
	}
}

// The skip link takes a keyboard past the top bar to the page's content, and
// leaves the page as it was: its address, #view, is no page of the
// dashboard's, and followed, it drew "Not a page of this dashboard" in place
// of the user's.
func TestTheSkipLinkKeepsThePage(t *testing.T) {
	s := setup(t)
	tb, _ := s.userTab(t, s.keys.read, "default", "k:0")
	hash := eval[string](tb, `location.hash`)
	tb.do("press Enter on the skip link", chromedp.Focus(chromedp.CSS(".skip")), chromedp.KeyEvent(kb.Enter))
	tb.waitJS(`document.activeElement.id === 'view'`, "the focus on the page's content")
	if got := eval[string](tb, `location.hash`); got != hash {
		// Its hashchange would draw the page of that address.
		t.Fatalf("after the skip link the address is %q, want %q", got, hash)
	}
	if !eval[bool](tb, `!!document.querySelector('#user-items')`) {
		t.Fatalf("after the skip link the user's page is gone: %s", tb.text("#view"))
	}
	tb.do("press Tab", chromedp.KeyEvent(kb.Tab))
	if got := eval[string](tb, `document.activeElement.id`); got != "lookup-ns" {
		t.Errorf("Tab after the skip link reaches %q, want the page's first control, lookup-ns", got)
	}
}

// Looking up the user shown again draws its page anew, the field and the
// button with it: the focus goes to the page, as after any look-up, not
// back to the start of the document.
func TestLookingUpTheSameUserAgainKeepsTheFocusInThePage(t *testing.T) {
	s := setup(t)
	tb, _ := s.userTab(t, s.keys.read, "default", "l:0")
	tb.do("press Enter in the user field", chromedp.Focus(chromedp.CSS("#lookup-user")), chromedp.KeyEvent(kb.Enter))
	tb.waitJS(`!!document.querySelector('#user-read-at') && !document.querySelector('#lookup-user').matches(':focus')`, "the page to be drawn again")
	tb.waitText("#user-items", "1")
	if got := eval[string](tb, `document.activeElement.id || document.activeElement.tagName`); got != "view" {
		t.Errorf("after looking up the same user again the focus is on %s, want the page (view)", got)
	}
}

func TestWindowedNamespaceShowsItsGenerations(t *testing.T) {
	s := setup(t)
	tb, _ := s.userTab(t, s.keys.read, "feed", "f:1", "f:2", "f:3")
	if got := tb.text("#user-profile"); !strings.Contains(got, "window 30\u00a0d in buckets of 7.5\u00a0d") || !strings.Contains(got, "cap 100,000\u00a0items") {
		t.Errorf("profile line = %q, want the window, its buckets and the cap", got)
	}
	if got := tb.text("#layers-h"); got != "Generations and layers" {
		t.Errorf("layers heading = %q, want Generations and layers", got)
	}
	gen := tb.text("#layers .gen")
	if !strings.Contains(gen, "3\u00a0items") || !strings.Contains(gen, "unseen again from") {
		t.Errorf("generation heading = %q, want its items and when they expire", gen)
	}
}

// heading is a heading of the page as a screen reader lists it.
type heading struct {
	level int
	name  string
}

// headings returns the page's headings from its accessibility tree, after
// checking the outline they make: the page's one h1 first, and none
// skipping a level below the one before it. page names the page.
func (tb *tab) headings(page string) []heading {
	tb.t.Helper()
	var hs []heading
	for _, n := range tb.axTree() {
		if n.role != "heading" {
			continue
		}
		level, err := strconv.Atoi(n.props["level"])
		if err != nil {
			tb.t.Fatalf("%s: heading %q has the level %q: %v", page, n.name, n.props["level"], err)
		}
		hs = append(hs, heading{level, n.name})
	}
	if len(hs) < 2 || hs[0].level != 1 || slices.IndexFunc(hs[1:], func(h heading) bool { return h.level == 1 }) >= 0 {
		tb.t.Errorf("%s: headings %v, want one h1 first, then the page's own", page, hs)
	}
	for i := 1; i < len(hs); i++ {
		if hs[i].level > hs[i-1].level+1 {
			tb.t.Errorf("%s: heading %q (level %d) follows %q (level %d): a level skipped", page, hs[i].name, hs[i].level, hs[i-1].name, hs[i-1].level)
		}
	}
	return hs
}

// A user's page is outlined by its headings, as a screen reader lists them:
// each a level under the one it is part of, none skipping a level, each of
// the user's panels under the user's title (they were all h3, siblings of
// it in a screen reader's list), and the false-positive rate a part of the
// filter's panel, not a panel of its own; the page's CSS styles each level
// it uses. Every other view is outlined without a level skipped too.
func TestEachViewsHeadingsFollowItsStructure(t *testing.T) {
	s := setup(t)
	tb, user := s.userTab(t, s.keys.read, "feed", "f:1")
	tb.waitJS(`!!document.querySelector('#layers .gen')`, "the generations of the user's layers")
	hs := tb.headings("the user's page")
	title := slices.IndexFunc(hs, func(h heading) bool { return strings.HasPrefix(h.name, "User "+user) })
	fp := slices.IndexFunc(hs, func(h heading) bool { return h.name == "False-positive rate" })
	if title < 1 || fp < 1 {
		t.Fatalf("the page's headings %v: want the user's title, and the false-positive rate's", hs)
	}
	for _, h := range hs[title+1:] {
		if h.level <= hs[title].level {
			t.Errorf("heading %q (level %d) is no part of the user's title %q (level %d)", h.name, h.level, hs[title].name, hs[title].level)
		}
	}
	if want := (heading{hs[fp-1].level + 1, "False-positive rate"}); hs[fp-1].name != "Filter" || hs[fp] != want {
		t.Errorf("the false-positive rate's heading %v follows %v, want %v under the filter's", hs[fp], hs[fp-1], want)
	}
	// Each heading is sized by a rule of the page's own, not left to the browser's defaults.
	unstyled := eval[[]string](tb, `[...document.querySelectorAll('#view h2, #view h3, #view h4, #view h5, #view h6')]
		.filter((e) => ![...document.styleSheets].flatMap((s) => [...s.cssRules])
			.some((r) => r.selectorText && r.style.fontSize && e.matches(r.selectorText)))
		.map((e) => e.tagName + ' ' + e.textContent)`)
	if len(unstyled) > 0 {
		t.Errorf("headings no rule of style.css sizes: %q", unstyled)
	}
	for _, v := range []struct{ frag, ready string }{
		{"#/", `!!document.querySelector('#ns-stats')`},
		{"#/ns", `!!document.querySelector('#namespaces')`},
		{"#/users", `!!document.querySelector('#user-list-title')`},
		{fragment("small", user), `!!document.querySelector('#user-missing')`},
		{"#/no-such-page", `!!document.querySelector('#view h2')`},
	} {
		tb.open(v.frag)
		tb.waitJS(v.ready, v.frag)
		tb.headings(v.frag)
	}
}

// A user made before its namespace's profile changed (a SIGHUP with an
// edited namespaces file) is shown with the profile its filter keeps, the
// window its buckets expire by, and what new users get now beside it.
func TestUserMadeBeforeAProfileChangeShowsItsOwn(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "feed", user, "f:1")
	feedWindow := func() int64 {
		resp, err := s.svc.api(t, s.keys.read).GetNamespaceWithResponse(context.Background(), "feed")
		if err != nil || resp.JSON200 == nil {
			t.Fatalf("GET /v1/namespaces/feed: %v %s", err, resp.Body)
		}
		return resp.JSON200.Window
	}
	reload := func(yaml string, window int64) {
		t.Helper()
		if err := os.WriteFile(s.namespacesArg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := s.svc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(waitFor); feedWindow() != window; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("feed's window is not %d s after SIGHUP", window)
			}
		}
	}
	reload(strings.Replace(namespacesYAML, "window: 30d\n  granularity: 7.5d", "window: 10d\n  granularity: 2.5d", 1), 10*86400)
	defer reload(namespacesYAML, 30*86400)

	tb := s.keyTab(t, s.keys.read, fragment("feed", user))
	tb.waitText("#user-items", "1")
	if got := tb.text("#user-profile"); !strings.HasPrefix(got, "target 1% · window 30\u00a0d in buckets of 7.5\u00a0d · cap 100,000\u00a0items") {
		t.Errorf("profile line = %q, want the filter's own window (30 d) first", got)
	}
	if got := tb.text("#user-profile-ns"); !strings.Contains(got, "new users of feed get") || !strings.Contains(got, "window 10\u00a0d in buckets of 2.5\u00a0d") {
		t.Errorf("the namespace's profile now = %q, want its 10 d window", got)
	}
	// The bucket's items are unseen again 30 days after it ends, not 10.
	when := func(cls string) time.Time {
		t.Helper()
		v := eval[string](tb, `document.querySelector('#layers .gen time.`+cls+`').getAttribute('datetime')`)
		at, err := time.Parse(time.RFC3339, v)
		if err != nil {
			t.Fatalf("the generation's %s time: %v", cls, err)
		}
		return at
	}
	start, end, again := when("start"), when("end"), when("expires")
	if d := end.Sub(start); d != 180*time.Hour {
		t.Errorf("generation heading %q: a bucket of %v, want 7.5 days", tb.text("#layers .gen"), d)
	}
	if d := again.Sub(end); d != 30*24*time.Hour {
		t.Errorf("generation heading %q: unseen again %v after the bucket, want 30 days", tb.text("#layers .gen"), d)
	}

	// A user made after the change has the new profile, and nothing beside it.
	other := userID(t) + "-after"
	s.svc.record(t, s.keys.write, "feed", other, "f:1")
	tb.open(fragment("feed", other))
	tb.waitText("#user-items", "1")
	if got := tb.text("#user-profile"); !strings.Contains(got, "window 10\u00a0d in buckets of 2.5\u00a0d") {
		t.Errorf("a new user's profile line = %q, want the 10 d window", got)
	}
	if n := eval[int](tb, `document.querySelectorAll('#user-profile-ns').length`); n != 0 {
		t.Errorf("a new user's page says its namespace changed (%d)", n)
	}
}

// A compact filter's user shows fingerprints where a Bloom filter's shows
// bits set and hashes, and the namespaces table names its kind.
func TestCompactUserShowsFingerprints(t *testing.T) {
	s := setup(t)
	tb, _ := s.userTab(t, s.keys.read, "small", "c:1", "c:2", "c:3")
	if label, got := tb.text("#user-fingerprints-label"), tb.text("#user-fingerprints"); label != "Fingerprints" || !strings.HasPrefix(got, "3 in ") {
		t.Errorf("summary row = %q: %q, want Fingerprints: 3 in ... bits", label, got)
	}
	if label := tb.text("#user-bits-label"); label != "" {
		t.Errorf("a compact filter's summary has a row %q, of a bit array it does not have", label)
	}
	if got := tb.text("#layers .layer-detail"); !strings.Contains(got, "a fingerprint an item") || strings.Contains(got, "hash") {
		t.Errorf("layer detail = %q, want a fingerprint an item and no hashes", got)
	}
	tb.open("#/ns")
	tb.waitJS(`!!document.querySelector('#namespaces tr[data-ns="small"]')`, "the small namespace's row")
	if kind := eval[string](tb, `document.querySelector('#namespaces tr[data-ns="small"]').cells[1].textContent`); kind != "compact" {
		t.Errorf("small namespace's kind = %q, want compact", kind)
	}
}

// A staged filter's newest layer is a set of fingerprints and its sealed
// ones Bloom layers: the summary counts the bits set of the Bloom layers and
// the fingerprints of the other apart, each under its own name, as the
// API's layers report them (hashes 0: a layer of fingerprints), and each
// layer's line says which it is. A staged filter of one layer has no bits
// set to show, and a Bloom filter no fingerprints.
func TestEachLayerKindIsNamedForWhatItHolds(t *testing.T) {
	s := setup(t)
	type row struct{ label, value string }
	rows := func(tb *tab) []row {
		got := eval[[][]string](tb, `[...document.querySelectorAll('#user-bits-label, #user-fingerprints-label')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent])`)
		var out []row
		for _, r := range got {
			out = append(out, row{r[0], r[1]})
		}
		return out
	}
	for _, c := range []struct {
		ns   string
		n    int
		want func(bloomSet, bloomBits, fps, fpBits int64) []row
	}{
		{"default", 3, func(_, _, fps, fpBits int64) []row {
			return []row{{"Fingerprints", fmt.Sprintf("%s in %s\u00a0bits", comma(fps), comma(fpBits))}}
		}},
		{"default", 600, func(bloomSet, bloomBits, fps, fpBits int64) []row {
			return []row{{"Bits set", fmt.Sprintf("%s of %s · 1\u00a0Bloom layer", comma(bloomSet), comma(bloomBits))},
				{"Fingerprints", fmt.Sprintf("%s in %s\u00a0bits · 1\u00a0layer of fingerprints", comma(fps), comma(fpBits))}}
		}},
		{"classic", 3, func(bloomSet, bloomBits, _, _ int64) []row {
			return []row{{"Bits set", fmt.Sprintf("%s of %s", comma(bloomSet), comma(bloomBits))}}
		}},
	} {
		user := userID(t)
		api := s.recordItems(t, c.ns, user, c.n)
		var bloomSet, bloomBits, fps, fpBits int64
		var kinds []string
		for _, g := range *api.Generations {
			for _, l := range *g.Layers {
				if l.Hashes == 0 {
					fps, fpBits = fps+l.BitsSet, fpBits+l.Bits
					kinds = append(kinds, "Fingerprints: ")
				} else {
					bloomSet, bloomBits = bloomSet+l.BitsSet, bloomBits+l.Bits
					kinds = append(kinds, "Bloom: ")
				}
			}
		}
		if c.ns == "default" && len(kinds) != c.n/512+1 || kinds[len(kinds)-1] != map[string]string{"default": "Fingerprints: ", "classic": "Bloom: "}[c.ns] {
			t.Fatalf("%d items in %s made layers %q", c.n, c.ns, kinds)
		}
		tb := s.readTab(t)
		tb.showUser(c.ns, user, c.n)
		if got, want := rows(tb), c.want(bloomSet, bloomBits, fps, fpBits); !slices.Equal(got, want) {
			t.Errorf("%d items in %s (%s): the summary shows %q, want %q", c.n, c.ns, api.Kind, got, want)
		}
		details := eval[[]string](tb, `[...document.querySelectorAll('#layers .layer-detail')].map((d) => d.textContent)`)
		if len(details) != len(kinds) {
			t.Errorf("%d items in %s: %d layer lines, the API has %d layers", c.n, c.ns, len(details), len(kinds))
			continue
		}
		for i, d := range details {
			if !strings.HasPrefix(d, kinds[i]) {
				t.Errorf("%d items in %s: layer %d reads %q, want it to begin %q", c.n, c.ns, i+1, d, kinds[i])
			}
		}
	}
}

// comma writes n as the page does, in groups of three.
func comma(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestForgetItemsInACompactUsersPage: a compact user's page forgets items
// and shows the new count; a Bloom user's page offers no such form.
func TestForgetItemsInACompactUsersPage(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "small", user, "c:1", "c:2", "c:3")
	s.svc.record(t, s.keys.write, "default", user, "c:1")

	tb := s.keyTab(t, s.keys.write, fragment("small", user))
	tb.waitText("#user-items", "3")
	tb.fill("#forget-items", "c:1\nc:9\nc:1")
	tb.click(`#forget-form button[type="submit"]`)
	tb.waitText("#forget-result .done", "Forgot 1\u00a0item; 1 of those given was not seen.")
	tb.waitText("#user-items", "2")
	tb.fill("#forget-items", "c:2\nc:8\nc:9")
	tb.click(`#forget-form button[type="submit"]`)
	tb.waitText("#forget-result .done", "Forgot 1\u00a0item; 2 of those given were not seen.")
	tb.waitText("#user-items", "1")
	if n := userItems(t, s, "small", user); n != 1 {
		t.Errorf("the API says %d items, want 1", n)
	}
	tb.fill("#forget-items", "c:3")
	tb.click(`#forget-form button[type="submit"]`)
	tb.waitJS(`document.querySelector('#forget-result .done')?.textContent === 'Forgot 1\u00a0item.'`, "the forget of an item seen to say only so")

	tb.open(fragment("default", user))
	tb.waitText("#user-items", "1")
	if eval[bool](tb, `!!document.getElementById('forget-form')`) {
		t.Error("a Bloom user's page offers to forget items")
	}
}

func TestNamespacesTableShowsTheWindow(t *testing.T) {
	s := setup(t)
	tb := s.keyTab(t, s.keys.read, "#/ns")
	tb.waitJS(`!!document.querySelector('#namespaces tr[data-ns="feed"]')`, "the feed namespace's row")
	cells := eval[[]string](tb, `[...document.querySelector('#namespaces tr[data-ns="feed"]').cells].map((c) => c.textContent)`)
	if len(cells) < 6 || cells[3] != "30\u00a0d" || cells[4] != "7.5\u00a0d" || cells[5] != "100,000" {
		t.Errorf("feed namespace row = %q, want window 30 d, granularity 7.5 d, cap 100,000", cells)
	}
	// A 7d window's default buckets are 1.75d, as seenapi check says, not 42 h.
	cells = eval[[]string](tb, `[...document.querySelector('#namespaces tr[data-ns="push"]').cells].map((c) => c.textContent)`)
	if len(cells) < 5 || cells[3] != "7\u00a0d" || cells[4] != "1.75\u00a0d" {
		t.Errorf("push namespace row = %q, want window 7 d, granularity 1.75 d", cells)
	}
}

// blockedTab opens a tab whose requests for the dashboard's file name fail,
// as when it cannot load.
func (s *suite) blockedTab(t *testing.T, name string) *tab {
	t.Helper()
	return s.blockedTabOf(t, nil, name)
}

// blockedTabOf is blockedTab for svc (the shared service when nil).
func (s *suite) blockedTabOf(t *testing.T, svc *service, name string) *tab {
	t.Helper()
	tb := s.newTab(t, svc)
	if _, err := chromedp.Call(tb.ctx, network.SetBlockedURLs, network.SetBlockedURLsParams{
		URLPatterns: []*network.BlockPattern{{URLPattern: tb.base + "/" + name, Block: true}}}); err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestPageExplainsAScriptThatFailedToLoad(t *testing.T) {
	s := setup(t)
	tb := s.blockedTab(t, "api.js")
	tb.open("#/")
	tb.waitText("#loading.problem", "did not start")
	if got := tb.text("#view h2"); got != "" {
		t.Errorf("the dashboard rendered %q without its API module", got)
	}
	if got := tb.text("#loading"); !strings.HasSuffix(got, "The API itself answers under /v1/; its contract is /openapi.yaml.") {
		t.Errorf("the page reads %q, not saying where the API is", got)
	}
}

// Under a path prefix, the page whose scripts failed says where the API is:
// beside it, under the prefix, not at the proxy's root.
func TestAPageUnderAPathPrefixWhoseScriptFailedSaysWhereTheAPIIs(t *testing.T) {
	s := setup(t)
	prefixed, _ := underPrefix(t, s.svc)
	tb := s.blockedTabOf(t, prefixed, "api.js")
	tb.open("#/")
	tb.waitText("#loading.problem", "did not start")
	if got := tb.text("#loading"); !strings.HasSuffix(got, "The API itself answers under /seen/v1/; its contract is /seen/openapi.yaml.") {
		t.Errorf("the page, served under /seen/, reads %q", got)
	}
}

// A key entered before the page's module runs (a slow network, a module
// that failed to load) goes nowhere: the key form, with no script to take
// it, sends nothing. A form's default would ask to load the page with
// ?key=... in its address; the page's Content-Security-Policy (form-action
// 'none') refuses that, but its refusal logs the address, key included, in
// the browser's console, and the harness reports it.
func TestAKeyEnteredBeforeThePageStartsStaysOutOfTheAddress(t *testing.T) {
	s := setup(t)
	tb := s.blockedTab(t, "app.js")
	tb.open("#/")
	tb.do("enter the key", chromedp.SendKeys(chromedp.CSS("#key-input"), s.keys.read+kb.Enter))
	// boot.js says so 3 s after a page loads: after this one, or after the one the form loaded.
	tb.waitText("#loading.problem", "did not start")
	if got := eval[string](tb, `location.href`); strings.Contains(got, s.keys.read) || got != tb.base+"/#/" {
		t.Errorf("after the key was entered the address is %q, want %q", got, tb.base+"/#/")
	}
}

func TestContentSecurityPolicyViolationsAreCaught(t *testing.T) {
	s := setup(t)
	tb := s.newTab(t, nil)
	tb.open("#/")
	tb.waitJS(`document.documentElement.dataset.started === '1'`, "the dashboard to start")
	if got := tb.takeViolations(); len(got) != 0 {
		t.Fatalf("the dashboard broke its own policy: %q", got)
	}
	// What a careless change to the page would do: an inline style attribute.
	tb.do("set an inline style", chromedp.Evaluate[chromedp.Void](`document.querySelector('#view').setAttribute('style', 'color: red')`))
	var got []string
	for deadline := time.Now().Add(waitFor); len(got) == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		got = tb.takeViolations()
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "style-src-attr ") {
		t.Fatalf("violations %q, want one of style-src-attr", got)
	}
}

// A namespace taken out of the namespaces file by a SIGHUP, its users still
// stored, is listed on the namespaces page; erasing its data asks first,
// then says how many users were erased (its outcome taking the focus, as
// the view is drawn again), and the service no longer stores any of them.
// A namespace's purge takes about 3.5 s a million users inside its call:
// the page waits for its answer past the 10 s it gives other calls, saying
// it is erasing, and shows the answer when it comes. The service stopped
// (SIGSTOP) for 13 s of the page's time stands for a large namespace.
func TestAPurgeLongerThanACallsTimeIsWaitedFor(t *testing.T) {
	s := setup(t)
	file := filepath.Join(s.dir, "namespaces-"+userID(t)+".yaml")
	if err := os.WriteFile(file, []byte("feed:\n  window: 30d\npush:\n  window: 1d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svc, err := s.startServiceWith("data-"+userID(t), "", "", "--namespaces", file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	svc.record(t, "", "push", "p1", "a")
	if err := os.WriteFile(file, []byte("feed:\n  window: 30d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := svc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	tb := s.newTab(t, svc)
	button := `#not-served tr[data-ns="push"] button`
	for deadline := time.Now().Add(waitFor); ; {
		tb.open("#/ns")
		tb.waitJS(`!!document.querySelector('#namespaces')`, "the namespaces")
		if eval[bool](tb, `!!document.querySelector('`+button+`')`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("push not listed as stored and not served after the SIGHUP")
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.click(button)
	tb.waitJS(`document.querySelector('#purge-dialog').open`, "the confirmation dialog")

	resume := svc.pause(t)
	tb.click("#purge-confirm")
	tb.waitText("#purge-result", "Erasing the data of push…")
	tb.passTime(13*time.Second, false)
	if got := tb.text("#purge-result"); got != "Erasing the data of push…" {
		t.Errorf("13 s into the purge the page reads %q, want it still erasing", got)
	}
	resume()
	tb.waitGo(`(document.querySelector('#purge-done')?.textContent || '').includes('Erased the data of push: 1\u00a0user.')`, "the purge's answer")
}

// notServedService starts an open service of the test's own whose users
// p1 and p2 of push are stored while push is no longer served (a SIGHUP took
// it out of the namespaces file), beside feed's user f1, served; notServed
// asks it the namespaces stored and not served.
func (s *suite) notServedService(t *testing.T) (svc *service, notServed func() []string) {
	t.Helper()
	file := filepath.Join(s.dir, "namespaces-"+userID(t)+".yaml")
	if err := os.WriteFile(file, []byte("feed:\n  window: 30d\npush:\n  window: 1d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svc, err := s.startServiceWith("data-"+userID(t), "", "", "--namespaces", file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	svc.record(t, "", "push", "p1", "a")
	svc.record(t, "", "push", "p2", "b")
	svc.record(t, "", "feed", "f1", "a")
	if err := os.WriteFile(file, []byte("feed:\n  window: 30d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := svc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	notServed = func() []string {
		r, err := svc.api(t, "").ListNamespacesWithResponse(context.Background())
		if err != nil || r.JSON200 == nil {
			t.Fatalf("list namespaces: %v %d %s", err, r.StatusCode(), r.Body)
		}
		return r.JSON200.NotServed
	}
	for deadline := time.Now().Add(waitFor); !slices.Equal(notServed(), []string{"push"}); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not served after the SIGHUP: %v, want [push]", notServed())
		}
	}
	return svc, notServed
}

func TestEraseTheDataOfANamespaceNoLongerServed(t *testing.T) {
	s := setup(t)
	svc, notServed := s.notServedService(t)
	tb := s.newTab(t, svc)
	tb.open("#/ns")
	button := `#not-served tr[data-ns="push"] button`
	tb.waitJS(`!!document.querySelector('`+button+`')`, "push among the namespaces stored and not served")
	if n := eval[int](tb, `document.querySelectorAll('#not-served tbody tr').length`); n != 1 {
		t.Errorf("%d namespaces listed as stored and not served, want push alone", n)
	}
	tb.click(button)
	tb.waitJS(`document.querySelector('#purge-dialog').open`, "the confirmation dialog")
	if got := tb.text("#purge-dialog"); !strings.Contains(got, "push") || !strings.Contains(got, "cannot be undone") {
		t.Errorf("the confirmation %q does not name the namespace and say it is final", got)
	}
	tb.click("#purge-cancel")
	tb.waitJS(`!document.querySelector('#purge-dialog').open`, "the dialog to close")
	if ns := notServed(); !slices.Equal(ns, []string{"push"}) {
		t.Fatalf("after cancelling, not served: %v, want push still stored", ns)
	}
	tb.click(button)
	tb.waitJS(`document.querySelector('#purge-dialog').open`, "the confirmation dialog")
	tb.do("mark the live regions", chromedp.Evaluate[chromedp.Void](markRegions))
	tb.click("#purge-confirm")
	const outcome = "Erased the data of push: 2\u00a0users."
	tb.waitText("#purge-done", outcome)
	// Read out once, as every action's outcome: by the page's status region,
	// not by one of its own drawn with the page (which would not be heard).
	tb.waitJS(fmt.Sprintf(`document.querySelector('#announce').textContent === %q`, outcome), "the outcome to be read out")
	if got := eval[[]string](tb, fmt.Sprintf(readOutBy, outcome)); !slices.Equal(got, []string{"announce"}) {
		t.Errorf("the outcome is in the live regions %q; want it in #announce alone", got)
	}
	// The button that had the focus is gone with its row: the page's heading,
	// above the outcome, takes it, not the start of the document.
	if got := eval[string](tb, `document.activeElement.id || document.activeElement.tagName`); got != "namespaces-h" {
		t.Errorf("after the erase the focus is on %s, want the page's heading", got)
	}
	if n := eval[int](tb, `document.querySelectorAll('#not-served').length`); n != 0 {
		t.Errorf("the list of namespaces stored and not served is still shown (%d)", n)
	}
	if ns := notServed(); len(ns) != 0 {
		t.Errorf("after the erase, not served: %v", ns)
	}
	if u, err := svc.api(t, "").GetUserWithResponse(context.Background(), "feed", "f1"); err != nil || u.JSON200 == nil {
		t.Errorf("feed/f1 after push's erase: %v %d", err, u.StatusCode())
	}
}

// A change whose call got no answer at all (the service went away: a
// refused or cut connection) says that whether it was done is unknown, as
// one that got no answer in time does: the page cannot tell a refused
// connection from one cut after the service recorded the items.
func TestAChangeWithoutAnAnswerSaysWhetherItWasDoneIsUnknown(t *testing.T) {
	s := setup(t)
	svc, err := s.startServiceWith("data-"+userID(t), s.keysArg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.stop)
	user := userID(t)
	svc.record(t, s.keys.write, "default", user, "a")
	tb := s.newTab(t, svc)
	tb.open(fragment("default", user))
	tb.useKey(s.keys.write)
	tb.waitText("#user-items", "1")

	svc.stop()
	tb.fill("#record-items", "b")
	tb.click(`#record-form button[type="submit"]`)
	msg := tb.waitText("#record-result .problem", "No answer")
	if !strings.Contains(msg, "Whether it was done is unknown") {
		t.Errorf("a record without an answer reads %q, want it to say whether it was done is unknown", msg)
	}
	// A look needs no such warning: it changes nothing.
	tb.fill("#check-items", "b")
	tb.click(`#check-form button[type="submit"]`)
	if msg := tb.waitText("#check-result .problem", "No answer"); strings.Contains(msg, "unknown") {
		t.Errorf("a check without an answer reads %q", msg)
	}
}

// Behind a reverse proxy serving the service under a path prefix (nginx's
// `location /seen/ { proxy_pass http://127.0.0.1:8080/; }`), the dashboard
// calls the API under the same prefix, beside its own page, not at the
// proxy's root, where another site or nothing answers: its figures, the
// namespaces, a user's page, a check and a record all work. Every request
// reaching the proxy outside the prefix fails the test.
func TestTheDashboardWorksUnderAPathPrefix(t *testing.T) {
	s := setup(t)
	user := userID(t)
	s.svc.record(t, s.keys.write, "default", user, "p:1", "p:2")
	prefixed, outside := underPrefix(t, s.svc)
	useThrough(t, s, prefixed, user)
	if got := outside(); len(got) > 0 {
		t.Errorf("the page, served under /seen/, called the proxy outside it: %q", got)
	}
}

// Behind Debian's nginx with README's `location /seen/ { proxy_pass ...; }`,
// served by plain HTTP under a host name (seen.test): the browser sends no
// Sec-Fetch-Site to such a page, and nginx passes on its upstream's Host,
// which the Origin of the page never matches. The dashboard's writes, which
// a browser sends another origin only after a CORS preflight the service
// never allows, are served all the same: a key entered, a check and a record.
func TestTheDashboardWritesBehindNginxUnderAName(t *testing.T) {
	s := setup(t)
	port := nginx(t, "location /seen/ { proxy_pass "+s.svc.base+"/; }")
	base := fmt.Sprintf("http://seen.test:%d/seen", port)
	user := userID(t)
	s.svc.record(t, s.keys.write, "default", user, "p:1", "p:2")
	useThrough(t, s, &service{base: base}, user)
}

// useThrough drives the dashboard of proxied, the suite's service behind a
// proxy, where user has seen p:1 and p:2: a key entered, the figures, the
// namespaces, the user's page, a check and a record, each through the
// proxy's prefix.
func useThrough(t *testing.T, s *suite, proxied *service, user string) {
	t.Helper()
	tb := s.newTab(t, proxied)
	tb.open("#/")
	tb.waitText("#role", "role: no key (the service needs one)")
	tb.useKey(s.keys.write)
	tb.waitText("#role", "role: write")
	tb.waitText("#updated", "Figures updated")
	tb.waitJS(`!!document.querySelector('#ns-stats tr[data-ns="default"]')`, "the figures by namespace")
	tb.open("#/ns")
	tb.waitJS(`!!document.querySelector('#namespaces tr[data-ns="default"]')`, "the namespaces")
	tb.open(fragment("default", user))
	tb.waitText("#user-items", "2")
	tb.fill("#check-items", "p:1\nq:1")
	tb.click("#check-run")
	tb.waitText("#check-result .done", "1 of 2 seen.")
	tb.fill("#record-items", "q:1")
	tb.click("#record-run")
	tb.waitText("#record-result .done", "Recorded 1 new")
	tb.waitText("#user-items", "3")
	if n := tb.apiCalls(http.MethodPost, "/v1/namespaces/default/users/"+user+"/seen"); n != 1 {
		t.Errorf("the page recorded through %d calls under the prefix, want 1", n)
	}
}

// nginxPath is Debian's nginx, or $SEENAPI_NGINX.
var nginxPath = cmp.Or(os.Getenv("SEENAPI_NGINX"), "/usr/sbin/nginx")

// nginx runs nginxPath in the foreground on a loopback port with location
// in its one server, stopped when the test ends, and returns the port.
// Without nginx the test skips, unless CI=true, where it fails.
func nginx(t *testing.T, location string) int {
	t.Helper()
	if _, err := os.Stat(nginxPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s is missing (apt-get install nginx): %v", nginxPath, err)
		}
		t.Skipf("%s is missing (apt-get install nginx; CI=true makes this a failure)", nginxPath)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	conf := fmt.Sprintf(`daemon off;
pid %[1]s/nginx.pid;
error_log stderr;
events {}
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  server {
    listen 127.0.0.1:%[2]d;
    %[3]s
  }
}
`, dir, port, location)
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command(nginxPath, "-e", "stderr", "-c", file, "-p", dir+"/")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGQUIT) // nginx's graceful stop
		<-done
	})
	for deadline := time.Now().Add(waitFor); ; {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			c.Close()
			return port
		}
		select {
		case <-done:
			t.Fatalf("nginx exited: %v\n%s", cmd.ProcessState, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen within %v:\n%s", waitFor, logs.String())
		}
	}
}

// underPrefix serves svc behind a reverse proxy under the path prefix /seen/
// (passed on as /, as nginx's `location /seen/ { proxy_pass ...:8080/; }`
// does), closed when the test ends. It returns the service as seen through
// the proxy, and what reached the proxy outside the prefix so far.
func underPrefix(t *testing.T, svc *service) (*service, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var outside []string
	mux := http.NewServeMux()
	mux.Handle("/seen/", http.StripPrefix("/seen", reverseProxy(t, svc.base)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		outside = append(outside, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		http.NotFound(w, r) // the proxy's own answer: another site's, or none
	})
	proxy := httptest.NewServer(mux)
	t.Cleanup(proxy.Close)
	return &service{base: proxy.URL + "/seen"}, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(outside)
	}
}

// A page without a key that loaded while the service was down (behind a
// proxy answering 502 while it restarts, say) could not learn from GET
// /healthz whether the service needs a key. When the service is back, the
// page asks GET /healthz again before any route needing a key, rather than
// send one without a key: on a service with keys that would be a 401, one
// more in the errors its operators watch.
func TestAPageLoadedWhileTheServiceWasDownCallsNoRouteNeedingAKeyWhenItIsBack(t *testing.T) {
	s := setup(t)
	data := "data-" + userID(t)
	svc, err := s.startServiceWith(data, s.keysArg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.stop() })
	up, err := url.Parse(svc.base)
	if err != nil {
		t.Fatal(err)
	}
	pass := httputil.NewSingleHostReverseProxy(up)
	// While the service is down the proxy answers 502 (proxyProblem).
	pass.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) {
		proxyProblem(w, http.StatusBadGateway, "the service does not answer")
	}
	asked := make(chan struct{})
	release := make(chan struct{})
	var once, held sync.Once
	answer := func() { once.Do(func() { close(release) }) }
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			held.Do(func() { close(asked); <-release }) // the page's first, until the service is stopped
		}
		pass.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	t.Cleanup(answer) // before the proxy closes, which waits for the requests it holds

	tb := s.newTab(t, &service{base: proxy.URL})
	tb.open("#/")
	select {
	case <-asked:
	case <-time.After(waitFor):
		t.Fatalf("the page did not ask GET /healthz within %v", waitFor)
	}
	svc.stop()
	answer()
	tb.waitText("#role", "role: unknown")
	tb.waitText("#overview-error .problem", "502")
	// A refresh while it is down: the figures asked, or first whether they need a key.
	sent := func() int { return tb.apiCalls(http.MethodGet, "/healthz") + tb.apiCalls(http.MethodGet, "/v1/stats") }
	n := sent()
	for deadline := time.Now().Add(waitFor); sent() == n; {
		if time.Now().After(deadline) {
			t.Fatalf("the page sent nothing in %v while the service was down, want a refresh", waitFor)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if svc, err = s.startServiceWith(data, s.keysArg, up.Host); err != nil {
		t.Fatal(err)
	}
	tb.waitText("#role", "role: no key (the service needs one)")
	tb.waitText("#overview-error .problem .hint", "Enter an API key")
	tb.passTime(3*time.Second, true) // a refresh and a half
	r, err := svc.api(t, s.keys.admin).GetStatsWithResponse(context.Background())
	if err != nil || r.JSON200 == nil {
		t.Fatalf("stats: %v", err)
	}
	if len(r.JSON200.Errors) != 0 || r.JSON200.NotReady != svc.notReady {
		t.Errorf("the service back counts the error answers %v and %d answers not ready, want none and the harness's %d",
			r.JSON200.Errors, r.JSON200.NotReady, svc.notReady)
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, id := range tb.order {
		if x := tb.exchanges[id]; x.status == http.StatusUnauthorized {
			t.Errorf("the page sent %s %s without a key: 401", x.method, strings.TrimPrefix(x.url, proxy.URL))
		}
	}
}
