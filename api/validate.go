package api

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/seenapi/seenapi/userfilter"
)

// textProblem returns why s is not a valid user id or item of at most max
// bytes, or "" if it is: it must be 1 to max bytes of valid UTF-8 without
// control characters (C0, DEL, C1).
func textProblem(s string, max int) string {
	if len(s) == 0 {
		return "is empty or null" // a JSON null decodes as ""
	}
	if len(s) > max {
		return "is " + strconv.Itoa(len(s)) + " bytes; at most " + strconv.Itoa(max)
	}
	// Fast path over the printable ASCII that ids nearly always are.
	i := printablePrefix(unsafe.Slice(unsafe.StringData(s), len(s))) // read only
	for i < len(s) {
		b := s[i]
		if b < utf8.RuneSelf {
			if b < 0x20 || b == 0x7f {
				return "contains a control character"
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return "is not valid UTF-8"
		}
		if unicode.IsControl(r) {
			return "contains a control character"
		}
		i += size
	}
	return ""
}

// notPrintableASCII reports whether any of the eight bytes in w is not
// printable ASCII: 0x80 or above, below 0x20, or DEL (bit tricks from
// "Bit Twiddling Hacks": a byte's high bit survives (b - c) & ^b only where
// b < c, for bytes below 0x80).
func notPrintableASCII(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	del := w ^ (0x7f * ones)
	return (w|(w-0x20*ones)|(del-ones)&^del)&highs != 0
}

// validNamespaceName reports whether s matches [a-z0-9_-]{1,64}.
func validNamespaceName(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '_' || b == '-') {
			return false
		}
	}
	return true
}

// namespace returns the {ns} parameter after checking it names a configured
// namespace. The string aliases the request.
func (s *Server) namespace(c *fiber.Ctx) (string, error) {
	ns, err := namespaceName(c)
	if err != nil {
		return "", err
	}
	if _, ok := s.hot.Namespace(ns); !ok {
		return "", newError(pUnknownNamespace, "namespace %q is not served; GET /v1/namespaces lists those that are, and in not_served those with users stored", ns)
	}
	return ns, nil
}

// namespaceName returns the {ns} parameter after checking its form, served
// or not.
func namespaceName(c *fiber.Ctx) (string, error) {
	ns := c.Params("ns")
	if !validNamespaceName(ns) {
		return "", fieldError(pBadRequest, "", "ns", "a namespace name matches [a-z0-9_-]{1,64}")
	}
	return ns, nil
}

// user returns the percent-decoded {user} parameter after validating it.
// The string may alias the request.
func (s *Server) user(c *fiber.Ctx) (string, error) {
	raw := c.Params("user")
	u := raw
	if strings.IndexByte(raw, '%') >= 0 {
		var err error
		if u, err = url.PathUnescape(raw); err != nil {
			return "", fieldError(pBadRequest, "", "user", "the user id is not validly percent-encoded")
		}
	}
	if p := s.userProblem(u); p != "" {
		return "", fieldError(pBadRequest, "", "user", p)
	}
	return u, nil
}

// userProblem returns why u cannot be a user id, or "" if it can. The path
// parameter and the batch's user field are both checked by it, so that a
// user the batch stores can be read, exported and erased by its path.
func (s *Server) userProblem(u string) string {
	if p := textProblem(u, s.cfg.MaxUserBytes); p != "" {
		return "the user id " + p
	}
	if u == "." || u == ".." {
		// Clients resolve these path segments away; refuse them everywhere.
		return `the user ids "." and ".." cannot be used in a path`
	}
	return ""
}

// jsonBody returns the request body of a JSON route after checking its size
// and encoding. It aliases the request buffer.
func (s *Server) jsonBody(c *fiber.Ctx) ([]byte, error) {
	if err := checkEncoding(c); err != nil {
		return nil, err
	}
	if ct := c.Request().Header.ContentType(); !jsonMediaType(ct) {
		return nil, unsupportedMediaType(ct)
	}
	body := c.Request().Body()
	if len(body) > s.cfg.MaxBodyBytes {
		return nil, bodyTooLarge(len(body), s.cfg.MaxBodyBytes)
	}
	return body, nil
}

