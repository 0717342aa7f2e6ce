package curator

import (
	"context"
	"fmt"
	"slices"
	"sync"
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
	// m2 leads next: a node through m3 is forwarded again, one through m2
	// is served by m2 itself.
	three := startThree(c)
	admin, anon, m2, m3, second, third, stopFirst := three.admin, three.anon, three.m2, three.m3, three.second, three.third, three.stopFirst
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
		// The new leader sends the node's record, on the same
		// stream.
		n.watchMessage()
	}
	// m3 forwarded w1's stream again, m2 took over w2's.
	for name, svc := range map[string]*Service{"m3": third, "m2": second} {
		if got := metricValue(t, svc.metrics.SessionsReforwarded); got < 1 {
			t.Errorf("%s forwarded %v session streams again, want 1 or more", name, got)
		}
	}
	// The nodes stay ready throughout: the new leader heard them.
	for _, w := range []*testNode{w1, w2} {
		if got := c.loadNode(w.id).Status; got != pb.NodeStatus_NODE_STATUS_READY {
			t.Errorf("node %s status %s after the failover, want READY", w.id, got)
		}
	}
}

// TestReplayedHeartbeatIsNoNews: a forwarder that opens a node's session
// again to a new leader sends the node's last heartbeat first, and the new
// leader answers it, but takes it for no news of the node: a node frozen
// since (its stream open, nothing sent) is not heard by the new leader,
// while a node that goes on beating is. (The chaos suite's regression: a
// frozen worker read as alive to the new leader, the group's count of
// unhealthy machines fell under its ceiling, and a repair destroyed the
// other frozen one.)
func TestReplayedHeartbeatIsNoNews(t *testing.T) {
	c := newTestCluster(t)
	three := startThree(c)
	admin, anon, m2, m3, second, stopFirst := three.admin, three.anon, three.m2, three.m3, three.second, three.stopFirst
	frozen, _ := c.register(anon, c.token(admin, "worker"), "frozen")
	beating, _ := c.register(anon, c.token(admin, "worker"), "beating")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hb, err := pb.NewCuratorClient(dial(t, m3.address, frozen.tlsCert(), c.root.Cert)).Heartbeat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := hb.Send(&pb.HeartbeatRequest{Version: "test", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	// answered waits for the answer to heartbeat 1 from leader.
	answered := func(leader string) {
		t.Helper()
		for {
			resp, err := hb.Recv()
			if err != nil {
				t.Fatalf("the frozen node's session ended: %v", err)
			}
			if resp.Seq == 1 && resp.Leader == leader {
				return
			}
		}
	}
	answered(c.first.id)
	through3 := followSession(t, dial(t, m3.address, beating.tlsCert(), c.root.Cert))
	through3.answerFrom(c.first.id)

	stopFirst()
	waitFor(t, "m2 leads", second.IsLeader)
	// The forwarder sent heartbeat 1 again, and the new leader answered.
	answered(m2.id)
	// Two answers: at most the first is to a replayed heartbeat.
	through3.answerFrom(m2.id)
	through3.answerFrom(m2.id)
	st := second.currentLeader()
	if st == nil {
		t.Fatal("m2 does not lead")
	}
	if at, heard := st.Heartbeats.Get(frozen.id); heard {
		t.Errorf("the new leader heard the frozen node at %v: its replayed heartbeat taken for news", at)
	}
	if _, heard := st.Heartbeats.Get(beating.id); !heard {
		t.Error("the new leader did not hear the node that goes on beating")
	}
}

// threeCurators is a cluster of three curators, the first leading; m2
// campaigned before m3, so it leads next.
type threeCurators struct {
	first, second, third *Service
	stopFirst            context.CancelFunc
	m2, m3               *testNode
	admin, anon          *grpc.ClientConn
}

// startThree starts the first curator, then m2's and m3's, and waits
// until both know the leader.
func startThree(c *testCluster) threeCurators {
	t := c.t
	t.Helper()
	first, stopFirst := c.startCurator(c.first, c.cli)
	waitFor(t, "the first curator leads", first.IsLeader)
	admin, anon := c.dialFirst()
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	second, _ := c.startCurator(m2, c.etcdClient())
	m3, _ := c.register(anon, c.token(admin, "manager"), "m3")
	third, _ := c.startCurator(m3, c.etcdClient())
	waitFor(t, "m2 and m3 know the leader", func() bool { return second.fwd.knownLeader() != nil && third.fwd.knownLeader() != nil })
	return threeCurators{first: first, second: second, third: third, stopFirst: stopFirst, m2: m2, m3: m3, admin: admin, anon: anon}
}

// sessionFollower is a node's session, as a raw stream: a heartbeat every
// interval, and what came back (the answers, and what they carried of the
// node's record).
type sessionFollower struct {
	t       *testing.T
	answers chan *pb.HeartbeatResponse
	watched chan *pb.WatchNodeResponse
	ended   chan error

	mu sync.Mutex
	// got is every answer to a heartbeat (seq > 0), in order.
	got []*pb.HeartbeatResponse
}

// answered is every answer to a heartbeat the node got so far.
func (f *sessionFollower) answered() []*pb.HeartbeatResponse {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

func followSession(t *testing.T, conn *grpc.ClientConn) *sessionFollower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hb, err := pb.NewCuratorClient(conn).Heartbeat(ctx)
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
			if resp.Watch != nil {
				f.watched <- resp.Watch
			}
			if resp.Seq > 0 {
				f.mu.Lock()
				f.got = append(f.got, resp)
				f.mu.Unlock()
			}
			f.answers <- resp
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

// watchMessage waits for an answer that carries the node's record.
func (f *sessionFollower) watchMessage() {
	f.t.Helper()
	select {
	case resp := <-f.watched:
		if resp.GetNode() == nil {
			f.t.Errorf("the session carried %v, want the node's record", resp)
		}
	case err := <-f.ended:
		f.t.Fatalf("the session ended: %v", err)
	case <-time.After(10 * time.Second):
		f.t.Fatal("no record of the node carried within 10s")
	}
}

// drain empties ch of what it holds now.
func drain[T any](ch chan T) {
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
// says when to come back, noting the knock; the refused set-up is
// admitted at that time.
func TestSessionAdmission(t *testing.T) {
	c := newTestCluster(t)
	cfg := c.curatorConfig(c.first, c.cli)
	cfg.SessionRate, cfg.SessionBurst = 1, 1
	svc, _ := c.leadWith(cfg)
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
	// The refused node knocked: the leader's health loop counts it as
	// still arriving.
	if k := svc.knocks.Last(); k.IsZero() || time.Since(k) > 5*time.Second {
		t.Errorf("after a paced set-up, the last knock is %v, want just now", k)
	}
	time.Sleep(retry)
	if err := open(w3); err != nil {
		t.Errorf("third session, back when told (%s): %v", retry, err)
	}
}
