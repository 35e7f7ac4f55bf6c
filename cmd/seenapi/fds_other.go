//go:build !unix

package main

// descriptorLimit is known on Unix only.
func descriptorLimit() uint64 { return 0 }
