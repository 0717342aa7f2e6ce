package decide

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/curatorproject/curator/curator/spec"
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

// SwarmActionKind is what an action does, as events and metrics name it.
type SwarmActionKind string

const (
	SwarmRefuse SwarmActionKind = "refuse"
	// SwarmPromote promotes a Swarm worker to manager.
	SwarmPromote SwarmActionKind = "swarm-promote"
	// SwarmDemote demotes a Swarm manager to worker.
	SwarmDemote SwarmActionKind = "swarm-demote"
	// SwarmGrantRole carries on a promotion cut short after its Swarm
	// step, at its etcd step.
	SwarmGrantRole SwarmActionKind = "grant-role"
	// SwarmRemoveNode removes a Down Swarm worker of no node from the
	// Swarm.
	SwarmRemoveNode SwarmActionKind = "swarm-remove-node"
	// SwarmJoin asks a node's agent to join the Swarm (again), as a
	// worker.
	SwarmJoin SwarmActionKind = "swarm-join"
	// SwarmAvailability sets a Swarm node's availability to its node's.
	SwarmAvailability SwarmActionKind = "swarm-availability"
)

// SwarmAction is one change, with the reason an operator reads in events.
type SwarmAction struct {
	Kind SwarmActionKind
	// NodeID is the curator node ("" for a Swarm node of no node);
	// swarmID the Swarm node ("" for a node not in the Swarm).
	NodeID, SwarmID string
	Reason          string
	// Availability is what SwarmAvailability sets.
	Availability swarm.NodeAvailability
}

// SwarmCuratorNode is what the decision reads of one curator node.
type SwarmCuratorNode struct {
	ID string
	// Consensus: the node has the consensus role.
	Consensus bool
	Demoting  bool
	// Ready: the node is ready (or is the leader's own).
	Ready bool
	// Refused: the node was refused after a recovery; it can never hold
	// the role again.
	Refused bool
	// SwarmID is the Swarm node ID its agent last reported ("" for none).
	SwarmID string
	// JoinRequested: a request to join the Swarm is pending in its
	// record.
	JoinRequested bool
	// Leaving: its record asks its agent to leave the Swarm (its machine
	// is about to be destroyed): it is neither promoted nor asked to
	// join again.
	Leaving bool
	// Availability is its availability as Swarm names it ("": none
	// set).
	Availability swarm.NodeAvailability
}

// SwarmNode is what the decision reads of one Swarm node (observeSwarm).
type SwarmNode struct {
	ID, Hostname, Addr string
	Manager            bool
	// Leader and Reachability: its manager status (a worker: false, "").
	Leader       bool
	Reachability swarm.Reachability
	State        swarm.NodeState
	Availability swarm.NodeAvailability
}

// reachable says whether a Swarm manager counts towards Swarm's quorum.
func (n SwarmNode) Reachable() bool {
	return n.Manager && n.Reachability == swarm.ReachabilityReachable
}

// SwarmSnapshot is one observation of the curator's nodes and the Swarm's.
type SwarmSnapshot struct {
	// Nodes are the curator's nodes; Swarm the Swarm's node list.
	Nodes []SwarmCuratorNode
	Swarm []SwarmNode
	// MaxVoters is the cluster's voter limit (0: none).
	MaxVoters int
	// Held are the changes held back after failed Swarm calls
	// (swarmHolds), by SwarmAction.key, each with why.
	Held map[string]string
}

// SwarmView is a snapshot sorted and indexed, for one decision.
type SwarmView struct {
	SwarmSnapshot
	swarmByID map[string]SwarmNode
	nodeOf    map[string]string // Swarm node ID → curator node ID
}

