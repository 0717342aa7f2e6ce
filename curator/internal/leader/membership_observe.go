package leader

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/internal/faults"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/supervisor"
)

// members is etcd's membership as a leadership sees and changes it: the
// snapshot every membership decision reads (observe), and the removal of
// a member (remove), fenced.
type members struct {
	lead   *Leadership
	cfg    *Config
	reg    *store.Registry
	hb     *heartbeats
	hearer *consensus.Hearer
	// changes wakes the membership loops when the local etcd member
	// applies a change of the membership.
	changes memberChanges
}

// memberChanges wakes each loop that decides on the membership when the
// local etcd member applies a change of it (Config.MembershipChanges):
// etcd's member list has no watch, and the loops' resync would find the
// change only at SyncInterval.
type memberChanges struct {
	mu    sync.Mutex
	kicks []chan struct{}
}

// subscribe is a loop's kick: it fires after each change.
func (c *memberChanges) subscribe() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{}, 1)
	c.kicks = append(c.kicks, ch)
	return ch
}

// changed kicks every loop that subscribed.
func (c *memberChanges) changed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.kicks {
		supervisor.Kick(ch)
	}
}

// follow runs Config.MembershipChanges for the leadership, if set: a
// runnable of State.Run. With PollOnly (a fixed poll) it waits only.
func (mb *members) follow(ctx context.Context) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	if mb.cfg.MembershipChanges != nil && !mb.cfg.PollOnly {
		mb.cfg.MembershipChanges(ctx, mb.changes.changed)
	}
	<-ctx.Done()
	return ctx.Err()
}

// locked makes a loop's tick observe the membership with muNodes held, so
// that no other change of a node comes between what the loop decided on
// and its act, and hand the snapshot to tick.
func (mb *members) locked(tick func(ctx context.Context, ms *decide.Membership) (loopResult, error)) func(context.Context) (loopResult, error) {
	return func(ctx context.Context) (loopResult, error) {
		mb.lead.MuNodes.Lock()
		defer mb.lead.MuNodes.Unlock()
		ms, err := mb.Observe(ctx)
		if err != nil {
			return loopResult{}, err
		}
		return tick(ctx, ms)
	}
}

// ObserveLocked observes the membership, taking muNodes for the read
// only (a loop that does not change membership with it).
func (mb *members) ObserveLocked(ctx context.Context) (*decide.Membership, error) {
	mb.lead.MuNodes.Lock()
	defer mb.lead.MuNodes.Unlock()
	return mb.Observe(ctx)
}

// Observe is the membership snapshot: what gather
// reads, built by decide.BuildMembership, the one builder the decide
// tables and the removal fuzz property use too. The members' nodes this
// leadership does not vouch for (decide.Vouched) are Unvouched, and the
// voters etcd does not hear from now are Unheard: no removal counts on
// either, and no Unheard voter takes etcd leadership.
func (mb *members) Observe(ctx context.Context) (*decide.Membership, error) {
	in, err := mb.gather(ctx, true)
	if err != nil {
		return nil, err
	}
	return decide.BuildMembership(in), nil
}

// ObserveListed is the snapshot a read of nodes shows (MANAGER STATUS:
// who is a member, a learner, healthy by its heartbeats): Observe without
// asking each member whom etcd hears from now, which nothing a read shows
// depends on, and which costs a round trip to every member on each page
// of a listing. Every voter is then Unheard, so a decision made on it by
// mistake fails safe: no removal counts an Unheard voter healthy, and
// none takes etcd leadership.
func (mb *members) ObserveListed(ctx context.Context) (*decide.Membership, error) {
	in, err := mb.gather(ctx, false)
	if err != nil {
		return nil, err
	}
	return decide.BuildMembership(in), nil
}

// gather is all the reading of a membership snapshot, and all
// of its I/O: etcd's members; from the registry view, the nodes that
// matter to membership (those that hold, held or hand back the consensus
// role, and those the members belong to: a fleet's workers are not read
// at all); who etcd hears from now (consensus.Hearer, each member asked
// within a bound); and this leader's heartbeats of the members' nodes. The
// registry is read right after the members, so that the two match; the
// heartbeats and the time last, after the members' answers.
func (mb *members) gather(ctx context.Context, hear bool) (decide.MembershipInputs, error) {
	list, err := consensus.Members(ctx, mb.cfg.Etcd)
	if err != nil {
		return decide.MembershipInputs{}, err
	}
	in := decide.MembershipInputs{
		Self: mb.cfg.NodeID, Members: list, Nodes: mb.reg.MembershipNodes(),
		PeerNodes: map[string]string{}, Heartbeats: map[string]time.Time{},
		HeartbeatInterval: mb.cfg.HeartbeatInterval, LeaderSince: mb.hb.LeaderSince(),
	}
	have := make(map[string]bool, len(in.Nodes))
	for _, n := range in.Nodes {
		have[n.Id] = true
	}
	ids := make([]string, 0, len(list))
	for _, m := range list {
		id := m.NodeID
		if id == "" {
			if id = mb.reg.NodeByPeerURL(m.PeerURL); id != "" {
				in.PeerNodes[m.PeerURL] = id
			}
		}
		if id == "" {
			continue
		}
		ids = append(ids, id)
		if !have[id] {
			if n := mb.reg.Node(id); n != nil {
				// A member whose node lacks the role: a promote cut
				// short.
				in.Nodes = append(in.Nodes, n)
				have[id] = true
			}
		}
	}
	if hear {
		h := mb.hearer.Hear(ctx, list)
		in.EtcdHeard, in.EtcdLeader, in.Hearing = h.Heard, h.Leader, h.Why
	} else {
		in.Hearing = "not asked (a read's snapshot)"
	}
	for _, id := range ids {
		if last, ok := mb.hb.Get(id); ok {
			in.Heartbeats[id] = last
		}
	}
	in.Now = mb.cfg.Now()
	return in, nil
}

// remove takes member m out of etcd, which the caller has checked
// against the quorum guard: a voter hands etcd leadership on first.
func (mb *members) remove(ctx context.Context, ms *decide.Membership, m consensus.Member) error {
	faults.Pause(faults.BeforeMemberRemove)
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
