package leader

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
	"github.com/curatorproject/curator/curator/internal/faults"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// swarmEngine is the Docker Swarm as a leadership reads and changes it,
// through its own node's engine. It is the only part that changes the
// Swarm (the layer test holds every engine call that does to this file),
// and each change checks the fence just before the call, as a membership
// change does: a Swarm call cannot be part of an etcd transaction, and a
// deposed leader stops there. seen is the node list as the swarm sync
// last read it.
type swarmEngine struct {
	fence *store.Fence
	cfg   *Config
	Seen  swarmSeen
}

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

// Read says whether the Swarm has been read (with the flavor on).
func (s *swarmSeen) Read() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID != nil
}

// Get returns Swarm node id as last read.
func (s *swarmSeen) Get(id string) (decide.SwarmNode, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.byID[id]
	return sn, ok && id != ""
}

// On says whether the cluster's Swarm flavor is on.
func (sw *swarmEngine) On(ctx context.Context) (bool, error) {
	cs, err := store.ClusterLoad(ctx, sw.cfg.Etcd)
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
var ErrNoEngine = fmt.Errorf("%w: the cluster's Swarm flavor is on, but this curator's agent runs without a Docker engine: restart its agent with --docker-socket, or turn the flavor off with `curator cluster update --swarm=false`", spec.ErrPrecondition)

// read reads the Swarm's node list through this node's engine,
// within SwarmTimeout.
func (sw *swarmEngine) read(ctx context.Context) ([]decide.SwarmNode, error) {
	if sw.cfg.Docker == nil {
		return nil, ErrNoEngine
	}
	ctx, cancel := context.WithTimeout(ctx, sw.cfg.SwarmTimeout)
	defer cancel()
	return ObserveSwarm(ctx, sw.cfg.Docker)
}

// setRole promotes or demotes Swarm node id, fenced.
func (sw *swarmEngine) setRole(ctx context.Context, id string, role swarm.NodeRole) error {
	return sw.update(ctx, id, fmt.Sprintf("make Swarm node %s a %s", id, role), func(spec *swarm.NodeSpec) bool {
		changed := spec.Role != role
		spec.Role = role
		return changed
	})
}

// update changes Swarm node id's spec, fenced: change is given the
// spec as the Swarm has it and says whether it changed anything; what
// names the change in an error.
func (sw *swarmEngine) update(ctx context.Context, id, what string, change func(*swarm.NodeSpec) bool) error {
	if sw.cfg.Docker == nil {
		return ErrNoEngine
	}
	ctx, cancel := context.WithTimeout(ctx, sw.cfg.SwarmTimeout)
	defer cancel()
	got, err := sw.cfg.Docker.NodeInspect(ctx, id, client.NodeInspectOptions{})
	if err != nil {
		return fmt.Errorf("%w: inspect Swarm node %s: %v", errSwarm, id, err)
	}
	spec := got.Node.Spec
	if !change(&spec) {
		return nil
	}
	if err := sw.fence.Check(ctx); err != nil {
		return err
	}
	if _, err := sw.cfg.Docker.NodeUpdate(ctx, id, client.NodeUpdateOptions{Version: got.Node.Version, Spec: spec}); err != nil {
		return fmt.Errorf("%w: %s: %v", errSwarm, what, err)
	}
	return nil
}

// remove removes Swarm node id (a Down worker), fenced.
func (sw *swarmEngine) remove(ctx context.Context, id string) error {
	if sw.cfg.Docker == nil {
		return ErrNoEngine
	}
	ctx, cancel := context.WithTimeout(ctx, sw.cfg.SwarmTimeout)
	defer cancel()
	if err := sw.fence.Check(ctx); err != nil {
		return err
	}
	if _, err := sw.cfg.Docker.NodeRemove(ctx, id, client.NodeRemoveOptions{}); err != nil {
		return fmt.Errorf("%w: remove Swarm node %s: %v", errSwarm, id, err)
	}
	return nil
}

// promoteFirst is a promotion's Swarm step, made before its etcd
// step when the flavor is on: node n's Swarm worker is promoted, within
// the Swarm's quorum. A node not in the Swarm yet is promoted in etcd
// alone: the swarm sync promotes it in Swarm once its agent has joined.
// Called with muNodes.
func (sw *swarmEngine) promoteFirst(ctx context.Context, cs *pb.ClusterState, n *pb.Node) error {
	if !cs.Swarm || n.SwarmNodeId == "" {
		return nil
	}
	seen, err := sw.read(ctx)
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
	if err := sw.setRole(ctx, sn.ID, swarm.NodeRoleManager); errors.Is(err, errSwarm) {
		return fmt.Errorf("%w: a promotion changes the Swarm first, and %v: try again", spec.ErrPrecondition, err)
	} else if err != nil {
		return err
	}
	faults.Point(faults.SwarmAfterPromote)
	return nil
}

// managerToDemote returns node n's Swarm manager that its demotion
// must demote first ("" for none: the flavor is off, or the node is not
// a Swarm manager), checked against the Swarm's quorum. Called with
// muNodes.
func (sw *swarmEngine) managerToDemote(ctx context.Context, n *pb.Node) (string, error) {
	on, err := sw.On(ctx)
	if err != nil || !on || n.SwarmNodeId == "" {
		return "", err
	}
	seen, err := sw.read(ctx)
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

// demoteFirst demotes Swarm manager id ("": none), a demotion's
// first step with the flavor on.
func (sw *swarmEngine) demoteFirst(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	if err := sw.setRole(ctx, id, swarm.NodeRoleWorker); err != nil {
		return err
	}
	faults.Point(faults.SwarmAfterDemote)
	return nil
}

// managersOf returns the demoting nodes whose Swarm node is still a
// manager, for the demotions loop to wait on (nil when the flavor is off
// or no other node is demoting).
func (sw *swarmEngine) managersOf(ctx context.Context, ms *decide.Membership) (map[string]bool, error) {
	if !slices.ContainsFunc(ms.Nodes, func(n *pb.Node) bool { return n.Demoting && n.Id != ms.Self }) {
		return nil, nil
	}
	on, err := sw.On(ctx)
	if err != nil || !on {
		return nil, err
	}
	seen, err := sw.read(ctx)
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

// removeNodeOf removes node n's Swarm node, n's record just removed,
// when the flavor is on and the Swarm shows it Down (a dead machine's, or
// an engine that left): a manager is demoted first, within the Swarm's
// quorum. It is the swarm sync's orphan rule made at once rather than on
// its next tick, and what it cannot do now (the Swarm node still up, the
// Swarm not read, a refusal) is left to that rule: said in the log, not
// failed, since the node is gone already. Called with muNodes.
func (sw *swarmEngine) removeNodeOf(ctx context.Context, n *pb.Node) {
	if n.SwarmNodeId == "" {
		return
	}
	if on, err := sw.On(ctx); err != nil || !on {
		return
	}
	lg := sw.cfg.Logger.With(zap.String("node", n.Id), zap.String("swarm_node", n.SwarmNodeId))
	seen, err := sw.read(ctx)
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
		if err := sw.setRole(ctx, sn.ID, swarm.NodeRoleWorker); err != nil {
			lg.Warn("node removed; demoting its Swarm node, a down manager, failed: the swarm sync tries again", zap.Error(err))
			return
		}
	}
	if err := sw.remove(ctx, sn.ID); err != nil {
		lg.Warn("node removed; removing its Swarm node failed: the swarm sync tries again", zap.Error(err))
		return
	}
	lg.Info("node removed, and its Swarm node")
}
