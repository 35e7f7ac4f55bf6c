package eviction

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seenapi/seenapi/userfilter"
	"github.com/zeebo/xxh3"
)

// Journal records are read back by later builds, after a crash or from a
// backup: the bytes of each form, those of earlier builds included, are
// pinned here, and each reads back as written. A record that notes the
// room the cap left its call writes no more of it than its items.
func TestJournalRecordFormat(t *testing.T) {
	at := time.Unix(1_795_000_000, 0)
	hs := []userfilter.Hash{{Lo: 1, Hi: 2}, {Lo: 3, Hi: 4}}
	made := []byte{0xaa, 0xbb, 0xcc} // a profile's encoding, opaque here
	r := &reply{id: xxh3.Uint128{Hi: 5, Lo: 6}, request: xxh3.Uint128{Hi: 7, Lo: 8}, seen: 3, recorded: 1,
		saturated: true, unseen: []int32{0, 2}}
	const hashes = "0100000000000000" + "0200000000000000" + "0300000000000000" + "0400000000000000"   // (Lo, Hi) twice
	const answer = "0500000000000000" + "0600000000000000" + "0700000000000000" + "0800000000000000" + // ID, Request (Hi, Lo)
		"03" + "01" + "01" + "02" + "0002" // seen, recorded, saturated, 2 unseen: 0 and 2
	rc := *r
	rc.caller = 0x0102030405060708
	callerAnswer := answer[:64] + "0807060504030201" + answer[64:] // the caller after the Request
	ra := rc
	ra.ahead = 3600
	aheadAnswer := answer[:64] + "0807060504030201" + "901c" + answer[64:] // and the seconds ahead
	rb := rc
	rb.behind = 40
	behindAnswer := answer[:64] + "0807060504030201" + "28" + answer[64:] // or behind
	for _, c := range []struct {
		name     string
		hex      string
		made     []byte
		r        *reply
		room     int // written
		readRoom int // read back
	}{
		{"items (no cap, or a build before format 5)", "c08df6d706" + hashes, nil, nil, -1, -1},
		{"profile (format 4)", "c08df6d786800103aabbcc" + hashes, made, nil, -1, -1},
		{"answer (format 4)", "c08df6d78640" + answer + hashes, nil, r, -1, -1},
		{"room (format 5)", "c08df6d786800201" + hashes, nil, nil, 1, 1},
		{"room past the items (format 5)", "c08df6d786800202" + hashes, nil, nil, 500, 2},
		{"profile, room and answer (format 5)", "c08df6d786c00303aabbcc00" + answer + hashes, made, r, 0, 0},
		{"answer of a caller (format 6)", "c08df6d786c004" + callerAnswer + hashes, nil, &rc, -1, -1},
		{"profile, room and answer of a caller (format 6)", "c08df6d786c00703aabbcc00" + callerAnswer + hashes, made, &rc, 0, 0},
		{"answer of a caller stamped an hour ahead (format 6)", "c08df6d786c00c" + aheadAnswer + hashes, nil, &ra, -1, -1},
		{"answer of a caller stamped 40 s behind (format 7)", "c08df6d786c014" + behindAnswer + hashes, nil, &rb, -1, -1},
	} {
		want, err := hex.DecodeString(c.hex)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJournal(nil, at, hs, c.r, c.made, c.room); !bytes.Equal(got, want) {
			t.Errorf("%s: written as %x, want %x", c.name, got, want)
		}
		rec, err := decodeJournal(want)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !rec.at.Equal(at) || !slices.Equal(rec.hashes, hs) || !bytes.Equal(rec.made, c.made) || rec.room != c.readRoom ||
			(rec.reply == nil) != (c.r == nil) {
			t.Errorf("%s: read back as %+v", c.name, rec)
		}
		if rp := rec.reply; rp != nil && (rp.id != r.id || rp.request != r.request || rp.caller != c.r.caller || rp.ahead != c.r.ahead || rp.behind != c.r.behind ||
			!rp.at.Equal(at.Add(time.Duration(c.r.ahead)*time.Second-time.Duration(c.r.behind)*time.Second)) || rp.seen != r.seen ||
			rp.recorded != r.recorded || rp.saturated != r.saturated || !slices.Equal(rp.unseen, r.unseen)) {
			t.Errorf("%s: its answer read back as %+v", c.name, rp)
		}
	}
}

// The journal of a capped user written by a build before format 5, whose
// records note no room, is replayed as that build replayed it: each
// record with the cap counted as of its call, which gives back the filter
// the calls made while none of its records has expired.
func TestJournalOfAnEarlierBuildReplaysWithTheCapAsOfEachCall(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	p := capProfile(time.Hour)
	made, err := emptyEncoding(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := userfilter.New(p)
	if err != nil {
		t.Fatal(err)
	}
	sh := &shadow{f: f}
	var all []string
	for i, c := range []struct {
		prefix string
		at     time.Duration
		n      int
	}{{"a", 0, 60}, {"b", time.Hour, 60}, {"c", 4 * time.Hour, 50}} {
		batch := make([]string, c.n)
		for j := range batch {
			batch[j] = fmt.Sprintf("%s%d", c.prefix, j)
		}
		all = append(all, batch...)
		sh.call(batch, 0, userfilter.RecordAll, capAt(c.at)(), 0)
		hs := make([]userfilter.Hash, len(batch))
		for j, it := range batch {
			hs[j] = userfilter.HashItem(it)
		}
		m := made
		if i > 0 {
			m = nil // the first record names the profile
		}
		if _, err := st.Append("capped", "u", appendJournal(nil, capAt(c.at)(), hs, nil, m, -1), 0); err != nil {
			t.Fatal(err)
		}
	}
	h, err := newCapHotSet(st, capAt(4*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	got := seen(t, h, "capped", "u", all...)
	want := sh.f.Check(all, capAt(4*time.Hour)(), nil)
	for i, it := range all {
		if got[i] != want[i] {
			t.Fatalf("%s tests seen %v, %v in the filter that stayed in memory", it, got[i], want[i])
		}
	}
}
