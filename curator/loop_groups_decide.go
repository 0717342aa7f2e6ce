package curator

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// The group loop's decision: from one group's snapshot (its spec, the
// machines its provider lists, the nodes that say they are of the group,
// the quorum) to at most one action. It is pure, so the rules below are
// tested as tables (loop_groups_decide_test.go); the act step does only
// what it is told.
//
// The rules, first match wins:
//  1. A node of the group that is not ready (or drained) and whose machine
//     is gone is removed (its etcd member first): the machine was
//     destroyed, by this loop or by hand, and the record is all that is
//     left of it.
//  2. A node down for replace_after has its machine destroyed; rule 1
//     then removes the record and rule 4 provisions a replacement. The
//     record goes before the new machine comes, so the replacement can
//     take the old address.
//  3. A machine whose node has not joined join_timeout after it was made
//     is destroyed.
//  4. Fewer machines than the size: provision one (a ready node whose
//     machine is gone counts until it is down).
//  5. More machines than the size (or the group is being destroyed): take
//     one away, workers before consensus members, machines whose node is
//     not ready before ready ones, the curator leader's own node last of
//     all. A consensus member is demoted first (the demotion keeps a
//     healthy majority of voters: refused, with the reason, when it
//     would not), and its machine destroyed once it holds no role.
//  6. A group being destroyed with no machine and no node left is deleted.
//  7. A ready node asked to leave the Swarm whose machine stays (its
//     rollout cancelled) has the request cleared.
//
// With the Swarm flavor on, a ready node's machine is destroyed on purpose
// (rules 5 and the rollout's) only once its engine has left the Swarm:
// its record asks its agent to leave (swarm-leave), and the group waits
// for the agent to report its engine out of the Swarm (leaveSwarmFirst).
// A machine whose node
// is down is destroyed as before: there is no agent to ask, and the swarm
// sync removes the Swarm node it leaves behind.
//
// One action per tick: the loop runs again at once after an action, and
// each tick observes anew, so a leader that dies between two actions
// leaves nothing the next one does not see.

type groupActionKind int

const (
	groupProvision groupActionKind = iota + 1
	groupDestroyMachine
	groupRemoveNode
	groupDemote
	groupDelete
	groupRefuse
	groupDrain
	groupRolloutDone
	groupRolloutFail
	// groupSwarmLeave asks a node's agent to take its engine out of the
	// Swarm before its machine is destroyed.
	groupSwarmLeave
	// groupSwarmStay clears a leave request of a node whose machine
	// stays.
	groupSwarmStay
	// groupWait: nothing to do until something the group waits for
	// happens (an engine leaving the Swarm); not a refusal.
	groupWait
)

func (k groupActionKind) String() string {
	switch k {
	case groupProvision:
		return "provision"
	case groupDestroyMachine:
		return "destroy-machine"
	case groupRemoveNode:
		return "remove-node"
	case groupDemote:
		return "demote"
	case groupDelete:
		return "delete-group"
	case groupRefuse:
		return "refuse"
	case groupDrain:
		return "drain"
	case groupRolloutDone:
		return "rollout-done"
	case groupRolloutFail:
		return "rollout-failed"
	case groupSwarmLeave:
		return "swarm-leave"
	case groupSwarmStay:
		return "swarm-stay"
	case groupWait:
		return "wait"
	}
	return fmt.Sprintf("groupAction(%d)", int(k))
}

// groupMachine is one machine the group's provider lists.
type groupMachine struct {
	ID        string
	Created   time.Time
	ConfigSHA string
}

