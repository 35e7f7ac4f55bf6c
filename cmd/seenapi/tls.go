package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"sync/atomic"
)

// certificate serves the TLS certificate of --tls-cert and --tls-key, and
// reads the pair again on reload (SIGHUP), so that a renewed certificate
// is served without a restart, which would empty the hot set. A pair that
// does not load leaves the one being served in place.
type certificate struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// loadCertificate reads the pair, or says which flag to fix.
func loadCertificate(certFile, keyFile string) (*certificate, error) {
	c := &certificate{certFile: certFile, keyFile: keyFile}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload reads the pair again; on error the one served stays.
func (c *certificate) reload() error {
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cur.Store(&pair)
	return nil
}

// config is the server's TLS configuration: TLS 1.2 at least (Go's
// default cipher suites), HTTP/1.1, the certificate read at each
// handshake from what reload last loaded.
func (c *certificate) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.cur.Load(), nil
		},
	}
}

// errTLSPair refuses one of --tls-cert and --tls-key without the other.
var errTLSPair = errors.New("--tls-cert and --tls-key go together: give both (TLS) or neither (plain HTTP)")
