package decide

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/curatorproject/curator/consensus/member"
	pb "github.com/curatorproject/curator/proto"
)

func TestDecideSync(t *testing.T) {
	const leader = "leader"
	voter := tvoter
	learner := func(id uint64, node string) member.Member { return tlearner(id, node, true) }
	withRole := func(id string) *pb.Node { return tnode(id) }
	without := func(id string) *pb.Node { return tnode(id, noRole) }
	type syncSnapshot struct {
		self    string
		nodes   []*pb.Node
		members []member.Member
	}

	tests := []struct {
		name string
		snap syncSnapshot
		want *SyncAction // reason is not compared
	}{
		{
			name: "consistent: nothing to do",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), withRole("b"), without("w")}, []member.Member{voter(1, leader), voter(2, "b")}},
		},
		{
			name: "consistent with a learner",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), withRole("b")}, []member.Member{voter(1, leader), learner(2, "b")}},
		},
		{
			name: "leader missing from the registry: refuse",
			snap: syncSnapshot{leader, []*pb.Node{withRole("b")}, []member.Member{voter(1, leader), voter(2, "b"), voter(3, "ghost")}},
			want: &SyncAction{Kind: SyncRefuse, NodeID: leader},
		},
		{
			name: "leader missing from the members: refuse",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), without("b")}, []member.Member{voter(2, "b")}},
			want: &SyncAction{Kind: SyncRefuse, NodeID: leader},
		},
		{
			name: "leader missing from both: refuse",
			snap: syncSnapshot{leader, nil, nil},
			want: &SyncAction{Kind: SyncRefuse, NodeID: leader},
		},
		{
			name: "a node handed a member that is gone gets the learner at its peer URL",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), tnode("b", handed(0xeee8))}, []member.Member{voter(1, leader), tlearner(0xf4e7, "b", false)}},
			want: &SyncAction{Kind: SyncGrantRole, NodeID: "b", MemberID: 0xf4e7},
		},
		{
			name: "a node handed the learner at its peer URL: nothing to do",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), tnode("b", handed(0xf4e7))}, []member.Member{voter(1, leader), tlearner(0xf4e7, "b", false)}},
		},
		{
			name: "a started member is the node's whatever its record says",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), tnode("b", handed(0xeee8))}, []member.Member{voter(1, leader), learner(0xf4e7, "b")}},
		},
		{
			name: "a node that is not ready is not handed the learner at its peer URL",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), tnode("b", handed(0xeee8), notReady)}, []member.Member{voter(1, leader), tlearner(0xf4e7, "b", false)}},
		},
		{
			name: "a learner another record names is not handed",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), tnode("b", handed(0xeee8)), tnode("c", handed(0xf4e7), noRole, notReady)}, []member.Member{voter(1, leader), tlearner(0xf4e7, "b", false)}},
		},
		{
			name: "a demoting node is left to its demotion",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), tnode("b", handed(0xeee8), demoting)}, []member.Member{voter(1, leader), tlearner(0xf4e7, "b", false)}},
		},
		{
			name: "member of a node that does not exist is removed",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader)}, []member.Member{voter(1, leader), voter(7, "gone")}},
			want: &SyncAction{Kind: SyncRemoveMember, NodeID: "gone", MemberID: 7},
		},
		{
			name: "learner that matches no node is removed",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader)}, []member.Member{voter(1, leader), learner(9, "")}},
			want: &SyncAction{Kind: SyncRemoveMember, MemberID: 9},
		},
		{
			name: "members of missing nodes go before roles are aligned",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), without("b"), withRole("c")}, []member.Member{voter(1, leader), voter(2, "b"), voter(5, "gone")}},
			want: &SyncAction{Kind: SyncRemoveMember, NodeID: "gone", MemberID: 5},
		},
		{
			name: "voter of no node kept while the quorum needs it: refuse",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), tnode("b", notReady)}, []member.Member{voter(1, leader), voter(2, "b"), voter(7, "gone")}},
			want: &SyncAction{Kind: SyncRefuse, NodeID: "gone", MemberID: 7},
		},
		{
			name: "learner of no node removed whatever the quorum",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), tnode("b", notReady)}, []member.Member{voter(1, leader), voter(2, "b"), learner(7, "gone")}},
			want: &SyncAction{Kind: SyncRemoveMember, NodeID: "gone", MemberID: 7},
		},
		{
			name: "voter without the role gets it",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), without("b")}, []member.Member{voter(1, leader), voter(2, "b")}},
			want: &SyncAction{Kind: SyncGrantRole, NodeID: "b", MemberID: 2},
		},
		{
			name: "learner without the role gets it (promote crashed after the member add)",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), without("b")}, []member.Member{voter(1, leader), learner(2, "b")}},
			want: &SyncAction{Kind: SyncGrantRole, NodeID: "b", MemberID: 2},
		},
		{
			name: "role without a member is cleared (demote crashed after the member remove)",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), withRole("b")}, []member.Member{voter(1, leader)}},
			want: &SyncAction{Kind: SyncClearRole, NodeID: "b"},
		},
		{
			name: "one change per tick, in node ID order",
			snap: syncSnapshot{leader, []*pb.Node{withRole(leader), withRole("a"), without("c")}, []member.Member{voter(1, leader), voter(3, "c")}},
			want: &SyncAction{Kind: SyncClearRole, NodeID: "a"},
		},
		{
			name: "the leader's own role is granted when it is a member",
			snap: syncSnapshot{leader, []*pb.Node{without(leader)}, []member.Member{voter(1, leader)}},
			want: &SyncAction{Kind: SyncGrantRole, NodeID: leader, MemberID: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := snapshot(tt.snap.self, tt.snap.nodes, tt.snap.members)
			before := cloneNodes(ms.Nodes)
			got := Sync(ms)
			if got != nil && got.Reason == "" {
				t.Errorf("action %v has no reason", got.Kind)
			}
			if diff := cmp.Diff(before, ms.Nodes, protocmp.Transform()); diff != "" {
				t.Errorf("Sync changed its snapshot (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(SyncAction{}), ignoreReason); diff != "" {
				t.Errorf("Sync (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideSyncCombinations walks every combination for one node beside
// the leader: no member, a voter or a learner; the role or not; the node
// present or missing from the registry; and the leader itself present or
// missing from either set.
// handed sets the member ID a node's record names.
func handed(id uint64) func(*pb.Node) {
	return func(n *pb.Node) { n.Consensus = &pb.ConsensusJoin{MemberId: id} }
}

func TestDecideSyncCombinations(t *testing.T) {
	const leader, node = "leader", "n"
	const memberID = 7
	for _, membership := range []string{"none", "voter", "learner"} {
		for _, role := range []bool{false, true} {
			for _, present := range []bool{false, true} {
				for _, leaderState := range []string{"ok", "no-record", "no-member"} {
					name := fmt.Sprintf("member=%s/role=%v/node=%v/leader=%s", membership, role, present, leaderState)
					t.Run(name, func(t *testing.T) {
						var nodes []*pb.Node
						var members []member.Member
						if leaderState != "no-record" {
							nodes = append(nodes, tnode(leader))
						}
						if leaderState != "no-member" {
							members = append(members, tvoter(1, leader))
						}
						if present && role {
							nodes = append(nodes, tnode(node))
						} else if present {
							nodes = append(nodes, tnode(node, noRole))
						}
						switch membership {
						case "voter":
							members = append(members, tvoter(memberID, node))
						case "learner":
							members = append(members, tlearner(memberID, node, true))
						}
						var want *SyncAction
						switch {
						case leaderState != "ok":
							want = &SyncAction{Kind: SyncRefuse, NodeID: leader}
						case membership != "none" && !present:
							want = &SyncAction{Kind: SyncRemoveMember, NodeID: node, MemberID: memberID}
						case membership != "none" && !role:
							want = &SyncAction{Kind: SyncGrantRole, NodeID: node, MemberID: memberID}
						case membership == "none" && present && role:
							want = &SyncAction{Kind: SyncClearRole, NodeID: node}
						}
						got := Sync(snapshot(leader, nodes, members))
						if diff := cmp.Diff(want, got, cmp.AllowUnexported(SyncAction{}), ignoreReason); diff != "" {
							t.Errorf("Sync (-want +got):\n%s", diff)
						}
					})
				}
			}
		}
	}
}
