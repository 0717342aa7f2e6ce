package curator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/docker"
	"github.com/curatorproject/curator/provider/process"
	"github.com/curatorproject/curator/supervisor"
)

// The group loop keeps each group's machines matched to its spec (see
// decide.Group for the rules). It observes each group in name order and acts
// on the first that needs it: one change per tick across all groups, so a
// group that refuses (quorum) does not stop the others from being served,
// nor does one whose provider cannot make or destroy a machine (see
// loop_groups_backoff.go): that is the group's failure, not the loop's.
//
// Machines are found through the group's provider by their labels
// (cluster, group), never from memory, so a new leader sees what the last
// one made. A machine is matched to its node by the instance ID the node
// registered with (`agent join --instance-id`).

// JoinTokenEnv is the environment variable `curator agent join` reads its
// join token from: the group loop hands it to new machines there, out of
// their command lines.
const JoinTokenEnv = "CURATOR_JOIN_TOKEN"

// groupProviders keeps one provider per group, made from its spec and
// made anew when the spec's provider settings change.
type groupProviders struct {
	mu     sync.Mutex
	byName map[string]openProvider
}

type openProvider struct {
	spec *pb.ProviderSpec
	p    provider.Provider
}

// get returns the provider of group g.
func (gp *groupProviders) get(g *pb.Group, lg *zap.Logger) (provider.Provider, error) {
	gp.mu.Lock()
	defer gp.mu.Unlock()
	name := g.Spec.GetName()
	if op, ok := gp.byName[name]; ok && proto.Equal(op.spec, g.Spec.Provider) {
		return op.p, nil
	}
	p, err := newProvider(g.Spec.Provider, lg)
	if err != nil {
		return nil, fmt.Errorf("group %s: provider: %w", name, err)
	}
	if gp.byName == nil {
		gp.byName = map[string]openProvider{}
	}
	if old, ok := gp.byName[name]; ok {
		if c, ok := old.p.(io.Closer); ok {
			c.Close() // the spec's provider settings changed
		}
	}
	gp.byName[name] = openProvider{spec: g.Spec.Provider, p: p}
	return p, nil
}

// close closes every provider.
func (gp *groupProviders) close() {
	gp.mu.Lock()
	names := slices.Collect(maps.Keys(gp.byName))
	gp.mu.Unlock()
	for _, name := range names {
		gp.drop(name)
	}
}

// drop forgets group name's provider, closing it if it holds a
// connection (the docker provider's client to the daemon).
func (gp *groupProviders) drop(name string) {
	gp.mu.Lock()
	op, ok := gp.byName[name]
	delete(gp.byName, name)
	gp.mu.Unlock()
	if c, isCloser := op.p.(io.Closer); ok && isCloser {
		c.Close()
	}
}

// newProvider makes the provider a group's spec names.
func newProvider(spec *pb.ProviderSpec, lg *zap.Logger) (provider.Provider, error) {
	switch k := spec.GetKind().(type) {
	case *pb.ProviderSpec_Process:
		pool, err := process.PoolAddresses(k.Process.Addresses, int(k.Process.Port))
		if err != nil {
			return nil, err
		}
		return process.New(process.Config{Dir: k.Process.Dir, Binary: k.Process.Binary, Addresses: pool, Logger: lg})
	case *pb.ProviderSpec_Docker:
		return docker.New(docker.Config{Network: k.Docker.Network, Subnet: k.Docker.Subnet, Image: k.Docker.Image, Port: int(k.Docker.Port), Logger: lg})
	}
	return nil, errors.New("the spec names no provider")
}

// groupLoop is the group loop; it owns its crash-loop memory (crashes:
// the provisions it holds back for groups whose new machines die before
// their nodes join), which no other loop or handler reaches.
type groupLoop struct {
	*leaderLoops
	crashes crashBackoff
}

func (l *leaderLoops) groupLoop() loopSpec {
	gl := &groupLoop{leaderLoops: l}
	return loopSpec{
		name:        "groups",
		tick:        gl.tick,
		nodeChanges: groupChange,
		kick:        l.kickGroups,
		resync:      l.cfg.GroupInterval,
		minGap:      l.cfg.MinActionGap,
	}
}

