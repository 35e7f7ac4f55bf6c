package api

import (
	stdjson "encoding/json"

	"github.com/bytedance/sonic"
)

// The JSON codec of the API, wired into fiber's JSONEncoder and JSONDecoder
// and used by every handler. bytedance/sonic was chosen by
// BenchmarkDecodeFilterRequest and BenchmarkEncodeFilterResponse
// (json_timing_test.go): on the workload's 200-candidate request it decodes
// several times faster than encoding/json, with a fraction of the
// allocations, and ahead of goccy/go-json.
//
// Decoding is strict: unknown fields are an error. Decoded strings may alias
// the input bytes (sonic does not copy strings without escapes), so nothing
// decoded from a request body may be kept after the handler returns.
var (
	strictAPI = sonic.Config{DisallowUnknownFields: true}.Froze()
	encodeAPI = sonic.Config{}.Froze()
)

// decodeStrict decodes one JSON value from data into v, rejecting unknown
// fields and trailing data.
func decodeStrict(data []byte, v any) error { return strictAPI.Unmarshal(data, v) }

// encode encodes v as JSON.
func encode(v any) ([]byte, error) { return encodeAPI.Marshal(v) }

// validJSON reports whether data is syntactically valid JSON; used only on
// the error path to tell malformed JSON from a well-formed body of the wrong
// shape.
func validJSON(data []byte) bool { return stdjson.Valid(data) }
