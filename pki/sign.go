package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"io"
	"sync/atomic"
)

// Signing a leaf once. crypto/x509.CreateCertificate checks the signature
// it just made with the issuer's public key, to catch a crypto.Signer
// that misbehaves (a hardware module, a remote key): an ECDSA
// verification, about twice the cost of the signature itself, on every
// certificate the leader issues, which at a join wave was most of what a
// Register cost the leader. A CA's key here is always Go's own
// *ecdsa.PrivateKey on P-256 (NewKey, DecodeKey), which has no such
// failure to catch, so signLeaf lets crypto/x509 build the certificate's
// content (the TBSCertificate, byte for byte what CreateCertificate signs)
// and signs it itself, once. What the certificate says, and who can
// check it, is unchanged: every peer verifies the signature against the
// CA on every handshake, so a bad one could only make the certificate
// useless, never let it do more. Any other key takes CreateCertificate's
// own path.

// signCounts counts the leaf certificates signed by each path, for the
// tests: once (signLeaf's own signature) and checked (CreateCertificate,
// which verifies what it signed).
var signCounts struct {
	once, checked atomic.Uint64
}

// errTBSTaken ends CreateCertificate once tbsTaker holds the content.
var errTBSTaken = errors.New("pki: the certificate's content is taken, to be signed once")

// tbsTaker is a crypto.MessageSigner that takes the message it is asked
// to sign (the TBSCertificate: crypto.SignMessage hands a MessageSigner
// the whole message) and signs nothing.
type tbsTaker struct {
	pub crypto.PublicKey
	tbs []byte
}

func (t *tbsTaker) Public() crypto.PublicKey { return t.pub }

func (t *tbsTaker) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, errors.New("pki: tbsTaker was handed a digest, not the certificate's content")
}

func (t *tbsTaker) SignMessage(_ io.Reader, msg []byte, _ crypto.SignerOpts) ([]byte, error) {
	t.tbs = msg
	return nil, errTBSTaken
}

// oidECDSAWithSHA256 is the signature algorithm of a P-256 key's
// certificates (RFC 5758), with no parameters, as crypto/x509 writes it.
var oidECDSAWithSHA256 = asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}

// signedCertificate is a certificate's outer structure (RFC 5280, 4.1).
type signedCertificate struct {
	TBS       asn1.RawValue
	Algorithm pkix.AlgorithmIdentifier
	Signature asn1.BitString
}

// signLeaf creates a certificate from tmpl for pub, signed by parent's
// key, and parses it back: with a P-256 *ecdsa.PrivateKey, signed once;
// with any other, by CreateCertificate.
func signLeaf(tmpl, parent *x509.Certificate, pub crypto.PublicKey, key crypto.Signer) (*x509.Certificate, error) {
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		signCounts.checked.Add(1)
		return sign(tmpl, parent, pub, key)
	}
	taker := &tbsTaker{pub: ec.Public()}
	if _, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, taker); !errors.Is(err, errTBSTaken) {
		if err == nil {
			err = errors.New("pki: crypto/x509 made a certificate without asking for its signature")
		}
		return nil, err
	}
	digest := sha256.Sum256(taker.tbs)
	sig, err := ecdsa.SignASN1(rand.Reader, ec, digest[:])
	if err != nil {
		return nil, err
	}
	der, err := asn1.Marshal(signedCertificate{
		TBS:       asn1.RawValue{FullBytes: taker.tbs},
		Algorithm: pkix.AlgorithmIdentifier{Algorithm: oidECDSAWithSHA256},
		Signature: asn1.BitString{Bytes: sig, BitLength: 8 * len(sig)},
	})
	if err != nil {
		return nil, err
	}
	signCounts.once.Add(1)
	return x509.ParseCertificate(der)
}
