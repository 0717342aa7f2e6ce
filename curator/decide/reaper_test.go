package decide

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	pb "github.com/curatorproject/curator/proto"
)

func TestDecideReap(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	down := func(id string, for_ time.Duration) ReapNode {
		return ReapNode{ID: id, Status: pb.NodeStatus_NODE_STATUS_DOWN, Since: now.Add(-for_)}
	}
	snap := func(nodes ...ReapNode) ReapSnapshot {
		return ReapSnapshot{Nodes: nodes, Voters: 3, HealthyVoters: 3, ReapAfter: time.Hour, Now: now}
	}
	for _, tc := range []struct {
		name string
		s    ReapSnapshot
		want *ReapAction
	}{
		{"nothing down", snap(), nil},
		{"not down long enough", snap(down("a", 59*time.Minute)), nil},
		{"down past the limit", snap(down("a", 61*time.Minute)),
			&ReapAction{Node: "a", Reason: "node a has been down for 1h1m0s (reap-after 1h0m0s) and no group answers for it"}},
		{"the longest down first", snap(down("a", 61*time.Minute), down("b", 2*time.Hour)),
			&ReapAction{Node: "b", Reason: "node b has been down for 2h0m0s (reap-after 1h0m0s) and no group answers for it"}},
		{"a group's node is the group's", snap(func() ReapNode { n := down("a", 2*time.Hour); n.Grouped = true; return n }()), nil},
		{"never the leader's own node", snap(func() ReapNode { n := down("a", 2*time.Hour); n.Leader = true; return n }()), nil},
		{"a ready node is not reaped", snap(ReapNode{ID: "a", Status: pb.NodeStatus_NODE_STATUS_READY, Since: now.Add(-2 * time.Hour)}), nil},
		{"a dead voter within the quorum guard", func() ReapSnapshot {
			n := down("a", 2*time.Hour)
			n.Consensus = true
			s := snap(n)
			s.HealthyVoters = 2
			return s
		}(), &ReapAction{Node: "a", Reason: "node a has been down for 2h0m0s (reap-after 1h0m0s) and no group answers for it"}},
		{"the last voter is refused", func() ReapSnapshot {
			n := down("a", 2*time.Hour)
			n.Consensus = true
			s := snap(n)
			s.Voters, s.HealthyVoters = 1, 0
			return s
		}(), &ReapAction{Node: "a", Refused: true, Reason: "node a has been down for 2h0m0s, but removing its etcd member would leave 0 healthy of 0 voters: bring voters back first"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Reap(tc.s)); d != "" {
				t.Errorf("Reap (-want +got):\n%s", d)
			}
		})
	}
}
