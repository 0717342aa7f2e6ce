package leader

import (
	"context"
	"errors"
	"fmt"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/spec"
)

// The demotion loop finishes demotions a leader started and did not end:
// its own (it resigned, so that the next leader finishes it), or one cut
// short by a crash. A demotion is finished under the quorum guard, as the
// operator's demote was: a demotion that would now leave no healthy
// majority waits, refused with the reason, until the voters are back.

type demotionLoop struct {
	cfg     *Config
	members *members
	roles   *roles
	swarm   *swarmEngine
	resign  func()
}

func newDemotionLoop(st *State) *demotionLoop {
	return &demotionLoop{cfg: st.Cfg, members: st.Members, roles: st.Roles, swarm: st.Swarm, resign: st.resign}
}

func (l *demotionLoop) spec() loopSpec {
	return membershipLoop("demotions", l.cfg, l.members, l.tick)
}

// tick observes the Swarm managers a demotion waits on (beside the
// membership snapshot ms), decides and acts.
func (l *demotionLoop) tick(ctx context.Context, ms *decide.Membership) (loopResult, error) {
	swarmManager, err := l.swarm.managersOf(ctx, ms)
	if err != nil {
		if ctx.Err() != nil {
			return loopResult{}, ctx.Err()
		}
		return loopResult{refused: true, reason: fmt.Sprintf("a demotion changes the Swarm first, and the Swarm cannot be read to see whether it has: %v", err)}, nil
	}
	return l.act(ctx, ms, decide.Demotions(ms, swarmManager))
}

// act takes the step of a demotion that a (nil: none) names.
func (l *demotionLoop) act(ctx context.Context, ms *decide.Membership, a *decide.DemotionAction) (loopResult, error) {
	switch {
	case a == nil:
		return loopResult{}, nil
	case a.Kind == decide.DemotionRefuse:
		return loopResult{refused: true, nodeID: a.NodeID, reason: a.Reason}, nil
	case a.Kind == decide.DemotionWait:
		return loopResult{waiting: true, nodeID: a.NodeID, reason: a.Reason}, nil
	case a.Kind == decide.DemotionResign:
		l.resign()
		return loopResult{action: string(a.Kind), nodeID: a.NodeID, reason: a.Reason}, nil
	}
	msg, err := l.roles.finishDemotion(ctx, ms, ms.ByID[a.NodeID])
	if errors.Is(err, spec.ErrPrecondition) {
		// What the decision could not see (no voter to take etcd
		// leadership): say so, and look again next tick.
		return loopResult{refused: true, nodeID: a.NodeID, reason: err.Error()}, nil
	}
	return loopResult{action: string(a.Kind), nodeID: a.NodeID, reason: msg}, err
}
