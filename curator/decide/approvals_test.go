package decide

import (
	"strings"
	"testing"

	pb "github.com/curatorproject/curator/proto"
)

func TestDecideApprovals(t *testing.T) {
	ready := func(id string) ApprovalNode {
		return ApprovalNode{ID: id, Exists: true, State: pb.NodeState_NODE_STATE_UP, Status: pb.NodeStatus_NODE_STATUS_READY}
	}
	with := func(n ApprovalNode, f func(*ApprovalNode)) ApprovalNode { f(&n); return n }
	type want struct {
		kind   ApprovalActionKind
		nodeID string
		reason string // a part of the reason
	}
	for _, tc := range []struct {
		name string
		snap ApprovalSnapshot
		want *want
	}{
		{"nothing pending", ApprovalSnapshot{Members: 1, MaxVoters: 7}, nil},
		{"ready: promote", ApprovalSnapshot{Pending: []ApprovalNode{ready("b")}, Members: 1, MaxVoters: 7},
			&want{ApprovalPromote, "b", "joined with the manager token and was approved"}},
		{"not ready yet: wait", ApprovalSnapshot{Pending: []ApprovalNode{
			with(ready("b"), func(n *ApprovalNode) { n.Status = pb.NodeStatus_NODE_STATUS_UNKNOWN })}, Members: 1, MaxVoters: 7}, nil},
		{"down: wait", ApprovalSnapshot{Pending: []ApprovalNode{
			with(ready("b"), func(n *ApprovalNode) { n.Status = pb.NodeStatus_NODE_STATUS_DOWN })}, Members: 1, MaxVoters: 7}, nil},
		{"a waiting node does not hold up a ready one", ApprovalSnapshot{Pending: []ApprovalNode{
			with(ready("a"), func(n *ApprovalNode) { n.Status = pb.NodeStatus_NODE_STATUS_UNKNOWN }), ready("b")}, Members: 1, MaxVoters: 7},
			&want{ApprovalPromote, "b", "ready"}},
		{"gone: drop", ApprovalSnapshot{Pending: []ApprovalNode{{ID: "b"}}, Members: 1, MaxVoters: 7},
			&want{ApprovalDrop, "b", "no longer exists"}},
		{"promoted already: drop", ApprovalSnapshot{Pending: []ApprovalNode{
			with(ready("b"), func(n *ApprovalNode) { n.Consensus = true })}, Members: 2, MaxVoters: 7},
			&want{ApprovalDrop, "b", "holds the consensus role"}},
		{"being demoted: drop", ApprovalSnapshot{Pending: []ApprovalNode{
			with(ready("b"), func(n *ApprovalNode) { n.Demoting = true })}, Members: 1, MaxVoters: 7},
			&want{ApprovalDrop, "b", "called off"}},
		{"decommissioned: drop", ApprovalSnapshot{Pending: []ApprovalNode{
			with(ready("b"), func(n *ApprovalNode) { n.State = pb.NodeState_NODE_STATE_DECOMMISSIONED })}, Members: 1, MaxVoters: 7},
			&want{ApprovalDrop, "b", "decommissioned"}},
		{"voter limit reached: drop, stays a worker", ApprovalSnapshot{Pending: []ApprovalNode{ready("b")}, Members: 3, MaxVoters: 3},
			&want{ApprovalDrop, "b", "stays a worker"}},
		{"voter limit with room: promote", ApprovalSnapshot{Pending: []ApprovalNode{ready("b")}, Members: 2, MaxVoters: 3},
			&want{ApprovalPromote, "b", "promoting"}},
		{"lowest ID first", ApprovalSnapshot{Pending: []ApprovalNode{ready("c"), {ID: "a"}, ready("b")}, Members: 1, MaxVoters: 7},
			&want{ApprovalDrop, "a", "no longer exists"}},
		{"a domain without a manager first", ApprovalSnapshot{Pending: []ApprovalNode{
			with(ready("a"), func(n *ApprovalNode) { n.Domain = "x" }), with(ready("b"), func(n *ApprovalNode) { n.Domain = "y" })},
			Members: 2, MaxVoters: 3, ConsensusByDomain: map[string]int{"x": 2}},
			&want{ApprovalPromote, "b", "node b in domain y, which holds 0 consensus members"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Approvals(tc.snap)
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("Approvals = %+v, want nothing to do", got)
			case tc.want == nil:
				return
			case got == nil:
				t.Fatalf("Approvals = nil, want %v of %s", tc.want.kind, tc.want.nodeID)
			}
			if got.Kind != tc.want.kind || got.NodeID != tc.want.nodeID {
				t.Errorf("Approvals = %v of %s, want %v of %s", got.Kind, got.NodeID, tc.want.kind, tc.want.nodeID)
			}
			if !strings.Contains(got.Reason, tc.want.reason) {
				t.Errorf("reason %q does not say %q", got.Reason, tc.want.reason)
			}
		})
	}
}
