package api

import (
	"bytes"
	"os"
	"regexp"
	"testing"
)

func TestEmbeddedSpecIsTheContract(t *testing.T) {
	want, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(openAPISpec, want) {
		t.Fatal("api/openapi.yaml differs from openapi.yaml: run `go generate ./api`")
	}
}

func TestEveryProblemTypeIsDocumented(t *testing.T) {
	spec := string(openAPISpec)
	known := map[string]bool{}
	for _, k := range problemKinds {
		known[k.slug] = true
		if !regexp.MustCompile("`" + k.slug + "`").MatchString(spec) {
			t.Errorf("problem type %s is not listed in openapi.yaml", k.slug)
		}
	}
	for _, m := range regexp.MustCompile(`https://seenapi\.dev/problems/([a-z-]+)`).FindAllStringSubmatch(spec, -1) {
		if !known[m[1]] {
			t.Errorf("openapi.yaml shows problem type %s, which the server never answers", m[1])
		}
	}
}
