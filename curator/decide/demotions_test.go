package decide

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/consensus/member"
	pb "github.com/curatorproject/curator/proto"
)

func TestDecideDemotions(t *testing.T) {
	three := []member.Member{tvoter(1, "self"), tvoter(2, "b"), tvoter(3, "c")}
	tests := []struct {
		name    string
		nodes   []*pb.Node
		members []member.Member
		want    *DemotionAction
		// swarm: the nodes whose Swarm node is still a manager.
		swarm map[string]bool
	}{
		{"nothing marked", []*pb.Node{tnode("self"), tnode("b"), tnode("c")}, three, nil, nil},
		{"own node: resign", []*pb.Node{tnode("self", demoting), tnode("b"), tnode("c")}, three,
			&DemotionAction{Kind: DemotionResign, NodeID: "self"}, nil},
		{"another node: finish", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c")}, three,
			&DemotionAction{Kind: DemotionFinish, NodeID: "b"}, nil},
		{"member gone already: finish", []*pb.Node{tnode("self"), tnode("b", demoting)}, []member.Member{tvoter(1, "self")},
			&DemotionAction{Kind: DemotionFinish, NodeID: "b"}, nil},
		{"a learner: finish whatever the quorum", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c", notReady)},
			[]member.Member{tvoter(1, "self"), tvoter(3, "c"), tlearner(2, "b", true)}, &DemotionAction{Kind: DemotionFinish, NodeID: "b"}, nil},
		{"no healthy majority would remain: refuse", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c", notReady)}, three,
			&DemotionAction{Kind: DemotionRefuse, NodeID: "b"}, nil},
		{"first by node ID", []*pb.Node{tnode("self"), tnode("c", demoting), tnode("b", demoting)}, three,
			&DemotionAction{Kind: DemotionFinish, NodeID: "b"}, nil},
		{"a Swarm manager not demoted yet: wait", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c")}, three,
			&DemotionAction{Kind: DemotionWait, NodeID: "b"}, map[string]bool{"b": true}},
		{"a Swarm manager waiting does not hold back another demotion", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c", demoting)}, three,
			&DemotionAction{Kind: DemotionFinish, NodeID: "c"}, map[string]bool{"b": true}},
		{"the Swarm demoted it: finish", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c")}, three,
			&DemotionAction{Kind: DemotionFinish, NodeID: "b"}, map[string]bool{"c": true}},
		{"own node: resign before its Swarm demote (the next leader makes it)", []*pb.Node{tnode("self", demoting), tnode("b"), tnode("c")}, three,
			&DemotionAction{Kind: DemotionResign, NodeID: "self"}, map[string]bool{"self": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Demotions(snapshot("self", tt.nodes, tt.members), tt.swarm)
			if got != nil && got.Reason == "" {
				t.Error("no reason")
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(DemotionAction{}), ignoreReason); diff != "" {
				t.Errorf("Demotions (-want +got):\n%s", diff)
			}
		})
	}
}
