package curator

import (
	"fmt"
	"sort"
)

// The consensus sync's decision, a pure function of a snapshot.
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

// syncNode is a node as the sync sees it.
type syncNode struct {
	id           string
	hasConsensus bool
}

// syncMember is an etcd member as the sync sees it; nodeID is empty when it
// matches no node (no name, and a peer URL no node has).
type syncMember struct {
	id        uint64
	nodeID    string
	isLearner bool
}

type syncSnapshot struct {
	leaderNodeID string
	nodes        []syncNode
	members      []syncMember
}

type syncActionKind int

const (
	syncRefuse syncActionKind = iota + 1
	syncRemoveMember
	syncGrantRole
	syncClearRole
)

func (k syncActionKind) String() string {
	switch k {
	case syncRefuse:
		return "refuse"
	case syncRemoveMember:
		return "remove-member"
	case syncGrantRole:
		return "grant-role"
	case syncClearRole:
		return "clear-role"
	}
	return fmt.Sprintf("syncActionKind(%d)", int(k))
}

// syncAction is one change, with the reason an operator reads in events.
type syncAction struct {
	kind     syncActionKind
	nodeID   string
	memberID uint64
	reason   string
}

// decideSync returns the one change to make, or nil when roles and
// membership agree.
func decideSync(s syncSnapshot) *syncAction {
	nodes := map[string]syncNode{}
	for _, n := range s.nodes {
		nodes[n.id] = n
	}
	members := append([]syncMember(nil), s.members...)
	sort.Slice(members, func(i, j int) bool { return members[i].id < members[j].id })
	memberOf := map[string]syncMember{}
	for _, m := range members {
		if m.nodeID != "" {
			memberOf[m.nodeID] = m
		}
	}
	if _, ok := nodes[s.leaderNodeID]; !ok {
		return &syncAction{kind: syncRefuse, nodeID: s.leaderNodeID,
			reason: fmt.Sprintf("the leader's own node %s is not in the registry: refusing to change roles or membership", s.leaderNodeID)}
	}
	if _, ok := memberOf[s.leaderNodeID]; !ok {
		return &syncAction{kind: syncRefuse, nodeID: s.leaderNodeID,
			reason: fmt.Sprintf("the leader's own node %s is not among the etcd members: refusing to change roles or membership", s.leaderNodeID)}
	}
	for _, m := range members {
		if _, ok := nodes[m.nodeID]; m.nodeID == "" || !ok {
			who := "matches no node"
			if m.nodeID != "" {
				who = fmt.Sprintf("belongs to node %s, which does not exist", m.nodeID)
			}
			return &syncAction{kind: syncRemoveMember, nodeID: m.nodeID, memberID: m.id,
				reason: fmt.Sprintf("etcd member %x %s", m.id, who)}
		}
	}
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		n := nodes[id]
		m, member := memberOf[id]
		switch {
		case member && !n.hasConsensus:
			return &syncAction{kind: syncGrantRole, nodeID: id, memberID: m.id,
				reason: fmt.Sprintf("node %s is etcd member %x but lacks the consensus role: finishing its promotion", id, m.id)}
		case !member && n.hasConsensus:
			return &syncAction{kind: syncClearRole, nodeID: id,
				reason: fmt.Sprintf("node %s has the consensus role but is no etcd member: finishing its demotion", id)}
		}
	}
	return nil
}
