package curator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/swarm"
)

// The swarm sync's decision (docs/architecture.md, "The swarm flavor"):
// a pure function from one snapshot of the curator's nodes and of a Docker
// Swarm's node list to at most one change, with its reason. The swarm
// sync loop (loop_swarm.go) runs it.
//
// The mapping: a node with the consensus role is a Swarm manager, any other
// node a Swarm worker. The Swarm's membership says how far a change that
// touches it has got, and the decision finishes the change from there, one
// step per tick:
//
//   - A promotion changes Swarm first (the node becomes a Swarm manager),
//     then etcd (its learner, by the promotion the management API and the
//     approvals loop already make), then the role (the consensus sync). A
//     Swarm manager whose node lacks the role is therefore a promotion cut
//     short after its Swarm step: the role is granted (the promotion
//     carries on at its etcd step), as the consensus sync grants the role
//     to an etcd member. Where the node can never hold the role (it was
//     refused after a recovery, or the cluster has its voters), the Swarm
//     manager is demoted instead: a Swarm vote must belong to a consensus
//     node.
//   - A demotion changes Swarm first too: with `demoting` set, the node is
//     demoted in Swarm, and only then does the demotions loop remove its
//     etcd member and the consensus sync its role; `demoting` is cleared
//     last. A Swarm manager whose node is demoting is demoted in Swarm; a
//     demoting Swarm worker is left to the demotions loop.
//   - A node with the role that is a Swarm worker, and not demoting, is
//     promoted in Swarm. This is where the swarm sync departs from the
//     consensus sync, which clears a role without a member: leaving etcd
//     cannot be undone, but a Swarm manager's demotion can, and a node
//     that comes back to the Swarm always comes back as a worker. Clearing
//     an etcd voter's role because Swarm forgot it was a manager would
//     throw a healthy vote away.
//   - A node that is not in the Swarm (its agent never joined, or its
//     Swarm node was removed or left) is asked to join again: the act
//     sets a request in its record, which its agent, watching its record,
//     answers by joining as a worker, with a token it asks the leader for,
//     and reporting its new Swarm node ID. Always as a worker, so that a
//     join never changes Swarm's quorum: the promotion follows, guarded.
//   - A Swarm node that matches no node (left behind by a dead machine) is
//     removed once Swarm says it is Down; a manager is demoted first (Swarm
//     refuses to remove a manager).
//   - A node's availability (active, pause, drain) is its Swarm node's:
//     the curator's is the one an operator sets (`curator node update`,
//     a group's managers drained at join, a rollout's drain), and a Swarm
//     node whose availability differs is set to it, last of all the
//     changes, since it touches no quorum.
//
// Every change to Swarm's managers keeps Swarm's own quorum: after it, a
// majority of the Swarm's managers must be reachable (swarmQuorumAfter).
// A Swarm manager being demoted that leads the Swarm goes last.
//
// Refusals do not block: a tick returns the first change it can make, and
// a refusal only when there is none. Nor does a change whose Swarm call
// failed: it is held back a while (loop_swarm_holds.go), refused
// meanwhile, and the changes behind it go on. Two refusals do block
// everything: a Swarm whose node list names no leader (its quorum is
// lost, or it is electing: every change would hang), and a Swarm that
// shares no node with the curator while both have some (a wrong engine,
// or a wrong reading of who is who, which must never lead to removals).

// swarmActionKind is what an action does, as events and metrics name it.
type swarmActionKind string

const (
	swarmRefuse swarmActionKind = "refuse"
	// swarmPromote promotes a Swarm worker to manager.
	swarmPromote swarmActionKind = "swarm-promote"
	// swarmDemote demotes a Swarm manager to worker.
	swarmDemote swarmActionKind = "swarm-demote"
	// swarmGrantRole carries on a promotion cut short after its Swarm
	// step, at its etcd step.
	swarmGrantRole swarmActionKind = "grant-role"
	// swarmRemoveNode removes a Down Swarm worker of no node from the
	// Swarm.
	swarmRemoveNode swarmActionKind = "swarm-remove-node"
	// swarmJoin asks a node's agent to join the Swarm (again), as a
	// worker.
	swarmJoin swarmActionKind = "swarm-join"
	// swarmAvailability sets a Swarm node's availability to its node's.
	swarmAvailability swarmActionKind = "swarm-availability"
)

