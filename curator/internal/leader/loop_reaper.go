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

// tick observes the nodes that are down, decides and acts. A fleet at
// rest (none down) costs no read of etcd.
func (l *reaperLoop) tick(ctx context.Context) (loopResult, error) {
	snap, err := l.observe(ctx)
	if err != nil || len(snap.Nodes) == 0 {
		return loopResult{}, err
	}
	if decide.Reap(snap) == nil {
		return loopResult{}, nil // the common case, without reading etcd's members
	}
	l.lead.MuNodes.Lock()
	defer l.lead.MuNodes.Unlock()
	if err := l.observeVoters(ctx, &snap); err != nil {
		return loopResult{}, err
	}
	return l.act(ctx, decide.Reap(snap))
}

// observe is the reaper's snapshot of the nodes that are down, with
// whether their group still exists (no voter counts yet).
func (l *reaperLoop) observe(ctx context.Context) (decide.ReapSnapshot, error) {
	var down []*pb.Node
	for _, n := range l.reg.Nodes() {
		if n.Status == pb.NodeStatus_NODE_STATUS_DOWN {
			down = append(down, n)
		}
	}
	if len(down) == 0 {
		return decide.ReapSnapshot{}, nil // at rest, without reading etcd
	}
	groups, err := store.GroupList(ctx, l.cfg.Etcd)
	if err != nil {
		return decide.ReapSnapshot{}, err
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
	return snap, nil
}

// observeVoters adds to snap what a removal is judged by: the voters
// and the healthy ones, and which down nodes are etcd members. Call with
// muNodes held, as the removal is made.
func (l *reaperLoop) observeVoters(ctx context.Context, snap *decide.ReapSnapshot) error {
	ms, err := l.members.Observe(ctx)
	if err != nil {
		return err
	}
	q := ms.RemovalQuorum(0)
	snap.Voters, snap.HealthyVoters = q.Voters, q.Healthy
	for i, n := range snap.Nodes {
		_, member := ms.MemberOf[n.ID]
		snap.Nodes[i].Consensus = n.Consensus || member
	}
	return nil
}

// act reaps the node a names (nil: none), its event in the removal's
// transaction.
func (l *reaperLoop) act(ctx context.Context, a *decide.ReapAction) (loopResult, error) {
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