// groupNode is one node record that names the group.
type groupNode struct {
	ID         string
	InstanceID string
	Status     pb.NodeStatus
	// Since is when Status last changed.
	Since time.Time
	// Consensus: the node holds the consensus role (a voter or learner);
	// Learner: it is an etcd learner, not a voter yet.
	Consensus, Learner bool
	// Drained: its availability is drain (a rollout drains a node
	// before its machine goes).
	Drained bool
	// Leader: the node is the curator leader's own.
	Leader bool
	// With the Swarm flavor on (groupSnapshot.Swarm): SwarmIn, its record
	// names a Swarm node (its agent reported one, and has not reported
	// that its engine left); and its Swarm node as the swarm sync last
	// read it: SwarmManager, a manager (its role in the Swarm's spec);
	// SwarmVoter, a manager the Swarm lists reachable in its Raft (one
	// promoted a moment ago is a manager before it is a voter);
	// SwarmLeader, the Swarm's leader.
	SwarmIn, SwarmManager, SwarmVoter, SwarmLeader bool
	// SwarmLeaveAsked is when its record asked its agent to leave the
	// Swarm (zero: not asked).
	SwarmLeaveAsked time.Time
}

// groupSnapshot is what decideGroup reads.
type groupSnapshot struct {
	Name         string
	Size         int
	Destroying   bool
	ReplaceAfter time.Duration
	JoinTimeout  time.Duration
	Machines     []groupMachine
	Nodes        []groupNode
	// Voters and HealthyVoters are the cluster's etcd voters and those of
	// them that are healthy.
	Voters, HealthyVoters int
	Now                   time.Time
	// Rolling: the group rolls to TargetSHA (its rollout is in state
	// rolling); its machines of another SHA are stale.
	Rolling   bool
	TargetSHA string
	// MaxParallel is how many workers a rollout has in flight at once;
	// ConsensusGroup: the group's machines are consensus members, rolled
	// one at a time, a replacement first (surge).
	MaxParallel    int
	ConsensusGroup bool
	// Swarm: the cluster's Swarm flavor is on and the Swarm's node list
	// was read; a consensus node is then a fresh member once it is a
	// Swarm manager too, and a ready node leaves the Swarm before its
	// machine goes.
	Swarm bool
}

type groupAction struct {
	Kind    groupActionKind
	Machine string
	Node    string
	Reason  string
	// Step is the rollout step the action is (drain, surge, demote,
	// destroy, provision), empty outside a rollout.
	Step string
}

