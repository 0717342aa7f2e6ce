package curator

import (
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/curatorproject/curator/proto"
)

// TestForwardWaitsForTheNextLeader: a call a follower forwards to a
// leader that is gone (its port refuses) is forwarded once more to the
// next leader as soon as the election names one, and answered, rather
// than failed back to the caller to go round the managers (whose client
// pauses between rounds: the failover a caller saw), or served by the
// follower itself once it leads, when the election names it. With no
// next leader the call fails as before, once the follower gave up
// waiting.
func TestForwardWaitsForTheNextLeader(t *testing.T) {
	c := newTestCluster(t)
	first, stopFirst := c.startCurator(c.first, c.cli)
	waitFor(t, "the first curator leads", first.IsLeader)
	admin, anon := c.dialFirst()
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	follower, _ := c.startCurator(m2, c.etcdClient())
	waitFor(t, "the follower knows the leader", func() bool { return follower.fwd.knownLeader() != nil })
	real := follower.fwd.knownLeader()
	adminCert := c.adminCert()
	viaFollower := pb.NewManagementClient(dial(t, m2.address, &adminCert, c.root.Cert))

	// A leader that is gone: an address that refuses, under an election
	// key of its own (with no lease: the follower's crash watch would
	// otherwise revoke it, and the real leader's with it).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := l.Addr().String()
	l.Close()
	follower.fwd.learn(&leaderInfo{id: "gone", addr: gone, rev: real.rev - 1})

	named := make(chan time.Time, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		named <- time.Now()
		follower.fwd.learn(real) // the election names the next leader
	}()
	if _, err := viaFollower.ListNodes(callCtx(t), &pb.ListNodesRequest{}); err != nil {
		t.Fatalf("a call forwarded while the leader was gone: %v; want it answered by the next leader", err)
	}
	t.Logf("answered %v after the next leader was named", time.Since(<-named).Round(time.Millisecond))

	// No next leader: the call fails, Unavailable, after the wait.
	follower.fwd.learn(&leaderInfo{id: "gone", addr: gone, rev: real.rev - 1})
	start := time.Now()
	_, err = viaFollower.ListNodes(callCtx(t), &pb.ListNodesRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("a call forwarded to a gone leader with none after it = %v, want Unavailable", err)
	}
	if took := time.Since(start); took < leaderLookupTimeout || took > leaderLookupTimeout+5*time.Second {
		t.Errorf("it failed after %v, want after the follower's wait of %v", took, leaderLookupTimeout)
	}
	follower.fwd.learn(real)

	// The next leader is the follower itself: it serves the call once it
	// leads.
	follower.fwd.learn(&leaderInfo{id: "gone", addr: gone, rev: real.rev - 1})
	go func() {
		time.Sleep(300 * time.Millisecond)
		stopFirst()
	}()
	resp, err := viaFollower.GetClusterInfo(callCtx(t), &pb.ClusterInfoRequest{})
	if err != nil {
		t.Fatalf("a call to a follower the election then named leader: %v; want it served there", err)
	}
	if resp.Leader != m2.id {
		t.Errorf("served with leader %s, want the follower %s", resp.Leader, m2.id)
	}
}
