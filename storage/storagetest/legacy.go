package storagetest

import (
	"testing"

	"github.com/seenapi/seenapi/userfilter"
)

// NoHistory returns the encoding of a filter of profile p that never
// recorded an item: what earlier builds stored for a user made by an
// import of such a filter, and what an import of one sends today.
func NoHistory(t testing.TB, p userfilter.Profile) []byte {
	t.Helper()
	f, err := userfilter.New(p)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
