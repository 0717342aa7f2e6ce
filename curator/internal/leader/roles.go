package leader

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/internal/faults"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// Promote and demote: the membership changes the management API, the node
// API (Leave) and the loops share.
//
// Every membership change goes etcd first, role second (see decide.Sync).
// Promote adds a learner, then writes the role with the join parameters;
// the learner loop promotes it to voter once it has caught up. Demote marks
// the node as demoting, moves etcd leadership off it, removes the member,
// then clears the role and the mark. A crash anywhere leaves a state the
// next leader finishes: a member without the role (the sync grants it), a
// mark (the demotion loop finishes), a role without a member (the sync
// clears it).

// roles is the consensus role of nodes as a leadership changes it:
// promote, demote and remove, each etcd first and the role second, and
// with the Swarm flavor on, the Swarm before etcd.
type roles struct {
	lead    *Leadership
	cfg     *Config
	pki     *store.ClusterPKI
	records *records
	members *members
	swarm   *swarmEngine
	// resign gives the leadership up (a leader demoting its own node).
	resign func()
}

// Promote gives node n the consensus role: a learner first. Called with
// muNodes held.
func (ro *roles) Promote(ctx context.Context, n *pb.Node) error {
	if spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
		return nil // already promoted, or being promoted: the learner loop finishes
	}
	switch {
	case n.State == pb.NodeState_NODE_STATE_PENDING:
		return fmt.Errorf("%w: node %s is pending approval: approve it first with `curator node approve %s`", spec.ErrPrecondition, n.Id, n.Id)
	case n.State != pb.NodeState_NODE_STATE_UP:
		return fmt.Errorf("%w: node %s is %s", spec.ErrPrecondition, n.Id, n.State)
	case n.Status != pb.NodeStatus_NODE_STATUS_READY:
		return fmt.Errorf("%w: node %s is not ready (%s): a node that does not answer cannot catch up with etcd; bring it back first", spec.ErrPrecondition, n.Id, spec.StatusWord(n.Status.String()))
	}
	cs, err := store.ClusterLoad(ctx, ro.cfg.Etcd)
	if err != nil {
		return err
	}
	ms, err := ro.members.Observe(ctx)
	if err != nil {
		return err
	}
	if _, member := ms.MemberOf[n.Id]; member {
		return nil // the sync grants the role of a member
	}
	if uint32(len(ms.Members)+1) > cs.MaxVoters {
		return fmt.Errorf("%w: promoting node %s would make %d consensus members, past the limit of %d; raise it with `curator cluster update --max-voters N`", spec.ErrPrecondition, n.Id, len(ms.Members)+1, cs.MaxVoters)
	}
	pub, err := spec.ParsePublicKey(n.PublicKey)
	if err != nil {
		return err
	}
	ip, port, err := spec.SplitAddress(n.Address)
	if err != nil {
		return err
	}
	if err := ro.swarm.promoteFirst(ctx, cs, n); err != nil {
		return err
	}
	join, err := ro.AddConsensusMember(ctx, n.Id, pub, ip, port, spec.CertTTL(cs))
	if err != nil {
		return err
	}
	return ro.saveConsensusRole(ctx, n, join)
}

// DemoteOutcome says how far a demotion got; its String is DemoteNode's
// outcome, which the CLI prints.
type DemoteOutcome string

func (o DemoteOutcome) String() string { return string(o) }

const (
	Demoted    DemoteOutcome = "demoted"
	HandedOver DemoteOutcome = "handed-over"
	// LeftToLoops: with the Swarm flavor on, the node is marked demoting
	// but the Swarm did not take its manager's demotion yet; the swarm
	// sync and the demotions loop finish.
	LeftToLoops DemoteOutcome = "left-to-loops"
	// NotManager: the node holds no consensus role and is no etcd member;
	// nothing changed.
	NotManager DemoteOutcome = "not-a-manager"
	// PromotionCalledOff: the node was approved as a manager but not yet
	// promoted; it stays a worker.
	PromotionCalledOff DemoteOutcome = "promotion-called-off"
)

