package curator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/curatorproject/curator/consensus"
	pb "github.com/curatorproject/curator/proto"
)

// The learner promotion loop. A learner is promoted once etcd says it has
// caught up (etcd refuses before; that is not an error, the loop tries
// again next tick). A learner whose node has been down past the limit is
// removed: it holds a learner slot and will never catch up. A learner whose
// node does not exist is the consensus sync's to remove.

type learnerInfo struct {
	memberID uint64
	nodeID   string
	// quorumAfter: promoting it leaves a healthy majority of voters (it
	// counts as healthy itself: it runs).
	quorumAfter bool
	// started: etcd on the node has run (the member has a name).
	started bool
	// downSince is when the node went down; zero when it is not down.
	downSince time.Time
}

type learnerAction struct {
	promote  bool // else remove
	memberID uint64
	nodeID   string
	reason   string
}

// decideLearners returns the one learner change to make, or nil.
func decideLearners(learners []learnerInfo, now time.Time, downLimit time.Duration) *learnerAction {
	sort.Slice(learners, func(i, j int) bool { return learners[i].memberID < learners[j].memberID })
	for _, l := range learners {
		if l.nodeID == "" {
			continue
		}
		if !l.downSince.IsZero() && now.Sub(l.downSince) >= downLimit {
			return &learnerAction{memberID: l.memberID, nodeID: l.nodeID,
				reason: fmt.Sprintf("learner %x: node %s has been down since %s, past the limit of %s", l.memberID, l.nodeID, l.downSince.Format(time.RFC3339), downLimit)}
		}
	}
	for _, l := range learners {
		if l.nodeID != "" && l.started && l.downSince.IsZero() && l.quorumAfter {
			return &learnerAction{promote: true, memberID: l.memberID, nodeID: l.nodeID,
				reason: fmt.Sprintf("learner %x of node %s is running: promote it to voter (etcd refuses until it has caught up)", l.memberID, l.nodeID)}
		}
	}
	return nil
}

func (s *Service) learnerLoop(st *leaderState) loopSpec {
	return loopSpec{
		name:        "learners",
		tick:        func(ctx context.Context) (loopResult, error) { return s.learnerTick(ctx, st) },
		nodeChanges: membershipChange,
		resync:      s.cfg.SyncInterval,
		minGap:      s.cfg.MinActionGap,
	}
}

func (s *Service) learnerTick(ctx context.Context, st *leaderState) (loopResult, error) {
	st.muNodes.Lock()
	defer st.muNodes.Unlock()
	ms, err := s.observeMembership(ctx, st)
	if err != nil {
		return loopResult{}, err
	}
	voters, healthy := 0, 0
	for _, m := range ms.members {
		if !m.IsLearner {
			voters++
			if s.voterHealthy(ms, m) {
				healthy++
			}
		}
	}
	// With the learner as a healthy voter, is there a healthy majority?
	// (etcd's own check of this is off: see consensus.)
	quorumAfter := healthy+1 >= (voters+1)/2+1
	var learners []learnerInfo
	for _, m := range ms.members {
		if !m.IsLearner {
			continue
		}
		l := learnerInfo{memberID: m.ID, nodeID: ms.nodeOf[m.ID], started: m.NodeID != "", quorumAfter: quorumAfter}
		if n := ms.byID[l.nodeID]; n != nil && n.Status == pb.NodeStatus_NODE_STATUS_DOWN {
			l.downSince = n.StatusChanged.AsTime()
		}
		learners = append(learners, l)
	}
	a := decideLearners(learners, s.cfg.Now(), s.cfg.LearnerDownLimit)
	if a == nil {
		return loopResult{}, nil
	}
	if !a.promote {
		if err := s.removeMemberAsLeader(ctx, st, a.memberID); err != nil {
			return loopResult{}, err
		}
		return loopResult{action: "remove-learner", nodeID: a.nodeID, reason: a.reason}, nil
	}
	if _, err := st.txnAsLeader(ctx); err != nil {
		return loopResult{}, err
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := consensus.PromoteLearner(pctx, s.cfg.Etcd, a.memberID); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// Not caught up yet: try again next tick.
			return loopResult{}, nil
		}
		return loopResult{}, err
	}
	return loopResult{action: "promote", nodeID: a.nodeID, reason: a.reason}, nil
}
