package eviction

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/seenapi/seenapi/userfilter"
)

// shadow is a user's filter as it would be had it stayed in memory: every
// call applied to it as the hot set applies it, and nothing else.
type shadow struct {
	f *userfilter.Filter
	s userfilter.Scratch
}

// call is filterAppend's work on the shadow: Select, no recording when
// the filter is full, Commit.
func (sh *shadow) call(items []string, limit int, mode userfilter.Mode, now time.Time, maxEncoded int) (unseen []string, seenCount, recorded int) {
	sh.f.Expire(now)
	res := sh.f.Select(items, limit, mode, now, &sh.s)
	if len(sh.s.ToRecord) > 0 && sh.f.Full(now, maxEncoded) {
		sh.s.ToRecord = sh.s.ToRecord[:0]
	}
	recorded, _ = sh.f.Commit(now, &sh.s, maxEncoded)
	for _, i := range sh.s.Unseen {
		unseen = append(unseen, items[i])
	}
	return unseen, res.SeenCount, recorded
}

// pathProfiles are profiles whose layers seal every few hundred items and
// whose false positives are common, so that a path that rebuilds a filter
// with its layers filled at other points than the calls filled them, or
// loses a false positive another way, shows in a few hundred calls.
var pathProfiles = map[string]userfilter.Profile{
	"bloom":          {Kind: userfilter.KindBloom, FPRate: 0.2, InitialCapacity: 40, Growth: 2},
	"compact":        {Kind: userfilter.KindCompact, FPRate: 0.2, InitialCapacity: 40, Growth: 2},
	"staged":         {Kind: userfilter.KindStaged, FPRate: 0.2, InitialCapacity: 40, Growth: 2},
	"bloom-window":   {Kind: userfilter.KindBloom, FPRate: 0.2, InitialCapacity: 40, Growth: 2, Window: 3 * time.Hour, Granularity: time.Hour},
	"compact-window": {Kind: userfilter.KindCompact, FPRate: 0.2, InitialCapacity: 40, Growth: 2, Window: 3 * time.Hour, Granularity: time.Hour},
	"staged-window":  {Kind: userfilter.KindStaged, FPRate: 0.2, InitialCapacity: 40, Growth: 2, Window: 3 * time.Hour, Granularity: time.Hour},
	"staged-cap":     {Kind: userfilter.KindStaged, FPRate: 0.2, InitialCapacity: 40, Growth: 2, Window: 3 * time.Hour, Granularity: time.Hour, MaxItems: 800},
}

// Every path that takes a user's filter out of memory and back, or
// rebuilds it, must give back the filter that stayed in memory: each call
// answers as the shadow, which never left memory, answers it. The paths: a
// write-back and a load, an eviction under a small budget, a crash with
// the journal pending and a load replaying it, Recover, a clean restart, a
// backup restored into a new directory, an earlier backup restored with
// --merge, an export imported back (replacing, or merged with an earlier
// export of the user), items forgotten (forgotten in the shadow too), the
// namespace's profile changed or the namespace taken out and back, and the
// clock moving buckets out of the window. An item a call found seen by a
// false positive was not recorded: it stays seen only if every path keeps
// that false positive, and the profiles here make them common.
func TestEveryPathAnswersAsTheFilterThatStayedInMemory(t *testing.T) {
	for name, p := range pathProfiles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for seed := range *pathSeeds {
				testPathsAnswerAsMemory(t, p, uint64(seed))
			}
		})
	}
}

// pathSeeds: go test ./eviction -run TestEveryPath -args -paths.seeds=20
// runs more of them.
var pathSeeds = flag.Int("paths.seeds", 1, "runs of TestEveryPathAnswersAsTheFilterThatStayedInMemory, each with its own seed")

