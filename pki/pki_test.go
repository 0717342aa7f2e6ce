package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testPKI is a cluster CA, its etcd intermediate and an unrelated CA.
type testPKI struct {
	root, etcd, foreign *CA
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	root, err := NewCA("cluster CA")
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := root.NewIntermediate("etcd CA")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := NewCA("foreign CA")
	if err != nil {
		t.Fatal(err)
	}
	return testPKI{root: root, etcd: etcd, foreign: foreign}
}

// issue creates a key and a certificate for it from ca, for 127.0.0.1.
func issue(t *testing.T, ca *CA, role string) (*x509.Certificate, tls.Certificate) {
	t.Helper()
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	id, err := NodeID(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(CertRequest{
		PublicKey: key.Public(),
		NodeID:    id,
		Role:      role,
		IPs:       []net.IP{net.IPv4(127, 0, 0, 1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cert, TLSCertificate(cert, key)
}

func TestVerify(t *testing.T) {
	p := newTestPKI(t)
	nodeCert, _ := issue(t, p.root, RoleNode)
	etcdCert, _ := issue(t, p.etcd, RoleConsensus)
	foreignCert, _ := issue(t, p.foreign, RoleNode)

	for _, tc := range []struct {
		name    string
		cert    *x509.Certificate
		roots   []*x509.Certificate
		wantErr bool
	}{
		{"node cert, root trusted", nodeCert, []*x509.Certificate{p.root.Cert}, false},
		{"etcd cert, etcd CA trusted", etcdCert, []*x509.Certificate{p.etcd.Cert}, false},
		{"etcd cert, either trusted", etcdCert, []*x509.Certificate{p.foreign.Cert, p.etcd.Cert}, false},
		{"root-issued node cert, only etcd CA trusted", nodeCert, []*x509.Certificate{p.etcd.Cert}, true},
		{"foreign cert, root trusted", foreignCert, []*x509.Certificate{p.root.Cert}, true},
		{"foreign cert, etcd CA trusted", foreignCert, []*x509.Certificate{p.etcd.Cert}, true},
		{"no roots", nodeCert, nil, true},
		{"no cert", nil, []*x509.Certificate{p.root.Cert}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(tc.cert, tc.roots...)
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Errorf("Verify: %v, want error: %v", err, tc.wantErr)
			}
		})
	}
}

func TestIssue(t *testing.T) {
	p := newTestPKI(t)
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := p.etcd.Issue(CertRequest{
		PublicKey: key.Public(),
		NodeID:    "n1",
		Role:      RoleConsensus,
		IPs:       []net.IP{net.ParseIP("127.0.0.2")},
		DNSNames:  []string{"n1.local"},
		Validity:  time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		NodeID, Role string
		IPs          []string
		DNSNames     []string
		ExtKeyUsage  []x509.ExtKeyUsage
		IsCA         bool
	}
	id, role, err := Identity(cert)
	if err != nil {
		t.Fatal(err)
	}
	got := summary{NodeID: id, Role: role, DNSNames: cert.DNSNames, ExtKeyUsage: cert.ExtKeyUsage, IsCA: cert.IsCA}
	for _, ip := range cert.IPAddresses {
		got.IPs = append(got.IPs, ip.String())
	}
	want := summary{
		NodeID: "n1", Role: RoleConsensus, IPs: []string{"127.0.0.2"}, DNSNames: []string{"n1.local"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("issued certificate (-want +got):\n%s", diff)
	}
	if d := time.Until(cert.NotAfter); d > time.Hour || d < 59*time.Minute {
		t.Errorf("certificate expires in %v, want about 1h", d)
	}
	if !p.etcd.Cert.NotAfter.After(time.Now().Add(9*365*24*time.Hour)) || p.etcd.Cert.NotAfter.After(p.root.Cert.NotAfter) {
		t.Errorf("intermediate expires %v, want about 10 years and not after the root (%v)", p.etcd.Cert.NotAfter, p.root.Cert.NotAfter)
	}
	if !p.etcd.Cert.MaxPathLenZero || !p.etcd.Cert.IsCA {
		t.Errorf("intermediate: IsCA=%v MaxPathLenZero=%v, want both", p.etcd.Cert.IsCA, p.etcd.Cert.MaxPathLenZero)
	}
	other, err := p.root.Issue(CertRequest{PublicKey: key.Public(), NodeID: "n1", Role: RoleNode})
	if err != nil {
		t.Fatal(err)
	}
	if other.SerialNumber.Cmp(cert.SerialNumber) == 0 {
		t.Error("two certificates got the same serial number")
	}
}

func TestIssueRejects(t *testing.T) {
	p := newTestPKI(t)
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  CertRequest
		want string
	}{
		{"no key", CertRequest{NodeID: "n", Role: RoleNode}, "public key is missing"},
		{"no node ID", CertRequest{PublicKey: key.Public(), Role: RoleNode}, "node ID is empty"},
		{"unknown role", CertRequest{PublicKey: key.Public(), NodeID: "n", Role: "root"}, `role "root" is not one of`},
		{"negative validity", CertRequest{PublicKey: key.Public(), NodeID: "n", Role: RoleNode, Validity: -time.Hour}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.root.Issue(tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Issue: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestIdentityRejects(t *testing.T) {
	p := newTestPKI(t)
	// A CA certificate has a common name but no organisation.
	if _, _, err := Identity(p.root.Cert); err == nil {
		t.Error("Identity of a CA certificate: no error, want one (no role)")
	}
	if _, _, err := Identity(nil); err == nil {
		t.Error("Identity(nil): no error")
	}
}

func TestNodeID(t *testing.T) {
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	id1, err := NodeID(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	id2, err := NodeID(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if id1 != id2 {
		t.Errorf("NodeID not stable: %q then %q", id1, id2)
	}
	if !regexp.MustCompile(`^[a-z2-7]{24}$`).MatchString(id1) {
		t.Errorf("NodeID = %q, want 24 characters of lowercase base32", id1)
	}
	other, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if id3, _ := NodeID(other.Public()); id3 == id1 {
		t.Errorf("two keys share node ID %q", id1)
	}
	if _, err := NodeID("not a key"); err == nil {
		t.Error("NodeID of a string: no error")
	}
}

func TestFingerprint(t *testing.T) {
	p := newTestPKI(t)
	fp := Fingerprint(p.root.Cert)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(fp) {
		t.Errorf("Fingerprint = %q, want 64 lowercase hex digits", fp)
	}
	if fp == Fingerprint(p.foreign.Cert) {
		t.Error("two CAs share a fingerprint")
	}
}

func TestPEMRoundTrip(t *testing.T) {
	p := newTestPKI(t)
	cert, err := DecodeCert(EncodeCert(p.root.Cert))
	if err != nil {
		t.Fatal(err)
	}
	if !cert.Equal(p.root.Cert) {
		t.Error("certificate changed in a PEM round trip")
	}
	keyPEM, err := EncodeKey(p.root.Key)
	if err != nil {
		t.Fatal(err)
	}
	key, err := DecodeKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkKeyPair(p.root.Cert, key); err != nil {
		t.Error(err)
	}
	// A bundle with the key first still yields the certificate, and the
	// other way round.
	bundle := append(append([]byte{}, keyPEM...), EncodeCert(p.root.Cert)...)
	if _, err := DecodeCert(bundle); err != nil {
		t.Errorf("DecodeCert(key+cert): %v", err)
	}
	if _, err := DecodeKey(bundle); err != nil {
		t.Errorf("DecodeKey(key+cert): %v", err)
	}
	if _, err := DecodeCert([]byte("garbage")); err == nil {
		t.Error("DecodeCert(garbage): no error")
	}
	if _, err := DecodeKey(EncodeCert(p.root.Cert)); err == nil {
		t.Error("DecodeKey(a certificate): no error")
	}
}

func TestFiles(t *testing.T) {
	p := newTestPKI(t)
	dir := t.TempDir() + "/pki"
	if err := p.root.WriteFiles(dir, "ca"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(KeyPath(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	ca, err := LoadCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.Equal(p.root.Cert) {
		t.Error("loaded CA certificate differs")
	}
	// The loaded CA can still issue certificates the original root trusts.
	cert, _ := issue(t, ca, RoleNode)
	if err := Verify(cert, p.root.Cert); err != nil {
		t.Error(err)
	}

	// A key that does not match the certificate is refused.
	if err := WriteFiles(dir, "mixed", p.root.Cert, p.foreign.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(dir, "mixed"); err == nil {
		t.Error("LoadCA with a foreign key: no error")
	}
	// A leaf certificate is not a CA.
	leafKey, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := p.root.Issue(CertRequest{PublicKey: leafKey.Public(), NodeID: "n", Role: RoleNode})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(dir, "leaf", leaf, leafKey); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(dir, "leaf"); err == nil {
		t.Error("LoadCA of a leaf certificate: no error")
	}
	if _, err := LoadCA(dir, "missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadCA of missing files: %v, want os.ErrNotExist", err)
	}
}

func TestTokenRoundTrip(t *testing.T) {
	p := newTestPKI(t)
	tok, err := NewToken(p.root.Cert)
	if err != nil {
		t.Fatal(err)
	}
	s := tok.String()
	if !regexp.MustCompile(`^CUR1-[0-9a-f]{64}-[a-z2-7]{52}$`).MatchString(s) {
		t.Errorf("token %q does not have the documented shape", s)
	}
	for _, in := range []string{s, "  " + s + "\n", "CUR1-" + strings.ToUpper(s[5:])} {
		got, err := ParseToken(in)
		if err != nil {
			t.Fatalf("ParseToken(%q): %v", in, err)
		}
		if diff := cmp.Diff(tok, got); diff != "" {
			t.Errorf("ParseToken(%q) (-want +got):\n%s", in, diff)
		}
	}
	if err := tok.VerifyCA(p.root.Cert); err != nil {
		t.Error(err)
	}
	if err := tok.VerifyCA(p.foreign.Cert); err == nil {
		t.Error("VerifyCA with a foreign CA: no error")
	}
	other, err := NewToken(p.root.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if other.Secret == tok.Secret {
		t.Error("two tokens share a secret")
	}
}

func TestParseTokenMalformed(t *testing.T) {
	fp := strings.Repeat("ab", 32)
	secret := strings.Repeat("a", 52)
	for _, tc := range []struct {
		name, in string
	}{
		{"empty", ""},
		{"no prefix", fp + "-" + secret},
		{"wrong version", "CUR2-" + fp + "-" + secret},
		{"missing secret", "CUR1-" + fp},
		{"extra part", "CUR1-" + fp + "-" + secret + "-x"},
		{"short fingerprint", "CUR1-" + fp[:62] + "-" + secret},
		{"fingerprint not hex", "CUR1-" + strings.Repeat("zz", 32) + "-" + secret},
		{"short secret", "CUR1-" + fp + "-" + secret[:51]},
		{"secret not base32", "CUR1-" + fp + "-" + strings.Repeat("1", 52)},
		{"empty parts", "CUR1--"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseToken(tc.in)
			if !errors.Is(err, ErrMalformedToken) {
				t.Fatalf("ParseToken(%q): %v, want ErrMalformedToken", tc.in, err)
			}
			if !strings.Contains(err.Error(), "token must look like CUR1-<fingerprint>-<secret>") {
				t.Errorf("error %q does not say what a token looks like", err)
			}
		})
	}
}

func TestSecretEqual(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"abc", "abc", true},
		{"abc", "abd", false},
		{"abc", "abcd", false},
		{"", "", true},
		{"", "a", false},
	} {
		if got := SecretEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("SecretEqual(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestTLSHandshake runs real handshakes over loopback TCP between a server
// that trusts one CA for its clients and clients holding various
// certificates.
func TestTLSHandshake(t *testing.T) {
	p := newTestPKI(t)
	_, rootServer := issue(t, p.root, RoleNode)
	_, etcdServer := issue(t, p.etcd, RoleConsensus)
	_, nodeClient := issue(t, p.root, RoleNode)
	_, etcdClient := issue(t, p.etcd, RoleConsensus)
	_, foreignClient := issue(t, p.foreign, RoleNode)

	for _, tc := range []struct {
		name        string
		server      tls.Certificate
		clientCAs   []*x509.Certificate
		client      tls.Certificate
		clientRoots []*x509.Certificate
		wantErr     bool
	}{
		{"node client, root-trusting server", rootServer, []*x509.Certificate{p.root.Cert}, nodeClient, []*x509.Certificate{p.root.Cert}, false},
		{"etcd client, etcd server", etcdServer, []*x509.Certificate{p.etcd.Cert}, etcdClient, []*x509.Certificate{p.etcd.Cert}, false},
		{"foreign client refused", rootServer, []*x509.Certificate{p.root.Cert}, foreignClient, []*x509.Certificate{p.root.Cert}, true},
		{"node client refused by etcd server", etcdServer, []*x509.Certificate{p.etcd.Cert}, nodeClient, []*x509.Certificate{p.etcd.Cert}, true},
		{"client refuses a server of another CA", rootServer, []*x509.Certificate{p.root.Cert}, nodeClient, []*x509.Certificate{p.foreign.Cert}, true},
		{"client without certificate refused", rootServer, []*x509.Certificate{p.root.Cert}, tls.Certificate{}, []*x509.Certificate{p.root.Cert}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := handshake(t, ServerTLS(tc.server, tc.clientCAs...), ClientTLS(tc.client, tc.clientRoots...))
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Errorf("handshake: %v, want error: %v", err, tc.wantErr)
			}
		})
	}
}

// handshake connects a client to a server over loopback and exchanges one
// message. With TLS 1.3 the client finishes its handshake before the server
// has checked the client's certificate, so only the read of the server's
// reply shows whether the server accepted it.
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serverDone := make(chan struct{})
	go func() {
		defer close(serverDone)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if err := conn.(*tls.Conn).Handshake(); err != nil {
			return
		}
		_, _ = conn.Write([]byte("ok"))
	}()
	defer func() { <-serverDone }()

	conn, err := tls.Dial("tcp", ln.Addr().String(), clientCfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	buf := make([]byte, 2)
	if _, err := conn.Read(buf); err != nil {
		return err
	}
	if string(buf) != "ok" {
		t.Fatalf("server said %q", buf)
	}
	return nil
}
