package jsclient

import (
	"strings"
	"testing"
)

const head = `openapi: 3.0.3
info: {title: t, version: "1"}
security: [{key: []}]
components:
  securitySchemes:
    key: {type: http, scheme: bearer}
paths:
`

func TestOperationsReadMethodPathParamsRoleAndBody(t *testing.T) {
	doc, err := Load([]byte(head + `  /v1/ns/{ns}/users/{user}/seen:
    post:
      operationId: recordSeen
      description: Every item becomes seen. Role ` + "`write`" + `.
      requestBody:
        content:
          application/json:
            schema: {type: object}
      responses:
        '200': {description: ok}
  /healthz:
    get:
      operationId: getHealth
      security: []
      responses:
        '200': {description: ok}
`))
	if err != nil {
		t.Fatal(err)
	}
	ops, err := Operations(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []Operation{
		{ID: "getHealth", Method: "GET", Path: "/healthz", Role: "none"},
		{ID: "recordSeen", Method: "POST", Path: "/v1/ns/{ns}/users/{user}/seen", Params: []string{"ns", "user"}, Role: "write", Body: "application/json"},
	}
	if len(ops) != len(want) {
		t.Fatalf("got %d operations, want %d: %+v", len(ops), len(want), ops)
	}
	for i := range want {
		g, w := ops[i], want[i]
		if g.ID != w.ID || g.Method != w.Method || g.Path != w.Path || g.Role != w.Role || g.Body != w.Body ||
			strings.Join(g.Params, ",") != strings.Join(w.Params, ",") {
			t.Errorf("operation %d = %+v, want %+v", i, g, w)
		}
	}
}

func TestGenerateRejectsASecuredOperationWithoutARole(t *testing.T) {
	_, err := Generate([]byte(head + `  /v1/x:
    get:
      operationId: getX
      description: No role stated.
      responses:
        '200': {description: ok}
`))
	if err == nil || !strings.Contains(err.Error(), "getX") {
		t.Fatalf("Generate = %v, want an error naming getX", err)
	}
}

func TestGenerateRejectsAnOperationWithoutAnID(t *testing.T) {
	_, err := Generate([]byte(head + `  /v1/x:
    get:
      description: Role ` + "`read`" + `.
      responses:
        '200': {description: ok}
`))
	if err == nil || !strings.Contains(err.Error(), "/v1/x") {
		t.Fatalf("Generate = %v, want an error naming /v1/x", err)
	}
}

func TestGenerateWritesAFrozenTableAndTypedefs(t *testing.T) {
	spec := `openapi: 3.0.3
info: {title: t, version: "1"}
security: [{key: []}]
components:
  securitySchemes:
    key: {type: http, scheme: bearer}
  schemas:
    Thing:
      type: object
      required: [id]
      properties:
        id: {type: string, description: The id.}
        tags: {type: array, items: {type: string}}
paths:
  /v1/x:
    get:
      operationId: getX
      description: Role ` + "`read`" + `.
      responses:
        '200': {description: ok}
`
	js, err := Generate([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`getX: Object.freeze({ method: "GET", path: "/v1/x", params: [], role: "read", body: null }),`,
		` * @typedef {Object} Thing`,
		` * @property {string} id The id.`,
		` * @property {Array<string>} [tags]`,
	} {
		if !strings.Contains(string(js), want) {
			t.Errorf("generated module lacks %q:\n%s", want, js)
		}
	}
}
