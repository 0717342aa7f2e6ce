package decide

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/curatorproject/curator/consensus/member"
)

type PlacementAction struct {
	ToMember uint64
	ToNode   string
	Reason   string
}

// Placement returns where to move etcd leadership, or nil: when
// etcd's leader etcdLeader is a voter on this curator's node, to the first
// other voter by node ID that is reachable right now and not being
// demoted.
func Placement(ms *Membership, etcdLeader uint64) *PlacementAction {
	if m, ok := ms.Member(etcdLeader); !ok || m.IsLearner || ms.NodeOf[m.ID] != ms.Self {
		return nil
	}
	var targets []member.Member
	for _, m := range ms.Members {
		if id := ms.NodeOf[m.ID]; !m.IsLearner && id != ms.Self && id != "" && ms.ReachableNow(m) && !ms.Demoting(m) {
			targets = append(targets, m)
		}
	}
	if len(targets) == 0 {
		return nil
	}
	to := slices.MinFunc(targets, func(a, b member.Member) int { return cmp.Compare(ms.NodeOf[a.ID], ms.NodeOf[b.ID]) })
	return &PlacementAction{ToMember: to.ID, ToNode: ms.NodeOf[to.ID],
		Reason: fmt.Sprintf("node %s is both curator and etcd leader: moving etcd leadership to %s, so that losing one node costs one failover", ms.Self, ms.NodeOf[to.ID])}
}
