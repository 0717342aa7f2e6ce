package curator

import (
	"context"
	"testing"

	pb "github.com/curatorproject/curator/proto"
)

// TestUnheardNodeShowsUnknown: after a change of leadership, a node the
// previous leader recorded ready shows unknown in ListNodes and in a
// WatchNodes stream until the new leader hears it, then ready (in the
// watch too, though its record does not change); one that never comes back
// shows unknown until the new leader judges it down.
func TestUnheardNodeShowsUnknown(t *testing.T) {
	c := newTestCluster(t)
	old, stop := c.startCurator(c.first, c.cli)
	waitFor(t, "the first curator leads", old.IsLeader)
	admin, anon := c.dialFirst()
	token := c.token(admin, "worker")
	back, _ := c.register(anon, token, "back")
	gone, _ := c.register(anon, token, "gone")
	hBack := startHeartbeats(t, dial(t, c.first.address, back.tlsCert(), c.root.Cert))
	hGone := startHeartbeats(t, dial(t, c.first.address, gone.tlsCert(), c.root.Cert))
	c.waitStatus(back.id, pb.NodeStatus_NODE_STATUS_READY)
	c.waitStatus(gone.id, pb.NodeStatus_NODE_STATUS_READY)

	// A new leadership: the old curator stops, with both nodes ready in
	// their records and silent.
	hBack.on.Store(false)
	hGone.on.Store(false)
	hBack.cancel()
	hGone.cancel()
	stop()
	svc, _ := c.startCurator(c.first, c.cli)
	waitFor(t, "the new curator leads", svc.IsLeader)
	mgmt := pb.NewManagementClient(admin)
	shown := func(id string) pb.NodeStatus {
		t.Helper()
		resp, err := mgmt.GetNode(callCtx(t), &pb.GetNodeRequest{Id: id})
		if err != nil {
			return -1 // a manager hand-over: ask again
		}
		return resp.GetNode().GetStatus()
	}
	for _, n := range []*testNode{back, gone} {
		if rec := c.loadNode(n.id).Status; rec != pb.NodeStatus_NODE_STATUS_READY {
			t.Fatalf("node %s's record says %v before the new leader judged it, want READY (the old leader's)", n.id, rec)
		}
		if got := shown(n.id); got != pb.NodeStatus_NODE_STATUS_UNKNOWN {
			t.Errorf("node %s, ready by the old leader and unheard by the new one, shows %v, want UNKNOWN", n.id, got)
		}
	}

	// A watch opened now sees back turn ready with its first heartbeat.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	watch, err := mgmt.WatchNodes(ctx, &pb.WatchNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	statusIn := func(resp *pb.WatchNodesResponse, id string) (pb.NodeStatus, bool) {
		for _, v := range resp.Nodes {
			if v.GetNode().GetId() == id {
				return v.GetNode().GetStatus(), true
			}
		}
		return 0, false
	}
	first, err := watch.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := statusIn(first, back.id); !ok || got != pb.NodeStatus_NODE_STATUS_UNKNOWN {
		t.Fatalf("the watch's snapshot shows node %s %v (listed %v), want UNKNOWN", back.id, got, ok)
	}
	startHeartbeats(t, dial(t, c.first.address, back.tlsCert(), c.root.Cert))
	for {
		resp, err := watch.Recv()
		if err != nil {
			t.Fatalf("the watch ended before node %s showed ready: %v", back.id, err)
		}
		if got, ok := statusIn(resp, back.id); ok && got == pb.NodeStatus_NODE_STATUS_READY {
			break
		}
	}
	if got := shown(back.id); got != pb.NodeStatus_NODE_STATUS_READY {
		t.Errorf("node %s, heard by the new leader, shows %v, want READY", back.id, got)
	}

	// The silent one is judged down in time, and shown so.
	c.waitStatus(gone.id, pb.NodeStatus_NODE_STATUS_DOWN)
	if got := shown(gone.id); got != pb.NodeStatus_NODE_STATUS_DOWN {
		t.Errorf("node %s, judged down, shows %v", gone.id, got)
	}
}
