package node

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"

	"github.com/curatorproject/curator/pki"
)

// TestPickSkipsASilentManager: with the first choice a manager that
// accepts connections and never answers (a frozen process, or its packets
// dropped past the SYN), pick dials the next a quarter of the wait later
// and picks it as soon as its TLS connection is up, and closes the
// connection it dialled to the silent one. A first choice that is up is
// picked at once.
func TestPickSkipsASilentManager(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: "server", Role: pki.RoleNode, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	good, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(pki.ServerTLS(pki.TLSCertificate(cert, key, ca.Cert), ca.Cert))))
	go srv.Serve(good)
	t.Cleanup(srv.Stop)
	// A silent manager: TCP accepts, nothing ever answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()

	ckey, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	ccert, err := ca.Issue(pki.CertRequest{PublicKey: ckey.Public(), NodeID: "client", Role: pki.RoleNode})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(SessionConfig{TLS: pki.ClientTLS(pki.TLSCertificate(ccert, ckey), ca.Cert), Managers: func() []string { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	const wait = 2 * time.Second
	start := time.Now()
	got := s.conns.pick(context.Background(), []string{silent.Addr().String(), good.Addr().String()}, wait)
	took := time.Since(start)
	if got != good.Addr().String() {
		t.Fatalf("picked %s, want the manager that answers, %s", got, good.Addr())
	}
	if took < wait/4 || took > wait/2 {
		t.Errorf("picked after %s, want just after the head start of %s", took, wait/4)
	}
	s.conns.mu.Lock()
	_, kept := s.conns.conns[silent.Addr().String()]
	s.conns.mu.Unlock()
	if kept {
		t.Error("the connection dialled to the silent manager was kept")
	}

	// Now up: picked at once, even second in line.
	start = time.Now()
	if got := s.conns.pick(context.Background(), []string{good.Addr().String(), silent.Addr().String()}, wait); got != good.Addr().String() {
		t.Errorf("picked %s, want %s", got, good.Addr())
	}
	if took := time.Since(start); took > wait/8 {
		t.Errorf("a manager already up was picked after %s", took)
	}
	c, err := s.conns.conn(good.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if st := c.GetState(); st != connectivity.Ready {
		t.Errorf("the connection to the picked manager is %s, want READY", st)
	}
	if _, err := NewSession(SessionConfig{Managers: func() []string { return nil }}); err == nil {
		t.Error("a session without TLS was accepted")
	}
	if _, err := NewSession(SessionConfig{TLS: pki.ClientTLS(pki.TLSCertificate(ccert, ckey), ca.Cert)}); err == nil {
		t.Error("a session without a manager list was accepted")
	}
}
