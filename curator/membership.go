package curator

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/curatorproject/curator/consensus"
	pb "github.com/curatorproject/curator/proto"
)

// membership is one observation of etcd's members, the nodes that matter
// to them and their health, read together under muNodes. Every decision
// about membership reads it: the quorum guard, the consensus sync, the
// demotions, the learners, the placement and cluster info. It is the one
// place that matches members to nodes, says which voter is healthy, and
// counts a quorum (quorumAfter).
//
// It is plain data: the decide functions that read it are pure, and their
// tests build one with newMembership.
type membership struct {
	// self is the node of the curator that observed it.
	self string
	// nodes are sorted by ID; members by member ID. The nodes are the
	// registry view's, shared: clone one before changing it.
	nodes   []*pb.Node
	byID    map[string]*pb.Node
	members []consensus.Member
	// memberOf maps node IDs to members; a member that matches no node is
	// absent.
	memberOf map[string]consensus.Member
	// nodeOf maps member IDs to node IDs ("" when none matches).
	nodeOf map[uint64]string
	// heard holds the members' nodes (voters' and learners') that sent
	// this leader a heartbeat just now (leaderState.beatingNow).
	heard map[string]bool
}

// memberNodes is where newMembership finds nodes: the registry view, or a
// test's list.
type memberNodes interface {
	// membershipNodes returns the nodes that hold, held or hand back the
	// consensus role.
	membershipNodes() []*pb.Node
	// node returns node id or nil.
	node(id string) *pb.Node
	// nodeByPeerURL returns the ID of the node whose etcd peer URL is u,
	// or "".
	nodeByPeerURL(u string) string
}

// newMembership matches etcd's members to nodes. A member that has started
// carries its node's ID as its name; a learner that has not started yet is
// matched by the peer URL it was added with. heard says whether a node was
// heard from just now.
func newMembership(self string, members []consensus.Member, nodes memberNodes, heard func(id string) bool) *membership {
	ms := &membership{self: self, nodes: slices.Clone(nodes.membershipNodes()), members: slices.Clone(members),
		memberOf: map[string]consensus.Member{}, nodeOf: map[uint64]string{}, heard: map[string]bool{}}
	ms.byID = make(map[string]*pb.Node, len(ms.nodes))
	for _, n := range ms.nodes {
		ms.byID[n.Id] = n
	}
	slices.SortFunc(ms.members, func(a, b consensus.Member) int { return cmp.Compare(a.ID, b.ID) })
	for _, m := range ms.members {
		id := m.NodeID
		if id == "" {
			id = nodes.nodeByPeerURL(m.PeerURL)
		}
		ms.nodeOf[m.ID] = id
		if id == "" {
			continue
		}
		ms.memberOf[id] = m
		if _, ok := ms.byID[id]; !ok {
			if n := nodes.node(id); n != nil {
				// A member whose node lacks the role: a promote cut
				// short.
				ms.byID[id] = n
				ms.nodes = append(ms.nodes, n)
			}
		}
		if heard != nil && heard(id) {
			ms.heard[id] = true
		}
	}
	slices.SortFunc(ms.nodes, func(a, b *pb.Node) int { return cmp.Compare(a.Id, b.Id) })
	return ms
}

