package curator

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	pb "github.com/curatorproject/curator/proto"
)

// TestSessionRecordsRelease: a node that comes back on another release
// (its binary replaced, its agent restarted) says so in its session's
// heartbeats, and its record follows, once: node ls shows what it runs.
// Cluster info counts the releases running and names the lowest among
// the managers (the first node, which never reported one, is left out).
func TestSessionRecordsRelease(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, anon := c.dialFirst()
	w, _ := c.register(anon, c.token(admin, "worker"), "w")
	m, _ := c.register(anon, c.token(admin, "manager"), "m")
	if got := c.loadNode(w.id).Version; got != "test" {
		t.Fatalf("the worker's record says %q after its join, want test", got)
	}
	beat := func(n *testNode, release string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		hb, err := pb.NewCuratorClient(dial(t, c.first.address, n.tlsCert(), c.root.Cert)).Heartbeat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for seq := uint64(1); seq <= 3; seq++ {
			if err := hb.Send(&pb.HeartbeatRequest{Version: release, Seq: seq}); err != nil {
				t.Fatal(err)
			}
			for {
				resp, err := hb.Recv()
				if err != nil {
					t.Fatal(err)
				}
				if resp.Seq == seq {
					break
				}
			}
		}
	}
	beat(w, "v0.2.0")
	beat(m, "v0.1.0-dev+2a25bf7af479")
	waitFor(t, "the records follow the sessions", func() bool {
		return c.loadNode(w.id).Version == "v0.2.0" && c.loadNode(m.id).Version == "v0.1.0-dev+2a25bf7af479"
	})
	rev := c.loadNode(w.id).Updated.AsTime()
	beat(w, "v0.2.0")
	if got := c.loadNode(w.id).Updated.AsTime(); !got.Equal(rev) {
		t.Errorf("the worker's record was written again (updated %v, was %v) for a release it already says", got, rev)
	}

	info, err := pb.NewManagementClient(admin).GetClusterInfo(callCtx(t), &pb.ClusterInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint32{"": 1, "v0.2.0": 1, "v0.1.0-dev+2a25bf7af479": 1}
	if d := cmp.Diff(want, info.Releases); d != "" {
		t.Errorf("cluster info releases (-want +got):\n%s", d)
	}
	if got := info.LowestManagerRelease; got != "v0.1.0-dev+2a25bf7af479" {
		t.Errorf("lowest manager release %q, want the manager's development build", got)
	}
}
