package curator

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// managementServer is the operators' API, served by the leader.
type managementServer struct {
	pb.UnimplementedManagementServer
	s *Service
}

// clusterView is one consistent look at the cluster for the read calls.
type clusterView struct {
	// nodes is every node; membership the nodes that matter to etcd's
	// membership (see observeMembership).
	nodes      []*pb.Node
	membership []*pb.Node
	members    []consensus.Member
	// memberOf maps node IDs to their etcd member.
	memberOf   map[string]consensus.Member
	etcdLeader uint64
}

// observe reads the registry view and etcd's members. The nodes are the
// view's, shared: read only.
func (s *Service) observe(ctx context.Context, st *leaderState) (*clusterView, error) {
	ms, err := s.observeMembership(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("list etcd members: %w", err)
	}
	v := &clusterView{nodes: st.reg.nodes(), membership: ms.nodes, members: ms.members, memberOf: ms.memberOf}
	if len(s.cfg.Etcd.Endpoints()) > 0 {
		if st, err := s.cfg.Etcd.Status(ctx, s.cfg.Etcd.Endpoints()[0]); err == nil {
			v.etcdLeader = st.Leader
		}
	}
	return v, nil
}

// managerStatus is what `node ls` shows in MANAGER STATUS.
func (s *Service) managerStatus(v *clusterView, n *pb.Node) pb.ManagerStatus {
	m, member := v.memberOf[n.Id]
	switch {
	case !member && !hasRole(n, pb.Role_ROLE_CONSENSUS):
		return pb.ManagerStatus_MANAGER_STATUS_NONE
	case member && m.IsLearner:
		return pb.ManagerStatus_MANAGER_STATUS_LEARNER
	case member && n.Id == s.cfg.NodeID:
		return pb.ManagerStatus_MANAGER_STATUS_LEADER
	case member && n.Status == pb.NodeStatus_NODE_STATUS_READY:
		return pb.ManagerStatus_MANAGER_STATUS_REACHABLE
	}
	return pb.ManagerStatus_MANAGER_STATUS_UNREACHABLE
}

func (s *Service) nodeView(v *clusterView, st *leaderState, n *pb.Node) *pb.NodeView {
	nv := &pb.NodeView{Node: n, ManagerStatus: s.managerStatus(v, n)}
	if last, ok := st.hb.get(n.Id); ok {
		nv.LastHeartbeat = timestamppb.New(last)
	}
	// Join parameters carry certificates: not for listing. The record is
	// the registry's: change a copy.
	if n.Consensus != nil {
		c := proto.Clone(n).(*pb.Node)
		c.Consensus = &pb.ConsensusJoin{MemberId: n.Consensus.MemberId, EtcdClusterId: n.Consensus.EtcdClusterId}
		nv.Node = c
	}
	return nv
}

// Pages of ListNodes.
const (
	DefaultListPageSize = 2000
	MaxListPageSize     = 5000
)

// ListNodes answers one page of nodes in ID order; the page token is the
// last ID of the page before.
func (m *managementServer) ListNodes(ctx context.Context, req *pb.ListNodesRequest) (*pb.ListNodesResponse, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	v, err := m.s.observe(ctx, st)
	if err != nil {
		return nil, err
	}
	size := int(req.PageSize)
	if size == 0 {
		size = DefaultListPageSize
	}
	size = min(size, MaxListPageSize)
	nodes := v.nodes
	if req.PageToken != "" {
		nodes = nodes[sort.Search(len(nodes), func(i int) bool { return nodes[i].Id > req.PageToken }):]
	}
	resp := &pb.ListNodesResponse{}
	if len(nodes) > size {
		nodes = nodes[:size]
		resp.NextPageToken = nodes[size-1].Id
	}
	resp.Nodes = make([]*pb.NodeView, 0, len(nodes))
	for _, n := range nodes {
		resp.Nodes = append(resp.Nodes, m.s.nodeView(v, st, n))
	}
	return resp, nil
}

func (m *managementServer) GetNode(ctx context.Context, req *pb.GetNodeRequest) (*pb.NodeView, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	v, err := m.s.observe(ctx, st)
	if err != nil {
		return nil, err
	}
	n, err := nodeResolve(v.nodes, req.Id)
	if err != nil {
		return nil, err
	}
	return m.s.nodeView(v, st, n), nil
}

