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
//
// A learner etcd will not promote yet (not caught up) is held back
// learnerRetry, and the learners after it go on meanwhile: one that never
// catches up must not keep the others waiting. A learner this leader has
// seen unpromoted for learnerStuckAfter is said, with why it waits (a
// refusal event: its etcd never started, its node is not heard from, the
// quorum, or what etcd last answered), so that a new manager stuck as a
// learner is explained where operators look.

const (
	learnerRetry      = 500 * time.Millisecond
	learnerStuckAfter = 30 * time.Second
)

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
// held are the learners etcd refused to promote a moment ago.
func decideLearners(ms *membership, now time.Time, downLimit time.Duration, held map[uint64]bool) *learnerAction {
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
		if !m.IsLearner || held[m.ID] || learnerWaits(ms, m) != "" {
			continue
		}
		n := ms.nodeOfMember(m)
		return &learnerAction{promote: true, memberID: m.ID, nodeID: n.Id,
			reason: fmt.Sprintf("learner %x of node %s is running: promote it to voter (etcd refuses until it has caught up)", m.ID, n.Id)}
	}
	return nil
}

// learnerWaits says why learner m is not to be promoted now ("": it is).
func learnerWaits(ms *membership, m consensus.Member) string {
	n := ms.nodeOfMember(m)
	switch {
	case n == nil:
		return "no node matches it (the consensus sync removes it)"
	case m.NodeID == "":
		// A member that has started carries its node's ID as its name.
		return "its etcd has not started (the member has no name yet): the agent's log of its node says why"
	case n.Status == pb.NodeStatus_NODE_STATUS_DOWN:
		return "its node is down"
	case !ms.heard[n.Id]:
		return "this leader has not heard from its node just now (no heartbeat within two intervals): frozen, cut off, or its session is moving"
	}
	if q := ms.quorumAfter(0, m.ID); !q.ok() {
		return fmt.Sprintf("promoted, it would leave %d healthy of %d voters, short of a majority", q.healthy, q.voters)
	}
	return ""
}

// learnerMemory is what the learners loop remembers between ticks, per
// learner: when this leader first saw it, and etcd's last refusal to
// promote it. Only the learners loop uses it.
type learnerMemory struct {
	since   map[uint64]time.Time
	refusal map[uint64]learnerRefusal
}

type learnerRefusal struct {
	until time.Time
	err   error
}

// observe notes the learners of ms first seen at now, and forgets the
// members that are no longer learners.
func (lm *learnerMemory) observe(ms *membership, now time.Time) {
	if lm.since == nil {
		lm.since, lm.refusal = map[uint64]time.Time{}, map[uint64]learnerRefusal{}
	}
	learners := map[uint64]bool{}
	for _, m := range ms.members {
		if !m.IsLearner {
			continue
		}
		learners[m.ID] = true
		if _, ok := lm.since[m.ID]; !ok {
			lm.since[m.ID] = now
		}
	}
	for id := range lm.since {
		if !learners[id] {
			delete(lm.since, id)
			delete(lm.refusal, id)
		}
	}
}

// refused notes that etcd refused to promote learner id at now: it is
// held back learnerRetry.
func (lm *learnerMemory) refused(id uint64, err error, now time.Time) {
	lm.refusal[id] = learnerRefusal{until: now.Add(learnerRetry), err: err}
}

// held returns the learners held back at now.
func (lm *learnerMemory) held(now time.Time) map[uint64]bool {
	held := map[uint64]bool{}
	for id, r := range lm.refusal {
		if now.Before(r.until) {
			held[id] = true
		}
	}
	return held
}

// stuck returns the first learner of ms first seen learnerStuckAfter or
// more before now, with why it is not promoted ("" for none).
func (lm *learnerMemory) stuck(ms *membership, now time.Time) (memberID uint64, nodeID, why string) {
	for _, m := range ms.members {
		since, ok := lm.since[m.ID]
		if !m.IsLearner || !ok || now.Sub(since) < learnerStuckAfter {
			continue
		}
		why := learnerWaits(ms, m)
		if r, ok := lm.refusal[m.ID]; ok && why == "" {
			why = fmt.Sprintf("etcd does not let it be promoted, it has not caught up with the etcd leader: %v", r.err)
		}
		if why == "" {
			continue // about to be promoted
		}
		return m.ID, ms.nodeOf[m.ID], why
	}
	return 0, "", ""
}

func (l *leaderLoops) learnerLoop() loopSpec {
	return l.membershipLoop("learners", l.learnerTick)
}

func (l *leaderLoops) learnerTick(ctx context.Context, ms *membership) (loopResult, error) {
	now := l.cfg.Now()
	l.learnerMem.observe(ms, now)
	a := decideLearners(ms, now, l.cfg.LearnerDownLimit, l.learnerMem.held(now))
	if a == nil {
		if id, nodeID, why := l.learnerMem.stuck(ms, now); why != "" {
			return loopResult{refused: true, nodeID: nodeID,
				reason: fmt.Sprintf("learner %x of node %s has not been promoted for %v or more: %s", id, orNone(nodeID), learnerStuckAfter, why)}, nil
		}
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
			// Not caught up yet: held back a moment, the other
			// learners going on meanwhile.
			l.learnerMem.refused(a.memberID, err, now)
			return loopResult{again: true}, nil
		}
		return loopResult{}, err
	}
	// A new voter is what a rollout of a consensus group waits for.
	kick(l.kickGroups)
	return loopResult{action: "promote", nodeID: a.nodeID, reason: a.reason}, nil
}