// jsonMediaType reports whether the Content-Type ct names JSON:
// application/json or application/*+json, any case, with any parameters
// but a charset other than UTF-8 (foreignCharset). A body without a
// Content-Type is not taken for JSON (RFC 9110, 8.3: the recipient may take
// it for application/octet-stream), nor is a form or text: curl sends
// application/x-www-form-urlencoded unless told otherwise, and a browser's
// page of any site may send text/plain without asking first. No
// allocation: it runs on every call.
func jsonMediaType(ct []byte) bool {
	typ, params := ct, []byte(nil)
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		typ, params = ct[:i], ct[i+1:]
	}
	typ = bytes.TrimSpace(typ)
	const app, suffix = "application/", "+json"
	if len(typ) <= len(app) || !bytes.EqualFold(typ[:len(app)], []byte(app)) {
		return false
	}
	sub := typ[len(app):]
	return (bytes.EqualFold(sub, []byte("json")) ||
		len(sub) > len(suffix) && bytes.EqualFold(sub[len(sub)-len(suffix):], []byte(suffix))) &&
		foreignCharset(params) == nil
}

// foreignCharset returns the value, as sent, of the first charset
// parameter among a media type's parameters (what follows its first ';')
// that does not name UTF-8, in any case, quoted or not; nil if there is
// none. JSON is UTF-8 (RFC 8259, 8.1): a body its sender says is in
// another charset would be read as UTF-8 all the same, and its non-ASCII
// ids recorded as other ids than the sender meant. Parameters are
// name=value pairs split by ';' with optional white space around them,
// a value a token or a quoted string (RFC 9110, 5.6.6), which may hold
// a ';'. No allocation: it runs on every call.
func foreignCharset(params []byte) []byte {
	for len(params) > 0 {
		params = bytes.TrimLeft(params, " \t;")
		name := params
		if i := bytes.IndexAny(params, "=;"); i >= 0 {
			name, params = params[:i], params[i:]
		} else {
			params = nil
		}
		if len(params) == 0 || params[0] != '=' {
			continue // a parameter without a value names no charset
		}
		params = bytes.TrimLeft(params[1:], " \t")
		var value []byte
		if len(params) > 0 && params[0] == '"' {
			end := quotedEnd(params)
			value, params = params[:end], params[end:]
		} else {
			end := bytes.IndexByte(params, ';')
			if end < 0 {
				end = len(params)
			}
			value, params = bytes.TrimRight(params[:end], " \t"), params[end:]
		}
		if bytes.EqualFold(bytes.TrimRight(name, " \t"), []byte("charset")) && !isUTF8Name(value) {
			return value
		}
	}
	return nil
}

// quotedEnd returns the length of the quoted string that s begins with,
// its quotes included, or len(s) if it is not closed.
func quotedEnd(s []byte) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(s)
}

// isUTF8Name reports whether a charset parameter's value v, a token or a
// quoted string, names UTF-8 in any case: utf-8, or utf8, which is no
// registered name but what some client libraries send, and means nothing
// else.
func isUTF8Name(v []byte) bool {
	if len(v) > 0 && v[0] == '"' {
		var name [len("utf-8")]byte
		n := 0
		for i := 1; ; i++ {
			if i == len(v) {
				return false // not closed
			}
			c := v[i]
			if c == '"' {
				if i != len(v)-1 {
					return false
				}
				break
			}
			if c == '\\' {
				if i++; i == len(v) {
					return false
				}
				c = v[i]
			}
			if n == len(name) {
				return false
			}
			name[n] = c
			n++
		}
		v = name[:n]
	}
	return bytes.EqualFold(v, []byte("utf-8")) || bytes.EqualFold(v, []byte("utf8"))
}

// unsupportedMediaType is the problem of a JSON route's body sent as ct.
func unsupportedMediaType(ct []byte) error {
	if len(ct) == 0 {
		return fieldError(pUnsupportedMediaType, "", fiber.HeaderContentType,
			"the body was sent with no Content-Type; this route takes JSON: send Content-Type: application/json")
	}
	sent := "the body was sent with Content-Type " + strconv.Quote(strings.ToValidUTF8(string(ct), "\uFFFD"))
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		if cs := foreignCharset(ct[i+1:]); cs != nil {
			return fieldError(pUnsupportedMediaType, "", fiber.HeaderContentType, sent+", in charset "+
				strconv.Quote(strings.ToValidUTF8(string(cs), "\uFFFD"))+"; JSON is UTF-8 (RFC 8259, 8.1): "+
				"encode the body in UTF-8 and send Content-Type: application/json (charset=utf-8 or no charset)")
		}
	}
	return fieldError(pUnsupportedMediaType, "", fiber.HeaderContentType,
		sent+"; this route takes JSON: send Content-Type: application/json")
}

