package curator

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
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
//
// What is checked is the digests' promise, on the history of the
// curators' answers and takes (digestHistory), not a count: every answer
// the node got in a leader's name was given by that leader, or by the
// follower once that leader took a digest naming the node (one take per
// answer); after the heartbeat that switched the stream, the leader
// answers none itself. (A count of takes against answers, as this test
// once made, also counts what the promise does not speak of: answers the
// leader gave itself to heartbeats forwarded before the switch, still in
// flight when the count began.)
func TestLivenessDigestsCarrySessions(t *testing.T) {
	c := newTestCluster(t)
	three := startThree(c)
	first, second, third := three.first, three.second, three.third
	h := traceDigests(t, first, second, third)
	w1, _ := c.register(three.anon, c.token(three.admin, "worker"), "w1")
	f := followSession(t, dial(t, three.m3.address, w1.tlsCert(), c.root.Cert))
	f.answerFrom(c.first.id)
	waitFor(t, "m3 switches the session to digests", func() bool { return metricValue(t, third.metrics.SessionsDigested) >= 1 })
	read := h.waitDigested(t, f, w1.id, c.first.id, 10, func() float64 { return metricValue(t, first.metrics.SessionHeartbeats) })
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
	h.waitDigested(t, f, w1.id, three.m2.id, 10, nil)
	if got := c.loadNode(w1.id).Status; got != pb.NodeStatus_NODE_STATUS_READY {
		t.Errorf("node status %s after the failover, want READY", got)
	}
}

// digestHistory is the history the digests' promise speaks of: the
// curators' livenessEvents in the order they happened (each is recorded
// before what it causes: a take before its acknowledgement, an answer
// before it is sent).
type digestHistory struct {
	mu     sync.Mutex
	events []livenessEvent
}

// traceDigests records the liveness events of svcs until the test ends.
func traceDigests(t *testing.T, svcs ...*Service) *digestHistory {
	h := &digestHistory{}
	record := func(ev livenessEvent) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.events = append(h.events, ev)
	}
	for _, s := range svcs {
		s.livenessTrace.Store(&record)
	}
	t.Cleanup(func() {
		for _, s := range svcs {
			s.livenessTrace.Store(nil)
		}
	})
	return h
}

// digestVerdict is what check found of a node's session: for each
// leader, the seq of the heartbeat that switched the stream to digests
// (0: none yet), and how many answers the node got in its name to later
// heartbeats (each given by a follower for a digest the leader took).
type digestVerdict struct {
	switchedAt map[string]uint64
	digested   map[string]int
}

// check holds the history of node's session, with the answers it got,
// to the promise: every answer in a leader's name was given by that
// leader, or by a follower after that leader took a digest naming the
// node that no other answer was given for; and after the heartbeat that
// switched the stream to digests, the leader answers none itself.
func (h *digestHistory) check(node string, got []*pb.HeartbeatResponse) (digestVerdict, error) {
	h.mu.Lock()
	events := slices.Clone(h.events)
	h.mu.Unlock()
	type answer struct {
		leader string
		seq    uint64
	}
	here, forLeader := map[answer]bool{}, map[answer]bool{}
	takes := map[string]int{} // a leader's takes naming node, not yet answered for
	v := digestVerdict{switchedAt: map[string]uint64{}, digested: map[string]int{}}
	for i, ev := range events {
		switch {
		case ev.kind == took:
			for _, id := range ev.ids {
				if id == node {
					takes[ev.manager]++
				}
			}
		case ev.node != node:
		case ev.kind == answeredHere:
			if sw := v.switchedAt[ev.manager]; sw != 0 && ev.seq > sw {
				return v, fmt.Errorf("event %d: leader %s answered heartbeat %d itself, after heartbeat %d switched the stream to digests", i, ev.manager, ev.seq, sw)
			}
			here[answer{ev.manager, ev.seq}] = true
			if ev.follow {
				v.switchedAt[ev.manager] = ev.seq
			}
		case ev.kind == answeredFor:
			if takes[ev.manager] == 0 {
				return v, fmt.Errorf("event %d: a follower answered heartbeat %d in %s's name, and %s took no digest naming the node that was not answered for already", i, ev.seq, ev.manager, ev.manager)
			}
			takes[ev.manager]--
			forLeader[answer{ev.manager, ev.seq}] = true
		}
	}
	for _, r := range got {
		a := answer{r.Leader, r.Seq}
		switch sw := v.switchedAt[r.Leader]; {
		case forLeader[a] && sw != 0 && r.Seq > sw:
			v.digested[r.Leader]++
		case here[a], forLeader[a]:
		default:
			return v, fmt.Errorf("the node got an answer to heartbeat %d in %s's name that neither %s nor a follower gave", r.Seq, r.Leader, r.Leader)
		}
	}
	return v, nil
}

// waitDigested waits until node's session (f) got n answers in leader's
// name to heartbeats after the one that switched it to digests, failing
// the test as soon as the history breaks the promise. before, if set, is
// read once the switch is in the history, and returned.
func (h *digestHistory) waitDigested(t *testing.T, f *sessionFollower, node, leader string, n int, before func() float64) float64 {
	t.Helper()
	var read float64
	var broken error
	waitFor(t, fmt.Sprintf("%d answers in %s's name from its digests", n, leader), func() bool {
		v, err := h.check(node, f.answered())
		if err != nil {
			broken = err
			return true
		}
		if before != nil && v.switchedAt[leader] != 0 {
			read, before = before(), nil
		}
		return v.digested[leader] >= n
	})
	if broken != nil {
		t.Fatalf("the digests' promise is broken: %v", broken)
	}
	return read
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
