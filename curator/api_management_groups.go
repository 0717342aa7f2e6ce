package curator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/process"
)

// The management API's groups: commit, list, describe, destroy. They write
// the group records; the group loop does the rest.

func (m *managementAPI) CommitGroup(ctx context.Context, req *pb.CommitGroupRequest) (*pb.CommitGroupResponse, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	st.Groups.Mu.Lock()
	defer st.Groups.Mu.Unlock()
	gs, old, err := prepareCommit(ctx, st, req)
	if err != nil {
		return nil, err
	}
	if old != nil && proto.Equal(old.Spec, gs) {
		v, err := m.groupView(ctx, st, old)
		return &pb.CommitGroupResponse{Group: v, Changed: false}, err
	}
	// The revision is checked here, under the group lock that every
	// write of a group's spec holds and on the leader alone (its writes
	// fenced): nothing can change the spec between this read and the
	// commit's write, so of two operators racing from one describe the
	// second is refused.
	if err := checkRevision(gs.Name, old, req.ExpectedRevision); err != nil {
		noteChanges(ctx, groupChanges(old.GetSpec(), gs))
		return nil, err
	}
	g, _, err := m.commitLocked(ctx, st, gs, old, "")
	if err != nil {
		return nil, err
	}
	v, err := m.groupView(ctx, st, g)
	return &pb.CommitGroupResponse{Group: v, Changed: true}, err
}

// prepareCommit is the spec a commit of req stores (normalized, its
// release recorded) and the group it is committed over (nil: a new
// one), with every check of the spec made but the caller's role's
// (commitLocked) and the revision's (checkRevision). st's group lock is
// held.
func prepareCommit(ctx context.Context, st *leader.State, req *pb.CommitGroupRequest) (*pb.GroupSpec, *pb.Group, error) {
	if req.Spec == nil {
		return nil, nil, fmt.Errorf("%w: no group spec", spec.ErrInvalid)
	}
	gs := proto.Clone(req.Spec).(*pb.GroupSpec)
	spec.NormalizeGroupSpec(gs)
	if err := spec.ValidateGroupSpec(gs); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", spec.ErrInvalid, err)
	}
	old, err := store.GroupLoad(ctx, st.Cfg.Etcd, gs.Name)
	if err != nil {
		return nil, nil, err
	}
	// The floor of replace_after comes from this cluster's timings, so
	// it is checked here rather than in the spec alone; a group stored
	// below it (before the floor, or under other timings) may keep its
	// value through a commit (a scale, say): the loop repairs it after
	// the floor.
	if old == nil || old.Spec.GetReplaceAfter().AsDuration() != gs.GetReplaceAfter().AsDuration() {
		if err := spec.CheckReplaceAfterFloor(gs, st.Cfg.DownAfter, st.Cfg.HeartbeatInterval); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", spec.ErrInvalid, err)
		}
	}
	if old != nil && old.Destroying {
		return nil, nil, fmt.Errorf("%w: group %s is being destroyed: wait until `curator group ls` no longer lists it, then commit it again", spec.ErrPrecondition, gs.Name)
	}
	if err := checkProviderOnHost(gs); err != nil {
		return nil, nil, err
	}
	if err := leader.RecordRelease(ctx, gs, old, false, identityFrom(ctx).opRole); err != nil {
		return nil, nil, err
	}
	return gs, old, nil
}

func (m *managementAPI) ListGroups(ctx context.Context, _ *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	groups, err := store.GroupList(ctx, st.Cfg.Etcd)
	if err != nil {
		return nil, err
	}
	out := &pb.ListGroupsResponse{}
	for _, g := range groups {
		v, err := m.groupView(ctx, st, g)
		if err != nil {
			return nil, err
		}
		out.Groups = append(out.Groups, v)
	}
	return out, nil
}

func (m *managementAPI) GetGroup(ctx context.Context, req *pb.GetGroupRequest) (*pb.GroupView, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	g, err := groupNamed(ctx, st, req.Name)
	if err != nil {
		return nil, err
	}
	return m.groupView(ctx, st, g)
}