// checkEncoding refuses compressed bodies: decompressing them would let a
// small body bypass the size limit. The refusal is the one RFC 9110 asks
// for a content coding the server does not take: 415, with
// Accept-Encoding naming the one it takes (15.5.16 and 12.5.3), which
// tells a client that can send the body uncompressed to do so (a 400 told
// it its request was wrong, not how).
func checkEncoding(c *fiber.Ctx) error {
	if ce := c.Get(fiber.HeaderContentEncoding); refusedCoding(ce) {
		c.Set(fiber.HeaderAcceptEncoding, "identity")
		return fieldError(pUnsupportedMediaType, "", fiber.HeaderContentEncoding, "the body was sent with Content-Encoding "+
			strconv.Quote(strings.ToValidUTF8(ce, "\uFFFD"))+"; the service takes request bodies uncompressed: send them without Content-Encoding")
	}
	return nil
}

// refusedCoding reports whether a body sent with Content-Encoding ce is
// refused (checkEncoding): any coding but identity.
func refusedCoding(ce string) bool { return ce != "" && !strings.EqualFold(ce, "identity") }

// typeRefused reports whether the body of the request of header h is
// refused for its type (415) by its route, if that route reads one:
// compressed (checkEncoding), or other than JSON (jsonBody) unless it is
// an import (imp), which takes any type.
func typeRefused(h *fasthttp.RequestHeader, imp bool) bool {
	return refusedCoding(string(h.Peek(fiber.HeaderContentEncoding))) || !imp && !jsonMediaType(h.ContentType())
}

// decode decodes a JSON body strictly into v and maps failures to problems:
// malformed JSON is invalid-json; well-formed JSON of the wrong shape (wrong
// types, unknown fields, not an object) is bad-request. v's strings alias
// body (see decodeBody).
func decode(body []byte, v any) error {
	err := decodeBody(body, v)
	if err == nil {
		// null decodes into any object as nothing: the checks after would
		// blame a missing member instead of the body.
		if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == 'n' {
			return newError(pBadRequest, "the body is null; it must be a JSON object")
		}
		// So does a member's null: "limit": null would be served as no
		// limit, "record": null as returned, though openapi.yaml gives
		// no member null.
		if ptr := nullMember(body); ptr != "" {
			if requiredMember(ptr) {
				// Left out it is refused too: no default to point to. A Go
				// client's nil slice is sent so.
				return fieldError(pBadRequest, ptr, "", ptr+" is null; the member is required: give it a value")
			}
			return fieldError(pBadRequest, ptr, "", ptr+" is null; leave the member out for its default, or give it a value")
		}
		return nil
	}
	if len(body) == 0 {
		return newError(pInvalidJSON, "the body is empty; it must be a JSON object")
	}
	if !validJSON(body) {
		return &apiError{kind: pInvalidJSON, detail: "the body is not valid JSON: " + syntaxDetail(body), cause: err}
	}
	return shapeError(body, v, err)
}

// requiredMember reports whether the member at ptr is one openapi.yaml
// requires in every body that has it: the items of /seen, /check and
// DELETE /items, the one call's candidates, and the batch's requests and
// each one's user and candidates.
func requiredMember(ptr string) bool {
	switch ptr[strings.LastIndexByte(ptr, '/')+1:] {
	case "items", "candidates", "requests", "user":
		return true
	}
	return false
}

// bodyTooLarge is the problem of a body of n bytes where a route takes at
// most limit.
func bodyTooLarge(n, limit int) error {
	return newError(pBodyTooLarge, "the body is %d bytes; at most %d", n, limit)
}