// groupChange: the changes of node records the group loop cares about, of
// nodes in a group.
func groupChange(old, new *pb.Node) bool {
	switch {
	case old == nil:
		return new.Group != ""
	case new == nil:
		return old.Group != ""
	}
	return new.Group != "" && (old.Status != new.Status || !slices.Equal(old.Roles, new.Roles) || old.SwarmNodeId != new.SwarmNodeId)
}

func (l *groupLoop) tick(ctx context.Context) (loopResult, error) {
	st := l.leaderState
	groups, err := store.GroupList(ctx, st.cfg.Etcd)
	if err != nil || len(groups) == 0 {
		return loopResult{}, err
	}
	cs, err := store.ClusterLoad(ctx, st.cfg.Etcd)
	if err != nil {
		return loopResult{}, err
	}
	st.muNodes.Lock()
	ms, err := st.observeMembership(ctx)
	st.muNodes.Unlock()
	if err != nil {
		return loopResult{}, err
	}
	q := ms.RemovalQuorum(0)
	byGroup := map[string][]*pb.Node{}
	for _, n := range st.reg.Nodes() {
		if n.Group != "" {
			byGroup[n.Group] = append(byGroup[n.Group], n)
		}
	}
	var refusal *loopResult
	for _, g := range groups {
		name := g.Spec.GetName()
		// A group whose provider does not answer (no Docker daemon, say)
		// is refused with the reason; the other groups are served.
		p, err := st.providers.get(g, st.cfg.Logger)
		var machines, dead []provider.Instance
		sel := map[string]string{provider.LabelCluster: cs.ClusterId, provider.LabelGroup: name}
		dk, keepsDead := p.(deadKeeper)
		if err == nil && keepsDead {
			// Before List: a machine dead now is not listed by it.
			dead, err = dk.ListDead(ctx, sel)
		}
		if err == nil {
			machines, err = p.List(ctx, sel)
		}
		if err != nil {
			if ctx.Err() != nil {
				return loopResult{}, ctx.Err()
			}
			if refusal == nil {
				refusal = &loopResult{refused: true, reason: fmt.Sprintf("group %s: its provider does not answer: %v", name, err)}
			}
			continue
		}
		ro, roRev, err := store.RolloutLoad(ctx, st.cfg.Etcd, name)
		if err != nil {
			return loopResult{}, err
		}
		pol := spec.NormalRolloutPolicy(proto.Clone(orEmptyPolicy(g.Spec.GetRollout())).(*pb.RolloutPolicy))
		snap := decide.GroupSnapshot{
			Name: name, Size: int(g.Spec.GetSize()), Destroying: g.Destroying,
			ReplaceAfter: g.Spec.GetReplaceAfter().AsDuration(), JoinTimeout: g.Spec.GetJoinTimeout().AsDuration(),
			Voters: q.Voters, HealthyVoters: q.Healthy, Now: st.cfg.Now(),
			Rolling:   ro != nil && ro.State == pb.RolloutState_ROLLOUT_STATE_ROLLING && ro.TargetSha == g.ConfigSha,
			TargetSHA: g.ConfigSha, MaxParallel: int(g.Spec.GetMaxParallel()),
			ConsensusGroup: slices.Contains(g.Spec.GetRoles(), pb.Role_ROLE_CONSENSUS),
			Swarm:          cs.Swarm && st.swarmSeen.read(),
			Monitor:        pol.Monitor.AsDuration(), ProgressDeadline: pol.ProgressDeadline.AsDuration(),
			MaxFailures: int(pol.MaxFailures), MaxSurge: int(pol.GetMaxSurge()), MaxUnavailable: int(pol.GetMaxUnavailable()),
			Held: ro != nil && ro.TargetSha == g.ConfigSha && ro.State == pb.RolloutState_ROLLOUT_STATE_PAUSED,
		}
		mu, err := spec.ParseMaxUnhealthy(cmp.Or(g.Spec.GetMaxUnhealthy(), spec.DefaultGroupMaxUnhealthy))
		if err != nil {
			mu, _ = spec.ParseMaxUnhealthy(spec.DefaultGroupMaxUnhealthy) // validated on commit: not reached
		}
		snap.MaxUnhealthySpec = cmp.Or(g.Spec.GetMaxUnhealthy(), spec.DefaultGroupMaxUnhealthy)
		snap.MaxUnhealthy = mu.Of(snap.Size)
		snap.MaxReplacements = int(cmp.Or(g.Spec.GetMaxReplacements(), spec.DefaultGroupMaxReplacements))
		snap.ReplacementWindow = spec.DefaultGroupReplacementWindow
		if w := g.Spec.GetReplacementWindow(); w != nil {
			snap.ReplacementWindow = w.AsDuration()
		}
		for _, t := range g.Replacements {
			snap.Replacements = append(snap.Replacements, t.AsTime())
		}
		snap.RepairHeld, snap.Suspended = g.RepairHeld, g.Suspended
		if g.RepairResumed != nil {
			snap.RepairResumed = g.RepairResumed.AsTime()
		}
		// The ceiling over the group: replace_after at least its floor,
		// and nodes this leader has not heard lately counted.
		snap.ReplaceAfterFloor = spec.ReplaceAfterFloor(st.cfg.DownAfter, st.cfg.HeartbeatInterval)
		snap.SuspectAfter, snap.HeardSince = decide.SuspectAfter(st.cfg.HeartbeatInterval), st.servingSince()
		if snap.Rolling {
			snap.Failures, snap.LastFailure = int(ro.Failures), ro.LastFailure
			snap.OnFailure, snap.RollBack, snap.PauseOnFailure = onFailure(pol, ro)
			snap.RollbackOf = ro.RollbackOf
		}
		snap.Machines = groupMachines(machines)
		for _, n := range byGroup[name] {
			mem, member := ms.MemberOf[n.Id]
			gn := decide.GroupNode{
				ID: n.Id, InstanceID: n.InstanceId, Status: n.Status, Since: n.StatusChanged.AsTime(),
				Consensus: spec.HasRole(n, pb.Role_ROLE_CONSENSUS) || member,
				Learner:   member && mem.IsLearner,
				Refused:   n.Refused != "",
				Drained:   n.Availability == pb.Availability_AVAILABILITY_DRAIN,
				Leader:    n.Id == st.cfg.NodeID,
			}
			gn.HealthyVoter = ms.HealthyVoter(n.Id)
			gn.SwarmIn = n.SwarmNodeId != ""
			if sn, ok := st.swarmSeen.get(n.SwarmNodeId); ok && snap.Swarm {
				gn.SwarmManager, gn.SwarmVoter, gn.SwarmLeader = sn.Manager, sn.Reachable(), sn.Leader
			}
			if n.SwarmLeaveRequested != nil {
				gn.SwarmLeaveAsked = n.SwarmLeaveRequested.AsTime()
			}
			if last, ok := st.hb.get(n.Id); ok {
				gn.LastHeard = last
			}
			if snap.Rolling && gn.Learner && n.ConfigSha == g.ConfigSha {
				faultPoint(FaultRolloutSurgeLearner)
			}
			snap.Nodes = append(snap.Nodes, gn)
		}
		deadMachines := groupMachines(dead)
		deaths := l.crashes.observe(name, g.ConfigSha, snap.Machines, snap.Nodes, snap.Now)
		deaths = append(deaths, l.crashes.foundDead(name, deadMachines, snap.Nodes, snap.Now)...)
		for _, d := range deaths {
			reason := l.machineExited(ctx, p, name, d)
			if d.failsRollout(snap) {
				// A new machine of the rollout died before it joined: a
				// failed machine, counted in the rollout's record.
				if err := l.countRolloutFailure(ctx, ro, roRev, reason); err != nil {
					return loopResult{}, err
				}
				if ro, roRev, err = store.RolloutLoad(ctx, st.cfg.Etcd, name); err != nil {
					return loopResult{}, err
				}
				if ro == nil || ro.State != pb.RolloutState_ROLLOUT_STATE_ROLLING || ro.TargetSha != g.ConfigSha {
					return loopResult{}, nil // changed meanwhile: look again
				}
				snap.Failures, snap.LastFailure = int(ro.Failures), ro.LastFailure
			}
		}
		if err := l.clearDead(ctx, dk, name, withoutNode(deadMachines, snap.Nodes)); err != nil {
			return loopResult{}, err
		}
		snap.Dead = withNode(deadMachines, snap.Nodes)
		a := decide.Group(snap)
		if a != nil && l.crashes.hold(name, a.Kind, snap.Now) > 0 {
			continue // its new machines die before joining, or its provider refused: not yet
		}
		if a != nil && a.Kind == decide.GroupWait {
			continue // not a refusal: what it waits for makes it tick again
		}
		if a == nil {
			l.prune(ctx, p, name)
			continue
		}
		if a.Kind == decide.GroupRefuse {
			if refusal == nil {
				refusal = &loopResult{refused: true, nodeID: a.Node, reason: a.Reason}
			}
			continue
		}
		if snap.Rolling {
			// A cancel, a pause or a new commit since the rollout was read
			// stops it before this change: look again.
			if err := store.RolloutCheck(ctx, st.Fence, name, roRev); errors.Is(err, store.ErrRolloutChanged) {
				return loopResult{}, nil
			} else if err != nil {
				return loopResult{}, err
			}
		}
		if err := l.act(ctx, cs, g, p, a); err != nil {
			var refused *providerRefusal
			if !errors.As(err, &refused) || ctx.Err() != nil {
				// Not the group's: the leadership, etcd, the context.
				return loopResult{}, fmt.Errorf("group %s: %s: %w", name, a.Kind, err)
			}
			if err := l.providerRefused(ctx, snap, ro, roRev, a, refused); err != nil {
				return loopResult{}, err
			}
			continue // the group's failure: the other groups are served
		}
		if g.ProviderFailing != "" && (a.Kind == decide.GroupProvision || a.Kind == decide.GroupDestroyMachine) {
			// Its provider made or destroyed a machine again.
			if err := st.changeGroup(ctx, name, func(g *pb.Group) { g.ProviderFailing = "" }); err != nil {
				return loopResult{}, err
			}
		}
		res := loopResult{action: a.Kind.String(), nodeID: a.Node, reason: a.Reason}
		if snap.Rolling {
			if res.recorded, err = l.noteRollout(ctx, ro, roRev, snap, a); err != nil {
				return loopResult{}, err
			}
		}
		return res, nil
	}
	if refusal != nil {
		return *refusal, nil
	}
	return loopResult{}, nil
}

