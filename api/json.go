package api

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/bytedance/sonic"
	"github.com/bytedance/sonic/decoder"
	"github.com/bytedance/sonic/encoder"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/gofiber/fiber/v2"
)

// The JSON codec of the API, wired into fiber's JSONEncoder and JSONDecoder
// and used by every handler. bytedance/sonic was chosen by
// BenchmarkDecodeFilterRequest and BenchmarkEncodeFilterResponse
// (json_timing_test.go): on the workload's 200-candidate request it decodes
// several times faster than encoding/json, with a fraction of the
// allocations, and ahead of goccy/go-json.
//
// Decoding is strict: unknown fields are an error. decodeBody's strings
// alias the request body (sonic refers to strings without escapes instead
// of copying them), so nothing decoded from a request body may be kept
// after the handler returns: the hot set copies the user ids it keeps, and
// answers are encoded before the handler returns.
// An escaped lone surrogate ("\ud800") is an error too: sonic would decode
// it to U+FFFD, so different broken ids would be one item, recorded.
var strictAPI = sonic.Config{DisallowUnknownFields: true, CaseSensitive: true, UseUnicodeErrors: true}.Froze()

// encodeOpts are the encoder's options: sonic's defaults (what
// sonic.Config{} gives), for encode and sendJSON alike.
const encodeOpts encoder.Options = 0

// decodeStrict decodes one JSON value from data into v, rejecting unknown
// fields and trailing data. Its strings are copies (sonic's Unmarshal copies
// the input first): what fiber's own decoding gets.
func decodeStrict(data []byte, v any) error { return strictAPI.Unmarshal(data, v) }

// decodeBody is decodeStrict without the copy of data: v's strings alias
// data, which must stay unchanged while v is used. The handlers decode
// request bodies with it; the copy was more than half of the bytes a call
// allocated (a 200-candidate body is about 4 KB), and so of the collector's
// work.
func decodeBody(data []byte, v any) error {
	d := bodyDecoders.Get().(*decoder.Decoder)
	d.Reset(unsafe.String(unsafe.SliceData(data), len(data)))
	d.SetOptions(bodyDecoderOpts)
	err := d.Decode(v)
	if err == nil {
		err = d.CheckTrailings()
	}
	d.Reset("") // the pool keeps no body alive
	bodyDecoders.Put(d)
	return err
}

// bodyDecoders recycles decodeBody's decoders: strictAPI.UnmarshalFromString
// allocates one a call, and what a call allocates is what paces the
// collector, whose cycles make the tail of the latency.
var bodyDecoders = sync.Pool{New: func() any { return decoder.NewDecoder("") }}

// bodyDecoderOpts are strictAPI's decoding options (TestDecodeBodyIsStrictAPI).
const bodyDecoderOpts = decoder.OptionDisableUnknown | decoder.OptionCaseSensitive | decoder.OptionUseUnicodeErrors

// encode encodes v as JSON.
func encode(v any) ([]byte, error) { return encoder.Encode(v, encodeOpts) }

// jsonBufs recycles sendJSON's buffers.
var jsonBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledJSON bounds the buffers jsonBufs keeps: an answer of the most
// candidates of the longest ids should not stay allocated.
const maxPooledJSON = 64 << 10

// sendJSON answers v as JSON, as c.JSON does, but encodes into a recycled
// buffer: c.JSON's encoding allocates a buffer for every answer that the
// response then copies, and on the one call's route that was an eighth of
// what a loaded server allocated.
func sendJSON(c *fiber.Ctx, v any) error {
	bp := jsonBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledJSON {
			*bp = (*bp)[:0]
			jsonBufs.Put(bp)
		}
	}()
	if err := encoder.EncodeInto(bp, v, encodeOpts); err != nil {
		return err
	}
	c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
	c.Response().SetBody(*bp) // copies
	return nil
}

// validJSON reports whether data is syntactically valid JSON; used only on
// the error path to tell malformed JSON from a well-formed body of the wrong
// shape.
func validJSON(data []byte) bool { return stdjson.Valid(data) }

// syntaxDetail says what is wrong with data, which validJSON refused, and
// at which byte: the caller finds a truncated body or a stray byte order
// mark without guessing. Error path only (it decodes data again).
func syntaxDetail(data []byte) string {
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return "it starts with a byte order mark (EF BB BF), which JSON does not take"
	}
	err := stdjson.Unmarshal(data, new(any))
	se := (*stdjson.SyntaxError)(nil)
	switch {
	case errors.As(err, &se) && strings.HasPrefix(se.Error(), "unexpected end"):
		return fmt.Sprintf("%v: it ends after byte %d", se, len(data))
	case se != nil:
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	case err != nil:
		return err.Error()
	}
	return "not JSON"
}

// nullMember returns the JSON pointer of the first member of an object in
// body, which decoded, whose value is null, or "" if there is none. The
// decoders take a null for the zero value, so a body that holds the
// literal is read again, token by token; the others, nearly all, cost a
// scan for it (see mayHoldNullMember).
func nullMember(body []byte) string {
	if !mayHoldNullMember(body) {
		return ""
	}
	return firstNullMember(body)
}

// firstNullMember is nullMember without the scan: it reads body token by
// token.
func firstNullMember(body []byte) string {
	return firstNull(body, func(d *jsontext.Decoder) bool {
		k, _ := d.StackIndex(d.StackDepth())
		return k == '{'
	})
}

