package decide

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/consensus/member"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// testNodes is a list of nodes as the runtime's gather reads the registry
// view (curator/membership_observe.go), in place of it.
type testNodes []*pb.Node

func (t testNodes) MembershipNodes() []*pb.Node {
	var out []*pb.Node
	for _, n := range t {
		if store.MembershipChange(nil, n) {
			out = append(out, n)
		}
	}
	return out
}

func (t testNodes) Node(id string) *pb.Node {
	for _, n := range t {
		if n.Id == id {
			return n
		}
	}
	return nil
}

func (t testNodes) NodeByPeerURL(u string) string {
	for _, n := range t {
		if pu, ok := store.NodePeerURL(n); ok && pu == u {
			return n.Id
		}
	}
	return ""
}

// tnode is a node for the decision tables: up, ready, with the consensus
// role, at an address of its own; opts change it.
func tnode(id string, opts ...func(*pb.Node)) *pb.Node {
	n := &pb.Node{Id: id, Address: testAddress(id), State: pb.NodeState_NODE_STATE_UP, Status: pb.NodeStatus_NODE_STATUS_READY,
		Roles: []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER}}
	for _, o := range opts {
		o(n)
	}
	return n
}

// testAddress is a distinct address for each node ID.
func testAddress(id string) string {
	var h byte
	for _, c := range []byte(id) {
		h = h*31 + c
	}
	return fmt.Sprintf("127.0.9.%d:7000", 1+int(h)%250)
}

func noRole(n *pb.Node)   { n.Roles = []pb.Role{pb.Role_ROLE_WORKER} }
func notReady(n *pb.Node) { n.Status = pb.NodeStatus_NODE_STATUS_UNKNOWN }
func demoting(n *pb.Node) { n.Demoting = true }

// tvoter is a started voter of node (no node: "").
func tvoter(id uint64, node string) member.Member {
	return member.Member{ID: id, NodeID: node, PeerURL: fmt.Sprintf("https://peer-%x", id), ClientURL: fmt.Sprintf("https://client-%x", id)}
}

// tlearner is a learner of node; started says whether its etcd has run (a
// learner that has not is matched by its peer URL).
func tlearner(id uint64, node string, started bool) member.Member {
	m := tvoter(id, node)
	m.IsLearner = true
	if !started {
		ip, port, _ := spec.SplitAddress(testAddress(node))
		m.NodeID, m.ClientURL, m.PeerURL = "", "", consensus.PeerURL(ip.String(), port)
	}
	return m
}

// snapshot is the membership curator self observes; heard are the nodes it
// heard from just now.
func snapshot(self string, nodes []*pb.Node, members []member.Member, heard ...string) *Membership {
	return BuildMembership(gather(self, nodes, members, heard...))
}

// gather is what the runtime's gather (curator/membership_observe.go)
// would read of nodes and members for curator self: the nodes that matter
// to membership and the members' nodes, matched as the registry matches
// them; heard are the nodes heard just now, every other member's node was
// heard when the leadership began (vouched for, not heard now); etcd
// hears every voter.
func gather(self string, nodes testNodes, members []member.Member, heard ...string) MembershipInputs {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	in := MembershipInputs{Self: self, Members: members, Nodes: nodes.MembershipNodes(), PeerNodes: map[string]string{},
		Heartbeats: map[string]time.Time{}, HeartbeatInterval: time.Second, LeaderSince: now.Add(-time.Minute), Now: now,
		EtcdHeard: map[uint64]bool{}}
	for _, m := range members {
		id := m.NodeID
		if id == "" {
			if id = nodes.NodeByPeerURL(m.PeerURL); id != "" {
				in.PeerNodes[m.PeerURL] = id
			}
		}
		if !m.IsLearner {
			in.EtcdHeard[m.ID] = true
		}
		if id == "" {
			continue
		}
		in.Heartbeats[id] = in.LeaderSince
		if !slices.ContainsFunc(in.Nodes, func(n *pb.Node) bool { return n.Id == id }) {
			if n := nodes.Node(id); n != nil {
				in.Nodes = append(in.Nodes, n)
			}
		}
	}
	for _, id := range heard {
		in.Heartbeats[id] = now
	}
	return in
}