// DestroyGroup marks a group for destruction; the group loop takes its
// machines away. It refuses when the group's voters are all there is of the
// quorum: destroying them would destroy the cluster.
func (m *managementAPI) DestroyGroup(ctx context.Context, req *pb.DestroyGroupRequest) (*pb.GroupView, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	st.Groups.Mu.Lock()
	defer st.Groups.Mu.Unlock()
	g, err := groupNamed(ctx, st, req.Name)
	if err != nil {
		return nil, err
	}
	if !g.Destroying {
		ms, err := st.Members.ObserveLocked(ctx)
		if err != nil {
			return nil, err
		}
		q, left := ms.RemovalQuorum(0), ms.QuorumWithout(func(n *pb.Node) bool { return n.Group == g.Spec.Name })
		if left.Voters < q.Voters && !left.OK() {
			return nil, fmt.Errorf("%w: group %s holds %d of the cluster's %d etcd voters, and the %d left would not make a healthy majority: "+
				"destroying it would destroy the cluster; first commit another group with roles [consensus] and wait until its nodes are voters (`curator cluster info`)",
				spec.ErrPrecondition, g.Spec.Name, q.Voters-left.Voters, q.Voters, left.Voters)
		}
		g.Destroying = true
		g.Updated = timestamppb.New(st.Cfg.Now())
		if err := store.GroupSave(ctx, st.Lead.Fence, g); err != nil {
			return nil, err
		}
		st.Groups.RecordEvent(ctx, g.Spec.Name, "destroy-group", fmt.Sprintf("group %s is to be destroyed, with its %d voters", g.Spec.Name, q.Voters-left.Voters))
		st.Groups.Kick()
	}
	return m.groupView(ctx, st, g)
}

// SuspendGroup suspends a group, or all of them, or resumes them: a
// suspended group's loop makes and destroys nothing (a restored cluster's
// groups come back so, see Recover) until it is resumed.
func (m *managementAPI) SuspendGroup(ctx context.Context, req *pb.SuspendGroupRequest) (*pb.SuspendGroupResponse, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	st.Groups.Mu.Lock()
	defer st.Groups.Mu.Unlock()
	var groups []*pb.Group
	if req.All {
		if groups, err = store.GroupList(ctx, st.Cfg.Etcd); err != nil {
			return nil, err
		}
	} else {
		g, err := groupNamed(ctx, st, req.Name)
		if err != nil {
			return nil, err
		}
		groups = []*pb.Group{g}
	}
	out := &pb.SuspendGroupResponse{}
	for _, g := range groups {
		name := g.Spec.GetName()
		was := g.Suspended
		if req.Resume == (was == "") {
			continue // already as asked
		}
		action, reason := "suspend-group", fmt.Sprintf("group %s is suspended by an operator: its loop makes and destroys nothing until `curator group resume %s`", name, name)
		g.Suspended = "suspended by an operator at " + st.Cfg.Now().UTC().Format(time.RFC3339)
		if req.Resume {
			action, reason = "resume-group", fmt.Sprintf("group %s is resumed: its loop makes and destroys its machines again (it was %s)", name, was)
			g.Suspended = ""
		}
		g.Updated = timestamppb.New(st.Cfg.Now())
		if err := store.GroupSave(ctx, st.Lead.Fence, g); err != nil {
			return nil, err
		}
		st.Groups.RecordEvent(ctx, name, action, reason)
		m.s.logger(ctx).Info(action, zap.String("group", name), zap.String("was", was))
		v, err := m.groupView(ctx, st, g)
		if err != nil {
			return nil, err
		}
		out.Groups = append(out.Groups, v)
	}
	st.Groups.Kick()
	return out, nil
}

// commitLocked stores gs over group old (nil: a new group), with st's
// muGroups held: when the config SHA changes, with a rollout to it that
// replaces any other (a cancel of the old SHA cannot stop this one) and
// keeps the configs before it (the previous one, what a rollback returns
// to, and the history). why, if given, says why in the event (an undo).
//
// Every write of a group's spec by a call comes here, so that its rule
// holds for each: the caller's role may make the change (an operator may
// not change what the machines run: spec.CheckGroupChange), and the
// audit entry says what it set (or tried to).
func (m *managementAPI) commitLocked(ctx context.Context, st *leader.State, gs *pb.GroupSpec, old *pb.Group, why string) (*pb.Group, *pb.Rollout, error) {
	noteChanges(ctx, groupChanges(leader.CommittedSpec(old), gs))
	return st.Groups.Commit(ctx, identityFrom(ctx).caller(), m.s.metrics, gs, old, why)
}