// isNull reports whether the value at the JSON pointer ptr of body is
// null: the decoders take a null array element for the zero value too.
// It reads body token by token (error path only).
func isNull(body []byte, ptr string) bool {
	return firstNull(body, func(d *jsontext.Decoder) bool { return string(d.StackPointer()) == ptr }) != ""
}

// firstNull returns the JSON pointer of the first null of body for which
// at, given the decoder just past it, holds, or "" if there is none.
func firstNull(body []byte, at func(d *jsontext.Decoder) bool) string {
	d := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		tok, err := d.ReadToken()
		if err != nil {
			return ""
		}
		if tok.Kind() == 'n' && at(d) {
			return string(d.StackPointer())
		}
	}
}

// mayHoldNullMember reports whether body may have a member whose value is
// null: false means it has none. Such a value follows a colon and JSON
// whitespace (member = string ws ':' ws value), and a call's body has a
// handful of colons where its items bring an n every few dozen bytes, so
// it looks at what follows each colon. In BenchmarkNullMember (ten runs,
// medians) that took 152 ns on the workload's body, where a scan for
// "null" took 817 ns. Items full of colons would make it the slower way,
// so past six colons it scans for "null" in the rest: 215 ns against 136
// on such a body.
func mayHoldNullMember(body []byte) bool {
	rest := body
	for range 6 {
		i := bytes.IndexByte(rest, ':')
		if i < 0 {
			return false
		}
		rest = bytes.TrimLeft(rest[i+1:], " \t\r\n")
		if len(rest) > 0 && rest[0] == 'n' {
			return true
		}
	}
	return bytes.Contains(rest, []byte("null"))
}

// shapeError explains why well-formed JSON did not decode into v, naming
// the member that does not fit by its JSON pointer (error path only).
// sonic's error gives a byte offset or just a field's name, and
// encoding/json's a dotted path without array indexes, matching names
// regardless of case; go-json-experiment/json (the design of Go's
// encoding/json/v2) decodes case-sensitively and reports the RFC 6901
// pointer of what it refused, so the body is decoded again with it.
func shapeError(body []byte, v any, cause error) error {
	err := jsonv2.Unmarshal(body, reflect.New(reflect.TypeOf(v).Elem()).Interface(), jsonv2.RejectUnknownMembers(true))
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) && syn.JSONPointer != "" && strings.Contains(syn.Error(), "surrogate") {
		// Valid JSON to encoding/json, which accepts a lone surrogate.
		ptr := string(syn.JSONPointer)
		detail := ptr + " is not valid UTF-8: it escapes half of a surrogate pair"
		return &apiError{kind: pBadRequest, detail: detail, cause: cause, fields: []FieldError{{Pointer: ptr, Detail: detail}}}
	}
	var se *jsonv2.SemanticError
	if !errors.As(err, &se) {
		// The decoders disagree: report sonic's first line.
		msg, _, _ := strings.Cut(cause.Error(), "\n")
		return &apiError{kind: pBadRequest, detail: "the body does not fit the request schema: " + msg, cause: cause}
	}
	ptr := string(se.JSONPointer)
	if se.Err == jsonv2.ErrUnknownName {
		return &apiError{kind: pBadRequest, detail: shortened(ptr) + " is an unknown field", cause: cause,
			fields: []FieldError{{Pointer: ptr, Detail: "unknown field"}}}
	}
	what := jsonKindName(se.JSONKind)
	if se.JSONKind == '0' && len(se.JSONValue) > 0 {
		what += " " + shortened(string(se.JSONValue)) // a number out of range, or not an integer
	}
	if ptr == "" {
		return &apiError{kind: pBadRequest, detail: "the body is a JSON " + what + "; want an object", cause: cause}
	}
	want := jsonTypeName(se.GoType)
	if f, err := strconv.ParseFloat(string(se.JSONValue), 64); se.JSONKind == '0' && want == "an integer" &&
		(err == nil || errors.Is(err, strconv.ErrRange)) && f == math.Trunc(f) {
		// A whole number refused by an integer field is out of its range
		// (1e99), or in it but written with a point or an exponent (2.0,
		// 1e2: what Python's json.dumps makes of a float), which the
		// decoder does not take for an integer.
		lo, end := intRange(se.GoType)
		switch {
		case f >= end:
			want = "an integer; this one is too large"
		case f < lo:
			want = "an integer; this one is too small"
		default:
			want = "an integer, written without a point or an exponent"
		}
	}
	detail := fmt.Sprintf("%s is a JSON %s; want %s", ptr, what, want)
	return &apiError{kind: pBadRequest, detail: detail, cause: cause, fields: []FieldError{{Pointer: ptr, Detail: detail}}}
}

// intRange returns the range of an integer type t as floats, exact
// powers of two: its least value, and the least whole number past its
// greatest.
func intRange(t reflect.Type) (lo, end float64) {
	bits := t.Bits()
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uintptr {
		return 0, math.Ldexp(1, bits)
	}
	return -math.Ldexp(1, bits-1), math.Ldexp(1, bits-1)
}

// shortened is s as a problem's detail quotes what the body holds: whole
// up to 40 bytes, else its first 40 and its length, so that a body of a
// number or a name of a megabyte is not sent back in the detail (and again
// in its errors).
func shortened(s string) string {
	const keep = 40
	if len(s) <= keep {
		return s
	}
	return strings.ToValidUTF8(s[:keep], "") + "… (" + strconv.Itoa(len(s)) + " characters)"
}

// jsonKindName names a JSON kind the way the API's details do.
func jsonKindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	}
	return k.String()
}

// jsonTypeName names a Go type the way the API documents it.
func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}
