package curator

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/curatorproject/curator/consensus"
	pb "github.com/curatorproject/curator/proto"
)

// Promote and demote, and the loop that finishes demotions.
//
// Every membership change goes etcd first, role second (see decideSync).
// Promote adds a learner, then writes the role with the join parameters;
// the learner loop promotes it to voter once it has caught up. Demote marks
// the node as demoting, moves etcd leadership off it, removes the member,
// then clears the role and the mark. A crash anywhere leaves a state the
// next leader finishes: a member without the role (the sync grants it), a
// mark (the demotion loop finishes), a role without a member (the sync
// clears it).

// voterHealthy says whether member m counts towards a healthy quorum: its
// node is ready, or it is this curator's own node.
func (s *Service) voterHealthy(ms *membership, m consensus.Member) bool {
	n := ms.byID[ms.nodeOf[m.ID]]
	return n != nil && (n.Id == s.cfg.NodeID || n.Status == pb.NodeStatus_NODE_STATUS_READY)
}

// checkRemoval is the quorum guard: removing member m must leave at least
// one voter, and a healthy majority of the voters that remain. Removing a
// learner changes no quorum.
func (s *Service) checkRemoval(ms *membership, m consensus.Member, nodeID string) error {
	if m.IsLearner {
		return nil
	}
	var voters, healthy int
	var down []string
	for _, o := range ms.members {
		if o.IsLearner || o.ID == m.ID {
			continue
		}
		voters++
		if s.voterHealthy(ms, o) {
			healthy++
		} else {
			down = append(down, ms.nodeOf[o.ID])
		}
	}
	if voters == 0 {
		return fmt.Errorf("%w: node %s is the last etcd voter: removing it would destroy the cluster's state; promote another node first", ErrPrecondition, nodeID)
	}
	if need := voters/2 + 1; healthy < need {
		sort.Strings(down)
		return fmt.Errorf("%w: removing node %s would leave %d voters of which only %d are healthy, and a majority needs %d: "+
			"bring the unhealthy voters %v back, or remove dead ones with `curator node rm --force`, first",
			ErrPrecondition, nodeID, voters, healthy, need, down)
	}
	return nil
}

// promote gives node n the consensus role: a learner first. Called with
// muNodes held.
func (s *Service) promote(ctx context.Context, st *leaderState, n *pb.Node) error {
	if hasRole(n, pb.Role_ROLE_CONSENSUS) {
		return nil // already promoted, or being promoted: the learner loop finishes
	}
	switch {
	case n.State == pb.NodeState_NODE_STATE_PENDING:
		return fmt.Errorf("%w: node %s is pending approval: approve it first with `curator node approve %s`", ErrPrecondition, n.Id, n.Id)
	case n.State != pb.NodeState_NODE_STATE_UP:
		return fmt.Errorf("%w: node %s is %s", ErrPrecondition, n.Id, n.State)
	case n.Status != pb.NodeStatus_NODE_STATUS_READY:
		return fmt.Errorf("%w: node %s is not ready (%s): a node that does not answer cannot catch up with etcd; bring it back first", ErrPrecondition, n.Id, statusWord(n.Status.String()))
	}
	cs, err := clusterLoad(ctx, s.cfg.Etcd)
	if err != nil {
		return err
	}
	ms, err := s.observeMembership(ctx, st)
	if err != nil {
		return err
	}
	if _, member := ms.memberOf[n.Id]; member {
		return nil // the sync grants the role of a member
	}
	if uint32(len(ms.members)+1) > cs.MaxVoters {
		return fmt.Errorf("%w: promoting node %s would make %d consensus members, past the limit of %d; raise it with `curator cluster update --max-voters N`", ErrPrecondition, n.Id, len(ms.members)+1, cs.MaxVoters)
	}
	pub, err := parsePublicKey(n.PublicKey)
	if err != nil {
		return err
	}
	ip, port, err := SplitAddress(n.Address)
	if err != nil {
		return err
	}
	join, err := s.addConsensusMember(ctx, st, n.Id, pub, ip, port)
	if err != nil {
		return err
	}
	n.Roles = withRole(n.Roles, pb.Role_ROLE_CONSENSUS)
	n.Consensus = join
	n.Updated = timestampNow(s)
	return nodeSave(ctx, st.leadership, n)
}

// demoteOutcome says how far a demotion got.
type demoteOutcome string

const (
	demoted    demoteOutcome = "demoted"
	handedOver demoteOutcome = "handed-over"
	// notManager: the node holds no consensus role and is no etcd member;
	// nothing changed.
	notManager demoteOutcome = "not-a-manager"
	// promotionCalledOff: the node was approved as a manager but not yet
	// promoted; it stays a worker.
	promotionCalledOff demoteOutcome = "promotion-called-off"
)