// Demote takes the consensus role from node n, with the guards. A leader
// demoting its own node marks it and resigns; the next leader finishes.
// Called with muNodes held.
func (ro *roles) Demote(ctx context.Context, n *pb.Node) (DemoteOutcome, error) {
	ms, err := ro.members.Observe(ctx)
	if err != nil {
		return "", err
	}
	m, member := ms.MemberOf[n.Id]
	if !member && !spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
		if n.State == pb.NodeState_NODE_STATE_PENDING {
			return "", fmt.Errorf("%w: node %s is pending approval and holds no role: there is nothing to demote; approve it with `curator node approve %s`, or refuse it with `curator node rm %s`",
				spec.ErrPrecondition, n.Id, n.Id, n.Id)
		}
		// An approved manager the manager-approvals loop has not promoted
		// yet: the operator's word wins.
		calledOff, err := store.PromotionDrop(ctx, ro.lead.Fence, n.Id)
		if err != nil {
			return "", err
		}
		if calledOff {
			return PromotionCalledOff, nil
		}
		return NotManager, nil
	}
	if member {
		if err := ms.CheckRemoval(m, n.Id); err != nil {
			return "", err
		}
	}
	// With the Swarm flavor on, the Swarm manager goes first.
	swarmManager, err := ro.swarm.managerToDemote(ctx, n)
	if err != nil {
		return "", err
	}
	if !n.Demoting {
		n.Demoting = true
		n.Updated = timestamppb.New(ro.cfg.Now())
		if err := store.NodeSave(ctx, ro.lead.Fence, n); err != nil {
			return "", err
		}
	}
	if n.Id == ro.cfg.NodeID {
		ro.resign()
		return HandedOver, nil
	}
	if err := ro.swarm.demoteFirst(ctx, swarmManager); errors.Is(err, errSwarm) {
		return LeftToLoops, nil
	} else if err != nil {
		return "", err
	}
	if _, err := ro.finishDemotion(ctx, ms, n); err != nil {
		return "", err
	}
	return Demoted, nil
}

// finishDemotion does the rest of a demotion of node n (marked demoting,
// not this curator's node), which the caller has checked against the
// quorum guard: etcd leadership off it, the member removed, then the role
// and the mark cleared.
func (ro *roles) finishDemotion(ctx context.Context, ms *decide.Membership, n *pb.Node) (string, error) {
	msg := fmt.Sprintf("node %s demoted: its etcd member was gone already; consensus role cleared", n.Id)
	if m, member := ms.MemberOf[n.Id]; member {
		msg = fmt.Sprintf("node %s demoted: etcd member %x removed, consensus role cleared", n.Id, m.ID)
		if err := ro.members.remove(ctx, ms, m); err != nil {
			return "", err
		}
		faults.Point(faults.DemoteAfterMemberRemove)
	}
	if err := ro.clearConsensusRole(ctx, n); err != nil {
		return "", err
	}
	return msg, nil
}

// clearConsensusRole takes the consensus role, the join parameters and
// the demotion mark from node n, whose etcd member is gone, and revokes its
// etcd certificate.
func (ro *roles) clearConsensusRole(ctx context.Context, n *pb.Node) error {
	n = store.CloneNode(n)
	if err := ro.records.revokeEtcdCert(ctx, n.Consensus); err != nil {
		return err
	}
	n.Roles = withoutRole(n.Roles, pb.Role_ROLE_CONSENSUS)
	n.Consensus = nil
	n.Demoting = false
	n.Updated = timestamppb.New(ro.cfg.Now())
	return store.NodeSave(ctx, ro.lead.Fence, n)
}

// grantConsensusRole gives node n, which is etcd member memberID already,
// the consensus role with its join parameters.
func (ro *roles) grantConsensusRole(ctx context.Context, ms *decide.Membership, n *pb.Node, memberID uint64) error {
	n = store.CloneNode(n)
	join, err := ro.consensusJoinFor(ctx, n, ms, memberID)
	if err != nil {
		return err
	}
	return ro.saveConsensusRole(ctx, n, join)
}

// saveConsensusRole writes node n (a copy to change) with the consensus
// role and the join parameters join.
func (ro *roles) saveConsensusRole(ctx context.Context, n *pb.Node, join *pb.ConsensusJoin) error {
	n.Roles = WithRole(n.Roles, pb.Role_ROLE_CONSENSUS)
	n.Consensus = join
	n.Updated = timestamppb.New(ro.cfg.Now())
	return store.NodeSave(ctx, ro.lead.Fence, n)
}