// machineExited says that machine d.Machine of group name died before its
// node joined, with its last words where provider p keeps them, and
// makes the loop look again once the group's provisions may go on.
func (l *leaderLoops) machineExited(ctx context.Context, p provider.Provider, name string, d crashDeath) string {
	var words string
	if lw, ok := p.(provider.LastWords); ok {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		w, err := lw.LastWords(wctx, d.Machine)
		cancel()
		if err != nil {
			supervisor.Logger(ctx).Warn("could not read a dead machine's output", zap.String("group", name), zap.String("machine", d.Machine), zap.Error(err))
		}
		words = w
	}
	res := loopResult{action: "machine-exited", reason: d.reason(name, words)}
	supervisor.Logger(ctx).Warn(res.action, zap.String("reason", res.reason))
	l.metrics.Actions.WithLabelValues("groups", res.action).Inc()
	l.recordEvent(ctx, "groups", res)
	st := l.leaderState
	time.AfterFunc(d.Wait, func() { kickGroups(st) })
	return res.reason
}

// providerRefusal is an error of a group's provider in act (a provision
// or a destroy it could not do): a failure of that group, not of the loop.
type providerRefusal struct {
	op  string
	err error
}

func (e *providerRefusal) Error() string { return e.op + ": " + e.err.Error() }
func (e *providerRefusal) Unwrap() error { return e.err }