func (m *managementServer) GetClusterInfo(ctx context.Context, _ *pb.ClusterInfoRequest) (*pb.ClusterInfo, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	cs, err := clusterLoad(ctx, m.s.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	v, err := m.s.observe(ctx, st)
	if err != nil {
		return nil, err
	}
	info := &pb.ClusterInfo{
		ClusterId:       cs.ClusterId,
		Leader:          m.s.cfg.NodeID,
		MaxVoters:       cs.MaxVoters,
		RequireApproval: cs.RequireApproval,
		Managers:        slices.Clone(st.reg.managerList()),
		Version:         m.s.cfg.Version,
		Voters:          []string{},
		Learners:        []string{},
	}
	byID := map[string]*pb.Node{}
	info.Names = map[string]string{}
	for _, n := range v.membership {
		byID[n.Id] = n
		if hasRole(n, pb.Role_ROLE_CONSENSUS) || v.memberOf[n.Id].ID != 0 {
			info.Names[n.Id] = n.Name
		}
	}
	healthy := 0
	for id, mem := range v.memberOf {
		if mem.IsLearner {
			info.Learners = append(info.Learners, id)
			continue
		}
		info.Voters = append(info.Voters, id)
		if n := byID[id]; id == m.s.cfg.NodeID || (n != nil && n.Status == pb.NodeStatus_NODE_STATUS_READY) {
			healthy++
		}
		if mem.ID == v.etcdLeader {
			info.EtcdLeader = id
		}
	}
	slices.Sort(info.Voters)
	slices.Sort(info.Learners)
	info.QuorumHealthy = healthy >= len(info.Voters)/2+1
	if len(v.members) != len(v.memberOf) {
		info.Warnings = append(info.Warnings, fmt.Sprintf("%d etcd member(s) belong to no known node", len(v.members)-len(v.memberOf)))
	}
	if n := len(info.Voters); n > 1 && n%2 == 0 {
		info.Warnings = append(info.Warnings, fmt.Sprintf("%d voters: an even number tolerates no more failures than %d; promote or demote one manager", n, n-1))
	}
	if w := maxVotersWarning(cs.MaxVoters); w != "" {
		info.Warnings = append(info.Warnings, w)
	}
	if !info.QuorumHealthy {
		info.Warnings = append(info.Warnings, fmt.Sprintf("only %d of %d voters are healthy: one more failure may lose quorum", healthy, len(info.Voters)))
	}
	return info, nil
}

// parseTokenRole checks the role argument of the token calls.
func parseTokenRole(role string) (string, error) {
	switch r := strings.ToLower(strings.TrimSpace(role)); r {
	case "worker", "manager":
		return r, nil
	}
	return "", fmt.Errorf("%w: token role must be worker or manager, not %q", ErrInvalid, role)
}

func (m *managementServer) GetToken(ctx context.Context, req *pb.GetTokenRequest) (*pb.TokenResponse, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	role, err := parseTokenRole(req.Role)
	if err != nil {
		return nil, err
	}
	cs, err := clusterLoad(ctx, m.s.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	secret := cs.WorkerTokenSecret
	if role == "manager" {
		secret = cs.ManagerTokenSecret
	}
	return &pb.TokenResponse{Token: pki.Token{CAFingerprint: pki.Fingerprint(st.pki.CA.Cert), Secret: secret}.String()}, nil
}

// RotateToken replaces a token's secret. The old one is refused from the
// next Register on; nodes that joined with it hold certificates and are
// not affected.
func (m *managementServer) RotateToken(ctx context.Context, req *pb.RotateTokenRequest) (*pb.TokenResponse, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	role, err := parseTokenRole(req.Role)
	if err != nil {
		return nil, err
	}
	tok, err := pki.NewToken(st.pki.CA.Cert)
	if err != nil {
		return nil, err
	}
	st.muNodes.Lock()
	defer st.muNodes.Unlock()
	cs, err := clusterLoad(ctx, m.s.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	if role == "manager" {
		cs.ManagerTokenSecret = tok.Secret
	} else {
		cs.WorkerTokenSecret = tok.Secret
	}
	if err := clusterSave(ctx, st.leadership, cs); err != nil {
		return nil, err
	}
	m.s.logger(ctx).Info("rotated join token", zap.String("role", role))
	return &pb.TokenResponse{Token: tok.String()}, nil
}

// ListEvents returns what the loops did, oldest first.
func (m *managementServer) ListEvents(ctx context.Context, req *pb.ListEventsRequest) (*pb.ListEventsResponse, error) {
	if _, err := m.s.leaderFor(); err != nil {
		return nil, err
	}
	events, err := eventList(ctx, m.s.cfg.Etcd, int64(req.Limit))
	if err != nil {
		return nil, err
	}
	return &pb.ListEventsResponse{Events: events}, nil
}
