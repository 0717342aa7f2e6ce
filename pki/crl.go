package pki

import (
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"math/big"
	"time"
)

// CRLValidity is how long a revocation list says it is current. etcd does
// not look at it (it reads the list on every handshake and checks serials
// only), but the field is required.
const CRLValidity = 10 * 365 * 24 * time.Hour

// NewCRL returns a certificate revocation list (DER, as etcd reads it) of
// the given serials, signed by ca. number must grow with every new list.
func (ca *CA) NewCRL(serials []*big.Int, number int64) ([]byte, error) {
	now := time.Now()
	tmpl := &x509.RevocationList{
		Number:     big.NewInt(number),
		ThisUpdate: now.Add(-clockSkew),
		NextUpdate: ca.clip(now.Add(CRLValidity)),
	}
	for _, s := range serials {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
			x509.RevocationListEntry{SerialNumber: s, RevocationTime: now})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("new CRL: %w", err)
	}
	return der, nil
}

// ParseCRL reads a list made by NewCRL, checks that ca signed it, and
// returns its number and revoked serials.
func ParseCRL(der []byte, ca *x509.Certificate) (number int64, serials []*big.Int, err error) {
	l, err := x509.ParseRevocationList(der)
	if err != nil {
		return 0, nil, fmt.Errorf("parse CRL: %w", err)
	}
	if err := l.CheckSignatureFrom(ca); err != nil {
		return 0, nil, fmt.Errorf("CRL not signed by %s: %w", ca.Subject.CommonName, err)
	}
	for _, e := range l.RevokedCertificateEntries {
		serials = append(serials, e.SerialNumber)
	}
	return l.Number.Int64(), serials, nil
}
