package pki

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"sync/atomic"
)

// TLSCertificate bundles a leaf certificate, its key and the intermediates
// between it and the root (leaf first), as a server or client presents them.
// A peer that trusts only the root needs the intermediates to build the
// chain; one that trusts the intermediate itself does not, but they do no
// harm.
func TLSCertificate(cert *x509.Certificate, key crypto.Signer, intermediates ...*x509.Certificate) tls.Certificate {
	chain := [][]byte{cert.Raw}
	for _, c := range intermediates {
		chain = append(chain, c.Raw)
	}
	return tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: cert}
}

// ServerTLS is the configuration of a server that presents cert and accepts
// only clients with a certificate that chains to one of clientCAs. TLS 1.3
// only.
func ServerTLS(cert tls.Certificate, clientCAs ...*x509.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    certPool(clientCAs),
	}
}

// ClientTLS is the configuration of a client that presents cert and accepts
// only a server whose certificate chains to one of roots and names the
// address dialled. ServerName is left empty: crypto/tls and gRPC fill it from
// the dialled host, so dialling 127.0.0.2:7000 checks for the IP SAN
// 127.0.0.2, which is why server certificates carry their IPs. TLS 1.3 only.
func ClientTLS(cert tls.Certificate, roots ...*x509.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      certPool(roots),
		// Reconnecting resumes the session instead of a full handshake
		// (two signatures and a chain verified on each side): when a
		// manager goes and thousands of nodes move at once, handshakes
		// are what the others would spend their CPU on.
		ClientSessionCache: tls.NewLRUClientSessionCache(16),
	}
}

// CertSource holds a certificate that may be replaced while connections
// use it: TLS configurations made from it (ServerTLSFrom, ClientTLSFrom)
// read the current one at each handshake. A replaced certificate takes
// effect for new connections; open ones keep theirs, so no stream ends
// because its certificate was renewed.
type CertSource struct {
	v atomic.Pointer[tls.Certificate]
}

// NewCertSource returns a source holding cert.
func NewCertSource(cert tls.Certificate) *CertSource {
	s := &CertSource{}
	s.Set(cert)
	return s
}

// Set replaces the certificate, for the next handshakes.
func (s *CertSource) Set(cert tls.Certificate) {
	s.v.Store(&cert)
}

// Get returns the current certificate.
func (s *CertSource) Get() *tls.Certificate {
	return s.v.Load()
}

// Leaf returns the current certificate's leaf, parsed.
func (s *CertSource) Leaf() *x509.Certificate {
	return s.v.Load().Leaf
}

// ServerTLSFrom is ServerTLS with the certificate read from src at each
// handshake.
func ServerTLSFrom(src *CertSource, clientCAs ...*x509.Certificate) *tls.Config {
	cfg := ServerTLS(tls.Certificate{}, clientCAs...)
	cfg.Certificates = nil
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return src.Get(), nil }
	return cfg
}

// ClientTLSFrom is ClientTLS with the certificate read from src at each
// handshake. Like a fixed certificate, it is left out when the server
// asks for certificates of other CAs, so the server sees an anonymous
// client rather than a stranger's certificate.
func ClientTLSFrom(src *CertSource, roots ...*x509.Certificate) *tls.Config {
	cfg := ClientTLS(tls.Certificate{}, roots...)
	cfg.Certificates = nil
	cfg.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		c := src.Get()
		if err := cri.SupportsCertificate(c); err != nil {
			return &tls.Certificate{}, nil
		}
		return c, nil
	}
	return cfg
}