// providerRefused takes the refusal of action a (decided on snapshot s)
// by its group's provider as a failure of that group: one more in the
// group's crash backoff, which holds its next provider call, an event
// with the provider's reason (one per wait, so at most one a minute once
// the wait is at its longest), and, for a provision of a rollout's new
// machine, a failed machine the rollout counts. The loop looks again
// once the wait is over.
func (l *groupLoop) providerRefused(ctx context.Context, s decide.GroupSnapshot, ro *pb.Rollout, roRev int64, a *decide.GroupAction, refused *providerRefusal) error {
	inARow, wait := l.crashes.refused(s.Name, a.Kind, s.Now)
	action, what := "provision-failed", "make a machine"
	if a.Kind == decide.GroupDestroyMachine {
		action, what = "destroy-failed", "destroy machine "+a.Machine
	}
	res := loopResult{action: action, nodeID: a.Node,
		reason: fmt.Sprintf("group %s: its provider could not %s (%d in a row; the group's next try in %v, the other groups go on): %v; it was to %s: %s", s.Name, what, inARow, wait, refused.err, a.Kind, a.Reason)}
	supervisor.Logger(ctx).Warn(action, zap.String("group", s.Name), zap.String("reason", res.reason))
	l.metrics.Actions.WithLabelValues("groups", action).Inc()
	l.recordEvent(ctx, "groups", res)
	st := l.leaderState
	time.AfterFunc(wait, func() { kickGroups(st) })
	// `group ls` shows the group failing, with the reason.
	if err := st.changeGroup(ctx, s.Name, func(g *pb.Group) { g.ProviderFailing = res.reason }); err != nil {
		return err
	}
	if s.Rolling && a.Kind == decide.GroupProvision {
		// The rollout's new machine could not be made: a failed machine.
		return l.countRolloutFailure(ctx, ro, roRev, res.reason)
	}
	return nil
}

