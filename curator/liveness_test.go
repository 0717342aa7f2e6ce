package curator

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// TestLivenessDigestsCarrySessions: a node's session through a follower is
// switched to the follower's liveness digests. The leader then reads no
// heartbeat on the node's stream, yet hears the node from the digests, and
// the node's heartbeats are answered in the leader's name; after a
// failover the follower switches the stream again, to the new leader.
func TestLivenessDigestsCarrySessions(t *testing.T) {
	c := newTestCluster(t)
	three := startThree(c)
	first, second, third := three.first, three.second, three.third
	w1, _ := c.register(three.anon, c.token(three.admin, "worker"), "w1")
	f := followSession(t, dial(t, three.m3.address, w1.tlsCert(), c.root.Cert))
	f.answerFrom(c.first.id)
	waitFor(t, "m3 switches the session to digests", func() bool { return metricValue(t, third.metrics.SessionsDigested) >= 1 })
	// Two answers after the switch: the leader has read the heartbeat
	// that switched the stream (answered before the digests' answers, a
	// tenth of a second apart).
	drain(f.answers)
	f.answerFrom(c.first.id)
	f.answerFrom(c.first.id)
	read := metricValue(t, first.metrics.SessionHeartbeats)
	if got := f.digestedOver(first, c.first.id, 10); got < 8 {
		t.Errorf("the leader took %v heartbeats in digests while the node had 10 answered, want 8 or more", got)
	}
	if got := metricValue(t, first.metrics.SessionHeartbeats); got != read {
		t.Errorf("the leader read %v heartbeats on the node's stream after it was switched to digests, want 0", got-read)
	}
	if at, ok := first.currentLeader().Heartbeats.Get(w1.id); !ok || time.Since(at) > 3*testHeartbeat {
		t.Errorf("the leader last heard the node at %v (heard: %v), want within %v", at, ok, 3*testHeartbeat)
	}

	three.stopFirst()
	waitFor(t, "m2 leads", second.IsLeader)
	f.answerFrom(three.m2.id)
	waitFor(t, "m3 switches the session to digests for the new leader", func() bool { return metricValue(t, third.metrics.SessionsDigested) >= 2 })
	if got := f.digestedOver(second, three.m2.id, 10); got < 8 {
		t.Errorf("the new leader took %v heartbeats in digests while the node had 10 answered, want 8 or more", got)
	}
	if got := c.loadNode(w1.id).Status; got != pb.NodeStatus_NODE_STATUS_READY {
		t.Errorf("node status %s after the failover, want READY", got)
	}
}

// digestedOver waits for n answers from leader to the node's heartbeats,
// none received before the call, and returns how many heartbeats svc took
// in liveness digests meanwhile. Up to two of the n may be for heartbeats
// outside that count: the one that switched the stream to digests
// (answered by the leader itself) and the one digest in flight when the
// count began (a follower holds one a node).
func (f *sessionFollower) digestedOver(svc *Service, leader string, n int) float64 {
	f.t.Helper()
	before := metricValue(f.t, svc.metrics.LivenessHeartbeats)
	drain(f.answers)
	for range n {
		f.answerFrom(leader)
	}
	return metricValue(f.t, svc.metrics.LivenessHeartbeats) - before
}

// TestDigestsAnswerOnlyWhatTheLeaderTook: every connection to the leader
// freezes (nothing read or written; the leader itself goes on leading). A
// follower answers a node's heartbeat only once the leader took the digest
// that named it, so it answers nothing while the leader is frozen (the node
// would move to another manager at its deadline), and answers again in the
// leader's name once it thaws.
func TestDigestsAnswerOnlyWhatTheLeaderTook(t *testing.T) {
	c := newTestCluster(t)
	gate := newFreezeGate()
	defer gate.thaw()
	first, err := New(c.curatorConfig(c.first, c.cli))
	if err != nil {
		t.Fatal(err)
	}
	first.listen = func(network, address string) (net.Listener, error) {
		l, err := net.Listen(network, address)
		return freezingListener{Listener: l, gate: gate}, err
	}
	supervisor.TestHarness(t, first.Run)
	waitFor(t, "the first curator leads", first.IsLeader)
	admin, anon := c.dialFirst()
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	follower, _ := c.startCurator(m2, c.etcdClient())
	w1, _ := c.register(anon, c.token(admin, "worker"), "w1")
	f := followSession(t, dial(t, m2.address, w1.tlsCert(), c.root.Cert))
	f.answerFrom(c.first.id)
	waitFor(t, "m2 switches the session to digests", func() bool { return metricValue(t, follower.metrics.SessionsDigested) >= 1 })
	f.answerFrom(c.first.id)

	gate.freeze()
	frozen := time.Now()
	// The answers to reports the leader acknowledged just before may
	// still come for a moment.
	const settle = 200 * time.Millisecond
	for end := time.After(3 * time.Second); ; {
		select {
		case resp := <-f.answers:
			if resp.Seq > 0 && time.Since(frozen) > settle {
				t.Fatalf("heartbeat %d answered in %s's name %v after the leader froze: the follower answered what the leader did not take", resp.Seq, resp.Leader, time.Since(frozen).Round(time.Millisecond))
			}
			continue
		case err := <-f.ended:
			t.Fatalf("the session ended: %v", err)
		case <-end:
		}
		break
	}
	gate.thaw()
	f.answerFrom(c.first.id)
	if !first.IsLeader() {
		t.Error("the frozen curator no longer leads: the test froze more than its connections")
	}
}

// TestLivenessOnlyFromManagers: a worker that reports liveness (its own, or
// another node's) is refused, and nobody is heard from its report.
func TestLivenessOnlyFromManagers(t *testing.T) {
	c := newTestCluster(t)
	leader := c.startLeader()
	admin, anon := c.dialFirst()
	w1, _ := c.register(anon, c.token(admin, "worker"), "w1")
	w2, _ := c.register(anon, c.token(admin, "worker"), "w2")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	stream, err := pb.NewCuratorClient(dial(t, c.first.address, w1.tlsCert(), c.root.Cert)).Liveness(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The leader may end the stream before the report is sent: Send then
	// says io.EOF, and Recv the stream's status.
	if err := stream.Send(&pb.LivenessReport{Batch: 1, NodeIds: []string{w1.id, w2.id}}); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a worker's liveness report: %v, want PermissionDenied", err)
	}
	for _, w := range []*testNode{w1, w2} {
		if at, heard := leader.currentLeader().Heartbeats.Get(w.id); heard {
			t.Errorf("node %s heard at %v from a worker's report", w.id, at)
		}
	}
}

// freezeGate stops every connection of a freezingListener while frozen.
type freezeGate struct {
	mu   sync.Mutex
	open chan struct{}
}

func newFreezeGate() *freezeGate {
	g := &freezeGate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *freezeGate) freeze() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *freezeGate) thaw() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *freezeGate) wait() {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	<-open
}

// freezingListener's connections read and write nothing while its gate is
// frozen: what arrives meanwhile is held until it thaws.
type freezingListener struct {
	net.Listener
	gate *freezeGate
}

func (l freezingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return freezingConn{Conn: conn, gate: l.gate}, nil
}

type freezingConn struct {
	net.Conn
	gate *freezeGate
}

func (c freezingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.gate.wait()
	return n, err
}

func (c freezingConn) Write(b []byte) (int, error) {
	c.gate.wait()
	return c.Conn.Write(b)
}
