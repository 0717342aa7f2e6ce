package curator

import (
	"context"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/curatorproject/curator/proto"
)

// TestRemovedNodeLosesItsStreams: a node's certificate is checked when it
// opens a stream; removing the node must also end the session stream it
// has open, at its next heartbeat, never answered.
func TestRemovedNodeLosesItsStreams(t *testing.T) {
	admin, n, node := workerOfALeader(t)

	ctx, cancel := context.WithCancel(callCtx(t))
	defer cancel()
	hb, err := node.Heartbeat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := hb.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if first.Watch.GetNode().GetId() != n.id || len(first.Watch.GetManagers()) == 0 {
		t.Fatalf("the session's first answer carries %v, want the node's record and the managers", first.Watch)
	}
	if _, err := pb.NewManagementClient(admin).RemoveNode(callCtx(t), &pb.RemoveNodeRequest{Id: n.id, Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := hb.Send(&pb.HeartbeatRequest{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := hb.Recv()
		if err != nil {
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("session stream after the node's removal: %v, want PermissionDenied", err)
			}
			break
		}
		if resp.Seq != 0 {
			t.Fatalf("heartbeat %d of a removed node answered", resp.Seq)
		}
	}
	// And it cannot open a new one.
	hb2, err := node.Heartbeat(ctx)
	if err == nil {
		_, err = hb2.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("new session of a removed node: %v, want PermissionDenied", err)
	}
}

// TestHeartbeatStreamHoldsOneGoroutine: at a fleet's size the leader holds
// a session stream per node, and every goroutine beside it is a stack per
// node: the handler reads its stream itself, and changes are pushed by
// senders that end once they have sent. (A node held three: the handler,
// a receive loop beside it, and a watch stream's handler.)
func TestHeartbeatStreamHoldsOneGoroutine(t *testing.T) {
	_, _, node := workerOfALeader(t)
	ctx, cancel := context.WithCancel(callCtx(t))
	defer cancel()
	const streams = 20
	for range streams {
		hb, err := node.Heartbeat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := hb.Send(&pb.HeartbeatRequest{Seq: 1}); err != nil {
			t.Fatal(err)
		}
		for { // the greeting, a push maybe, and the answer
			resp, err := hb.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if resp.Seq == 1 {
				break
			}
		}
	}
	var dump strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&dump, 2); err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, g := range strings.Split(dump.String(), "\n\n") {
		if strings.Contains(g, "(*nodeAPI).Heartbeat") {
			held++
		}
	}
	if held != streams {
		t.Errorf("%d goroutines in the leader's Heartbeat for %d streams, want one each", held, streams)
	}
}

// TestSessionPushesChanges: a change to a node's record reaches its
// session at once, not at its next heartbeat (the nodes here send none
// after the opening): in a push (seq 0) that carries the node's own
// record, never another's; a change of the manager list reaches every
// session.
func TestSessionPushesChanges(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, anon := c.dialFirst()
	ctx, cancel := context.WithCancel(callCtx(t))
	defer cancel()
	type session struct {
		id  string
		got chan *pb.HeartbeatResponse
	}
	var sessions []session
	for _, name := range []string{"w1", "w2"} {
		n, _ := c.register(anon, c.token(admin, "worker"), name)
		hb, err := pb.NewCuratorClient(dial(t, c.first.address, n.tlsCert(), c.root.Cert)).Heartbeat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := session{id: n.id, got: make(chan *pb.HeartbeatResponse, 100)}
		go func() {
			for {
				resp, err := hb.Recv()
				if err != nil {
					close(s.got)
					return
				}
				s.got <- resp
			}
		}()
		sessions = append(sessions, s)
	}
	// waitFor waits for a message of s that carries what want says,
	// checking each on the way.
	waitFor := func(s session, what string, want func(*pb.WatchNodeResponse) bool) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case resp, ok := <-s.got:
				if !ok {
					t.Fatalf("the session of %s ended", s.id)
				}
				if resp.Seq != 0 {
					t.Fatalf("an answer to heartbeat %d, none sent", resp.Seq)
				}
				if resp.Watch == nil {
					continue
				}
				if resp.Watch.Node.GetId() != s.id {
					t.Fatalf("the session of %s carried the record of %s", s.id, resp.Watch.Node.GetId())
				}
				if want(resp.Watch) {
					return
				}
			case <-deadline:
				t.Fatalf("the session of %s did not carry %s within 5s", s.id, what)
			}
		}
	}
	mgmt := pb.NewManagementClient(admin)
	if _, err := mgmt.UpdateNode(callCtx(t), &pb.UpdateNodeRequest{Id: sessions[0].id, LabelAdd: map[string]string{"rack": "r1"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(sessions[0], "its new label", func(w *pb.WatchNodeResponse) bool { return w.Node.Labels["rack"] == "r1" })
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	for _, s := range sessions {
		waitFor(s, "the new manager", func(w *pb.WatchNodeResponse) bool { return slices.Contains(w.Managers, m2.address) })
	}
}

// workerOfALeader starts a leader, registers worker w1 and returns the
// admin's connection, the worker and its client of the leader.
func workerOfALeader(t *testing.T) (*grpc.ClientConn, *testNode, pb.CuratorClient) {
	t.Helper()
	c := newTestCluster(t)
	c.startLeader()
	admin, anon := c.dialFirst()
	n, _ := c.register(anon, c.token(admin, "worker"), "w1")
	return admin, n, pb.NewCuratorClient(dial(t, c.first.address, n.tlsCert(), c.root.Cert))
}
