package pki

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
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
