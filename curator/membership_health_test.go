package curator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/curator/internal/faults"
	pb "github.com/curatorproject/curator/proto"
)

// holdAt holds every change that reaches pause point name until the
// returned release is called (or the test ends); reached is closed when
// the first one does.
func holdAt(t *testing.T, name string) (reached <-chan struct{}, release func()) {
	t.Helper()
	r, done := make(chan struct{}), make(chan struct{})
	var first, once sync.Once
	f := func(point string) {
		if point != name {
			return
		}
		first.Do(func() { close(r) })
		<-done
	}
	faults.SetPaused(f)
	release = func() { once.Do(func() { close(done) }) }
	t.Cleanup(func() {
		release()
		faults.SetPaused(nil)
	})
	return r, release
}

// TestHealthIsNotHeldByADemote: a demote held at its slowest point (it
// holds muNodes there, as it does across the etcd calls that may wait on a
// member that just died) does not hold the health loop: the node being
// demoted stops its heartbeats and is marked down within down-after and a
// tick, while the demote still waits. When the demote ends, its write of
// the node's record keeps the status the health loop wrote.
func TestHealthIsNotHeldByADemote(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, anon := c.dialFirst()
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	conn := dial(t, c.first.address, m2.tlsCert(), c.root.Cert)
	followSession(t, conn)
	c.waitStatus(m2.id, pb.NodeStatus_NODE_STATUS_READY)

	reached, release := holdAt(t, faults.BeforeMemberRemove)
	type answer struct {
		resp *pb.DemoteResponse
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		resp, err := pb.NewManagementClient(admin).DemoteNode(ctx, &pb.NodeRequest{Id: m2.id})
		answered <- answer{resp, err}
	}()
	select {
	case <-reached:
	case a := <-answered:
		t.Fatalf("the demote answered (%v, %v) before it reached %s", a.resp, a.err, faults.BeforeMemberRemove)
	case <-time.After(testTimeout):
		t.Fatalf("the demote did not reach %s", faults.BeforeMemberRemove)
	}

	conn.Close()
	stopped := time.Now()
	bound := testDownAfter + testHeartbeat + time.Second
	for c.loadNode(m2.id).Status != pb.NodeStatus_NODE_STATUS_DOWN {
		if time.Since(stopped) > bound {
			t.Fatalf("node %s not marked down %v after its heartbeats stopped (down-after %v), with a demote held at %s: the health loop waits on it",
				m2.id, bound, testDownAfter, faults.BeforeMemberRemove)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("marked down %v after its heartbeats stopped, with the demote held", time.Since(stopped).Round(time.Millisecond))
	markedDown := c.loadNode(m2.id).StatusChanged.AsTime()
	select {
	case a := <-answered:
		t.Fatalf("the demote answered (%v, %v) while held", a.resp, a.err)
	default:
	}

	release()
	a := <-answered
	if a.err != nil {
		t.Fatalf("demote: %v", a.err)
	}
	if diff := cmp.Diff("demoted", a.resp.GetOutcome()); diff != "" {
		t.Errorf("demote outcome (-want +got):\n%s", diff)
	}
	n := c.loadNode(m2.id)
	if n.Status != pb.NodeStatus_NODE_STATUS_DOWN || !n.StatusChanged.AsTime().Equal(markedDown) {
		t.Errorf("after the demote wrote the record, node %s is %v since %v, want down since %v: the demote's write undid the health loop's",
			m2.id, n.Status, n.StatusChanged.AsTime(), markedDown)
	}
	if n.Demoting || len(n.Roles) != 1 || n.Roles[0] != pb.Role_ROLE_WORKER {
		t.Errorf("after the demote: demoting %v, roles %v; want a worker", n.Demoting, n.Roles)
	}
}
