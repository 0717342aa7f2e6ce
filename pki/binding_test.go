package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
)

// tlsPair returns the two ends of one TLS connection over a pipe, the
// server's certificate from the test CA, at most version maxVersion.
func tlsPair(t *testing.T, maxVersion uint16) (client, server tls.ConnectionState) {
	t.Helper()
	p := newTestPKI(t)
	_, serverCert := issue(t, p.root, RoleNode)
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	srv := tls.Server(b, &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12, MaxVersion: maxVersion})
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	cli := tls.Client(a, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, MaxVersion: maxVersion})
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return cli.ConnectionState(), srv.ConnectionState()
}

func TestBinding(t *testing.T) {
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	otherPub, err := x509.MarshalPKIXPublicKey(other.Public())
	if err != nil {
		t.Fatal(err)
	}
	client, server := tlsPair(t, tls.VersionTLS13)
	mine, err := BindingMaterial(&client, pub)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := SignBinding(key, mine)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := BindingMaterial(&server, pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyBinding(key.Public(), theirs, sig); err != nil {
		t.Fatalf("the server could not check the client's proof of its own connection: %v", err)
	}

	// What must not pass: the proof on another connection, under
	// another key, or for another key's material.
	_, server2 := tlsPair(t, tls.VersionTLS13)
	elsewhere, err := BindingMaterial(&server2, pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyBinding(key.Public(), elsewhere, sig); err == nil {
		t.Error("a proof made for one connection passed on another")
	}
	if err := VerifyBinding(other.Public(), theirs, sig); err == nil {
		t.Error("a proof passed under a key that did not make it")
	}
	forOther, err := BindingMaterial(&server, otherPub)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyBinding(key.Public(), forOther, sig); err == nil {
		t.Error("a proof made for one key's material passed for another key's")
	}
	otherSig, err := SignBinding(other, forOther)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyBinding(key.Public(), forOther, otherSig); err == nil {
		t.Error("another key's proof passed as this key's")
	}

	// Refused: TLS 1.2, no handshake, no key, the wrong length.
	old, _ := tlsPair(t, tls.VersionTLS12)
	if _, err := BindingMaterial(&old, pub); err == nil {
		t.Error("TLS 1.2 connection gave binding material")
	}
	if _, err := BindingMaterial(&tls.ConnectionState{}, pub); err == nil {
		t.Error("an unfinished handshake gave binding material")
	}
	if _, err := BindingMaterial(&client, nil); err == nil {
		t.Error("binding material without a key")
	}
	if err := VerifyBinding(key.Public(), theirs[:8], sig); err == nil {
		t.Error("short material passed")
	}
	if _, err := SignBinding(key, theirs[:8]); err == nil {
		t.Error("short material signed")
	}
}
