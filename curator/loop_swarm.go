package curator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
	"go.uber.org/zap"

	"github.com/curatorproject/curator/curator/decide"
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

// swarmSeen is the Swarm's node list as the swarm sync last read it (nil
// while the flavor is off, or before the first read), for the node views.
type swarmSeen struct {
	mu   sync.Mutex
	byID map[string]decide.SwarmNode
}

// set keeps nodes as the last read, and says whether a node's role,
// state or leadership changed since the read before (the group loop,
// which reads them, is then ticked).
func (s *swarmSeen) set(nodes []decide.SwarmNode) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if nodes == nil {
		changed := s.byID != nil
		s.byID = nil
		return changed
	}
	byID := make(map[string]decide.SwarmNode, len(nodes))
	for _, sn := range nodes {
		byID[sn.ID] = sn
	}
	changed := s.byID == nil || len(byID) != len(s.byID)
	for id, sn := range byID {
		old, ok := s.byID[id]
		changed = changed || !ok || old.Manager != sn.Manager || old.State != sn.State || old.Leader != sn.Leader
	}
	s.byID = byID
	return changed
}

// read says whether the Swarm has been read (with the flavor on).
func (s *swarmSeen) read() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID != nil
}

// get returns Swarm node id as last read.
func (s *swarmSeen) get(id string) (decide.SwarmNode, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.byID[id]
	return sn, ok && id != ""
}

// swarmOn says whether the cluster's Swarm flavor is on.
func (st *leaderState) swarmOn(ctx context.Context) (bool, error) {
	cs, err := store.ClusterLoad(ctx, st.cfg.Etcd)
	if err != nil {
		return false, err
	}
	return cs.Swarm, nil
}

// errSwarm wraps what a Swarm call answered: the Swarm's refusal or
// failure, which the next tick tries again (a manager promoted a moment
// ago is not in the Swarm's Raft yet and cannot be demoted).
var errSwarm = errors.New("the Swarm did not take the change")

// errNoEngine: the flavor is on, and this curator has no engine to act
// through.
var errNoEngine = fmt.Errorf("%w: the cluster's Swarm flavor is on, but this curator's agent runs without a Docker engine: restart its agent with --docker-socket, or turn the flavor off with `curator cluster update --swarm=false`", spec.ErrPrecondition)

// readSwarm reads the Swarm's node list through this node's engine,
// within SwarmTimeout.
func (st *leaderState) readSwarm(ctx context.Context) ([]decide.SwarmNode, error) {
	if st.cfg.Docker == nil {
		return nil, errNoEngine
	}
	ctx, cancel := context.WithTimeout(ctx, st.cfg.SwarmTimeout)
	defer cancel()
	return observeSwarm(ctx, st.cfg.Docker)
}

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

// swarmLoop is the swarm sync's spec: it ticks on node changes, on the
// Swarm's node events (watchSwarm, through the leader's engine), when the
// cluster's Swarm mode is set (UpdateCluster) and on SwarmInterval, the
// fallback for what the events stream missed.
func (l *leaderLoops) swarmLoop() loopSpec {
	sl := &swarmLoop{leaderLoops: l}
	spec := loopSpec{
		name:        "swarm-sync",
		tick:        sl.tick,
		nodeChanges: swarmChange,
		resync:      l.cfg.SwarmInterval,
		minGap:      l.cfg.MinActionGap,
	}
	spec.kick = l.kickSwarm
	if l.cfg.Docker != nil {
		spec.watch = func(ctx context.Context) { watchSwarm(ctx, l.cfg.Docker, l.kickSwarm) }
	}
	return spec
}

// swarmLoop is the swarm sync; it owns its memory of the changes held
// back after failed Swarm calls (holds), which no other loop reaches.
type swarmLoop struct {
	*leaderLoops
	holds swarmHolds
}

