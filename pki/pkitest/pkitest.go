// Package pkitest makes the TLS configurations tests of gRPC servers and
// their clients need, from a CA of their own.
package pkitest

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/curatorproject/curator/pki"
)

// TLS is a server's configuration (a certificate for 127.0.0.1 that asks
// for a client certificate of the CA) and a node's client configuration
// (pki.ServerTLS, pki.ClientTLS).
type TLS struct {
	Server, Client *tls.Config
}

// New makes a CA and the two configurations.
func New(t testing.TB) TLS {
	t.Helper()
	ca := NewCA(t)
	return TLS{
		Server: pki.ServerTLS(ca.Issue(t, "server", net.IPv4(127, 0, 0, 1)), ca.Cert),
		Client: pki.ClientTLS(ca.Issue(t, "client"), ca.Cert),
	}
}

// CA is a test's own CA.
type CA struct{ *pki.CA }

// NewCA makes a CA.
func NewCA(t testing.TB) CA {
	t.Helper()
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	return CA{ca}
}

// Issue makes a key and a node certificate for it named name, with ips
// among its names, and returns them with the CA's certificate.
func (ca CA) Issue(t testing.TB, name string, ips ...net.IP) tls.Certificate {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.CA.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: name, Role: pki.RoleNode, IPs: ips})
	if err != nil {
		t.Fatal(err)
	}
	return pki.TLSCertificate(cert, key, ca.Cert)
}
