package curator

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
)

// What an operator does to one node. Each call resolves the node, checks
// the guards (each refusal says why and what to do, and changes nothing),
// and acts under muNodes.

func timestampNow(s *Service) *timestamppb.Timestamp { return timestamppb.New(s.cfg.Now()) }

func isPrecondition(err error) bool { return errors.Is(err, ErrPrecondition) }

// resolveLocked resolves query in the registry view and returns a copy of
// the node to change; call with muNodes.
func (s *Service) resolveLocked(st *leaderState, query string) (*pb.Node, error) {
	n, err := nodeResolve(st.reg.nodes(), query)
	if err != nil {
		return nil, err
	}
	return cloneNode(n), nil
}

// view renders a node for a reply.
func (s *Service) view(ctx context.Context, st *leaderState, id string) (*pb.NodeView, error) {
	v, err := s.observe(ctx, st)
	if err != nil {
		return nil, err
	}
	if n := st.reg.node(id); n != nil {
		return s.nodeView(v, st, n), nil
	}
	return nil, fmt.Errorf("node %s: %w", id, ErrNotFound)
}

func (m *managementServer) PromoteNode(ctx context.Context, req *pb.NodeRequest) (*pb.NodeView, error) {
	s := m.s
	st, err := s.leaderFor()
	if err != nil {
		return nil, err
	}
	st.muNodes.Lock()
	n, err := s.resolveLocked(st, req.Id)
	if err == nil {
		err = s.promote(ctx, st, n)
	}
	st.muNodes.Unlock()
	if err != nil {
		return nil, err
	}
	return s.view(ctx, st, n.Id)
}

func (m *managementServer) DemoteNode(ctx context.Context, req *pb.NodeRequest) (*pb.DemoteResponse, error) {
	s := m.s
	st, err := s.leaderFor()
	if err != nil {
		return nil, err
	}
	st.muNodes.Lock()
	n, err := s.resolveLocked(st, req.Id)
	var outcome demoteOutcome
	if err == nil {
		outcome, err = s.demote(ctx, st, n)
	}
	st.muNodes.Unlock()
	if err != nil {
		return nil, err
	}
	resp := &pb.DemoteResponse{Outcome: string(outcome)}
	if outcome == demoted {
		if resp.Node, err = s.view(ctx, st, n.Id); err != nil {
			return nil, err
		}
	} else {
		resp.Node = &pb.NodeView{Node: n}
	}
	return resp, nil
}

