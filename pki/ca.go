package pki

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Roles, carried as the single organisation (O) of a certificate's subject.
const (
	// RoleAdmin is an operator's credential for the management API.
	RoleAdmin = "admin"
	// RoleNode is a node's credential for the node-facing API.
	RoleNode = "node"
	// RoleConsensus is an etcd member's certificate, issued by the etcd CA,
	// used for etcd peer and client traffic.
	RoleConsensus = "consensus"
)

// Validity periods.
const (
	// CAValidity is how long a root CA and an intermediate are valid.
	CAValidity = 10 * 365 * 24 * time.Hour
	// DefaultValidity is used by Issue when CertRequest.Validity is zero.
	DefaultValidity = 365 * 24 * time.Hour
	// clockSkew backdates NotBefore so that a machine whose clock is a little
	// behind accepts a certificate issued a moment ago. A leaf certificate
	// is backdated by a tenth of its validity at most (backdate), so that a
	// certificate of seconds still has most of its life ahead of it.
	clockSkew = time.Hour
)

// backdate is how far before its issue a leaf certificate valid for
// validity starts: clockSkew, or a tenth of the validity if that is less.
func backdate(validity time.Duration) time.Duration {
	return min(clockSkew, validity/10)
}

// CA is a certificate authority: its certificate and the key that signs with
// it.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// CertRequest describes a leaf certificate to issue.
type CertRequest struct {
	// PublicKey is the key being certified (the holder keeps the private key).
	PublicKey crypto.PublicKey
	// NodeID becomes the subject's common name. For admins it is their name.
	NodeID string
	// Role becomes the subject's organisation: RoleAdmin, RoleNode or
	// RoleConsensus.
	Role string
	// IPs and DNSNames are the subject alternative names a server is reached
	// by. Server certificates need the IP they listen on.
	IPs      []net.IP
	DNSNames []string
	// Validity defaults to DefaultValidity, and never reaches past the CA's
	// own expiry.
	Validity time.Duration
	// OperatorRole becomes the subject's organisational unit: one of
	// OperatorRoles, for RoleAdmin only; empty for none (which reads as
	// OperatorAdmin, see OperatorRole).
	OperatorRole string
}

// NewCA creates a self-signed root CA, valid for CAValidity.
func NewCA(commonName string) (*CA, error) {
	if commonName == "" {
		return nil, errors.New("new CA: common name is empty")
	}
	key, err := NewKey()
	if err != nil {
		return nil, fmt.Errorf("new CA: %w", err)
	}
	now := time.Now()
	tmpl, err := caTemplate(commonName, key.Public(), now, now.Add(CAValidity))
	if err != nil {
		return nil, fmt.Errorf("new CA: %w", err)
	}
	cert, err := sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("new CA: %w", err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// NewIntermediate creates a CA signed by ca that may only sign leaf
// certificates (path length zero). It expires with ca at the latest.
func (ca *CA) NewIntermediate(commonName string) (*CA, error) {
	if commonName == "" {
		return nil, errors.New("new intermediate CA: common name is empty")
	}
	key, err := NewKey()
	if err != nil {
		return nil, fmt.Errorf("new intermediate CA: %w", err)
	}
	now := time.Now()
	tmpl, err := caTemplate(commonName, key.Public(), now, ca.clip(now.Add(CAValidity)))
	if err != nil {
		return nil, fmt.Errorf("new intermediate CA: %w", err)
	}
	tmpl.MaxPathLen = 0
	tmpl.MaxPathLenZero = true
	cert, err := sign(tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("new intermediate CA %q: %w", commonName, err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Issue signs a leaf certificate for req: subject CN=req.NodeID,
// O=req.Role, usable for both server and client authentication.
func (ca *CA) Issue(req CertRequest) (*x509.Certificate, error) {
	if err := req.validate(); err != nil {
		return nil, fmt.Errorf("issue certificate: %w", err)
	}
	validity := req.Validity
	if validity == 0 {
		validity = DefaultValidity
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("issue certificate: %w", err)
	}
	tmpl := ca.leafTemplate(req, validity, serial, time.Now())
	cert, err := signLeaf(tmpl, ca.Cert, req.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("issue certificate for %s %q: %w", req.Role, req.NodeID, err)
	}
	return cert, nil
}

// leafTemplate is the certificate Issue makes for req, valid for validity
// from now (backdated), with serial.
func (ca *CA) leafTemplate(req CertRequest, validity time.Duration, serial *big.Int, now time.Time) *x509.Certificate {
	subject := pkix.Name{CommonName: req.NodeID, Organization: []string{req.Role}}
	if req.OperatorRole != "" {
		subject.OrganizationalUnit = []string{req.OperatorRole}
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-backdate(validity)),
		NotAfter:     ca.clip(now.Add(validity)),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  req.IPs,
		DNSNames:     req.DNSNames,

		BasicConstraintsValid: true,
	}
}

func (req CertRequest) validate() error {
	if req.PublicKey == nil {
		return errors.New("public key is missing")
	}
	if req.NodeID == "" {
		return errors.New("node ID is empty")
	}
	switch req.Role {
	case RoleAdmin, RoleNode, RoleConsensus:
	default:
		return fmt.Errorf("role %q is not one of %q, %q, %q", req.Role, RoleAdmin, RoleNode, RoleConsensus)
	}
	if req.Validity < 0 {
		return fmt.Errorf("validity %v is negative", req.Validity)
	}
	if req.OperatorRole != "" {
		if req.Role != RoleAdmin {
			return fmt.Errorf("an operator role (%q) is for an admin certificate, not a %s one", quoteShort(req.OperatorRole), req.Role)
		}
		if _, err := ParseOperatorRole(req.OperatorRole); err != nil {
			return err
		}
	}
	return nil
}

// clip returns t, or the CA's expiry if t is later: a certificate must not
// outlive its issuer.
func (ca *CA) clip(t time.Time) time.Time {
	if t.After(ca.Cert.NotAfter) {
		return ca.Cert.NotAfter
	}
	return t
}

func caTemplate(commonName string, pub crypto.PublicKey, notBefore, notAfter time.Time) (*x509.Certificate, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             notBefore.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil
}

// sign creates a certificate from tmpl for pub, signed by parent's key, and
// parses it back.
func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, key crypto.Signer) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// randomSerial returns a random positive 128-bit serial number.
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	n, err := rand.Int(rand.Reader, limit)
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
