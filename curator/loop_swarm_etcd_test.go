package curator

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// keepBeating sends node heartbeats through conn every testHeartbeat until
// the test ends, opening the stream again whenever it breaks (a leader
// stopped, another leads): the node stays ready across leaders.
func keepBeating(t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			stream, err := pb.NewCuratorClient(conn).Heartbeat(ctx)
			for err == nil {
				err = stream.Send(&pb.HeartbeatRequest{Version: "test"})
				select {
				case <-ctx.Done():
					return
				case <-time.After(testHeartbeat):
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(testHeartbeat):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// setSwarm turns the cluster's Swarm flavor on or off through the
// management API.
func setSwarm(t *testing.T, admin *grpc.ClientConn, on bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	info, err := pb.NewManagementClient(admin).UpdateCluster(ctx, &pb.UpdateClusterRequest{Swarm: &on})
	if err != nil {
		t.Fatal(err)
	}
	if info.Swarm != on {
		t.Fatalf("cluster info says swarm %v after setting it %v", info.Swarm, on)
	}
}

// TestSwarmJoinRequestAndReport: the node-API half of the flavor and the
// join request's act, against real etcd, without a Docker engine. A node
// reports its Swarm node ID; the leader's join request is cleared by a
// new ID; a node cannot take another's Swarm node, nor get the join token
// without a request; and a leader without an engine refuses, saying what
// to do, instead of acting.
func TestSwarmJoinRequestAndReport(t *testing.T) {
	c := newTestCluster(t)
	svc := c.startLeader()
	admin, anon := c.dialFirst()
	tok := c.token(admin, "worker")
	b, _ := c.register(anon, tok, "b")
	d, _ := c.register(anon, tok, "d")
	bConn := dial(t, c.first.address, b.tlsCert(), c.root.Cert)
	dConn := dial(t, c.first.address, d.tlsCert(), c.root.Cert)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	bAPI, dAPI := pb.NewCuratorClient(bConn), pb.NewCuratorClient(dConn)

	// A report writes the ID.
	if _, err := bAPI.ReportSwarmNode(ctx, &pb.ReportSwarmNodeRequest{SwarmNodeId: "aaaaaaaaaaaaaaaaaaaaaaaaa"}); err != nil {
		t.Fatal(err)
	}
	if got := c.loadNode(b.id).SwarmNodeId; got != "aaaaaaaaaaaaaaaaaaaaaaaaa" {
		t.Fatalf("swarm node ID %q after the report", got)
	}
	// Not an ID, or another node's: refused.
	if _, err := dAPI.ReportSwarmNode(ctx, &pb.ReportSwarmNodeRequest{SwarmNodeId: "NOT AN ID"}); err == nil {
		t.Error("a malformed Swarm node ID was taken")
	}
	if _, err := dAPI.ReportSwarmNode(ctx, &pb.ReportSwarmNodeRequest{SwarmNodeId: "aaaaaaaaaaaaaaaaaaaaaaaaa"}); err == nil || !strings.Contains(err.Error(), "own") {
		t.Errorf("node d took node b's Swarm node: %v", err)
	}
	// No token without a request.
	if _, err := bAPI.SwarmJoin(ctx, &pb.SwarmJoinRequest{}); err == nil || !strings.Contains(err.Error(), "no Swarm join request") {
		t.Errorf("SwarmJoin without a request: %v", err)
	}

	// The leader's act: a request, fenced; the same ID again leaves it
	// pending (the engine is in the Swarm, the leader will see it), a new
	// one clears it.
	st := svc.currentLeader()
	func() {
		st.Lead.MuNodes.Lock()
		defer st.Lead.MuNodes.Unlock()
		if err := st.Records.RequestSwarmJoin(ctx, b.id); err != nil {
			t.Fatal(err)
		}
	}()
	if !c.loadNode(b.id).SwarmJoinRequested {
		t.Fatal("no join request in the record")
	}
	// The request with the flavor off: nothing to join.
	if _, err := bAPI.SwarmJoin(ctx, &pb.SwarmJoinRequest{}); err == nil || !strings.Contains(err.Error(), "--swarm") {
		t.Errorf("SwarmJoin with the flavor off: %v", err)
	}
	if _, err := bAPI.ReportSwarmNode(ctx, &pb.ReportSwarmNodeRequest{SwarmNodeId: "aaaaaaaaaaaaaaaaaaaaaaaaa"}); err != nil {
		t.Fatal(err)
	}
	if !c.loadNode(b.id).SwarmJoinRequested {
		t.Error("the same Swarm node ID cleared the join request")
	}
	if _, err := bAPI.ReportSwarmNode(ctx, &pb.ReportSwarmNodeRequest{SwarmNodeId: "bbbbbbbbbbbbbbbbbbbbbbbbb"}); err != nil {
		t.Fatal(err)
	}
	if n := c.loadNode(b.id); n.SwarmJoinRequested || n.SwarmNodeId != "bbbbbbbbbbbbbbbbbbbbbbbbb" {
		t.Errorf("after a new ID: request %v, ID %q", n.SwarmJoinRequested, n.SwarmNodeId)
	}

	// Leaving: refused without a request in the record; with one, the
	// report clears the Swarm node ID (the group loop's sign that the
	// machine may go), and again changes nothing.
	if _, err := bAPI.ReportSwarmNode(ctx, &pb.ReportSwarmNodeRequest{Left: true}); err == nil || !strings.Contains(err.Error(), "does not ask it to leave") {
		t.Errorf("a left report without a request: %v", err)
	}
	func() {
		st.Lead.MuNodes.Lock()
		defer st.Lead.MuNodes.Unlock()
		n := store.CloneNode(st.Reg.Node(b.id))
		n.SwarmLeaveRequested = st.Events.Timestamp()
		if err := store.NodeSave(ctx, st.Lead.Fence, n); err != nil {
			t.Fatal(err)
		}
	}()
	waitFor(t, "the leave request in the leader's view", func() bool { return st.Reg.Node(b.id).GetSwarmLeaveRequested() != nil })
	for range 2 {
		if _, err := bAPI.ReportSwarmNode(ctx, &pb.ReportSwarmNodeRequest{Left: true}); err != nil {
			t.Fatal(err)
		}
		if n := c.loadNode(b.id); n.SwarmNodeId != "" || n.SwarmLeaveRequested == nil {
			t.Errorf("after the left report: ID %q, leave requested %v", n.SwarmNodeId, n.SwarmLeaveRequested)
		}
	}

	// The flavor on, and this curator has no engine: the swarm sync
	// refuses, with what to do, and the join token is not handed out.
	setSwarm(t, admin, true)
	waitFor(t, "the swarm sync to refuse for want of an engine", func() bool {
		events, err := store.EventList(ctx, c.cli, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			if ev.Loop == "swarm-sync" && ev.Action == "refuse" && strings.Contains(ev.Reason, "--docker-socket") {
				t.Logf("event: %s", ev.Reason)
				return true
			}
		}
		return false
	})
	func() {
		st.Lead.MuNodes.Lock()
		defer st.Lead.MuNodes.Unlock()
		if err := st.Records.RequestSwarmJoin(ctx, b.id); err != nil {
			t.Fatal(err)
		}
	}()
	if _, err := bAPI.SwarmJoin(ctx, &pb.SwarmJoinRequest{}); err == nil || !strings.Contains(err.Error(), "--docker-socket") {
		t.Errorf("SwarmJoin on a leader without an engine: %v", err)
	}
}

// TestSwarmModeWakesTheSync: setting the cluster's Swarm mode wakes the
// swarm sync at once, not at its periodic read (a minute here) when no
// node changes meanwhile: with no engine on the leader's node, its refusal
// to act says it looked.
func TestSwarmModeWakesTheSync(t *testing.T) {
	c := newTestCluster(t)
	cfg := c.curatorConfig(c.first, c.cli)
	cfg.SwarmInterval = time.Minute
	c.leadWith(cfg)
	admin, _ := c.dialFirst()
	// The loops' first ticks, and the first node's mark-down (no agent
	// beats for it), with Swarm mode off.
	time.Sleep(2 * time.Second)
	on := time.Now()
	setSwarm(t, admin, true)
	ev := c.swarmEvent(on, "swarm-sync", "refuse", "")
	if took := ev.Time.AsTime().Sub(on); took > 5*time.Second {
		t.Errorf("the swarm sync looked %v after Swarm mode was set, want at once", took.Round(time.Millisecond))
	}
}
