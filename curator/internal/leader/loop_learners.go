package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/curatorproject/curator/curator/decide"
)

// The learner promotion loop. A learner is promoted once etcd says it has
// caught up (etcd refuses before; that is not an error, the loop tries
// again next tick). A learner whose node has been down past the limit is
// removed: it holds a learner slot and will never catch up. A learner whose
// node does not exist is the consensus sync's to remove. The quorum check
// is part of the decision (decide.Learners), as every guard is.
//
// A learner etcd will not promote yet (not caught up) is held back
// learnerRetry, and the learners after it go on meanwhile: one that never
// catches up must not keep the others waiting. A learner this leader has
// seen unpromoted for learnerStuckAfter is said, with why it waits (a
// refusal event: its etcd never started, its node is not heard from, the
// quorum, or what etcd last answered), so that a new manager stuck as a
// learner is explained where operators look.

// learnerLoop is the learners loop; it owns what it remembers between
// ticks (mem), which no other loop reaches.
type learnerLoop struct {
	cfg     *Config
	lead    *Leadership
	members *members
	groups  *groupRecords
	mem     decide.LearnerMemory
}

func newLearnerLoop(st *State) *learnerLoop {
	return &learnerLoop{cfg: st.Cfg, lead: st.Lead, members: st.Members, groups: st.Groups}
}

func (l *learnerLoop) spec() loopSpec {
	return membershipLoop("learners", l.cfg, l.members, l.tick)
}

// tick observes what the learners' memory keeps of ms, decides and acts.
func (l *learnerLoop) tick(ctx context.Context, ms *decide.Membership) (loopResult, error) {
	now := l.cfg.Now()
	l.mem.Observe(ms, now)
	a := decide.Learners(ms, now, l.cfg.LearnerDownLimit, l.mem.Held(now))
	if a == nil {
		if id, nodeID, why := l.mem.Stuck(ms, now); why != "" {
			return loopResult{refused: true, nodeID: nodeID,
				reason: fmt.Sprintf("learner %x of node %s has not been promoted for %v or more: %s", id, decide.OrNone(nodeID), decide.LearnerStuckAfter, why)}, nil
		}
		return loopResult{}, nil
	}
	return l.act(ctx, a, now)
}

// act removes or promotes the learner a names; a promotion etcd refuses
// for now (not caught up) is held back a moment in the memory.
func (l *learnerLoop) act(ctx context.Context, a *decide.LearnerAction, now time.Time) (loopResult, error) {
	if !a.Promote {
		if err := l.lead.RemoveMember(ctx, a.MemberID); err != nil {
			return loopResult{}, err
		}
		return loopResult{action: "remove-learner", nodeID: a.NodeID, reason: a.Reason}, nil
	}
	pctx, cancel := context.WithTimeout(ctx, l.cfg.PromoteTimeout)
	defer cancel()
	if err := l.lead.PromoteLearner(pctx, a.MemberID); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// Not caught up yet: held back a moment, the other
			// learners going on meanwhile.
			l.mem.Refused(a.MemberID, err, now)
			return loopResult{again: true}, nil
		}
		return loopResult{}, err
	}
	// A new voter is what a rollout of a consensus group waits for.
	l.groups.Kick()
	return loopResult{action: "promote", nodeID: a.NodeID, reason: a.Reason}, nil
}
