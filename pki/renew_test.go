package pki

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"
)

func TestRenewAt(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		name      string
		notBefore time.Time
		notAfter  time.Time
		jitter    float64
		want      time.Time
	}{
		{"90 days, no jitter: two thirds", t0, t0.Add(90 * day), 0, t0.Add(60 * day)},
		{"90 days, most jitter: three fifths", t0, t0.Add(90 * day), 1, t0.Add(54 * day)},
		{"90 days, half jitter", t0, t0.Add(90 * day), 0.5, t0.Add(57 * day)},
		{"30 s", t0, t0.Add(30 * time.Second), 0, t0.Add(20 * time.Second)},
		{"jitter below 0 is 0", t0, t0.Add(30 * time.Second), -3, t0.Add(20 * time.Second)},
		{"jitter above 1 is 1", t0, t0.Add(30 * time.Second), 7, t0.Add(18 * time.Second)},
		{"no life: at once", t0, t0, 0.5, t0},
		{"backwards: at once", t0, t0.Add(-time.Hour), 0.5, t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := renewAt(tc.notBefore, tc.notAfter, tc.jitter); !got.Equal(tc.want) {
				t.Errorf("renewAt = %v, want %v", got.Sub(t0), tc.want.Sub(t0))
			}
		})
	}
}

func TestRetryRenewAfter(t *testing.T) {
	t0 := time.Now()
	for _, tc := range []struct {
		life, want time.Duration
	}{
		{10 * time.Second, time.Second},
		{90 * time.Second, 3 * time.Second},
		{90 * 24 * time.Hour, time.Minute},
	} {
		c := &x509.Certificate{NotBefore: t0, NotAfter: t0.Add(tc.life)}
		if got := RetryRenewAfter(c); got != tc.want {
			t.Errorf("RetryRenewAfter(life %v) = %v, want %v", tc.life, got, tc.want)
		}
	}
}

// A short certificate is backdated by a tenth of its validity, a long one
// by an hour; either way two thirds of its life come after its issue.
func TestIssueBackdate(t *testing.T) {
	p := newTestPKI(t)
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		validity, backdate time.Duration
	}{
		{10 * time.Second, time.Second},
		{90 * 24 * time.Hour, time.Hour},
	} {
		before := time.Now()
		cert, err := p.root.Issue(CertRequest{PublicKey: key.Public(), NodeID: "n", Role: RoleNode, Validity: tc.validity})
		if err != nil {
			t.Fatal(err)
		}
		// Certificates hold whole seconds.
		if got := before.Sub(cert.NotBefore); got < tc.backdate-time.Second || got > tc.backdate+time.Second {
			t.Errorf("validity %v: NotBefore %v before issue, want about %v", tc.validity, got, tc.backdate)
		}
		if at := RenewAt(cert, 1); !at.After(before) {
			t.Errorf("validity %v: renewal at %v, before the issue (%v)", tc.validity, at, before)
		}
	}
}

// A certificate replaced in a CertSource is what the next handshake
// presents, on both sides; a connection made before keeps working.
func TestCertSourceSwap(t *testing.T) {
	p := newTestPKI(t)
	_, server1 := issue(t, p.root, RoleNode)
	_, server2 := issue(t, p.root, RoleNode)
	_, client1 := issue(t, p.root, RoleNode)
	_, client2 := issue(t, p.root, RoleNode)
	srvSrc, cliSrc := NewCertSource(server1), NewCertSource(client1)
	lis, err := tls.Listen("tcp", "127.0.0.1:0", ServerTLSFrom(srvSrc, p.root.Cert))
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	seen := make(chan *x509.Certificate, 4)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				if err := tc.Handshake(); err != nil {
					seen <- nil
					return
				}
				seen <- tc.ConnectionState().PeerCertificates[0]
				buf := make([]byte, 1)
				for {
					if _, err := tc.Read(buf); err != nil {
						return
					}
					if _, err := tc.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	dial := func() (*tls.Conn, *x509.Certificate) {
		t.Helper()
		c, err := tls.Dial("tcp", lis.Addr().String(), ClientTLSFrom(cliSrc, p.root.Cert))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		return c, <-seen
	}
	first, peer := dial()
	defer first.Close()
	if !peer.Equal(client1.Leaf) || !first.ConnectionState().PeerCertificates[0].Equal(server1.Leaf) {
		t.Fatal("first connection: not the first certificates")
	}
	srvSrc.Set(server2)
	cliSrc.Set(client2)
	second, peer := dial()
	defer second.Close()
	if !peer.Equal(client2.Leaf) || !second.ConnectionState().PeerCertificates[0].Equal(server2.Leaf) {
		t.Error("second connection: not the replaced certificates")
	}
	if _, err := first.Write([]byte{2}); err != nil {
		t.Fatalf("first connection after the swap: %v", err)
	}
	if _, err := first.Read(make([]byte, 1)); err != nil {
		t.Fatalf("first connection after the swap: %v", err)
	}
	// A client certificate of another CA is left out, not sent.
	_, foreignTLS := issue(t, p.foreign, RoleNode)
	cliSrc.Set(foreignTLS)
	c, err := tls.Dial("tcp", lis.Addr().String(), ClientTLSFrom(cliSrc, p.root.Cert))
	if err == nil {
		// TLS 1.3: the server's refusal arrives with the first read.
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	if err == nil {
		t.Error("a client without a certificate of the cluster was served")
	}
	if got := <-seen; got != nil {
		t.Errorf("server saw a certificate of %q from a client that should have sent none", got.Subject.CommonName)
	}
}
