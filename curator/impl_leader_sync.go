package curator

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// The consensus sync loop: see decideSync for what it decides and why.

func (s *Service) syncLoop(st *leaderState) loopSpec {
	return loopSpec{
		name:        "consensus-sync",
		tick:        func(ctx context.Context) (loopResult, error) { return s.syncTick(ctx, st) },
		nodeChanges: membershipChange,
		resync:      s.cfg.SyncInterval,
		minGap:      s.cfg.MinActionGap,
	}
}

// membership is etcd's members and the nodes that matter to them, read
// together under muNodes.
type membership struct {
	nodes   []*pb.Node
	byID    map[string]*pb.Node
	members []consensus.Member
	// memberOf maps node IDs to members; a member that matches no node is
	// absent.
	memberOf map[string]consensus.Member
	// nodeOf maps member IDs to node IDs ("" when none matches).
	nodeOf map[uint64]string
}

// observeMembership reads etcd's members and, from the registry view,
// the nodes that matter to membership: those that hold, held or hand back
// the consensus role, and those the members belong to. A fleet's workers
// are not read at all. The nodes are the view's, shared: clone one before
// changing it.
func (s *Service) observeMembership(ctx context.Context, st *leaderState) (*membership, error) {
	members, err := consensus.Members(ctx, s.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	nodes := st.reg.membershipNodes()
	ms := &membership{nodes: nodes, byID: make(map[string]*pb.Node, len(nodes)), members: members,
		memberOf: map[string]consensus.Member{}, nodeOf: map[uint64]string{}}
	for _, n := range nodes {
		ms.byID[n.Id] = n
	}
	for _, m := range members {
		id := m.NodeID
		if id == "" {
			id = st.reg.nodeByPeerURL(m.PeerURL)
		}
		ms.nodeOf[m.ID] = id
		if id == "" {
			continue
		}
		ms.memberOf[id] = m
		if _, ok := ms.byID[id]; !ok {
			if n := st.reg.node(id); n != nil {
				// A member whose node lacks the role: a promote cut
				// short.
				ms.byID[id] = n
				ms.nodes = append(ms.nodes, n)
			}
		}
	}
	sort.Slice(ms.nodes, func(i, j int) bool { return ms.nodes[i].Id < ms.nodes[j].Id })
	return ms, nil
}

func (ms *membership) syncSnapshot(leader string) syncSnapshot {
	snap := syncSnapshot{leaderNodeID: leader}
	for _, n := range ms.nodes {
		snap.nodes = append(snap.nodes, syncNode{id: n.Id, hasConsensus: hasRole(n, pb.Role_ROLE_CONSENSUS)})
	}
	for _, m := range ms.members {
		snap.members = append(snap.members, syncMember{id: m.ID, nodeID: ms.nodeOf[m.ID], isLearner: m.IsLearner})
	}
	return snap
}

func (s *Service) syncTick(ctx context.Context, st *leaderState) (loopResult, error) {
	st.muNodes.Lock()
	defer st.muNodes.Unlock()
	ms, err := s.observeMembership(ctx, st)
	if err != nil {
		return loopResult{}, err
	}
	a := decideSync(ms.syncSnapshot(s.cfg.NodeID))
	if a == nil {
		return loopResult{}, nil
	}
	res := loopResult{action: a.kind.String(), nodeID: a.nodeID, reason: a.reason}
	switch a.kind {
	case syncRefuse:
		res.refused = true
		return res, nil
	case syncRemoveMember:
		// A voter of no node still votes: taking it out is held to the
		// same quorum guard as any removal, and etcd leadership moves off
		// it first.
		for _, m := range ms.members {
			if m.ID != a.memberID {
				continue
			}
			if err := s.checkRemoval(ms, m, a.nodeID); err != nil {
				res.refused = true
				res.reason = fmt.Sprintf("%s, but removing it now is unsafe: %v", a.reason, err)
				return res, nil
			}
			if !m.IsLearner {
				if err := s.moveEtcdLeaderOff(ctx, st, ms, m); err != nil {
					return res, err
				}
			}
		}
		if err := s.removeMemberAsLeader(ctx, st, a.memberID); err != nil {
			return res, err
		}
	case syncGrantRole:
		n := cloneNode(ms.byID[a.nodeID])
		join, err := s.consensusJoinFor(ctx, st, n, ms, a.memberID)
		if err != nil {
			return res, err
		}
		n.Roles = withRole(n.Roles, pb.Role_ROLE_CONSENSUS)
		n.Consensus = join
		n.Updated = timestampNow(s)
		if err := nodeSave(ctx, st.leadership, n); err != nil {
			return res, err
		}
	case syncClearRole:
		n := cloneNode(ms.byID[a.nodeID])
		if err := s.revokeEtcdCert(ctx, st, n.Consensus); err != nil {
			return res, err
		}
		n.Roles = withoutRole(n.Roles, pb.Role_ROLE_CONSENSUS)
		n.Consensus = nil
		n.Demoting = false
		n.Updated = timestampNow(s)
		if err := nodeSave(ctx, st.leadership, n); err != nil {
			return res, err
		}
	}
	return res, nil
}

// removeMemberAsLeader removes an etcd member. Membership changes cannot
// be part of a fenced transaction, so the fence is checked just before:
// a deposed leader stops here.
func (s *Service) removeMemberAsLeader(ctx context.Context, st *leaderState, memberID uint64) error {
	if _, err := st.txnAsLeader(ctx); err != nil {
		return err
	}
	return consensus.RemoveMember(ctx, s.cfg.Etcd, memberID)
}

// consensusJoinFor builds the join parameters of node n, which is (or is
// about to be) etcd member memberID: the peers, and an etcd certificate for
// its key.
func (s *Service) consensusJoinFor(ctx context.Context, st *leaderState, n *pb.Node, ms *membership, memberID uint64) (*pb.ConsensusJoin, error) {
	pub, err := parsePublicKey(n.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Id, err)
	}
	ip, _, err := SplitAddress(n.Address)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Id, err)
	}
	cert, err := st.pki.EtcdCA.Issue(pki.CertRequest{PublicKey: pub, NodeID: n.Id, Role: pki.RoleConsensus, IPs: []net.IP{ip}, Validity: NodeCertValidity})
	if err != nil {
		return nil, fmt.Errorf("issue etcd certificate for %s: %w", n.Id, err)
	}
	crl, err := s.currentCRL(ctx, st)
	if err != nil {
		return nil, err
	}
	join := &pb.ConsensusJoin{MemberId: memberID, EtcdCert: pki.EncodeCert(cert), EtcdCa: pki.EncodeCert(st.pki.EtcdCA.Cert), EtcdCrl: crl}
	if eps := s.cfg.Etcd.Endpoints(); len(eps) > 0 {
		if status, err := s.cfg.Etcd.Status(ctx, eps[0]); err == nil {
			join.EtcdClusterId = status.Header.GetClusterId()
		}
	}
	for _, m := range ms.members {
		join.Peers = append(join.Peers, &pb.ConsensusPeer{NodeId: ms.nodeOf[m.ID], PeerUrl: m.PeerURL})
	}
	return join, nil
}

func withRole(roles []pb.Role, r pb.Role) []pb.Role {
	if slices.Contains(roles, r) {
		return roles
	}
	out := append(slices.Clone(roles), r)
	slices.Sort(out)
	return out
}

func withoutRole(roles []pb.Role, r pb.Role) []pb.Role {
	return slices.DeleteFunc(slices.Clone(roles), func(x pb.Role) bool { return x == r })
}
