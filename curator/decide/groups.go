package decide

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

// The group loop's decision: from one group's snapshot (its spec, the
// machines its provider lists, the nodes that say they are of the group,
// the quorum) to at most one action. It is pure, so the rules below are
// tested as tables (groups_test.go, groups_rollout_test.go); the act step does only
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

type GroupActionKind int

const (
	GroupProvision GroupActionKind = iota + 1
	GroupDestroyMachine
	GroupRemoveNode
	GroupDemote
	GroupDelete
	GroupRefuse
	GroupDrain
	GroupRolloutDone
	GroupRolloutFail
	// GroupSwarmLeave asks a node's agent to take its engine out of the
	// Swarm before its machine is destroyed.
	GroupSwarmLeave
	// GroupSwarmStay clears a leave request of a node whose machine
	// stays.
	GroupSwarmStay
	// GroupWait: nothing to do until something the group waits for
	// happens (an engine leaving the Swarm); not a refusal.
	GroupWait
	// GroupRepairHold: the repair ceiling or budget holds a repair back;
	// the group's record says so (once), and the loop waits.
	GroupRepairHold
	// GroupRepairResume: the group recovered (or its budget came back):
	// the hold is cleared, and its repairs go on.
	GroupRepairResume
	// GroupSetDomain records in a node's record the failure domain its
	// provider lists its machine in (GroupAction.Domain).
	GroupSetDomain
)

func (k GroupActionKind) String() string {
	switch k {
	case GroupProvision:
		return "provision"
	case GroupDestroyMachine:
		return "destroy-machine"
	case GroupRemoveNode:
		return "remove-node"
	case GroupDemote:
		return "demote"
	case GroupDelete:
		return "delete-group"
	case GroupRefuse:
		return "refuse"
	case GroupDrain:
		return "drain"
	case GroupRolloutDone:
		return "rollout-done"
	case GroupRolloutFail:
		return "rollout-failed"
	case GroupSwarmLeave:
		return "swarm-leave"
	case GroupSwarmStay:
		return "swarm-stay"
	case GroupWait:
		return "wait"
	case GroupRepairHold:
		return "repair-hold"
	case GroupRepairResume:
		return "repair-resume"
	case GroupSetDomain:
		return "set-domain"
	}
	return fmt.Sprintf("GroupAction(%d)", int(k))
}

// GroupMachine is one machine the group's provider lists.
type GroupMachine struct {
	ID        string
	Created   time.Time
	ConfigSHA string
	// Domain is the failure domain its provider lists it in.
	Domain string
}

// GroupNode is one node record that names the group.
type GroupNode struct {
	ID         string
	InstanceID string
	// Domain is the failure domain its record names (see GroupSetDomain).
	Domain string
	Status pb.NodeStatus
	// Since is when Status last changed.
	Since time.Time
	// Consensus: the node holds the consensus role (a voter or learner);
	// Learner: it is an etcd learner, not a voter yet.
	Consensus, Learner bool
	// Refused: the node's record is refused (a manager given up by a
	// recovery, say): started again, its machine would not come back.
	Refused bool
	// Drained: its availability is drain (a rollout drains a node
	// before its machine goes).
	Drained bool
	// Leader: the node is the curator leader's own.
	Leader bool
	// HealthyVoter: the membership counts the node's etcd member a
	// healthy voter for a removal (Membership.HealthyVoter). The quorum
	// arithmetic of a removal reads it, never Status, so that the group
	// loop and the removal check cannot disagree (a leader's own node is
	// a healthy voter whatever its record still says).
	HealthyVoter bool
	// With the Swarm flavor on (GroupSnapshot.Swarm): SwarmIn, its record
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
	// LastHeard is when this leader last heard the node's heartbeat
	// (zero: not since it took over); the repair ceiling counts a node
	// whose record says ready but that is silent for
	// GroupSnapshot.SuspectAfter (see silence).
	LastHeard time.Time
}

