package decide

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/curatorproject/curator/consensus/member"
	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

// Membership is one observation of etcd's members, the nodes that matter
// to them and their health, read together under muNodes. Every decision
// about membership reads it: the quorum guard, the consensus sync, the
// demotions, the learners, the placement and cluster info. It is the one
// place that matches members to nodes, says which voter is healthy, and
// counts a quorum (QuorumAfter).
//
// It is plain data, built by one pure function (BuildMembership) from what
// the runtime gathered: the loops, the replies, the decide tables and the
// removal fuzz property all build theirs with it.
type Membership struct {
	// Self is the node of the curator that observed it.
	Self string
	// Nodes are sorted by ID; Members by member ID. The nodes are the
	// registry view's, shared: clone one before changing it.
	Nodes   []*pb.Node
	ByID    map[string]*pb.Node
	Members []member.Member
	// MemberOf maps node IDs to members; a member that matches no node is
	// absent.
	MemberOf map[string]member.Member
	// NodeOf maps member IDs to node IDs ("" when none matches).
	NodeOf map[uint64]string
	// Heard holds the members' nodes (voters' and learners') that sent
	// this leader a heartbeat just now: within two heartbeat intervals.
	Heard map[string]bool
	// Unvouched holds the members' nodes this leadership does not vouch
	// for (Vouched): their records call them ready, but it has neither
	// heard from nor judged them yet (the status is the previous
	// leader's, or from before a restore), or they were never judged.
	// They count as healthy for what a reply shows, never for a removal
	// (RemovalQuorum). A leader that took over a moment ago does not take
	// a dead voter's stale "ready" for a live one.
	Unvouched map[string]bool
	// Unheard holds the voters' nodes that etcd does not hear from now
	// (consensus.Hearing): their member did not answer, or answered
	// without following the etcd leader. Like Unvouched they count as
	// healthy for what a reply shows, never for a removal, nor as a
	// target of etcd leadership: a voter killed a moment ago is still
	// ready by its heartbeats until down-after, but etcd knows at once.
	Unheard map[string]bool
	// EtcdLeader is the member that answered as etcd's leader when the
	// membership was observed (0: none did); Hearing says why none did,
	// for the messages of refusals.
	EtcdLeader uint64
	Hearing    string
}

// MembershipInputs is what a membership snapshot is built from: plain
// values the runtime gathered (curator/membership_observe.go: etcd's
// members and who etcd hears, the registry's nodes, this leader's
// heartbeats) or a test wrote. BuildMembership reads nothing else.
type MembershipInputs struct {
	// Self is the node of the curator that observes.
	Self string
	// Members are etcd's members.
	Members []member.Member
	// Nodes are the nodes that hold, held or hand back the consensus
	// role, and the nodes of members that lack it (a promote cut short).
	// They are the registry view's, shared: never changed.
	Nodes []*pb.Node
	// PeerNodes maps the peer URL of a member whose etcd has not started
	// (it has no name yet) to the ID of the node it was added for.
	PeerNodes map[string]string
	// Heartbeats holds when this leader last heard each member's node; a
	// node absent never sent it one.
	Heartbeats map[string]time.Time
	// HeartbeatInterval is the agents' interval: a node heard within two
	// of Now is heard just now (Membership.Heard).
	HeartbeatInterval time.Duration
	// LeaderSince is when this leadership began (not the end of a doubt:
	// see ShownStatus); Now is the time of the observation.
	LeaderSince, Now time.Time
	// EtcdHeard holds the voters etcd hears from now (consensus.Hearing);
	// a voter absent is unheard. EtcdLeader is the member that answered
	// as etcd's leader (0: none did), and Hearing says why none did.
	EtcdHeard  map[uint64]bool
	EtcdLeader uint64
	Hearing    string
}

// BuildMembership is the membership snapshot of in, with no I/O. It
// matches etcd's members to nodes (a member that has started carries its
// node's ID as its name; one that has not is matched by the peer URL it
// was added with), and marks, among the members' nodes, those heard just
// now (Heard), those this leadership does not vouch for (Unvouched, by
// Vouched) and the voters etcd does not hear (Unheard). It changes none
// of in.
func BuildMembership(in MembershipInputs) *Membership {
	ms := &Membership{Self: in.Self, Nodes: slices.Clone(in.Nodes), Members: slices.Clone(in.Members),
		MemberOf: map[string]member.Member{}, NodeOf: map[uint64]string{}, Heard: map[string]bool{},
		Unvouched: map[string]bool{}, Unheard: map[string]bool{}, EtcdLeader: in.EtcdLeader, Hearing: in.Hearing}
	ms.ByID = make(map[string]*pb.Node, len(ms.Nodes))
	for _, n := range ms.Nodes {
		ms.ByID[n.Id] = n
	}
	slices.SortFunc(ms.Nodes, func(a, b *pb.Node) int { return cmp.Compare(a.Id, b.Id) })
	slices.SortFunc(ms.Members, func(a, b member.Member) int { return cmp.Compare(a.ID, b.ID) })
	for _, m := range ms.Members {
		id := m.NodeID
		if id == "" {
			id = in.PeerNodes[m.PeerURL]
		}
		ms.NodeOf[m.ID] = id
		if id == "" {
			continue
		}
		ms.MemberOf[id] = m
		last, seen := in.Heartbeats[id]
		if seen && in.Now.Sub(last) <= 2*in.HeartbeatInterval {
			ms.Heard[id] = true
		}
		if !m.IsLearner && !in.EtcdHeard[m.ID] {
			ms.Unheard[id] = true
		}
		if n := ms.ByID[id]; n != nil && !Vouched(n, last, seen, in.LeaderSince, in.Self) {
			ms.Unvouched[id] = true
		}
	}
	return ms
}