func decideGroup(s groupSnapshot) *groupAction {
	machines := make(map[string]groupMachine, len(s.Machines))
	for _, m := range s.Machines {
		machines[m.ID] = m
	}
	nodeOf := make(map[string]groupNode, len(s.Nodes))
	for _, n := range s.Nodes {
		if n.InstanceID != "" {
			nodeOf[n.InstanceID] = n
		}
	}
	nodes := slices.SortedFunc(slices.Values(s.Nodes), func(a, b groupNode) int { return cmp.Compare(a.ID, b.ID) })
	ms := slices.SortedFunc(slices.Values(s.Machines), func(a, b groupMachine) int { return cmp.Compare(a.ID, b.ID) })

	// 1. Records whose machine is gone (a drained node's at once: its
	// machine was taken away on purpose).
	for _, n := range nodes {
		if _, ok := machines[n.InstanceID]; ok || (n.Status == pb.NodeStatus_NODE_STATUS_READY && !n.Drained) {
			continue
		}
		if n.Consensus && !quorumAfterRemoval(s.Voters, s.HealthyVoters, false) {
			return &groupAction{Kind: groupRefuse, Node: n.ID, Reason: fmt.Sprintf("node %s's machine is gone, but removing its etcd member would leave %d healthy of %d voters, short of a majority: bring voters back first", n.ID, s.HealthyVoters, s.Voters-1)}
		}
		return &groupAction{Kind: groupRemoveNode, Node: n.ID, Machine: n.InstanceID,
			Reason: fmt.Sprintf("node %s is %s and its machine %s is gone", n.ID, statusWord(n.Status.String()), orNone(n.InstanceID))}
	}
	// 2. Dead nodes: destroy their machines.
	for _, n := range nodes {
		if _, ok := machines[n.InstanceID]; !ok || n.Status != pb.NodeStatus_NODE_STATUS_DOWN {
			continue
		}
		if down := s.Now.Sub(n.Since); down >= s.ReplaceAfter {
			return &groupAction{Kind: groupDestroyMachine, Machine: n.InstanceID, Node: n.ID,
				Reason: fmt.Sprintf("node %s has been down for %v (replace_after %v): replacing its machine", n.ID, down.Round(time.Second), s.ReplaceAfter)}
		}
	}
	// 3. Machines whose node never joined (in a rollout, a new machine
	// that does not come up fails the rollout instead: see decideRollout).
	for _, m := range ms {
		if _, ok := nodeOf[m.ID]; ok || (s.Rolling && m.ConfigSHA == s.TargetSHA) {
			continue
		}
		if age := s.Now.Sub(m.Created); age >= s.JoinTimeout {
			return &groupAction{Kind: groupDestroyMachine, Machine: m.ID,
				Reason: fmt.Sprintf("machine %s was made %v ago and its node never joined (join_timeout %v)", m.ID, age.Round(time.Second), s.JoinTimeout)}
		}
	}
	size := s.Size
	if s.Destroying {
		size = 0
	}
	// A ready node whose machine the provider no longer lists (a process
	// killed a moment ago) still holds its place: once it is down, rule 1
	// removes it, and only then does its replacement come, free to take
	// its address.
	have := len(ms)
	for _, n := range nodes {
		if _, ok := machines[n.InstanceID]; !ok && n.Status == pb.NodeStatus_NODE_STATUS_READY {
			have++
		}
	}
	if s.Rolling && !s.Destroying {
		if a := decideRollout(s, ms, have, nodeOf); a != nil || rolloutWaits(s, ms, have, nodeOf) {
			return a
		}
	}
	// 4. Missing machines.
	if have < size {
		return &groupAction{Kind: groupProvision, Reason: fmt.Sprintf("group %s has %d of %d machines", s.Name, have, size)}
	}
	// 5. Extra machines.
	if len(ms) > size {
		victim := slices.MinFunc(ms, func(a, b groupMachine) int {
			return cmp.Compare(removalRank(s, a, nodeOf), removalRank(s, b, nodeOf))
		})
		why := fmt.Sprintf("group %s has %d machines, wants %d", s.Name, len(ms), size)
		if s.Destroying {
			why = fmt.Sprintf("group %s is being destroyed (%d machines left)", s.Name, len(ms))
		}
		n, joined := nodeOf[victim.ID]
		if joined && n.Consensus {
			healthy := n.Status == pb.NodeStatus_NODE_STATUS_READY
			if !quorumAfterRemoval(s.Voters, s.HealthyVoters, healthy) {
				return &groupAction{Kind: groupRefuse, Node: n.ID, Machine: victim.ID,
					Reason: fmt.Sprintf("%s, but demoting node %s would leave %d healthy voters of %d, short of a majority: bring voters back, or add a consensus node first", why, n.ID, s.HealthyVoters-btoi(healthy), s.Voters-1)}
			}
			return &groupAction{Kind: groupDemote, Node: n.ID, Machine: victim.ID, Reason: why + ": demoting node " + n.ID + " before its machine goes"}
		}
		return leaveSwarmFirst(s, n, joined, &groupAction{Kind: groupDestroyMachine, Machine: victim.ID, Node: n.ID, Reason: why})
	}
	// 6. A destroyed group with nothing left.
	if s.Destroying && len(ms) == 0 && len(nodes) == 0 {
		return &groupAction{Kind: groupDelete, Reason: fmt.Sprintf("group %s is destroyed: no machine and no node left", s.Name)}
	}
	// 7. A ready node asked to leave the Swarm whose machine no rule takes
	// away any more (its rollout was cancelled, its group grown again)
	// stays: the request is cleared, and the swarm sync joins it again.
	for _, n := range nodes {
		if _, ok := machines[n.InstanceID]; ok && !n.SwarmLeaveAsked.IsZero() && n.Status == pb.NodeStatus_NODE_STATUS_READY {
			return &groupAction{Kind: groupSwarmStay, Node: n.ID, Machine: n.InstanceID,
				Reason: fmt.Sprintf("node %s was asked to leave the Swarm, but its machine %s stays (group %s has %d of %d machines): clearing the request, so that it joins the Swarm again", n.ID, n.InstanceID, s.Name, len(ms), size)}
		}
	}
	return nil
}

