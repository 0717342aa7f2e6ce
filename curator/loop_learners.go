package curator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/curatorproject/curator/consensus"
	pb "github.com/curatorproject/curator/proto"
)

// The learner promotion loop. A learner is promoted once etcd says it has
// caught up (etcd refuses before; that is not an error, the loop tries
// again next tick). A learner whose node has been down past the limit is
// removed: it holds a learner slot and will never catch up. A learner whose
// node does not exist is the consensus sync's to remove. The quorum check
// is part of the decision (decideLearners), as every guard is.

type learnerAction struct {
	promote  bool // else remove
	memberID uint64
	nodeID   string
	reason   string
}

// decideLearners returns the one learner change to make, or nil: first a
// learner whose node has been down past downLimit is removed, then a
// learner that has started and whose node this leader hears from right
// now is promoted if, counted as a healthy voter, a healthy majority of
// voters remains (etcd's own check of this is off: see consensus).
// Learners are taken by member ID. Heard from now, not merely not down: a
// node killed a moment ago stays ready until down-after, its learner is
// still caught up, and promoted it would be a dead voter the others'
// quorum must carry, unknown to anyone counting voters a moment before.
func decideLearners(ms *membership, now time.Time, downLimit time.Duration) *learnerAction {
	for _, m := range ms.members {
		n := ms.nodeOfMember(m)
		if !m.IsLearner || n == nil || n.Status != pb.NodeStatus_NODE_STATUS_DOWN {
			continue
		}
		if since := n.StatusChanged.AsTime(); now.Sub(since) >= downLimit {
			return &learnerAction{memberID: m.ID, nodeID: n.Id,
				reason: fmt.Sprintf("learner %x: node %s has been down since %s, past the limit of %s", m.ID, n.Id, since.Format(time.RFC3339), downLimit)}
		}
	}
	for _, m := range ms.members {
		n := ms.nodeOfMember(m)
		// A member that has started carries its node's ID as its name.
		started := m.NodeID != ""
		if !m.IsLearner || n == nil || !started || n.Status == pb.NodeStatus_NODE_STATUS_DOWN || !ms.heard[n.Id] || !ms.quorumAfter(0, m.ID).ok() {
			continue
		}
		return &learnerAction{promote: true, memberID: m.ID, nodeID: n.Id,
			reason: fmt.Sprintf("learner %x of node %s is running: promote it to voter (etcd refuses until it has caught up)", m.ID, n.Id)}
	}
	return nil
}

func (l *leaderLoops) learnerLoop() loopSpec {
	return l.membershipLoop("learners", l.learnerTick)
}

func (l *leaderLoops) learnerTick(ctx context.Context, ms *membership) (loopResult, error) {
	a := decideLearners(ms, l.cfg.Now(), l.cfg.LearnerDownLimit)
	if a == nil {
		return loopResult{}, nil
	}
	if !a.promote {
		if err := l.removeMember(ctx, a.memberID); err != nil {
			return loopResult{}, err
		}
		return loopResult{action: "remove-learner", nodeID: a.nodeID, reason: a.reason}, nil
	}
	if _, err := l.txnAsLeader(ctx); err != nil {
		return loopResult{}, err
	}
	pctx, cancel := context.WithTimeout(ctx, l.cfg.PromoteTimeout)
	defer cancel()
	if err := consensus.PromoteLearner(pctx, l.cfg.Etcd, a.memberID); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// Not caught up yet: try again next tick.
			return loopResult{}, nil
		}
		return loopResult{}, err
	}
	// A new voter is what a rollout of a consensus group waits for.
	kick(l.kickGroups)
	return loopResult{action: "promote", nodeID: a.nodeID, reason: a.reason}, nil
}
