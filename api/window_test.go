package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/userfilter"
)

// TestUserPastTheWindowAnswersAsNeverSeen: in a namespace with a window, a
// user whose items have all left it is gone from the routes a dashboard
// reads: the users route lists it no more and its stats route answers the
// 404 of a user never seen. Badger expires values by the wall clock, so
// the test waits a window of 2 s (buckets of 1 s) out.
func TestUserPastTheWindowAnswersAsNeverSeen(t *testing.T) {
	e := newEnv(t)
	brief := userfilter.Profile{Window: 2 * time.Second, Granularity: time.Second}.WithDefaults()
	if _, err := e.hot.SetNamespaces(append(testNamespaces(), eviction.Namespace{Name: "brief", Profile: brief})); err != nil {
		t.Fatal(err)
	}
	listed := func() []string {
		t.Helper()
		status, _, body := e.raw(http.MethodGet, "/v1/namespaces/brief/users", "", nil)
		var page struct{ Users []string }
		if status != http.StatusOK || json.Unmarshal(body, &page) != nil {
			t.Fatalf("users route: %d %s", status, truncate(body))
		}
		return page.Users
	}
	if status, _, body := e.raw(http.MethodPost, userPath("brief", "u", "/seen"), "application/json", []byte(`{"items":["a"]}`)); status != http.StatusOK {
		t.Fatalf("seen: %d %s", status, truncate(body))
	}
	if status, _, body := e.raw(http.MethodGet, userPath("brief", "u", ""), "", nil); status != http.StatusOK {
		t.Fatalf("stats within the window: %d %s", status, truncate(body))
	}
	// Past the window (the end of the item's bucket and 2 s) and a write-back.
	time.Sleep(3*time.Second + 200*time.Millisecond)
	if users := listed(); slices.Contains(users, "u") {
		t.Errorf("past the window the users route still lists u: %q", users)
	}
	status, h, body := e.raw(http.MethodGet, userPath("brief", "u", ""), "", nil)
	gone := wantProblem(t, status, h, body, http.StatusNotFound, "user-not-found")
	status, h, body = e.raw(http.MethodGet, userPath("brief", "never", ""), "", nil)
	never := wantProblem(t, status, h, body, http.StatusNotFound, "user-not-found")
	if gone.Detail != never.Detail {
		t.Errorf("stats past the window: %q; a user never seen: %q", gone.Detail, never.Detail)
	}
}