// orEmptyPolicy is r, or an empty policy for a group committed before
// there were policies (normalRolloutPolicy gives it the defaults).
func orEmptyPolicy(r *pb.RolloutPolicy) *pb.RolloutPolicy {
	if r == nil {
		return &pb.RolloutPolicy{}
	}
	return r
}

// onFailure says what the failure of rollout ro does under policy pol,
// in words: a rollback to the previous config when the policy says so and
// there is one to go back to (a rollback never rolls back again), a pause
// when it says so, else the rollout just stops, failed.
func onFailure(pol *pb.RolloutPolicy, ro *pb.Rollout) (what string, rollBack, pause bool) {
	switch {
	case pol.FailureAction == spec.RolloutPause:
		return "the rollout is paused (failure_action pause): what it made stays, and the old machines keep serving", false, true
	case ro.RollbackOf != "":
		return fmt.Sprintf("this was a rollback from %s: it stops here, the machines as they are", spec.ShortSHA(ro.RollbackOf)), false, false
	case ro.PreviousTemplate == nil:
		return "no previous config is kept to roll back to: the old machines keep serving", false, false
	}
	return fmt.Sprintf("rolling the group back to its previous config %s", spec.ShortSHA(ro.PreviousSha)), true, false
}

// rollBack ends rollout r (failed, its record at mod revision rev) with a
// rollout back to its previous config (rollBackLocked), so a new leader
// carries the rollback on and a commit meanwhile wins. The events evs
// (the failure's) and the rollback's own go in the same transaction.
func (l *leaderLoops) rollBack(ctx context.Context, r *pb.Rollout, rev int64, evs ...*pb.Event) error {
	st := l.leaderState
	st.muGroups.Lock()
	defer st.muGroups.Unlock()
	back, err := st.rollBackLocked(ctx, r, rev, evs...)
	if errors.Is(err, store.ErrRolloutChanged) || err == nil && back == nil {
		return nil
	}
	if err != nil {
		return err
	}
	faultPoint(FaultRolloutAfterRollBack)
	l.metrics.Rollouts.WithLabelValues("rollback").Inc()
	supervisor.Logger(ctx).Warn("rollout failed: rolling back", zap.String("group", r.Group), zap.String("from", r.TargetSha), zap.String("to", back.TargetSha), zap.String("reason", r.Reason))
	kickGroups(st)
	return nil
}

