package curator

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/internal/faults"
	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// managementAPI is the operators' API (curator.v1.Management), served by
// the leader: reads of nodes, the cluster and its events here; what an
// operator does to one node, and to the cluster's settings, in
// api_management_nodes.go. Each call acts through the leadership it finds
// (leaderFor).
type managementAPI struct {
	pb.UnimplementedManagementServer
	s *Service
	// stale: the views the fault point faults.ReadStale500ms serves.
	stale staleViews
}

// clusterView is one consistent look at the cluster for the read calls:
// every node, and the membership snapshot the loops decide on.
type clusterView struct {
	st    *leader.State
	nodes []*pb.Node
	ms    *decide.Membership
}

// read starts a read call: the leadership it is served under, and one
// look at the cluster.
func (m *managementAPI) read(ctx context.Context) (*clusterView, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	return m.observe(ctx, st)
}

// readNodes starts a read of node records (ListNodes, GetNode): the
// leadership, and a look at the cluster whose membership is etcd's member
// list without asking each member whom etcd hears from
// (Members.ObserveListed; a MANAGER STATUS needs no more, and etcd's
// leader, which that hearing finds, only cluster info shows): one etcd
// call a page of a listing, not one and a status of every member. Its
// nodes are read from the registry view as they are asked for (page),
// unless the stale-read fault point serves an old copy.
func (m *managementAPI) readNodes(ctx context.Context) (*clusterView, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	ms, err := st.Members.ObserveListed(ctx)
	if err != nil {
		return nil, fmt.Errorf("list etcd members: %w", err)
	}
	v := &clusterView{st: st, ms: ms}
	if faults.Armed(faults.ReadStale500ms) {
		v.nodes = m.stale.at(time.Now(), st.Reg.Nodes())
	}
	return v, nil
}

// page returns up to size nodes whose IDs sort after after, in ID order,
// and whether more follow.
func (v *clusterView) page(after string, size int) ([]*pb.Node, bool) {
	if v.nodes == nil {
		return v.st.Reg.NodesPage(after, size)
	}
	nodes := v.nodes
	if after != "" {
		nodes = nodes[sort.Search(len(nodes), func(i int) bool { return nodes[i].Id > after }):]
	}
	if len(nodes) > size {
		return nodes[:size], true
	}
	return nodes, false
}

// allNodes is every node of the view.
func (v *clusterView) allNodes() []*pb.Node {
	if v.nodes == nil {
		return v.st.Reg.Nodes()
	}
	return v.nodes
}

// observe reads the registry view and etcd's members. The nodes are the
// view's, shared: read only.
func (m *managementAPI) observe(ctx context.Context, st *leader.State) (*clusterView, error) {
	ms, err := st.Members.Observe(ctx)
	if err != nil {
		return nil, fmt.Errorf("list etcd members: %w", err)
	}
	v := &clusterView{st: st, nodes: st.Reg.Nodes(), ms: ms}
	if faults.Armed(faults.ReadStale500ms) {
		v.nodes = m.stale.at(time.Now(), v.nodes)
	}
	return v, nil
}

// managerStatus is what `node ls` shows in MANAGER STATUS.
func (v *clusterView) managerStatus(n *pb.Node) pb.ManagerStatus {
	m, member := v.ms.MemberOf[n.Id]
	switch {
	case !member && !spec.HasRole(n, pb.Role_ROLE_CONSENSUS):
		return pb.ManagerStatus_MANAGER_STATUS_NONE
	case member && m.IsLearner:
		return pb.ManagerStatus_MANAGER_STATUS_LEARNER
	case member && n.Id == v.ms.Self:
		return pb.ManagerStatus_MANAGER_STATUS_LEADER
	case member && v.ms.Healthy(m):
		return pb.ManagerStatus_MANAGER_STATUS_REACHABLE
	}
	return pb.ManagerStatus_MANAGER_STATUS_UNREACHABLE
}

// nodeView renders node n for a reply. n is the registry's: it is not
// changed.
func (v *clusterView) nodeView(n *pb.Node) *pb.NodeView {
	nv := &pb.NodeView{Node: n, ManagerStatus: v.managerStatus(n)}
	if last, seen := v.st.Heartbeats.Get(n.Id); seen {
		nv.LastHeartbeat = timestamppb.New(last)
	}
	shown := v.status(n)
	if sn, ok := v.st.Swarm.Seen.Get(n.SwarmNodeId); ok {
		nv.SwarmRole, nv.SwarmState = sn.Role(), string(sn.State)
	}
	// Join parameters carry certificates: not for listing. The record is
	// the registry's: change a copy.
	if n.Consensus != nil || shown != n.Status {
		c := proto.Clone(n).(*pb.Node)
		if n.Consensus != nil {
			c.Consensus = &pb.ConsensusJoin{MemberId: n.Consensus.MemberId, EtcdClusterId: n.Consensus.EtcdClusterId}
		}
		c.Status = shown
		nv.Node = c
	}
	return nv
}