// swarmAction is one change, with the reason an operator reads in events.
type swarmAction struct {
	kind swarmActionKind
	// nodeID is the curator node ("" for a Swarm node of no node);
	// swarmID the Swarm node ("" for a node not in the Swarm).
	nodeID, swarmID string
	reason          string
	// availability is what swarmAvailability sets.
	availability swarm.NodeAvailability
}

// swarmCuratorNode is what the decision reads of one curator node.
type swarmCuratorNode struct {
	id string
	// consensus: the node has the consensus role.
	consensus bool
	demoting  bool
	// ready: the node is ready (or is the leader's own).
	ready bool
	// refused: the node was refused after a recovery; it can never hold
	// the role again.
	refused bool
	// swarmID is the Swarm node ID its agent last reported ("" for none).
	swarmID string
	// joinRequested: a request to join the Swarm is pending in its
	// record.
	joinRequested bool
	// leaving: its record asks its agent to leave the Swarm (its machine
	// is about to be destroyed): it is neither promoted nor asked to
	// join again.
	leaving bool
	// availability is its availability as Swarm names it ("": none
	// set).
	availability swarm.NodeAvailability
}

// swarmNode is what the decision reads of one Swarm node (observeSwarm).
type swarmNode struct {
	id, hostname, addr string
	manager            bool
	// leader and reachability: its manager status (a worker: false, "").
	leader       bool
	reachability swarm.Reachability
	state        swarm.NodeState
	availability swarm.NodeAvailability
}

// reachable says whether a Swarm manager counts towards Swarm's quorum.
func (n swarmNode) reachable() bool {
	return n.manager && n.reachability == swarm.ReachabilityReachable
}

// swarmSnapshot is one observation of the curator's nodes and the Swarm's.
type swarmSnapshot struct {
	// nodes are the curator's nodes; swarm the Swarm's node list.
	nodes []swarmCuratorNode
	swarm []swarmNode
	// maxVoters is the cluster's voter limit (0: none).
	maxVoters int
	// held are the changes held back after failed Swarm calls
	// (swarmHolds), by swarmAction.key, each with why.
	held map[string]string
}

// swarmView is a snapshot sorted and indexed, for one decision.
type swarmView struct {
	swarmSnapshot
	swarmByID map[string]swarmNode
	nodeOf    map[string]string // Swarm node ID → curator node ID
}

func newSwarmView(s swarmSnapshot) *swarmView {
	v := &swarmView{swarmSnapshot: s, swarmByID: map[string]swarmNode{}, nodeOf: map[string]string{}}
	v.nodes = slices.Clone(s.nodes)
	v.swarm = slices.Clone(s.swarm)
	slices.SortFunc(v.nodes, func(a, b swarmCuratorNode) int { return cmp.Compare(a.id, b.id) })
	slices.SortFunc(v.swarm, func(a, b swarmNode) int { return cmp.Compare(a.id, b.id) })
	for _, sn := range v.swarm {
		v.swarmByID[sn.id] = sn
	}
	for _, n := range v.nodes {
		if _, ok := v.swarmByID[n.swarmID]; ok && n.swarmID != "" {
			v.nodeOf[n.swarmID] = n.id
		}
	}
	return v
}

// swarmQuorum is what a change would leave of the Swarm's managers.
type swarmQuorum struct {
	managers, reachable int
}

func (q swarmQuorum) ok() bool { return q.managers > 0 && q.reachable >= majority(q.managers) }