// rollBackLocked is rollBack's transaction, with muGroups held: the
// group's template becomes the previous one again and a new record
// rolls to it, both in one fenced transaction on the failed record (r,
// at mod revision rev; store.ErrRolloutChanged if it changed). The
// failed rollout's reason is kept in the rollback's. It returns the
// rollback's record, or nil when the group is gone or was committed
// anew meanwhile (nothing to roll back).
func (st *leaderState) rollBackLocked(ctx context.Context, r *pb.Rollout, rev int64, evs ...*pb.Event) (*pb.Rollout, error) {
	g, err := store.GroupLoad(ctx, st.cfg.Etcd, r.Group)
	if err != nil || g == nil || g.Destroying || g.ConfigSha != r.TargetSha {
		return nil, err // gone, or committed anew meanwhile
	}
	now := timestamppb.New(st.cfg.Now())
	bad := g.Spec.Template
	g.Spec.Template = proto.Clone(r.PreviousTemplate).(*pb.InstanceTemplate)
	spec.ProviderFromRelease(g.Spec) // the binary or image that ran before
	g.ConfigSha = spec.GroupConfigSHA(g.Spec.Template)
	g.Updated = now
	back := &pb.Rollout{
		Group: r.Group, TargetSha: g.ConfigSha, State: pb.RolloutState_ROLLOUT_STATE_ROLLING, Started: now, Total: g.Spec.Size,
		PreviousSha: r.TargetSha, PreviousTemplate: bad, RollbackOf: r.TargetSha,
		Reason: rollingBackPrefix + r.Reason,
	}
	back.History = append([]*pb.RolloutSummary{summaryOf(r, bad)}, r.History...)
	back.History = back.History[:min(len(back.History), maxRolloutHistory)]
	evs = append(evs, st.event("groups", "rollback-rollout", "", fmt.Sprintf("group %s rolls back from %s to its previous config %s: %s", r.Group, spec.ShortSHA(r.TargetSha), spec.ShortSHA(g.ConfigSha), r.Reason)))
	if err := store.RolloutRollBack(ctx, st.Fence, g, back, rev, evs...); err != nil {
		return nil, err
	}
	return back, nil
}

// rollingBackPrefix begins the reason of a rollback's record.
const rollingBackPrefix = "rolling back: "

// countRolloutFailure counts one failed machine in rollout ro (at mod
// revision rev), with its reason; a record changed meanwhile is left as
// it is (the loop looks again).
func (l *leaderLoops) countRolloutFailure(ctx context.Context, ro *pb.Rollout, rev int64, reason string) error {
	r := proto.Clone(ro).(*pb.Rollout)
	r.Failures++
	r.LastFailure = reason
	err := store.RolloutSave(ctx, l.Fence, r, rev)
	if errors.Is(err, store.ErrRolloutChanged) {
		return nil
	}
	return err
}

