package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
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

// serviceTransport is the HTTP transport of the client commands (backup
// --url, import-redis): Go's default, which trusts the system's
// certificate authorities (and SSL_CERT_FILE), and with --ca-cert the
// authorities of that PEM file too, for a service whose certificate is
// signed by a private authority or by itself.
func serviceTransport(caFile string) (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if caFile == "" {
		return t, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-cert: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-cert %s: no PEM certificate in it", caFile)
	}
	t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return t, nil
}
