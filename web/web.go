package web

//go:generate go run ./internal/cmd/jsclient -spec ../openapi.yaml -out static/api.js

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// FS returns the dashboard's files, rooted so that index.html is at its top.
func FS() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return sub
}
