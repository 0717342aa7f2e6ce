package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"net"
	"testing"
	"time"
)

// signCases are the leaf certificates the cluster issues: nodes (IPv4 and
// IPv6 addresses), consensus members, operators with and without a role.
var signCases = []struct {
	name string
	req  CertRequest
}{
	{"node", CertRequest{NodeID: "abcdefghijklmnopqrstuvwx", Role: RoleNode, IPs: []net.IP{net.ParseIP("127.0.45.10")}}},
	{"node-ipv6", CertRequest{NodeID: "abcdefghijklmnopqrstuvw2", Role: RoleNode, IPs: []net.IP{net.ParseIP("fd00::7")}}},
	{"consensus", CertRequest{NodeID: "abcdefghijklmnopqrstuvw3", Role: RoleConsensus, IPs: []net.IP{net.ParseIP("10.1.2.3")}, DNSNames: []string{"localhost"}}},
	{"operator", CertRequest{NodeID: "alice", Role: RoleAdmin, OperatorRole: OperatorReader}},
	{"admin", CertRequest{NodeID: "admin", Role: RoleAdmin, Validity: 90 * time.Second}},
}

// TestIssueSignsOnce: a leaf from a P-256 CA is signed once (no
// verification after the signature), and is what crypto/x509 would have
// made: the same content byte for byte, the same outer encoding, and a
// signature the CA's key checks.
func TestIssueSignsOnce(t *testing.T) {
	ca, err := NewCA("cluster CA")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range signCases {
		t.Run(tc.name, func(t *testing.T) {
			key, err := NewKey()
			if err != nil {
				t.Fatal(err)
			}
			req := tc.req
			req.PublicKey = key.Public()
			once, checked := signCounts.once.Load(), signCounts.checked.Load()
			if _, err := ca.Issue(req); err != nil {
				t.Fatal(err)
			}
			if got := signCounts.once.Load() - once; got != 1 {
				t.Errorf("Issue signed once %d times, want 1", got)
			}
			if got := signCounts.checked.Load() - checked; got != 0 {
				t.Errorf("Issue went through CreateCertificate's sign-and-verify %d times, want 0", got)
			}

			tmpl := ca.leafTemplate(req, time.Hour, big.NewInt(4242), time.Now())
			got, err := signLeaf(tmpl, ca.Cert, req.PublicKey, ca.Key)
			if err != nil {
				t.Fatal(err)
			}
			want, err := sign(tmpl, ca.Cert, req.PublicKey, ca.Key)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.RawTBSCertificate, want.RawTBSCertificate) {
				t.Errorf("the content signed differs from crypto/x509's:\n got %x\nwant %x", got.RawTBSCertificate, want.RawTBSCertificate)
			}
			if got.SignatureAlgorithm != want.SignatureAlgorithm {
				t.Errorf("signature algorithm %v, want %v", got.SignatureAlgorithm, want.SignatureAlgorithm)
			}
			// The outer encoding: crypto/x509's certificate, rebuilt from
			// its parts as signLeaf builds its own, is the same bytes.
			rebuilt, err := asn1.Marshal(signedCertificate{
				TBS:       asn1.RawValue{FullBytes: want.RawTBSCertificate},
				Algorithm: pkix.AlgorithmIdentifier{Algorithm: oidECDSAWithSHA256},
				Signature: asn1.BitString{Bytes: want.Signature, BitLength: 8 * len(want.Signature)},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rebuilt, want.Raw) {
				t.Errorf("the outer encoding differs from crypto/x509's:\n got %x\nwant %x", rebuilt, want.Raw)
			}
			if err := got.CheckSignatureFrom(ca.Cert); err != nil {
				t.Errorf("the CA does not check the signature: %v", err)
			}
			if err := Verify(got, ca.Cert); err != nil {
				t.Errorf("the certificate does not verify: %v", err)
			}
		})
	}
}

// TestIssueOtherKeysChecked: a CA whose key is not Go's own P-256 key (a
// key of another curve, another algorithm, or a signer of its own) has its
// leaves made by CreateCertificate, which checks what the key signed.
func TestIssueOtherKeysChecked(t *testing.T) {
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p256, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  crypto.Signer
	}{
		{"p384", p384},
		{"ed25519", ed},
		{"wrapped", wrappedSigner{p256}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca := caWithKey(t, tc.key)
			key, err := NewKey()
			if err != nil {
				t.Fatal(err)
			}
			once, checked := signCounts.once.Load(), signCounts.checked.Load()
			cert, err := ca.Issue(CertRequest{PublicKey: key.Public(), NodeID: "abcdefghijklmnopqrstuvwx", Role: RoleNode, IPs: []net.IP{net.ParseIP("127.0.45.11")}})
			if err != nil {
				t.Fatal(err)
			}
			if got := signCounts.checked.Load() - checked; got != 1 {
				t.Errorf("CreateCertificate's path taken %d times, want 1", got)
			}
			if got := signCounts.once.Load() - once; got != 0 {
				t.Errorf("signed once %d times, want 0", got)
			}
			if err := Verify(cert, ca.Cert); err != nil {
				t.Errorf("the certificate does not verify: %v", err)
			}
		})
	}
}

// wrappedSigner is a signer of its own (as a hardware key would be).
type wrappedSigner struct{ crypto.Signer }

func caWithKey(t *testing.T, key crypto.Signer) *CA {
	t.Helper()
	now := time.Now()
	tmpl, err := caTemplate("test CA", key.Public(), now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key}
}

// BenchmarkIssue is a node certificate issued by crypto/x509's
// CreateCertificate (signed, then the signature verified) and by
// signLeaf (signed once), in the same run: go test -run '^$' -bench
// BenchmarkIssue ./pki.
func BenchmarkIssue(b *testing.B) {
	ca, err := NewCA("cluster CA")
	if err != nil {
		b.Fatal(err)
	}
	key, err := NewKey()
	if err != nil {
		b.Fatal(err)
	}
	req := CertRequest{PublicKey: key.Public(), NodeID: "abcdefghijklmnopqrstuvwx", Role: RoleNode, IPs: []net.IP{net.ParseIP("127.0.45.10")}}
	for _, bc := range []struct {
		name string
		sign func(tmpl, parent *x509.Certificate, pub crypto.PublicKey, key crypto.Signer) (*x509.Certificate, error)
	}{
		{"create-certificate", sign},
		{"sign-once", signLeaf},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				tmpl := ca.leafTemplate(req, DefaultValidity, big.NewInt(int64(i+1)), time.Now())
				if _, err := bc.sign(tmpl, ca.Cert, req.PublicKey, ca.Key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
