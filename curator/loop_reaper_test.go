package curator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	pb "github.com/curatorproject/curator/proto"
)

func TestDecideReap(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	down := func(id string, for_ time.Duration) reapNode {
		return reapNode{ID: id, Status: pb.NodeStatus_NODE_STATUS_DOWN, Since: now.Add(-for_)}
	}
	snap := func(nodes ...reapNode) reapSnapshot {
		return reapSnapshot{Nodes: nodes, Voters: 3, HealthyVoters: 3, ReapAfter: time.Hour, Now: now}
	}
	for _, tc := range []struct {
		name string
		s    reapSnapshot
		want *reapAction
	}{
		{"nothing down", snap(), nil},
		{"not down long enough", snap(down("a", 59*time.Minute)), nil},
		{"down past the limit", snap(down("a", 61*time.Minute)),
			&reapAction{Node: "a", Reason: "node a has been down for 1h1m0s (reap-after 1h0m0s) and no group answers for it"}},
		{"the longest down first", snap(down("a", 61*time.Minute), down("b", 2*time.Hour)),
			&reapAction{Node: "b", Reason: "node b has been down for 2h0m0s (reap-after 1h0m0s) and no group answers for it"}},
		{"a group's node is the group's", snap(func() reapNode { n := down("a", 2*time.Hour); n.Grouped = true; return n }()), nil},
		{"never the leader's own node", snap(func() reapNode { n := down("a", 2*time.Hour); n.Leader = true; return n }()), nil},
		{"a ready node is not reaped", snap(reapNode{ID: "a", Status: pb.NodeStatus_NODE_STATUS_READY, Since: now.Add(-2 * time.Hour)}), nil},
		{"a dead voter within the quorum guard", func() reapSnapshot {
			n := down("a", 2*time.Hour)
			n.Consensus = true
			s := snap(n)
			s.HealthyVoters = 2
			return s
		}(), &reapAction{Node: "a", Reason: "node a has been down for 2h0m0s (reap-after 1h0m0s) and no group answers for it"}},
		{"the last voter is refused", func() reapSnapshot {
			n := down("a", 2*time.Hour)
			n.Consensus = true
			s := snap(n)
			s.Voters, s.HealthyVoters = 1, 0
			return s
		}(), &reapAction{Node: "a", Refused: true, Reason: "node a has been down for 2h0m0s, but removing its etcd member would leave 0 healthy of 0 voters: bring voters back first"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, decideReap(tc.s)); d != "" {
				t.Errorf("decideReap (-want +got):\n%s", d)
			}
		})
	}
}