// printablePrefix returns how many leading bytes of b are printable ASCII
// (0x20 to 0x7e), eight at a time while it can.
func printablePrefix(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if notPrintableASCII(binary.LittleEndian.Uint64(b[i:])) {
			break
		}
	}
	for i < len(b) && b[i] >= 0x20 && b[i] < 0x7f {
		i++
	}
	return i
}

// printableASCII reports whether b is all printable ASCII.
func printableASCII(b []byte) bool { return printablePrefix(b) == len(b) }

// offsetIn returns where s's bytes start inside b, or -1 if they are not a
// piece of b (a string decoded from b without escapes is: decodeBody
// aliases those).
func offsetIn(s string, b []byte) int {
	if len(s) == 0 || len(s) > len(b) {
		return -1
	}
	p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < lo || p-lo > uintptr(len(b)-len(s)) {
		return -1
	}
	return int(p - lo)
}

// within reports whether s's bytes lie inside b.
func within(s string, b []byte) bool { return offsetIn(s, b) >= 0 }

// items validates a list of items (candidates) at pointer, decoded from
// body. The part of the body that holds the items which are pieces of it
// is checked once: when it is printable ASCII, those items are too and need
// their length checked only (an item with escapes, decoded into memory of
// its own, is checked in full). Only that part is read, so a batch reads
// its body about once, not once per user.
func (s *Server) items(items []string, pointer string, body []byte) error {
	if len(items) == 0 {
		return fieldError(pBadRequest, pointer, "", "at least one item is required")
	}
	if len(items) > s.cfg.MaxCandidates {
		return &apiError{kind: pTooManyCandidates,
			detail: fmt.Sprintf("%d items; at most %d per call", len(items), s.cfg.MaxCandidates),
			fields: []FieldError{{Pointer: pointer, Detail: fmt.Sprintf("at most %d items", s.cfg.MaxCandidates)}}}
	}
	// Decoded in order, the items lie in the body in order: the part runs
	// from the first one in it to the end of the last one. An item outside
	// that part, whatever the order, is checked in full.
	lo, hi := -1, -1
	for _, it := range items {
		if lo = offsetIn(it, body); lo >= 0 {
			break
		}
	}
	for j := len(items) - 1; j >= 0 && lo >= 0; j-- {
		if off := offsetIn(items[j], body); off >= 0 {
			hi = off + len(items[j])
			break
		}
	}
	var clean []byte // the part, if it is printable ASCII
	if lo >= 0 && lo < hi && printableASCII(body[lo:hi]) {
		clean = body[lo:hi]
	}
	for i, it := range items {
		if len(it) <= s.cfg.MaxItemBytes && within(it, clean) {
			continue
		}
		if p := textProblem(it, s.cfg.MaxItemBytes); p != "" {
			kind := pBadRequest
			if len(it) > s.cfg.MaxItemBytes {
				kind = pItemTooLong
			}
			ptr := pointer + "/" + strconv.Itoa(i)
			return &apiError{kind: kind, detail: "item " + ptr + " " + p,
				fields: []FieldError{{Pointer: ptr, Detail: "the item " + p}}}
		}
	}
	return nil
}

// filterArgs are the validated arguments of one call.
type filterArgs struct {
	limit int
	mode  userfilter.Mode
	open  bool
}

// filterCall validates one call's request, decoded from body; prefix is the
// JSON pointer of the request object ("" for the body itself).
func (s *Server) filterCall(candidates []string, record string, limit int64, onError, prefix string, body []byte) (filterArgs, error) {
	var a filterArgs
	if err := s.items(candidates, prefix+"/candidates", body); err != nil {
		return a, err
	}
	mode, err := userfilter.ParseMode(record)
	if err != nil {
		return a, fieldError(pBadRequest, prefix+"/record", "", "record is returned, none or all")
	}
	if limit < 0 {
		return a, fieldError(pBadRequest, prefix+"/limit", "", "limit is an integer >= 0 (0: no limit)")
	}
	if limit > int64(len(candidates)) {
		limit = int64(len(candidates)) // the same answer, and an int on every platform
	}
	switch onError {
	case "", "fail":
	case "open":
		a.open = true
	default:
		return a, fieldError(pBadRequest, prefix+"/on_error", "", "on_error is fail or open")
	}
	a.limit, a.mode = int(limit), mode
	return a, nil
}