// act does what decide.Group decided.
func (l *groupLoop) act(ctx context.Context, cs *pb.ClusterState, g *pb.Group, p provider.Provider, a *decide.GroupAction) error {
	st := l.leaderState
	switch a.Kind {
	case decide.GroupProvision:
		if err := st.Check(ctx); err != nil {
			return err // not the leader any more: make nothing
		}
		inst, err := p.Provision(ctx, machineSpec(cs, pki.Fingerprint(st.pki.CA.Cert), g, st.reg.ManagerList()))
		if err != nil {
			return &providerRefusal{op: "provision", err: err}
		}
		a.Machine = inst.ID
		a.Reason += ": made machine " + inst.ID
		l.crashes.made(g.Spec.GetName(), inst.ID, g.ConfigSha)
		if a.Step != "" {
			faultPoint(FaultRolloutAfterProvision)
		}
		return nil
	case decide.GroupRepairHold, decide.GroupRepairResume:
		held := ""
		if a.Kind == decide.GroupRepairHold {
			held = a.Reason
		}
		now := timestamppb.New(st.cfg.Now())
		return st.changeGroup(ctx, g.Spec.GetName(), func(g *pb.Group) {
			g.RepairHeld = held
			if held == "" {
				g.RepairResumed = now
			}
		})
	case decide.GroupDestroyMachine:
		if a.Repair {
			// Counted before the machine goes: a leader that dies between
			// the two has spent one of the budget rather than lost one.
			now := st.cfg.Now()
			window := spec.DefaultGroupReplacementWindow
			if w := g.Spec.GetReplacementWindow(); w != nil {
				window = w.AsDuration()
			}
			if err := st.changeGroup(ctx, g.Spec.GetName(), func(g *pb.Group) {
				g.Replacements = slices.DeleteFunc(g.Replacements, func(t *timestamppb.Timestamp) bool { return now.Sub(t.AsTime()) >= window })
				g.Replacements = append(g.Replacements, timestamppb.New(now))
			}); err != nil {
				return err
			}
		}
		if err := st.Check(ctx); err != nil {
			return err
		}
		l.crashes.destroyed(g.Spec.GetName(), a.Machine)
		if err := p.Destroy(ctx, a.Machine); err != nil {
			return &providerRefusal{op: "destroy " + a.Machine, err: err}
		}
		if a.Step != "" {
			faultPoint(FaultRolloutAfterDestroy)
		}
		return nil
	case decide.GroupDrain:
		return st.changeNode(ctx, a.Node, func(n *pb.Node) bool {
			n.Availability = pb.Availability_AVAILABILITY_DRAIN
			return true
		})
	case decide.GroupRolloutDone, decide.GroupRolloutFail:
		return nil // noteRollout writes the outcome
	case decide.GroupSwarmLeave:
		return st.changeNode(ctx, a.Node, func(n *pb.Node) bool {
			n.SwarmLeaveRequested = st.timestamp()
			n.SwarmJoinRequested = false
			return true
		})
	case decide.GroupSwarmStay:
		return st.changeNode(ctx, a.Node, func(n *pb.Node) bool {
			had := n.SwarmLeaveRequested != nil
			n.SwarmLeaveRequested = nil
			return had
		})
	case decide.GroupRemoveNode:
		st.muNodes.Lock()
		defer st.muNodes.Unlock()
		n := st.reg.Node(a.Node)
		if n == nil {
			return nil // gone already
		}
		return st.removeNode(ctx, n)
	case decide.GroupDemote:
		st.muNodes.Lock()
		defer st.muNodes.Unlock()
		n := st.reg.Node(a.Node)
		if n == nil {
			return nil
		}
		if _, err := st.demote(ctx, store.CloneNode(n)); err != nil {
			return err
		}
		if a.Step != "" {
			faultPoint(FaultRolloutAfterDemote)
		}
		return nil
	case decide.GroupDelete:
		st.providers.drop(g.Spec.GetName())
		l.crashes.forget(g.Spec.GetName())
		return store.GroupDestroy(ctx, st.Fence, g.Spec.GetName())
	}
	return fmt.Errorf("unknown action %v", a.Kind)
}

// changeGroup changes group name's record (as change says), fenced, with
// the group API's lock held so that a commit meanwhile is not lost.
func (st *leaderState) changeGroup(ctx context.Context, name string, change func(*pb.Group)) error {
	st.muGroups.Lock()
	defer st.muGroups.Unlock()
	g, err := store.GroupLoad(ctx, st.cfg.Etcd, name)
	if err != nil || g == nil {
		return err
	}
	change(g)
	return store.GroupSave(ctx, st.Fence, g)
}

// machineSpec is how a group's new machine starts: `curator agent join`
// with the token of its role (in the environment), the group's labels and
// the placeholders its provider fills in.
func machineSpec(cs *pb.ClusterState, caFingerprint string, g *pb.Group, managers []string) provider.Spec {
	spec := g.Spec
	consensusRole := slices.Contains(spec.Roles, pb.Role_ROLE_CONSENSUS)
	secret := cs.WorkerTokenSecret
	if consensusRole {
		secret = cs.ManagerTokenSecret
	}
	args := []string{"agent", "join",
		"--data-dir", provider.PlaceholderDataDir, "--listen", provider.PlaceholderAddress,
		"--name", spec.Name + "-" + provider.PlaceholderInstanceID,
		"--run-if-joined",
		"--group", spec.Name, "--instance-id", provider.PlaceholderInstanceID, "--config-sha", g.ConfigSha,
	}
	for _, m := range managers {
		args = append(args, "--manager", m)
	}
	if consensusRole && !slices.Contains(spec.Roles, pb.Role_ROLE_WORKER) {
		args = append(args, "--availability", "drain")
	}
	labels := spec.GetTemplate().GetLabels()
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		args = append(args, "--label", k+"="+labels[k])
	}
	args = append(args, spec.GetTemplate().GetArgs()...)
	env := maps.Clone(spec.GetTemplate().GetEnv())
	if env == nil {
		env = map[string]string{}
	}
	env[JoinTokenEnv] = pki.Token{CAFingerprint: caFingerprint, Secret: secret}.String()
	// A fault armed in the leader (a test binary built with -tags
	// faults) is not passed on to the machines it makes, which a process
	// provider starts with the leader's environment.
	if _, set := env[FaultEnv]; !set {
		env[FaultEnv] = ""
	}
	return provider.Spec{
		Labels: map[string]string{
			provider.LabelCluster: cs.ClusterId, provider.LabelGroup: spec.Name, provider.LabelConfigSHA: g.ConfigSha,
		},
		Args:    args,
		Env:     env,
		Manager: consensusRole,
	}
}

