package pki

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

const (
	tokenPrefix = "CUR1"
	// tokenSecretBytes is the entropy of a token's secret.
	tokenSecretBytes = 32
)

// ErrMalformedToken is returned by ParseToken for anything that is not a
// token.
var ErrMalformedToken = errors.New("token must look like CUR1-<fingerprint>-<secret>")

// Token is a join token: the fingerprint of the cluster's root CA, which the
// joining node checks before it trusts the cluster, and a secret, which the
// leader checks before it lets the node in.
type Token struct {
	// CAFingerprint is Fingerprint of the root CA: 64 lowercase hex digits.
	CAFingerprint string
	// Secret is 32 random bytes in lowercase base32 without padding: 52
	// characters.
	Secret string
}

// NewToken creates a token with a fresh secret for the cluster whose root CA
// is ca.
func NewToken(ca *x509.Certificate) (Token, error) {
	buf := make([]byte, tokenSecretBytes)
	if _, err := rand.Read(buf); err != nil {
		return Token{}, fmt.Errorf("new token: %w", err)
	}
	return Token{CAFingerprint: Fingerprint(ca), Secret: nodeIDEncoding.EncodeToString(buf)}, nil
}

// String renders the token as CUR1-<fingerprint>-<secret>.
func (t Token) String() string {
	return tokenPrefix + "-" + t.CAFingerprint + "-" + t.Secret
}

// ParseToken parses a token as String renders it. Surrounding white space is
// ignored, and so is the case of the fingerprint and the secret, so a token
// read aloud or retyped in capitals still works.
func ParseToken(s string) (Token, error) {
	parts := strings.Split(strings.TrimSpace(s), "-")
	if len(parts) != 3 || parts[0] != tokenPrefix {
		return Token{}, fmt.Errorf("%w: want three parts separated by '-', starting with %s", ErrMalformedToken, tokenPrefix)
	}
	fp, secret := strings.ToLower(parts[1]), strings.ToLower(parts[2])
	if raw, err := hex.DecodeString(fp); err != nil || len(raw) != sha256.Size {
		return Token{}, fmt.Errorf("%w: the fingerprint must be %d hex digits", ErrMalformedToken, 2*sha256.Size)
	}
	if raw, err := nodeIDEncoding.DecodeString(secret); err != nil || len(raw) != tokenSecretBytes {
		return Token{}, fmt.Errorf("%w: the secret must be %d base32 characters (a-z, 2-7)",
			ErrMalformedToken, nodeIDEncoding.EncodedLen(tokenSecretBytes))
	}
	return Token{CAFingerprint: fp, Secret: secret}, nil
}

// VerifyCA checks that ca is the root CA the token names.
func (t Token) VerifyCA(ca *x509.Certificate) error {
	if got := Fingerprint(ca); got != strings.ToLower(t.CAFingerprint) {
		return fmt.Errorf("the cluster's CA has fingerprint %s, but the token expects %s: wrong token or wrong cluster", got, t.CAFingerprint)
	}
	return nil
}

// SecretEqual compares two token secrets in constant time. Both are hashed
// first, so not even their lengths leak.
func SecretEqual(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}
