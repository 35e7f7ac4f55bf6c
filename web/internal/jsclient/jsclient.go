// Package jsclient generates the dashboard's API module (web/static/api.js)
// from openapi.yaml: a frozen table of every operation (method, path
// template, path parameters, the role its key needs, its request body type)
// and a JSDoc typedef per component schema. The dashboard calls the API only
// through that table, so a route renamed in the contract breaks the
// dashboard's end-to-end tests instead of silently breaking the page.
//
// Generate is a pure function of the document's bytes; it is safe for
// concurrent use.
package jsclient

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// ErrSpec is returned when the document cannot be turned into a client:
// it does not load, or an operation lacks an operationId or a stated role.
var ErrSpec = errors.New("jsclient: unusable OpenAPI document")

// Roles are the key roles of the contract, lowest first; "none" is for
// operations that need no key.
var Roles = []string{"none", "read", "write", "admin"}

// roleRe finds the role an operation's description states, e.g. "Role `write`.".
var roleRe = regexp.MustCompile("Role `(read|write|admin)`")

// Operation is one row of the generated table.
type Operation struct {
	ID     string
	Method string
	Path   string
	Params []string // path parameters in path order
	Role   string   // one of Roles
	Body   string   // request media type, "" without a body
}

// Operations returns the document's operations sorted by operationId.
func Operations(doc *openapi3.T) ([]Operation, error) {
	var ops []Operation
	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		for method, op := range item.Operations() {
			if op.OperationID == "" {
				return nil, fmt.Errorf("%w: %s %s has no operationId", ErrSpec, method, path)
			}
			o := Operation{ID: op.OperationID, Method: method, Path: path, Params: pathParams(path)}
			switch m := roleRe.FindStringSubmatch(op.Description); {
			case op.Security != nil && len(*op.Security) == 0:
				o.Role = "none"
			case m != nil:
				o.Role = m[1]
			default:
				return nil, fmt.Errorf("%w: %s (%s %s) needs a key but its description states no \"Role `...`\"", ErrSpec, o.ID, method, path)
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				types := make([]string, 0, len(op.RequestBody.Value.Content))
				for t := range op.RequestBody.Value.Content {
					types = append(types, t)
				}
				slices.Sort(types)
				if len(types) > 0 {
					o.Body = types[0]
				}
			}
			ops = append(ops, o)
		}
	}
	slices.SortFunc(ops, func(a, b Operation) int { return strings.Compare(a.ID, b.ID) })
	for i := 1; i < len(ops); i++ {
		if ops[i].ID == ops[i-1].ID {
			return nil, fmt.Errorf("%w: operationId %s is used twice", ErrSpec, ops[i].ID)
		}
	}
	return ops, nil
}

var paramRe = regexp.MustCompile(`\{(\w+)\}`)

func pathParams(path string) []string {
	var out []string
	for _, m := range paramRe.FindAllStringSubmatch(path, -1) {
		out = append(out, m[1])
	}
	return out
}

// Load parses and validates an OpenAPI document.
func Load(spec []byte) (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSpec, err)
	}
	return doc, nil
}

