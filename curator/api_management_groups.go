package curator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
)

// The management API's groups: commit, list, describe, destroy. They write
// the group records; the group loop does the rest.

func (m *managementAPI) CommitGroup(ctx context.Context, req *pb.CommitGroupRequest) (*pb.CommitGroupResponse, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	if req.Spec == nil {
		return nil, fmt.Errorf("%w: no group spec", ErrInvalid)
	}
	spec := proto.Clone(req.Spec).(*pb.GroupSpec)
	NormalizeGroupSpec(spec)
	if err := ValidateGroupSpec(spec); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	st.muGroups.Lock()
	defer st.muGroups.Unlock()
	old, err := groupLoad(ctx, st.cfg.Etcd, spec.Name)
	if err != nil {
		return nil, err
	}
	if old != nil && old.Destroying {
		return nil, fmt.Errorf("%w: group %s is being destroyed: wait until `curator group ls` no longer lists it, then commit it again", ErrPrecondition, spec.Name)
	}
	if old != nil && proto.Equal(old.Spec, spec) {
		v, err := m.groupView(ctx, st, old)
		return &pb.CommitGroupResponse{Group: v, Changed: false}, err
	}
	now := timestamppb.New(st.cfg.Now())
	g := &pb.Group{Spec: spec, ConfigSha: GroupConfigSHA(spec.Template), Created: now, Updated: now}
	var rollout *pb.Rollout
	if old != nil {
		g.Created = old.Created
		if old.ConfigSha != g.ConfigSha {
			// A new config: a rollout to it, replacing any other (a
			// cancel of the old SHA cannot stop this one).
			rollout = &pb.Rollout{Group: spec.Name, TargetSha: g.ConfigSha, State: pb.RolloutState_ROLLOUT_STATE_ROLLING, Started: now, Total: spec.Size}
		}
	}
	if err := groupCommit(ctx, st.leadership, g, rollout); err != nil {
		return nil, err
	}
	action := "commit-group"
	reason := fmt.Sprintf("group %s committed: size %d, config SHA %s", spec.Name, spec.Size, g.ConfigSha[:12])
	if rollout != nil {
		action = "start-rollout"
		reason = fmt.Sprintf("group %s committed with config SHA %s (was %s): rolling its machines", spec.Name, shortConfigSHA(g.ConfigSha), shortConfigSHA(old.ConfigSha))
		m.s.metrics.Rollouts.WithLabelValues("started").Inc()
	}
	st.recordGroupEvent(ctx, action, reason)
	m.s.logger(ctx).Info("group committed", zap.String("group", spec.Name), zap.Uint32("size", spec.Size), zap.String("config_sha", g.ConfigSha))
	kickGroups(st)
	v, err := m.groupView(ctx, st, g)
	return &pb.CommitGroupResponse{Group: v, Changed: true}, err
}

func (m *managementAPI) ListGroups(ctx context.Context, _ *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	groups, err := groupList(ctx, st.cfg.Etcd)
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
	st.muGroups.Lock()
	defer st.muGroups.Unlock()
	g, err := groupNamed(ctx, st, req.Name)
	if err != nil {
		return nil, err
	}
	if !g.Destroying {
		st.muNodes.Lock()
		ms, err := st.observeMembership(ctx)
		st.muNodes.Unlock()
		if err != nil {
			return nil, err
		}
		q, left := ms.quorumAfter(0, 0), ms.quorumWithout(func(n *pb.Node) bool { return n.Group == g.Spec.Name })
		if left.voters < q.voters && !left.ok() {
			return nil, fmt.Errorf("%w: group %s holds %d of the cluster's %d etcd voters, and the %d left would not make a healthy majority: "+
				"destroying it would destroy the cluster; first commit another group with roles [consensus] and wait until its nodes are voters (`curator cluster info`)",
				ErrPrecondition, g.Spec.Name, q.voters-left.voters, q.voters, left.voters)
		}
		g.Destroying = true
		g.Updated = timestamppb.New(st.cfg.Now())
		if err := groupSave(ctx, st.leadership, g); err != nil {
			return nil, err
		}
		st.recordGroupEvent(ctx, "destroy-group", fmt.Sprintf("group %s is to be destroyed, with its %d voters", g.Spec.Name, q.voters-left.voters))
		kickGroups(st)
	}
	return m.groupView(ctx, st, g)
}

// groupNamed loads a group or says it does not exist.
func groupNamed(ctx context.Context, st *leaderState, name string) (*pb.Group, error) {
	if err := ValidateNodeName(name); err != nil {
		return nil, fmt.Errorf("%w: group %v", ErrInvalid, err)
	}
	g, err := groupLoad(ctx, st.cfg.Etcd, name)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("%w: no group %s: `curator group ls` lists them", ErrNotFound, QuoteShort(name))
	}
	return g, nil
}

