package curator

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/transport"
)

// joinConn is a connection to a curator as a joining node makes it: no
// certificate, its TLS state kept for the proof of the node's key.
type joinConn struct {
	*grpc.ClientConn
	creds *transport.Captured
}

func dialJoin(t *testing.T, address string, cert *tls.Certificate, roots ...*x509.Certificate) joinConn {
	t.Helper()
	creds := transport.Capture(credentials.NewTLS(clientTLS(cert, roots...)))
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.Connect()
	ctx := callCtx(t)
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			t.Fatalf("connection to %s: %v", address, st)
		}
	}
	return joinConn{ClientConn: conn, creds: creds}
}

// proof is key's proof of itself on the connection of cs.
func proof(t *testing.T, cs *tls.ConnectionState, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	m, err := pki.BindingMaterial(cs, der)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := pki.SignBinding(key, m)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// registerProving registers a new node of key through conn, with proof
// (none if nil).
func registerProving(t *testing.T, conn *grpc.ClientConn, key crypto.Signer, token, name string, proof []byte) *pb.RegisterResponse {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	ip := nextIP(t)
	address := net.JoinHostPort(ip, "7000")
	req := &pb.RegisterRequest{Token: token, PublicKey: der, Name: name, Address: address, Version: "test", ConnectionProof: proof}
	// Asked again while there is no leader (a busy host's lease may
	// lapse), as a joining node asks.
	var resp *pb.RegisterResponse
	testenv.Eventually(t, testTimeout, "register "+name, func() error {
		var err error
		resp, err = pb.NewCuratorClient(conn).Register(callCtx(t), req)
		if status.Code(err) != codes.Unavailable && err != nil {
			t.Fatalf("register %s: %v", name, err)
		}
		return err
	})
	return resp
}

// callsAs says as which node conn's heartbeat stream is answered, or the
// error that ended it.
func callsAs(t *testing.T, conn *grpc.ClientConn) (string, error) {
	t.Helper()
	// Asked again while there is no leader, as a node's session does.
	deadline := time.Now().Add(testTimeout)
	for {
		id, err := callsAsOnce(t, conn)
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			return id, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func callsAsOnce(t *testing.T, conn *grpc.ClientConn) (string, error) {
	ctx, cancel := context.WithCancel(callCtx(t))
	defer cancel()
	hb, err := pb.NewCuratorClient(conn).Heartbeat(ctx)
	if err != nil {
		return "", err
	}
	if err := hb.Send(&pb.HeartbeatRequest{Version: "test", Seq: 1}); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	} // io.EOF: the server ended the stream, and Recv says why

	for {
		resp, err := hb.Recv()
		if err != nil {
			return "", err
		}
		if n := resp.GetWatch().GetNode(); n != nil {
			return n.Id, nil
		}
	}
}

// TestJoinConnectionBound: a node whose Register proves its key on its
// connection (pki.BindingMaterial) calls as that node on the same
// connection, without a certificate, at the leader and through a
// follower; and as nothing more than a node. A proof that does not hold
// (another key's, another connection's), a connection that presented a
// certificate, one bound already: nothing is bound, the join succeeds
// all the same, and the connection calls as what it was.
func TestJoinConnectionBound(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, anon := c.dialFirst()
	workerToken := c.token(admin, "worker")
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	follower, _ := c.startCurator(m2, c.etcdClient())
	waitFor(t, "the follower knows the leader", func() bool { return follower.fwd.knownLeader() != nil })

	for _, at := range []struct{ name, address string }{{"leader", c.first.address}, {"follower", m2.address}} {
		t.Run("bound at the "+at.name, func(t *testing.T) {
			jc := dialJoin(t, at.address, nil, c.root.Cert)
			key, _ := newKey(t)
			resp := registerProving(t, jc.ClientConn, key, workerToken, "bound-"+at.name, proof(t, jc.creds.State(), key))
			if !resp.ConnectionBound {
				t.Fatal("a Register that proved its key on its connection was not bound")
			}
			got, err := callsAs(t, jc.ClientConn)
			if err != nil || got != resp.NodeId {
				t.Fatalf("the bound connection's session: node %q, %v; want answered as %s", got, err, resp.NodeId)
			}
			// A node, not more: the management API is refused.
			_, err = pb.NewManagementClient(jc).ListNodes(callCtx(t), &pb.ListNodesRequest{})
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("ListNodes on a bound connection: %v, want PermissionDenied", err)
			}
			// Bound once: another node's proof on it binds nothing, and
			// the connection still calls as the first.
			other, _ := newKey(t)
			again := registerProving(t, jc.ClientConn, other, workerToken, "again-"+at.name, proof(t, jc.creds.State(), other))
			if again.ConnectionBound {
				t.Error("a bound connection was bound again")
			}
			if got, err := callsAs(t, jc.ClientConn); err != nil || got != resp.NodeId {
				t.Errorf("after a second Register: node %q, %v; want still %s", got, err, resp.NodeId)
			}
		})
	}

	refused := func(t *testing.T, conn *grpc.ClientConn, resp *pb.RegisterResponse) {
		t.Helper()
		if resp.ConnectionBound {
			t.Error("bound")
		}
		if resp.NodeId == "" || len(resp.NodeCert) == 0 {
			t.Errorf("the join itself failed: %+v", resp)
		}
		if got, err := callsAs(t, conn); status.Code(err) != codes.PermissionDenied {
			t.Errorf("the connection's session: node %q, %v; want PermissionDenied", got, err)
		}
	}
	t.Run("another key's proof", func(t *testing.T) {
		jc := dialJoin(t, c.first.address, nil, c.root.Cert)
		key, _ := newKey(t)
		other, _ := newKey(t)
		resp := registerProving(t, jc.ClientConn, key, workerToken, "other-key", proof(t, jc.creds.State(), other))
		refused(t, jc.ClientConn, resp)
	})
	t.Run("another connection's proof", func(t *testing.T) {
		jc := dialJoin(t, c.first.address, nil, c.root.Cert)
		elsewhere := dialJoin(t, c.first.address, nil, c.root.Cert)
		key, _ := newKey(t)
		resp := registerProving(t, jc.ClientConn, key, workerToken, "other-conn", proof(t, elsewhere.creds.State(), key))
		refused(t, jc.ClientConn, resp)
		if got, err := callsAs(t, elsewhere.ClientConn); status.Code(err) != codes.PermissionDenied {
			t.Errorf("the connection the proof was made on: node %q, %v; want PermissionDenied", got, err)
		}
	})
	t.Run("no proof", func(t *testing.T) {
		jc := dialJoin(t, c.first.address, nil, c.root.Cert)
		key, _ := newKey(t)
		refused(t, jc.ClientConn, registerProving(t, jc.ClientConn, key, workerToken, "no-proof", nil))
	})
	t.Run("a connection with a certificate", func(t *testing.T) {
		adminCert := c.adminCert()
		jc := dialJoin(t, c.first.address, &adminCert, c.root.Cert)
		key, _ := newKey(t)
		resp := registerProving(t, jc.ClientConn, key, workerToken, "admin-conn", proof(t, jc.creds.State(), key))
		if resp.ConnectionBound {
			t.Error("an admin's connection was bound to a node")
		}
		// Still the admin's.
		if _, err := pb.NewManagementClient(jc).ListNodes(callCtx(t), &pb.ListNodesRequest{}); err != nil {
			t.Errorf("the admin's connection after a Register with a proof: %v", err)
		}
	})
}
