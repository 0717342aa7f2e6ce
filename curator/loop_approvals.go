package curator

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

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

const approvalsLoopName = "manager-approvals"

// approvalNode is a node with a pending promotion, as the loop sees it.
type approvalNode struct {
	id string
	// exists is false when the node has been removed.
	exists bool
	state  pb.NodeState
	status pb.NodeStatus
	// consensus: the node holds the consensus role or is an etcd member.
	consensus bool
	demoting  bool
}

type approvalSnapshot struct {
	pending []approvalNode
	// members counts etcd members, voters and learners: what the voter
	// limit bounds (as in promote).
	members   int
	maxVoters uint32
}

// approvalActionKind is what an action does, as events and metrics name it.
type approvalActionKind string

const (
	approvalPromote approvalActionKind = "promote"
	approvalDrop    approvalActionKind = "drop-promotion"
)

type approvalAction struct {
	kind   approvalActionKind
	nodeID string
	reason string
}

// decideApprovals returns the one pending promotion to finish or drop, or
// nil when every pending promotion waits for its node to be ready.
func decideApprovals(s approvalSnapshot) *approvalAction {
	pending := append([]approvalNode(nil), s.pending...)
	sort.Slice(pending, func(i, j int) bool { return pending[i].id < pending[j].id })
	for _, n := range pending {
		drop := func(format string, args ...any) *approvalAction {
			return &approvalAction{kind: approvalDrop, nodeID: n.id, reason: fmt.Sprintf(format, args...)}
		}
		switch {
		case !n.exists:
			return drop("node %s was approved as a manager but no longer exists: nothing to promote", n.id)
		case n.consensus:
			return drop("node %s holds the consensus role: its promotion after approval is done", n.id)
		case n.demoting:
			return drop("node %s is being demoted: its promotion after approval is called off", n.id)
		case n.state != pb.NodeState_NODE_STATE_UP:
			return drop("node %s is %s: it cannot be promoted", n.id, stateWord(n.state))
		case n.status != pb.NodeStatus_NODE_STATUS_READY:
			continue // a node that does not answer cannot catch up with etcd
		case uint32(s.members+1) > s.maxVoters:
			return drop("node %s joined with the manager token and was approved, but the cluster has %d consensus members, the voter limit of %d: it stays a worker; "+
				"raise the limit with `curator cluster update --max-voters N` and promote it with `curator node promote %s`", n.id, s.members, s.maxVoters, n.id)
		}
		return &approvalAction{kind: approvalPromote, nodeID: n.id,
			reason: fmt.Sprintf("node %s joined with the manager token and was approved, and it is ready: promoting it (an etcd learner first, a voter once it has caught up)", n.id)}
	}
	return nil
}

func (l *leaderLoops) approvalLoop() loopSpec {
	return loopSpec{
		name: approvalsLoopName,
		tick: l.approvalTick,
		// An approval changes the node's state in the transaction that
		// records its promotion; then its status, role or existence
		// decide.
		nodeChanges: approvalChange,
		resync:      max(l.cfg.ApprovalInterval, l.cfg.SyncInterval),
		minGap:      l.cfg.MinActionGap,
	}
}

func (l *leaderLoops) approvalTick(ctx context.Context) (loopResult, error) {
	l.muNodes.Lock()
	defer l.muNodes.Unlock()
	pending, err := promotionList(ctx, l.cfg.Etcd)
	if err != nil || len(pending) == 0 {
		return loopResult{}, err
	}
	ms, err := l.observeMembership(ctx)
	if err != nil {
		return loopResult{}, err
	}
	cs, err := clusterLoad(ctx, l.cfg.Etcd)
	if err != nil {
		return loopResult{}, err
	}
	// The pending nodes are looked up by ID: a fleet's other nodes are not
	// read at all.
	snap := approvalSnapshot{members: len(ms.members), maxVoters: cs.MaxVoters}
	for id := range pending {
		an := approvalNode{id: id}
		if n := l.reg.node(id); n != nil {
			_, member := ms.memberOf[id]
			an = approvalNode{id: id, exists: true, state: n.State, status: n.Status,
				consensus: member || hasRole(n, pb.Role_ROLE_CONSENSUS), demoting: n.Demoting}
		}
		snap.pending = append(snap.pending, an)
	}
	a := decideApprovals(snap)
	if a == nil {
		return loopResult{}, nil
	}
	res := loopResult{action: string(a.kind), nodeID: a.nodeID, reason: a.reason}
	if a.kind == approvalPromote {
		if err := l.promote(ctx, cloneNode(l.reg.node(a.nodeID))); err != nil {
			if isPrecondition(err) {
				// What the snapshot did not show (a race with an
				// operator): say so, and look again next tick.
				return loopResult{refused: true, nodeID: a.nodeID, reason: fmt.Sprintf("promoting approved node %s: %v", a.nodeID, err)}, nil
			}
			return loopResult{}, err
		}
	}
	if _, err := promotionDrop(ctx, l.leadership, a.nodeID); err != nil {
		return loopResult{}, err
	}
	return res, nil
}

// approvalChange picks the node changes the manager-approvals loop acts
// on: of a node that joined with the manager token, its departure and a
// change of its state, status, roles or demotion mark.
func approvalChange(old, new *pb.Node) bool {
	switch {
	case old == nil || joinedAs(old) != joinManager:
		return false // a pending promotion is for a node that exists
	case new == nil:
		return true
	}
	return old.State != new.State || old.Status != new.Status || old.Demoting != new.Demoting || !slices.Equal(old.Roles, new.Roles)
}

// stateWord is NODE_STATE_UP → up.
func stateWord(s pb.NodeState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "NODE_STATE_"))
}