// checkProviderOnHost refuses a spec whose provider could not make a
// machine on this host (the leader's, where the provider runs): a
// process binary or a plugin that is not an executable file here. It
// runs nothing: the caller's role is checked after (commitLocked).
func checkProviderOnHost(gs *pb.GroupSpec) error {
	if p := gs.GetProvider().GetProcess(); p != nil {
		if err := process.CheckBinary(p.Binary); err != nil {
			return fmt.Errorf("%w: provider.process.binary: %v: the process provider could not start a machine", spec.ErrInvalid, err)
		}
	}
	if p := gs.GetProvider().GetPlugin(); p != nil {
		if err := process.CheckBinary(p.Path); err != nil {
			return fmt.Errorf("%w: provider.plugin.path: %v: the leader could not start the plugin", spec.ErrInvalid, err)
		}
	}
	return nil
}

// groupNamed loads a group or says it does not exist.
func groupNamed(ctx context.Context, st *leader.State, name string) (*pb.Group, error) {
	if err := spec.ValidateGroupName(name); err != nil {
		return nil, fmt.Errorf("%w: %v", spec.ErrInvalid, err)
	}
	g, err := store.GroupLoad(ctx, st.Cfg.Etcd, name)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("%w: no group %s: `curator group ls` lists them", spec.ErrNotFound, spec.QuoteShort(name))
	}
	return g, nil
}

// groupView is a group with what the leader sees of it: its machines
// (through its provider) and its nodes, and its rollout's progress. Ready
// counts the ready nodes whose machine the provider lists (a node's
// record outlives its machine for a moment after a scale down, a leader
// kill or a restore). A done rollout's count is the group as it is now:
// its ready nodes on the rollout's SHA of its size, not what the rollout
// recorded before a scale.
//
// A group whose provider does not answer (a plugin that hangs or keeps
// exiting, a Docker daemon down) is shown with no machine, and failing
// with the provider's error: the other groups, and what the group loop
// said of it, are still shown.
func (m *managementAPI) groupView(ctx context.Context, st *leader.State, g *pb.Group) (*pb.GroupView, error) {
	live, err := observeGroup(ctx, st, g)
	var refused *providerListError
	switch {
	case errors.As(err, &refused) && ctx.Err() == nil:
		live = &liveGroup{machines: map[string]bool{}}
		if g.ProviderFailing == "" {
			g = proto.Clone(g).(*pb.Group)
			g.ProviderFailing = err.Error()
		}
	case err != nil:
		return nil, err
	}
	r, _, err := store.RolloutLoad(ctx, st.Cfg.Etcd, g.Spec.GetName())
	if err != nil {
		return nil, err
	}
	return live.view(g, r), nil
}

// view is group g, whose rollout record is r (nil: none), as live sees it.
func (live *liveGroup) view(g *pb.Group, r *pb.Rollout) *pb.GroupView {
	v := &pb.GroupView{Group: g}
	for _, n := range live.nodes {
		v.NodeIds = append(v.NodeIds, n.Id)
		if live.ready(n, "") {
			v.Ready++
		}
	}
	slices.Sort(v.NodeIds)
	v.Machines = uint32(len(live.machines))
	v.DomainMachines, v.UnreachableDomains = live.byDomain, live.unreachable
	if r != nil && r.TargetSha == g.ConfigSha {
		v.RolloutState = spec.RolloutWord(r.State)
		r = live.rollout(r)
		v.RolloutUpdated, v.RolloutTotal = r.Updated, r.Total
		if r.State == pb.RolloutState_ROLLOUT_STATE_DONE {
			v.RolloutUpdated, v.RolloutTotal = 0, g.Spec.GetSize()
			for _, n := range live.nodes {
				if live.ready(n, r.TargetSha) {
					v.RolloutUpdated++
				}
			}
		}
	}
	return v
}

// ready says whether node n of the group is ready with its machine listed
// (a node of no machine, added to the group by hand, counts as listed),
// and on config SHA sha unless that is "".
func (live *liveGroup) ready(n *pb.Node, sha string) bool {
	return n.Status == pb.NodeStatus_NODE_STATUS_READY && (n.InstanceId == "" || live.machines[n.InstanceId]) && (sha == "" || n.ConfigSha == sha)
}