func (q swarmQuorum) String() string {
	return fmt.Sprintf("%d managers of which %d are reachable, and a majority needs %d", q.managers, q.reachable, majority(q.managers))
}

// swarmQuorumAfter is all of the swarm sync's quorum arithmetic: the
// Swarm's managers after demoting Swarm node demote and promoting Swarm
// node promote ("": neither), and how many of them are reachable. A
// promoted node counts as reachable: only a Ready node is promoted.
func (v *swarmView) swarmQuorumAfter(demote, promote string) swarmQuorum {
	var q swarmQuorum
	for _, sn := range v.swarm {
		switch {
		case sn.id == demote:
		case sn.id == promote && !sn.manager:
			q.managers++
			q.reachable++
		case sn.manager:
			q.managers++
			if sn.reachable() {
				q.reachable++
			}
		}
	}
	return q
}

// checkSwarmChange is the Swarm quorum guard of demoting demote or
// promoting promote.
func (v *swarmView) checkSwarmChange(demote, promote string) error {
	q := v.swarmQuorumAfter(demote, promote)
	if q.managers == 0 {
		return fmt.Errorf("%w: it is the Swarm's last manager", ErrPrecondition)
	}
	if !q.ok() {
		return fmt.Errorf("%w: the Swarm would be left with %s", ErrPrecondition, q)
	}
	return nil
}

// offer returns change a, or nil, refusing it, where a failed call holds
// it back: the decision then looks further.
func (v *swarmView) offer(a *swarmAction, refuse func(nodeID, swarmID, reason string)) *swarmAction {
	if why, ok := v.held[a.key()]; ok {
		refuse(a.nodeID, a.swarmID, fmt.Sprintf("%s, but %s", a.reason, why))
		return nil
	}
	return a
}

// decideSwarm returns the one change to make, or nil when the curator's
// roles and the Swarm's managers agree.
func decideSwarm(s swarmSnapshot) *swarmAction {
	v := newSwarmView(s)
	hasLeader := slices.ContainsFunc(v.swarm, func(sn swarmNode) bool { return sn.leader })
	if !hasLeader {
		return &swarmAction{kind: swarmRefuse,
			reason: "the Swarm's node list names no leader (its quorum is lost, or it is electing one): refusing to change it"}
	}
	if len(v.nodeOf) == 0 && len(v.nodes) > 0 {
		return &swarmAction{kind: swarmRefuse,
			reason: fmt.Sprintf("none of the %d nodes is among the Swarm's %d nodes: refusing to change the Swarm (is it the cluster's?)", len(v.nodes), len(v.swarm))}
	}
	var refusal *swarmAction
	refuse := func(nodeID, swarmID, reason string) {
		if refusal == nil {
			refusal = &swarmAction{kind: swarmRefuse, nodeID: nodeID, swarmID: swarmID, reason: reason}
		}
	}
	for _, step := range []func(refuse func(nodeID, swarmID, reason string)) *swarmAction{
		v.decideOrphans, v.decideDemotions, v.decideRoleless, v.decidePromotions, v.decideJoins, v.decideAvailability,
	} {
		if a := step(refuse); a != nil {
			return a
		}
	}
	return refusal
}