func (l *swarmLoop) tick(ctx context.Context) (loopResult, error) {
	cs, err := store.ClusterLoad(ctx, l.cfg.Etcd)
	if err != nil {
		return loopResult{}, err
	}
	if !cs.Swarm {
		l.swarmSeen.set(nil)
		l.metrics.SwarmNodes.Reset()
		return loopResult{}, nil
	}
	seen, err := l.readSwarm(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return loopResult{}, ctx.Err()
		}
		// Not a failed tick: the Swarm may be electing, or the engine
		// restarting. Say so, and look again next tick.
		return loopResult{refused: true, reason: fmt.Sprintf("cannot read the Swarm through this node's Docker engine, so nothing in it is changed: %v", err)}, nil
	}
	if l.swarmSeen.set(seen) {
		kickGroups(l.leaderState)
	}
	l.countSwarm(seen)

	decideOn := func(seen []decide.SwarmNode) *decide.SwarmAction {
		snap := swarmSnapshotOf(l.cfg.NodeID, l.reg.Nodes(), seen, int(cs.MaxVoters))
		snap.Held = l.holds.held(l.cfg.Now())
		return decide.Swarm(snap)
	}
	l.muNodes.Lock()
	defer l.muNodes.Unlock()
	a := decideOn(seen)
	if a != nil && a.Kind != decide.SwarmRefuse {
		// The list was read before muNodes: a promote or demote of the
		// management API may have changed the Swarm since, and acting on
		// the old list would undo it (a node just demoted would look
		// like a promotion cut short). Act only on a list read under
		// muNodes, which every change of roles holds.
		if seen, err = l.readSwarm(ctx); err != nil {
			if ctx.Err() != nil {
				return loopResult{}, ctx.Err()
			}
			return loopResult{refused: true, reason: fmt.Sprintf("cannot read the Swarm through this node's Docker engine, so nothing in it is changed: %v", err)}, nil
		}
		if l.swarmSeen.set(seen) {
			kickGroups(l.leaderState)
		}
		a = decideOn(seen)
	}
	if a == nil {
		return loopResult{}, nil
	}
	res := loopResult{action: string(a.Kind), nodeID: a.NodeID, reason: a.Reason}
	switch a.Kind {
	case decide.SwarmRefuse:
		res.refused = true
	case decide.SwarmAvailability:
		err = l.swarmUpdate(ctx, a.SwarmID, fmt.Sprintf("set Swarm node %s to %s", a.SwarmID, a.Availability), func(spec *swarm.NodeSpec) bool {
			changed := spec.Availability != a.Availability
			spec.Availability = a.Availability
			return changed
		})
	case decide.SwarmPromote:
		err = l.swarmSetRole(ctx, a.SwarmID, swarm.NodeRoleManager)
		faultPoint(FaultSwarmAfterPromote)
	case decide.SwarmDemote:
		err = l.swarmSetRole(ctx, a.SwarmID, swarm.NodeRoleWorker)
		faultPoint(FaultSwarmAfterDemote)
	case decide.SwarmGrantRole:
		n := l.reg.Node(a.NodeID)
		if n == nil {
			return loopResult{}, nil // gone meanwhile: the next tick sees it
		}
		// The promotion carries on at its etcd step, with its guards
		// (the voter limit among them).
		err = l.promote(ctx, store.CloneNode(n))
		if isPrecondition(err) {
			return loopResult{refused: true, nodeID: a.NodeID, reason: fmt.Sprintf("%s, but the promotion cannot go on: %v", a.Reason, err)}, nil
		}
	case decide.SwarmRemoveNode:
		err = l.swarmRemove(ctx, a.SwarmID)
	case decide.SwarmJoin:
		err = l.requestSwarmJoin(ctx, a.NodeID)
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
func (l *leaderLoops) countSwarm(seen []decide.SwarmNode) {
	l.metrics.SwarmNodes.Reset()
	for _, sn := range seen {
		l.metrics.SwarmNodes.WithLabelValues(sn.Role(), string(sn.State)).Inc()
	}
}

// swarmSetRole promotes or demotes Swarm node id, fenced.
func (st *leaderState) swarmSetRole(ctx context.Context, id string, role swarm.NodeRole) error {
	return st.swarmUpdate(ctx, id, fmt.Sprintf("make Swarm node %s a %s", id, role), func(spec *swarm.NodeSpec) bool {
		changed := spec.Role != role
		spec.Role = role
		return changed
	})
}

// swarmUpdate changes Swarm node id's spec, fenced: change is given the
// spec as the Swarm has it and says whether it changed anything; what
// names the change in an error.
func (st *leaderState) swarmUpdate(ctx context.Context, id, what string, change func(*swarm.NodeSpec) bool) error {
	if st.cfg.Docker == nil {
		return errNoEngine
	}
	ctx, cancel := context.WithTimeout(ctx, st.cfg.SwarmTimeout)
	defer cancel()
	got, err := st.cfg.Docker.NodeInspect(ctx, id, client.NodeInspectOptions{})
	if err != nil {
		return fmt.Errorf("%w: inspect Swarm node %s: %v", errSwarm, id, err)
	}
	spec := got.Node.Spec
	if !change(&spec) {
		return nil
	}
	if err := st.Check(ctx); err != nil {
		return err
	}
	if _, err := st.cfg.Docker.NodeUpdate(ctx, id, client.NodeUpdateOptions{Version: got.Node.Version, Spec: spec}); err != nil {
		return fmt.Errorf("%w: %s: %v", errSwarm, what, err)
	}
	return nil
}

// swarmRemove removes Swarm node id (a Down worker), fenced.
func (st *leaderState) swarmRemove(ctx context.Context, id string) error {
	if st.cfg.Docker == nil {
		return errNoEngine
	}
	ctx, cancel := context.WithTimeout(ctx, st.cfg.SwarmTimeout)
	defer cancel()
	if err := st.Check(ctx); err != nil {
		return err
	}
	if _, err := st.cfg.Docker.NodeRemove(ctx, id, client.NodeRemoveOptions{}); err != nil {
		return fmt.Errorf("%w: remove Swarm node %s: %v", errSwarm, id, err)
	}
	return nil
}

// requestSwarmJoin sets the Swarm join request in node id's record, for
// its agent to answer. Called with muNodes.
func (st *leaderState) requestSwarmJoin(ctx context.Context, id string) error {
	return st.changeNodeLocked(ctx, id, func(n *pb.Node) bool {
		n.SwarmJoinRequested = true
		return true
	})
}

// swarmPromoteFirst is a promotion's Swarm step, made before its etcd
// step when the flavor is on: node n's Swarm worker is promoted, within
// the Swarm's quorum. A node not in the Swarm yet is promoted in etcd
// alone: the swarm sync promotes it in Swarm once its agent has joined.
// Called with muNodes.
func (st *leaderState) swarmPromoteFirst(ctx context.Context, cs *pb.ClusterState, n *pb.Node) error {
	if !cs.Swarm || n.SwarmNodeId == "" {
		return nil
	}
	seen, err := st.readSwarm(ctx)
	if err != nil {
		return fmt.Errorf("%w: a promotion changes the Swarm first, and it cannot be read: %v", spec.ErrPrecondition, err)
	}
	v := decide.NewSwarmView(decide.SwarmSnapshot{Swarm: seen})
	sn, ok := v.Node(n.SwarmNodeId)
	if !ok || sn.Manager {
		return nil
	}
	if sn.State != swarm.NodeStateReady {
		return fmt.Errorf("%w: node %s's Swarm node %s is %s, and a promotion changes the Swarm first: bring its Docker engine back", spec.ErrPrecondition, n.Id, sn.ID, sn.State)
	}
	if !slices.ContainsFunc(seen, func(sn decide.SwarmNode) bool { return sn.Leader }) {
		return fmt.Errorf("%w: the Swarm's node list names no leader (its quorum is lost, or it is electing one): promote node %s once it has one", spec.ErrPrecondition, n.Id)
	}
	if err := v.CheckSwarmChange("", sn.ID); err != nil {
		return fmt.Errorf("promote node %s's Swarm node %s: %w", n.Id, sn.ID, err)
	}
	if err := st.swarmSetRole(ctx, sn.ID, swarm.NodeRoleManager); errors.Is(err, errSwarm) {
		return fmt.Errorf("%w: a promotion changes the Swarm first, and %v: try again", spec.ErrPrecondition, err)
	} else if err != nil {
		return err
	}
	faultPoint(FaultSwarmAfterPromote)
	return nil
}

// swarmManagerToDemote returns node n's Swarm manager that its demotion
// must demote first ("" for none: the flavor is off, or the node is not
// a Swarm manager), checked against the Swarm's quorum. Called with
// muNodes.
func (st *leaderState) swarmManagerToDemote(ctx context.Context, n *pb.Node) (string, error) {
	on, err := st.swarmOn(ctx)
	if err != nil || !on || n.SwarmNodeId == "" {
		return "", err
	}
	seen, err := st.readSwarm(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: a demotion changes the Swarm first, and it cannot be read: %v", spec.ErrPrecondition, err)
	}
	v := decide.NewSwarmView(decide.SwarmSnapshot{Swarm: seen})
	sn, ok := v.Node(n.SwarmNodeId)
	if !ok || !sn.Manager {
		return "", nil
	}
	if err := v.CheckSwarmChange(sn.ID, ""); err != nil {
		return "", fmt.Errorf("demote node %s's Swarm manager %s: %w", n.Id, sn.ID, err)
	}
	return sn.ID, nil
}

// swarmDemoteFirst demotes Swarm manager id ("": none), a demotion's
// first step with the flavor on.
func (st *leaderState) swarmDemoteFirst(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	if err := st.swarmSetRole(ctx, id, swarm.NodeRoleWorker); err != nil {
		return err
	}
	faultPoint(FaultSwarmAfterDemote)
	return nil
}

// swarmManagersOf returns the demoting nodes whose Swarm node is still a
// manager, for the demotions loop to wait on (nil when the flavor is off
// or no other node is demoting).
func (st *leaderState) swarmManagersOf(ctx context.Context, ms *decide.Membership) (map[string]bool, error) {
	if !slices.ContainsFunc(ms.Nodes, func(n *pb.Node) bool { return n.Demoting && n.Id != ms.Self }) {
		return nil, nil
	}
	on, err := st.swarmOn(ctx)
	if err != nil || !on {
		return nil, err
	}
	seen, err := st.readSwarm(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]decide.SwarmNode{}
	for _, sn := range seen {
		byID[sn.ID] = sn
	}
	out := map[string]bool{}
	for _, n := range ms.Nodes {
		if sn, ok := byID[n.SwarmNodeId]; ok && n.Demoting && sn.Manager {
			out[n.Id] = true
		}
	}
	return out, nil
}

// removeSwarmNodeOf removes node n's Swarm node, n's record just removed,
// when the flavor is on and the Swarm shows it Down (a dead machine's, or
// an engine that left): a manager is demoted first, within the Swarm's
// quorum. It is the swarm sync's orphan rule made at once rather than on
// its next tick, and what it cannot do now (the Swarm node still up, the
// Swarm not read, a refusal) is left to that rule: said in the log, not
// failed, since the node is gone already. Called with muNodes.
func (st *leaderState) removeSwarmNodeOf(ctx context.Context, n *pb.Node) {
	if n.SwarmNodeId == "" {
		return
	}
	if on, err := st.swarmOn(ctx); err != nil || !on {
		return
	}
	lg := st.cfg.Logger.With(zap.String("node", n.Id), zap.String("swarm_node", n.SwarmNodeId))
	seen, err := st.readSwarm(ctx)
	if err != nil {
		lg.Warn("node removed; its Swarm node is left to the swarm sync, the Swarm cannot be read", zap.Error(err))
		return
	}
	v := decide.NewSwarmView(decide.SwarmSnapshot{Swarm: seen})
	sn, ok := v.Node(n.SwarmNodeId)
	switch {
	case !ok:
		return
	case sn.State != swarm.NodeStateDown:
		lg.Info("node removed; its Swarm node is not down yet, and the swarm sync removes it once it is", zap.String("state", string(sn.State)))
		return
	case !slices.ContainsFunc(seen, func(sn decide.SwarmNode) bool { return sn.Leader }):
		lg.Warn("node removed; its Swarm node is left to the swarm sync, the Swarm's node list names no leader")
		return
	}
	if sn.Manager && sn.Reachability != "" { // one that never joined the Swarm's Raft is removed as it is
		if err := v.CheckSwarmChange(sn.ID, ""); err != nil {
			lg.Warn("node removed; its Swarm node, a down manager, is left to the swarm sync", zap.Error(err))
			return
		}
		if err := st.swarmSetRole(ctx, sn.ID, swarm.NodeRoleWorker); err != nil {
			lg.Warn("node removed; demoting its Swarm node, a down manager, failed: the swarm sync tries again", zap.Error(err))
			return
		}
	}
	if err := st.swarmRemove(ctx, sn.ID); err != nil {
		lg.Warn("node removed; removing its Swarm node failed: the swarm sync tries again", zap.Error(err))
		return
	}
	lg.Info("node removed, and its Swarm node")
}
