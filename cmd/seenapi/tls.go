package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/seenapi/seenapi/api"
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

// warnIfExpired logs a warning when the certificate served is past its
// date at now: it loads and is served, and every client refuses it (seenapi
// check refuses it outright).
func (c *certificate) warnIfExpired(now time.Time, prefix string, logger *slog.Logger) {
	if until := c.cur.Load().Leaf.NotAfter; !now.Before(until) {
		logger.Warn(prefix+"the TLS certificate is past its date: clients will refuse it; renew --tls-cert and --tls-key and send SIGHUP",
			"cert", c.certFile, "expired", until.UTC().Format(time.RFC3339))
	}
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

// plainHTTPGuard wraps the TCP listener under TLS so that a plain HTTP
// request sent to the HTTPS port (a client given http:// by mistake) is
// answered 400 with a problem that says to use https, instead of a closed
// connection that looks like a crash. TLS itself still sees every byte.
type plainHTTPGuard struct{ net.Listener }

func (l plainHTTPGuard) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &plainHTTPConn{Conn: c}, nil
}

// plainHTTPConn looks at the first bytes the client sends: a TLS
// handshake starts with record type 22, an HTTP request with a method.
type plainHTTPConn struct {
	net.Conn
	looked bool
}

// errPlainHTTP ends a connection that sent plain HTTP to the HTTPS port.
var errPlainHTTP = errors.New("plain HTTP sent to the HTTPS port")

func (c *plainHTTPConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.looked || n == 0 {
		return n, err
	}
	c.looked = true
	if p[0] != 22 && looksLikeHTTP(p[:n]) {
		_, _ = c.Conn.Write(plainHTTPAnswer(c.Conn.LocalAddr())) // the connection ends either way
		return 0, errPlainHTTP
	}
	return n, err
}

// httpMethods are the starts of the requests plainHTTPConn answers.
var httpMethods = [][]byte{[]byte("GET "), []byte("HEAD "), []byte("POST "), []byte("PUT "),
	[]byte("DELETE "), []byte("PATCH "), []byte("OPTIONS "), []byte("CONNECT "), []byte("TRACE ")}

// looksLikeHTTP says whether b starts like an HTTP/1 request line; with
// fewer bytes than a method it says no, and TLS refuses them as before.
func looksLikeHTTP(b []byte) bool {
	for _, m := range httpMethods {
		if bytes.HasPrefix(b, m) {
			return true
		}
	}
	return false
}

// plainHTTPAnswer is the 400 problem of a plain HTTP request to the HTTPS
// port at addr, the type the API gives other malformed requests.
func plainHTTPAnswer(addr net.Addr) []byte {
	body := `{"type":"` + api.ProblemBase + `bad-request","title":"Bad request","status":400,` +
		`"detail":"this port serves HTTPS only: call https://` + addr.String() + `"}`
	return []byte("HTTP/1.1 400 Bad Request\r\nContent-Type: application/problem+json\r\n" +
		"X-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// errTLSPair refuses one of --tls-cert and --tls-key without the other.
var errTLSPair = errors.New("--tls-cert and --tls-key go together: give both (TLS) or neither (plain HTTP)")

// trustHint adds to err, when the service's certificate was signed by an
// authority the client command does not trust, how to trust it: the bare
// x509 error names no flag.
func trustHint(err error) error {
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		return fmt.Errorf("%w; to trust a certificate of your own, give its authority's PEM (or the self-signed certificate) with --ca-cert or SEENAPI_CA_CERT", err)
	}
	return err
}

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