func NewSwarmView(s SwarmSnapshot) *SwarmView {
	v := &SwarmView{SwarmSnapshot: s, swarmByID: map[string]SwarmNode{}, nodeOf: map[string]string{}}
	v.Nodes = slices.Clone(s.Nodes)
	v.Swarm = slices.Clone(s.Swarm)
	slices.SortFunc(v.Nodes, func(a, b SwarmCuratorNode) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(v.Swarm, func(a, b SwarmNode) int { return cmp.Compare(a.ID, b.ID) })
	for _, sn := range v.Swarm {
		v.swarmByID[sn.ID] = sn
	}
	for _, n := range v.Nodes {
		if _, ok := v.swarmByID[n.SwarmID]; ok && n.SwarmID != "" {
			v.nodeOf[n.SwarmID] = n.ID
		}
	}
	return v
}

// SwarmQuorum is what a change would leave of the Swarm's managers.
type SwarmQuorum struct {
	managers, reachable int
}

func (q SwarmQuorum) ok() bool { return q.managers > 0 && q.reachable >= spec.Majority(q.managers) }

func (q SwarmQuorum) String() string {
	return fmt.Sprintf("%d managers of which %d are reachable, and a majority needs %d", q.managers, q.reachable, spec.Majority(q.managers))
}

// swarmQuorumAfter is all of the swarm sync's quorum arithmetic: the
// Swarm's managers after demoting Swarm node demote and promoting Swarm
// node promote ("": neither), and how many of them are reachable. A
// promoted node counts as reachable: only a Ready node is promoted.
func (v *SwarmView) SwarmQuorumAfter(demote, promote string) SwarmQuorum {
	var q SwarmQuorum
	for _, sn := range v.Swarm {
		switch {
		case sn.ID == demote:
		case sn.ID == promote && !sn.Manager:
			q.managers++
			q.reachable++
		case sn.Manager:
			q.managers++
			if sn.Reachable() {
				q.reachable++
			}
		}
	}
	return q
}

// checkSwarmChange is the Swarm quorum guard of demoting demote or
// promoting promote.
func (v *SwarmView) CheckSwarmChange(demote, promote string) error {
	q := v.SwarmQuorumAfter(demote, promote)
	if q.managers == 0 {
		return fmt.Errorf("%w: it is the Swarm's last manager", spec.ErrPrecondition)
	}
	if !q.ok() {
		return fmt.Errorf("%w: the Swarm would be left with %s", spec.ErrPrecondition, q)
	}
	return nil
}

// offer returns change a, or nil, refusing it, where a failed call holds
// it back: the decision then looks further.
func (v *SwarmView) offer(a *SwarmAction, refuse func(nodeID, swarmID, reason string)) *SwarmAction {
	if why, ok := v.Held[a.Key()]; ok {
		refuse(a.NodeID, a.SwarmID, fmt.Sprintf("%s, but %s", a.Reason, why))
		return nil
	}
	return a
}

// Swarm returns the one change to make, or nil when the curator's
// roles and the Swarm's managers agree.
func Swarm(s SwarmSnapshot) *SwarmAction {
	v := NewSwarmView(s)
	hasLeader := slices.ContainsFunc(v.Swarm, func(sn SwarmNode) bool { return sn.Leader })
	if !hasLeader {
		return &SwarmAction{Kind: SwarmRefuse,
			Reason: "the Swarm's node list names no leader (its quorum is lost, or it is electing one): refusing to change it"}
	}
	if len(v.nodeOf) == 0 && len(v.Nodes) > 0 {
		return &SwarmAction{Kind: SwarmRefuse,
			Reason: fmt.Sprintf("none of the %d nodes is among the Swarm's %d Nodes: refusing to change the Swarm (is it the cluster's?)", len(v.Nodes), len(v.Swarm))}
	}
	var refusal *SwarmAction
	refuse := func(nodeID, swarmID, reason string) {
		if refusal == nil {
			refusal = &SwarmAction{Kind: SwarmRefuse, NodeID: nodeID, SwarmID: swarmID, Reason: reason}
		}
	}
	for _, step := range []func(refuse func(nodeID, swarmID, reason string)) *SwarmAction{
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
func (v *SwarmView) decideOrphans(refuse func(nodeID, swarmID, reason string)) *SwarmAction {
	for _, sn := range v.Swarm {
		if _, ok := v.nodeOf[sn.ID]; ok {
			continue
		}
		what := fmt.Sprintf("Swarm node %s (%s) matches no node", sn.ID, sn.Hostname)
		if sn.State != swarm.NodeStateDown {
			continue // a machine joining, or not the curator's: not ours to remove while it lives
		}
		if !sn.Manager {
			if a := v.offer(&SwarmAction{Kind: SwarmRemoveNode, SwarmID: sn.ID, Reason: what + " and is down: removing it"}, refuse); a != nil {
				return a
			}
			continue
		}
		if sn.Reachability == "" {
			// A manager in name only: promoted, and down before it joined
			// the Swarm's Raft (the Swarm lists no manager status). Swarm
			// refuses to demote it (it finds no Raft member), takes no
			// vote away by removing it, and removes it as it is.
			if a := v.offer(&SwarmAction{Kind: SwarmRemoveNode, SwarmID: sn.ID, Reason: what + " and is a down manager that never joined the Swarm's Raft: removing it"}, refuse); a != nil {
				return a
			}
			continue
		}
		if err := v.CheckSwarmChange(sn.ID, ""); err != nil {
			refuse("", sn.ID, fmt.Sprintf("%s and is a down manager, but demoting it now is unsafe: %v", what, err))
			continue
		}
		if a := v.offer(&SwarmAction{Kind: SwarmDemote, SwarmID: sn.ID, Reason: what + " and is a down Manager: demoting it, to remove it next"}, refuse); a != nil {
			return a
		}
	}
	return nil
}

// decideDemotions: a demoting node that is a Swarm manager is demoted in
// Swarm, the Swarm's leader last (after the others, held back ones
// included).
func (v *SwarmView) decideDemotions(refuse func(nodeID, swarmID, reason string)) *SwarmAction {
	var leader *SwarmAction
	others := false
	for _, n := range v.Nodes {
		sn, ok := v.swarmByID[n.SwarmID]
		if !n.Demoting || !ok || !sn.Manager {
			continue
		}
		if err := v.CheckSwarmChange(sn.ID, ""); err != nil {
			refuse(n.ID, sn.ID, fmt.Sprintf("node %s is being demoted, but demoting its Swarm manager %s now is unsafe: %v", n.ID, sn.ID, err))
			continue
		}
		a := &SwarmAction{Kind: SwarmDemote, NodeID: n.ID, SwarmID: sn.ID,
			Reason: fmt.Sprintf("node %s is being demoted: demoting its Swarm manager %s first", n.ID, sn.ID)}
		if !sn.Leader {
			others = true
			if a = v.offer(a, refuse); a != nil {
				return a
			}
			continue
		}
		a.Reason += " (the Swarm's leader, the last of the demotions)"
		leader = a
	}
	if leader == nil {
		return nil
	}
	if others {
		refuse(leader.NodeID, leader.SwarmID, leader.Reason+", which waits for the other demotions to go through")
		return nil
	}
	return v.offer(leader, refuse)
}

// decideRoleless: a Swarm manager whose node lacks the role finishes its
// promotion, or is demoted where the node can never hold the role.
func (v *SwarmView) decideRoleless(refuse func(nodeID, swarmID, reason string)) *SwarmAction {
	voters := 0
	for _, n := range v.Nodes {
		if n.Consensus {
			voters++
		}
	}
	for _, n := range v.Nodes {
		sn, ok := v.swarmByID[n.SwarmID]
		if n.Consensus || n.Demoting || !ok || !sn.Manager {
			continue
		}
		what := fmt.Sprintf("node %s is Swarm manager %s but lacks the consensus role", n.ID, sn.ID)
		var never string
		switch {
		case n.Refused:
			never = "it was refused after a recovery and can never hold the role"
		case v.MaxVoters > 0 && voters >= v.MaxVoters:
			never = fmt.Sprintf("the cluster has its %d voters", v.MaxVoters)
		}
		if never != "" {
			if err := v.CheckSwarmChange(sn.ID, ""); err != nil {
				refuse(n.ID, sn.ID, fmt.Sprintf("%s, and %s, but demoting it in Swarm now is unsafe: %v", what, never, err))
				continue
			}
			if a := v.offer(&SwarmAction{Kind: SwarmDemote, NodeID: n.ID, SwarmID: sn.ID,
				Reason: fmt.Sprintf("%s, and %s: demoting it in Swarm", what, never)}, refuse); a != nil {
				return a
			}
			continue
		}
		if !n.Ready || sn.State != swarm.NodeStateReady {
			refuse(n.ID, sn.ID, fmt.Sprintf("%s: its promotion will be finished once the node and its Swarm node are ready", what))
			continue
		}
		if a := v.offer(&SwarmAction{Kind: SwarmGrantRole, NodeID: n.ID, SwarmID: sn.ID,
			Reason: what + ": finishing its promotion"}, refuse); a != nil {
			return a
		}
	}
	return nil
}

// decidePromotions: a node with the role that is a Swarm worker, and not
// demoting, is promoted in Swarm.
func (v *SwarmView) decidePromotions(refuse func(nodeID, swarmID, reason string)) *SwarmAction {
	for _, n := range v.Nodes {
		sn, ok := v.swarmByID[n.SwarmID]
		if !n.Consensus || n.Demoting || n.Leaving || !ok || sn.Manager {
			continue
		}
		what := fmt.Sprintf("node %s has the consensus role but is Swarm worker %s", n.ID, sn.ID)
		if !n.Ready || sn.State != swarm.NodeStateReady {
			refuse(n.ID, sn.ID, fmt.Sprintf("%s: it will be promoted in Swarm once the node and its Swarm node are ready", what))
			continue
		}
		if err := v.CheckSwarmChange("", sn.ID); err != nil {
			refuse(n.ID, sn.ID, fmt.Sprintf("%s, but promoting it now is unsafe: %v", what, err))
			continue
		}
		if a := v.offer(&SwarmAction{Kind: SwarmPromote, NodeID: n.ID, SwarmID: sn.ID, Reason: what + ": promoting it in Swarm"}, refuse); a != nil {
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
func (v *SwarmView) decideJoins(refuse func(nodeID, swarmID, reason string)) *SwarmAction {
	for _, n := range v.Nodes {
		sn, in := v.swarmByID[n.SwarmID]
		if (in && sn.State != swarm.NodeStateDown) || n.JoinRequested || n.Leaving || n.Refused || !n.Ready {
			continue
		}
		why := "has not joined the Swarm"
		switch {
		case in:
			why = fmt.Sprintf("is ready, but its Swarm node %s is down (its engine left the Swarm, or does not run)", n.SwarmID)
		case n.SwarmID != "":
			why = fmt.Sprintf("left the Swarm (its Swarm node %s is gone)", n.SwarmID)
		}
		if a := v.offer(&SwarmAction{Kind: SwarmJoin, NodeID: n.ID, SwarmID: n.SwarmID,
			Reason: fmt.Sprintf("node %s %s: asking its agent to join as a worker", n.ID, why)}, refuse); a != nil {
			return a
		}
	}
	return nil
}

// decideAvailability: a Swarm node whose availability is not its node's
// is set to the node's. A node leaving the Swarm is left as it is.
func (v *SwarmView) decideAvailability(refuse func(nodeID, swarmID, reason string)) *SwarmAction {
	for _, n := range v.Nodes {
		sn, in := v.swarmByID[n.SwarmID]
		if !in || n.Leaving || n.Availability == "" || sn.Availability == n.Availability {
			continue
		}
		if a := v.offer(&SwarmAction{Kind: SwarmAvailability, NodeID: n.ID, SwarmID: sn.ID, Availability: n.Availability,
			Reason: fmt.Sprintf("node %s is %s but its Swarm node %s is %s: setting it to %s", n.ID, n.Availability, sn.ID, sn.Availability, n.Availability)}, refuse); a != nil {
			return a
		}
	}
	return nil
}

// String is the action as a log line shows it.
func (a *SwarmAction) String() string {
	parts := []string{string(a.Kind)}
	if a.NodeID != "" {
		parts = append(parts, "node="+a.NodeID)
	}
	if a.SwarmID != "" {
		parts = append(parts, "swarm="+a.SwarmID)
	}
	return strings.Join(parts, " ") + ": " + a.Reason
}

// Key names a change: the same change decided again has the same key (the
// swarm sync holds a failing change back by it).
func (a *SwarmAction) Key() string {
	return fmt.Sprintf("%s/%s/%s/%s", a.Kind, a.NodeID, a.SwarmID, a.Availability)
}

// Role is a Swarm node's role as `node ls` shows it.
func (n SwarmNode) Role() string {
	if n.Manager {
		return string(swarm.NodeRoleManager)
	}
	return string(swarm.NodeRoleWorker)
}

// Node is Swarm node id of the view.
func (v *SwarmView) Node(id string) (SwarmNode, bool) {
	sn, ok := v.swarmByID[id]
	return sn, ok
}
