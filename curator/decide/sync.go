package decide

import (
	"fmt"
	"slices"

	pb "github.com/curatorproject/curator/proto"

	"github.com/curatorproject/curator/consensus/member"
	"github.com/curatorproject/curator/curator/spec"
)

// SyncActionKind is what an action does, as events and metrics name it.
type SyncActionKind string

const (
	SyncRefuse       SyncActionKind = "refuse"
	SyncRemoveMember SyncActionKind = "remove-member"
	SyncGrantRole    SyncActionKind = "grant-role"
	SyncClearRole    SyncActionKind = "clear-role"
)

// SyncAction is one change, with the reason an operator reads in events.
type SyncAction struct {
	Kind     SyncActionKind
	NodeID   string
	MemberID uint64
	Reason   string
}

// Sync returns the one change to make, or nil when roles and
// membership agree. Taking out a voter of no node is held to the quorum
// guard, as any removal: a voter of no node still votes.
func Sync(ms *Membership) *SyncAction {
	if _, ok := ms.ByID[ms.Self]; !ok {
		return &SyncAction{Kind: SyncRefuse, NodeID: ms.Self,
			Reason: fmt.Sprintf("the leader's own node %s is not in the registry: refusing to change roles or membership", ms.Self)}
	}
	if _, ok := ms.MemberOf[ms.Self]; !ok {
		return &SyncAction{Kind: SyncRefuse, NodeID: ms.Self,
			Reason: fmt.Sprintf("the leader's own node %s is not among the etcd members: refusing to change roles or membership", ms.Self)}
	}
	for _, m := range ms.Members {
		id := ms.NodeOf[m.ID]
		if ms.ByID[id] != nil {
			continue
		}
		who := "matches no node"
		if id != "" {
			who = fmt.Sprintf("belongs to node %s, which does not exist", id)
		}
		reason := fmt.Sprintf("etcd member %x %s", m.ID, who)
		if err := ms.CheckRemoval(m, id); err != nil {
			return &SyncAction{Kind: SyncRefuse, NodeID: id, MemberID: m.ID,
				Reason: fmt.Sprintf("%s, but removing it now is unsafe: %v", reason, err)}
		}
		return &SyncAction{Kind: SyncRemoveMember, NodeID: id, MemberID: m.ID, Reason: reason}
	}
	for _, n := range ms.Nodes {
		m, member := ms.MemberOf[n.Id]
		role := spec.HasRole(n, pb.Role_ROLE_CONSENSUS)
		switch {
		case member && !role:
			return &SyncAction{Kind: SyncGrantRole, NodeID: n.Id, MemberID: m.ID,
				Reason: fmt.Sprintf("node %s is etcd member %x but lacks the consensus role: finishing its promotion", n.Id, m.ID)}
		case !member && role:
			return &SyncAction{Kind: SyncClearRole, NodeID: n.Id,
				Reason: fmt.Sprintf("node %s has the consensus role but is no etcd member: finishing its demotion", n.Id)}
		case member && role && staleJoin(ms, n, m):
			// The node was handed a member that is gone (removed, and
			// its peer URL added again as m): its agent would run etcd
			// as a member the cluster no longer has, for good. Hand it
			// m's parameters; its agent sees the member change, wipes
			// what it ran and joins as m.
			return &SyncAction{Kind: SyncGrantRole, NodeID: n.Id, MemberID: m.ID,
				Reason: fmt.Sprintf("node %s was handed etcd member %x, which is gone, and learner %x has its peer URL: handing it %x's join parameters", n.Id, n.GetConsensus().GetMemberId(), m.ID, m.ID)}
		}
	}
	return nil
}

// staleJoin says whether node n's record names another etcd member than m,
// the learner that has not started at its peer URL: the member it was
// handed is gone. A started member carries its node's ID as its name, so
// only a learner that never ran can be the node's under another ID. Only a
// ready node is handed it (a node that is down may be a dead machine whose
// address a new one took, whose learner m is), and only a learner no
// other record names.
func staleJoin(ms *Membership, n *pb.Node, m member.Member) bool {
	have := n.GetConsensus().GetMemberId()
	if !m.IsLearner || m.NodeID != "" || have == 0 || have == m.ID || n.Demoting || n.Status != pb.NodeStatus_NODE_STATUS_READY {
		return false
	}
	return !slices.ContainsFunc(ms.Nodes, func(o *pb.Node) bool { return o.Id != n.Id && o.GetConsensus().GetMemberId() == m.ID })
}