func TestBuildMembershipMatchesAndKeepsItsInput(t *testing.T) {
	nodes := []*pb.Node{tnode("c"), tnode("b", noRole), tnode("a"), tnode("w", func(n *pb.Node) { n.Roles = nil })}
	members := []member.Member{tvoter(3, "c"), tlearner(2, "b", false), tvoter(1, "a"), tvoter(9, "")}
	nodesBefore := slices.Clone(nodes)
	membersBefore := slices.Clone(members)
	ms := snapshot("a", nodes, members, "c")
	if diff := cmp.Diff(nodesBefore, nodes, protocmp.Transform()); diff != "" {
		t.Errorf("BuildMembership changed its nodes (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(membersBefore, members); diff != "" {
		t.Errorf("BuildMembership changed its members (-before +after):\n%s", diff)
	}
	var ids []string
	for _, n := range ms.Nodes {
		ids = append(ids, n.Id)
	}
	// b lacks the role but is a member (a promote cut short); w is not.
	if diff := cmp.Diff([]string{"a", "b", "c"}, ids); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[uint64]string{1: "a", 2: "b", 3: "c", 9: ""}, ms.NodeOf); diff != "" {
		t.Errorf("nodeOf (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"c": true}, ms.Heard); diff != "" {
		t.Errorf("heard (-want +got):\n%s", diff)
	}
}

func TestQuorumAfter(t *testing.T) {
	nodes := []*pb.Node{tnode("self"), tnode("b"), tnode("c", notReady), tnode("d"), tnode("l")}
	tests := []struct {
		name            string
		members         []member.Member
		remove, promote uint64
		want            Quorum
		ok              bool
	}{
		{"self alone", []member.Member{tvoter(1, "self")}, 0, 0, Quorum{Voters: 1, Healthy: 1}, true},
		{"remove the last voter", []member.Member{tvoter(1, "self")}, 1, 0, Quorum{}, false},
		{"self counts as healthy, however it is marked", []member.Member{tvoter(1, "self"), tvoter(3, "c")}, 0, 0, Quorum{Voters: 2, Healthy: 1, Unhealthy: []string{"c"}}, false},
		{"remove the unhealthy one", []member.Member{tvoter(1, "self"), tvoter(2, "b"), tvoter(3, "c")}, 3, 0, Quorum{Voters: 2, Healthy: 2}, true},
		{"remove a healthy one of three with one down", []member.Member{tvoter(1, "self"), tvoter(2, "b"), tvoter(3, "c")}, 2, 0, Quorum{Voters: 2, Healthy: 1, Unhealthy: []string{"c"}}, false},
		{"a voter of no node is unhealthy", []member.Member{tvoter(1, "self"), tvoter(0xa, "")}, 0, 0, Quorum{Voters: 2, Healthy: 1, Unhealthy: []string{"a"}}, false},
		{"learners do not count", []member.Member{tvoter(1, "self"), tlearner(5, "l", true)}, 0, 0, Quorum{Voters: 1, Healthy: 1}, true},
		{"a promoted learner counts as healthy", []member.Member{tvoter(1, "self"), tvoter(3, "c"), tlearner(5, "l", true)}, 0, 5, Quorum{Voters: 3, Healthy: 2, Unhealthy: []string{"c"}}, true},
		{"promoting makes an even count", []member.Member{tvoter(1, "self"), tvoter(2, "b"), tvoter(3, "c"), tlearner(5, "l", true)}, 0, 5, Quorum{Voters: 4, Healthy: 3, Unhealthy: []string{"c"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := snapshot("self", nodes, tt.members).QuorumAfter(tt.remove, tt.promote)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(Quorum{})); diff != "" {
				t.Errorf("quorumAfter (-want +got):\n%s", diff)
			}
			if got.OK() != tt.ok {
				t.Errorf("ok() = %v, want %v", got.OK(), tt.ok)
			}
		})
	}
}

func TestCheckRemoval(t *testing.T) {
	nodes := []*pb.Node{tnode("self"), tnode("b"), tnode("c", notReady)}
	tests := []struct {
		name    string
		members []member.Member
		remove  uint64
		want    string // a part of the error; "" for none
	}{
		{"a learner, always", []member.Member{tvoter(1, "self"), tlearner(2, "b", true)}, 2, ""},
		{"the last voter", []member.Member{tvoter(1, "self"), tlearner(2, "b", true)}, 1, "last etcd voter"},
		{"a healthy majority remains", []member.Member{tvoter(1, "self"), tvoter(2, "b"), tvoter(3, "c")}, 3, ""},
		{"none remains", []member.Member{tvoter(1, "self"), tvoter(2, "b"), tvoter(3, "c")}, 2, "only 1 are healthy, and a majority needs 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := snapshot("self", nodes, tt.members)
			m, _ := ms.Member(tt.remove)
			err := ms.CheckRemoval(m, ms.NodeOf[m.ID])
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("checkRemoval = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, spec.ErrPrecondition)):
				t.Errorf("checkRemoval = %v, want ErrPrecondition saying %q", err, tt.want)
			}
		})
	}
}

