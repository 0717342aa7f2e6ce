package decide

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/consensus/member"
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
		members []member.Member
		want    *LearnerAction
	}{
		{"none", nil, []member.Member{self}, nil},
		{"not started yet: wait", []*pb.Node{tnode("a")}, []member.Member{self, tlearner(1, "a", false)}, nil},
		{"started: promote", []*pb.Node{tnode("a")}, []member.Member{self, tlearner(1, "a", true)},
			&LearnerAction{Promote: true, MemberID: 1, NodeID: "a"}},
		{"promotion would leave no healthy majority: wait", []*pb.Node{tnode("a"), tnode("b", notReady), tnode("c", notReady)},
			[]member.Member{self, tvoter(2, "b"), tvoter(3, "c"), tlearner(1, "a", true)}, nil},
		{"promotion with one voter down: promote", []*pb.Node{tnode("a"), tnode("b"), tnode("c", notReady)},
			[]member.Member{self, tvoter(2, "b"), tvoter(3, "c"), tlearner(1, "a", true)}, &LearnerAction{Promote: true, MemberID: 1, NodeID: "a"}},
		{"no node: the sync's business", nil, []member.Member{self, tlearner(1, "", true)}, nil},
		{"node gone: the sync's business", nil, []member.Member{self, tlearner(1, "gone", true)}, nil},
		{"down within the limit: wait", []*pb.Node{tnode("a", downSince(now.Add(-limit/2)))}, []member.Member{self, tlearner(1, "a", true)}, nil},
		{"down past the limit: remove", []*pb.Node{tnode("a", downSince(now.Add(-limit)))}, []member.Member{self, tlearner(1, "a", true)},
			&LearnerAction{MemberID: 1, NodeID: "a"}},
		{"removal before promotion", []*pb.Node{tnode("a"), tnode("b", downSince(now.Add(-2*limit)))},
			[]member.Member{self, tlearner(1, "a", true), tlearner(2, "b", false)}, &LearnerAction{MemberID: 2, NodeID: "b"}},
		{"one at a time, by member ID", []*pb.Node{tnode("a"), tnode("b")},
			[]member.Member{self, tlearner(5, "b", true), tlearner(3, "a", true)}, &LearnerAction{Promote: true, MemberID: 3, NodeID: "a"}},
		{"ready but not heard from now (killed a moment ago): wait", []*pb.Node{tnode("a", silent)}, []member.Member{self, tlearner(1, "a", true)}, nil},
		{"the first learner silent: the next promoted", []*pb.Node{tnode("a", silent), tnode("b")},
			[]member.Member{self, tlearner(3, "a", true), tlearner(5, "b", true)}, &LearnerAction{Promote: true, MemberID: 5, NodeID: "b"}},
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
			got := Learners(ms, now, limit, nil)
			if got != nil && got.Reason == "" {
				t.Error("no reason")
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(LearnerAction{}), ignoreReason); diff != "" {
				t.Errorf("Learners (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideLearnersHeld: a learner etcd refused to promote a moment ago
// (not caught up) is held back, and the learners after it go on.
func TestDecideLearnersHeld(t *testing.T) {
	now, limit := tableNow, time.Minute
	self := tvoter(10, "self")
	down := func(n *pb.Node) {
		n.Status, n.StatusChanged = pb.NodeStatus_NODE_STATUS_DOWN, timestamppb.New(now.Add(-limit))
	}
	tests := []struct {
		name    string
		nodes   []*pb.Node
		members []member.Member
		held    map[uint64]bool
		want    *LearnerAction
	}{
		{"the first learner held: the next promoted", []*pb.Node{tnode("a"), tnode("b")},
			[]member.Member{self, tlearner(3, "a", true), tlearner(5, "b", true)}, map[uint64]bool{3: true},
			&LearnerAction{Promote: true, MemberID: 5, NodeID: "b"}},
		{"the only learner held: wait", []*pb.Node{tnode("a")},
			[]member.Member{self, tlearner(3, "a", true)}, map[uint64]bool{3: true}, nil},
		{"a held learner down past the limit is still removed", []*pb.Node{tnode("a", down)},
			[]member.Member{self, tlearner(3, "a", true)}, map[uint64]bool{3: true}, &LearnerAction{MemberID: 3, NodeID: "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var heard []string
			for _, n := range tt.nodes {
				heard = append(heard, n.Id)
			}
			ms := snapshot("self", append(tt.nodes, tnode("self")), tt.members, heard...)
			got := Learners(ms, now, limit, tt.held)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(LearnerAction{}), ignoreReason); diff != "" {
				t.Errorf("Learners (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLearnerMemory: a learner unpromoted LearnerStuckAfter after this
// leader first saw it is said, with why; one etcd refused is held back
// LearnerRetry; one no longer a learner is forgotten.
func TestLearnerMemory(t *testing.T) {
	t0 := tableNow
	self := tvoter(10, "self")
	silent := tnode("b")
	ms := snapshot("self", []*pb.Node{tnode("self"), tnode("a"), silent, tnode("c")},
		[]member.Member{self, tlearner(3, "a", true), tlearner(5, "b", true), tlearner(7, "c", false)}, "self", "a", "c")
	var lm LearnerMemory
	lm.Observe(ms, t0)
	if id, _, why := lm.Stuck(ms, t0.Add(LearnerStuckAfter-time.Second)); why != "" {
		t.Fatalf("learner %x said stuck before LearnerStuckAfter: %s", id, why)
	}
	boom := errors.New("etcdserver: can only promote a learner member which is in sync with leader")
	lm.Refused(3, boom, t0)
	if held := lm.Held(t0.Add(LearnerRetry - time.Millisecond)); !held[3] || len(held) != 1 {
		t.Errorf("held just before LearnerRetry = %v, want learner 3 alone", held)
	}
	if held := lm.Held(t0.Add(LearnerRetry)); len(held) != 0 {
		t.Errorf("held at LearnerRetry = %v, want none", held)
	}
	// Past LearnerStuckAfter, each is said in member order, with why.
	later := t0.Add(LearnerStuckAfter)
	id, nodeID, why := lm.Stuck(ms, later)
	if id != 3 || nodeID != "a" || !strings.Contains(why, "not caught up") || !strings.Contains(why, boom.Error()) {
		t.Errorf("stuck = %x %s %q, want learner 3 of a, not caught up, saying what etcd answered", id, nodeID, why)
	}
	// Learner 3 promoted (a voter now): forgotten; learner 5 is next, its
	// node not heard from.
	ms = snapshot("self", []*pb.Node{tnode("self"), tnode("a"), silent, tnode("c")},
		[]member.Member{self, tvoter(3, "a"), tlearner(5, "b", true), tlearner(7, "c", false)}, "self", "a", "c")
	lm.Observe(ms, later)
	if _, ok := lm.since[3]; ok {
		t.Error("a learner promoted is still remembered")
	}
	if id, _, why := lm.Stuck(ms, later); id != 5 || !strings.Contains(why, "not heard from") {
		t.Errorf("stuck = %x %q, want learner 5, not heard from", id, why)
	}
	// Learner 5 removed: learner 7 is next, its etcd never started.
	ms = snapshot("self", []*pb.Node{tnode("self"), tnode("a"), tnode("c")},
		[]member.Member{self, tvoter(3, "a"), tlearner(7, "c", false)}, "self", "a", "c")
	lm.Observe(ms, later)
	if id, _, why := lm.Stuck(ms, later); id != 7 || !strings.Contains(why, "has not started") {
		t.Errorf("stuck = %x %q, want learner 7, its etcd not started", id, why)
	}
	// A learner first seen now is not said.
	ms = snapshot("self", []*pb.Node{tnode("self"), tnode("d")},
		[]member.Member{self, tlearner(9, "d", false)}, "self", "d")
	lm.Observe(ms, later)
	if id, _, why := lm.Stuck(ms, later); why != "" {
		t.Errorf("a learner first seen now said stuck: %x %q", id, why)
	}
}
