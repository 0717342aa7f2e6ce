package curator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

// TestSessionOutlivesFailover: a node's heartbeat and watch streams through
// a follower are forwarded again to the next leader when the leader stops,
// and served by the follower itself when it is the next leader: the
// nodes' streams never end, and the new leader answers on them.
func TestSessionOutlivesFailover(t *testing.T) {
	c := newTestCluster(t)
	first, stopFirst := c.startCurator(c.first, c.cli)
	waitFor(t, "the first curator leads", first.IsLeader)
	admin, anon := c.dialFirst()
	// m2 campaigns before m3, so it leads next: a node through m3 is
	// forwarded again, one through m2 is served by m2 itself.
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	second, _ := c.startCurator(m2, c.etcdClient())
	m3, _ := c.register(anon, c.token(admin, "manager"), "m3")
	third, _ := c.startCurator(m3, c.etcdClient())
	waitFor(t, "m2 and m3 know the leader", func() bool { return second.fwd.knownLeader() != nil && third.fwd.knownLeader() != nil })
	w1, _ := c.register(anon, c.token(admin, "worker"), "w1")
	w2, _ := c.register(anon, c.token(admin, "worker"), "w2")
	through3 := followSession(t, dial(t, m3.address, w1.tlsCert(), c.root.Cert))
	through2 := followSession(t, dial(t, m2.address, w2.tlsCert(), c.root.Cert))
	for _, n := range []*sessionFollower{through3, through2} {
		n.answerFrom(c.first.id)
		n.watchMessage()
	}
	c.waitStatus(w1.id, pb.NodeStatus_NODE_STATUS_READY)
	c.waitStatus(w2.id, pb.NodeStatus_NODE_STATUS_READY)

	for _, n := range []*sessionFollower{through3, through2} {
		drain(n.watched)
	}
	stopFirst()
	waitFor(t, "m2 leads", second.IsLeader)
	for _, n := range []*sessionFollower{through3, through2} {
		n.answerFrom(m2.id)
		// The watch went on too: the new leader sends the node's
		// record, on the same stream.
		n.watchMessage()
	}
	// m3 forwarded both streams of w1 again, m2 took over both of w2's.
	for name, svc := range map[string]*Service{"m3": third, "m2": second} {
		if got := metricValue(t, svc.metrics.SessionsReforwarded); got < 2 {
			t.Errorf("%s forwarded %v session streams again, want 2 or more", name, got)
		}
	}
	// The nodes stay ready throughout: the new leader heard them.
	for _, w := range []*testNode{w1, w2} {
		if got := c.loadNode(w.id).Status; got != pb.NodeStatus_NODE_STATUS_READY {
			t.Errorf("node %s status %s after the failover, want READY", w.id, got)
		}
	}
}

// sessionFollower is a node's session, as raw streams: a heartbeat every
// interval, a watch, and what came back.
type sessionFollower struct {
	t       *testing.T
	answers chan *pb.HeartbeatResponse
	watched chan *pb.WatchNodeResponse
	ended   chan error
}

func followSession(t *testing.T, conn *grpc.ClientConn) *sessionFollower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hb, err := pb.NewCuratorClient(conn).Heartbeat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watch, err := pb.NewCuratorClient(conn).WatchNode(ctx, &pb.WatchNodeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	f := &sessionFollower{t: t, answers: make(chan *pb.HeartbeatResponse, 100), watched: make(chan *pb.WatchNodeResponse, 100), ended: make(chan error, 3)}
	go func() {
		for {
			resp, err := hb.Recv()
			if err != nil {
				f.ended <- fmt.Errorf("heartbeat stream: %w", err)
				return
			}
			f.answers <- resp
		}
	}()
	go func() {
		for {
			resp, err := watch.Recv()
			if err != nil {
				f.ended <- fmt.Errorf("watch stream: %w", err)
				return
			}
			f.watched <- resp
		}
	}()
	go func() {
		tick := time.NewTicker(testHeartbeat)
		defer tick.Stop()
		for seq := uint64(1); ; seq++ {
			if err := hb.Send(&pb.HeartbeatRequest{Version: "test", Seq: seq}); err != nil {
				f.ended <- fmt.Errorf("heartbeat send: %w", err)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return f
}

// answerFrom waits for a heartbeat answered by leader.
func (f *sessionFollower) answerFrom(leader string) {
	f.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case resp := <-f.answers:
			if resp.Leader == leader && resp.Seq > 0 {
				return
			}
		case err := <-f.ended:
			f.t.Fatalf("the session ended: %v", err)
		case <-deadline:
			f.t.Fatalf("no heartbeat answered by %s within 20s", leader)
		}
	}
}

// watchMessage waits for a message of the watch.
func (f *sessionFollower) watchMessage() {
	f.t.Helper()
	select {
	case resp := <-f.watched:
		if resp.GetNode() == nil {
			f.t.Errorf("the watch sent %v, want the node's record", resp)
		}
	case err := <-f.ended:
		f.t.Fatalf("the session ended: %v", err)
	case <-time.After(10 * time.Second):
		f.t.Fatal("nothing on the watch within 10s")
	}
}

// drain empties ch of what it holds now.
func drain(ch chan *pb.WatchNodeResponse) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// TestSessionAdmission: a manager admits session set-ups at its rate and
// refuses the others with Unavailable, SESSIONS_PACED and a RetryInfo that
// says when to come back; the refused set-up is admitted at that time.
func TestSessionAdmission(t *testing.T) {
	c := newTestCluster(t)
	cfg := c.curatorConfig(c.first, c.cli)
	cfg.SessionRate, cfg.SessionBurst = 1, 1
	c.leadWith(cfg)
	admin, anon := c.dialFirst()
	w1, _ := c.register(anon, c.token(admin, "worker"), "w1")
	w2, _ := c.register(anon, c.token(admin, "worker"), "w2")
	w3, _ := c.register(anon, c.token(admin, "worker"), "w3")

	open := func(n *testNode) error {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		stream, err := pb.NewCuratorClient(dial(t, c.first.address, n.tlsCert(), c.root.Cert)).Heartbeat(ctx)
		if err != nil {
			return err
		}
		if err := stream.Send(&pb.HeartbeatRequest{Version: "test"}); err != nil {
			return err
		}
		_, err = stream.Recv()
		return err
	}
	// A burst of one above the rate: two at once.
	for _, n := range []*testNode{w1, w2} {
		if err := open(n); err != nil {
			t.Fatalf("session within the burst: %v", err)
		}
	}
	err := open(w3)
	st := status.Convert(err)
	reason, retry := statusMarks(st)
	if st.Code() != codes.Unavailable || reason != spec.SessionsPacedReason || retry <= 0 || retry > time.Second {
		t.Fatalf("third session at once: %v (reason %q, retry %s), want Unavailable, %s, a retry within 1s", err, reason, retry, spec.SessionsPacedReason)
	}
	time.Sleep(retry)
	if err := open(w3); err != nil {
		t.Errorf("third session, back when told (%s): %v", retry, err)
	}
}
