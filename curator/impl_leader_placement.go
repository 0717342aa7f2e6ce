package curator

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/curatorproject/curator/consensus"
	pb "github.com/curatorproject/curator/proto"
)

// The placement loop keeps the curator leader and the etcd leader on
// different nodes where there is more than one voter. Killing one node then
// costs one timer, not both: a dead curator leader costs the election TTL,
// a dead etcd leader one etcd election and no curator failover (etcd
// carries leases across its own leader change).

type placementVoter struct {
	memberID uint64
	nodeID   string
	healthy  bool
	// demoting: on its way out, so never a target.
	demoting bool
}

type placementAction struct {
	toMember uint64
	toNode   string
	reason   string
}

// decidePlacement returns where to move etcd leadership, or nil.
func decidePlacement(curatorLeader string, etcdLeader uint64, voters []placementVoter) *placementAction {
	var leaderIsOurs bool
	for _, v := range voters {
		if v.memberID == etcdLeader && v.nodeID == curatorLeader {
			leaderIsOurs = true
		}
	}
	if !leaderIsOurs {
		return nil
	}
	sort.Slice(voters, func(i, j int) bool { return voters[i].nodeID < voters[j].nodeID })
	for _, v := range voters {
		if v.nodeID != curatorLeader && v.nodeID != "" && v.healthy && !v.demoting {
			return &placementAction{toMember: v.memberID, toNode: v.nodeID,
				reason: fmt.Sprintf("node %s is both curator and etcd leader: moving etcd leadership to %s, so that losing one node costs one failover", curatorLeader, v.nodeID)}
		}
	}
	return nil
}

func (s *Service) placementLoop(st *leaderState) loopSpec {
	return loopSpec{
		name:   "placement",
		tick:   func(ctx context.Context) (loopResult, error) { return s.placementTick(ctx, st) },
		resync: time.Second,
		// etcd needs a moment to settle after a transfer; never flap.
		minGap: 2 * time.Second,
	}
}

func (s *Service) placementTick(ctx context.Context, st *leaderState) (loopResult, error) {
	// Under muNodes, so that it never moves leadership onto a member that a
	// demotion or removal is taking out.
	st.muNodes.Lock()
	defer st.muNodes.Unlock()
	ms, err := s.observeMembership(ctx, st)
	if err != nil {
		return loopResult{}, err
	}
	etcdLeader, err := consensus.Leader(ctx, s.cfg.Etcd)
	if err != nil {
		return loopResult{}, err
	}
	var voters []placementVoter
	for _, m := range ms.members {
		if m.IsLearner {
			continue
		}
		id := ms.nodeOf[m.ID]
		n := ms.byID[id]
		// A target must be heard from right now, not merely marked
		// ready: a node cut off a moment ago is still ready for a while,
		// and etcd leadership moved onto it would be lost at once.
		voters = append(voters, placementVoter{memberID: m.ID, nodeID: id,
			healthy:  n != nil && n.Status == pb.NodeStatus_NODE_STATUS_READY && m.ClientURL != "" && s.beatingNow(st, id),
			demoting: n != nil && n.Demoting})
	}
	a := decidePlacement(s.cfg.NodeID, etcdLeader, voters)
	if a == nil {
		return loopResult{}, nil
	}
	if _, err := st.txnAsLeader(ctx); err != nil {
		return loopResult{}, err
	}
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := consensus.MoveLeader(mctx, s.cfg.Etcd, a.toMember); err != nil {
		return loopResult{}, err
	}
	return loopResult{action: "move-etcd-leader", nodeID: a.toNode, reason: a.reason}, nil
}
