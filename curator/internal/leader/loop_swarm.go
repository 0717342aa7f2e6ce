package leader

import (
	"context"
	"errors"
	"fmt"

	"github.com/moby/moby/api/types/swarm"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/internal/faults"
	"github.com/curatorproject/curator/curator/internal/metrics"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// The swarm sync loop (docs/architecture.md, "The swarm flavor"): with the
// cluster's Swarm flavor on, the leader keeps the Docker Swarm's managers
// the consensus nodes. Each tick reads the Swarm's node list through the
// leader's own engine (a Swarm manager: the leader holds the consensus
// role), decides on one change (decide.Swarm, a pure function) and makes
// it.
//
// Why it is safe:
//   - Every Swarm write is fenced as a membership change is: the election
//     key must still hold this leadership's revision just before the call
//     (a Swarm call cannot be part of an etcd transaction). A deposed
//     leader stops there.
//   - Every change of the Swarm's managers is held to the Swarm's own
//     quorum (swarmQuorumAfter), on a node list read this tick; a list
//     that names no Swarm leader, or shares no node with the curator,
//     changes nothing.
//   - The order of a change makes a change cut short visible in the
//     Swarm's membership: a promotion changes Swarm first, a demotion
//     too, so the loop finishes either from what the Swarm shows (the
//     fault points swarm/after-promote and swarm/after-demote are the cuts
//     the tests make). The demotions loop waits for the Swarm demote.
//   - The leader never reaches into another node's engine: a node that is
//     not in the Swarm gets a join request in its record, which its agent
//     answers (joining as a worker, so a join never changes the Swarm's
//     quorum), and the Swarm node ID the agent reports is what ties a
//     node to its Swarm node.
//
// The decision and the act run under muNodes, which every change of
// roles holds (the management API's promote and demote change the Swarm
// too), on the registry and on a Swarm node list read under it. A first
// read happens before muNodes is taken (it may take up to SwarmTimeout),
// so that a tick with nothing to do does not hold the lock that long; a
// tick that would act reads again under the lock and decides again.

// swarmSnapshotOf is what decide.Swarm reads of the nodes (those that are
// up: a pending node is not the Swarm's yet) and of the Swarm.
func swarmSnapshotOf(self string, nodes []*pb.Node, seen []decide.SwarmNode, maxVoters int) decide.SwarmSnapshot {
	s := decide.SwarmSnapshot{Swarm: seen, MaxVoters: maxVoters}
	for _, n := range nodes {
		if n.State != pb.NodeState_NODE_STATE_UP {
			continue
		}
		s.Nodes = append(s.Nodes, decide.SwarmCuratorNode{
			ID:            n.Id,
			Consensus:     spec.HasRole(n, pb.Role_ROLE_CONSENSUS),
			Demoting:      n.Demoting,
			Ready:         decide.Ready(n, self),
			Refused:       n.Refused != "",
			SwarmID:       n.SwarmNodeId,
			JoinRequested: n.SwarmJoinRequested,
			Leaving:       n.SwarmLeaveRequested != nil,
			Availability:  swarmAvailabilityOf(n.Availability),
		})
	}
	return s
}

// swarmAvailabilityOf is availability a as Swarm names it ("": none).
func swarmAvailabilityOf(a pb.Availability) swarm.NodeAvailability {
	switch a {
	case pb.Availability_AVAILABILITY_ACTIVE:
		return swarm.NodeAvailabilityActive
	case pb.Availability_AVAILABILITY_PAUSE:
		return swarm.NodeAvailabilityPause
	case pb.Availability_AVAILABILITY_DRAIN:
		return swarm.NodeAvailabilityDrain
	}
	return ""
}

// swarmChange picks the node changes the swarm sync looks at.
func swarmChange(old, new *pb.Node) bool {
	if old == nil || new == nil {
		return true
	}
	return spec.HasRole(old, pb.Role_ROLE_CONSENSUS) != spec.HasRole(new, pb.Role_ROLE_CONSENSUS) ||
		old.Demoting != new.Demoting || old.Status != new.Status || old.State != new.State ||
		old.Refused != new.Refused || old.SwarmNodeId != new.SwarmNodeId ||
		old.SwarmJoinRequested != new.SwarmJoinRequested || old.Availability != new.Availability ||
		(old.SwarmLeaveRequested == nil) != (new.SwarmLeaveRequested == nil)
}

// swarmLoop is the swarm sync; it owns its memory of the changes held
// back after failed Swarm calls (holds), which no other loop reaches.
type swarmLoop struct {
	cfg     *Config
	lead    *Leadership
	reg     *store.Registry
	swarm   *swarmEngine
	roles   *roles
	records *records
	groups  *groupRecords
	metrics *metrics.Metrics
	kick    chan struct{}
	holds   swarmHolds
}

func newSwarmLoop(st *State, metrics *metrics.Metrics) *swarmLoop {
	return &swarmLoop{cfg: st.Cfg, lead: st.Lead, reg: st.Reg, swarm: st.Swarm, roles: st.Roles, records: st.Records,
		groups: st.Groups, metrics: metrics, kick: st.KickSwarm}
}

// spec: the swarm sync ticks on node changes, on the Swarm's node events
// (watchSwarm, through the leader's engine), when the cluster's Swarm
// mode is set (UpdateCluster) and on SwarmInterval, the fallback for
// what the events stream missed.
func (l *swarmLoop) spec() loopSpec {
	spec := loopSpec{
		name:        "swarm-sync",
		tick:        l.tick,
		nodeChanges: swarmChange,
		kick:        l.kick,
		resync:      l.cfg.SwarmInterval,
		minGap:      l.cfg.MinActionGap,
	}
	if l.cfg.Docker != nil {
		spec.watch = func(ctx context.Context) { WatchSwarm(ctx, l.cfg.Docker, l.kick) }
	}
	return spec
}

func (l *swarmLoop) tick(ctx context.Context) (loopResult, error) {
	cs, err := store.ClusterLoad(ctx, l.cfg.Etcd)
	if err != nil {
		return loopResult{}, err
	}
	if !cs.Swarm {
		l.swarm.Seen.set(nil)
		l.metrics.SwarmNodes.Reset()
		return loopResult{}, nil
	}
	seen, refusal, err := l.observe(ctx)
	if refusal != nil || err != nil {
		return *orEmpty(refusal), err
	}
	l.countSwarm(seen)
	l.lead.MuNodes.Lock()
	defer l.lead.MuNodes.Unlock()
	a := l.decide(cs, seen)
	if a != nil && a.Kind != decide.SwarmRefuse {
		// The list was read before muNodes: a promote or demote of the
		// management API may have changed the Swarm since, and acting on
		// the old list would undo it (a node just demoted would look
		// like a promotion cut short). Act only on a list read under
		// muNodes, which every change of roles holds.
		if seen, refusal, err = l.observe(ctx); refusal != nil || err != nil {
			return *orEmpty(refusal), err
		}
		a = l.decide(cs, seen)
	}
	if a == nil {
		return loopResult{}, nil
	}
	return l.act(ctx, a)
}

// observe reads the Swarm's node list, and keeps it as the last read (a
// change ticks the group loop, which reads it). A list that cannot be
// read is not a failed tick (the Swarm may be electing, or the engine
// restarting): a refusal says so, and the next tick looks again.
func (l *swarmLoop) observe(ctx context.Context) ([]decide.SwarmNode, *loopResult, error) {
	seen, err := l.swarm.read(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, &loopResult{refused: true, reason: fmt.Sprintf("cannot read the Swarm through this node's Docker engine, so nothing in it is changed: %v", err)}, nil
	}
	if l.swarm.Seen.set(seen) {
		l.groups.Kick()
	}
	return seen, nil, nil
}

// decide is decide.Swarm on the node records and the list seen.
func (l *swarmLoop) decide(cs *pb.ClusterState, seen []decide.SwarmNode) *decide.SwarmAction {
	snap := swarmSnapshotOf(l.cfg.NodeID, l.reg.Nodes(), seen, int(cs.MaxVoters))
	snap.Held = l.holds.held(l.cfg.Now())
	return decide.Swarm(snap)
}

// act makes change a, with muNodes held.
func (l *swarmLoop) act(ctx context.Context, a *decide.SwarmAction) (loopResult, error) {
	var err error
	res := loopResult{action: string(a.Kind), nodeID: a.NodeID, reason: a.Reason}
	switch a.Kind {
	case decide.SwarmRefuse:
		res.refused = true
	case decide.SwarmAvailability:
		err = l.swarm.update(ctx, a.SwarmID, fmt.Sprintf("set Swarm node %s to %s", a.SwarmID, a.Availability), func(spec *swarm.NodeSpec) bool {
			changed := spec.Availability != a.Availability
			spec.Availability = a.Availability
			return changed
		})
	case decide.SwarmPromote:
		err = l.swarm.setRole(ctx, a.SwarmID, swarm.NodeRoleManager)
		faults.Point(faults.SwarmAfterPromote)
	case decide.SwarmDemote:
		err = l.swarm.setRole(ctx, a.SwarmID, swarm.NodeRoleWorker)
		faults.Point(faults.SwarmAfterDemote)
	case decide.SwarmGrantRole:
		n := l.reg.Node(a.NodeID)
		if n == nil {
			return loopResult{}, nil // gone meanwhile: the next tick sees it
		}
		// The promotion carries on at its etcd step, with its guards
		// (the voter limit among them).
		err = l.roles.Promote(ctx, store.CloneNode(n))
		if errors.Is(err, spec.ErrPrecondition) {
			return loopResult{refused: true, nodeID: a.NodeID, reason: fmt.Sprintf("%s, but the promotion cannot go on: %v", a.Reason, err)}, nil
		}
	case decide.SwarmRemoveNode:
		err = l.swarm.remove(ctx, a.SwarmID)
	case decide.SwarmJoin:
		err = l.records.RequestSwarmJoin(ctx, a.NodeID)
	}
	if errors.Is(err, errSwarm) && ctx.Err() == nil {
		// Not a failed tick: say what the Swarm answered, hold the
		// change back, and go on at once with those behind it.
		wait := l.holds.fail(a, err, l.cfg.Now())
		return loopResult{refused: true, again: true, nodeID: a.NodeID,
			reason: fmt.Sprintf("%s, but %v: trying it again in %v, the changes behind it going on", a.Reason, err, wait)}, nil
	}
	if err == nil && a.Kind != decide.SwarmRefuse {
		l.holds.done(a)
	}
	return res, err
}

// countSwarm sets the Swarm's node counts from a read.
func (l *swarmLoop) countSwarm(seen []decide.SwarmNode) {
	l.metrics.SwarmNodes.Reset()
	for _, sn := range seen {
		l.metrics.SwarmNodes.WithLabelValues(sn.Role(), string(sn.State)).Inc()
	}
}