// status is node n's status as a reply shows it (decide.ShownStatus):
// unknown for a record's "ready" this leadership has neither heard nor
// judged.
func (v *clusterView) status(n *pb.Node) pb.NodeStatus {
	last, seen := v.st.Heartbeats.Get(n.Id)
	return decide.ShownStatus(n, last, seen, v.st.Heartbeats.LeaderSince(), v.ms.Self)
}

// Pages of ListNodes: a page holds at most MaxListPageSize nodes and, past
// its first node, MaxListPageBytes of them, well within what a gRPC client
// takes by default (4 MiB): a fleet of nodes with many labels is listed
// in more pages, not refused.
const (
	DefaultListPageSize = 2000
	MaxListPageSize     = 5000
	MaxListPageBytes    = 2 << 20
)

// ListNodes answers one page of nodes in ID order; the page token is the
// last ID of the page before.
func (m *managementAPI) ListNodes(ctx context.Context, req *pb.ListNodesRequest) (*pb.ListNodesResponse, error) {
	v, err := m.readNodes(ctx)
	if err != nil {
		return nil, err
	}
	size := int(req.PageSize)
	if size == 0 {
		size = DefaultListPageSize
	}
	size = min(size, MaxListPageSize)
	nodes, more := v.page(req.PageToken, size)
	resp := &pb.ListNodesResponse{Nodes: make([]*pb.NodeView, 0, len(nodes))}
	bytes := 0
	for i, n := range nodes {
		view := v.nodeView(n)
		// A repeated field's element costs its size and a few bytes of
		// tag and length.
		size := proto.Size(view) + 8
		if i > 0 && bytes+size > MaxListPageBytes {
			more = true
			break
		}
		bytes += size
		resp.Nodes = append(resp.Nodes, view)
	}
	if more && len(resp.Nodes) > 0 {
		resp.NextPageToken = nodes[len(resp.Nodes)-1].Id
	}
	return resp, nil
}

func (m *managementAPI) GetNode(ctx context.Context, req *pb.GetNodeRequest) (*pb.NodeView, error) {
	v, err := m.readNodes(ctx)
	if err != nil {
		return nil, err
	}
	n, err := store.NodeResolve(v.allNodes(), req.Id)
	if err != nil {
		return nil, err
	}
	return v.nodeView(n), nil
}

func (m *managementAPI) GetClusterInfo(ctx context.Context, _ *pb.ClusterInfoRequest) (*pb.ClusterInfo, error) {
	v, err := m.read(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := store.ClusterLoad(ctx, m.s.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	info := &pb.ClusterInfo{
		ClusterId:       cs.ClusterId,
		Leader:          m.s.cfg.NodeID,
		MaxVoters:       cs.MaxVoters,
		RequireApproval: cs.RequireApproval,
		Swarm:           cs.Swarm,
		StorageVersion:  max(cs.StorageVersion, 1),
		CertTtl:         durationpb.New(spec.CertTTL(cs)),
		Managers:        slices.Clone(v.st.Reg.ManagerList()),
		Version:         m.s.cfg.Version,
		Voters:          []string{},
		Learners:        []string{},
	}
	ms := v.ms
	info.Names = map[string]string{}
	for _, n := range ms.Nodes {
		if _, member := ms.MemberOf[n.Id]; member || spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
			info.Names[n.Id] = n.Name
		}
	}
	// The releases from the registry, which follows the sessions' reports
	// (the membership snapshot may be a moment older).
	info.Releases = map[string]uint32{}
	var managerReleases []string
	for _, n := range v.st.Reg.Nodes() {
		info.Releases[n.Version]++
		if _, member := ms.MemberOf[n.Id]; member || spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
			managerReleases = append(managerReleases, n.Version)
		}
	}
	info.LowestManagerRelease = spec.LowestRelease(managerReleases)
	for id, mem := range ms.MemberOf {
		if mem.IsLearner {
			info.Learners = append(info.Learners, id)
			continue
		}
		info.Voters = append(info.Voters, id)
		// etcd's leader as it answered for itself in the snapshot's
		// hearing: no question of its own (a new leader's first answers
		// count).
		if mem.ID == ms.EtcdLeader {
			info.EtcdLeader = id
		}
	}
	slices.Sort(info.Voters)
	slices.Sort(info.Learners)
	q := ms.QuorumAfter(0, 0)
	info.QuorumHealthy = q.OK()
	if unknown := len(ms.Members) - len(ms.MemberOf); unknown > 0 {
		info.Warnings = append(info.Warnings, fmt.Sprintf("%d etcd member(s) belong to no known node", unknown))
	}
	if w := spec.EvenVotersWarning(len(info.Voters)); w != "" {
		info.Warnings = append(info.Warnings, w)
	}
	if w := spec.MaxVotersWarning(cs.MaxVoters); w != "" {
		info.Warnings = append(info.Warnings, w)
	}
	var voterDomains []string
	for _, id := range info.Voters {
		if n := v.st.Reg.Node(id); n != nil {
			voterDomains = append(voterDomains, n.Domain)
		} else {
			voterDomains = append(voterDomains, "")
		}
	}
	if w := decide.DomainsWarning(voterDomains); w != "" {
		info.Warnings = append(info.Warnings, w)
	}
	if !info.QuorumHealthy {
		info.Warnings = append(info.Warnings, fmt.Sprintf("only %d of %d voters are healthy: one more failure may lose quorum", q.Healthy, q.Voters))
	}
	return info, nil
}

