package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
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

// schemeGuard wraps the TCP listener so that a client speaking the other
// protocol than the port's answers at once with an HTTP 400 that says which
// URL to call, instead of a closed connection that looks like a crash or
// a wait until a timeout: plain HTTP sent to the HTTPS port (a client
// given http:// by mistake), or a TLS handshake sent to the plain HTTP port
// (given https://), which an HTTP server would otherwise read as the start
// of a request line until --read-timeout. Go's clients report that answer
// to a handshake as http.ErrSchemeMismatch. The server itself still sees
// every byte of the other connections.
type schemeGuard struct {
	net.Listener
	https bool // the port serves HTTPS
}

func (l schemeGuard) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &schemeConn{Conn: c, https: l.https}, nil
}

// schemeConn looks at the first bytes the client sends: a TLS handshake
// starts with record type 22, an HTTP request with a method.
type schemeConn struct {
	net.Conn
	https  bool
	looked bool
}

// NetConn returns the connection c wraps, as tls.Conn's NetConn does: a
// backup's answer watches the socket underneath (what its client has
// acknowledged), which the wrapper would hide.
func (c *schemeConn) NetConn() net.Conn { return c.Conn }

// errWrongScheme ends a connection that spoke the other protocol.
var errWrongScheme = errors.New("plain HTTP sent to the HTTPS port, or TLS to the plain HTTP port")

func (c *schemeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.looked || n == 0 {
		return n, err
	}
	c.looked = true
	var answer []byte
	switch {
	case c.https && p[0] != 22 && looksLikeHTTP(p[:n]):
		answer = wrongSchemeAnswer("this port serves HTTPS only: call https://" + c.Conn.LocalAddr().String())
	case !c.https && p[0] == 22:
		answer = wrongSchemeAnswer("this port serves plain HTTP, not HTTPS: call http://" + c.Conn.LocalAddr().String())
	}
	if answer != nil {
		_, _ = c.Conn.Write(answer) // the connection ends either way
		return 0, errWrongScheme
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

// wrongSchemeAnswer is the 400 problem saying detail to a client that
// spoke the other protocol, the type the API gives other malformed
// requests, with the Date every answer carries (RFC 9110, 6.6.1).
func wrongSchemeAnswer(detail string) []byte {
	body := `{"type":"` + api.ProblemBase + `bad-request","title":"Bad request","status":400,` +
		`"detail":"` + detail + `"}`
	return []byte("HTTP/1.1 400 Bad Request\r\nDate: " + time.Now().UTC().Format(http.TimeFormat) +
		"\r\nContent-Type: application/problem+json\r\n" +
		api.RawAnswerHeaders + "Connection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
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

// watchHandshake is ctx with a trace that notes a TLS handshake that
// fails, and failed, which says whether one did: the error of a
// handshake ended by the server (a reset, an EOF) names no TLS.
func watchHandshake(ctx context.Context) (traced context.Context, failed func() bool) {
	var bad atomic.Bool
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			if err != nil {
				bad.Store(true)
			}
		},
	}), bad.Load
}

// schemeHint adds to err of calling the service at rawURL, when it is
// https:// and the service answered plain HTTP (http.ErrSchemeMismatch:
// a seenapi serving plain HTTP answers a handshake so) or the TLS
// handshake failed otherwise (handshakeFailed), that the URL may want
// http://: the bare error says "EOF", "connection reset by peer" or a
// timeout, and names no flag.
func schemeHint(err error, rawURL string, handshakeFailed bool) error {
	u, perr := url.Parse(rawURL)
	if perr != nil || u.Scheme != "https" {
		return err
	}
	u.Scheme = "http"
	switch {
	case errors.Is(err, http.ErrSchemeMismatch):
		return fmt.Errorf("the service answered plain HTTP, not HTTPS: give --url %s (%w)", u.Redacted(), err)
	case handshakeFailed && !errors.As(err, new(*tls.CertificateVerificationError)):
		// A certificate refused is TLS spoken: trustHint's to say.
		return fmt.Errorf("%w; TLS failed: if the service serves plain HTTP, give --url %s", err, u.Redacted())
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
