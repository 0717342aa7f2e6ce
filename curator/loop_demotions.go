package curator

import (
	"context"
	"fmt"
)

// The demotion loop finishes demotions a leader started and did not end:
// its own (it resigned, so that the next leader finishes it), or one cut
// short by a crash. A demotion is finished under the quorum guard, as the
// operator's demote was: a demotion that would now leave no healthy
// majority waits, refused with the reason, until the voters are back.

func (l *leaderLoops) demotionLoop() loopSpec {
	return l.membershipLoop("demotions", l.demotionTick)
}

// demotionActionKind is what an action does, as events and metrics name it.
type demotionActionKind string

const (
	demotionResign demotionActionKind = "resign"
	demotionFinish demotionActionKind = "demote"
	demotionRefuse demotionActionKind = "refuse"
	// demotionWait: another loop (the swarm sync) has a step to take
	// first; not a refusal.
	demotionWait demotionActionKind = "wait"
)

type demotionAction struct {
	kind   demotionActionKind
	nodeID string
	reason string
}

// decideDemotions returns what to do about the first node, by ID, that is
// marked demoting, or nil when none is. With the Swarm flavor on, a
// demotion changes the Swarm first: a node in swarmManager (its Swarm node
// is still a manager) waits for the swarm sync to demote it, which is
// said (demotionWait) when no other demotion can go on.
func decideDemotions(ms *membership, swarmManager map[string]bool) *demotionAction {
	var wait *demotionAction
	for _, n := range ms.nodes {
		if !n.Demoting {
			continue
		}
		if n.Id == ms.self {
			return &demotionAction{kind: demotionResign, nodeID: n.Id,
				reason: fmt.Sprintf("this curator's node %s is being demoted: resigning so the next leader finishes", n.Id)}
		}
		if swarmManager[n.Id] {
			if wait == nil {
				wait = &demotionAction{kind: demotionWait, nodeID: n.Id,
					reason: fmt.Sprintf("node %s is being demoted: waiting for the swarm sync to demote its Swarm manager first", n.Id)}
			}
			continue
		}
		if m, member := ms.memberOf[n.Id]; member {
			if err := ms.checkRemoval(m, n.Id); err != nil {
				return &demotionAction{kind: demotionRefuse, nodeID: n.Id, reason: err.Error()}
			}
		}
		return &demotionAction{kind: demotionFinish, nodeID: n.Id,
			reason: fmt.Sprintf("node %s is marked demoting: finishing its demotion", n.Id)}
	}
	return wait
}

func (l *leaderLoops) demotionTick(ctx context.Context, ms *membership) (loopResult, error) {
	swarmManager, err := l.swarmManagersOf(ctx, ms)
	if err != nil {
		if ctx.Err() != nil {
			return loopResult{}, ctx.Err()
		}
		return loopResult{refused: true, reason: fmt.Sprintf("a demotion changes the Swarm first, and the Swarm cannot be read to see whether it has: %v", err)}, nil
	}
	a := decideDemotions(ms, swarmManager)
	switch {
	case a == nil:
		return loopResult{}, nil
	case a.kind == demotionRefuse:
		return loopResult{refused: true, nodeID: a.nodeID, reason: a.reason}, nil
	case a.kind == demotionWait:
		return loopResult{waiting: true, nodeID: a.nodeID, reason: a.reason}, nil
	case a.kind == demotionResign:
		l.resign()
		return loopResult{action: string(a.kind), nodeID: a.nodeID, reason: a.reason}, nil
	}
	msg, err := l.finishDemotion(ctx, ms, ms.byID[a.nodeID])
	if isPrecondition(err) {
		// What the decision could not see (no voter to take etcd
		// leadership): say so, and look again next tick.
		return loopResult{refused: true, nodeID: a.nodeID, reason: err.Error()}, nil
	}
	return loopResult{action: string(a.kind), nodeID: a.nodeID, reason: msg}, err
}
