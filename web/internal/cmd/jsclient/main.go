// Command jsclient writes the dashboard's API module from openapi.yaml:
//
//	go run ./internal/cmd/jsclient -spec ../openapi.yaml -out static/api.js
//
// It is run by `go generate ./web`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/seenapi/seenapi/web/internal/jsclient"
)

func main() {
	spec := flag.String("spec", "../openapi.yaml", "the OpenAPI document")
	out := flag.String("out", "static/api.js", "the module to write")
	flag.Parse()
	if err := run(*spec, *out); err != nil {
		fmt.Fprintln(os.Stderr, "jsclient:", err)
		os.Exit(1)
	}
}

func run(spec, out string) error {
	src, err := os.ReadFile(spec)
	if err != nil {
		return err
	}
	js, err := jsclient.Generate(src)
	if err != nil {
		return err
	}
	return os.WriteFile(out, js, 0o644)
}
