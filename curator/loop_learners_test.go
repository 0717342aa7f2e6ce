package curator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/consensus"
	pb "github.com/curatorproject/curator/proto"
)

// tableNow is the clock of the decision tables.
var tableNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestDecideLearners(t *testing.T) {
	now, limit := tableNow, time.Minute
	downSince := func(at time.Time) func(*pb.Node) {
		return func(n *pb.Node) { n.Status, n.StatusChanged = pb.NodeStatus_NODE_STATUS_DOWN, timestamppb.New(at) }
	}
	self := tvoter(10, "self")
	// silent marks a node this leader does not hear from right now.
	silent := func(n *pb.Node) { n.Labels = map[string]string{"silent": "yes"} }
	tests := []struct {
		name    string
		nodes   []*pb.Node
		members []consensus.Member
		want    *learnerAction
	}{
		{"none", nil, []consensus.Member{self}, nil},
		{"not started yet: wait", []*pb.Node{tnode("a")}, []consensus.Member{self, tlearner(1, "a", false)}, nil},
		{"started: promote", []*pb.Node{tnode("a")}, []consensus.Member{self, tlearner(1, "a", true)},
			&learnerAction{promote: true, memberID: 1, nodeID: "a"}},
		{"promotion would leave no healthy majority: wait", []*pb.Node{tnode("a"), tnode("b", notReady), tnode("c", notReady)},
			[]consensus.Member{self, tvoter(2, "b"), tvoter(3, "c"), tlearner(1, "a", true)}, nil},
		{"promotion with one voter down: promote", []*pb.Node{tnode("a"), tnode("b"), tnode("c", notReady)},
			[]consensus.Member{self, tvoter(2, "b"), tvoter(3, "c"), tlearner(1, "a", true)}, &learnerAction{promote: true, memberID: 1, nodeID: "a"}},
		{"no node: the sync's business", nil, []consensus.Member{self, tlearner(1, "", true)}, nil},
		{"node gone: the sync's business", nil, []consensus.Member{self, tlearner(1, "gone", true)}, nil},
		{"down within the limit: wait", []*pb.Node{tnode("a", downSince(now.Add(-limit/2)))}, []consensus.Member{self, tlearner(1, "a", true)}, nil},
		{"down past the limit: remove", []*pb.Node{tnode("a", downSince(now.Add(-limit)))}, []consensus.Member{self, tlearner(1, "a", true)},
			&learnerAction{memberID: 1, nodeID: "a"}},
		{"removal before promotion", []*pb.Node{tnode("a"), tnode("b", downSince(now.Add(-2*limit)))},
			[]consensus.Member{self, tlearner(1, "a", true), tlearner(2, "b", false)}, &learnerAction{memberID: 2, nodeID: "b"}},
		{"one at a time, by member ID", []*pb.Node{tnode("a"), tnode("b")},
			[]consensus.Member{self, tlearner(5, "b", true), tlearner(3, "a", true)}, &learnerAction{promote: true, memberID: 3, nodeID: "a"}},
		{"ready but not heard from now (killed a moment ago): wait", []*pb.Node{tnode("a", silent)}, []consensus.Member{self, tlearner(1, "a", true)}, nil},
		{"the first learner silent: the next promoted", []*pb.Node{tnode("a", silent), tnode("b")},
			[]consensus.Member{self, tlearner(3, "a", true), tlearner(5, "b", true)}, &learnerAction{promote: true, memberID: 5, nodeID: "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every node is heard from but those marked silent.
			var heard []string
			for _, n := range tt.nodes {
				if n.Labels["silent"] == "" {
					heard = append(heard, n.Id)
				}
			}
			ms := snapshot("self", append(tt.nodes, tnode("self")), tt.members, heard...)
			got := decideLearners(ms, now, limit)
			if got != nil && got.reason == "" {
				t.Error("no reason")
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(learnerAction{}), ignoreReason); diff != "" {
				t.Errorf("decideLearners (-want +got):\n%s", diff)
			}
		})
	}
}