func testPathsAnswerAsMemory(t *testing.T, p userfilter.Profile, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	now, advance := newTestClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{Now: now, CacheBytes: 6 << 10, Shards: 1}
	fx := &fixture{t: t, dir: t.TempDir(), ns: []Namespace{{Name: "ns", Profile: p}}}
	fx.st = openStore(t, fx.dir)
	fx.h = fx.newHotSet(opts)
	t.Cleanup(func() {
		fx.h.Close()
		fx.st.Close()
	})
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5"}
	shadows := map[string]*shadow{}
	for _, u := range users {
		f, err := userfilter.New(p)
		if err != nil {
			t.Fatal(err)
		}
		shadows[u] = &shadow{f: f}
	}
	next := 0 // items are new ones and ones shown before
	item := func() string {
		if next > 0 && rng.IntN(3) == 0 {
			return fmt.Sprintf("i%d", rng.IntN(next))
		}
		next++
		return fmt.Sprintf("i%d", next-1)
	}
	var log []string
	var old []byte // a backup kept, taken at oldStep
	var oldStep int
	exports := map[string][]byte{}
	forgets := false // items were forgotten: a merge would bring them back
	var evictions, loads uint64
	tally := func() {
		st := fx.h.Stats()
		evictions, loads = evictions+st.Evictions, loads+st.Loads
	}
	fail := func(format string, a ...any) {
		t.Helper()
		for _, l := range log {
			t.Log(l)
		}
		t.Fatalf("seed %d, after %s:\n"+format, append([]any{seed, log[max(0, len(log)-12):]}, a...)...)
	}
	for _, u := range users { // made under the namespace's first profile
		if _, err := fx.h.Filter("ns", u, []string{"first"}, 0, userfilter.RecordAll); err != nil {
			t.Fatal(err)
		}
		shadows[u].call([]string{"first"}, 0, userfilter.RecordAll, now(), fx.h.maxEncoded)
	}
	for step := range 150 {
		switch r := rng.IntN(100); {
		case r < 70:
			u := users[rng.IntN(len(users))]
			n := 1 + rng.IntN(40)
			if rng.IntN(4) == 0 {
				n = 200 + rng.IntN(1500) // seals layers within the call
			}
			batch := make([]string, n)
			for i := range batch {
				batch[i] = item()
			}
			mode := []userfilter.Mode{userfilter.RecordReturned, userfilter.RecordAll, userfilter.RecordNone}[rng.IntN(3)]
			limit := 0
			if rng.IntN(3) == 0 {
				limit = 1 + rng.IntN(n)
			}
			// The seen route, in bulk or not, records all and answers no
			// unseen items; in bulk it records a user not in memory
			// without loading it into the hot set.
			route := "filter"
			if mode == userfilter.RecordAll && limit == 0 {
				route = []string{"filter", "seen", "seen?bulk=true"}[rng.IntN(3)]
			}
			log = append(log, fmt.Sprintf("%d: %s %s %d items mode %v limit %d", step, u, route, n, mode, limit))
			var res Result
			var err error
			switch route {
			case "filter":
				res, err = fx.h.Filter("ns", u, batch, limit, mode)
			case "seen":
				res, err = fx.h.Record("ns", u, batch)
			default:
				res, err = fx.h.RecordBulk("ns", u, batch)
			}
			if err != nil {
				t.Fatal(err)
			}
			wantUnseen, wantSeen, wantRecorded := shadows[u].call(batch, limit, mode, now(), fx.h.maxEncoded)
			if route != "filter" {
				wantUnseen = nil
			}
			if res.SeenCount != wantSeen || res.Recorded != wantRecorded || !slices.Equal(res.Unseen, wantUnseen) {
				var differ []string
				for _, it := range batch {
					if a, b := slices.Contains(res.Unseen, it), slices.Contains(wantUnseen, it); a != b && len(differ) < 5 {
						differ = append(differ, fmt.Sprintf("%s unseen %v, in memory %v", it, a, b))
					}
				}
				fail("%s: %d seen, %d unseen, %d recorded; the filter that stayed in memory: %d seen, %d unseen, %d recorded; %v",
					u, res.SeenCount, len(res.Unseen), res.Recorded, wantSeen, len(wantUnseen), wantRecorded, differ)
			}
		case r < 78:
			log = append(log, fmt.Sprintf("%d: flush", step))
			if err := fx.h.Flush(); err != nil {
				t.Fatal(err)
			}
		case r < 85:
			log = append(log, fmt.Sprintf("%d: crash", step))
			tally()
			fx.restart(false, opts)
			if rng.IntN(2) == 0 {
				log = append(log, fmt.Sprintf("%d: recover", step))
				if _, err := fx.h.Recover(); err != nil {
					t.Fatal(err)
				}
			}
		case r < 88:
			log = append(log, fmt.Sprintf("%d: restart", step))
			tally()
			fx.restart(true, opts)
		case r < 89:
			// A backup while calls go on, restored into a new data
			// directory after a crash.
			log = append(log, fmt.Sprintf("%d: backup, crash, restore elsewhere", step))
			var b bytes.Buffer
			if err := fx.h.Backup(&b); err != nil {
				t.Fatal(err)
			}
			tally()
			fx.restart(false, opts) // the old directory's journal is not the new one's
			fx.h.Close()
			fx.st.Close()
			fx.dir = t.TempDir()
			fx.st = openStore(t, fx.dir)
			if err := fx.st.Restore(&b, nil, nil); err != nil {
				t.Fatal(err)
			}
			fx.h = fx.newHotSet(opts)
			if rng.IntN(2) == 0 {
				if _, err := fx.h.Recover(); err != nil {
					t.Fatal(err)
				}
			}
		case r < 90:
			// An earlier backup of the same histories merged back in
			// (restore --merge): it adds nothing.
			if old == nil || forgets {
				break
			}
			log = append(log, fmt.Sprintf("%d: crash, restore --merge of the backup of step %d", step, oldStep))
			tally()
			fx.restart(false, opts)
			fx.h.Close()
			if err := fx.st.Restore(bytes.NewReader(old), MergeRestored, FoldJournal(fx.st.MaxValueBytes())); err != nil {
				t.Fatal(err)
			}
			fx.h = fx.newHotSet(opts)
		case r < 91:
			log = append(log, fmt.Sprintf("%d: backup kept", step))
			var b bytes.Buffer
			if err := fx.h.Backup(&b); err != nil {
				t.Fatal(err)
			}
			old, oldStep = b.Bytes(), step
		case r < 93:
			// Export and import back: a replace with what it is, or a
			// merge with an earlier export of the same user.
			u := users[rng.IntN(len(users))]
			data, err := fx.h.Export("ns", u)
			if err != nil {
				t.Fatal(err)
			}
			replace := true
			if e := exports[u]; e != nil && !forgets && rng.IntN(2) == 0 {
				data, replace = e, false
			}
			exports[u] = data
			log = append(log, fmt.Sprintf("%d: %s export, import replace %v", step, u, replace))
			if _, err := fx.h.Import("ns", u, data, replace, 1<<30); err != nil {
				t.Fatal(err)
			}
		case r < 94:
			// Items forgotten: the rest stay as they were.
			if !p.Kind.CanForget() {
				break
			}
			u := users[rng.IntN(len(users))]
			var forget []string
			for range 1 + rng.IntN(20) {
				forget = append(forget, fmt.Sprintf("i%d", rng.IntN(next)))
			}
			log = append(log, fmt.Sprintf("%d: %s forgets %d items", step, u, len(forget)))
			forgets = true
			if _, err := fx.h.ForgetItems("ns", u, forget); err != nil {
				t.Fatal(err)
			}
			if _, err := shadows[u].f.Forget(forget, now()); err != nil {
				t.Fatal(err)
			}
		case r < 95:
			// The namespace's profile changes, or it goes and comes back:
			// users made before keep theirs.
			log = append(log, fmt.Sprintf("%d: namespace reloaded", step))
			q := p
			q.FPRate = []float64{0.2, 0.01, 0.1}[rng.IntN(3)]
			if _, err := fx.h.SetNamespaces([]Namespace{{Name: "other", Profile: q}}); err != nil {
				t.Fatal(err)
			}
			fx.ns = []Namespace{{Name: "ns", Profile: q}}
			if _, err := fx.h.SetNamespaces(fx.ns); err != nil {
				t.Fatal(err)
			}
		default:
			d := time.Duration(rng.IntN(50)) * time.Minute
			log = append(log, fmt.Sprintf("%d: +%v", step, d))
			advance(d)
		}
	}
	tally()
	if evictions == 0 || loads == 0 {
		t.Fatalf("%d evictions, %d loads: the paths were not taken", evictions, loads)
	}
	t.Logf("%d items, %d evictions, %d loads", next, evictions, loads)
	// Every item, for every user, tests as in memory.
	all := make([]string, next)
	for i := range all {
		all[i] = fmt.Sprintf("i%d", i)
	}
	for _, u := range users {
		got := seen(t, fx.h, "ns", u, all...)
		want := shadows[u].f.Check(all, now(), nil)
		for i := range all {
			if got[i] != want[i] {
				fail("%s: %s tests seen %v, %v in the filter that stayed in memory", u, all[i], got[i], want[i])
			}
		}
	}
}
