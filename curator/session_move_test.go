package curator

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/curatorproject/curator/proto"
)

// TestLeaderSendsDirectSessionsAway: a session that reaches the leader
// directly is asked to move (move_within_ms, four intervals) once the
// leader has led for down-after and another manager is ready; not before,
// not while no other manager is ready and heard by the leader, never the
// leader's own node's, and never a session through a follower.
func TestLeaderSendsDirectSessionsAway(t *testing.T) {
	c := newTestCluster(t)
	leader := c.startLeader()
	admin, anon := c.dialFirst()
	w, _ := c.register(anon, c.token(admin, "worker"), "w1")
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	c.startCurator(m2, c.etcdClient())

	direct := dial(t, c.first.address, w.tlsCert(), c.root.Cert)
	viaFollower := dial(t, m2.address, w.tlsCert(), c.root.Cert)
	own := dial(t, c.first.address, c.first.tlsCert(), c.root.Cert)

	waitFor(t, "the leader has led for down-after", func() bool {
		return time.Since(leader.currentLeader().Heartbeats.ServingSince()) > testDownAfter
	})
	if got := firstMoveWithin(t, direct); got != 0 {
		t.Errorf("no other manager ready: move_within_ms %d, want 0", got)
	}
	startHeartbeats(t, dial(t, c.first.address, m2.tlsCert(), c.root.Cert))
	c.waitStatus(m2.id, pb.NodeStatus_NODE_STATUS_READY)
	want := uint32(sessionMoveWindow * testHeartbeat / time.Millisecond)
	if got := firstMoveWithin(t, direct); got != want {
		t.Errorf("a worker's session straight to the leader: move_within_ms %d, want %d", got, want)
	}
	if got := firstMoveWithin(t, viaFollower); got != 0 {
		t.Errorf("a worker's session through the follower: move_within_ms %d, want 0", got)
	}
	if got := firstMoveWithin(t, own); got != 0 {
		t.Errorf("the leader's own node's session: move_within_ms %d, want 0", got)
	}
	// A manager whose record says ready but that this leader has not
	// heard for down-after (the previous leader's word, say) takes no
	// sessions: asked as of a moment two down-afters from now, while the
	// record still says ready.
	st := leader.currentLeader()
	if got := sessionMoveWithin(st, time.Now().Add(2*testDownAfter)); got != 0 {
		t.Errorf("the only other manager not heard for down-after: move_within_ms %d, want 0", got)
	}
	if got := sessionMoveWithin(st, time.Now()); got != want {
		t.Errorf("the same moment as the sessions above: move_within_ms %d, want %d", got, want)
	}
}

// TestNewLeaderKeepsSessionsWhileArriving: a leader asks no session to move
// before it has led for down-after (a failover's arrivals are not moved
// again).
func TestNewLeaderKeepsSessionsWhileArriving(t *testing.T) {
	c := newTestCluster(t)
	cfg := c.curatorConfig(c.first, c.cli)
	cfg.DownAfter = time.Hour
	cfg.ReapAfter = 2 * time.Hour
	c.leadWith(cfg)
	admin, anon := c.dialFirst()
	w, _ := c.register(anon, c.token(admin, "worker"), "w1")
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	c.startCurator(m2, c.etcdClient())
	startHeartbeats(t, dial(t, c.first.address, m2.tlsCert(), c.root.Cert))
	c.waitStatus(m2.id, pb.NodeStatus_NODE_STATUS_READY)

	if got := firstMoveWithin(t, dial(t, c.first.address, w.tlsCert(), c.root.Cert)); got != 0 {
		t.Errorf("a leader of a minute, down-after an hour: move_within_ms %d, want 0", got)
	}
}

// firstMoveWithin opens a session through conn, sends a heartbeat, and
// returns the first answer's move_within_ms.
func firstMoveWithin(t *testing.T, conn *grpc.ClientConn) uint32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := pb.NewCuratorClient(conn).Heartbeat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.HeartbeatRequest{Version: "test", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return resp.MoveWithinMs
}
