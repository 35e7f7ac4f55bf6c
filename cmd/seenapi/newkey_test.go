package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seenapi/seenapi/api"
)

// new-key writes a keys file's line the service loads, with the role and
// namespaces asked for and a comment naming the key by its id; each run
// makes another key.
func TestNewKeyWritesALineTheServiceLoads(t *testing.T) {
	newKey := func(args ...string) (string, api.Key) {
		t.Helper()
		var out, errs bytes.Buffer
		if code := run(context.Background(), append([]string{"new-key"}, args...), noEnv, &out, &errs, nil); code != 0 {
			t.Fatalf("new-key %q: exit %d: %s", args, code, errs.String())
		}
		keys, err := api.ParseKeys(out.String())
		if err != nil || len(keys) != 1 {
			t.Fatalf("new-key %q wrote %q: %v", args, out.String(), err)
		}
		return out.String(), keys[0]
	}
	out, k := newKey("--role", "admin", "--limit-namespaces", "push,feed")
	if k.Role != api.RoleAdmin || !slices.Equal(k.Namespaces, []string{"feed", "push"}) || len(k.Secret) < 26 {
		t.Fatalf("new-key made %+v", k)
	}
	if !strings.HasPrefix(out, "# key "+k.ID()+" (admin), made ") {
		t.Errorf("the comment does not name the key by its id %s: %q", k.ID(), out)
	}
	_, w := newKey()
	if w.Role != api.RoleWrite || w.Namespaces != nil || w.Secret == k.Secret {
		t.Fatalf("new-key without flags made %+v (the one before had %q)", w, k.Secret)
	}

	// Appended to a keys file, as the help says, it is served.
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if keys, err := api.LoadKeysFile(file); err != nil || keys[0].Secret != k.Secret {
		t.Fatalf("the keys file: %v %v", keys, err)
	}

	for _, args := range [][]string{{"--role", "boss"}, {"--limit-namespaces", "Feed"}, {"--limit-namespaces", "feed,feed"}, {"extra"}} {
		var out, errs bytes.Buffer
		if code := run(context.Background(), append([]string{"new-key"}, args...), noEnv, &out, &errs, nil); code != 2 || out.Len() != 0 {
			t.Errorf("new-key %q: exit %d, wrote %q; want 2 and nothing", args, code, out.String())
		}
	}
}