// demote takes the consensus role from node n, with the guards. A leader
// demoting its own node marks it and resigns; the next leader finishes.
// Called with muNodes held.
func (s *Service) demote(ctx context.Context, st *leaderState, n *pb.Node) (demoteOutcome, error) {
	ms, err := s.observeMembership(ctx, st)
	if err != nil {
		return "", err
	}
	m, member := ms.memberOf[n.Id]
	if !member && !hasRole(n, pb.Role_ROLE_CONSENSUS) {
		if n.State == pb.NodeState_NODE_STATE_PENDING {
			return "", fmt.Errorf("%w: node %s is pending approval and holds no role: there is nothing to demote; approve it with `curator node approve %s`, or refuse it with `curator node rm %s`",
				ErrPrecondition, n.Id, n.Id, n.Id)
		}
		// An approved manager the manager-approvals loop has not promoted
		// yet: the operator's word wins.
		calledOff, err := promotionDrop(ctx, st.leadership, n.Id)
		if err != nil {
			return "", err
		}
		if calledOff {
			return promotionCalledOff, nil
		}
		return notManager, nil
	}
	if member {
		if err := s.checkRemoval(ms, m, n.Id); err != nil {
			return "", err
		}
	}
	if !n.Demoting {
		n.Demoting = true
		n.Updated = timestampNow(s)
		if err := nodeSave(ctx, st.leadership, n); err != nil {
			return "", err
		}
	}
	if n.Id == s.cfg.NodeID {
		st.resign()
		return handedOver, nil
	}
	if _, err := s.finishDemotion(ctx, st, ms, n); err != nil {
		return "", err
	}
	return demoted, nil
}

// finishDemotion does the rest of a demotion of node n (marked demoting,
// not this curator's node): etcd leadership off it, the member removed,
// then the role and the mark cleared.
func (s *Service) finishDemotion(ctx context.Context, st *leaderState, ms *membership, n *pb.Node) (string, error) {
	n = cloneNode(n)
	msg := fmt.Sprintf("node %s demoted: its etcd member was gone already; consensus role cleared", n.Id)
	if m, member := ms.memberOf[n.Id]; member {
		msg = fmt.Sprintf("node %s demoted: etcd member %x removed, consensus role cleared", n.Id, m.ID)
		if err := s.checkRemoval(ms, m, n.Id); err != nil {
			return "", err
		}
		if !m.IsLearner {
			if err := s.moveEtcdLeaderOff(ctx, st, ms, m); err != nil {
				return "", err
			}
		}
		if err := s.removeMemberAsLeader(ctx, st, m.ID); err != nil {
			return "", err
		}
		faultPoint(FaultDemoteAfterMemberRemove)
	}
	if err := s.revokeEtcdCert(ctx, st, n.Consensus); err != nil {
		return "", err
	}
	n.Roles = withoutRole(n.Roles, pb.Role_ROLE_CONSENSUS)
	n.Consensus = nil
	n.Demoting = false
	n.Updated = timestampNow(s)
	if err := nodeSave(ctx, st.leadership, n); err != nil {
		return "", err
	}
	return msg, nil
}

// moveEtcdLeaderOff moves etcd leadership away from member m if it holds
// it, to a healthy voter (this curator's node last, so the two leaders
// stay apart where they can).
func (s *Service) moveEtcdLeaderOff(ctx context.Context, st *leaderState, ms *membership, m consensus.Member) error {
	leader, err := consensus.Leader(ctx, s.cfg.Etcd)
	if err != nil || leader != m.ID {
		return err
	}
	var to uint64
	for _, o := range ms.members {
		if o.IsLearner || o.ID == m.ID || !s.voterHealthy(ms, o) {
			continue
		}
		if n := ms.byID[ms.nodeOf[o.ID]]; n != nil && n.Demoting {
			continue
		}
		if to == 0 || ms.nodeOf[to] == s.cfg.NodeID {
			to = o.ID
		}
	}
	if to == 0 {
		return fmt.Errorf("%w: no healthy voter to take etcd leadership from node %s", ErrPrecondition, ms.nodeOf[m.ID])
	}
	if _, err := st.txnAsLeader(ctx); err != nil {
		return err
	}
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return consensus.MoveLeader(mctx, s.cfg.Etcd, to)
}

// The demotion loop finishes demotions a leader started and did not end:
// its own (it resigned), or one cut short by a crash.
func (s *Service) demotionLoop(st *leaderState) loopSpec {
	return loopSpec{
		name:        "demotions",
		tick:        func(ctx context.Context) (loopResult, error) { return s.demotionTick(ctx, st) },
		nodeChanges: membershipChange,
		resync:      s.cfg.SyncInterval,
		minGap:      s.cfg.MinActionGap,
	}
}

func (s *Service) demotionTick(ctx context.Context, st *leaderState) (loopResult, error) {
	st.muNodes.Lock()
	defer st.muNodes.Unlock()
	ms, err := s.observeMembership(ctx, st)
	if err != nil {
		return loopResult{}, err
	}
	for _, n := range ms.nodes {
		if !n.Demoting {
			continue
		}
		if n.Id == s.cfg.NodeID {
			st.resign()
			return loopResult{action: "resign", nodeID: n.Id,
				reason: fmt.Sprintf("this curator's node %s is being demoted: resigning so the next leader finishes", n.Id)}, nil
		}
		msg, err := s.finishDemotion(ctx, st, ms, n)
		if err != nil {
			if isPrecondition(err) {
				return loopResult{refused: true, nodeID: n.Id, reason: err.Error()}, nil
			}
			return loopResult{}, err
		}
		return loopResult{action: "demote", nodeID: n.Id, reason: msg}, nil
	}
	return loopResult{}, nil
}
