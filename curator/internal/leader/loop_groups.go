package leader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/internal/faults"
	"github.com/curatorproject/curator/curator/internal/metrics"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
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

// groupLoop is the group loop; it owns its crash-loop memory (crashes:
// the provisions it holds back for groups whose new machines die before
// their nodes join), which no other loop or handler reaches.
type groupLoop struct {
	cfg      *Config
	lead     *Leadership
	reg      *store.Registry
	pki      *store.ClusterPKI
	hb       *heartbeats
	members  *members
	roles    *roles
	records  *records
	groups   *groupRecords
	machines *machines
	swarm    *swarmEngine
	events   *eventLog
	metrics  *metrics.Metrics
	crashes  crashBackoff
	// shown are the groups the metrics show (groupGone drops the rest).
	shown map[string]bool
	// dark is when this leader first saw each group's dark domains dark
	// (domain_hold counts from then: a new leader starts the count
	// anew, holding longer rather than less).
	dark darkDomains
	// lists are the groups' listings of their machines.
	lists listings
}

func newGroupLoop(st *State, metrics *metrics.Metrics) *groupLoop {
	return &groupLoop{cfg: st.Cfg, lead: st.Lead, reg: st.Reg, pki: st.PKI, hb: st.Heartbeats, members: st.Members, roles: st.Roles,
		records: st.Records, groups: st.Groups, machines: st.Machines, swarm: st.Swarm, events: st.Events, metrics: metrics,
		lists: listings{wait: listWait}}
}

