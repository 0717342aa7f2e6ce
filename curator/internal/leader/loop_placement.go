package leader

import (
	"context"

	"github.com/curatorproject/curator/curator/decide"
)

// The placement loop keeps the curator leader and the etcd leader on
// different nodes where there is more than one voter. Killing one node then
// costs one timer, not both: a dead curator leader costs the election TTL,
// a dead etcd leader one etcd election and no curator failover (etcd
// carries leases across its own leader change).

type placementLoop struct {
	cfg     *Config
	lead    *Leadership
	members *members
}

func newPlacementLoop(st *State) *placementLoop {
	return &placementLoop{cfg: st.Cfg, lead: st.Lead, members: st.Members}
}

func (l *placementLoop) spec() loopSpec {
	return loopSpec{
		name:   "placement",
		tick:   l.members.locked(l.tick),
		resync: l.cfg.PlacementInterval,
		// etcd needs a moment to settle after a transfer; never flap.
		minGap: l.cfg.PlacementGap,
	}
}

func (l *placementLoop) tick(ctx context.Context, ms *decide.Membership) (loopResult, error) {
	// Under muNodes (membershipTick), so that it never moves leadership
	// onto a member that a demotion or removal is taking out.
	// The etcd leader is the one that answered for itself when ms was
	// observed (0: none did, and nothing moves).
	return l.act(ctx, decide.Placement(ms, ms.EtcdLeader))
}

// act moves etcd leadership as a says (nil: it stays).
func (l *placementLoop) act(ctx context.Context, a *decide.PlacementAction) (loopResult, error) {
	if a == nil {
		return loopResult{}, nil
	}
	if err := l.lead.MoveLeader(ctx, a.ToMember, l.cfg.PlacementMoveTimeout); err != nil {
		return loopResult{}, err
	}
	return loopResult{action: "move-etcd-leader", nodeID: a.ToNode, reason: a.Reason}, nil
}