// observeMembership reads etcd's members and, from the registry view,
// the nodes that matter to membership: those that hold, held or hand back
// the consensus role, and those the members belong to. A fleet's workers
// are not read at all.
func (st *leaderState) observeMembership(ctx context.Context) (*membership, error) {
	members, err := consensus.Members(ctx, st.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	return newMembership(st.cfg.NodeID, members, st.reg, st.beatingNow), nil
}

// nodeOfMember returns the node of member m, or nil.
func (ms *membership) nodeOfMember(m consensus.Member) *pb.Node {
	return ms.byID[ms.nodeOf[m.ID]]
}

// member returns the member with ID id.
func (ms *membership) member(id uint64) (consensus.Member, bool) {
	i, ok := slices.BinarySearchFunc(ms.members, id, func(m consensus.Member, id uint64) int { return cmp.Compare(m.ID, id) })
	if !ok {
		return consensus.Member{}, false
	}
	return ms.members[i], true
}

// healthy says whether member m counts towards a healthy quorum: its node
// is ready, or it is this curator's own node (which runs: it observed
// this). The one definition of a healthy voter.
func (ms *membership) healthy(m consensus.Member) bool {
	n := ms.nodeOfMember(m)
	return n != nil && (n.Id == ms.self || n.Status == pb.NodeStatus_NODE_STATUS_READY)
}

// reachableNow says whether voter m may take etcd leadership from the
// placement loop: healthy, serving clients, and heard from right now, not
// merely marked ready (a node cut off a moment ago is still ready for a
// while, and etcd leadership moved onto it would be lost at once).
func (ms *membership) reachableNow(m consensus.Member) bool {
	return ms.healthy(m) && m.ClientURL != "" && ms.heard[ms.nodeOf[m.ID]]
}

// demoting says whether member m's node is on its way out, and so never a
// target of etcd leadership.
func (ms *membership) demoting(m consensus.Member) bool {
	n := ms.nodeOfMember(m)
	return n != nil && n.Demoting
}

// majority is how many of n voters make a quorum.
func majority(n int) int { return n/2 + 1 }

// quorum is what a change would leave of the voters.
type quorum struct {
	voters, healthy int
	// unhealthy lists the node IDs of the voters that are not healthy
	// (a member's hex ID for a member of no node), sorted.
	unhealthy []string
}

// need is how many healthy voters the quorum needs.
func (q quorum) need() int { return majority(q.voters) }

// ok says whether a healthy majority of at least one voter remains.
func (q quorum) ok() bool { return q.voters > 0 && q.healthy >= q.need() }

// quorumAfter is all the quorum arithmetic of membership changes, in one
// place: the voters there would be after removing voter remove and
// promoting learner promote (0: neither), and how many of them are healthy.
// A promoted learner counts as healthy: it runs, and etcd refuses to
// promote one that has not caught up. Adding a learner changes no quorum,
// and is always allowed (etcd's own strict reconfiguration check is off:
// see consensus).
func (ms *membership) quorumAfter(remove, promote uint64) quorum {
	var q quorum
	for _, m := range ms.members {
		switch {
		case m.ID == remove:
			continue
		case m.IsLearner && m.ID == promote:
			q.voters++
			q.healthy++
		case m.IsLearner:
			continue
		case ms.healthy(m):
			q.voters++
			q.healthy++
		default:
			q.voters++
			who := ms.nodeOf[m.ID]
			if who == "" {
				who = fmt.Sprintf("%x", m.ID)
			}
			q.unhealthy = append(q.unhealthy, who)
		}
	}
	slices.Sort(q.unhealthy)
	return q
}

// quorumWithout is what removing every voter whose node matches gone
// would leave of the voters.
func (ms *membership) quorumWithout(gone func(n *pb.Node) bool) quorum {
	var q quorum
	for _, m := range ms.members {
		if m.IsLearner {
			continue
		}
		if n := ms.nodeOfMember(m); n != nil && gone(n) {
			continue
		}
		q.voters++
		if ms.healthy(m) {
			q.healthy++
		}
	}
	return q
}

// checkRemoval is the quorum guard: removing member m (of node nodeID)
// must leave at least one voter, and a healthy majority of the voters that
// remain. Removing a learner changes no quorum.
func (ms *membership) checkRemoval(m consensus.Member, nodeID string) error {
	if m.IsLearner {
		return nil
	}
	q := ms.quorumAfter(m.ID, 0)
	if q.voters == 0 {
		return fmt.Errorf("%w: node %s is the last etcd voter: removing it would destroy the cluster's state; promote another node first", ErrPrecondition, nodeID)
	}
	if !q.ok() {
		return fmt.Errorf("%w: removing node %s would leave %d voters of which only %d are healthy, and a majority needs %d: "+
			"bring the unhealthy voters %v back, or remove dead ones with `curator node rm --force`, first",
			ErrPrecondition, nodeID, q.voters, q.healthy, q.need(), q.unhealthy)
	}
	return nil
}