// kickGroups makes the group loop look at once.
func kickGroups(st *leaderState) { supervisor.Kick(st.kickGroups) }

// noteRollout records in the rollout what action a of its group did: the
// node in flight and its step, the progress, and the outcome once it is
// done or failed. A record changed meanwhile (a cancel) is left as it is.
// The outcome's event goes in the outcome's transaction (a leader killed
// right after it has said why): recorded says it is written, or moot,
// the outcome not taken.
func (l *leaderLoops) noteRollout(ctx context.Context, ro *pb.Rollout, rev int64, snap decide.GroupSnapshot, a *decide.GroupAction) (recorded bool, err error) {
	r := proto.Clone(ro).(*pb.Rollout)
	now := l.cfg.Now()
	r.Total = uint32(snap.Size)
	r.Updated = 0
	nodeOf := map[string]decide.GroupNode{}
	for _, n := range snap.Nodes {
		nodeOf[n.InstanceID] = n
	}
	for _, m := range snap.Machines {
		if decide.FreshReady(snap, m, nodeOf) {
			r.Updated++
		}
	}
	var evs []*pb.Event
	switch a.Kind {
	case decide.GroupRolloutDone:
		why := a.Reason
		if r.RollbackOf != "" {
			// A rollback keeps why it was one.
			why += "; rolled back from " + spec.ShortSHA(r.RollbackOf) + ": " + strings.TrimPrefix(r.Reason, rollingBackPrefix)
		}
		r.State, r.Finished, r.Node, r.Step, r.Reason = pb.RolloutState_ROLLOUT_STATE_DONE, timestamppb.New(now), "", "", why
		l.metrics.Rollouts.WithLabelValues("done").Inc()
		evs, recorded = []*pb.Event{l.event("groups", a.Kind.String(), a.Node, a.Reason)}, true
	case decide.GroupRolloutFail:
		r.State, r.Finished, r.Reason = pb.RolloutState_ROLLOUT_STATE_FAILED, timestamppb.New(now), a.Reason
		r.Failures = uint32(max(snap.Failures, int(r.Failures)))
		if a.Machine != "" {
			r.Failures = uint32(snap.Failures + 1)
			r.LastFailure = a.Reason
		}
		l.metrics.Rollouts.WithLabelValues("failed").Inc()
		evs, recorded = []*pb.Event{l.event("groups", a.Kind.String(), a.Node, a.Reason)}, true
		if snap.PauseOnFailure {
			r.State, r.Finished = pb.RolloutState_ROLLOUT_STATE_PAUSED, nil
		}
		if snap.RollBack {
			return true, l.rollBack(ctx, r, rev, evs...)
		}
	default:
		if a.Step == "" {
			return false, nil
		}
		if a.Step == "failed" {
			r.Failures++
			r.LastFailure = a.Reason
		}
		if a.Kind == decide.GroupDestroyMachine && a.Step != "failed" {
			// One old machine gone: the time since the last one (or the
			// start) is its time.
			from := r.Started.AsTime()
			if r.StepStarted != nil && r.Rolled > 0 {
				from = r.StepStarted.AsTime()
			}
			secs := now.Sub(from).Seconds()
			r.Rolled++
			r.RolledSeconds += secs
			r.StepStarted = timestamppb.New(now)
			l.metrics.NodesRolled.Inc()
			l.metrics.RollSeconds.Observe(secs)
		}
		r.Node, r.Step = a.Node, a.Step
		if a.Node == "" {
			r.Node = a.Machine
		}
	}
	err = store.RolloutSave(ctx, l.Fence, r, rev, evs...)
	if errors.Is(err, store.ErrRolloutChanged) {
		return recorded, nil
	}
	return recorded, err
}