// ignoreReason leaves the reasons out of a comparison of actions: the
// tables check that each action has one.
var ignoreReason = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Reason" }, cmp.Ignore())

// cloneNodes is a deep copy, to check that a decision changes nothing.
func cloneNodes(nodes []*pb.Node) []*pb.Node {
	if nodes == nil {
		return nil
	}
	out := make([]*pb.Node, len(nodes))
	for i, n := range nodes {
		out[i] = proto.Clone(n).(*pb.Node)
	}
	return out
}

// TestRemovalCountsOnlyVouchedVoters: right after a failover, a voter
// whose record says ready but that the new leader has neither heard nor
// judged may be dead: no removal counts on it, while what a reply shows
// still does.
func TestRemovalCountsOnlyVouchedVoters(t *testing.T) {
	nodes := []*pb.Node{tnode("a"), tnode("b"), tnode("c")}
	members := []member.Member{tvoter(1, "a"), tvoter(2, "b"), tvoter(3, "c")}
	in := gather("a", nodes, members, "b", "c")
	ms := BuildMembership(in)
	if err := ms.CheckRemoval(members[2], "c"); err != nil {
		t.Fatalf("every voter vouched for: removing c refused: %v", err)
	}
	// b was heard by the previous leader only, which also judged it.
	in.Heartbeats["b"] = in.LeaderSince.Add(-time.Second)
	nodes[1] = tnode("b", func(n *pb.Node) { n.StatusChanged = timestamppb.New(in.LeaderSince.Add(-time.Minute)) })
	in.Nodes = testNodes(nodes).MembershipNodes()
	ms = BuildMembership(in)
	if diff := cmp.Diff(map[string]bool{"b": true}, ms.Unvouched); diff != "" {
		t.Fatalf("unvouched (-want +got):\n%s", diff)
	}
	if err := ms.CheckRemoval(members[2], "c"); err == nil {
		t.Error("removing c, leaving the leader and b that it has not heard yet: allowed")
	}
	if q := ms.QuorumAfter(0, 0); q.Healthy != 3 {
		t.Errorf("what a reply shows: %d healthy, want 3", q.Healthy)
	}
	if q := ms.RemovalQuorum(0); q.Healthy != 2 || !slices.Equal(q.Unhealthy, []string{"b"}) {
		t.Errorf("what a removal counts: %+v, want 2 healthy, b not", q)
	}
	if ms.HealthyForRemoval(members[1]) || !ms.HealthyForRemoval(members[0]) {
		t.Error("HealthyForRemoval disagrees with Unvouched")
	}
}