// decideOrphans: a Swarm node that matches no node is removed once it is
// Down, a manager demoted first.
func (v *swarmView) decideOrphans(refuse func(nodeID, swarmID, reason string)) *swarmAction {
	for _, sn := range v.swarm {
		if _, ok := v.nodeOf[sn.id]; ok {
			continue
		}
		what := fmt.Sprintf("Swarm node %s (%s) matches no node", sn.id, sn.hostname)
		if sn.state != swarm.NodeStateDown {
			continue // a machine joining, or not the curator's: not ours to remove while it lives
		}
		if !sn.manager {
			if a := v.offer(&swarmAction{kind: swarmRemoveNode, swarmID: sn.id, reason: what + " and is down: removing it"}, refuse); a != nil {
				return a
			}
			continue
		}
		if sn.reachability == "" {
			// A manager in name only: promoted, and down before it joined
			// the Swarm's Raft (the Swarm lists no manager status). Swarm
			// refuses to demote it (it finds no Raft member), takes no
			// vote away by removing it, and removes it as it is.
			if a := v.offer(&swarmAction{kind: swarmRemoveNode, swarmID: sn.id, reason: what + " and is a down manager that never joined the Swarm's Raft: removing it"}, refuse); a != nil {
				return a
			}
			continue
		}
		if err := v.checkSwarmChange(sn.id, ""); err != nil {
			refuse("", sn.id, fmt.Sprintf("%s and is a down manager, but demoting it now is unsafe: %v", what, err))
			continue
		}
		if a := v.offer(&swarmAction{kind: swarmDemote, swarmID: sn.id, reason: what + " and is a down manager: demoting it, to remove it next"}, refuse); a != nil {
			return a
		}
	}
	return nil
}

// decideDemotions: a demoting node that is a Swarm manager is demoted in
// Swarm, the Swarm's leader last (after the others, held back ones
// included).
func (v *swarmView) decideDemotions(refuse func(nodeID, swarmID, reason string)) *swarmAction {
	var leader *swarmAction
	others := false
	for _, n := range v.nodes {
		sn, ok := v.swarmByID[n.swarmID]
		if !n.demoting || !ok || !sn.manager {
			continue
		}
		if err := v.checkSwarmChange(sn.id, ""); err != nil {
			refuse(n.id, sn.id, fmt.Sprintf("node %s is being demoted, but demoting its Swarm manager %s now is unsafe: %v", n.id, sn.id, err))
			continue
		}
		a := &swarmAction{kind: swarmDemote, nodeID: n.id, swarmID: sn.id,
			reason: fmt.Sprintf("node %s is being demoted: demoting its Swarm manager %s first", n.id, sn.id)}
		if !sn.leader {
			others = true
			if a = v.offer(a, refuse); a != nil {
				return a
			}
			continue
		}
		a.reason += " (the Swarm's leader, the last of the demotions)"
		leader = a
	}
	if leader == nil {
		return nil
	}
	if others {
		refuse(leader.nodeID, leader.swarmID, leader.reason+", which waits for the other demotions to go through")
		return nil
	}
	return v.offer(leader, refuse)
}

// decideRoleless: a Swarm manager whose node lacks the role finishes its
// promotion, or is demoted where the node can never hold the role.
func (v *swarmView) decideRoleless(refuse func(nodeID, swarmID, reason string)) *swarmAction {
	voters := 0
	for _, n := range v.nodes {
		if n.consensus {
			voters++
		}
	}
	for _, n := range v.nodes {
		sn, ok := v.swarmByID[n.swarmID]
		if n.consensus || n.demoting || !ok || !sn.manager {
			continue
		}
		what := fmt.Sprintf("node %s is Swarm manager %s but lacks the consensus role", n.id, sn.id)
		var never string
		switch {
		case n.refused:
			never = "it was refused after a recovery and can never hold the role"
		case v.maxVoters > 0 && voters >= v.maxVoters:
			never = fmt.Sprintf("the cluster has its %d voters", v.maxVoters)
		}
		if never != "" {
			if err := v.checkSwarmChange(sn.id, ""); err != nil {
				refuse(n.id, sn.id, fmt.Sprintf("%s, and %s, but demoting it in Swarm now is unsafe: %v", what, never, err))
				continue
			}
			if a := v.offer(&swarmAction{kind: swarmDemote, nodeID: n.id, swarmID: sn.id,
				reason: fmt.Sprintf("%s, and %s: demoting it in Swarm", what, never)}, refuse); a != nil {
				return a
			}
			continue
		}
		if !n.ready || sn.state != swarm.NodeStateReady {
			refuse(n.id, sn.id, fmt.Sprintf("%s: its promotion will be finished once the node and its Swarm node are ready", what))
			continue
		}
		if a := v.offer(&swarmAction{kind: swarmGrantRole, nodeID: n.id, swarmID: sn.id,
			reason: what + ": finishing its promotion"}, refuse); a != nil {
			return a
		}
	}
	return nil
}

