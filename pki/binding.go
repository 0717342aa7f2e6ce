package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
)

// A node that joins proves its key over the TLS connection its Register
// came on, and keeps that connection for its first session: the manager
// then takes the connection for the node's, as if the node had presented
// the certificate the Register issued, and the node is spared a second
// full handshake (a key exchange, a signature and a chain to verify on
// the manager).
//
// What the manager is shown is what a client certificate's handshake
// shows it: a signature by the node's key of a value that only the two
// ends of this one connection hold. TLS 1.3 derives that value from the
// connection's secrets (its exporter, RFC 8446 section 7.5; RFC 9266
// uses it the same way); the label below keeps it for this use alone,
// and the node's public key, as the exporter's context, ties it to the
// key the certificate names. A proof made for one connection is worth
// nothing on any other.

// bindingLabel is the exporter label of a connection's binding to a node.
const bindingLabel = "EXPORTER-curator-node-connection"

// bindingLength is how many bytes of keying material are signed.
const bindingLength = 32

// BindingMaterial is the keying material of the connection cs that a
// node signs to take it for its own (pubDER: the PKIX DER of its public
// key). TLS 1.3 only: an older version's exporter is not bound to the
// handshake without the extended master secret.
func BindingMaterial(cs *tls.ConnectionState, pubDER []byte) ([]byte, error) {
	if cs == nil || !cs.HandshakeComplete {
		return nil, errors.New("connection binding: no completed TLS handshake")
	}
	if cs.Version != tls.VersionTLS13 {
		return nil, fmt.Errorf("connection binding: TLS version %#x, want 1.3", cs.Version)
	}
	if len(pubDER) == 0 {
		return nil, errors.New("connection binding: no public key")
	}
	return cs.ExportKeyingMaterial(bindingLabel, pubDER, bindingLength)
}

// SignBinding signs material (BindingMaterial) with key.
func SignBinding(key crypto.Signer, material []byte) ([]byte, error) {
	if len(material) != bindingLength {
		return nil, fmt.Errorf("connection binding: %d bytes of material, want %d", len(material), bindingLength)
	}
	h := sha256.Sum256(material)
	return key.Sign(rand.Reader, h[:], crypto.SHA256)
}

// VerifyBinding checks that sig is SignBinding's of material by the key
// pub. Node keys are ECDSA (NewKey).
func VerifyBinding(pub crypto.PublicKey, material, sig []byte) error {
	if len(material) != bindingLength {
		return fmt.Errorf("connection binding: %d bytes of material, want %d", len(material), bindingLength)
	}
	k, ok := pub.(*ecdsa.PublicKey)
	if !ok {
		return fmt.Errorf("connection binding: a %T key, want ECDSA", pub)
	}
	h := sha256.Sum256(material)
	if !ecdsa.VerifyASN1(k, h[:], sig) {
		return errors.New("connection binding: the signature does not match the key and this connection")
	}
	return nil
}
