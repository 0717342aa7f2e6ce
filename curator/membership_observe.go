package curator

import (
	"context"
	"fmt"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// members is etcd's membership as a leadership sees and changes it: the
// snapshot every membership decision reads (observe), and the removal of
// a member (remove), fenced.
type members struct {
	lead   *leadership
	cfg    *Config
	reg    *store.Registry
	hb     *heartbeats
	hearer *consensus.Hearer
}

// locked makes a loop's tick observe the membership with muNodes held, so
// that no other change of a node comes between what the loop decided on
// and its act, and hand the snapshot to tick.
func (mb *members) locked(tick func(ctx context.Context, ms *decide.Membership) (loopResult, error)) func(context.Context) (loopResult, error) {
	return func(ctx context.Context) (loopResult, error) {
		mb.lead.muNodes.Lock()
		defer mb.lead.muNodes.Unlock()
		ms, err := mb.observe(ctx)
		if err != nil {
			return loopResult{}, err
		}
		return tick(ctx, ms)
	}
}

// observeLocked observes the membership, taking muNodes for the read
// only (a loop that does not change membership with it).
func (mb *members) observeLocked(ctx context.Context) (*decide.Membership, error) {
	mb.lead.muNodes.Lock()
	defer mb.lead.muNodes.Unlock()
	return mb.observe(ctx)
}

// observe reads etcd's members and, from the registry view,
// the nodes that matter to membership: those that hold, held or hand back
// the consensus role, and those the members belong to. A fleet's workers
// are not read at all. The members' nodes recorded ready that this
// leadership has neither heard nor judged (shownStatus: unknown) are
// Unvouched: no removal counts on them. The voters etcd does not hear
// from now (consensus.Hearer, each member asked within a bound) are
// Unheard: no removal counts on them either, and none takes etcd
// leadership.
func (mb *members) observe(ctx context.Context) (*decide.Membership, error) {
	list, err := consensus.Members(ctx, mb.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	ms := decide.NewMembership(mb.cfg.NodeID, list, registryMembers{mb.reg}, mb.hb.beatingNow)
	h := mb.hearer.Hear(ctx, list)
	ms.EtcdLeader, ms.Hearing = h.Leader, h.Why
	ms.Unheard = map[string]bool{}
	for _, m := range ms.Members {
		if id := ms.NodeOf[m.ID]; id != "" && !m.IsLearner && !h.Heard[m.ID] {
			ms.Unheard[id] = true
		}
	}
	ms.Unvouched = map[string]bool{}
	for id := range ms.MemberOf {
		if n := ms.ByID[id]; n != nil {
			last, seen := mb.hb.get(id)
			if shownStatus(n, last, seen, mb.hb.leaderSince(), mb.cfg.NodeID) == pb.NodeStatus_NODE_STATUS_UNKNOWN {
				ms.Unvouched[id] = true
			}
		}
	}
	return ms, nil
}

// registryMembers is the registry view as decide.NewMembership reads it.
type registryMembers struct{ reg *store.Registry }

func (r registryMembers) MembershipNodes() []*pb.Node   { return r.reg.MembershipNodes() }
func (r registryMembers) Node(id string) *pb.Node       { return r.reg.Node(id) }
func (r registryMembers) NodeByPeerURL(u string) string { return r.reg.NodeByPeerURL(u) }

// remove takes member m out of etcd, which the caller has checked
// against the quorum guard: a voter hands etcd leadership on first.
func (mb *members) remove(ctx context.Context, ms *decide.Membership, m consensus.Member) error {
	faultPause(FaultBeforeMemberRemove)
	if !m.IsLearner {
		if err := mb.moveLeaderOff(ctx, ms, m); err != nil {
			return err
		}
	}
	if err := mb.lead.RemoveMember(ctx, m.ID); err != nil {
		return err
	}
	// Its curator can no longer reach etcd to take its election key
	// away, and the other candidates queue behind that key until its lease
	// expires: take it away for it.
	if id := ms.NodeOf[m.ID]; id != "" {
		return store.ElectionKeysDrop(ctx, mb.lead.Fence, id)
	}
	return nil
}

// moveLeaderOff moves etcd leadership away from member m if it held
// it when ms was observed, to the voter ms.LeadershipTarget names: one
// etcd hears from now, never one that just died (a transfer to it would
// wait out its whole bound, and the removal after it would leave a dead
// voter in a quorum of two). With none, the change is refused at once.
func (mb *members) moveLeaderOff(ctx context.Context, ms *decide.Membership, m consensus.Member) error {
	if ms.EtcdLeader == 0 {
		return fmt.Errorf("%w: etcd leadership cannot be moved off node %s: %s; retry in a few seconds", spec.ErrPrecondition, ms.NodeOf[m.ID], ms.Hearing)
	}
	if ms.EtcdLeader != m.ID {
		return nil
	}
	to, err := ms.LeadershipTarget(m)
	if err != nil {
		return err
	}
	return mb.lead.MoveLeader(ctx, to.ID, mb.cfg.MoveLeaderTimeout)
}