// decidePromotions: a node with the role that is a Swarm worker, and not
// demoting, is promoted in Swarm.
func (v *swarmView) decidePromotions(refuse func(nodeID, swarmID, reason string)) *swarmAction {
	for _, n := range v.nodes {
		sn, ok := v.swarmByID[n.swarmID]
		if !n.consensus || n.demoting || n.leaving || !ok || sn.manager {
			continue
		}
		what := fmt.Sprintf("node %s has the consensus role but is Swarm worker %s", n.id, sn.id)
		if !n.ready || sn.state != swarm.NodeStateReady {
			refuse(n.id, sn.id, fmt.Sprintf("%s: it will be promoted in Swarm once the node and its Swarm node are ready", what))
			continue
		}
		if err := v.checkSwarmChange("", sn.id); err != nil {
			refuse(n.id, sn.id, fmt.Sprintf("%s, but promoting it now is unsafe: %v", what, err))
			continue
		}
		if a := v.offer(&swarmAction{kind: swarmPromote, nodeID: n.id, swarmID: sn.id, reason: what + ": promoting it in Swarm"}, refuse); a != nil {
			return a
		}
	}
	return nil
}

// decideJoins: a node that is not in the Swarm is asked to join it, once
// it is ready (its agent must be there to answer). So is a ready node
// whose Swarm node is Down: its engine left the Swarm (a node that leaves
// stays in the Swarm's list, Down, until it is removed), or is not
// running; the agent joins only an engine that is not in a Swarm, and
// the Swarm node left behind is removed as an orphan.
func (v *swarmView) decideJoins(refuse func(nodeID, swarmID, reason string)) *swarmAction {
	for _, n := range v.nodes {
		sn, in := v.swarmByID[n.swarmID]
		if (in && sn.state != swarm.NodeStateDown) || n.joinRequested || n.leaving || n.refused || !n.ready {
			continue
		}
		why := "has not joined the Swarm"
		switch {
		case in:
			why = fmt.Sprintf("is ready, but its Swarm node %s is down (its engine left the Swarm, or does not run)", n.swarmID)
		case n.swarmID != "":
			why = fmt.Sprintf("left the Swarm (its Swarm node %s is gone)", n.swarmID)
		}
		if a := v.offer(&swarmAction{kind: swarmJoin, nodeID: n.id, swarmID: n.swarmID,
			reason: fmt.Sprintf("node %s %s: asking its agent to join as a worker", n.id, why)}, refuse); a != nil {
			return a
		}
	}
	return nil
}

// decideAvailability: a Swarm node whose availability is not its node's
// is set to the node's. A node leaving the Swarm is left as it is.
func (v *swarmView) decideAvailability(refuse func(nodeID, swarmID, reason string)) *swarmAction {
	for _, n := range v.nodes {
		sn, in := v.swarmByID[n.swarmID]
		if !in || n.leaving || n.availability == "" || sn.availability == n.availability {
			continue
		}
		if a := v.offer(&swarmAction{kind: swarmAvailability, nodeID: n.id, swarmID: sn.id, availability: n.availability,
			reason: fmt.Sprintf("node %s is %s but its Swarm node %s is %s: setting it to %s", n.id, n.availability, sn.id, sn.availability, n.availability)}, refuse); a != nil {
			return a
		}
	}
	return nil
}

// String is the action as a log line shows it.
func (a *swarmAction) String() string {
	parts := []string{string(a.kind)}
	if a.nodeID != "" {
		parts = append(parts, "node="+a.nodeID)
	}
	if a.swarmID != "" {
		parts = append(parts, "swarm="+a.swarmID)
	}
	return strings.Join(parts, " ") + ": " + a.reason
}