func (l *groupLoop) spec() loopSpec {
	return loopSpec{
		name:        "groups",
		tick:        l.tick,
		nodeChanges: groupChange,
		kick:        l.groups.kicks,
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

// groupsSeen is what a tick of the group loop reads once for every
// group: the cluster, the membership's removal quorum, and the nodes of
// each group.
type groupsSeen struct {
	cs      *pb.ClusterState
	ms      *decide.Membership
	q       decide.Quorum
	byGroup map[string][]*pb.Node
	// dark are the failure domains whose nodes are all down at once
	// (decide.DarkDomains), consensus the consensus members by domain.
	dark      map[string]string
	consensus map[string]int
}

// groupSeen is what the loop read of one group: its provider, the
// machines it lists (and the dead ones it keeps), and its rollout.
type groupSeen struct {
	g        *pb.Group
	p        provider.Provider
	dk       deadKeeper
	machines []provider.Instance
	dead     []provider.Instance
	ro       *pb.Rollout
	roRev    int64
	// unreachable are the failure domains its provider could not list,
	// with why: their machines are unknown, not gone.
	unreachable map[string]string
}

func (l *groupLoop) tick(ctx context.Context) (loopResult, error) {
	groups, err := store.GroupList(ctx, l.cfg.Etcd)
	if err != nil {
		return loopResult{}, err
	}
	l.showGroups(groups)
	if len(groups) == 0 {
		return loopResult{}, nil
	}
	w, err := l.observe(ctx)
	if err != nil {
		return loopResult{}, err
	}
	var refusal *loopResult
	for _, g := range groups {
		res, acted, err := l.tickGroup(ctx, w, g)
		switch {
		case err != nil || acted:
			return res, err
		case res.refused && refusal == nil:
			refusal = &res
		}
	}
	return *orEmpty(refusal), nil
}

// groupEvent is the event of action a of group name.
func (l *groupLoop) groupEvent(name string, a *decide.GroupAction) *pb.Event {
	ev := l.events.Event("groups", a.Kind.String(), a.Node, a.Reason)
	ev.Group = name
	return ev
}

// showGroups drops the metrics of the groups gone since the last tick.
func (l *groupLoop) showGroups(groups []*pb.Group) {
	now := map[string]bool{}
	for _, g := range groups {
		now[g.Spec.GetName()] = true
	}
	for name := range l.shown {
		if !now[name] {
			l.metrics.GroupGone(name)
		}
	}
	l.shown = now
}

// observe reads what every group's decision shares.
func (l *groupLoop) observe(ctx context.Context) (*groupsSeen, error) {
	cs, err := store.ClusterLoad(ctx, l.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	ms, err := l.members.ObserveLocked(ctx)
	if err != nil {
		return nil, err
	}
	w := &groupsSeen{cs: cs, ms: ms, q: ms.RemovalQuorum(0), byGroup: map[string][]*pb.Node{}, consensus: map[string]int{}}
	var domainNodes []decide.DomainNode
	suspect := decide.SuspectAfter(l.cfg.HeartbeatInterval)
	now, heardSince := l.cfg.Now(), l.hb.ServingSince()
	for _, n := range l.reg.Nodes() {
		if n.Group != "" {
			w.byGroup[n.Group] = append(w.byGroup[n.Group], n)
		}
		if n.Domain == "" {
			continue
		}
		if _, member := ms.MemberOf[n.Id]; member || spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
			w.consensus[n.Domain]++
		}
		last, _ := l.hb.Get(n.Id)
		heard := n.Id == l.cfg.NodeID || now.Sub(latestOf(last, heardSince, n.StatusChanged.AsTime())) < suspect
		domainNodes = append(domainNodes, decide.DomainNode{ID: n.Id, Domain: n.Domain, Healthy: n.Status == pb.NodeStatus_NODE_STATUS_READY && heard})
	}
	w.dark = decide.DarkDomains(domainNodes)
	return w, nil
}

// observeGroup reads group g's machines through its provider, and its
// rollout. A provider that does not answer (no Docker daemon, a plugin
// that hangs or exits) is a refusal of that group, with the reason: the
// other groups are served (a listing that takes longer than listWait goes
// on in the background: listings), and `group ls` shows the group failing
// (its provider_failing) until its provider lists again.
func (l *groupLoop) observeGroup(ctx context.Context, cs *pb.ClusterState, g *pb.Group) (*groupSeen, *loopResult, error) {
	name := g.Spec.GetName()
	gs := &groupSeen{g: g}
	var err error
	gs.p, err = l.machines.Provider(g)
	sel := map[string]string{provider.LabelCluster: cs.ClusterId, provider.LabelGroup: name}
	var keepsDead bool
	gs.dk, keepsDead = gs.p.(deadKeeper)
	if err == nil {
		var listed groupListed
		listed, err = l.lists.take(ctx, name, func(ctx context.Context) (out groupListed, err error) {
			if keepsDead {
				// Before List: a machine dead now is not listed by it.
				out.dead, err = gs.dk.ListDead(ctx, sel)
				if err = out.partial(err); err != nil {
					return out, err
				}
			}
			out.machines, err = gs.p.List(ctx, sel)
			return out, out.partial(err)
		})
		gs.machines, gs.dead, gs.unreachable = listed.machines, listed.dead, listed.unreachable
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		reason := noAnswer(name) + err.Error()
		if g.ProviderFailing != reason {
			if err := l.groups.change(ctx, name, func(g *pb.Group) { g.ProviderFailing = reason }); err != nil {
				return nil, nil, err
			}
		}
		return nil, &loopResult{refused: true, group: name, reason: reason}, nil
	}
	if strings.HasPrefix(g.ProviderFailing, noAnswer(name)) {
		// It answers again.
		if err := l.groups.change(ctx, name, func(g *pb.Group) { g.ProviderFailing = "" }); err != nil {
			return nil, nil, err
		}
	}
	if gs.ro, gs.roRev, err = store.RolloutLoad(ctx, l.cfg.Etcd, name); err != nil {
		return nil, nil, err
	}
	return gs, nil, nil
}

// noAnswer begins the reason of group name's provider failing to list
// its machines.
func noAnswer(name string) string {
	return fmt.Sprintf("group %s: its provider does not answer: ", name)
}

// snapshot is decide.Group's snapshot of one group, from what the tick
// read (w, gs) and what this leader remembers (heartbeats, the Swarm's
// node list). It reads nothing else.
func (l *groupLoop) snapshot(w *groupsSeen, gs *groupSeen) decide.GroupSnapshot {
	g, ro := gs.g, gs.ro
	pol := spec.NormalRolloutPolicy(proto.Clone(OrEmptyPolicy(g.Spec.GetRollout())).(*pb.RolloutPolicy))
	snap := decide.GroupSnapshot{
		Name: g.Spec.GetName(), Size: int(g.Spec.GetSize()), Destroying: g.Destroying,
		ReplaceAfter: g.Spec.GetReplaceAfter().AsDuration(), JoinTimeout: g.Spec.GetJoinTimeout().AsDuration(),
		Voters: w.q.Voters, HealthyVoters: w.q.Healthy, Now: l.cfg.Now(),
		Rolling:   ro != nil && ro.State == pb.RolloutState_ROLLOUT_STATE_ROLLING && ro.TargetSha == g.ConfigSha,
		TargetSHA: g.ConfigSha, MaxParallel: int(g.Spec.GetMaxParallel()),
		ConsensusGroup: slices.Contains(g.Spec.GetRoles(), pb.Role_ROLE_CONSENSUS),
		Swarm:          w.cs.Swarm && l.swarm.Seen.Read(),
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
	snap.ReplaceAfterFloor = spec.ReplaceAfterFloor(l.cfg.DownAfter, l.cfg.HeartbeatInterval)
	snap.SuspectAfter, snap.HeardSince = decide.SuspectAfter(l.cfg.HeartbeatInterval), l.hb.ServingSince()
	if snap.Rolling {
		snap.Failures, snap.LastFailure = int(ro.Failures), ro.LastFailure
		snap.OnFailure, snap.RollBack, snap.PauseOnFailure = onFailure(pol, ro)
		snap.RollbackOf = ro.RollbackOf
		if ro.Started != nil {
			snap.RolloutStarted = ro.Started.AsTime()
		}
	}
	snap.Machines = groupMachines(gs.machines)
	snap.Domains, snap.ConsensusByDomain = g.Spec.GetDomains(), w.consensus
	snap.Dark = maps.Clone(w.dark)
	if snap.Dark == nil {
		snap.Dark = map[string]string{}
	}
	maps.Copy(snap.Dark, gs.unreachable)
	snap.Unlisted = map[string]bool{}
	for d := range gs.unreachable {
		snap.Unlisted[d] = true
	}
	snap.DarkSince = l.dark.seen(snap.Name, snap.Dark, snap.Now)
	if h := g.Spec.GetDomainHold(); h != nil {
		snap.DomainHold = h.AsDuration()
	} else if len(snap.Domains) > 0 {
		snap.DomainHold = spec.DefaultGroupDomainHold
	}
	ms := w.ms
	for _, n := range w.byGroup[snap.Name] {
		mem, member := ms.MemberOf[n.Id]
		gn := decide.GroupNode{
			ID: n.Id, InstanceID: n.InstanceId, Domain: n.Domain, Status: n.Status, Since: n.StatusChanged.AsTime(),
			Consensus: spec.HasRole(n, pb.Role_ROLE_CONSENSUS) || member,
			Learner:   member && mem.IsLearner,
			Refused:   n.Refused != "",
			Drained:   n.Availability == pb.Availability_AVAILABILITY_DRAIN,
			Leader:    n.Id == l.cfg.NodeID,
		}
		gn.HealthyVoter = ms.HealthyVoter(n.Id)
		gn.SwarmIn = n.SwarmNodeId != ""
		if sn, ok := l.swarm.Seen.Get(n.SwarmNodeId); ok && snap.Swarm {
			gn.SwarmManager, gn.SwarmVoter, gn.SwarmLeader = sn.Manager, sn.Reachable(), sn.Leader
		}
		if n.SwarmLeaveRequested != nil {
			gn.SwarmLeaveAsked = n.SwarmLeaveRequested.AsTime()
		}
		if last, ok := l.hb.Get(n.Id); ok {
			gn.LastHeard = last
		}
		if snap.Rolling && gn.Learner && n.ConfigSha == g.ConfigSha {
			faults.Point(faults.RolloutSurgeLearner)
		}
		snap.Nodes = append(snap.Nodes, gn)
	}
	return snap
}

// tickGroup observes, decides and acts on group g; acted says the tick
// is over (an action, or a change seen that makes the loop look again),
// else res may be the group's refusal and the next group is served.
func (l *groupLoop) tickGroup(ctx context.Context, w *groupsSeen, g *pb.Group) (res loopResult, acted bool, err error) {
	name := g.Spec.GetName()
	gs, refusal, err := l.observeGroup(ctx, w.cs, g)
	if refusal != nil || err != nil {
		return *orEmpty(refusal), false, err
	}
	snap := l.snapshot(w, gs)
	l.metrics.SetRollout(name, gs.ro, snap.ProgressDeadline)
	l.metrics.SetHeld(name, metrics.HeldRepairCeiling, g.RepairHeld != "")
	l.metrics.SetHeld(name, metrics.HeldSuspended, g.Suspended != "")
	l.metrics.SetHeld(name, metrics.HeldProviderFailing, g.ProviderFailing != "")
	l.metrics.SetHeld(name, metrics.HeldDomainDark, len(decide.HeldDomains(snap)) > 0)
	deadMachines := groupMachines(gs.dead)
	deaths := l.crashes.observe(name, g.ConfigSha, snap.Machines, snap.Nodes, snap.Now)
	deaths = append(deaths, l.crashes.foundDead(name, deadMachines, snap.Nodes, snap.Now)...)
	for _, d := range deaths {
		d.FailsRollout = d.failsRollout(snap)
		reason := l.machineExited(ctx, gs.p, name, d)
		if d.FailsRollout {
			// A new machine of the rollout died before it joined: a
			// failed machine, counted in the rollout's record.
			if err := l.countRolloutFailure(ctx, gs.ro, gs.roRev, reason); err != nil {
				return loopResult{}, true, err
			}
			if gs.ro, gs.roRev, err = store.RolloutLoad(ctx, l.cfg.Etcd, name); err != nil {
				return loopResult{}, true, err
			}
			if gs.ro == nil || gs.ro.State != pb.RolloutState_ROLLOUT_STATE_ROLLING || gs.ro.TargetSha != g.ConfigSha {
				return loopResult{}, true, nil // changed meanwhile: look again
			}
			snap.Failures, snap.LastFailure = int(gs.ro.Failures), gs.ro.LastFailure
		}
	}
	if err := l.clearDead(ctx, gs.dk, name, withoutNode(deadMachines, snap.Nodes)); err != nil {
		return loopResult{}, true, err
	}
	snap.Dead = withNode(deadMachines, snap.Nodes)
	a := decide.Group(snap)
	backoff := a != nil && l.crashes.hold(name, a.Kind, snap.Now) > 0
	l.metrics.SetHeld(name, metrics.HeldCrashBackoff, backoff)
	switch {
	case backoff:
		return loopResult{}, false, nil // its new machines die before joining, or its provider refused: not yet
	case a != nil && a.Kind == decide.GroupWait:
		return loopResult{}, false, nil // not a refusal: what it waits for makes it tick again
	case a == nil:
		l.prune(ctx, gs.p, name)
		return loopResult{}, false, nil
	case a.Kind == decide.GroupRefuse:
		return loopResult{refused: true, nodeID: a.Node, reason: a.Reason, group: name}, false, nil
	}
	if snap.Rolling {
		// A cancel, a pause or a new commit since the rollout was read
		// stops it before this change: look again.
		if err := store.RolloutCheck(ctx, l.lead.Fence, name, gs.roRev); errors.Is(err, store.ErrRolloutChanged) {
			return loopResult{}, true, nil
		} else if err != nil {
			return loopResult{}, true, err
		}
	}
	if err := l.act(ctx, w.cs, g, gs.p, a); err != nil {
		var refused *providerRefusal
		if !errors.As(err, &refused) || ctx.Err() != nil {
			// Not the group's: the leadership, etcd, the context.
			return loopResult{}, true, fmt.Errorf("group %s: %s: %w", name, a.Kind, err)
		}
		if err := l.providerRefused(ctx, snap, gs.ro, gs.roRev, a, refused); err != nil {
			return loopResult{}, true, err
		}
		return loopResult{}, false, nil // the group's failure: the other groups are served
	}
	if g.ProviderFailing != "" && (a.Kind == decide.GroupProvision || a.Kind == decide.GroupDestroyMachine) {
		// Its provider made or destroyed a machine again.
		if err := l.groups.change(ctx, name, func(g *pb.Group) { g.ProviderFailing = "" }); err != nil {
			return loopResult{}, true, err
		}
	}
	res = loopResult{action: a.Kind.String(), nodeID: a.Node, reason: a.Reason, group: name}
	if snap.Rolling {
		if res.recorded, err = l.noteRollout(ctx, gs.ro, gs.roRev, snap, a); err != nil {
			return loopResult{}, true, err
		}
	}
	return res, true, nil
}

// machineExited says that machine d.Machine of group name died before its
// node joined, with its last words where provider p keeps them, or went
// after its node left (d.Left), and makes the loop look again once the
// group's provisions may go on.
func (l *groupLoop) machineExited(ctx context.Context, p provider.Provider, name string, d crashDeath) string {
	var words string
	if lw, ok := p.(provider.LastWords); ok && !d.Left {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		w, err := lw.LastWords(wctx, d.Machine)
		cancel()
		if err != nil {
			supervisor.Logger(ctx).Warn("could not read a dead machine's output", zap.String("group", name), zap.String("machine", d.Machine), zap.Error(err))
		}
		words = w
	}
	res := loopResult{action: "machine-exited", reason: d.reason(name, words), group: name}
	if d.Left {
		res.action = "machine-left"
	}
	supervisor.Logger(ctx).Warn(res.action, zap.String("reason", res.reason))
	l.metrics.Actions.WithLabelValues("groups", res.action).Inc()
	l.events.recordResult(ctx, "groups", res)
	time.AfterFunc(d.Wait, l.groups.Kick)
	return res.reason
}

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
	res := loopResult{action: action, nodeID: a.Node, group: s.Name,
		reason: fmt.Sprintf("group %s: its provider could not %s (%d in a row; the group's next try in %v, the other groups go on): %v; it was to %s: %s", s.Name, what, inARow, wait, refused.err, a.Kind, a.Reason)}
	supervisor.Logger(ctx).Warn(action, zap.String("group", s.Name), zap.String("reason", res.reason))
	l.metrics.Actions.WithLabelValues("groups", action).Inc()
	l.events.recordResult(ctx, "groups", res)
	time.AfterFunc(wait, l.groups.Kick)
	// `group ls` shows the group failing, with the reason.
	if err := l.groups.change(ctx, s.Name, func(g *pb.Group) { g.ProviderFailing = res.reason }); err != nil {
		return err
	}
	if s.Rolling && a.Kind == decide.GroupProvision {
		// The rollout's new machine could not be made: a failed machine.
		return l.countRolloutFailure(ctx, ro, roRev, res.reason)
	}
	return nil
}

// OrEmptyPolicy is r, or an empty policy for a group committed before
// there were policies (normalRolloutPolicy gives it the defaults).
func OrEmptyPolicy(r *pb.RolloutPolicy) *pb.RolloutPolicy {
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
func (l *groupLoop) rollBack(ctx context.Context, r *pb.Rollout, rev int64, evs ...*pb.Event) error {
	l.groups.Mu.Lock()
	defer l.groups.Mu.Unlock()
	back, err := l.groups.RollBackLocked(ctx, r, rev, evs...)
	if errors.Is(err, store.ErrRolloutChanged) || err == nil && back == nil {
		return nil
	}
	if err != nil {
		return err
	}
	faults.Point(faults.RolloutAfterRollBack)
	l.metrics.Rollouts.WithLabelValues("rollback").Inc()
	supervisor.Logger(ctx).Warn("rollout failed: rolling back", zap.String("group", r.Group), zap.String("from", r.TargetSha), zap.String("to", back.TargetSha), zap.String("reason", r.Reason))
	l.groups.Kick()
	return nil
}

// rollingBackPrefix begins the reason of a rollback's record.
const rollingBackPrefix = "rolling back: "

// countRolloutFailure counts one failed machine in rollout ro (at mod
// revision rev), with its reason; a record changed meanwhile is left as
// it is (the loop looks again).
func (l *groupLoop) countRolloutFailure(ctx context.Context, ro *pb.Rollout, rev int64, reason string) error {
	r := proto.Clone(ro).(*pb.Rollout)
	r.Failures++
	r.LastFailure = reason
	err := store.RolloutSave(ctx, l.lead.Fence, r, rev)
	if errors.Is(err, store.ErrRolloutChanged) {
		return nil
	}
	return err
}

// act does what decide.Group decided.
func (l *groupLoop) act(ctx context.Context, cs *pb.ClusterState, g *pb.Group, p provider.Provider, a *decide.GroupAction) error {
	switch a.Kind {
	case decide.GroupProvision:
		ms := machineSpec(cs, pki.Fingerprint(l.pki.CA.Cert), g, l.reg.ManagerList())
		ms.Domain = a.Domain
		inst, err := l.machines.provision(ctx, p, ms)
		if err != nil {
			return err
		}
		a.Machine = inst.ID
		a.Reason += ": made machine " + inst.ID
		l.crashes.made(g.Spec.GetName(), inst.ID, g.ConfigSha)
		if a.Step != "" {
			faults.Point(faults.RolloutAfterProvision)
		}
		return nil
	case decide.GroupRepairHold, decide.GroupRepairResume:
		held := ""
		if a.Kind == decide.GroupRepairHold {
			held = a.Reason
		}
		now := timestamppb.New(l.cfg.Now())
		return l.groups.change(ctx, g.Spec.GetName(), func(g *pb.Group) {
			g.RepairHeld = held
			if held == "" {
				g.RepairResumed = now
			}
		})
	case decide.GroupDestroyMachine:
		if a.Repair {
			// Counted before the machine goes: a leader that dies between
			// the two has spent one of the budget rather than lost one.
			now := l.cfg.Now()
			window := spec.DefaultGroupReplacementWindow
			if w := g.Spec.GetReplacementWindow(); w != nil {
				window = w.AsDuration()
			}
			if err := l.groups.change(ctx, g.Spec.GetName(), func(g *pb.Group) {
				g.Replacements = slices.DeleteFunc(g.Replacements, func(t *timestamppb.Timestamp) bool { return now.Sub(t.AsTime()) >= window })
				g.Replacements = append(g.Replacements, timestamppb.New(now))
			}); err != nil {
				return err
			}
		}
		l.crashes.destroyed(g.Spec.GetName(), a.Machine)
		if err := l.machines.destroy(ctx, p, a.Machine); err != nil {
			return err
		}
		if a.Step != "" {
			faults.Point(faults.RolloutAfterDestroy)
		}
		return nil
	case decide.GroupSetDomain:
		return l.records.ChangeNode(ctx, a.Node, func(n *pb.Node) bool {
			changed := n.Domain != a.Domain
			n.Domain = a.Domain
			return changed
		})
	case decide.GroupDrain:
		return l.records.ChangeNode(ctx, a.Node, func(n *pb.Node) bool {
			n.Availability = pb.Availability_AVAILABILITY_DRAIN
			return true
		})
	case decide.GroupRolloutDone, decide.GroupRolloutFail:
		return nil // noteRollout writes the outcome
	case decide.GroupSwarmLeave:
		return l.records.ChangeNode(ctx, a.Node, func(n *pb.Node) bool {
			n.SwarmLeaveRequested = l.events.Timestamp()
			n.SwarmJoinRequested = false
			return true
		})
	case decide.GroupSwarmStay:
		return l.records.ChangeNode(ctx, a.Node, func(n *pb.Node) bool {
			had := n.SwarmLeaveRequested != nil
			n.SwarmLeaveRequested = nil
			return had
		})
	case decide.GroupRemoveNode:
		l.lead.MuNodes.Lock()
		defer l.lead.MuNodes.Unlock()
		n := l.reg.Node(a.Node)
		if n == nil {
			return nil // gone already
		}
		return l.roles.RemoveNode(ctx, n)
	case decide.GroupDemote:
		l.lead.MuNodes.Lock()
		defer l.lead.MuNodes.Unlock()
		n := l.reg.Node(a.Node)
		if n == nil {
			return nil
		}
		if _, err := l.roles.Demote(ctx, store.CloneNode(n)); err != nil {
			return err
		}
		if a.Step != "" {
			faults.Point(faults.RolloutAfterDemote)
		}
		return nil
	case decide.GroupDelete:
		l.machines.forget(g.Spec.GetName())
		l.crashes.forget(g.Spec.GetName())
		return store.GroupDestroy(ctx, l.lead.Fence, g.Spec.GetName())
	}
	return fmt.Errorf("unknown action %v", a.Kind)
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
	// faults: a point, a delay, a skewed clock) is not passed on to the
	// machines it makes, which a process provider starts with the
	// leader's environment.
	for _, k := range []string{faults.Env, faults.DelayEnv, faults.ClockSkewEnv} {
		if _, set := env[k]; !set {
			env[k] = ""
		}
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

// noteRollout records in the rollout what action a of its group did: the
// node in flight and its step, the progress, and the outcome once it is
// done or failed. A record changed meanwhile (a cancel) is left as it is.
// The outcome's event goes in the outcome's transaction (a leader killed
// right after it has said why): recorded says it is written, or moot,
// the outcome not taken.
func (l *groupLoop) noteRollout(ctx context.Context, ro *pb.Rollout, rev int64, snap decide.GroupSnapshot, a *decide.GroupAction) (recorded bool, err error) {
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
		evs, recorded = []*pb.Event{l.groupEvent(snap.Name, a)}, true
	case decide.GroupRolloutFail:
		r.State, r.Finished, r.Reason = pb.RolloutState_ROLLOUT_STATE_FAILED, timestamppb.New(now), a.Reason
		r.Failures = uint32(max(snap.Failures, int(r.Failures)))
		if a.Machine != "" {
			r.Failures = uint32(snap.Failures + 1)
			r.LastFailure = a.Reason
		}
		l.metrics.Rollouts.WithLabelValues("failed").Inc()
		evs, recorded = []*pb.Event{l.groupEvent(snap.Name, a)}, true
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
	err = store.RolloutSave(ctx, l.lead.Fence, r, rev, evs...)
	if errors.Is(err, store.ErrRolloutChanged) {
		return recorded, nil
	}
	return recorded, err
}
