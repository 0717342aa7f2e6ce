package curator

import (
	"context"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// observeMembership reads etcd's members and, from the registry view,
// the nodes that matter to membership: those that hold, held or hand back
// the consensus role, and those the members belong to. A fleet's workers
// are not read at all. The members' nodes this leadership does not vouch
// for (decide.Vouched: recorded ready, neither heard nor judged) are
// Unvouched: no removal counts on them. The voters etcd does not hear
// from now (consensus.Hearer, each member asked within a bound) are
// Unheard: no removal counts on them either, and none takes etcd
// leadership.
func (st *leaderState) observeMembership(ctx context.Context) (*decide.Membership, error) {
	members, err := consensus.Members(ctx, st.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	ms := decide.NewMembership(st.cfg.NodeID, members, registryMembers{st.reg}, st.beatingNow)
	h := st.hearer.Hear(ctx, members)
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
			last, seen := st.hb.get(id)
			if !decide.Vouched(n, last, seen, st.since, st.cfg.NodeID) {
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