// GroupSnapshot is what Group reads.
type GroupSnapshot struct {
	Name         string
	Size         int
	Destroying   bool
	ReplaceAfter time.Duration
	JoinTimeout  time.Duration
	Machines     []GroupMachine
	// Dead are machines that died without being stopped (killed,
	// crashed, powered off) whose provider keeps them (their dir, data
	// and address: started again, they come back as they were) and whose
	// node is still listed. The provider does not list them (they are
	// not in Machines): rule 1 removes such a node once it is down, as
	// for a machine gone, but as a repair, under the ceiling, which
	// counts every dead machine as unhealthy: machines that died together
	// (a power loss) are held, not removed one by one.
	// (A dead machine whose node is refused cannot come back: it
	// counts as gone, see mayComeBack.)
	Dead  []GroupMachine
	Nodes []GroupNode
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
	// The rollout policy (normalized): a new machine counts once its
	// node has been ready for Monitor, and has ProgressDeadline from when
	// it is made to get there; MaxFailures failed machines fail the
	// rollout. Workers: at most MaxSurge machines beyond the size, at most
	// MaxUnavailable of the size unavailable.
	Monitor, ProgressDeadline time.Duration
	MaxFailures               int
	MaxSurge, MaxUnavailable  int
	// Failures is how many new machines of this rollout failed so far
	// (the rollout record's count), LastFailure the reason of the last.
	Failures    int
	LastFailure string
	// RolloutStarted is when the rollout began: a machine made before
	// it that runs its target (a rollback's old machines, already on
	// the config it goes back to) has ProgressDeadline from then, not
	// from when it was made, to be ready.
	RolloutStarted time.Time
	// RollbackOf: the rollout is a rollback from this config SHA, whose
	// rollout failed; a stale machine of it that is not ready is a failed
	// machine, destroyed at once rather than after replace_after.
	RollbackOf string
	// OnFailure says in words what a failed rollout does, for its
	// reason; RollBack, it rolls the group back to its previous config;
	// PauseOnFailure, it pauses instead.
	OnFailure                string
	RollBack, PauseOnFailure bool
	// Held: the group's rollout to its current SHA is paused (by an
	// operator, or by its failure): what it made stays, a surge machine
	// included, until it is resumed or cancelled.
	Held bool
	// The repair ceiling and budget (see Group): MaxUnhealthy is
	// the ceiling for the group's size as a count, MaxUnhealthySpec as
	// its spec gives it; at most MaxReplacements repairs in any
	// ReplacementWindow, Replacements the times of those in the window.
	MaxUnhealthy      int
	MaxUnhealthySpec  string
	MaxReplacements   int
	ReplacementWindow time.Duration
	Replacements      []time.Time
	// RepairHeld is what the group's record says of a hold (empty: its
	// repairs go on).
	RepairHeld string
	// RepairResumed is when a hold was last lifted: rules 2 and 3 count
	// from then at the earliest.
	RepairResumed time.Time
	// ReplaceAfterFloor is the least replace_after the rules use (the
	// cluster's spec.ReplaceAfterFloor): a group stored with less is
	// repaired after the floor.
	ReplaceAfterFloor time.Duration
	// SuspectAfter: a node whose record says ready, silent this long, is
	// about to be marked down, and the repair ceiling counts it (zero:
	// none is counted so). HeardSince is when this leader began to hear
	// heartbeats (its election, or its return from doubt): a node it has
	// not heard is silent since then.
	SuspectAfter time.Duration
	HeardSince   time.Time
	// Suspended: the group is suspended (a restore, `group suspend`):
	// why. Its loop makes and destroys nothing.
	Suspended string
	// Swarm: the cluster's Swarm flavor is on and the Swarm's node list
	// was read; a consensus node is then a fresh member once it is a
	// Swarm manager too, and a ready node leaves the Swarm before its
	// machine goes.
	Swarm bool
	// Domains are the failure domains the group spreads its machines
	// across (its spec's), Dark those dark now, with why (see
	// domains.go), and ConsensusByDomain the cluster's consensus members
	// in each.
	Domains           []string
	Dark              map[string]string
	ConsensusByDomain map[string]int
	// DarkSince is when each dark domain was first seen dark (by this
	// leader); DomainHold how long the group holds a dark domain's
	// machines at most (zero: until it comes back).
	DarkSince  map[string]time.Time
	DomainHold time.Duration
	// Unlisted are the dark domains the provider could not list: a
	// machine there that it did not list is unknown, not gone.
	Unlisted map[string]bool
}

type GroupAction struct {
	Kind    GroupActionKind
	Machine string
	Node    string
	Reason  string
	// Step is the rollout step the action is (drain, surge, demote,
	// destroy, provision), empty outside a rollout.
	Step string
	// Repair: the action destroys the machine of an unhealthy node (or
	// of one that never joined), or removes the node of a dead machine
	// (GroupSnapshot.Dead), to replace it: the repair ceiling applies,
	// and to a destroy the budget.
	Repair bool
	// Domain is the failure domain a provision makes its machine in, or
	// the one a set-domain records.
	Domain string
}