// groupView is a group with what the leader sees of it: its machines
// (through its provider) and its nodes.
func (m *managementAPI) groupView(ctx context.Context, st *leaderState, g *pb.Group) (*pb.GroupView, error) {
	v := &pb.GroupView{Group: g}
	for _, n := range st.reg.nodes() {
		if n.Group != g.Spec.GetName() {
			continue
		}
		v.NodeIds = append(v.NodeIds, n.Id)
		if n.Status == pb.NodeStatus_NODE_STATUS_READY {
			v.Ready++
		}
	}
	slices.Sort(v.NodeIds)
	p, err := st.providers.get(g, st.cfg.Logger)
	if err != nil {
		return nil, err
	}
	cs, err := clusterLoad(ctx, st.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	machines, err := p.List(ctx, map[string]string{provider.LabelCluster: cs.ClusterId, provider.LabelGroup: g.Spec.GetName()})
	if err != nil {
		return nil, fmt.Errorf("group %s: list machines: %w", g.Spec.GetName(), err)
	}
	v.Machines = uint32(len(machines))
	r, _, err := rolloutLoad(ctx, st.cfg.Etcd, g.Spec.GetName())
	if err != nil {
		return nil, err
	}
	if r != nil && r.TargetSha == g.ConfigSha {
		v.RolloutState = rolloutWord(r.State)
	}
	return v, nil
}

// rolloutWord is a rollout state as the CLI shows it: rolling, paused,
// done, cancelled, failed.
func rolloutWord(s pb.RolloutState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "ROLLOUT_STATE_"))
}

func (m *managementAPI) GetRollout(ctx context.Context, req *pb.GetRolloutRequest) (*pb.Rollout, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	if _, err := groupNamed(ctx, st, req.Group); err != nil {
		return nil, err
	}
	r, _, err := rolloutLoad(ctx, st.cfg.Etcd, req.Group)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("%w: group %s has had no rollout: one starts when a commit changes its config SHA", ErrNotFound, req.Group)
	}
	return r, nil
}

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
	default:
		return nil, fmt.Errorf("%w: rollout action %s: want cancel, pause or resume", ErrInvalid, QuoteShort(req.Action))
	}
	word := map[string]string{"cancel": "cancelled", "pause": "paused", "resume": "resumed"}[req.Action]
	st.muGroups.Lock()
	defer st.muGroups.Unlock()
	if _, err := groupNamed(ctx, st, req.Group); err != nil {
		return nil, err
	}
	// The group loop writes the rollout's progress as it goes: a change
	// that lost the race to it reads the record again and decides anew.
	const tries = 10
	var r *pb.Rollout
	var done bool
	for i := 0; ; i++ {
		r, done, err = changeRolloutOnce(ctx, st, req, want, from, word)
		if !errors.Is(err, errRolloutChanged) {
			break
		}
		if i == tries-1 {
			return nil, fmt.Errorf("%w: the rollout of group %s changed under each of %d tries to %s it: try again", ErrPrecondition, req.Group, tries, req.Action)
		}
	}
	switch {
	case err != nil:
		return nil, err
	case done:
		return r, nil
	}
	m.s.metrics.Rollouts.WithLabelValues(word).Inc()
	st.recordGroupEvent(ctx, req.Action+"-rollout", fmt.Sprintf("the rollout of group %s to %s was %s by an operator (%d of %d updated)", req.Group, shortConfigSHA(r.TargetSha), word, r.Updated, r.Total))
	kickGroups(st)
	return r, nil
}

// changeRolloutOnce makes one try at ChangeRollout on the record as it is
// now; done when the rollout is already in the state asked for.
func changeRolloutOnce(ctx context.Context, st *leaderState, req *pb.ChangeRolloutRequest, want pb.RolloutState, from []pb.RolloutState, word string) (*pb.Rollout, bool, error) {
	r, rev, err := rolloutLoad(ctx, st.cfg.Etcd, req.Group)
	if err != nil {
		return nil, false, err
	}
	switch {
	case r == nil:
		return nil, false, fmt.Errorf("%w: group %s has no rollout to %s", ErrPrecondition, req.Group, req.Action)
	case req.TargetSha != "" && req.TargetSha != r.TargetSha:
		return nil, false, fmt.Errorf("%w: group %s rolls to %s now, not to %s: nothing changed", ErrPrecondition, req.Group, shortConfigSHA(r.TargetSha), shortConfigSHA(req.TargetSha))
	case r.State == want:
		return r, true, nil
	case !slices.Contains(from, r.State):
		return nil, false, fmt.Errorf("%w: the rollout of group %s to %s is %s: it cannot be %s", ErrPrecondition, req.Group, shortConfigSHA(r.TargetSha), rolloutWord(r.State), word)
	}
	r.State = want
	if want == pb.RolloutState_ROLLOUT_STATE_CANCELLED {
		r.Finished = st.timestamp()
		r.Reason = "cancelled by an operator"
	}
	return r, false, rolloutSave(ctx, st.leadership, r, rev)
}

// recordGroupEvent keeps an event of the group API (a commit, a destroy)
// beside the group loop's; failing to is logged, not fatal.
func (st *leaderState) recordGroupEvent(ctx context.Context, action, reason string) {
	ev := &pb.Event{Time: st.timestamp(), Loop: "groups", Action: action, Reason: reason, Leader: st.cfg.NodeID, Term: st.rev}
	if err := eventRecord(ctx, st.leadership, ev); err != nil {
		st.cfg.Logger.Warn("could not record event", zap.Error(err))
	}
}
