package leader

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// The manager-approvals loop. A node that joins with the manager token
// while the cluster requires approval waits as pending, with no role; when
// an operator approves it, it is to become a consensus member, as if it had
// joined then. It cannot be promoted in the approval call itself: a node
// that has waited for approval is often not ready yet (it starts sending
// heartbeats when the cluster lets it in), and a promotion refused then
// would never be tried again. So the approval records a pending promotion
// (in the same fenced transaction as the node's new state), and this loop
// finishes it once the node is ready.
//
// Safety: the promotion itself is the operator's `node promote` (promote):
// an etcd learner first, then the role; the learner loop makes it a voter
// once it has caught up, under the quorum guard. The loop promotes one node
// per tick, and never past the voter limit: a node that finds the limit
// reached stays a worker, as one that joins then does, and the event says
// how to promote it. A pending promotion is dropped once it is done (the
// node holds the role or is an etcd member: a crash between adding the
// learner and writing the role is finished by the consensus sync), and when
// it can no longer be done (the node is gone or not up). An operator's
// demote of the node calls it off (see demote), so the loop never undoes
// an operator's decision.

const ApprovalsLoopName = "manager-approvals"

type approvalLoop struct {
	cfg     *Config
	lead    *Leadership
	reg     *store.Registry
	members *members
	roles   *roles
}

func newApprovalLoop(st *State) *approvalLoop {
	return &approvalLoop{cfg: st.Cfg, lead: st.Lead, reg: st.Reg, members: st.Members, roles: st.Roles}
}

func (l *approvalLoop) spec() loopSpec {
	return loopSpec{
		name: ApprovalsLoopName,
		tick: l.tick,
		// An approval changes the node's state in the transaction that
		// records its promotion; then its status, role or existence
		// decide.
		nodeChanges: approvalChange,
		resync:      max(l.cfg.ApprovalInterval, l.cfg.SyncInterval),
		minGap:      l.cfg.MinActionGap,
	}
}

// tick observes the pending promotions, decides and acts, under
// muNodes.
func (l *approvalLoop) tick(ctx context.Context) (loopResult, error) {
	l.lead.MuNodes.Lock()
	defer l.lead.MuNodes.Unlock()
	snap, err := l.observe(ctx)
	if err != nil || len(snap.Pending) == 0 {
		return loopResult{}, err
	}
	return l.act(ctx, decide.Approvals(snap))
}

// observe reads the pending promotions and what decides them: the
// membership's size and the voter limit, and each pending node's record.
func (l *approvalLoop) observe(ctx context.Context) (decide.ApprovalSnapshot, error) {
	pending, err := store.PromotionList(ctx, l.cfg.Etcd)
	if err != nil || len(pending) == 0 {
		return decide.ApprovalSnapshot{}, err
	}
	ms, err := l.members.Observe(ctx)
	if err != nil {
		return decide.ApprovalSnapshot{}, err
	}
	cs, err := store.ClusterLoad(ctx, l.cfg.Etcd)
	if err != nil {
		return decide.ApprovalSnapshot{}, err
	}
	// The pending nodes are looked up by ID: a fleet's other nodes are not
	// read at all.
	snap := decide.ApprovalSnapshot{Members: len(ms.Members), MaxVoters: cs.MaxVoters, ConsensusByDomain: map[string]int{}}
	for id := range ms.MemberOf {
		if n := l.reg.Node(id); n != nil && n.Domain != "" {
			snap.ConsensusByDomain[n.Domain]++
		}
	}
	for id := range pending {
		an := decide.ApprovalNode{ID: id}
		if n := l.reg.Node(id); n != nil {
			_, member := ms.MemberOf[id]
			an = decide.ApprovalNode{ID: id, Exists: true, State: n.State, Status: n.Status,
				Consensus: member || spec.HasRole(n, pb.Role_ROLE_CONSENSUS), Demoting: n.Demoting, Domain: n.Domain}
		}
		snap.Pending = append(snap.Pending, an)
	}
	return snap, nil
}

// act promotes the node a approves (nil: none) and drops its pending
// promotion, or only drops it.
func (l *approvalLoop) act(ctx context.Context, a *decide.ApprovalAction) (loopResult, error) {
	if a == nil {
		return loopResult{}, nil
	}
	res := loopResult{action: string(a.Kind), nodeID: a.NodeID, reason: a.Reason}
	if a.Kind == decide.ApprovalPromote {
		if err := l.roles.Promote(ctx, store.CloneNode(l.reg.Node(a.NodeID))); err != nil {
			if errors.Is(err, spec.ErrPrecondition) {
				// What the snapshot did not show (a race with an
				// operator): say so, and look again next tick.
				return loopResult{refused: true, nodeID: a.NodeID, reason: fmt.Sprintf("promoting approved node %s: %v", a.NodeID, err)}, nil
			}
			return loopResult{}, err
		}
	}
	if _, err := store.PromotionDrop(ctx, l.lead.Fence, a.NodeID); err != nil {
		return loopResult{}, err
	}
	return res, nil
}

// approvalChange picks the node changes the manager-approvals loop acts
// on: of a node that joined with the manager token, its departure and a
// change of its state, status, roles or demotion mark.
func approvalChange(old, new *pb.Node) bool {
	switch {
	case old == nil || spec.JoinedAs(old) != spec.JoinManager:
		return false // a pending promotion is for a node that exists
	case new == nil:
		return true
	}
	return old.State != new.State || old.Status != new.Status || old.Demoting != new.Demoting || !slices.Equal(old.Roles, new.Roles)
}
