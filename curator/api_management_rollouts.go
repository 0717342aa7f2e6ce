package curator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// A group's past configs and the way back to them: each rollout record
// keeps the configs before its own (History, newest first, bounded), so
// `rollout history` reads one record, `rollout undo` commits a past
// template again (an ordinary commit: a new rollout, with its history),
// and `rollout restart` starts a cancelled or failed rollout anew, or the
// one a rollback undid. SHAs may be given by a unique prefix.

// minSHAPrefix is the shortest prefix of a config SHA taken.
const minSHAPrefix = 4

// knownSHAs are the config SHAs rollout r knows of: its target, the
// previous one and its history's.
func knownSHAs(r *pb.Rollout) []string {
	out := []string{r.TargetSha}
	if r.PreviousSha != "" {
		out = append(out, r.PreviousSha)
	}
	for _, h := range r.History {
		out = append(out, h.Sha)
	}
	return out
}

// resolveConfigSHA is the one SHA of known that prefix begins (at least
// minSHAPrefix hex digits); an unknown or ambiguous prefix is refused,
// saying so.
func resolveConfigSHA(group, prefix string, known []string) (string, error) {
	p := strings.ToLower(prefix)
	if len(p) < minSHAPrefix || len(p) > 64 || strings.Trim(p, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%w: config SHA %s: want at least %d hex digits of one (`curator rollout history %s` lists them)", spec.ErrInvalid, spec.QuoteShort(prefix), minSHAPrefix, group)
	}
	var match []string
	for _, k := range known {
		if strings.HasPrefix(k, p) && !slices.Contains(match, k) {
			match = append(match, k)
		}
	}
	switch len(match) {
	case 0:
		return "", fmt.Errorf("%w: no config SHA of group %s begins with %s (`curator rollout history %s` lists them)", spec.ErrNotFound, group, p, group)
	case 1:
		return match[0], nil
	}
	for i := range match {
		match[i] = spec.ShortSHA(match[i])
	}
	return "", fmt.Errorf("%w: %s is the beginning of more than one config SHA of group %s (%s): give more digits", spec.ErrInvalid, p, group, strings.Join(match, ", "))
}

// templateOf finds the template of config sha in rollout r's record.
func templateOf(r *pb.Rollout, sha string) *pb.InstanceTemplate {
	if r.PreviousSha == sha && r.PreviousTemplate != nil {
		return r.PreviousTemplate
	}
	for _, h := range r.History {
		if h.Sha == sha && h.Template != nil {
			return h.Template
		}
	}
	return nil
}

// redoRollout is ChangeRollout's restart and undo.
//   - undo: commits the group again with a past config's template (--to,
//     or the one before the current), which starts a rollout to it;
//   - restart: a cancelled or failed rollout to the group's config rolls
//     again, its failures forgotten; a rollback that is done restarts the
//     rollout it undid (a commit of that config again).
func (m *managementAPI) redoRollout(ctx context.Context, st *leader.State, req *pb.ChangeRolloutRequest) (*pb.Rollout, error) {
	st.Groups.Mu.Lock()
	defer st.Groups.Mu.Unlock()
	g, err := groupNamed(ctx, st, req.Group)
	if err != nil {
		return nil, err
	}
	if g.Destroying {
		return nil, fmt.Errorf("%w: group %s is being destroyed", spec.ErrPrecondition, req.Group)
	}
	r, rev, err := store.RolloutLoad(ctx, st.Cfg.Etcd, req.Group)
	if err != nil {
		return nil, err
	}
	if r == nil || r.TargetSha != g.ConfigSha {
		return nil, fmt.Errorf("%w: group %s has had no rollout to %s from: one starts when a commit changes its config SHA", spec.ErrPrecondition, req.Group, req.Action)
	}
	if req.TargetSha != "" {
		sha, err := resolveConfigSHA(req.Group, req.TargetSha, knownSHAs(r))
		if err != nil {
			return nil, err
		}
		if sha != r.TargetSha {
			return nil, fmt.Errorf("%w: group %s rolls to %s now, not to %s: nothing changed", spec.ErrPrecondition, req.Group, spec.ShortSHA(r.TargetSha), spec.ShortSHA(sha))
		}
	}
	to, why := "", ""
	switch req.Action {
	case "undo":
		to, why = r.PreviousSha, "undo by an operator"
		if req.ToSha != "" {
			if to, err = resolveConfigSHA(req.Group, req.ToSha, knownSHAs(r)); err != nil {
				return nil, err
			}
		}
		if to == g.ConfigSha {
			return nil, fmt.Errorf("%w: group %s is on config %s already: nothing to undo to (`curator rollout history %s`)", spec.ErrPrecondition, req.Group, spec.ShortSHA(to), req.Group)
		}
	case "restart":
		switch {
		case r.State == pb.RolloutState_ROLLOUT_STATE_CANCELLED || r.State == pb.RolloutState_ROLLOUT_STATE_FAILED:
			was := spec.RolloutWord(r.State)
			r.State, r.Finished, r.Failures, r.LastFailure = pb.RolloutState_ROLLOUT_STATE_ROLLING, nil, 0, ""
			r.Started, r.Reason = st.Events.Timestamp(), "restarted by an operator after it was "+was
			if err := store.RolloutSave(ctx, st.Lead.Fence, r, rev); errors.Is(err, store.ErrRolloutChanged) {
				return nil, fmt.Errorf("%w: the rollout of group %s changed meanwhile: try again", spec.ErrPrecondition, req.Group)
			} else if err != nil {
				return nil, err
			}
			m.s.metrics.Rollouts.WithLabelValues("restarted").Inc()
			st.Groups.RecordEvent(ctx, req.Group, "restart-rollout", fmt.Sprintf("the rollout of group %s to %s, %s, was restarted by an operator", req.Group, spec.ShortSHA(r.TargetSha), was))
			st.Groups.Kick()
			return r, nil
		case r.RollbackOf != "" && r.State == pb.RolloutState_ROLLOUT_STATE_DONE:
			to, why = r.RollbackOf, "restart by an operator of the rollout a rollback undid"
		default:
			return nil, fmt.Errorf("%w: the rollout of group %s to %s is %s: only a cancelled or failed one, or one a rollback undid, can be restarted", spec.ErrPrecondition, req.Group, spec.ShortSHA(r.TargetSha), spec.RolloutWord(r.State))
		}
	}
	t := templateOf(r, to)
	if t == nil {
		return nil, fmt.Errorf("%w: group %s keeps no template of config %s", spec.ErrPrecondition, req.Group, spec.ShortSHA(to))
	}
	gs := proto.Clone(g.Spec).(*pb.GroupSpec)
	gs.Template = proto.Clone(t).(*pb.InstanceTemplate)
	// What ran with that template runs again: its binary or image, its
	// digest read anew (a binary replaced in place since is another).
	spec.ProviderFromRelease(gs)
	if err := leader.RecordRelease(ctx, gs, g, t.Release != nil, identityFrom(ctx).opRole); err != nil {
		return nil, err
	}
	_, back, err := m.commitLocked(ctx, st, gs, g, why)
	if err != nil {
		return nil, err
	}
	return back, nil
}

