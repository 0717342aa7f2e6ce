package curator

import (
	"context"
	"fmt"
	"slices"

	"github.com/curatorproject/curator/consensus"
	pb "github.com/curatorproject/curator/proto"
)

// The consensus sync loop. Its decision is a pure function of the
// membership snapshot.
//
// etcd membership is the truth and roles follow it: every operation that
// changes membership changes etcd first (promote adds the learner, demote
// removes the member) and the role second. A crash between the two leaves a
// member without the role, or a role without the member; completing the
// operation from membership finishes it instead of fighting it.
//
// Members whose node does not exist are removed first: a node that was
// removed (or never registered, after a crash between adding its learner
// and writing its record) must not keep a vote. Only then are roles
// aligned, one change per tick, so that each tick acts on a snapshot that
// reflects the previous change.
//
// The one thing this loop could do that cannot be undone is strip roles or
// members on a wrong reading of who is who. As a safety measure it refuses
// to act at all unless the leader's own node is both an etcd member and in
// the registry: a leader that cannot find itself is reading something
// wrong.

// syncActionKind is what an action does, as events and metrics name it.
type syncActionKind string

const (
	syncRefuse       syncActionKind = "refuse"
	syncRemoveMember syncActionKind = "remove-member"
	syncGrantRole    syncActionKind = "grant-role"
	syncClearRole    syncActionKind = "clear-role"
)

// syncAction is one change, with the reason an operator reads in events.
type syncAction struct {
	kind     syncActionKind
	nodeID   string
	memberID uint64
	reason   string
}

// decideSync returns the one change to make, or nil when roles and
// membership agree. Taking out a voter of no node is held to the quorum
// guard, as any removal: a voter of no node still votes.
func decideSync(ms *membership) *syncAction {
	if _, ok := ms.byID[ms.self]; !ok {
		return &syncAction{kind: syncRefuse, nodeID: ms.self,
			reason: fmt.Sprintf("the leader's own node %s is not in the registry: refusing to change roles or membership", ms.self)}
	}
	if _, ok := ms.memberOf[ms.self]; !ok {
		return &syncAction{kind: syncRefuse, nodeID: ms.self,
			reason: fmt.Sprintf("the leader's own node %s is not among the etcd members: refusing to change roles or membership", ms.self)}
	}
	for _, m := range ms.members {
		id := ms.nodeOf[m.ID]
		if ms.byID[id] != nil {
			continue
		}
		who := "matches no node"
		if id != "" {
			who = fmt.Sprintf("belongs to node %s, which does not exist", id)
		}
		reason := fmt.Sprintf("etcd member %x %s", m.ID, who)
		if err := ms.checkRemoval(m, id); err != nil {
			return &syncAction{kind: syncRefuse, nodeID: id, memberID: m.ID,
				reason: fmt.Sprintf("%s, but removing it now is unsafe: %v", reason, err)}
		}
		return &syncAction{kind: syncRemoveMember, nodeID: id, memberID: m.ID, reason: reason}
	}
	for _, n := range ms.nodes {
		m, member := ms.memberOf[n.Id]
		role := hasRole(n, pb.Role_ROLE_CONSENSUS)
		switch {
		case member && !role:
			return &syncAction{kind: syncGrantRole, nodeID: n.Id, memberID: m.ID,
				reason: fmt.Sprintf("node %s is etcd member %x but lacks the consensus role: finishing its promotion", n.Id, m.ID)}
		case !member && role:
			return &syncAction{kind: syncClearRole, nodeID: n.Id,
				reason: fmt.Sprintf("node %s has the consensus role but is no etcd member: finishing its demotion", n.Id)}
		case member && role && staleJoin(ms, n, m):
			// The node was handed a member that is gone (removed, and
			// its peer URL added again as m): its agent would run etcd
			// as a member the cluster no longer has, for good. Hand it
			// m's parameters; its agent sees the member change, wipes
			// what it ran and joins as m.
			return &syncAction{kind: syncGrantRole, nodeID: n.Id, memberID: m.ID,
				reason: fmt.Sprintf("node %s was handed etcd member %x, which is gone, and learner %x has its peer URL: handing it %x's join parameters", n.Id, n.GetConsensus().GetMemberId(), m.ID, m.ID)}
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
func staleJoin(ms *membership, n *pb.Node, m consensus.Member) bool {
	have := n.GetConsensus().GetMemberId()
	if !m.IsLearner || m.NodeID != "" || have == 0 || have == m.ID || n.Demoting || n.Status != pb.NodeStatus_NODE_STATUS_READY {
		return false
	}
	return !slices.ContainsFunc(ms.nodes, func(o *pb.Node) bool { return o.Id != n.Id && o.GetConsensus().GetMemberId() == m.ID })
}

func (l *leaderLoops) syncLoop() loopSpec {
	return l.membershipLoop("consensus-sync", l.syncTick)
}

func (l *leaderLoops) syncTick(ctx context.Context, ms *membership) (loopResult, error) {
	a := decideSync(ms)
	if a == nil {
		return loopResult{}, nil
	}
	res := loopResult{action: string(a.kind), nodeID: a.nodeID, reason: a.reason}
	var err error
	switch a.kind {
	case syncRefuse:
		res.refused = true
	case syncRemoveMember:
		m, _ := ms.member(a.memberID)
		err = l.removeFromEtcd(ctx, ms, m)
	case syncGrantRole:
		err = l.grantConsensusRole(ctx, ms, ms.byID[a.nodeID], a.memberID)
	case syncClearRole:
		err = l.clearConsensusRole(ctx, ms.byID[a.nodeID])
	}
	return res, err
}
