package curator

import (
	"context"
	"time"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/decide"
)

// observeMembership is the membership snapshot: what gatherMembership
// reads, built by decide.BuildMembership, the one builder the decide
// tables and the removal fuzz property use too. The members' nodes this
// leadership does not vouch for (decide.Vouched) are Unvouched, and the
// voters etcd does not hear from now are Unheard: no removal counts on
// either, and no Unheard voter takes etcd leadership.
func (st *leaderState) observeMembership(ctx context.Context) (*decide.Membership, error) {
	in, err := st.gatherMembership(ctx)
	if err != nil {
		return nil, err
	}
	return decide.BuildMembership(in), nil
}

// gatherMembership is all the reading of a membership snapshot, and all
// of its I/O: etcd's members; from the registry view, the nodes that
// matter to membership (those that hold, held or hand back the consensus
// role, and those the members belong to: a fleet's workers are not read
// at all); who etcd hears from now (consensus.Hearer, each member asked
// within a bound); and this leader's heartbeats of the members' nodes. The
// registry is read right after the members, so that the two match; the
// heartbeats and the time last, after the members' answers.
func (st *leaderState) gatherMembership(ctx context.Context) (decide.MembershipInputs, error) {
	members, err := consensus.Members(ctx, st.cfg.Etcd)
	if err != nil {
		return decide.MembershipInputs{}, err
	}
	in := decide.MembershipInputs{
		Self: st.cfg.NodeID, Members: members, Nodes: st.reg.MembershipNodes(),
		PeerNodes: map[string]string{}, Heartbeats: map[string]time.Time{},
		HeartbeatInterval: st.cfg.HeartbeatInterval, LeaderSince: st.since,
	}
	have := make(map[string]bool, len(in.Nodes))
	for _, n := range in.Nodes {
		have[n.Id] = true
	}
	ids := make([]string, 0, len(members))
	for _, m := range members {
		id := m.NodeID
		if id == "" {
			if id = st.reg.NodeByPeerURL(m.PeerURL); id != "" {
				in.PeerNodes[m.PeerURL] = id
			}
		}
		if id == "" {
			continue
		}
		ids = append(ids, id)
		if !have[id] {
			if n := st.reg.Node(id); n != nil {
				// A member whose node lacks the role: a promote cut
				// short.
				in.Nodes = append(in.Nodes, n)
				have[id] = true
			}
		}
	}
	h := st.hearer.Hear(ctx, members)
	in.EtcdHeard, in.EtcdLeader, in.Hearing = h.Heard, h.Leader, h.Why
	for _, id := range ids {
		if last, ok := st.hb.get(id); ok {
			in.Heartbeats[id] = last
		}
	}
	in.Now = st.cfg.Now()
	return in, nil
}