// TestUnheardVotersCountForNothing: a voter etcd does not hear from (it
// died a moment ago: its heartbeats still say ready) counts for no
// removal and takes no etcd leadership; a demote that needs it is
// refused, naming it and why.
func TestUnheardVotersCountForNothing(t *testing.T) {
	three := []member.Member{tvoter(1, "a"), tvoter(2, "b"), tvoter(3, "c")}
	five := append(slices.Clone(three), tvoter(4, "d"), tvoter(5, "e"))
	nodes := []*pb.Node{tnode("a"), tnode("b"), tnode("c"), tnode("d"), tnode("e"), tnode("x", noRole)}
	const unheardC, unheardA = "c (etcd does not hear from it now", "a (etcd does not hear from it now"
	tests := []struct {
		name    string
		self    string
		members []member.Member
		unheard []string
		// off is the voter leadership moves off, and that is removed.
		off uint64
		// wantTo is the node that takes leadership; "" for none, and
		// wantNoTarget is then part of the refusal.
		wantTo, wantNoTarget string
		// wantRemoval is part of the guard's refusal; "" for none.
		wantRemoval string
	}{
		{"all heard: the other voter, not self", "a", three, nil, 2, "c", "", ""},
		{"the dead one is never the target: self takes it", "a", three, []string{"c"}, 2, "a", "", unheardC},
		{"the dead one is never the target", "c", three, []string{"a"}, 2, "c", "", unheardA},
		{"no voter heard to take it", "x", three, []string{"a", "c"}, 2, "", unheardA, unheardC},
		{"five voters, one dead: a live one takes it", "a", five, []string{"b"}, 3, "d", "", ""},
		{"five voters, two dead: removal would leave 2 of 4", "a", five, []string{"b", "c"}, 4, "e", "", "would leave 4 voters of which only 2 are healthy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := gather(tt.self, nodes, tt.members)
			for _, m := range tt.members {
				if slices.Contains(tt.unheard, m.NodeID) {
					delete(in.EtcdHeard, m.ID)
				}
			}
			ms := BuildMembership(in)
			off, _ := ms.Member(tt.off)
			to, err := ms.LeadershipTarget(off)
			switch {
			case tt.wantTo != "" && err != nil:
				t.Errorf("LeadershipTarget = %v, want node %s", err, tt.wantTo)
			case tt.wantTo != "" && ms.NodeOf[to.ID] != tt.wantTo:
				t.Errorf("LeadershipTarget = node %s, want node %s", ms.NodeOf[to.ID], tt.wantTo)
			case tt.wantTo == "" && (err == nil || !errors.Is(err, spec.ErrPrecondition) || !strings.Contains(err.Error(), tt.wantNoTarget)):
				t.Errorf("LeadershipTarget = %v (node %s), want ErrPrecondition saying %q", err, ms.NodeOf[to.ID], tt.wantNoTarget)
			}
			if err == nil && ms.Unheard[ms.NodeOf[to.ID]] {
				t.Errorf("leadership to node %s, which etcd does not hear from", ms.NodeOf[to.ID])
			}
			err = ms.CheckRemoval(off, ms.NodeOf[off.ID])
			switch {
			case tt.wantRemoval == "" && err != nil:
				t.Errorf("CheckRemoval = %v, want nil", err)
			case tt.wantRemoval != "" && (err == nil || !errors.Is(err, spec.ErrPrecondition) || !strings.Contains(err.Error(), tt.wantRemoval)):
				t.Errorf("CheckRemoval = %v, want ErrPrecondition saying %q", err, tt.wantRemoval)
			}
			if q := ms.QuorumAfter(0, 0); q.Healthy != len(tt.members) {
				t.Errorf("what a reply shows: %d healthy, want every voter (%d): the heartbeats say so", q.Healthy, len(tt.members))
			}
		})
	}
}
