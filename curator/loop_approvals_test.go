package curator

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// TestApprovedManagerIsPromoted: with approval required, a node that joins
// with the manager token and is approved becomes a consensus member once it
// is ready, however long that takes; a demote before then calls it off; a
// second approval, and a demote of a pending node, are refused and change
// nothing; at the voter limit it stays a worker, and the event says why.
func TestApprovedManagerIsPromoted(t *testing.T) {
	c := newTestCluster(t)
	svc := c.startLeader()
	admin, anon := c.dialFirst()
	mgmt := pb.NewManagementClient(admin)
	managerToken := c.token(admin, "manager")
	if _, err := mgmt.UpdateCluster(callCtx(t), &pb.UpdateClusterRequest{RequireApproval: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	pendingPromotion := func(id string) bool {
		t.Helper()
		p, err := store.PromotionList(callCtx(t), c.cli)
		if err != nil {
			t.Fatal(err)
		}
		_, ok := p[id]
		return ok
	}
	isMember := func(id string) bool {
		t.Helper()
		ms, err := svc.currentLeader().Members.Observe(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		_, ok := ms.MemberOf[id]
		return ok
	}
	// unchanged runs call, which must fail with code, and checks that the
	// node's record and the pending promotions are as before.
	unchanged := func(t *testing.T, id string, code codes.Code, call func() error) {
		t.Helper()
		before := c.loadNode(id)
		hadPromotion := pendingPromotion(id)
		err := call()
		if status.Code(err) != code {
			t.Fatalf("got %v, want %v", err, code)
		}
		if diff := cmp.Diff(before, c.loadNode(id), protocmp.Transform()); diff != "" {
			t.Errorf("a refused call changed node %s (-before +after):\n%s", id, diff)
		}
		if pendingPromotion(id) != hadPromotion {
			t.Errorf("a refused call changed the pending promotion of %s", id)
		}
	}

	m2, _ := c.register(anon, managerToken, "m2")
	if n := c.loadNode(m2.id); n.State != pb.NodeState_NODE_STATE_PENDING || len(n.Roles) != 0 {
		t.Fatalf("node joined with approval required: state %v, roles %v; want pending, no role", n.State, n.Roles)
	}

	t.Run("demote of a pending node is refused", func(t *testing.T) {
		unchanged(t, m2.id, codes.FailedPrecondition, func() error {
			_, err := mgmt.DemoteNode(callCtx(t), &pb.NodeRequest{Id: m2.id})
			if err != nil && !strings.Contains(err.Error(), "pending approval") {
				t.Errorf("error %q does not say the node is pending approval", err)
			}
			return err
		})
	})

	t.Run("approved before it is ready: promoted once it is", func(t *testing.T) {
		if _, err := mgmt.ApproveNode(callCtx(t), &pb.NodeRequest{Id: "m2"}); err != nil {
			t.Fatal(err)
		}
		n := c.loadNode(m2.id)
		if n.State != pb.NodeState_NODE_STATE_UP || !pendingPromotion(m2.id) {
			t.Fatalf("after approval: state %v, pending promotion %v; want up, and a pending promotion", n.State, pendingPromotion(m2.id))
		}
		// No heartbeat yet: not ready, so not promoted, for as long as
		// that lasts (a single try at approval time would give up for good).
		time.Sleep(10 * svc.cfg.SyncInterval)
		if n := c.loadNode(m2.id); spec.HasRole(n, pb.Role_ROLE_CONSENSUS) || isMember(m2.id) {
			t.Fatalf("node %s promoted before it was ready: roles %v", m2.id, n.Roles)
		}
		startHeartbeats(t, dial(t, c.first.address, m2.tlsCert(), c.root.Cert))
		waitFor(t, "the approved manager is promoted", func() bool {
			return spec.HasRole(c.loadNode(m2.id), pb.Role_ROLE_CONSENSUS) && isMember(m2.id) && !pendingPromotion(m2.id)
		})
		// The event is recorded once the promotion is done: a moment
		// after the records show it.
		waitFor(t, "the promotion's event", func() bool {
			return len(findEvents(eventsOf(t, mgmt), leader.ApprovalsLoopName, "promote", m2.id)) > 0
		})
		if ev := findEvents(eventsOf(t, mgmt), leader.ApprovalsLoopName, "promote", m2.id); len(ev) != 1 {
			t.Errorf("events of %s promoting %s: %v, want one", leader.ApprovalsLoopName, m2.id, ev)
		}
	})

	t.Run("approve of an approved node is refused", func(t *testing.T) {
		unchanged(t, m2.id, codes.AlreadyExists, func() error {
			_, err := mgmt.ApproveNode(callCtx(t), &pb.NodeRequest{Id: m2.id})
			if err != nil && !strings.Contains(err.Error(), "approved already") {
				t.Errorf("error %q does not say the node was approved already", err)
			}
			return err
		})
	})

	t.Run("demote before the promotion calls it off", func(t *testing.T) {
		m3, _ := c.register(anon, managerToken, "m3")
		if _, err := mgmt.ApproveNode(callCtx(t), &pb.NodeRequest{Id: m3.id}); err != nil {
			t.Fatal(err)
		}
		resp, err := mgmt.DemoteNode(callCtx(t), &pb.NodeRequest{Id: m3.id})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Outcome != string(leader.PromotionCalledOff) || pendingPromotion(m3.id) {
			t.Fatalf("demote of an approved manager not yet promoted: outcome %q, pending promotion %v; want %q and none",
				resp.Outcome, pendingPromotion(m3.id), leader.PromotionCalledOff)
		}
		startHeartbeats(t, dial(t, c.first.address, m3.tlsCert(), c.root.Cert))
		c.waitStatus(m3.id, pb.NodeStatus_NODE_STATUS_READY)
		time.Sleep(10 * svc.cfg.SyncInterval)
		if n := c.loadNode(m3.id); spec.HasRole(n, pb.Role_ROLE_CONSENSUS) || isMember(m3.id) {
			t.Errorf("node %s promoted after its promotion was called off: roles %v", m3.id, n.Roles)
		}
		// Demoting it again: it is no manager, and the answer says so.
		resp, err = mgmt.DemoteNode(callCtx(t), &pb.NodeRequest{Id: m3.id})
		if err != nil || resp.Outcome != string(leader.NotManager) {
			t.Errorf("demote of a worker: %v, outcome %q; want %q", err, resp.GetOutcome(), leader.NotManager)
		}
	})

	t.Run("at the voter limit it stays a worker", func(t *testing.T) {
		// Two members now (the first node and m2): the limit is 2.
		if _, err := mgmt.UpdateCluster(callCtx(t), &pb.UpdateClusterRequest{MaxVoters: ptr(uint32(2))}); err != nil {
			t.Fatal(err)
		}
		m4, _ := c.register(anon, managerToken, "m4")
		startHeartbeats(t, dial(t, c.first.address, m4.tlsCert(), c.root.Cert))
		if _, err := mgmt.ApproveNode(callCtx(t), &pb.NodeRequest{Id: m4.id}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the pending promotion is dropped", func() bool { return !pendingPromotion(m4.id) })
		if n := c.loadNode(m4.id); spec.HasRole(n, pb.Role_ROLE_CONSENSUS) || isMember(m4.id) {
			t.Errorf("node %s promoted past the voter limit: roles %v", m4.id, n.Roles)
		}
		waitFor(t, "the dropped promotion's event", func() bool {
			return len(findEvents(eventsOf(t, mgmt), leader.ApprovalsLoopName, "drop-promotion", m4.id)) > 0
		})
		ev := findEvents(eventsOf(t, mgmt), leader.ApprovalsLoopName, "drop-promotion", m4.id)
		if len(ev) != 1 || !strings.Contains(ev[0].Reason, "voter limit of 2") || !strings.Contains(ev[0].Reason, "node promote") {
			t.Errorf("events dropping the promotion of %s: %v; want one that names the limit and `node promote`", m4.id, ev)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// eventsOf lists the events through the management API.
func eventsOf(t *testing.T, m pb.ManagementClient) []*pb.Event {
	t.Helper()
	resp, err := m.ListEvents(callCtx(t), &pb.ListEventsRequest{})
	if err != nil {
		t.Fatalf("ListEvents: %v", err)
	}
	return resp.Events
}
