package curator

import (
	"context"
	"fmt"
	"maps"

	"go.uber.org/zap"

	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// What an operator does to one node. Each call resolves the node, checks
// the guards (each refusal says why and what to do, and changes nothing),
// and acts under muNodes.

// changeNode resolves query in the registry view under muNodes, and hands
// change a copy of the node to change. It returns the copy.
func changeNode(st *leader.State, query string, change func(n *pb.Node) error) (*pb.Node, error) {
	st.Lead.MuNodes.Lock()
	defer st.Lead.MuNodes.Unlock()
	n, err := store.NodeResolve(st.Reg.Nodes(), query)
	if err != nil {
		return nil, err
	}
	n = store.CloneNode(n)
	return n, change(n)
}

// view renders a node for a reply.
func (m *managementAPI) view(ctx context.Context, st *leader.State, id string) (*pb.NodeView, error) {
	v, err := m.observe(ctx, st)
	if err != nil {
		return nil, err
	}
	if n := st.Reg.Node(id); n != nil {
		return v.nodeView(n), nil
	}
	return nil, fmt.Errorf("node %s: %w", id, spec.ErrNotFound)
}

// changeAndView changes one node (changeNode) and answers the node as it
// is then.
func (m *managementAPI) changeAndView(ctx context.Context, query string, change func(st *leader.State, n *pb.Node) error) (*pb.NodeView, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	n, err := changeNode(st, query, func(n *pb.Node) error { return change(st, n) })
	if err != nil {
		return nil, err
	}
	return m.view(ctx, st, n.Id)
}

func (m *managementAPI) PromoteNode(ctx context.Context, req *pb.NodeRequest) (*pb.NodeView, error) {
	return m.changeAndView(ctx, req.Id, func(st *leader.State, n *pb.Node) error { return st.Roles.Promote(ctx, n) })
}

func (m *managementAPI) DemoteNode(ctx context.Context, req *pb.NodeRequest) (*pb.DemoteResponse, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	var outcome leader.DemoteOutcome
	n, err := changeNode(st, req.Id, func(n *pb.Node) (err error) {
		outcome, err = st.Roles.Demote(ctx, n)
		return err
	})
	if err != nil {
		return nil, err
	}
	resp := &pb.DemoteResponse{Outcome: outcome.String()}
	if outcome == leader.Demoted {
		if resp.Node, err = m.view(ctx, st, n.Id); err != nil {
			return nil, err
		}
	} else {
		resp.Node = &pb.NodeView{Node: n}
	}
	return resp, nil
}

func (m *managementAPI) UpdateNode(ctx context.Context, req *pb.UpdateNodeRequest) (*pb.NodeView, error) {
	// The interceptor checked the request (CheckManagementRequest).
	return m.changeAndView(ctx, req.Id, func(st *leader.State, n *pb.Node) error {
		if req.Availability != pb.Availability_AVAILABILITY_UNSPECIFIED {
			n.Availability = req.Availability
		}
		before := maps.Clone(n.Labels)
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for k, v := range req.LabelAdd {
			n.Labels[k] = v
		}
		for _, k := range req.LabelRm {
			delete(n.Labels, k)
		}
		if err := spec.CheckNodeLabels(n.Name, before, n.Labels); err != nil {
			return err
		}
		n.Updated = st.Events.Timestamp()
		return store.NodeSave(ctx, st.Lead.Fence, n)
	})
}

func (m *managementAPI) ApproveNode(ctx context.Context, req *pb.NodeRequest) (*pb.NodeView, error) {
	return m.changeAndView(ctx, req.Id, func(st *leader.State, n *pb.Node) error {
		if n.State != pb.NodeState_NODE_STATE_PENDING {
			return fmt.Errorf("%w: node %s is %s, not pending: it was approved already, or never waited for approval; nothing changed", spec.ErrExists, n.Id, spec.StateWord(n.State))
		}
		n.State = pb.NodeState_NODE_STATE_UP
		n.Roles = []pb.Role{pb.Role_ROLE_WORKER}
		n.Updated = st.Events.Timestamp()
		// A node that joined with the manager token becomes a consensus
		// member, as if it had joined now: the approval records that, and
		// the manager-approvals loop promotes it once it is ready.
		return store.NodeApprove(ctx, st.Lead.Fence, n, spec.JoinedAs(n) == spec.JoinManager)
	})
}

func (m *managementAPI) RemoveNode(ctx context.Context, req *pb.RemoveNodeRequest) (*pb.RemoveNodeResponse, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	n, err := changeNode(st, req.Id, func(n *pb.Node) error { return m.remove(ctx, st, n, req.Force) })
	if err != nil {
		return nil, err
	}
	return &pb.RemoveNodeResponse{Id: n.Id}, nil
}

// remove takes node n out of the cluster: its etcd member (within the
// quorum guard), its etcd certificate and its record. Called with muNodes.
func (m *managementAPI) remove(ctx context.Context, st *leader.State, n *pb.Node, force bool) error {
	ms, err := st.Members.Observe(ctx)
	if err != nil {
		return err
	}
	_, member := ms.MemberOf[n.Id]
	consensusNode := member || spec.HasRole(n, pb.Role_ROLE_CONSENSUS)
	if n.Id == st.Cfg.NodeID {
		return fmt.Errorf("%w: node %s runs the curator leader: demote it first (`curator node demote %s`); the next leader can then remove it", spec.ErrPrecondition, n.Id, n.Id)
	}
	if !force {
		if n.State == pb.NodeState_NODE_STATE_UP && n.Status == pb.NodeStatus_NODE_STATUS_READY {
			return fmt.Errorf("%w: node %s is ready: run `curator agent leave` on it, or stop it first; `--force` removes it anyway", spec.ErrPrecondition, n.Id)
		}
		if consensusNode {
			return fmt.Errorf("%w: node %s holds the consensus role: demote it first (`curator node demote %s`), or pass --force to remove its etcd member too", spec.ErrPrecondition, n.Id, n.Id)
		}
	}
	if err := st.Roles.RemoveNode(ctx, n); err != nil {
		return err
	}
	m.s.logger(ctx).Info("removed node", zap.String("node", n.Id), zap.Bool("force", force))
	return nil
}

func (m *managementAPI) UpdateCluster(ctx context.Context, req *pb.UpdateClusterRequest) (*pb.ClusterInfo, error) {
	s := m.s
	st, err := s.leaderFor()
	if err != nil {
		return nil, err
	}
	if req.MaxVoters != nil {
		if err := spec.CheckMaxVoters(*req.MaxVoters); err != nil {
			return nil, err
		}
	}
	if req.CertTtl != nil {
		if err := req.CertTtl.CheckValid(); err != nil {
			return nil, fmt.Errorf("%w: cert TTL: %v", spec.ErrInvalid, err)
		}
		if err := spec.CheckCertTTL(req.CertTtl.AsDuration()); err != nil {
			return nil, err
		}
	}
	err = func() error {
		st.Lead.MuNodes.Lock()
		defer st.Lead.MuNodes.Unlock()
		cs, err := store.ClusterLoad(ctx, s.cfg.Etcd)
		if err != nil {
			return err
		}
		if req.MaxVoters != nil {
			ms, err := st.Members.Observe(ctx)
			if err != nil {
				return err
			}
			if int(*req.MaxVoters) < len(ms.Members) {
				return fmt.Errorf("%w: there are %d consensus members already: demote some before lowering the limit to %d", spec.ErrPrecondition, len(ms.Members), *req.MaxVoters)
			}
			cs.MaxVoters = *req.MaxVoters
		}
		if req.RequireApproval != nil {
			cs.RequireApproval = *req.RequireApproval
		}
		if req.Swarm != nil {
			cs.Swarm = *req.Swarm
		}
		if req.CertTtl != nil {
			// Certificates issued from now on (joins, renewals) get the
			// new life; those out there keep theirs until their agents
			// renew them, at two thirds of their own life.
			cs.CertTtl = req.CertTtl
		}
		return store.ClusterSave(ctx, st.Lead.Fence, cs)
	}()
	if err != nil {
		return nil, err
	}
	if req.Swarm != nil {
		// The swarm sync acts on the mode at once, not at its next
		// periodic read (a minute): with every node's Swarm ID known
		// already, nothing else would wake it.
		supervisor.Kick(st.KickSwarm)
	}
	return m.GetClusterInfo(ctx, &pb.ClusterInfoRequest{})
}
