package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc/credentials"
)

// SharedSessions returns the credentials of a client of the cluster's
// managers, from cfg (its certificate and the cluster's CA as RootCAs),
// that resumes a TLS session set up with one manager at any other. The
// managers encrypt their session tickets with keys they all derive
// (pki.SessionTickets): when a manager dies, its nodes move to the others
// with a resumption each instead of a full handshake, which is what those
// managers would spend their CPU on while thousands of nodes move.
//
// crypto/tls resumes a session only with a server whose address the
// session's certificate names, and keys its cache by the address: here
// the cache keeps one session for every server, and the server's
// certificate is checked by VerifyConnection instead: on a full handshake
// as crypto/tls would (a chain to the CA, the dialled IP among its
// names); on a resumption, only its expiry: the session was verified when
// it was set up, and only a server holding the tickets' keys (a manager of
// the cluster, which reads the CA's key from etcd) can take it up.
func SharedSessions(cfg *tls.Config) credentials.TransportCredentials {
	cfg = cfg.Clone()
	cfg.ClientSessionCache = oneSession{tls.NewLRUClientSessionCache(1)}
	return &sharedSessions{TransportCredentials: credentials.NewTLS(cfg), cfg: cfg}
}

type sharedSessions struct {
	credentials.TransportCredentials
	cfg *tls.Config
}

// ClientHandshake checks the server itself (VerifyConnection), for which
// it needs the address dialled: crypto/tls does not keep an IP as the
// server's name.
func (s *sharedSessions) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	host := authority
	if h, _, err := net.SplitHostPort(authority); err == nil {
		host = h
	}
	cfg := s.cfg.Clone()
	if cfg.ServerName != "" {
		host = cfg.ServerName
	}
	cfg.ServerName = host
	cfg.InsecureSkipVerify = true // verifyServer does it
	cfg.VerifyConnection = verifyServer(s.cfg.RootCAs, host, s.cfg.Time)
	return credentials.NewTLS(cfg).ClientHandshake(ctx, authority, raw)
}

func (s *sharedSessions) Clone() credentials.TransportCredentials {
	return &sharedSessions{TransportCredentials: s.TransportCredentials.Clone(), cfg: s.cfg}
}

// verifyServer checks the server of a connection to host: on a full
// handshake its chain to roots and its name; on a resumption its expiry.
func verifyServer(roots *x509.CertPool, host string, now func() time.Time) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("tls: the server sent no certificate")
		}
		t := time.Now()
		if now != nil {
			t = now()
		}
		leaf := cs.PeerCertificates[0]
		if cs.DidResume {
			if t.After(leaf.NotAfter) {
				return fmt.Errorf("tls: the resumed session's server certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
			}
			return nil
		}
		opts := x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: t, Intermediates: x509.NewCertPool()}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := leaf.Verify(opts); err != nil {
			return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
		}
		return nil
	}
}

// oneSession is a client session cache with one entry for every server.
type oneSession struct{ c tls.ClientSessionCache }

func (o oneSession) Get(string) (*tls.ClientSessionState, bool) { return o.c.Get("") }
func (o oneSession) Put(_ string, cs *tls.ClientSessionState)   { o.c.Put("", cs) }
