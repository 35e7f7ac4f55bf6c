package main

import (
	"runtime/debug"
	"strings"
)

// version says which build this is, from what the Go toolchain stamps into
// the binary: the module's version (a pseudo-version with the commit when
// built from a git checkout, "(devel)" when the build did not stamp it),
// the commit, its time and whether the tree had changes, and Go's version.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "seenapi (no build information)"
	}
	var vcs []string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			vcs = append([]string{"commit " + s.Value}, vcs...)
		case "vcs.time":
			vcs = append(vcs, s.Value)
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified {
		vcs = append(vcs, "with uncommitted changes")
	}
	v := "seenapi " + bi.Main.Version
	if len(vcs) > 0 {
		v += " (" + strings.Join(vcs, ", ") + ")"
	}
	return v + " " + bi.GoVersion
}
