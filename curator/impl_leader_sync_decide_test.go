package curator

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecideSync(t *testing.T) {
	const leader = "leader"
	voter := func(id uint64, node string) syncMember { return syncMember{id: id, nodeID: node} }
	learner := func(id uint64, node string) syncMember { return syncMember{id: id, nodeID: node, isLearner: true} }
	withRole := func(id string) syncNode { return syncNode{id: id, hasConsensus: true} }
	without := func(id string) syncNode { return syncNode{id: id} }

	tests := []struct {
		name string
		snap syncSnapshot
		want *syncAction // reason is not compared
	}{
		{
			name: "consistent: nothing to do",
			snap: syncSnapshot{leader, []syncNode{withRole(leader), withRole("b"), without("w")}, []syncMember{voter(1, leader), voter(2, "b")}},
		},
		{
			name: "consistent with a learner",
			snap: syncSnapshot{leader, []syncNode{withRole(leader), withRole("b")}, []syncMember{voter(1, leader), learner(2, "b")}},
		},
		{
			name: "leader missing from the registry: refuse",
			snap: syncSnapshot{leader, []syncNode{withRole("b")}, []syncMember{voter(1, leader), voter(2, "b"), voter(3, "ghost")}},
			want: &syncAction{kind: syncRefuse, nodeID: leader},
		},
		{
			name: "leader missing from the members: refuse",
			snap: syncSnapshot{leader, []syncNode{withRole(leader), without("b")}, []syncMember{voter(2, "b")}},
			want: &syncAction{kind: syncRefuse, nodeID: leader},
		},
		{
			name: "leader missing from both: refuse",
			snap: syncSnapshot{leader, nil, nil},
			want: &syncAction{kind: syncRefuse, nodeID: leader},
		},
		{
			name: "member of a node that does not exist is removed",
			snap: syncSnapshot{leader, []syncNode{withRole(leader)}, []syncMember{voter(1, leader), voter(7, "gone")}},
			want: &syncAction{kind: syncRemoveMember, nodeID: "gone", memberID: 7},
		},
		{
			name: "learner that matches no node is removed",
			snap: syncSnapshot{leader, []syncNode{withRole(leader)}, []syncMember{voter(1, leader), learner(9, "")}},
			want: &syncAction{kind: syncRemoveMember, memberID: 9},
		},
		{
			name: "members of missing nodes go before roles are aligned",
			snap: syncSnapshot{leader, []syncNode{withRole(leader), without("b"), withRole("c")}, []syncMember{voter(1, leader), voter(2, "b"), voter(5, "gone")}},
			want: &syncAction{kind: syncRemoveMember, nodeID: "gone", memberID: 5},
		},
		{
			name: "voter without the role gets it",
			snap: syncSnapshot{leader, []syncNode{withRole(leader), without("b")}, []syncMember{voter(1, leader), voter(2, "b")}},
			want: &syncAction{kind: syncGrantRole, nodeID: "b", memberID: 2},
		},
		{
			name: "learner without the role gets it (promote crashed after the member add)",
			snap: syncSnapshot{leader, []syncNode{withRole(leader), without("b")}, []syncMember{voter(1, leader), learner(2, "b")}},
			want: &syncAction{kind: syncGrantRole, nodeID: "b", memberID: 2},
		},
		{
			name: "role without a member is cleared (demote crashed after the member remove)",
			snap: syncSnapshot{leader, []syncNode{withRole(leader), withRole("b")}, []syncMember{voter(1, leader)}},
			want: &syncAction{kind: syncClearRole, nodeID: "b"},
		},
		{
			name: "one change per tick, in node ID order",
			snap: syncSnapshot{leader, []syncNode{withRole(leader), withRole("a"), without("c")}, []syncMember{voter(1, leader), voter(3, "c")}},
			want: &syncAction{kind: syncClearRole, nodeID: "a"},
		},
		{
			name: "the leader's own role is granted when it is a member",
			snap: syncSnapshot{leader, []syncNode{without(leader)}, []syncMember{voter(1, leader)}},
			want: &syncAction{kind: syncGrantRole, nodeID: leader, memberID: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideSync(tt.snap)
			if got != nil && got.reason == "" {
				t.Errorf("action %v has no reason", got.kind)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(syncAction{}), cmp.FilterPath(func(p cmp.Path) bool {
				return p.Last().String() == ".reason"
			}, cmp.Ignore())); diff != "" {
				t.Errorf("decideSync (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideSyncCombinations walks every combination for one node beside
// the leader: no member, a voter or a learner; the role or not; the node
// present or missing from the registry; and the leader itself present or
// missing from either set.
func TestDecideSyncCombinations(t *testing.T) {
	const leader, node = "leader", "n"
	const memberID = 7
	for _, membership := range []string{"none", "voter", "learner"} {
		for _, role := range []bool{false, true} {
			for _, present := range []bool{false, true} {
				for _, leaderState := range []string{"ok", "no-record", "no-member"} {
					name := fmt.Sprintf("member=%s/role=%v/node=%v/leader=%s", membership, role, present, leaderState)
					t.Run(name, func(t *testing.T) {
						var snap syncSnapshot
						snap.leaderNodeID = leader
						if leaderState != "no-record" {
							snap.nodes = append(snap.nodes, syncNode{id: leader, hasConsensus: true})
						}
						if leaderState != "no-member" {
							snap.members = append(snap.members, syncMember{id: 1, nodeID: leader})
						}
						if present {
							snap.nodes = append(snap.nodes, syncNode{id: node, hasConsensus: role})
						}
						if membership != "none" {
							snap.members = append(snap.members, syncMember{id: memberID, nodeID: node, isLearner: membership == "learner"})
						}
						var want *syncAction
						switch {
						case leaderState != "ok":
							want = &syncAction{kind: syncRefuse, nodeID: leader}
						case membership != "none" && !present:
							want = &syncAction{kind: syncRemoveMember, nodeID: node, memberID: memberID}
						case membership != "none" && !role:
							want = &syncAction{kind: syncGrantRole, nodeID: node, memberID: memberID}
						case membership == "none" && present && role:
							want = &syncAction{kind: syncClearRole, nodeID: node}
						}
						got := decideSync(snap)
						opt := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".reason" }, cmp.Ignore())
						if diff := cmp.Diff(want, got, cmp.AllowUnexported(syncAction{}), opt); diff != "" {
							t.Errorf("decideSync (-want +got):\n%s", diff)
						}
					})
				}
			}
		}
	}
}