// AddConsensusMember adds a node to etcd as a learner and returns what it
// needs to start etcd.
func (ro *roles) AddConsensusMember(ctx context.Context, id string, pub any, ip net.IP, port int, ttl time.Duration) (*pb.ConsensusJoin, error) {
	etcdCert, err := ro.pki.EtcdCA.Issue(pki.CertRequest{PublicKey: pub, NodeID: id, Role: pki.RoleConsensus, IPs: []net.IP{ip}, Validity: ttl})
	if err != nil {
		return nil, fmt.Errorf("issue etcd certificate: %w", err)
	}
	params, memberID, err := ro.lead.AddLearner(ctx, id, consensus.PeerURL(ip.String(), port))
	if err != nil {
		return nil, fmt.Errorf("add %s to etcd as a learner: %w", id, err)
	}
	faults.Point(faults.PromoteAfterMemberAdd)
	crl, err := ro.records.currentCRL(ctx)
	if err != nil {
		return nil, err
	}
	join := &pb.ConsensusJoin{
		MemberId:      memberID,
		EtcdCert:      pki.EncodeCert(etcdCert),
		EtcdCa:        pki.EncodeCert(ro.pki.EtcdCA.Cert),
		EtcdClusterId: params.ClusterID,
		EtcdCrl:       crl,
	}
	for _, p := range params.Peers {
		join.Peers = append(join.Peers, &pb.ConsensusPeer{NodeId: p.NodeID, PeerUrl: p.PeerURL})
	}
	return join, nil
}

// consensusJoinFor builds the join parameters of node n, which is (or is
// about to be) etcd member memberID: the peers, and an etcd certificate for
// its key.
func (ro *roles) consensusJoinFor(ctx context.Context, n *pb.Node, ms *decide.Membership, memberID uint64) (*pb.ConsensusJoin, error) {
	pub, err := spec.ParsePublicKey(n.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Id, err)
	}
	ip, _, err := spec.SplitAddress(n.Address)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Id, err)
	}
	cs, err := store.ClusterLoad(ctx, ro.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	cert, err := ro.pki.EtcdCA.Issue(pki.CertRequest{PublicKey: pub, NodeID: n.Id, Role: pki.RoleConsensus, IPs: []net.IP{ip}, Validity: spec.CertTTL(cs)})
	if err != nil {
		return nil, fmt.Errorf("issue etcd certificate for %s: %w", n.Id, err)
	}
	crl, err := ro.records.currentCRL(ctx)
	if err != nil {
		return nil, err
	}
	join := &pb.ConsensusJoin{MemberId: memberID, EtcdCert: pki.EncodeCert(cert), EtcdCa: pki.EncodeCert(ro.pki.EtcdCA.Cert), EtcdCrl: crl}
	if eps := ro.cfg.Etcd.Endpoints(); len(eps) > 0 {
		if status, err := ro.cfg.Etcd.Status(ctx, eps[0]); err == nil {
			join.EtcdClusterId = status.Header.GetClusterId()
		}
	}
	for _, m := range ms.Members {
		join.Peers = append(join.Peers, &pb.ConsensusPeer{NodeId: ms.NodeOf[m.ID], PeerUrl: m.PeerURL})
	}
	return join, nil
}

func WithRole(roles []pb.Role, r pb.Role) []pb.Role {
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

// RemoveNode takes node n out of the cluster: its etcd member first
// (within the quorum guard), then its etcd certificate and its record
// (with the events evs that explain the removal, in one transaction),
// then, with the Swarm flavor on, its Swarm node if the Swarm shows it
// Down (removeSwarmNodeOf). The
// curator leader's own node is refused: it is demoted first, and the next
// leader removes it. Called with muNodes.
func (ro *roles) RemoveNode(ctx context.Context, n *pb.Node, evs ...*pb.Event) error {
	if n.Id == ro.cfg.NodeID {
		return fmt.Errorf("%w: node %s runs the curator leader: demote it first (`curator node demote %s`); the next leader can then remove it", spec.ErrPrecondition, n.Id, n.Id)
	}
	ms, err := ro.members.Observe(ctx)
	if err != nil {
		return err
	}
	if mem, member := ms.MemberOf[n.Id]; member {
		if err := ms.CheckRemoval(mem, n.Id); err != nil {
			return err
		}
		if err := ro.members.remove(ctx, ms, mem); err != nil {
			return err
		}
	}
	if err := ro.records.revokeEtcdCert(ctx, n.Consensus); err != nil {
		return err
	}
	if err := ro.records.DestroyNode(ctx, n.Id, evs...); err != nil {
		return err
	}
	ro.swarm.removeNodeOf(ctx, n)
	return nil
}
