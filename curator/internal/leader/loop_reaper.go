package leader

import (
	"context"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// The reaper removes nodes that have been down for ReapAfter and that no
// group answers for: made by hand, or of a group that no longer exists.
// (A group's own nodes are the group loop's: it replaces them after the
// group's replace_after and removes their records once their machines are
// gone.) A consensus member goes within the quorum guard, its etcd member
// first; the curator leader's own node is never reaped.

type reaperLoop struct {
	cfg     *Config
	lead    *Leadership
	reg     *store.Registry
	members *members
	roles   *roles
	events  *eventLog
}

func newReaperLoop(st *State) *reaperLoop {
	return &reaperLoop{cfg: st.Cfg, lead: st.Lead, reg: st.Reg, members: st.Members, roles: st.Roles, events: st.Events}
}

func (l *reaperLoop) spec() loopSpec {
	return loopSpec{
		name: "reaper",
		tick: l.tick,
		// Only a node gone down is news to it (a join wave changes
		// statuses hundreds of times a second); time passing, and
		// groups that go, are seen at the resync.
		nodeChanges: func(old, new *pb.Node) bool {
			return new.GetStatus() == pb.NodeStatus_NODE_STATUS_DOWN && old.GetStatus() != pb.NodeStatus_NODE_STATUS_DOWN
		},
		resync: l.cfg.GroupInterval,
		minGap: l.cfg.MinActionGap,
	}
}

func (l *reaperLoop) tick(ctx context.Context) (loopResult, error) {
	var down []*pb.Node
	for _, n := range l.reg.Nodes() {
		if n.Status == pb.NodeStatus_NODE_STATUS_DOWN {
			down = append(down, n)
		}
	}
	if len(down) == 0 {
		return loopResult{}, nil // at rest, without reading etcd
	}
	groups, err := store.GroupList(ctx, l.cfg.Etcd)
	if err != nil {
		return loopResult{}, err
	}
	exists := map[string]bool{}
	for _, g := range groups {
		exists[g.Spec.GetName()] = true
	}
	snap := decide.ReapSnapshot{ReapAfter: l.cfg.ReapAfter, Now: l.cfg.Now()}
	for _, n := range down {
		snap.Nodes = append(snap.Nodes, decide.ReapNode{
			ID: n.Id, Status: n.Status, Since: n.StatusChanged.AsTime(),
			Consensus: spec.HasRole(n, pb.Role_ROLE_CONSENSUS), Grouped: exists[n.Group], Leader: n.Id == l.cfg.NodeID,
		})
	}
	if decide.Reap(snap) == nil {
		return loopResult{}, nil // the common case, without reading etcd's members
	}
	l.lead.MuNodes.Lock()
	defer l.lead.MuNodes.Unlock()
	ms, err := l.members.Observe(ctx)
	if err != nil {
		return loopResult{}, err
	}
	q := ms.RemovalQuorum(0)
	snap.Voters, snap.HealthyVoters = q.Voters, q.Healthy
	for i, n := range snap.Nodes {
		_, member := ms.MemberOf[n.ID]
		snap.Nodes[i].Consensus = n.Consensus || member
	}
	a := decide.Reap(snap)
	switch {
	case a == nil:
		return loopResult{}, nil
	case a.Refused:
		return loopResult{refused: true, nodeID: a.Node, reason: a.Reason}, nil
	}
	n := l.reg.Node(a.Node)
	if n == nil {
		return loopResult{}, nil
	}
	// The event goes in the record's removal: a leader that dies between
	// the two would lose it.
	if err := l.roles.RemoveNode(ctx, n, l.events.Event("reaper", "reap", a.Node, a.Reason)); err != nil {
		return loopResult{}, err
	}
	return loopResult{action: "reap", nodeID: a.Node, reason: a.Reason, recorded: true}, nil
}
