package curator

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/consensus"
	pb "github.com/curatorproject/curator/proto"
)

func TestDecideDemotions(t *testing.T) {
	three := []consensus.Member{tvoter(1, "self"), tvoter(2, "b"), tvoter(3, "c")}
	tests := []struct {
		name    string
		nodes   []*pb.Node
		members []consensus.Member
		want    *demotionAction
		// swarm: the nodes whose Swarm node is still a manager.
		swarm map[string]bool
	}{
		{"nothing marked", []*pb.Node{tnode("self"), tnode("b"), tnode("c")}, three, nil, nil},
		{"own node: resign", []*pb.Node{tnode("self", demoting), tnode("b"), tnode("c")}, three,
			&demotionAction{kind: demotionResign, nodeID: "self"}, nil},
		{"another node: finish", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c")}, three,
			&demotionAction{kind: demotionFinish, nodeID: "b"}, nil},
		{"member gone already: finish", []*pb.Node{tnode("self"), tnode("b", demoting)}, []consensus.Member{tvoter(1, "self")},
			&demotionAction{kind: demotionFinish, nodeID: "b"}, nil},
		{"a learner: finish whatever the quorum", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c", notReady)},
			[]consensus.Member{tvoter(1, "self"), tvoter(3, "c"), tlearner(2, "b", true)}, &demotionAction{kind: demotionFinish, nodeID: "b"}, nil},
		{"no healthy majority would remain: refuse", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c", notReady)}, three,
			&demotionAction{kind: demotionRefuse, nodeID: "b"}, nil},
		{"first by node ID", []*pb.Node{tnode("self"), tnode("c", demoting), tnode("b", demoting)}, three,
			&demotionAction{kind: demotionFinish, nodeID: "b"}, nil},
		{"a Swarm manager not demoted yet: wait", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c")}, three,
			&demotionAction{kind: demotionWait, nodeID: "b"}, map[string]bool{"b": true}},
		{"a Swarm manager waiting does not hold back another demotion", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c", demoting)}, three,
			&demotionAction{kind: demotionFinish, nodeID: "c"}, map[string]bool{"b": true}},
		{"the Swarm demoted it: finish", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c")}, three,
			&demotionAction{kind: demotionFinish, nodeID: "b"}, map[string]bool{"c": true}},
		{"own node: resign before its Swarm demote (the next leader makes it)", []*pb.Node{tnode("self", demoting), tnode("b"), tnode("c")}, three,
			&demotionAction{kind: demotionResign, nodeID: "self"}, map[string]bool{"self": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideDemotions(snapshot("self", tt.nodes, tt.members), tt.swarm)
			if got != nil && got.reason == "" {
				t.Error("no reason")
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(demotionAction{}), ignoreReason); diff != "" {
				t.Errorf("decideDemotions (-want +got):\n%s", diff)
			}
		})
	}
}