func (m *managementServer) UpdateNode(ctx context.Context, req *pb.UpdateNodeRequest) (*pb.NodeView, error) {
	s := m.s
	st, err := s.leaderFor()
	if err != nil {
		return nil, err
	}
	if _, ok := pb.Availability_name[int32(req.Availability)]; !ok {
		return nil, fmt.Errorf("%w: unknown availability %d: want active, pause or drain", ErrInvalid, req.Availability)
	}
	for k, v := range req.LabelAdd {
		if err := ValidateLabel(k, v); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	for _, k := range req.LabelRm {
		if err := ValidateLabelKey(k); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if _, both := req.LabelAdd[k]; both {
			return nil, fmt.Errorf("%w: label %q is both added and removed", ErrInvalid, k)
		}
	}
	st.muNodes.Lock()
	defer st.muNodes.Unlock()
	n, err := s.resolveLocked(st, req.Id)
	if err != nil {
		return nil, err
	}
	if req.Availability != pb.Availability_AVAILABILITY_UNSPECIFIED {
		n.Availability = req.Availability
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range req.LabelAdd {
		n.Labels[k] = v
	}
	for _, k := range req.LabelRm {
		delete(n.Labels, k)
	}
	n.Updated = timestampNow(s)
	if err := nodeSave(ctx, st.leadership, n); err != nil {
		return nil, err
	}
	return s.view(ctx, st, n.Id)
}

func (m *managementServer) ApproveNode(ctx context.Context, req *pb.NodeRequest) (*pb.NodeView, error) {
	s := m.s
	st, err := s.leaderFor()
	if err != nil {
		return nil, err
	}
	st.muNodes.Lock()
	err = func() error {
		n, err := s.resolveLocked(st, req.Id)
		if err != nil {
			return err
		}
		req.Id = n.Id
		if n.State != pb.NodeState_NODE_STATE_PENDING {
			return fmt.Errorf("%w: node %s is %s, not pending: it was approved already, or never waited for approval; nothing changed", ErrExists, n.Id, stateWord(n.State))
		}
		n.State = pb.NodeState_NODE_STATE_UP
		n.Roles = []pb.Role{pb.Role_ROLE_WORKER}
		n.Updated = timestampNow(s)
		// A node that joined with the manager token becomes a consensus
		// member, as if it had joined now: the approval records that, and
		// the manager-approvals loop promotes it once it is ready.
		return nodeApprove(ctx, st.leadership, n, n.JoinedAs == "manager")
	}()
	st.muNodes.Unlock()
	if err != nil {
		return nil, err
	}
	return s.view(ctx, st, req.Id)
}

func (m *managementServer) RemoveNode(ctx context.Context, req *pb.RemoveNodeRequest) (*pb.RemoveNodeResponse, error) {
	s := m.s
	st, err := s.leaderFor()
	if err != nil {
		return nil, err
	}
	st.muNodes.Lock()
	defer st.muNodes.Unlock()
	n, err := s.resolveLocked(st, req.Id)
	if err != nil {
		return nil, err
	}
	ms, err := s.observeMembership(ctx, st)
	if err != nil {
		return nil, err
	}
	mem, member := ms.memberOf[n.Id]
	consensusNode := member || hasRole(n, pb.Role_ROLE_CONSENSUS)
	if n.Id == s.cfg.NodeID {
		return nil, fmt.Errorf("%w: node %s runs the curator leader: demote it first (`curator node demote %s`); the next leader can then remove it", ErrPrecondition, n.Id, n.Id)
	}
	if !req.Force {
		if n.State == pb.NodeState_NODE_STATE_UP && n.Status == pb.NodeStatus_NODE_STATUS_READY {
			return nil, fmt.Errorf("%w: node %s is ready: run `curator agent leave` on it, or stop it first; `--force` removes it anyway", ErrPrecondition, n.Id)
		}
		if consensusNode {
			return nil, fmt.Errorf("%w: node %s holds the consensus role: demote it first (`curator node demote %s`), or pass --force to remove its etcd member too", ErrPrecondition, n.Id, n.Id)
		}
	}
	if member {
		if err := s.checkRemoval(ms, mem, n.Id); err != nil {
			return nil, err
		}
		if !mem.IsLearner {
			if err := s.moveEtcdLeaderOff(ctx, st, ms, mem); err != nil {
				return nil, err
			}
		}
		if err := s.removeMemberAsLeader(ctx, st, mem.ID); err != nil {
			return nil, err
		}
	}
	if err := s.revokeEtcdCert(ctx, st, n.Consensus); err != nil {
		return nil, err
	}
	if err := nodeDestroy(ctx, st.leadership, n.Id); err != nil {
		return nil, err
	}
	st.hb.forget(n.Id)
	st.streams.drop(n.Id)
	s.logger(ctx).Info("removed node " + n.Id)
	return &pb.RemoveNodeResponse{Id: n.Id}, nil
}

func (m *managementServer) UpdateCluster(ctx context.Context, req *pb.UpdateClusterRequest) (*pb.ClusterInfo, error) {
	s := m.s
	st, err := s.leaderFor()
	if err != nil {
		return nil, err
	}
	if req.MaxVoters != nil {
		if err := checkMaxVoters(*req.MaxVoters); err != nil {
			return nil, err
		}
	}
	err = func() error {
		st.muNodes.Lock()
		defer st.muNodes.Unlock()
		cs, err := clusterLoad(ctx, s.cfg.Etcd)
		if err != nil {
			return err
		}
		if req.MaxVoters != nil {
			ms, err := s.observeMembership(ctx, st)
			if err != nil {
				return err
			}
			if int(*req.MaxVoters) < len(ms.members) {
				return fmt.Errorf("%w: there are %d consensus members already: demote some before lowering the limit to %d", ErrPrecondition, len(ms.members), *req.MaxVoters)
			}
			cs.MaxVoters = *req.MaxVoters
		}
		if req.RequireApproval != nil {
			cs.RequireApproval = *req.RequireApproval
		}
		return clusterSave(ctx, st.leadership, cs)
	}()
	if err != nil {
		return nil, err
	}
	return m.GetClusterInfo(ctx, &pb.ClusterInfoRequest{})
}

// Leave: the calling node leaves. A manager is demoted first, with the
// guards; when it is the leader it hands over, and the node calls again.
func (c *curatorServer) Leave(ctx context.Context, req *pb.NodeLeaveRequest) (*pb.NodeLeaveResponse, error) {
	s := c.s
	st, err := s.leaderFor()
	if err != nil {
		return nil, err
	}
	id := identityFrom(ctx).nodeID
	st.muNodes.Lock()
	defer st.muNodes.Unlock()
	shared := st.reg.node(id)
	if shared == nil {
		return nil, fmt.Errorf("node %s: %w", id, ErrNotFound)
	}
	n := cloneNode(shared)
	ms, err := s.observeMembership(ctx, st)
	if err != nil {
		return nil, err
	}
	mem, member := ms.memberOf[id]
	if member || hasRole(n, pb.Role_ROLE_CONSENSUS) {
		voters := 0
		for _, m := range ms.members {
			if !m.IsLearner {
				voters++
			}
		}
		if member && !mem.IsLearner && voters == 1 {
			if !req.Force {
				return nil, fmt.Errorf("%w: node %s is the last manager: leaving destroys the cluster, its %d node records, CA and join tokens; pass --force to do it anyway", ErrPrecondition, id, st.reg.count())
			}
			// The last manager leaves with --force: the cluster goes with
			// it. Nothing to hand over; the node wipes itself.
			return &pb.NodeLeaveResponse{Outcome: "left", Message: fmt.Sprintf("node %s was the last manager: the cluster is destroyed", id)}, nil
		}
		outcome, err := s.demote(ctx, st, n)
		if err != nil {
			return nil, err
		}
		if outcome == handedOver {
			return &pb.NodeLeaveResponse{Outcome: "demoting", Message: "this node led the curators: it resigned, and the next leader finishes its demotion"}, nil
		}
	}
	if err := nodeDestroy(ctx, st.leadership, id); err != nil {
		return nil, err
	}
	st.hb.forget(id)
	st.streams.drop(id)
	return &pb.NodeLeaveResponse{Outcome: "left", Message: fmt.Sprintf("node %s left the cluster", id)}, nil
}