// removalRank orders a group's machines for taking one away: lowest first.
// In a rollout, machines of the old config before those of the new; then
// machines with no node, then not-ready nodes, then workers, then
// consensus members; the node whose engine leads the Swarm next to last,
// the curator leader's own node last of all.
func removalRank(s groupSnapshot, m groupMachine, nodeOf map[string]groupNode) int {
	rank := 0
	if s.Rolling && m.ConfigSHA == s.TargetSHA {
		rank = 10
	}
	n, ok := nodeOf[m.ID]
	switch {
	case !ok:
	case n.Leader:
		rank = 100
	case n.SwarmLeader:
		rank = 99
	case n.Status != pb.NodeStatus_NODE_STATUS_READY:
		rank++
	case !n.Consensus:
		rank += 2
	default:
		rank += 3
	}
	return rank
}

// quorumAfterRemoval says whether a healthy majority of voters is left
// after one voter goes, healthy or not.
func quorumAfterRemoval(voters, healthy int, removedHealthy bool) bool {
	return quorum{voters: voters - 1, healthy: healthy - btoi(removedHealthy)}.ok()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// A rollout replaces every machine of a group whose config SHA is not the
// target (a stale machine) with one made from the target, keyed on SHAs
// alone, so a new leader carries it on from the machines' labels and the
// rollout record:
//   - a new machine whose node is not ready join_timeout after it was made
//     fails the rollout (the old machines keep serving; nothing loops);
//   - workers: at most max_parallel in flight (a stale node drained, a
//     machine missing, a new one not ready yet); a stale node is drained,
//     then its machine destroyed, then rule 4 provisions a new one;
//   - consensus members, one at a time and surge first: a new machine is
//     provisioned beside the old ones, and only once its node is a ready
//     voter is a stale node drained, demoted (within the quorum guard) and
//     its machine destroyed, so the healthy voters never drop below the
//     group's size; the curator leader's own node goes last (its demotion
//     hands leadership over, and the next leader finishes);
//   - when no stale machine is left and every node is ready, it is done.

// freshReady says whether machine m runs the target SHA with a ready node
// (a voter, in a consensus group).
func freshReady(s groupSnapshot, m groupMachine, nodeOf map[string]groupNode) bool {
	n, ok := nodeOf[m.ID]
	return m.ConfigSHA == s.TargetSHA && ok && n.Status == pb.NodeStatus_NODE_STATUS_READY &&
		(!s.ConsensusGroup || (n.Consensus && !n.Learner && (!s.Swarm || n.SwarmVoter)))
}

// leaveSwarmFirst is action destroy (of node n's machine; joined: the
// machine has a node) with the Swarm flavor on: a ready node still in the
// Swarm has its engine leave it first, so that the Swarm sees a node go
// rather than lose one. Its record asks its agent (swarm-leave), and the
// group waits for the agent's report that its engine left (which clears
// the record's Swarm node ID), not for the Swarm to show the node Down: a
// Swarm leader just demoted shows Down for a moment while its engine is
// still in the Swarm. A Swarm manager is
// waited for too (its demotion changes the Swarm first, and the swarm
// sync finishes one cut short: an engine leaving as a manager would take
// a vote out of the Swarm's quorum). An agent that has not answered
// within join_timeout does not hold the machine back any longer: it is
// destroyed, and the swarm sync removes its Swarm node once it is Down.
func leaveSwarmFirst(s groupSnapshot, n groupNode, joined bool, destroy *groupAction) *groupAction {
	if !s.Swarm || !joined || n.Status != pb.NodeStatus_NODE_STATUS_READY || !n.SwarmIn {
		// Not ready (no agent to ask), or in no Swarm: never joined, or
		// its agent reported that its engine left.
		return destroy
	}
	wait := &groupAction{Kind: groupWait, Machine: destroy.Machine, Node: n.ID, Step: destroy.Step}
	if n.SwarmManager && n.SwarmLeaveAsked.IsZero() {
		wait.Reason = fmt.Sprintf("%s: node %s's engine is still a Swarm manager; it leaves the Swarm once the swarm sync has demoted it", destroy.Reason, n.ID)
		return wait
	}
	if n.SwarmLeaveAsked.IsZero() {
		step := ""
		if destroy.Step != "" {
			step = "swarm-leave"
		}
		return &groupAction{Kind: groupSwarmLeave, Machine: destroy.Machine, Node: n.ID, Step: step,
			Reason: fmt.Sprintf("%s: node %s's engine leaves the Swarm before its machine goes", destroy.Reason, n.ID)}
	}
	if waited := s.Now.Sub(n.SwarmLeaveAsked); waited < s.JoinTimeout {
		wait.Reason = fmt.Sprintf("%s: waiting for node %s's engine to leave the Swarm", destroy.Reason, n.ID)
		return wait
	}
	destroy.Reason += fmt.Sprintf(": node %s's engine did not leave the Swarm within join_timeout %v; its Swarm node is removed once it is down", n.ID, s.JoinTimeout)
	return destroy
}

// coming counts the machines a rollout waits for: machines of the target
// whose node is not ready yet, and machines missing (a ready node whose
// machine is gone is one: its replacement is to come).
func coming(s groupSnapshot, ms []groupMachine, nodeOf map[string]groupNode) int {
	n := max(0, s.Size-len(ms))
	for _, m := range ms {
		if m.ConfigSHA == s.TargetSHA && !freshReady(s, m, nodeOf) {
			n++
		}
	}
	return n
}

// drained counts the stale machines whose node is drained: on their way
// out.
func drained(s groupSnapshot, ms []groupMachine, nodeOf map[string]groupNode) int {
	n := 0
	for _, m := range ms {
		if node, ok := nodeOf[m.ID]; ok && m.ConfigSHA != s.TargetSHA && node.Drained {
			n++
		}
	}
	return n
}

// rolloutWaits says whether the rollout holds the group's other rules
// back: a consensus group with a new member not yet a ready voter waits
// for it rather than taking a machine away.
func rolloutWaits(s groupSnapshot, ms []groupMachine, have int, nodeOf map[string]groupNode) bool {
	return s.ConsensusGroup && have >= s.Size && coming(s, ms, nodeOf) > 0
}

func decideRollout(s groupSnapshot, ms []groupMachine, have int, nodeOf map[string]groupNode) *groupAction {
	var stale []groupMachine
	updated := 0
	for _, m := range ms {
		if m.ConfigSHA != s.TargetSHA {
			stale = append(stale, m)
			continue
		}
		if freshReady(s, m, nodeOf) {
			updated++
			continue
		}
		if age := s.Now.Sub(m.Created); age >= s.JoinTimeout {
			what := "its node never joined"
			if n, ok := nodeOf[m.ID]; ok {
				what = fmt.Sprintf("its node %s is not a ready member yet", n.ID)
				if s.Swarm && s.ConsensusGroup && n.Consensus && !n.Learner && !n.SwarmVoter {
					what = fmt.Sprintf("its node %s is not a reachable Swarm manager yet (is its agent given its Docker engine, --docker-socket?)", n.ID)
				}
			}
			return &groupAction{Kind: groupRolloutFail, Machine: m.ID,
				Reason: fmt.Sprintf("rollout of group %s to %s failed: machine %s was made %v ago and %s (join_timeout %v); the old machines keep serving", s.Name, shortConfigSHA(s.TargetSHA), m.ID, age.Round(time.Second), what, s.JoinTimeout)}
		}
	}
	if len(stale) == 0 {
		if updated >= s.Size && len(ms) == s.Size {
			return &groupAction{Kind: groupRolloutDone, Reason: fmt.Sprintf("rollout of group %s to %s is done: %d of %d machines run it", s.Name, shortConfigSHA(s.TargetSHA), updated, s.Size)}
		}
		return nil // the usual rules bring the rest
	}
	victim := slices.MinFunc(stale, func(a, b groupMachine) int {
		return cmp.Compare(removalRank(s, a, nodeOf), removalRank(s, b, nodeOf))
	})
	n, joined := nodeOf[victim.ID]
	ready := joined && n.Status == pb.NodeStatus_NODE_STATUS_READY
	why := fmt.Sprintf("rolling group %s to %s (%d of %d updated)", s.Name, shortConfigSHA(s.TargetSHA), updated, s.Size)
	if !s.ConsensusGroup {
		// A drained stale node goes at once.
		for _, m := range stale {
			if d, ok := nodeOf[m.ID]; ok && d.Drained {
				return leaveSwarmFirst(s, d, true, &groupAction{Kind: groupDestroyMachine, Machine: m.ID, Node: d.ID, Step: "destroy", Reason: why + ": node " + d.ID + " is drained"})
			}
		}
		if have < s.Size {
			return &groupAction{Kind: groupProvision, Step: "provision", Reason: fmt.Sprintf("%s: group has %d of %d machines", why, have, s.Size)}
		}
		if coming(s, ms, nodeOf)+drained(s, ms, nodeOf) >= max(1, s.MaxParallel) {
			return nil
		}
		if !ready {
			return &groupAction{Kind: groupDestroyMachine, Machine: victim.ID, Node: n.ID, Step: "destroy", Reason: why + ": its node is not ready"}
		}
		return &groupAction{Kind: groupDrain, Machine: victim.ID, Node: n.ID, Step: "drain", Reason: why}
	}
	// Consensus members: one at a time, surge first. While a new member
	// is on its way, wait for it (or, with a machine missing, let rule 4
	// provision one).
	if coming(s, ms, nodeOf) > 0 {
		return nil
	}
	if have <= s.Size {
		return &groupAction{Kind: groupProvision, Step: "surge", Reason: why + ": a new member first, beside the old ones"}
	}
	if !joined || !n.Consensus {
		return leaveSwarmFirst(s, n, joined, &groupAction{Kind: groupDestroyMachine, Machine: victim.ID, Node: n.ID, Step: "destroy", Reason: why})
	}
	if ready && !n.Drained {
		return &groupAction{Kind: groupDrain, Machine: victim.ID, Node: n.ID, Step: "drain", Reason: why}
	}
	if !quorumAfterRemoval(s.Voters, s.HealthyVoters, ready) {
		return &groupAction{Kind: groupRefuse, Node: n.ID, Machine: victim.ID,
			Reason: fmt.Sprintf("%s, but demoting node %s would leave %d healthy voters of %d, short of a majority: bring voters back first", why, n.ID, s.HealthyVoters-btoi(ready), s.Voters-1)}
	}
	return &groupAction{Kind: groupDemote, Machine: victim.ID, Node: n.ID, Step: "demote", Reason: why + ": demoting node " + n.ID + ", its replacement a ready voter"}
}

// shortConfigSHA is the start of a config SHA, as `group ls` shows it.
func shortConfigSHA(sha string) string { return sha[:min(len(sha), 12)] }