// Generate returns the api.js module for the OpenAPI document spec.
func Generate(spec []byte) ([]byte, error) {
	doc, err := Load(spec)
	if err != nil {
		return nil, err
	}
	ops, err := Operations(doc)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("// Code generated from openapi.yaml by web/internal/cmd/jsclient. DO NOT EDIT.\n")
	b.WriteString("// Change openapi.yaml, then run `go generate ./web`; a test fails while this file is stale.\n")
	fmt.Fprintf(&b, "// Contract: %s %s.\n\n", doc.Info.Title, doc.Info.Version)

	b.WriteString("/**\n * @typedef {Object} Operation\n")
	b.WriteString(" * @property {string} method HTTP method.\n")
	b.WriteString(" * @property {string} path Path template; {name} is a path parameter, percent-encoded when filled.\n")
	b.WriteString(" * @property {string[]} params Path parameters in path order.\n")
	fmt.Fprintf(&b, " * @property {%s} role The least key role the operation needs.\n", jsUnion(Roles))
	b.WriteString(" * @property {string|null} body Request media type, null without a body.\n */\n\n")

	b.WriteString("/** Every operation of the contract, by operationId. @type {Readonly<Record<string, Operation>>} */\n")
	b.WriteString("export const operations = Object.freeze({\n")
	for _, o := range ops {
		params := make([]string, len(o.Params))
		for i, p := range o.Params {
			params[i] = strconv.Quote(p)
		}
		body := "null"
		if o.Body != "" {
			body = strconv.Quote(o.Body)
		}
		fmt.Fprintf(&b, "  %s: Object.freeze({ method: %s, path: %s, params: [%s], role: %s, body: %s }),\n",
			o.ID, strconv.Quote(o.Method), strconv.Quote(o.Path), strings.Join(params, ", "), strconv.Quote(o.Role), body)
	}
	b.WriteString("});\n\n")

	fmt.Fprintf(&b, "/** Key roles, lowest first; each implies the ones before it. */\nexport const roles = Object.freeze([%s]);\n", strings.Join(quoteAll(Roles), ", "))

	names := make([]string, 0, len(doc.Components.Schemas))
	for name := range doc.Components.Schemas {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		ref := doc.Components.Schemas[name]
		if ref == nil || ref.Value == nil {
			continue
		}
		s := ref.Value
		b.WriteString("\n/**\n")
		if d := oneLine(s.Description); d != "" {
			fmt.Fprintf(&b, " * %s\n", d)
		}
		if s.Type.Is(openapi3.TypeObject) && len(s.Properties) > 0 {
			fmt.Fprintf(&b, " * @typedef {Object} %s\n", name)
			props := make([]string, 0, len(s.Properties))
			for p := range s.Properties {
				props = append(props, p)
			}
			slices.Sort(props)
			for _, p := range props {
				pr := s.Properties[p]
				pname := p
				if !slices.Contains(s.Required, p) {
					pname = "[" + p + "]"
				}
				line := fmt.Sprintf(" * @property {%s} %s", jsType(pr), pname)
				if pr.Value != nil {
					if d := oneLine(pr.Value.Description); d != "" {
						line += " " + d
					}
				}
				b.WriteString(line + "\n")
			}
		} else {
			fmt.Fprintf(&b, " * @typedef {%s} %s\n", jsType(ref), name)
		}
		b.WriteString(" */\n")
	}
	return b.Bytes(), nil
}

// jsType is the JSDoc type of a schema.
func jsType(ref *openapi3.SchemaRef) string {
	if ref == nil || ref.Value == nil {
		return "*"
	}
	if ref.Ref != "" {
		if i := strings.LastIndex(ref.Ref, "/"); i >= 0 {
			return ref.Ref[i+1:]
		}
	}
	s := ref.Value
	var t string
	switch {
	case s.Type.Is(openapi3.TypeString) && len(s.Enum) > 0:
		vals := make([]string, 0, len(s.Enum))
		for _, v := range s.Enum {
			vals = append(vals, fmt.Sprint(v))
		}
		t = jsUnion(vals)
	case s.Type.Is(openapi3.TypeString):
		t = "string"
	case s.Type.Is(openapi3.TypeInteger), s.Type.Is(openapi3.TypeNumber):
		t = "number"
	case s.Type.Is(openapi3.TypeBoolean):
		t = "boolean"
	case s.Type.Is(openapi3.TypeArray):
		t = "Array<" + jsType(s.Items) + ">"
	case s.Type.Is(openapi3.TypeObject) && s.AdditionalProperties.Schema != nil && len(s.Properties) == 0:
		t = "Object<string, " + jsType(s.AdditionalProperties.Schema) + ">"
	case s.Type.Is(openapi3.TypeObject):
		t = "Object"
	default:
		t = "*"
	}
	if s.Nullable {
		t += "|null"
	}
	return t
}

func jsUnion(vals []string) string {
	return "(" + strings.Join(quoteAll(vals), "|") + ")"
}

func quoteAll(vals []string) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = strconv.Quote(v)
	}
	return out
}

// oneLine folds a description into one comment-safe line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "*/", "* /")
}
