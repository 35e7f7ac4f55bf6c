package api

import (
	_ "embed"
	"strconv"
)

// openAPISpec is openapi.yaml, served at /openapi.yaml. api/openapi.yaml is
// a copy of the top-level contract (embed cannot reach a parent directory);
// go generate refreshes it and a test fails when the two differ.
//
//go:generate cp ../openapi.yaml openapi.yaml
//go:embed openapi.yaml
var openAPISpec []byte

func itoa(i int) string { return strconv.Itoa(i) }