// liveGroup is a group's nodes and the machines its provider lists, as
// the API reads them.
type liveGroup struct {
	nodes    []*pb.Node
	machines map[string]bool
	// byDomain counts the machines by failure domain; unreachable are
	// the domains the provider could not list, sorted.
	byDomain    map[string]uint32
	unreachable []string
}

// observeGroup reads group g's nodes and machines.
func observeGroup(ctx context.Context, st *leader.State, g *pb.Group) (*liveGroup, error) {
	live := &liveGroup{machines: map[string]bool{}, byDomain: map[string]uint32{}}
	for _, n := range st.Reg.Nodes() {
		if n.Group == g.Spec.GetName() {
			live.nodes = append(live.nodes, n)
		}
	}
	p, err := st.Machines.Provider(g)
	if err != nil {
		return nil, err
	}
	cs, err := store.ClusterLoad(ctx, st.Cfg.Etcd)
	if err != nil {
		return nil, err
	}
	machines, err := p.List(ctx, map[string]string{provider.LabelCluster: cs.ClusterId, provider.LabelGroup: g.Spec.GetName()})
	if down, partial := provider.Unreachable(err); partial {
		// What the domains that answered list: the others' machines
		// are unknown, and named so.
		live.unreachable, err = slices.Sorted(maps.Keys(down)), nil
	}
	if err != nil {
		return nil, &providerListError{fmt.Errorf("group %s: its provider does not answer: %w", g.Spec.GetName(), err)}
	}
	for _, mc := range machines {
		live.machines[mc.ID] = true
		if mc.Domain != "" || len(g.Spec.GetDomains()) > 0 {
			live.byDomain[mc.Domain]++ // a group of no domains shows none
		}
	}
	for _, d := range g.Spec.GetDomains() {
		if _, ok := live.byDomain[d]; !ok && !slices.Contains(live.unreachable, d) {
			live.byDomain[d] = 0
		}
	}
	return live, nil
}

// providerListError is a group's provider's failure to list its
// machines.
type providerListError struct{ error }

func (e *providerListError) Unwrap() error { return e.error }

// rollout is r with its progress as the group is now, the one count that
// `rollout status` and the dashboard both show: its ready nodes on the
// target SHA whose machines exist (of a done rollout, what it recorded).
// The node in flight is named only while it, or its machine, exists.
func (live *liveGroup) rollout(r *pb.Rollout) *pb.Rollout {
	r = proto.Clone(r).(*pb.Rollout)
	if r.State != pb.RolloutState_ROLLOUT_STATE_DONE {
		r.Updated = 0
		for _, n := range live.nodes {
			if n.ConfigSha == r.TargetSha && n.Status == pb.NodeStatus_NODE_STATUS_READY && live.machines[n.InstanceId] {
				r.Updated++
			}
		}
	}
	if r.Node != "" && !live.machines[r.Node] && !slices.ContainsFunc(live.nodes, func(n *pb.Node) bool { return n.Id == r.Node }) {
		r.Node, r.Step = "", ""
	}
	return r
}

func (m *managementAPI) GetRollout(ctx context.Context, req *pb.GetRolloutRequest) (*pb.Rollout, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	g, err := groupNamed(ctx, st, req.Group)
	if err != nil {
		return nil, err
	}
	r, _, err := store.RolloutLoad(ctx, st.Cfg.Etcd, req.Group)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("%w: group %s has had no rollout: one starts when a commit changes its config SHA", spec.ErrNotFound, req.Group)
	}
	live, err := observeGroup(ctx, st, g)
	if err != nil {
		return nil, err
	}
	return live.rollout(r), nil
}

// changeRolloutFor bounds how long ChangeRollout tries again when the
// group loop wrote the rollout between its read and its write.
const changeRolloutFor = 5 * time.Second

