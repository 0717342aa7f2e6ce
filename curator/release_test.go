package curator

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/curator/spec"
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
	beatRelease(t, c, w, "v0.2.0")
	beatRelease(t, c, m, "v0.1.0-dev+2a25bf7af479")
	waitFor(t, "the records follow the sessions", func() bool {
		return c.loadNode(w.id).Version == "v0.2.0" && c.loadNode(m.id).Version == "v0.1.0-dev+2a25bf7af479"
	})
	rev := c.loadNode(w.id).Updated.AsTime()
	beatRelease(t, c, w, "v0.2.0")
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

// TestReleaseSkewRefused: the version policy at join and at a session.
// The managers run v0.2.0 (here the first node, which says so in its
// session): a worker on v0.3.0 (newer than every manager) and a manager
// on v0.4.0 (two minors ahead) are refused at join, with both releases
// named and a join-refusal counted; a worker on v0.2.1 joins, and its
// session saying v0.4.0 later (its binary replaced) ends, its record
// unchanged.
func TestReleaseSkewRefused(t *testing.T) {
	c := newTestCluster(t)
	svc := c.startLeader()
	admin, anon := c.dialFirst()
	beatRelease(t, c, c.first, "v0.2.0")
	waitFor(t, "the first node's record says v0.2.0", func() bool { return c.loadNode(c.first.id).Version == "v0.2.0" })

	for _, tc := range []struct{ role, release, want string }{
		{"worker", "v0.3.0", "a worker runs no newer than the lowest manager"},
		{"manager", "v0.4.0", "managers run within one minor of each other"},
	} {
		_, _, err := c.registerRelease(anon, c.token(admin, tc.role), "skewed-"+tc.role, tc.release)
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tc.release) || !strings.Contains(err.Error(), "v0.2.0") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("a %s on %s joined or was refused without the releases and the rule: %v", tc.role, tc.release, err)
		}
		if reason, _ := statusMarks(status.Convert(err)); reason != spec.ReleaseSkewReason {
			t.Errorf("the refusal of a %s on %s is marked %q, want %s (its agent then says to change the release, not to wipe)", tc.role, tc.release, reason, spec.ReleaseSkewReason)
		}
	}
	if got := metricValue(t, svc.metrics.JoinsRefused.WithLabelValues(string(refusedRelease))); got != 2 {
		t.Errorf("%v joins refused for their release, want 2", got)
	}

	w, _, err := c.registerRelease(anon, c.token(admin, "worker"), "w", "v0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hb, err := pb.NewCuratorClient(dial(t, c.first.address, w.tlsCert(), c.root.Cert)).Heartbeat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := hb.Send(&pb.HeartbeatRequest{Version: "v0.4.0", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := hb.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "v0.4.0") {
			t.Errorf("the session of a worker come back on v0.4.0 ended with %v, want a denial naming it", err)
		}
		break
	}
	if got := c.loadNode(w.id).Version; got != "v0.2.1" {
		t.Errorf("the worker's record says %q, want v0.2.1 still", got)
	}
}

// beatRelease opens a session of node n at the first curator and has
// three heartbeats saying release answered.
func beatRelease(t *testing.T, c *testCluster, n *testNode, release string) {
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
