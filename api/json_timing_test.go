package api

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/bytedance/sonic"
	goccy "github.com/goccy/go-json"
)

// feedRequest is the workload's request body: 200 candidates of 8 to 24
// bytes, limit 20, record returned.
func feedRequest(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	c := make([]string, n)
	for i := range c {
		c[i] = fmt.Sprintf("i:%0*x", 6+r.IntN(17), r.Uint64())
	}
	b, err := stdjson.Marshal(map[string]any{"candidates": c, "limit": 20, "record": "returned"})
	if err != nil {
		panic(err)
	}
	return b
}

// jsonDecoders are the strict decoders compared; each rejects unknown fields.
var jsonDecoders = []struct {
	name   string
	decode func([]byte, any) error
}{
	{"encoding_json", func(b []byte, v any) error {
		d := stdjson.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		return d.Decode(v)
	}},
	{"goccy_go_json", func(b []byte, v any) error {
		d := goccy.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		return d.Decode(v)
	}},
	// Not strict (goccy rejects unknown fields only in its stream decoder):
	// shown as the floor of what goccy could do with a separate check.
	{"goccy_go_json_lax", func(b []byte, v any) error { return goccy.Unmarshal(b, v) }},
	{"sonic", sonic.Config{DisallowUnknownFields: true}.Froze().Unmarshal},
	{"seenapi_codec", decodeStrict},
	{"seenapi_body", decodeBody},
}

func BenchmarkDecodeFilterRequest(b *testing.B) {
	for _, n := range []int{200, 2000, 10000} {
		body := feedRequest(n)
		for _, d := range jsonDecoders {
			b.Run(fmt.Sprintf("%s/candidates=%d", d.name, n), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					var req filterRequest
					if err := d.decode(body, &req); err != nil {
						b.Fatal(err)
					}
					if len(req.Candidates) != n {
						b.Fatalf("decoded %d candidates, want %d", len(req.Candidates), n)
					}
				}
			})
		}
	}
}

func BenchmarkEncodeFilterResponse(b *testing.B) {
	var req filterRequest
	if err := stdjson.Unmarshal(feedRequest(200), &req); err != nil {
		b.Fatal(err)
	}
	resp := filterResponse{Unseen: req.Candidates[:20], SeenCount: 143, Recorded: 20}
	encoders := []struct {
		name   string
		encode func(any) ([]byte, error)
	}{
		{"encoding_json", stdjson.Marshal},
		{"goccy_go_json", goccy.Marshal},
		{"sonic", sonic.ConfigDefault.Marshal},
		{"seenapi_codec", encode},
	}
	for _, e := range encoders {
		b.Run(e.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.encode(&resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNullMember is the scan every decoded body pays for a member's
// null (mayHoldNullMember), against a scan for "null" (contains), on the
// workload's body, whose items are base-36 strings, and on one whose items
// are full of colons.
func BenchmarkNullMember(b *testing.B) {
	for _, body := range []struct {
		name string
		b    []byte
	}{{"workload", workloadBodyForTest(b)}, {"colons", feedRequest(200)}} {
		b.Run(body.name+"/scan", func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				if mayHoldNullMember(body.b) {
					b.Fatal("a member null in a body without one")
				}
			}
		})
		b.Run(body.name+"/contains", func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				if bytes.Contains(body.b, []byte("null")) {
					b.Fatal("null in a body without one")
				}
			}
		})
	}
}

// workloadBodyForTest is a call's body as the workload makes it: 200
// base-36 items of 8 to 12 bytes.
func workloadBodyForTest(b *testing.B) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	base36 := make([]string, 200)
	for i := range base36 {
		base36[i] = strconv.FormatUint(r.Uint64(), 36)[:8+r.IntN(5)]
	}
	workload, err := stdjson.Marshal(map[string]any{"candidates": base36, "limit": 20, "record": "returned"})
	if err != nil {
		b.Fatal(err)
	}
	return workload
}