// tokenCall starts a token call: the leadership, and the token asked for.
func (m *managementAPI) tokenCall(role string) (*leader.State, spec.JoinRole, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, "", err
	}
	r, err := spec.ParseJoinRole(role)
	return st, r, err
}

func (m *managementAPI) GetToken(ctx context.Context, req *pb.GetTokenRequest) (*pb.TokenResponse, error) {
	st, role, err := m.tokenCall(req.Role)
	if err != nil {
		return nil, err
	}
	cs, err := store.ClusterLoad(ctx, m.s.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	return &pb.TokenResponse{Token: pki.Token{CAFingerprint: pki.Fingerprint(st.PKI.CA.Cert), Secret: spec.TokenSecret(cs, role)}.String()}, nil
}

// RotateToken replaces a token's secret. The old one is refused from the
// next Register on; nodes that joined with it hold certificates and are
// not affected.
func (m *managementAPI) RotateToken(ctx context.Context, req *pb.RotateTokenRequest) (*pb.TokenResponse, error) {
	st, role, err := m.tokenCall(req.Role)
	if err != nil {
		return nil, err
	}
	tok, err := pki.NewToken(st.PKI.CA.Cert)
	if err != nil {
		return nil, err
	}
	st.Lead.MuNodes.Lock()
	defer st.Lead.MuNodes.Unlock()
	cs, err := store.ClusterLoad(ctx, m.s.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	if role == spec.JoinManager {
		cs.ManagerTokenSecret = tok.Secret
	} else {
		cs.WorkerTokenSecret = tok.Secret
	}
	if err := store.ClusterSave(ctx, st.Lead.Fence, cs); err != nil {
		return nil, err
	}
	m.s.logger(ctx).Info("rotated join token", zap.Stringer("role", role))
	return &pb.TokenResponse{Token: tok.String()}, nil
}

// newestMatching is the newest limit (0: all) of events, oldest first,
// that match selects.
func newestMatching(events []*pb.Event, match *spec.EventMatch, limit uint32) []*pb.Event {
	out := slices.DeleteFunc(events, func(e *pb.Event) bool { return !match.Match(e) })
	if limit > 0 && len(out) > int(limit) {
		out = out[len(out)-int(limit):]
	}
	return out
}

// ListEvents returns what the loops did, oldest first: the events the
// request's filter selects.
func (m *managementAPI) ListEvents(ctx context.Context, req *pb.ListEventsRequest) (*pb.ListEventsResponse, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	match := spec.NewEventMatch(req.Filter, st.Reg.Nodes())
	if match.All() {
		events, err := store.EventList(ctx, m.s.cfg.Etcd, int64(req.Limit))
		if err != nil {
			return nil, err
		}
		return &pb.ListEventsResponse{Events: events}, nil
	}
	// The newest limit of those selected: read them all (the history is
	// bounded, store.MaxEvents).
	events, err := store.EventList(ctx, m.s.cfg.Etcd, 0)
	if err != nil {
		return nil, err
	}
	return &pb.ListEventsResponse{Events: newestMatching(events, match, req.Limit)}, nil
}