// NodeOfMember returns the node of member m, or nil.
func (ms *Membership) NodeOfMember(m member.Member) *pb.Node {
	return ms.ByID[ms.NodeOf[m.ID]]
}

// member returns the member with ID id.
func (ms *Membership) Member(id uint64) (member.Member, bool) {
	i, ok := slices.BinarySearchFunc(ms.Members, id, func(m member.Member, id uint64) int { return cmp.Compare(m.ID, id) })
	if !ok {
		return member.Member{}, false
	}
	return ms.Members[i], true
}

// Healthy says whether member m counts towards a healthy quorum: it has a
// node, and its node is Ready (its record says ready, or it is this
// curator's own node, which runs: it observed this). The one definition
// of a healthy voter.
func (ms *Membership) Healthy(m member.Member) bool {
	n := ms.NodeOfMember(m)
	return n != nil && Ready(n, ms.Self)
}

// HealthyForRemoval is Healthy, but a voter this leadership has not
// vouched for yet (Unvouched), or that etcd does not hear from now
// (Unheard), is not healthy: the count a removal may spend
// (RemovalQuorum), and who may take etcd leadership (LeadershipTarget).
// The heartbeats and etcd must both say a voter is alive: either alone
// can only refuse more.
func (ms *Membership) HealthyForRemoval(m member.Member) bool {
	id := ms.NodeOf[m.ID]
	return ms.Healthy(m) && !ms.Unvouched[id] && !ms.Unheard[id]
}

// HealthyVoter says whether the member of node id is a voter a removal
// may count as healthy (HealthyForRemoval): what the group loop's
// snapshot carries for each node (GroupNode.HealthyVoter).
func (ms *Membership) HealthyVoter(id string) bool {
	m, ok := ms.MemberOf[id]
	return ok && !m.IsLearner && ms.HealthyForRemoval(m)
}

// LeadershipTarget is the voter that takes etcd leadership from voter m,
// which is about to go: a voter healthy for a removal (so one etcd hears
// from right now, never one that just died), not on its way out, and not
// this curator's own node where another will do (the two leaders stay
// apart). With none, a precondition error names the voters that are not
// healthy and says what to do.
func (ms *Membership) LeadershipTarget(m member.Member) (member.Member, error) {
	var to member.Member
	found := false
	for _, o := range ms.Members {
		if o.IsLearner || o.ID == m.ID || !ms.HealthyForRemoval(o) || ms.Demoting(o) {
			continue
		}
		if !found || ms.NodeOf[to.ID] == ms.Self {
			to, found = o, true
		}
	}
	if found {
		return to, nil
	}
	q := ms.RemovalQuorum(m.ID)
	return member.Member{}, fmt.Errorf("%w: no healthy voter to take etcd leadership from node %s%s: bring the other voters back (or wait until they are marked down and remove them with `curator node rm --force`), then demote again",
		spec.ErrPrecondition, ms.NodeOf[m.ID], ms.unhealthyWhy(q.Unhealthy))
}

// unhealthyWhy says, for a refusal, why the voters of nodes ids are not
// healthy: not heard by etcd, not ready, or not vouched for yet.
func (ms *Membership) unhealthyWhy(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	var parts []string
	for _, id := range ids {
		why := "not ready"
		switch n := ms.ByID[id]; {
		case ms.Unheard[id]:
			why = "etcd does not hear from it now"
			if ms.Hearing != "" {
				why += " (" + ms.Hearing + ")"
			}
			why += ": it stopped a moment ago, or is cut off"
		case n == nil:
			why = "no node record"
		case ms.Unvouched[id]:
			why = "not heard by this leader yet"
		case n.Status != pb.NodeStatus_NODE_STATUS_READY:
			why = spec.StatusWord(n.Status.String())
		}
		parts = append(parts, id+" ("+why+")")
	}
	return "; unhealthy voters: " + strings.Join(parts, ", ")
}

