package curator

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/curatorproject/curator/proto"
)

// TestRemovedNodeLosesItsStreams: a node's certificate is checked when it
// opens a stream; removing the node must also end the streams it has open.
func TestRemovedNodeLosesItsStreams(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, anon := c.dialFirst()
	n, _ := c.register(anon, c.token(admin, "worker"), "w1")
	node := pb.NewCuratorClient(dial(t, c.first.address, n.tlsCert(), c.root.Cert))

	ctx, cancel := context.WithCancel(callCtx(t))
	defer cancel()
	hb, err := node.Heartbeat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := hb.Send(&pb.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := hb.Recv(); err != nil {
		t.Fatal(err)
	}
	watch, err := node.WatchNode(ctx, &pb.WatchNodeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}

	if _, err := pb.NewManagementClient(admin).RemoveNode(callCtx(t), &pb.RemoveNodeRequest{Id: n.id, Force: true}); err != nil {
		t.Fatal(err)
	}
	for name, recv := range map[string]func() error{
		"heartbeat": func() error {
			// Answers to the heartbeats sent may come first.
			for {
				if _, err := hb.Recv(); err != nil {
					return err
				}
			}
		},
		"watch": func() error {
			for {
				if _, err := watch.Recv(); err != nil {
					return err
				}
			}
		},
	} {
		if err := recv(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s stream after the node's removal: %v, want PermissionDenied", name, err)
		}
	}
	// And it cannot open new ones.
	w2, err := node.WatchNode(ctx, &pb.WatchNodeRequest{})
	if err == nil {
		_, err = w2.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("new watch of a removed node: %v, want PermissionDenied", err)
	}
}
