package transport

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/curatorproject/curator/pki"
	"github.com/curatorproject/curator/pki/pkitest"
)

// TestSharedSessionsResumeAcrossServers: real gRPC servers over TLS, each
// with a certificate of its own. A client with SharedSessions sets up a
// session with one server, and resumes it with another that derives its
// ticket keys from the same secret; that server still sees the client's
// certificate. A server with keys of its own gets a full handshake, as
// before. The server is still checked on a full handshake: a certificate
// that does not name the address dialled, or of another CA, is refused.
func TestSharedSessionsResumeAcrossServers(t *testing.T) {
	ca := pkitest.NewCA(t)
	secret := []byte("the cluster's secret")
	type seen struct {
		resumed bool
		client  string
	}
	// Each server on an address of its own: crypto/tls alone resumes only
	// with the address it set the session up with.
	serve := func(ip string, cert tls.Certificate, clientCA *pki.CA, tickets *pki.SessionTickets) (string, <-chan seen) {
		cfg := pki.ServerTLS(cert, clientCA.Cert)
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		tickets.Serve(cfg)
		calls := make(chan seen, 10)
		srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)), grpc.UnaryInterceptor(
			func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				p, _ := peer.FromContext(ctx)
				st := p.AuthInfo.(credentials.TLSInfo).State
				s := seen{resumed: st.DidResume}
				if len(st.VerifiedChains) > 0 {
					s.client = st.VerifiedChains[0][0].Subject.CommonName
				}
				calls <- s
				return h(ctx, req)
			}))
		healthpb.RegisterHealthServer(srv, health.NewServer())
		lis, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(lis)
		t.Cleanup(srv.Stop)
		return lis.Addr().String(), calls
	}
	shared := func() *pki.SessionTickets {
		tk := pki.NewSessionTickets()
		if err := tk.SetSecret(secret, time.Now()); err != nil {
			t.Fatal(err)
		}
		return tk
	}
	a, aSeen := serve("127.0.0.1", ca.Issue(t, "a", net.IPv4(127, 0, 0, 1)), ca.CA, shared())
	b, bSeen := serve("127.0.0.2", ca.Issue(t, "b", net.IPv4(127, 0, 0, 2)), ca.CA, shared())
	c, cSeen := serve("127.0.0.3", ca.Issue(t, "c", net.IPv4(127, 0, 0, 3)), ca.CA, pki.NewSessionTickets())
	misnamed, _ := serve("127.0.0.4", ca.Issue(t, "misnamed", net.IPv4(127, 0, 0, 9)), ca.CA, pki.NewSessionTickets())
	other := pkitest.NewCA(t)
	stranger, _ := serve("127.0.0.5", other.Issue(t, "stranger", net.IPv4(127, 0, 0, 5)), ca.CA, pki.NewSessionTickets())

	creds := SharedSessions(pki.ClientTLS(ca.Issue(t, "node-1"), ca.Cert))
	call := func(addr string) error {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	for _, step := range []struct {
		name   string
		addr   string
		seen   <-chan seen
		resume bool
	}{
		{"the first server", a, aSeen, false},
		{"another server with the same ticket keys", b, bSeen, true},
		{"a server with keys of its own", c, cSeen, false},
		{"the first again (the session cached is c's, c's keys)", a, aSeen, false},
		{"the second again", b, bSeen, true},
	} {
		if err := call(step.addr); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := <-step.seen
		if got.resumed != step.resume {
			t.Errorf("%s: resumed %v, want %v", step.name, got.resumed, step.resume)
		}
		if got.client != "node-1" {
			t.Errorf("%s: the server sees client %q, want node-1", step.name, got.client)
		}
	}
	for _, bad := range []struct{ name, addr, want string }{
		{"a certificate that does not name the address", misnamed, "127.0.0.4"},
		{"a certificate of another CA", stranger, "unknown authority"},
	} {
		err := call(bad.addr)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want a refusal that says %q", bad.name, err, bad.want)
		}
	}
}

// TestTicketKeysRotateByDay: the keys of a day are the same wherever they
// are derived from the same secret; the next day encrypts with a new key
// and still decrypts with the last TicketDays-1 days' keys.
func TestTicketKeysRotateByDay(t *testing.T) {
	day := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	k1, err := pki.TicketKeys([]byte("s"), day)
	if err != nil {
		t.Fatal(err)
	}
	k1again, _ := pki.TicketKeys([]byte("s"), day.Add(13*time.Hour))
	if k1[0] != k1again[0] {
		t.Error("two derivations on the same day differ")
	}
	k2, _ := pki.TicketKeys([]byte("s"), day.Add(24*time.Hour))
	if k2[0] == k1[0] || k2[1] != k1[0] || k2[pki.TicketDays-1] != k1[pki.TicketDays-2] {
		t.Error("the next day's keys do not start with a new key followed by the day before's")
	}
	other, _ := pki.TicketKeys([]byte("t"), day)
	if other[0] == k1[0] {
		t.Error("another secret derives the same key")
	}
	if _, err := pki.TicketKeys(nil, day); err == nil {
		t.Error("no secret: no error")
	}
}
