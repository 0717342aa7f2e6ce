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
	}{
		{"nothing marked", []*pb.Node{tnode("self"), tnode("b"), tnode("c")}, three, nil},
		{"own node: resign", []*pb.Node{tnode("self", demoting), tnode("b"), tnode("c")}, three,
			&demotionAction{kind: demotionResign, nodeID: "self"}},
		{"another node: finish", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c")}, three,
			&demotionAction{kind: demotionFinish, nodeID: "b"}},
		{"member gone already: finish", []*pb.Node{tnode("self"), tnode("b", demoting)}, []consensus.Member{tvoter(1, "self")},
			&demotionAction{kind: demotionFinish, nodeID: "b"}},
		{"a learner: finish whatever the quorum", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c", notReady)},
			[]consensus.Member{tvoter(1, "self"), tvoter(3, "c"), tlearner(2, "b", true)}, &demotionAction{kind: demotionFinish, nodeID: "b"}},
		{"no healthy majority would remain: refuse", []*pb.Node{tnode("self"), tnode("b", demoting), tnode("c", notReady)}, three,
			&demotionAction{kind: demotionRefuse, nodeID: "b"}},
		{"first by node ID", []*pb.Node{tnode("self"), tnode("c", demoting), tnode("b", demoting)}, three,
			&demotionAction{kind: demotionFinish, nodeID: "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideDemotions(snapshot("self", tt.nodes, tt.members))
			if got != nil && got.reason == "" {
				t.Error("no reason")
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(demotionAction{}), ignoreReason); diff != "" {
				t.Errorf("decideDemotions (-want +got):\n%s", diff)
			}
		})
	}
}