// ReachableNow says whether voter m may take etcd leadership from the
// placement loop: healthy, serving clients, and heard from right now, by
// this leader and by etcd (Unheard), not merely marked ready (a node cut
// off a moment ago is still ready for a while, and etcd leadership moved
// onto it would be lost at once).
func (ms *Membership) ReachableNow(m member.Member) bool {
	id := ms.NodeOf[m.ID]
	return ms.Healthy(m) && m.ClientURL != "" && ms.Heard[id] && !ms.Unheard[id]
}

// Demoting says whether member m's node is on its way out, and so never a
// target of etcd leadership.
func (ms *Membership) Demoting(m member.Member) bool {
	n := ms.NodeOfMember(m)
	return n != nil && n.Demoting
}

// Quorum is what a change would leave of the voters.
type Quorum struct {
	Voters, Healthy int
	// Unhealthy lists the node IDs of the voters that are not healthy
	// (a member's hex ID for a member of no node), sorted.
	Unhealthy []string
}

// Need is how many healthy voters the quorum needs.
func (q Quorum) Need() int { return spec.Majority(q.Voters) }

// OK says whether a healthy majority of at least one voter remains.
func (q Quorum) OK() bool { return q.Voters > 0 && q.Healthy >= q.Need() }

// Without is what removing one voter, healthy or not, leaves of q: the
// same arithmetic as QuorumAfter for a caller that keeps counts, not
// members (the group loop's snapshot).
func (q Quorum) Without(healthy bool) Quorum {
	q.Voters--
	if healthy {
		q.Healthy--
	}
	q.Unhealthy = nil
	return q
}

// QuorumAfter is all the quorum arithmetic of membership changes, in one
// place: the voters there would be after removing voter remove and
// promoting learner promote (0: neither), and how many of them are healthy.
// A promoted learner counts as healthy: it runs, and etcd refuses to
// promote one that has not caught up. Adding a learner changes no quorum,
// and is always allowed (etcd's own strict reconfiguration check is off:
// see consensus).
func (ms *Membership) QuorumAfter(remove, promote uint64) Quorum {
	return ms.quorumAfter(remove, promote, ms.Healthy)
}

// RemovalQuorum is QuorumAfter for a decision that removes or demotes
// voters: a voter counts as healthy only once this leadership has heard
// or judged it (Unvouched). The quorum guard (CheckRemoval), the group
// loop, the reaper and a group's destruction count with it.
func (ms *Membership) RemovalQuorum(remove uint64) Quorum {
	return ms.quorumAfter(remove, 0, ms.HealthyForRemoval)
}

func (ms *Membership) quorumAfter(remove, promote uint64, healthy func(member.Member) bool) Quorum {
	var q Quorum
	for _, m := range ms.Members {
		switch {
		case m.ID == remove:
			continue
		case m.IsLearner && m.ID == promote:
			q.Voters++
			q.Healthy++
		case m.IsLearner:
			continue
		case healthy(m):
			q.Voters++
			q.Healthy++
		default:
			q.Voters++
			who := ms.NodeOf[m.ID]
			if who == "" {
				who = fmt.Sprintf("%x", m.ID)
			}
			q.Unhealthy = append(q.Unhealthy, who)
		}
	}
	slices.Sort(q.Unhealthy)
	return q
}

// QuorumWithout is what removing every voter whose node matches gone
// would leave of the voters, counted as RemovalQuorum counts.
func (ms *Membership) QuorumWithout(gone func(n *pb.Node) bool) Quorum {
	var q Quorum
	for _, m := range ms.Members {
		if m.IsLearner {
			continue
		}
		if n := ms.NodeOfMember(m); n != nil && gone(n) {
			continue
		}
		q.Voters++
		if ms.HealthyForRemoval(m) {
			q.Healthy++
		}
	}
	return q
}

// CheckRemoval is the quorum guard: removing member m (of node nodeID)
// must leave at least one voter, and a healthy majority of the voters that
// remain. Removing a learner changes no quorum.
func (ms *Membership) CheckRemoval(m member.Member, nodeID string) error {
	if m.IsLearner {
		return nil
	}
	q := ms.RemovalQuorum(m.ID)
	if q.Voters == 0 {
		return fmt.Errorf("%w: node %s is the last etcd voter: removing it would destroy the cluster's state; promote another node first", spec.ErrPrecondition, nodeID)
	}
	if !q.OK() {
		return fmt.Errorf("%w: removing node %s would leave %d voters of which only %d are healthy, and a majority needs %d: "+
			"bring the unhealthy voters %v back, or remove dead ones with `curator node rm --force`, first%s",
			spec.ErrPrecondition, nodeID, q.Voters, q.Healthy, q.Need(), q.Unhealthy, ms.unhealthyWhy(q.Unhealthy))
	}
	return nil
}
