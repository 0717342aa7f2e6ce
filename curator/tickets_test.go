package curator

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/transport"
)

// TestManagersShareSessionTickets: two managers' curators derive their
// session ticket keys from the CA's key, so a client that set up its TLS
// session with one resumes it with the other, and is still who it is
// there (an admin's call, forwarded to the leader, is answered).
func TestManagersShareSessionTickets(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, anon := c.dialFirst()
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	c.startCurator(m2, c.etcdClient())

	creds := transport.SharedSessions(pki.ClientTLS(c.adminCert(), c.root.Cert))
	list := func(addr string) (resumed bool, err error) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var p peer.Peer
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if _, err := pb.NewManagementClient(conn).ListNodes(ctx, &pb.ListNodesRequest{}, grpc.Peer(&p)); err != nil {
			return false, err
		}
		return p.AuthInfo.(credentials.TLSInfo).State.DidResume, nil
	}
	// Each curator reads the key when it starts: until then its tickets
	// are its own, and the other cannot take them up.
	var last error
	waitFor(t, "a session set up with the first manager resumes with the second", func() bool {
		if _, err := list(c.first.address); err != nil {
			last = err
			return false
		}
		resumed, err := list(m2.address)
		last = fmt.Errorf("the second manager's call: resumed %v, error %v", resumed, err)
		return err == nil && resumed
	})
	t.Log(last)
	// And back.
	if resumed, err := list(c.first.address); err != nil || !resumed {
		t.Errorf("the first manager again: resumed %v, error %v; want a resumption", resumed, err)
	}
}
