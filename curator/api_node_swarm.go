package curator

import (
	"context"
	"fmt"
	"regexp"
	"slices"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
	"go.uber.org/zap"

	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// The node API's half of the Swarm flavor (docs/architecture.md, "The
// swarm flavor"): an agent reports the Swarm node ID of its engine, and
// answers a join request with the worker join token and the managers'
// addresses it asks for here. The token is handed to the one node whose
// record carries a request, over its mutual-TLS session, and never kept in
// a record.

// swarmNodeIDPattern is what a Swarm node ID looks like (25 lowercase
// letters and digits; a little room either way).
var swarmNodeIDPattern = regexp.MustCompile(`^[a-z0-9]{10,64}$`)

// ReportSwarmNode records the Swarm node ID of the calling node's engine.
// A new ID clears the node's join request: the request is answered.
func (a *nodeAPI) ReportSwarmNode(ctx context.Context, req *pb.ReportSwarmNodeRequest) (*pb.ReportSwarmNodeResponse, error) {
	st, err := a.s.leaderFor()
	if err != nil {
		return nil, err
	}
	if req.Left {
		return a.reportSwarmLeft(ctx, st)
	}
	if !swarmNodeIDPattern.MatchString(req.SwarmNodeId) {
		return nil, fmt.Errorf("%w: %s is not a Swarm node ID (its engine's `docker info` shows it as NodeID)", spec.ErrInvalid, spec.QuoteShort(req.SwarmNodeId))
	}
	id := identityFrom(ctx).nodeID
	shared, unlock, err := st.Records.LockCaller(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if shared.SwarmNodeId == req.SwarmNodeId {
		return &pb.ReportSwarmNodeResponse{}, nil
	}
	for _, o := range st.Reg.Nodes() {
		if o.Id != id && o.SwarmNodeId == req.SwarmNodeId {
			return nil, fmt.Errorf("%w: Swarm node %s is node %s's: two nodes cannot share a Docker engine; give each node its own with --docker-socket", spec.ErrExists, req.SwarmNodeId, o.Id)
		}
	}
	n := store.CloneNode(shared)
	n.SwarmNodeId = req.SwarmNodeId
	n.SwarmJoinRequested = false
	n.Updated = st.Events.Timestamp()
	if err := store.NodeSave(ctx, st.Lead.Fence, n); err != nil {
		return nil, err
	}
	a.s.logger(ctx).Info("swarm node reported", zap.String("node", id), zap.String("swarm_node", req.SwarmNodeId), zap.String("was", shared.SwarmNodeId))
	return &pb.ReportSwarmNodeResponse{}, nil
}

// reportSwarmLeft: the calling node's engine left the Swarm, as its
// record asked; its Swarm node ID is cleared, which tells the group loop
// its machine may go (leaveSwarmFirst).
func (a *nodeAPI) reportSwarmLeft(ctx context.Context, st *leader.State) (*pb.ReportSwarmNodeResponse, error) {
	id := identityFrom(ctx).nodeID
	shared, unlock, err := st.Records.LockCaller(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if shared.SwarmLeaveRequested == nil {
		return nil, fmt.Errorf("%w: node %s's record does not ask it to leave the Swarm: join its engine again (`docker swarm join`), or let the leader ask it to", spec.ErrPrecondition, id)
	}
	if shared.SwarmNodeId == "" {
		return &pb.ReportSwarmNodeResponse{}, nil
	}
	n := store.CloneNode(shared)
	n.SwarmNodeId = ""
	n.Updated = st.Events.Timestamp()
	if err := store.NodeSave(ctx, st.Lead.Fence, n); err != nil {
		return nil, err
	}
	a.s.logger(ctx).Info("swarm node left", zap.String("node", id), zap.String("was", shared.SwarmNodeId))
	return &pb.ReportSwarmNodeResponse{}, nil
}

// SwarmJoin hands the calling node, whose record carries a join request,
// the worker join token and the reachable Swarm managers' addresses,
// read through this curator's engine.
func (a *nodeAPI) SwarmJoin(ctx context.Context, _ *pb.SwarmJoinRequest) (*pb.SwarmJoinResponse, error) {
	st, err := a.s.leaderFor()
	if err != nil {
		return nil, err
	}
	id := identityFrom(ctx).nodeID
	n := st.Reg.Node(id)
	if n == nil {
		return nil, fmt.Errorf("node %s: %w", id, spec.ErrNotFound)
	}
	if !n.SwarmJoinRequested {
		return nil, fmt.Errorf("%w: node %s has no Swarm join request: the leader asks a node to join when it is not in the Swarm", spec.ErrPrecondition, id)
	}
	if on, err := st.Swarm.On(ctx); err != nil || !on {
		if err == nil {
			err = fmt.Errorf("%w: the cluster's Swarm flavor is off (turn it on with `curator cluster update --swarm`)", spec.ErrPrecondition)
		}
		return nil, err
	}
	if st.Cfg.Docker == nil {
		return nil, leader.ErrNoEngine
	}
	ctx, cancel := context.WithTimeout(ctx, st.Cfg.SwarmTimeout)
	defer cancel()
	sw, err := st.Cfg.Docker.SwarmInspect(ctx, client.SwarmInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("read the Swarm's join token through this curator's engine: %w", err)
	}
	list, err := st.Cfg.Docker.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the Swarm's nodes: %w", err)
	}
	resp := &pb.SwarmJoinResponse{WorkerToken: sw.Swarm.JoinTokens.Worker}
	for _, sn := range list.Items {
		if m := sn.ManagerStatus; m != nil && m.Reachability == swarm.ReachabilityReachable && m.Addr != "" {
			if m.Leader {
				resp.ManagerAddrs = slices.Insert(resp.ManagerAddrs, 0, m.Addr)
				continue
			}
			resp.ManagerAddrs = append(resp.ManagerAddrs, m.Addr)
		}
	}
	if len(resp.ManagerAddrs) == 0 {
		return nil, fmt.Errorf("%w: the Swarm has no reachable manager to join through: wait until it has", spec.ErrPrecondition)
	}
	return resp, nil
}
