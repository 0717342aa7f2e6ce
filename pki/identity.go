package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
)

// NodeIDLen is the length of a node ID.
const NodeIDLen = 24

// nodeIDEncoding is lowercase base32 without padding.
var nodeIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewKey generates an ECDSA P-256 private key.
func NewKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return key, nil
}

// NodeID derives a node's ID from its public key: lowercase base32 (no
// padding) of the first 15 bytes of the SHA-256 of the key's PKIX DER, which
// makes 24 characters.
func NodeID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("node ID: %w", err)
	}
	sum := sha256.Sum256(der)
	return nodeIDEncoding.EncodeToString(sum[:15]), nil
}

// Identity returns the node ID (common name) and role (the single
// organisation) a certificate was issued for.
func Identity(cert *x509.Certificate) (nodeID, role string, err error) {
	if cert == nil {
		return "", "", errors.New("identity: no certificate")
	}
	if cert.Subject.CommonName == "" {
		return "", "", errors.New("identity: certificate has no common name")
	}
	if len(cert.Subject.Organization) != 1 {
		return "", "", fmt.Errorf("identity: certificate of %q has %d organisations, want exactly one role",
			cert.Subject.CommonName, len(cert.Subject.Organization))
	}
	return cert.Subject.CommonName, cert.Subject.Organization[0], nil
}

// Verify checks that cert chains to one of roots and may be used for client
// authentication. A root may be an intermediate CA: it is then the trust
// anchor itself, and certificates issued by its parent do not verify.
func Verify(cert *x509.Certificate, roots ...*x509.Certificate) error {
	if cert == nil {
		return errors.New("verify: no certificate")
	}
	if len(roots) == 0 {
		return errors.New("verify: no trusted CA given")
	}
	_, err := cert.Verify(x509.VerifyOptions{
		Roots:     certPool(roots),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return fmt.Errorf("verify certificate of %q: %w", cert.Subject.CommonName, err)
	}
	return nil
}

// Fingerprint is the lowercase hex SHA-256 of a certificate's DER, 64
// characters.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return hex.EncodeToString(sum[:])
}

func certPool(certs []*x509.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool
}

// NewNodeKey generates a node's key and returns it with the node ID it
// makes (NodeID).
func NewNodeKey() (*ecdsa.PrivateKey, string, error) {
	key, err := NewKey()
	if err != nil {
		return nil, "", err
	}
	id, err := NodeID(key.Public())
	if err != nil {
		return nil, "", err
	}
	return key, id, nil
}
