package decide

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/consensus/member"
	pb "github.com/curatorproject/curator/proto"
)

// TestStatusPredicates: the tables of ShownStatus, Vouched and Ready, row
// by row. A node recorded ready that this leadership has neither heard
// nor judged shows unknown and is not vouched for; heard or judged since
// the leadership began, or not ready, or not up, it shows as recorded; a
// node never judged is vouched for by nobody; the leader's own node is
// ready whatever its record says.
func TestStatusPredicates(t *testing.T) {
	since := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	before, after := since.Add(-time.Minute), since.Add(time.Second)
	node := func(id string, state pb.NodeState, status pb.NodeStatus, changed time.Time) *pb.Node {
		return &pb.Node{Id: id, State: state, Status: status, StatusChanged: timestamppb.New(changed)}
	}
	up, pending := pb.NodeState_NODE_STATE_UP, pb.NodeState_NODE_STATE_PENDING
	ready, down, unknown := pb.NodeStatus_NODE_STATUS_READY, pb.NodeStatus_NODE_STATUS_DOWN, pb.NodeStatus_NODE_STATUS_UNKNOWN
	for _, tc := range []struct {
		name      string
		n         *pb.Node
		last      time.Time
		seen      bool
		wantShown pb.NodeStatus
		wantVouch bool
		wantReady bool
	}{
		{"ready by the previous leader, never heard", node("a", up, ready, before), time.Time{}, false, unknown, false, true},
		{"heard only by the previous leader", node("a", up, ready, before), before, true, unknown, false, true},
		{"heard by this leader", node("a", up, ready, before), after, true, ready, true, true},
		{"heard at the very start of this leadership", node("a", up, ready, before), since, true, ready, true, true},
		{"judged ready by this leader", node("a", up, ready, after), time.Time{}, false, ready, true, true},
		{"judged at the very start of this leadership", node("a", up, ready, since), time.Time{}, false, ready, true, true},
		{"no status change time", &pb.Node{Id: "a", State: up, Status: ready}, time.Time{}, false, unknown, false, true},
		{"down stays down", node("a", up, down, before), time.Time{}, false, down, true, false},
		{"down, heard since: the health loop judges it, not a reply", node("a", up, down, before), after, true, down, true, false},
		{"never judged", node("a", up, unknown, before), after, true, unknown, false, false},
		{"pending approval: as recorded", node("a", pending, ready, before), time.Time{}, false, ready, true, true},
		{"the leader's own node", node("self", up, ready, before), time.Time{}, false, ready, true, true},
		{"the leader's own node, recorded down", node("self", up, down, before), time.Time{}, false, down, true, true},
		{"the leader's own node, never judged", node("self", up, unknown, before), time.Time{}, false, unknown, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShownStatus(tc.n, tc.last, tc.seen, since, "self"); got != tc.wantShown {
				t.Errorf("ShownStatus = %v, want %v", got, tc.wantShown)
			}
			if got := Vouched(tc.n, tc.last, tc.seen, since, "self"); got != tc.wantVouch {
				t.Errorf("Vouched = %v, want %v", got, tc.wantVouch)
			}
			if got := Ready(tc.n, "self"); got != tc.wantReady {
				t.Errorf("Ready = %v, want %v", got, tc.wantReady)
			}
		})
	}
}

// TestBuildMembershipMarks: the builder marks, among the members' nodes,
// the ones heard just now, the ones this leadership does not vouch for,
// and the voters etcd does not hear, from its inputs alone; a node that
// is no member's is marked nothing, and a learner is never unheard.
func TestBuildMembershipMarks(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	since := now.Add(-time.Minute)
	stale := func(n *pb.Node) { n.StatusChanged = timestamppb.New(since.Add(-time.Hour)) }
	nodes := []*pb.Node{tnode("self", stale), tnode("heard", stale), tnode("judged", func(n *pb.Node) { n.StatusChanged = timestamppb.New(since) }),
		tnode("stale", stale), tnode("deaf", stale), tnode("learner", stale), tnode("other", stale)}
	members := []member.Member{tvoter(1, "self"), tvoter(2, "heard"), tvoter(3, "judged"), tvoter(4, "stale"), tvoter(5, "deaf"), tlearner(6, "learner", false)}
	in := MembershipInputs{
		Self: "self", Members: members, Nodes: nodes, HeartbeatInterval: time.Second, LeaderSince: since, Now: now,
		PeerNodes:  map[string]string{members[5].PeerURL: "learner"},
		Heartbeats: map[string]time.Time{"heard": now.Add(-time.Second), "judged": since.Add(-time.Second), "deaf": now, "other": now, "learner": now.Add(-2 * time.Second)},
		EtcdHeard:  map[uint64]bool{1: true, 2: true, 3: true, 4: true},
	}
	ms := BuildMembership(in)
	want := map[string]map[string]bool{
		"heard":     {"heard": true, "deaf": true, "learner": true},
		"unvouched": {"stale": true},
		"unheard":   {"deaf": true},
	}
	got := map[string]map[string]bool{"heard": ms.Heard, "unvouched": ms.Unvouched, "unheard": ms.Unheard}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("marks (-want +got):\n%s", diff)
	}
	if ms.NodeOf[6] != "learner" {
		t.Errorf("the unstarted learner is matched to node %q, want learner (by its peer URL)", ms.NodeOf[6])
	}
	var healthy []string
	for _, m := range ms.Members {
		if ms.HealthyVoter(ms.NodeOf[m.ID]) {
			healthy = append(healthy, ms.NodeOf[m.ID])
		}
	}
	if diff := cmp.Diff([]string{"self", "heard", "judged"}, healthy); diff != "" {
		t.Errorf("voters a removal counts healthy (-want +got):\n%s", diff)
	}
}
