package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seenapi/seenapi/client"
	"github.com/seenapi/seenapi/storage"
	"github.com/seenapi/seenapi/userfilter"
)

// A user past the largest filter the store keeps (here a 1 MiB value-log
// file; 128 MiB by default) saturates as at max_items: its answers are
// still filtered and say saturated, its stats too, the other users are
// written back, what it recorded survives a restart, and an import too
// large to store is a 413 that changes nothing.
func TestAUserPastTheStoresLargestValueSaturatesOverHTTP(t *testing.T) {
	// No value-log GC: with files this small it runs while the test
	// writes, and Badger v4.9.6 races with itself there (see storage's
	// soak test).
	so := storage.DefaultOptions(t.TempDir()).WithValueLogFileSize(1 << 20).WithGCInterval(-1)
	e := newEnvIn(t, so, nil)
	c := e.client("")
	var sent []string
	saturated := false
	for call := 0; call < 100 && !saturated; call++ {
		items := make([]string, 10000)
		for i := range items {
			items[i] = fmt.Sprintf("i:%d:%d", call, i)
		}
		sent = append(sent, items...)
		r, err := c.RecordSeenWithResponse(ctx, "default", "big", nil, client.ItemsRequest{Items: items})
		if err != nil || r.JSON200 == nil {
			t.Fatalf("call %d: %v %d %s", call, err, r.StatusCode(), r.Body)
		}
		saturated = r.JSON200.Saturated != nil && *r.JSON200.Saturated
		filter(t, c, "default", fmt.Sprintf("small%d", call), client.FilterRequest{Candidates: []string{"a", "b"}})
	}
	if !saturated {
		t.Fatal("the user never saturated")
	}
	check := func(c *client.ClientWithResponses, items []string) (seen []string) {
		t.Helper()
		for len(items) > 0 {
			n := min(len(items), 10000)
			r, err := c.CheckSeenWithResponse(ctx, "default", "big", client.ItemsRequest{Items: items[:n]})
			if err != nil || r.JSON200 == nil {
				t.Fatalf("check: %v %d %s", err, r.StatusCode(), r.Body)
			}
			for i, s := range r.JSON200.Seen {
				if s {
					seen = append(seen, items[i])
				}
			}
			items = items[n:]
		}
		return seen
	}
	acked := check(c, sent)

	// Still filtered: what it saw is left out, the new item comes back
	// unrecorded.
	r, err := c.FilterUserWithResponse(ctx, "default", "big", nil, client.FilterRequest{Candidates: []string{acked[0], "new"}})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("filter: %v %d %s", err, r.StatusCode(), r.Body)
	}
	if got := r.JSON200; len(got.Unseen) != 1 || got.Unseen[0] != "new" || got.Recorded != 0 || got.Saturated == nil || !*got.Saturated {
		t.Fatalf("a call past saturation answered %s; want unseen [new], recorded 0, saturated", r.Body)
	}
	u, err := c.GetUserWithResponse(ctx, "default", "big")
	if err != nil || u.JSON200 == nil {
		t.Fatalf("user: %v %d %s", err, u.StatusCode(), u.Body)
	}
	if !u.JSON200.Saturated || int64(u.JSON200.EncodedBytes) > so.ValueLogFileSize {
		t.Fatalf("user stats: saturated %v, %d bytes encoded", u.JSON200.Saturated, u.JSON200.EncodedBytes)
	}
	items := u.JSON200.Items

	// A filter too large to store, imported by replace into a new user and
	// merged into big: 413, and nothing changes.
	// Only as many items as take it past (about 540,000 with the default
	// profile, each taking 2 bytes or so encoded): adding items is most of
	// this test's time under the race detector.
	f, err := userfilter.New(userfilter.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	many := make([]string, 40000)
	var tooBig []byte
	for n := 0; int64(len(tooBig)) <= so.ValueLogFileSize; n += len(many) {
		if n >= 2000000 {
			t.Fatalf("the filter to import takes %d bytes after %d items, not more than the store keeps", len(tooBig), n)
		}
		for i := range many {
			many[i] = "m:" + strconv.Itoa(n+i)
		}
		f.Add(many, time.Now())
		if tooBig, err = f.MarshalBinary(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		user string
		mode *client.ImportMode
	}{{"imported", ptr(client.Replace)}, {"big", nil}} {
		im, err := c.ImportUserWithBodyWithResponse(ctx, "default", tc.user, &client.ImportUserParams{Mode: tc.mode},
			"application/octet-stream", bytes.NewReader(tooBig))
		if err != nil {
			t.Fatal(err)
		}
		p := im.ApplicationproblemJSON413
		if p == nil || p.Type != "https://seenapi.dev/problems/body-too-large" || p.Detail == nil ||
			!strings.Contains(*p.Detail, "more than the") || strings.Contains(*p.Detail, "00000000") {
			t.Fatalf("import into %s: %d %s", tc.user, im.StatusCode(), im.Body)
		}
	}
	if u, err := c.GetUserWithResponse(ctx, "default", "imported"); err != nil || u.StatusCode() != http.StatusNotFound {
		t.Fatalf("a refused import made a user: %v %d %s", err, u.StatusCode(), u.Body)
	}
	if u, err := c.GetUserWithResponse(ctx, "default", "big"); err != nil || u.JSON200 == nil || u.JSON200.Items != items {
		t.Fatalf("a refused import changed big: %v %s", err, u.Body)
	}

	// Written back, every user of the batches.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.GetStatsWithResponse(ctx)
		if err != nil || st.JSON200 == nil {
			t.Fatalf("stats: %v", err)
		}
		if st.JSON200.StorageErrors != 0 {
			t.Fatalf("%d storage errors", st.JSON200.StorageErrors)
		}
		if st.JSON200.DirtyUsers == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d users still dirty", st.JSON200.DirtyUsers)
		}
		time.Sleep(20 * time.Millisecond)
	}

	e.close()
	e = newEnvIn(t, so, nil)
	if got := check(e.client(""), acked); len(got) != len(acked) {
		t.Fatalf("after a restart the user holds %d of the %d items it had seen", len(got), len(acked))
	}
}
