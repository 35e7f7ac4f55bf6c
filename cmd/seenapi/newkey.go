package main

import (
	"crypto/rand"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/seenapi/seenapi/api"
)

// newKeyOptions are the flags of new-key.
type newKeyOptions struct {
	role       string
	namespaces string
	key        api.Key // made by check
}

// check makes the key, checked as the service checks a keys file's.
func (o *newKeyOptions) check() error {
	role, err := api.ParseRole(o.role)
	if err != nil {
		return fmt.Errorf("--role: %w", err)
	}
	// 26 characters of base 32 from crypto/rand: 130 bits.
	o.key = api.Key{Role: role, Secret: rand.Text()}
	if o.namespaces != "" {
		o.key.Namespaces = strings.Split(o.namespaces, ",")
		slices.Sort(o.key.Namespaces)
	}
	if err := o.key.Validate(); err != nil {
		return fmt.Errorf("--limit-namespaces %s: %w", o.namespaces, err)
	}
	return nil
}

// write writes the key as a keys file's line to w, after a comment naming
// it by its id.
func (o *newKeyOptions) write(w io.Writer, now time.Time) error {
	line := o.key.Role.String() + ":" + o.key.Secret
	if o.key.Namespaces != nil {
		line += " namespaces=" + strings.Join(o.key.Namespaces, ",")
	}
	_, err := fmt.Fprintf(w, "# key %s (%s), made %s\n%s\n", o.key.ID(), o.key.Role, now.UTC().Format(time.DateOnly), line)
	return err
}
