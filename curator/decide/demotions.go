package decide

import "fmt"

// DemotionActionKind is what an action does, as events and metrics name it.
type DemotionActionKind string

const (
	DemotionResign DemotionActionKind = "resign"
	DemotionFinish DemotionActionKind = "demote"
	DemotionRefuse DemotionActionKind = "refuse"
	// DemotionWait: another loop (the swarm sync) has a step to take
	// first; not a refusal.
	DemotionWait DemotionActionKind = "wait"
)

type DemotionAction struct {
	Kind   DemotionActionKind
	NodeID string
	Reason string
}

// Demotions returns what to do about the first node, by ID, that is
// marked demoting, or nil when none is. With the Swarm flavor on, a
// demotion changes the Swarm first: a node in swarmManager (its Swarm node
// is still a manager) waits for the swarm sync to demote it, which is
// said (DemotionWait) when no other demotion can go on.
func Demotions(ms *Membership, swarmManager map[string]bool) *DemotionAction {
	var wait *DemotionAction
	for _, n := range ms.Nodes {
		if !n.Demoting {
			continue
		}
		if n.Id == ms.Self {
			return &DemotionAction{Kind: DemotionResign, NodeID: n.Id,
				Reason: fmt.Sprintf("this curator's node %s is being demoted: resigning so the next leader finishes", n.Id)}
		}
		if swarmManager[n.Id] {
			if wait == nil {
				wait = &DemotionAction{Kind: DemotionWait, NodeID: n.Id,
					Reason: fmt.Sprintf("node %s is being demoted: waiting for the swarm sync to demote its Swarm manager first", n.Id)}
			}
			continue
		}
		if m, member := ms.MemberOf[n.Id]; member {
			if err := ms.CheckRemoval(m, n.Id); err != nil {
				return &DemotionAction{Kind: DemotionRefuse, NodeID: n.Id, Reason: err.Error()}
			}
		}
		return &DemotionAction{Kind: DemotionFinish, NodeID: n.Id,
			Reason: fmt.Sprintf("node %s is marked demoting: finishing its demotion", n.Id)}
	}
	return wait
}
