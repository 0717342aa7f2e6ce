package curator

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/curatorproject/curator/consensus"
)

// The placement loop keeps the curator leader and the etcd leader on
// different nodes where there is more than one voter. Killing one node then
// costs one timer, not both: a dead curator leader costs the election TTL,
// a dead etcd leader one etcd election and no curator failover (etcd
// carries leases across its own leader change).

type placementAction struct {
	toMember uint64
	toNode   string
	reason   string
}

// decidePlacement returns where to move etcd leadership, or nil: when
// etcd's leader etcdLeader is a voter on this curator's node, to the first
// other voter by node ID that is reachable right now and not being
// demoted.
func decidePlacement(ms *membership, etcdLeader uint64) *placementAction {
	if m, ok := ms.member(etcdLeader); !ok || m.IsLearner || ms.nodeOf[m.ID] != ms.self {
		return nil
	}
	var targets []consensus.Member
	for _, m := range ms.members {
		if id := ms.nodeOf[m.ID]; !m.IsLearner && id != ms.self && id != "" && ms.reachableNow(m) && !ms.demoting(m) {
			targets = append(targets, m)
		}
	}
	if len(targets) == 0 {
		return nil
	}
	to := slices.MinFunc(targets, func(a, b consensus.Member) int { return cmp.Compare(ms.nodeOf[a.ID], ms.nodeOf[b.ID]) })
	return &placementAction{toMember: to.ID, toNode: ms.nodeOf[to.ID],
		reason: fmt.Sprintf("node %s is both curator and etcd leader: moving etcd leadership to %s, so that losing one node costs one failover", ms.self, ms.nodeOf[to.ID])}
}

func (l *leaderLoops) placementLoop() loopSpec {
	return loopSpec{
		name:   "placement",
		tick:   l.membershipTick(l.placementTick),
		resync: l.cfg.PlacementInterval,
		// etcd needs a moment to settle after a transfer; never flap.
		minGap: l.cfg.PlacementGap,
	}
}

func (l *leaderLoops) placementTick(ctx context.Context, ms *membership) (loopResult, error) {
	// Under muNodes (membershipTick), so that it never moves leadership
	// onto a member that a demotion or removal is taking out.
	etcdLeader, err := consensus.Leader(ctx, l.cfg.Etcd)
	if err != nil {
		return loopResult{}, err
	}
	a := decidePlacement(ms, etcdLeader)
	if a == nil {
		return loopResult{}, nil
	}
	if _, err := l.txnAsLeader(ctx); err != nil {
		return loopResult{}, err
	}
	mctx, cancel := context.WithTimeout(ctx, l.cfg.PlacementMoveTimeout)
	defer cancel()
	if err := consensus.MoveLeader(mctx, l.cfg.Etcd, a.toMember); err != nil {
		return loopResult{}, err
	}
	return loopResult{action: "move-etcd-leader", nodeID: a.toNode, reason: a.reason}, nil
}