// failedPaused says whether rollout r of group g is paused by its
// failure (failure_action pause): as many of its machines failed as the
// policy's max_failures, so a resume would fail it again at once.
func failedPaused(g *pb.Group, r *pb.Rollout) bool {
	pol := spec.NormalRolloutPolicy(proto.Clone(leader.OrEmptyPolicy(g.Spec.GetRollout())).(*pb.RolloutPolicy))
	return r.State == pb.RolloutState_ROLLOUT_STATE_PAUSED && r.TargetSha == g.ConfigSha &&
		r.Failures >= max(1, pol.MaxFailures)
}

// cancelFailed is a cancel of rollout r (its record at mod revision rev),
// paused by its failure: the group's template would stay the failed one,
// and every repair after the cancel would make a machine of it. So the
// cancel puts the previous template back, as a rollback does, in one
// fenced transaction with the cancel's event, and returns the rollback's
// record (store.ErrRolloutChanged if r changed meanwhile). One with no
// previous template, or itself a rollback (its previous template is the
// one that failed before), is refused, saying how to get back. muGroups
// is held.
func cancelFailed(ctx context.Context, st *leader.State, r *pb.Rollout, rev int64) (*pb.Rollout, error) {
	short := spec.ShortSHA(r.TargetSha)
	switch {
	case r.RollbackOf != "":
		return nil, fmt.Errorf("%w: the rollout of group %s to %s is a rollback from %s, and it failed too (%s): a cancel would leave the group on a config that fails. "+
			"Go back to a config that works with `curator rollout undo %s --to SHA` (`curator rollout history %s` lists them), or commit a fixed template",
			spec.ErrPrecondition, r.Group, short, spec.ShortSHA(r.RollbackOf), r.Reason, r.Group, r.Group)
	case r.PreviousTemplate == nil:
		return nil, fmt.Errorf("%w: the rollout of group %s to %s failed (%s), and no previous config is kept to go back to: a cancel would leave the group on a config that fails. Commit a fixed template",
			spec.ErrPrecondition, r.Group, short, r.Reason)
	}
	failed := proto.Clone(r).(*pb.Rollout)
	why := failed.Reason
	failed.State, failed.Finished = pb.RolloutState_ROLLOUT_STATE_CANCELLED, st.Events.Timestamp()
	failed.Reason = "cancelled by an operator after it failed: " + why
	ev := st.Events.Event("groups", "cancel-rollout", "", fmt.Sprintf("the rollout of group %s to %s, paused by its failure (%s), was cancelled by an operator: the group goes back to its previous config %s", r.Group, short, why, spec.ShortSHA(r.PreviousSha)))
	ev.Group = r.Group
	back, err := st.Groups.RollBackLocked(ctx, failed, rev, ev)
	if err != nil {
		return nil, err
	}
	if back == nil {
		return nil, fmt.Errorf("%w: group %s changed meanwhile: try again", spec.ErrPrecondition, r.Group)
	}
	return back, nil
}
