package curator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// The reaper removes nodes that have been down for ReapAfter and that no
// group answers for: made by hand, or of a group that no longer exists.
// (A group's own nodes are the group loop's: it replaces them after the
// group's replace_after and removes their records once their machines are
// gone.) A consensus member goes within the quorum guard, its etcd member
// first; the curator leader's own node is never reaped.

// reapNode is what the reaper reads of one node.
type reapNode struct {
	ID        string
	Status    pb.NodeStatus
	Since     time.Time
	Consensus bool
	// Grouped: the node names a group that exists.
	Grouped bool
	Leader  bool
}

type reapSnapshot struct {
	Nodes                 []reapNode
	Voters, HealthyVoters int
	ReapAfter             time.Duration
	Now                   time.Time
}

type reapAction struct {
	Node    string
	Refused bool
	Reason  string
}

// decideReap picks the node down longest past ReapAfter, if any.
func decideReap(s reapSnapshot) *reapAction {
	var due []reapNode
	for _, n := range s.Nodes {
		if n.Grouped || n.Leader || n.Status != pb.NodeStatus_NODE_STATUS_DOWN || s.Now.Sub(n.Since) < s.ReapAfter {
			continue
		}
		due = append(due, n)
	}
	if len(due) == 0 {
		return nil
	}
	n := slices.MinFunc(due, func(a, b reapNode) int {
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.ID, b.ID))
	})
	down := s.Now.Sub(n.Since).Round(time.Second)
	if n.Consensus && !quorumAfterRemoval(s.Voters, s.HealthyVoters, false) {
		return &reapAction{Node: n.ID, Refused: true, Reason: fmt.Sprintf("node %s has been down for %v, but removing its etcd member would leave %d healthy of %d voters: bring voters back first", n.ID, down, s.HealthyVoters, s.Voters-1)}
	}
	return &reapAction{Node: n.ID, Reason: fmt.Sprintf("node %s has been down for %v (reap-after %v) and no group answers for it", n.ID, down, s.ReapAfter)}
}

func (l *leaderLoops) reaperLoop() loopSpec {
	return loopSpec{
		name:        "reaper",
		tick:        l.reapTick,
		nodeChanges: func(old, new *pb.Node) bool { return new != nil && (old == nil || old.Status != new.Status) },
		resync:      l.cfg.GroupInterval,
		minGap:      l.cfg.MinActionGap,
	}
}

func (l *leaderLoops) reapTick(ctx context.Context) (loopResult, error) {
	st := l.leaderState
	groups, err := groupList(ctx, st.cfg.Etcd)
	if err != nil {
		return loopResult{}, err
	}
	exists := map[string]bool{}
	for _, g := range groups {
		exists[g.Spec.GetName()] = true
	}
	snap := reapSnapshot{ReapAfter: st.cfg.ReapAfter, Now: st.cfg.Now()}
	for _, n := range st.reg.nodes() {
		if n.Status != pb.NodeStatus_NODE_STATUS_DOWN {
			continue
		}
		snap.Nodes = append(snap.Nodes, reapNode{
			ID: n.Id, Status: n.Status, Since: n.StatusChanged.AsTime(),
			Consensus: hasRole(n, pb.Role_ROLE_CONSENSUS), Grouped: exists[n.Group], Leader: n.Id == st.cfg.NodeID,
		})
	}
	if decideReap(snap) == nil {
		return loopResult{}, nil // the common case, without reading etcd's members
	}
	st.muNodes.Lock()
	defer st.muNodes.Unlock()
	ms, err := st.observeMembership(ctx)
	if err != nil {
		return loopResult{}, err
	}
	q := ms.quorumAfter(0, 0)
	snap.Voters, snap.HealthyVoters = q.voters, q.healthy
	for i, n := range snap.Nodes {
		_, member := ms.memberOf[n.ID]
		snap.Nodes[i].Consensus = n.Consensus || member
	}
	a := decideReap(snap)
	switch {
	case a == nil:
		return loopResult{}, nil
	case a.Refused:
		return loopResult{refused: true, nodeID: a.Node, reason: a.Reason}, nil
	}
	n := st.reg.node(a.Node)
	if n == nil {
		return loopResult{}, nil
	}
	if err := st.removeNode(ctx, n); err != nil {
		return loopResult{}, err
	}
	return loopResult{action: "reap", nodeID: a.Node, reason: a.Reason}, nil
}