// Group is decideRules under the group's brakes:
//   - A suspended group (a restored cluster's, or `group suspend`) makes
//     and destroys nothing until `group resume`.
//   - The repair ceiling: a repair (rules 2 and 3, and a rollout's
//     destroy of a machine whose node is not ready) is held while more of
//     the group's machines are unhealthy, or about to be (silent: see
//     groups_ceiling.go), than max_unhealthy. Many
//     machines down at once is more likely the network, a switch or the
//     leader's own view than the machines: replacing them would destroy
//     healthy machines (the leader's health loop holds bulk downs across
//     the cluster for the same reason). The hold is said once (the record
//     keeps it), and lifted by itself once few enough are unhealthy
//     (never merely because no repair is due this tick).
//   - The repair budget: at most max_replacements repairs in any
//     replacement_window, so that a fault that kills every new machine
//     does not churn through the provider.
func Group(s GroupSnapshot) *GroupAction {
	a := decideRules(s)
	if a != nil && a.Kind == GroupProvision {
		d, ok := Place(s)
		if !ok {
			return &GroupAction{Kind: GroupWait, Reason: fmt.Sprintf("%s, but every domain it names is dark: %s", a.Reason, darkWords(s, s.Domains))}
		}
		a.Domain = d
		if d != "" {
			a.Reason += " (in domain " + d + ")"
		}
	}
	if s.Suspended != "" {
		if a == nil {
			return nil
		}
		return &GroupAction{Kind: GroupWait, Node: a.Node, Machine: a.Machine,
			Reason: fmt.Sprintf("group %s is suspended (%s): it makes and destroys nothing until `curator group resume %s`; it would %s: %s", s.Name, s.Suspended, s.Name, a.Kind, a.Reason)}
	}
	held := ""
	if a != nil && a.Repair && !s.Destroying {
		held = repairHeld(s, a)
	}
	dark := darkHere(s)
	switch {
	case held != "" && s.RepairHeld == "":
		return &GroupAction{Kind: GroupRepairHold, Node: a.Node, Machine: a.Machine, Reason: held}
	case held != "":
		return &GroupAction{Kind: GroupWait, Node: a.Node, Machine: a.Machine, Reason: held}
	case len(dark) > 0 && !s.Destroying && s.RepairHeld == "":
		// Said once, whether or not a repair is due: the domain's
		// machines will not be replaced while it is dark.
		return &GroupAction{Kind: GroupRepairHold, Reason: darkHold(s, dark)}
	case len(dark) > 0 && !s.Destroying:
		return a // held until the domain comes back; the other rules go on
	case s.RepairHeld != "":
		unhealthy, _ := unhealthyMachines(s)
		if len(unhealthy) > s.MaxUnhealthy && !s.Destroying {
			// Not recovered: no repair is due this tick (or the first
			// rule to match is not one), but the hold stays until few
			// enough are unhealthy, so that every node still down gets
			// its full replace_after from a resume that is one.
			return a
		}
		lapsed := ""
		if up := givenUp(s); len(up) > 0 {
			lapsed = fmt.Sprintf("; %s dark for domain_hold %v or longer: given up, its machines are replaced in the other domains", strings.Join(up, ", "), s.DomainHold)
		}
		return &GroupAction{Kind: GroupRepairResume,
			Reason: fmt.Sprintf("the repairs of group %s go on: %d of its %d machines unhealthy (max_unhealthy %s: %d), %d of max_replacements %d replaced in the last %v%s; it was held: %s",
				s.Name, len(unhealthy), s.Size, s.MaxUnhealthySpec, s.MaxUnhealthy, len(recentReplacements(s)), s.MaxReplacements, s.ReplacementWindow, lapsed, s.RepairHeld)}
	}
	return a
}

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// recentReplacements are the group's repairs within its window.
func recentReplacements(s GroupSnapshot) []time.Time {
	var out []time.Time
	for _, t := range s.Replacements {
		if s.Now.Sub(t) < s.ReplacementWindow {
			out = append(out, t)
		}
	}
	return out
}

