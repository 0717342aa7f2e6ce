package decide

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/consensus/member"
	pb "github.com/curatorproject/curator/proto"
)

func TestDecidePlacement(t *testing.T) {
	nodes := []*pb.Node{tnode("a"), tnode("b"), tnode("c"), tnode("d", notReady), tnode("e", demoting)}
	three := []member.Member{tvoter(1, "a"), tvoter(2, "b"), tvoter(3, "c")}
	tests := []struct {
		name       string
		etcdLeader uint64
		members    []member.Member
		heard      []string
		unheard    []string // by etcd
		want       *PlacementAction
	}{
		{"leaders apart: nothing", 2, three, []string{"b", "c"}, nil, nil},
		{"single voter: nothing", 1, []member.Member{tvoter(1, "a")}, nil, nil, nil},
		{"together: move to a reachable voter, by node ID", 1, []member.Member{tvoter(1, "a"), tvoter(3, "c"), tvoter(2, "b")}, []string{"b", "c"}, nil,
			&PlacementAction{ToMember: 2, ToNode: "b"}},
		{"together: skip a voter not heard from just now", 1, three, []string{"c"}, nil, &PlacementAction{ToMember: 3, ToNode: "c"}},
		{"together: skip a voter not ready", 1, []member.Member{tvoter(1, "a"), tvoter(4, "d"), tvoter(3, "c")}, []string{"c", "d"}, nil,
			&PlacementAction{ToMember: 3, ToNode: "c"}},
		{"together: never onto a demoting voter", 1, []member.Member{tvoter(1, "a"), tvoter(5, "e"), tvoter(3, "c")}, []string{"c", "e"}, nil,
			&PlacementAction{ToMember: 3, ToNode: "c"}},
		{"together: never onto a learner", 1, []member.Member{tvoter(1, "a"), tlearner(2, "b", true)}, []string{"b"}, nil, nil},
		{"together but no reachable voter: nothing", 1, three, nil, nil, nil},
		{"etcd leader unknown: nothing", 0, three, []string{"b", "c"}, nil, nil},
		{"together: skip a voter etcd does not hear, though its heartbeats came", 1, three, []string{"b", "c"}, []string{"b"},
			&PlacementAction{ToMember: 3, ToNode: "c"}},
		{"together: every other voter unheard by etcd: nothing", 1, three, []string{"b", "c"}, []string{"b", "c"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := snapshot("a", nodes, tt.members, tt.heard...)
			ms.Unheard = map[string]bool{}
			for _, id := range tt.unheard {
				ms.Unheard[id] = true
			}
			got := Placement(ms, tt.etcdLeader)
			if got != nil && got.Reason == "" {
				t.Error("no reason")
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(PlacementAction{}), ignoreReason); diff != "" {
				t.Errorf("Placement (-want +got):\n%s", diff)
			}
		})
	}
}
