package api

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/bytedance/sonic"
	"github.com/bytedance/sonic/encoder"
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
var strictAPI = sonic.Config{DisallowUnknownFields: true, CaseSensitive: true}.Froze()

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
	return strictAPI.UnmarshalFromString(unsafe.String(unsafe.SliceData(data), len(data)), v)
}

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

// shapeError explains why well-formed JSON did not decode into v, naming
// the first member that does not fit by its JSON pointer (error path only).
// Neither decoder's error names it: sonic gives an offset or just the
// field's name, encoding/json a dotted path without array indexes and
// fields matched regardless of case. So the body is walked again against
// v's type, the pointer kept as it goes.
func shapeError(body []byte, v any, cause error) error {
	d := stdjson.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	m, err := misfitIn(d, reflect.TypeOf(v).Elem(), "")
	switch {
	case err != nil || m == nil:
		// The walk found nothing sonic refused: report sonic's first line.
		msg, _, _ := strings.Cut(cause.Error(), "\n")
		return &apiError{kind: pBadRequest, detail: "the body does not fit the request schema: " + msg, cause: cause}
	case m.pointer == "":
		return &apiError{kind: pBadRequest, detail: "the body is a JSON " + m.value + "; want an object", cause: cause}
	case m.want == "":
		return &apiError{kind: pBadRequest, detail: m.pointer + " is an unknown field", cause: cause,
			fields: []FieldError{{Pointer: m.pointer, Detail: "unknown field"}}}
	}
	detail := fmt.Sprintf("%s is a JSON %s; want %s", m.pointer, m.value, m.want)
	return &apiError{kind: pBadRequest, detail: detail, cause: cause,
		fields: []FieldError{{Pointer: m.pointer, Detail: detail}}}
}

// misfit is a member of a body that does not fit the type it decodes into:
// its JSON pointer, what it is (value) and what it should be (want), or an
// unknown field (want "").
type misfit struct{ pointer, value, want string }

// misfitIn reads the next value from d and returns the first member of it,
// in body order, that does not decode into t with the API's strict rules
// (field names matched exactly, unknown fields refused, integers in range),
// or nil if it fits. ptr is the value's JSON pointer. The error is d's.
func misfitIn(d *stdjson.Decoder, t reflect.Type, ptr string) (*misfit, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	wrong := func(value string) (*misfit, error) {
		return &misfit{pointer: ptr, value: value, want: jsonTypeName(t)}, nil
	}
	if t.Kind() == reflect.Interface {
		return nil, skipRest(d, tok)
	}
	switch tok := tok.(type) {
	case nil:
		return nil, nil // null leaves the member as it is, as both decoders do
	case bool:
		if t.Kind() != reflect.Bool {
			return wrong("bool")
		}
	case string:
		if t.Kind() != reflect.String {
			return wrong("string")
		}
	case stdjson.Number:
		if !numberFits(tok, t) {
			if isNumberKind(t.Kind()) {
				return wrong("number " + tok.String())
			}
			return wrong("number")
		}
	case stdjson.Delim:
		switch {
		case tok == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			for i := 0; d.More(); i++ {
				if m, err := misfitIn(d, t.Elem(), ptr+"/"+strconv.Itoa(i)); m != nil || err != nil {
					return m, err
				}
			}
		case tok == '{' && (t.Kind() == reflect.Struct || t.Kind() == reflect.Map && t.Key().Kind() == reflect.String):
			for d.More() {
				key, err := d.Token()
				if err != nil {
					return nil, err
				}
				name, _ := key.(string)
				at := ptr + "/" + escapePointer(name)
				var ft reflect.Type
				if t.Kind() == reflect.Map {
					ft = t.Elem()
				} else if ft = jsonField(t, name); ft == nil {
					return &misfit{pointer: at}, nil
				}
				if m, err := misfitIn(d, ft, at); m != nil || err != nil {
					return m, err
				}
			}
		case tok == '[':
			return wrong("array")
		default:
			return wrong("object")
		}
		_, err := d.Token() // the closing delimiter
		return nil, err
	}
	return nil, nil
}

// jsonField returns the type of t's field named name in JSON (exactly: the
// API's decoding is case-sensitive), or nil if t has none.
func jsonField(t reflect.Type, name string) reflect.Type {
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f.Type
		}
	}
	return nil
}

// skipRest reads the rest of the value that began with tok.
func skipRest(d *stdjson.Decoder, tok stdjson.Token) error {
	if tok != stdjson.Delim('[') && tok != stdjson.Delim('{') {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		switch tok {
		case stdjson.Delim('['), stdjson.Delim('{'):
			depth++
		case stdjson.Delim(']'), stdjson.Delim('}'):
			depth--
		}
	}
	return nil
}

// escapePointer escapes a member name for a JSON pointer (RFC 6901).
func escapePointer(name string) string {
	if !strings.ContainsAny(name, "~/") {
		return name
	}
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}

func isNumberKind(k reflect.Kind) bool {
	return k >= reflect.Int && k <= reflect.Uint64 || k == reflect.Float32 || k == reflect.Float64
}

// numberFits reports whether n decodes into a t: an integer in range for
// an integer type, a float in range for a float type.
func numberFits(n stdjson.Number, t reflect.Type) bool {
	switch k := t.Kind(); {
	case k >= reflect.Int && k <= reflect.Int64:
		i, err := strconv.ParseInt(string(n), 10, 64)
		return err == nil && !reflect.Zero(t).OverflowInt(i)
	case k >= reflect.Uint && k <= reflect.Uint64:
		u, err := strconv.ParseUint(string(n), 10, 64)
		return err == nil && !reflect.Zero(t).OverflowUint(u)
	case k == reflect.Float32 || k == reflect.Float64:
		f, err := strconv.ParseFloat(string(n), t.Bits())
		return err == nil && !reflect.Zero(t).OverflowFloat(f)
	}
	return false
}

// jsonTypeName names a Go type the way the API documents it.
func jsonTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}