// repairHeld says why repair a is held back (empty: it is not).
func repairHeld(s GroupSnapshot, a *GroupAction) string {
	if d := actionDomain(s, a); heldDomain(s, d) {
		return fmt.Sprintf("%s (it would %s: %s)", darkHold(s, []string{d}), a.Kind, a.Reason)
	}
	unhealthy, machines := unhealthyMachines(s)
	if len(unhealthy) > s.MaxUnhealthy {
		shown := unhealthy[:min(len(unhealthy), 5)]
		more := ""
		if len(unhealthy) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(unhealthy)-len(shown))
		}
		return fmt.Sprintf("group %s: %d of its %d machines are unhealthy (%s%s), more than max_unhealthy %s (%d of size %d): replacing and destroying none of them until the group recovers (a partition or a switch, more likely than so many machines; it would %s: %s)",
			s.Name, len(unhealthy), machines, strings.Join(shown, ", "), more, s.MaxUnhealthySpec, s.MaxUnhealthy, s.Size, a.Kind, a.Reason)
	}
	if recent := recentReplacements(s); a.Kind == GroupDestroyMachine && len(recent) >= max(1, s.MaxReplacements) {
		next := slices.MinFunc(recent, time.Time.Compare).Add(s.ReplacementWindow)
		return fmt.Sprintf("group %s replaced %d machines in the last %v, its budget (max_replacements %d per replacement_window %v): replacing none until %s (it would %s: %s)",
			s.Name, len(recent), s.ReplacementWindow, s.MaxReplacements, s.ReplacementWindow, next.UTC().Format(time.RFC3339), a.Kind, a.Reason)
	}
	return ""
}

