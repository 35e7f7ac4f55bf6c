package api

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeBodyIsStrictAPI holds decodeBody, which reuses its decoders, to
// what strictAPI decodes and refuses: the same values, and an error for the
// same bodies, including unknown fields, names in another case, trailing
// data and escaped lone surrogates. A body decoded after a refused one is not disturbed by it.
func TestDecodeBodyIsStrictAPI(t *testing.T) {
	bodies := []string{
		`{"candidates":["a","b"],"limit":2,"record":"all","on_error":"open"}`,
		`  {"candidates":[]}  `,
		`{"candidates":["a\u00e9\n"]}`,
		`{"candidates":["\ud83d\ude00"]}`,
		`{"candidates":["a","\ud800"]}`,
		`{"candidates":["\udfffx"]}`,
		`{"candidates":["a"],"extra":1}`,
		`{"Candidates":["a"]}`,
		`{"candidates":["a"]} x`,
		`{"candidates":["a"]}{}`,
		`{"candidates":"a"}`,
		`{"limit":"2"}`,
		`{"candidates":["a"]`,
		``,
		`null`,
		`[]`,
	}
	for _, b := range append(bodies, bodies...) { // twice: decoders come back from the pool
		var want, got filterRequest
		wantErr := strictAPI.UnmarshalFromString(b, &want)
		gotErr := decodeBody([]byte(b), &got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%q: decodeBody error %v, strictAPI error %v", b, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeBody gave %+v, strictAPI %+v", b, got, want)
		}
	}
}

// TestNullMemberScanMissesNoNull holds mayHoldNullMember, the scan that
// spares most bodies the token-by-token read, to that read: a body with a
// member null is never passed over, whatever the whitespace around the
// colon and however many colons its items bring, in random bodies and in
// ones written to be awkward.
func TestNullMemberScanMissesNoNull(t *testing.T) {
	bodies := []string{
		`{"limit":null}`,
		"{\"limit\" :\t\r\n null}",
		`{"candidates":["n","null",":null",": null"],"record":"returned"}`,
		`{"candidates":["a:1","b:2","c:3","d:4","e:5","f:6","g:7","h:8","i:9","j:10","k:11","l:12","m:13","n:14","o:15","p:16","q:17"],"limit":null}`,
		`{"candidates":["::::::::::::::::::::"],"on_error": null}`,
		`{"requests":[{"user":"a","candidates":["x:y"]},{"user":"b","limit":null}]}`,
		`{"candidates":[null]}`,
		`null`,
	}
	r := rand.New(rand.NewPCG(5, 6))
	ws := []string{"", " ", "\t", "\n", "\r\n ", "  "}
	pieces := []string{"a", ":", "n", "null", "x:n", ": null", `\"`, "ü"}
	for range 2000 {
		var b strings.Builder
		b.WriteString("{")
		members := 1 + r.IntN(4)
		for m := range members {
			if m > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"m%d"%s:%s`, m, ws[r.IntN(len(ws))], ws[r.IntN(len(ws))])
			switch r.IntN(4) {
			case 0:
				b.WriteString("null")
			case 1:
				b.WriteString("20")
			default:
				b.WriteString("[")
				for i := range r.IntN(30) {
					if i > 0 {
						b.WriteString(",")
					}
					b.WriteString(`"`)
					for range 1 + r.IntN(4) {
						b.WriteString(pieces[r.IntN(len(pieces))])
					}
					b.WriteString(`"`)
				}
				b.WriteString("]")
			}
		}
		b.WriteString("}")
		bodies = append(bodies, b.String())
	}
	nulls := 0
	for _, body := range bodies {
		want := firstNullMember([]byte(body))
		if got := nullMember([]byte(body)); got != want {
			t.Fatalf("nullMember(%s) = %q, want %q", body, got, want)
		}
		if want != "" {
			nulls++
		}
	}
	if nulls < 100 {
		t.Fatalf("only %d bodies with a member null: the test would miss a scan that misses them", nulls)
	}
}