// ChangeRollout cancels, pauses or resumes the rollout of a group to the
// SHA the request names (empty: its current target). A change for another
// SHA than the rollout's is refused: a cancel meant for an old config
// never stops a new one.
func (m *managementAPI) ChangeRollout(ctx context.Context, req *pb.ChangeRolloutRequest) (*pb.Rollout, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	var want pb.RolloutState
	from := []pb.RolloutState{pb.RolloutState_ROLLOUT_STATE_ROLLING, pb.RolloutState_ROLLOUT_STATE_PAUSED}
	switch req.Action {
	case "cancel":
		want = pb.RolloutState_ROLLOUT_STATE_CANCELLED
	case "pause":
		want, from = pb.RolloutState_ROLLOUT_STATE_PAUSED, from[:1]
	case "resume":
		want, from = pb.RolloutState_ROLLOUT_STATE_ROLLING, from[1:]
	case "restart", "undo":
		return m.redoRollout(ctx, st, req)
	default:
		return nil, fmt.Errorf("%w: rollout action %s: want cancel, pause, resume, restart or undo", spec.ErrInvalid, spec.QuoteShort(req.Action))
	}
	word := map[string]string{"cancel": "cancelled", "pause": "paused", "resume": "resumed"}[req.Action]
	st.Groups.Mu.Lock()
	defer st.Groups.Mu.Unlock()
	g, err := groupNamed(ctx, st, req.Group)
	if err != nil {
		return nil, err
	}
	// The group loop writes the rollout's progress as it goes: a change
	// that lost the race to it reads the record again and decides anew,
	// after a short wait of its own that grows and is drawn at random,
	// so that it does not lose to the loop's rhythm each time (a busy
	// host makes a read and a write slower than the loop's steps).
	var r *pb.Rollout
	var done bool
	giveUp := time.Now().Add(changeRolloutFor)
	tries := 0
	for {
		tries++
		r, done, err = changeRolloutOnce(ctx, st, g, req, want, from, word)
		if !errors.Is(err, store.ErrRolloutChanged) {
			break
		}
		wait := rand.N(min(time.Millisecond<<min(tries, 6), 50*time.Millisecond)) + time.Millisecond
		if time.Now().Add(wait).After(giveUp) {
			return nil, fmt.Errorf("%w: the rollout of group %s changed under each of %d tries to %s it in %v: try again", spec.ErrPrecondition, req.Group, tries, req.Action, changeRolloutFor)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
	switch {
	case err != nil:
		return nil, err
	case done:
		st.Groups.Kick()
		return r, nil
	}
	m.s.metrics.Rollouts.WithLabelValues(word).Inc()
	st.Groups.RecordEvent(ctx, req.Group, req.Action+"-rollout", fmt.Sprintf("the rollout of group %s to %s was %s by an operator (%d of %d updated)", req.Group, spec.ShortSHA(r.TargetSha), word, r.Updated, r.Total))
	st.Groups.Kick()
	return r, nil
}

// changeRolloutOnce makes one try at ChangeRollout on the record as it is
// now (of group g); done when the rollout is already in the state asked
// for, or the change recorded its own events (a cancel of a failed
// rollout, which rolls back).
func changeRolloutOnce(ctx context.Context, st *leader.State, g *pb.Group, req *pb.ChangeRolloutRequest, want pb.RolloutState, from []pb.RolloutState, word string) (*pb.Rollout, bool, error) {
	r, rev, err := store.RolloutLoad(ctx, st.Cfg.Etcd, req.Group)
	if err != nil {
		return nil, false, err
	}
	switch {
	case r == nil:
		return nil, false, fmt.Errorf("%w: group %s has no rollout to %s", spec.ErrPrecondition, req.Group, req.Action)
	}
	if req.TargetSha != "" {
		sha, err := resolveConfigSHA(req.Group, req.TargetSha, knownSHAs(r))
		if err != nil {
			return nil, false, err
		}
		if sha != r.TargetSha {
			return nil, false, fmt.Errorf("%w: group %s rolls to %s now, not to %s: nothing changed", spec.ErrPrecondition, req.Group, spec.ShortSHA(r.TargetSha), spec.ShortSHA(sha))
		}
	}
	switch {
	case r.State == want:
		return r, true, nil
	case !slices.Contains(from, r.State):
		return nil, false, fmt.Errorf("%w: the rollout of group %s to %s is %s: it cannot be %s", spec.ErrPrecondition, req.Group, spec.ShortSHA(r.TargetSha), spec.RolloutWord(r.State), word)
	}
	if want == pb.RolloutState_ROLLOUT_STATE_CANCELLED && failedPaused(g, r) {
		back, err := cancelFailed(ctx, st, r, rev)
		return back, err == nil, err
	}
	r.State = want
	if want == pb.RolloutState_ROLLOUT_STATE_CANCELLED {
		r.Finished = st.Events.Timestamp()
		r.Reason = "cancelled by an operator"
	}
	return r, false, store.RolloutSave(ctx, st.Lead.Fence, r, rev)
}
