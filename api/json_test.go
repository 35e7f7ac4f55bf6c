package api

import (
	"reflect"
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
