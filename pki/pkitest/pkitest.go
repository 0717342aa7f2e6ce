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
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(name string, ips ...net.IP) tls.Certificate {
		key, err := pki.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		cert, err := ca.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: name, Role: pki.RoleNode, IPs: ips})
		if err != nil {
			t.Fatal(err)
		}
		return pki.TLSCertificate(cert, key, ca.Cert)
	}
	return TLS{
		Server: pki.ServerTLS(issue("server", net.IPv4(127, 0, 0, 1)), ca.Cert),
		Client: pki.ClientTLS(issue("client"), ca.Cert),
	}
}
