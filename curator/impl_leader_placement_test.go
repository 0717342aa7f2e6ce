package curator

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecidePlacement(t *testing.T) {
	v := func(id uint64, node string, healthy bool) placementVoter {
		return placementVoter{memberID: id, nodeID: node, healthy: healthy}
	}
	tests := []struct {
		name       string
		leader     string
		etcdLeader uint64
		voters     []placementVoter
		want       *placementAction
	}{
		{"leaders apart: nothing", "a", 2, []placementVoter{v(1, "a", true), v(2, "b", true)}, nil},
		{"single voter: nothing", "a", 1, []placementVoter{v(1, "a", true)}, nil},
		{"together: move to a healthy voter", "a", 1, []placementVoter{v(1, "a", true), v(3, "c", true), v(2, "b", true)}, &placementAction{toMember: 2, toNode: "b"}},
		{"together: skip unhealthy voters", "a", 1, []placementVoter{v(1, "a", true), v(2, "b", false), v(3, "c", true)}, &placementAction{toMember: 3, toNode: "c"}},
		{"together: never onto a demoting voter", "a", 1, []placementVoter{v(1, "a", true), {memberID: 2, nodeID: "b", healthy: true, demoting: true}, v(3, "c", true)}, &placementAction{toMember: 3, toNode: "c"}},
		{"together but no healthy voter: nothing", "a", 1, []placementVoter{v(1, "a", true), v(2, "b", false)}, nil},
		{"etcd leader unknown: nothing", "a", 0, []placementVoter{v(1, "a", true), v(2, "b", true)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decidePlacement(tt.leader, tt.etcdLeader, tt.voters)
			if got != nil && got.reason == "" {
				t.Error("no reason")
			}
			opt := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".reason" }, cmp.Ignore())
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(placementAction{}), opt); diff != "" {
				t.Errorf("decidePlacement (-want +got):\n%s", diff)
			}
		})
	}
}