// decideRules is the group's rules, first match wins (see the top).
func decideRules(s GroupSnapshot) *GroupAction {
	machines := make(map[string]GroupMachine, len(s.Machines))
	for _, m := range s.Machines {
		machines[m.ID] = m
	}
	dead := make(map[string]bool, len(s.Dead))
	for _, m := range s.Dead {
		dead[m.ID] = true
	}
	nodeOf := make(map[string]GroupNode, len(s.Nodes))
	for _, n := range s.Nodes {
		if n.InstanceID != "" {
			nodeOf[n.InstanceID] = n
		}
	}
	nodes := slices.SortedFunc(slices.Values(s.Nodes), func(a, b GroupNode) int { return cmp.Compare(a.ID, b.ID) })
	ms := slices.SortedFunc(slices.Values(s.Machines), func(a, b GroupMachine) int { return cmp.Compare(a.ID, b.ID) })

	// 1. Records whose machine is gone (a drained node's at once: its
	// machine was taken away on purpose).
	for _, n := range nodes {
		_, ok := machines[n.InstanceID]
		if ok || (n.Status == pb.NodeStatus_NODE_STATUS_READY && !n.Drained) || (unknownMachine(s, n, ok) && !dead[n.InstanceID]) {
			continue // a held dark domain's: its machine is unknown, not gone
		}
		if n.Consensus && !QuorumAfterRemoval(s.Voters, s.HealthyVoters, n.HealthyVoter) {
			return &GroupAction{Kind: GroupRefuse, Node: n.ID, Reason: fmt.Sprintf("node %s's machine is gone, but removing its etcd member would leave %d healthy of %d voters, short of a majority: bring voters back first", n.ID, s.HealthyVoters-btoi(n.HealthyVoter), s.Voters-1)}
		}
		if dead[n.InstanceID] && mayComeBack(n) {
			return &GroupAction{Kind: GroupRemoveNode, Node: n.ID, Machine: n.InstanceID, Repair: true,
				Reason: fmt.Sprintf("node %s is %s and its machine %s died (its provider keeps it, but nothing started it again): replacing it", n.ID, spec.StatusWord(n.Status.String()), n.InstanceID)}
		}
		return &GroupAction{Kind: GroupRemoveNode, Node: n.ID, Machine: n.InstanceID,
			Reason: fmt.Sprintf("node %s is %s and its machine %s is gone", n.ID, spec.StatusWord(n.Status.String()), OrNone(n.InstanceID))}
	}
	// The domain of a node's machine, recorded once its provider lists it.
	for _, n := range nodes {
		if m, ok := machines[n.InstanceID]; ok && m.Domain != n.Domain {
			return &GroupAction{Kind: GroupSetDomain, Node: n.ID, Machine: m.ID, Domain: m.Domain,
				Reason: fmt.Sprintf("node %s's machine %s is in domain %s", n.ID, m.ID, OrNone(m.Domain))}
		}
	}
	// 2. Dead nodes: destroy their machines.
	for _, n := range nodes {
		if _, ok := machines[n.InstanceID]; !ok || n.Status != pb.NodeStatus_NODE_STATUS_DOWN {
			continue
		}
		if down := s.Now.Sub(latest(n.Since, s.RepairResumed)); down >= replaceAfter(s) {
			return &GroupAction{Kind: GroupDestroyMachine, Machine: n.InstanceID, Node: n.ID, Repair: true,
				Reason: fmt.Sprintf("node %s has been down for %v (%s): replacing its machine", n.ID, down.Round(time.Second), replaceAfterWords(s))}
		}
	}
	// 3. Machines whose node never joined (in a rollout, a new machine
	// that does not come up fails the rollout instead: see decideRollout).
	for _, m := range ms {
		if _, ok := nodeOf[m.ID]; ok || (s.Rolling && m.ConfigSHA == s.TargetSHA) {
			continue
		}
		if age := s.Now.Sub(latest(m.Created, s.RepairResumed)); age >= s.JoinTimeout {
			return &GroupAction{Kind: GroupDestroyMachine, Machine: m.ID, Repair: true,
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
		if _, ok := machines[n.InstanceID]; !ok && (n.Status == pb.NodeStatus_NODE_STATUS_READY || unknownMachine(s, n, ok)) {
			have++ // a held dark domain's node: its machine is unknown, not gone
		}
	}
	if s.Rolling && !s.Destroying {
		if a := decideRollout(s, ms, have, nodeOf); a != nil || rolloutWaits(s, ms, have, nodeOf) {
			return a
		}
	}
	// 4. Missing machines.
	if have < size {
		return &GroupAction{Kind: GroupProvision, Reason: fmt.Sprintf("group %s has %d of %d machines", s.Name, have, size)}
	}
	// 5. Extra machines (a held rollout keeps its surge).
	if len(ms) > size && !(s.Held && !s.Destroying && len(ms) <= size+heldSurge(s)) {
		victim := pickVictim(s, ms, nodeOf)
		why := fmt.Sprintf("group %s has %d machines, wants %d", s.Name, len(ms), size)
		if s.Destroying {
			why = fmt.Sprintf("group %s is being destroyed (%d machines left)", s.Name, len(ms))
		}
		n, joined := nodeOf[victim.ID]
		if joined && n.Consensus {
			healthy := n.HealthyVoter
			if !QuorumAfterRemoval(s.Voters, s.HealthyVoters, healthy) {
				return &GroupAction{Kind: GroupRefuse, Node: n.ID, Machine: victim.ID,
					Reason: fmt.Sprintf("%s, but demoting node %s would leave %d healthy voters of %d, short of a majority: bring voters back, or add a consensus node first", why, n.ID, s.HealthyVoters-btoi(healthy), s.Voters-1)}
			}
			return &GroupAction{Kind: GroupDemote, Node: n.ID, Machine: victim.ID, Reason: why + ": demoting node " + n.ID + " before its machine goes"}
		}
		return leaveSwarmFirst(s, n, joined, &GroupAction{Kind: GroupDestroyMachine, Machine: victim.ID, Node: n.ID, Reason: why})
	}
	// 6. A destroyed group with nothing left.
	if s.Destroying && len(ms) == 0 && len(nodes) == 0 {
		return &GroupAction{Kind: GroupDelete, Reason: fmt.Sprintf("group %s is destroyed: no machine and no node left", s.Name)}
	}
	// 7. A ready node asked to leave the Swarm whose machine no rule takes
	// away any more (its rollout was cancelled, its group grown again)
	// stays: the request is cleared, and the swarm sync joins it again.
	for _, n := range nodes {
		if _, ok := machines[n.InstanceID]; ok && !n.SwarmLeaveAsked.IsZero() && n.Status == pb.NodeStatus_NODE_STATUS_READY {
			return &GroupAction{Kind: GroupSwarmStay, Node: n.ID, Machine: n.InstanceID,
				Reason: fmt.Sprintf("node %s was asked to leave the Swarm, but its machine %s stays (group %s has %d of %d machines): clearing the request, so that it joins the Swarm again", n.ID, n.InstanceID, s.Name, len(ms), size)}
		}
	}
	return nil
}

// heldSurge is how many machines beyond the size a held rollout keeps.
func heldSurge(s GroupSnapshot) int {
	if s.ConsensusGroup {
		return 1
	}
	return s.MaxSurge
}

// removalRank orders a group's machines for taking one away: lowest first.
// In a rollout, machines of the old config before those of the new; then
// machines with no node, then not-ready nodes, then workers, then
// consensus members; the node whose engine leads the Swarm next to last,
// the curator leader's own node last of all.
func removalRank(s GroupSnapshot, m GroupMachine, nodeOf map[string]GroupNode) int {
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

// QuorumAfterRemoval says whether a healthy majority of voters is left
// after one voter goes, healthy or not (Quorum.Without: the group
// snapshot keeps counts, not members).
func QuorumAfterRemoval(voters, healthy int, removedHealthy bool) bool {
	return Quorum{Voters: voters, Healthy: healthy}.Without(removedHealthy).OK()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func OrNone(s string) string {
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

// FreshReady says whether machine m runs the target SHA with a ready node
// (a voter, in a consensus group).
func FreshReady(s GroupSnapshot, m GroupMachine, nodeOf map[string]GroupNode) bool {
	n, ok := nodeOf[m.ID]
	return m.ConfigSHA == s.TargetSHA && ok && n.Status == pb.NodeStatus_NODE_STATUS_READY &&
		s.Now.Sub(n.Since) >= s.Monitor &&
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
func leaveSwarmFirst(s GroupSnapshot, n GroupNode, joined bool, destroy *GroupAction) *GroupAction {
	if !s.Swarm || !joined || n.Status != pb.NodeStatus_NODE_STATUS_READY || !n.SwarmIn {
		// Not ready (no agent to ask), or in no Swarm: never joined, or
		// its agent reported that its engine left.
		return destroy
	}
	wait := &GroupAction{Kind: GroupWait, Machine: destroy.Machine, Node: n.ID, Step: destroy.Step}
	if n.SwarmManager && n.SwarmLeaveAsked.IsZero() {
		wait.Reason = fmt.Sprintf("%s: node %s's engine is still a Swarm manager; it leaves the Swarm once the swarm sync has demoted it", destroy.Reason, n.ID)
		return wait
	}
	if n.SwarmLeaveAsked.IsZero() {
		step := ""
		if destroy.Step != "" {
			step = "swarm-leave"
		}
		return &GroupAction{Kind: GroupSwarmLeave, Machine: destroy.Machine, Node: n.ID, Step: step,
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
func coming(s GroupSnapshot, ms []GroupMachine, nodeOf map[string]GroupNode) int {
	n := max(0, s.Size-len(ms))
	for _, m := range ms {
		if m.ConfigSHA == s.TargetSHA && !FreshReady(s, m, nodeOf) {
			n++
		}
	}
	return n
}

// drained counts the stale machines whose node is drained: on their way
// out.
func drained(s GroupSnapshot, ms []GroupMachine, nodeOf map[string]GroupNode) int {
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
// Workers wait for the rollout as long as it has a stale machine: the
// usual rule 5 would take one away while its replacement is not ready.
func rolloutWaits(s GroupSnapshot, ms []GroupMachine, have int, nodeOf map[string]GroupNode) bool {
	if !s.ConsensusGroup {
		return slices.ContainsFunc(ms, func(m GroupMachine) bool { return m.ConfigSHA != s.TargetSHA })
	}
	return have >= s.Size && coming(s, ms, nodeOf) > 0
}

// machineFailed is what a failed new machine does: it is destroyed at
// once and counted (the group loop makes another), the max_failures-th
// too, before the rollout fails on the count: a failed machine kept
// would wait for replace_after in the rollback (its node down), or stay
// for good in a rollout paused by its failure.
// A failed machine whose node holds the consensus role is demoted first
// (within the quorum guard), as any member is before its machine goes;
// the last one, when the guard refuses, fails the rollout as it is (the
// rollback demotes it once it may).
func machineFailed(s GroupSnapshot, machine string, n GroupNode, joined bool, what string) *GroupAction {
	last := s.Failures+1 >= max(1, s.MaxFailures)
	if joined && n.Consensus {
		ready := n.HealthyVoter
		if !QuorumAfterRemoval(s.Voters, s.HealthyVoters, ready) {
			if last {
				return rolloutFailed(s, machine, fmt.Sprintf("machine %s %s", machine, what), s.Failures+1)
			}
			return &GroupAction{Kind: GroupRefuse, Node: n.ID, Machine: machine,
				Reason: fmt.Sprintf("rollout of group %s to %s: machine %s failed (%s), but demoting node %s would leave %d healthy voters of %d, short of a majority", s.Name, spec.ShortSHA(s.TargetSHA), machine, what, n.ID, s.HealthyVoters-btoi(ready), s.Voters-1)}
		}
		return &GroupAction{Kind: GroupDemote, Machine: machine, Node: n.ID, Step: "demote",
			Reason: fmt.Sprintf("rollout of group %s to %s: machine %s failed (%s): demoting node %s before its machine goes", s.Name, spec.ShortSHA(s.TargetSHA), machine, what, n.ID)}
	}
	node := ""
	if joined {
		node = n.ID
	}
	then := "it goes, and another is made"
	if last {
		then = "it goes at once, and the rollout fails"
	}
	return &GroupAction{Kind: GroupDestroyMachine, Machine: machine, Node: node, Step: "failed",
		Reason: fmt.Sprintf("rollout of group %s to %s: machine %s failed (%d of max_failures %d): %s; %s", s.Name, spec.ShortSHA(s.TargetSHA), machine, s.Failures+1, s.MaxFailures, what, then)}
}

// rolloutFailed is the rollout's failure, failures machines failed, the
// last as why says.
func rolloutFailed(s GroupSnapshot, machine, why string, failures int) *GroupAction {
	return &GroupAction{Kind: GroupRolloutFail, Machine: machine,
		Reason: fmt.Sprintf("rollout of group %s to %s failed: %d of max_failures %d new machines failed, the last: %s; %s", s.Name, spec.ShortSHA(s.TargetSHA), failures, max(1, s.MaxFailures), why, orWord(s.OnFailure, "the old machines keep serving"))}
}

func orWord(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func decideRollout(s GroupSnapshot, ms []GroupMachine, have int, nodeOf map[string]GroupNode) *GroupAction {
	if s.Failures >= max(1, s.MaxFailures) {
		// Failures the loop counted from machines that died (their last
		// words in LastFailure).
		return rolloutFailed(s, "", orWord(s.LastFailure, "(no reason kept)"), s.Failures)
	}
	var stale []GroupMachine
	updated, fresh := 0, 0
	for _, m := range ms {
		if m.ConfigSHA != s.TargetSHA {
			stale = append(stale, m)
			continue
		}
		fresh++
		if FreshReady(s, m, nodeOf) {
			updated++
			continue
		}
		// A machine older than the rollout (on its target already: a
		// rollback's old machines) counts from the rollout's start: one
		// down a moment (frozen, rebooting, cut off) when a rollback
		// begins is not a new machine that failed.
		since := latest(m.Created, s.RolloutStarted)
		if age := s.Now.Sub(since); age >= s.ProgressDeadline {
			made := fmt.Sprintf("was made %v ago", age.Round(time.Second))
			if since.After(m.Created) {
				made = fmt.Sprintf("has had %v since the rollout began", age.Round(time.Second))
			}
			what := "its node never joined"
			n, ok := nodeOf[m.ID]
			if ok {
				what = fmt.Sprintf("its node %s is not a ready member yet", n.ID)
				if s.Swarm && s.ConsensusGroup && n.Consensus && !n.Learner && !n.SwarmVoter {
					what = fmt.Sprintf("its node %s is not a reachable Swarm manager yet (is its agent given its Docker engine, --docker-socket?)", n.ID)
				} else if n.Status == pb.NodeStatus_NODE_STATUS_READY && (!s.ConsensusGroup || n.Consensus && !n.Learner) {
					what = fmt.Sprintf("its node %s has not stayed ready for monitor %v", n.ID, s.Monitor)
				}
			}
			return machineFailed(s, m.ID, n, ok, fmt.Sprintf("%s and %s (progress_deadline %v)", made, what, s.ProgressDeadline))
		}
	}
	if len(stale) == 0 {
		if updated >= s.Size && len(ms) == s.Size {
			return &GroupAction{Kind: GroupRolloutDone, Reason: fmt.Sprintf("rollout of group %s to %s is done: %d of %d machines run it", s.Name, spec.ShortSHA(s.TargetSHA), updated, s.Size)}
		}
		return nil // the usual rules bring the rest
	}
	victim := pickVictim(s, stale, nodeOf)
	n, joined := nodeOf[victim.ID]
	ready := joined && n.Status == pb.NodeStatus_NODE_STATUS_READY
	why := fmt.Sprintf("rolling group %s to %s (%d of %d updated)", s.Name, spec.ShortSHA(s.TargetSHA), updated, s.Size)
	if !s.ConsensusGroup {
		// A drained stale node goes at once.
		for _, m := range stale {
			if d, ok := nodeOf[m.ID]; ok && d.Drained {
				return leaveSwarmFirst(s, d, true, &GroupAction{Kind: GroupDestroyMachine, Machine: m.ID, Node: d.ID, Step: "destroy", Reason: why + ": node " + d.ID + " is drained"})
			}
		}
		if have < s.Size {
			return &GroupAction{Kind: GroupProvision, Step: "provision", Reason: fmt.Sprintf("%s: group has %d of %d machines", why, have, s.Size)}
		}
		if coming(s, ms, nodeOf)+drained(s, ms, nodeOf) >= max(1, s.MaxParallel) {
			return nil
		}
		// A stale node that is not ready goes at once only once rule 2
		// would replace it anyway (down for replace_after). Before that
		// it may be back in a moment (a reboot, a frozen process, a
		// partition), and the repair ceiling counts the nodes marked down
		// so far: with several going down together, the first of them
		// would be destroyed before the others count, an old machine
		// taken for one of the new template, which may be bad. It waits,
		// and an old one that is ready is rolled meanwhile.
		if settling(s, victim, nodeOf) {
			live := slices.DeleteFunc(slices.Clone(stale), func(m GroupMachine) bool { return settling(s, m, nodeOf) })
			if len(live) == 0 {
				return nil
			}
			victim = pickVictim(s, live, nodeOf)
			n, joined = nodeOf[victim.ID]
			ready = joined && n.Status == pb.NodeStatus_NODE_STATUS_READY
		}
		if !ready {
			return &GroupAction{Kind: GroupDestroyMachine, Machine: victim.ID, Node: n.ID, Step: "destroy", Repair: true, Reason: why + ": its node is not ready"}
		}
		// Surge: a new machine beside the old ones, up to max_surge
		// beyond the size.
		if fresh < s.Size && have < s.Size+s.MaxSurge {
			return &GroupAction{Kind: GroupProvision, Step: "surge", Reason: fmt.Sprintf("%s: a new machine first, beside the old ones (max_surge %d)", why, s.MaxSurge)}
		}
		// An old one goes only while the ready machines left keep
		// size - max_unavailable.
		avail := updated
		for _, m := range stale {
			if d, ok := nodeOf[m.ID]; ok && d.Status == pb.NodeStatus_NODE_STATUS_READY && !d.Drained {
				avail++
			}
		}
		if avail-1 < s.Size-s.MaxUnavailable {
			return nil // the new machines are not ready yet
		}
		return &GroupAction{Kind: GroupDrain, Machine: victim.ID, Node: n.ID, Step: "drain", Reason: why}
	}
	// Consensus members: one at a time, surge first. While a new member
	// is on its way, wait for it (or, with a machine missing, let rule 4
	// provision one).
	if coming(s, ms, nodeOf) > 0 {
		return nil
	}
	if have <= s.Size {
		return &GroupAction{Kind: GroupProvision, Step: "surge", Reason: why + ": a new member first, beside the old ones"}
	}
	if !joined || !n.Consensus {
		return leaveSwarmFirst(s, n, joined, &GroupAction{Kind: GroupDestroyMachine, Machine: victim.ID, Node: n.ID, Step: "destroy", Reason: why})
	}
	if ready && !n.Drained {
		return &GroupAction{Kind: GroupDrain, Machine: victim.ID, Node: n.ID, Step: "drain", Reason: why}
	}
	if !QuorumAfterRemoval(s.Voters, s.HealthyVoters, n.HealthyVoter) {
		return &GroupAction{Kind: GroupRefuse, Node: n.ID, Machine: victim.ID,
			Reason: fmt.Sprintf("%s, but demoting node %s would leave %d healthy voters of %d, short of a majority: bring voters back first", why, n.ID, s.HealthyVoters-btoi(n.HealthyVoter), s.Voters-1)}
	}
	return &GroupAction{Kind: GroupDemote, Machine: victim.ID, Node: n.ID, Step: "demote", Reason: why + ": demoting node " + n.ID + ", its replacement a ready voter"}
}

// settling says whether stale machine m's node is not ready but has not
// been so for replace_after yet (counted from a lifted hold at the
// earliest, as rule 2 counts).
func settling(s GroupSnapshot, m GroupMachine, nodeOf map[string]GroupNode) bool {
	if s.RollbackOf != "" && m.ConfigSHA == s.RollbackOf {
		return false // a machine of the config that failed: it goes at once
	}
	n, ok := nodeOf[m.ID]
	return ok && n.Status != pb.NodeStatus_NODE_STATUS_READY && s.Now.Sub(latest(n.Since, s.RepairResumed)) < replaceAfter(s)
}
