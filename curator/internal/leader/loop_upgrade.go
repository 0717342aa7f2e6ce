package leader

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/internal/metrics"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// The upgrade loop takes the cluster to a release (`curator upgrade`):
// it commits each group of the upgrade's record onto the binary or image,
// one group at a time, in the record's order (the groups with the
// consensus role first), and waits for the group's rollout to end before
// it commits the next. The rollouts do the rest as any rollout does:
// surge first, the curator leader's node last, a failed one rolled back
// under the group's policy, which stops the upgrade, saying where.
//
// Everything it knows is in etcd: the record and the groups' rollouts. A
// leader killed in the middle leaves it to the next, which reads where it
// got to; a group committed but not yet marked rolling (a crash between
// the two writes) is found rolling by its config and its rollout.

// Upgrade group states (UpgradeGroup.state).
const (
	UpgradeWaiting   = "waiting"
	UpgradeRolling   = "rolling"
	upgradeDone      = "done"
	upgradeFailed    = "failed"
	UpgradeSkipped   = "skipped"
	UpgradeCancelled = "cancelled"
)

// upgradeLoop carries an upgrade on, group after group.
type upgradeLoop struct {
	cfg     *Config
	fence   *store.Fence
	reg     *store.Registry
	groups  *groupRecords
	events  *eventLog
	metrics *metrics.Metrics
	kick    chan struct{}
}

func newUpgradeLoop(st *State, metrics *metrics.Metrics) *upgradeLoop {
	return &upgradeLoop{cfg: st.Cfg, fence: st.Lead.Fence, reg: st.Reg, groups: st.Groups, events: st.Events, metrics: metrics, kick: st.kickUpgrade}
}

func (l *upgradeLoop) spec() loopSpec {
	return loopSpec{
		name:   "upgrade",
		tick:   l.tick,
		kick:   l.kick,
		resync: l.cfg.GroupInterval,
	}
}

// KickUpgrade makes the upgrade loop look at once.
func KickUpgrade(st *State) { supervisor.Kick(st.kickUpgrade) }

func (l *upgradeLoop) tick(ctx context.Context) (loopResult, error) {
	if res, acted, err := l.migrateStorage(ctx); err != nil || acted {
		return res, err
	}
	u, rev, err := store.UpgradeLoad(ctx, l.cfg.Etcd)
	if err != nil || u == nil || u.State != pb.UpgradeState_UPGRADE_STATE_ROLLING {
		return loopResult{}, err
	}
	// The group API's writes and the upgrade's are serialised: a cancel
	// never lands between a group's commit and the record that says so.
	l.groups.Mu.Lock()
	defer l.groups.Mu.Unlock()
	for i, ug := range u.Groups {
		if ug.State != UpgradeWaiting && ug.State != UpgradeRolling {
			continue
		}
		g, err := store.GroupLoad(ctx, l.cfg.Etcd, ug.Name)
		switch {
		case err != nil:
			return loopResult{}, err
		case g == nil || g.Destroying:
			return l.skipGone(ctx, u, rev, i)
		case ug.State == UpgradeWaiting:
			return l.upgradeCommit(ctx, u, rev, i, g)
		}
		return l.upgradeFollow(ctx, u, rev, i, g)
	}
	u.State, u.Finished = pb.UpgradeState_UPGRADE_STATE_DONE, l.events.Timestamp()
	reason := fmt.Sprintf("the cluster is upgraded to %s: every group rolled onto it", UpgradeTarget(u))
	return l.saveUpgrade(ctx, u, rev, "upgrade-done", reason)
}

// upgradeCommit commits group i of u (g, as it is now) onto the
// upgrade's release.
func (l *upgradeLoop) upgradeCommit(ctx context.Context, u *pb.Upgrade, rev int64, i int, g *pb.Group) (loopResult, error) {
	ug := u.Groups[i]
	// The upgrade reads and commits as the admin who started it would:
	// it only ever changes the binary or the image.
	as := Caller{OpRole: pki.OperatorAdmin, Name: "upgrade started by " + u.StartedBy}
	gs := proto.Clone(g.Spec).(*pb.GroupSpec)
	spec.NormalizeGroupSpec(gs)
	spec.UpgradeProvider(gs, u.Binary, u.Image)
	if err := RecordRelease(ctx, gs, g, true, as.OpRole); err != nil {
		return l.failUpgrade(ctx, u, rev, i, err.Error())
	}
	ug.PreviousSha = g.ConfigSha
	if spec.GroupConfigSHA(gs.Template) == g.ConfigSha {
		// On the release already: either it was, or this upgrade
		// committed it and a leader died before it said so. A spec
		// that differs all the same (the binary at another path, the
		// same bytes) is committed, which rolls nothing.
		if !proto.Equal(g.Spec, gs) {
			if _, _, err := l.groups.Commit(ctx, as, l.metrics, gs, g, "upgrade to "+UpgradeTarget(u)); err != nil {
				return l.failUpgrade(ctx, u, rev, i, fmt.Sprintf("commit: %v", err))
			}
		}
		r, _, err := store.RolloutLoad(ctx, l.cfg.Etcd, ug.Name)
		if err != nil {
			return loopResult{}, err
		}
		ug.TargetSha = g.ConfigSha
		if r != nil && r.TargetSha == g.ConfigSha && r.State != pb.RolloutState_ROLLOUT_STATE_DONE {
			ug.State, ug.PreviousSha = UpgradeRolling, r.PreviousSha
			return l.saveUpgrade(ctx, u, rev, "upgrade-group", fmt.Sprintf("upgrade to %s: group %s rolls onto it (committed before a new leader)", UpgradeTarget(u), ug.Name))
		}
		ug.State, ug.Reason = upgradeDone, "it ran the release already"
		return l.saveUpgrade(ctx, u, rev, "upgrade-group-done", fmt.Sprintf("upgrade to %s: group %s runs it already", UpgradeTarget(u), ug.Name))
	}
	committed, _, err := l.groups.Commit(ctx, as, l.metrics, gs, g, "upgrade to "+UpgradeTarget(u))
	if err != nil {
		return l.failUpgrade(ctx, u, rev, i, fmt.Sprintf("commit: %v", err))
	}
	ug.State, ug.TargetSha = UpgradeRolling, committed.ConfigSha
	l.groups.Kick()
	return l.saveUpgrade(ctx, u, rev, "upgrade-group", fmt.Sprintf("upgrade to %s: group %s committed onto it (config SHA %s, was %s): rolling its machines",
		UpgradeTarget(u), ug.Name, spec.ShortSHA(ug.TargetSha), spec.ShortSHA(ug.PreviousSha)))
}

// upgradeFollow looks at the rollout of group i of u, committed onto the
// release: done, the upgrade goes on; failed, rolled back, cancelled or
// overtaken by another commit, it stops. g is the group as it is now.
func (l *upgradeLoop) upgradeFollow(ctx context.Context, u *pb.Upgrade, rev int64, i int, g *pb.Group) (loopResult, error) {
	ug := u.Groups[i]
	r, _, err := store.RolloutLoad(ctx, l.cfg.Etcd, ug.Name)
	if err != nil {
		return loopResult{}, err
	}
	switch {
	case r != nil && r.RollbackOf == ug.TargetSha:
		why := r.Reason
		for _, h := range r.History {
			if h.Sha == ug.TargetSha {
				why = h.Reason // the failed rollout's own
				break
			}
		}
		return l.failUpgrade(ctx, u, rev, i, fmt.Sprintf("its rollout to %s failed (%s): the group rolls back to %s", spec.ShortSHA(ug.TargetSha), why, spec.ShortSHA(r.TargetSha)))
	case g.ConfigSha != ug.TargetSha:
		return l.failUpgrade(ctx, u, rev, i, fmt.Sprintf("it was committed anew during the upgrade (config SHA %s, not the upgrade's %s)", spec.ShortSHA(g.ConfigSha), spec.ShortSHA(ug.TargetSha)))
	case r == nil || r.TargetSha != ug.TargetSha:
		return l.failUpgrade(ctx, u, rev, i, "its rollout record is not the upgrade's")
	}
	switch r.State {
	case pb.RolloutState_ROLLOUT_STATE_DONE:
		ug.State = upgradeDone
		return l.saveUpgrade(ctx, u, rev, "upgrade-group-done", fmt.Sprintf("upgrade to %s: group %s runs it (%d machines)", UpgradeTarget(u), ug.Name, r.Total))
	case pb.RolloutState_ROLLOUT_STATE_FAILED, pb.RolloutState_ROLLOUT_STATE_CANCELLED:
		return l.failUpgrade(ctx, u, rev, i, fmt.Sprintf("its rollout to %s is %s: %s", spec.ShortSHA(ug.TargetSha), spec.RolloutWord(r.State), r.Reason))
	}
	return loopResult{waiting: true, reason: fmt.Sprintf("upgrade to %s: group %s is rolling onto it (%s)", UpgradeTarget(u), ug.Name, spec.RolloutWord(r.State))}, nil
}

// skipGone marks group i of u skipped: it was destroyed meanwhile.
func (l *upgradeLoop) skipGone(ctx context.Context, u *pb.Upgrade, rev int64, i int) (loopResult, error) {
	ug := u.Groups[i]
	ug.State, ug.Reason = UpgradeSkipped, "the group was destroyed during the upgrade"
	return l.saveUpgrade(ctx, u, rev, "upgrade-group-skipped", fmt.Sprintf("upgrade to %s: group %s skipped: %s", UpgradeTarget(u), ug.Name, ug.Reason))
}

// failUpgrade ends upgrade u at group i, saying why.
func (l *upgradeLoop) failUpgrade(ctx context.Context, u *pb.Upgrade, rev int64, i int, why string) (loopResult, error) {
	ug := u.Groups[i]
	ug.State, ug.Reason = upgradeFailed, why
	u.State, u.Finished = pb.UpgradeState_UPGRADE_STATE_FAILED, l.events.Timestamp()
	u.Reason = fmt.Sprintf("group %s: %s; the groups after it were left as they are", ug.Name, why)
	return l.saveUpgrade(ctx, u, rev, "upgrade-failed", fmt.Sprintf("upgrade to %s stopped at group %s: %s", UpgradeTarget(u), ug.Name, why))
}

// saveUpgrade writes u (read at rev) with its event in one transaction;
// a record changed meanwhile (a cancel) is read again at the next tick.
func (l *upgradeLoop) saveUpgrade(ctx context.Context, u *pb.Upgrade, rev int64, action, reason string) (loopResult, error) {
	err := store.UpgradeSave(ctx, l.fence, u, rev, l.events.Event("upgrade", action, "", reason))
	if errors.Is(err, store.ErrUpgradeChanged) {
		return loopResult{again: true}, nil
	}
	if err != nil {
		return loopResult{}, err
	}
	return loopResult{action: action, reason: reason, recorded: true}, nil
}

// UpgradeTarget names u's release: its binary, its image, or both.
func UpgradeTarget(u *pb.Upgrade) string {
	return spec.QuoteShort(spec.ReleaseName(u.Binary, u.Image))
}

// UpgradeOrder is the order an upgrade takes groups in: those with the
// consensus role first, then the others, each by name.
func UpgradeOrder(groups []*pb.Group) []*pb.Group {
	out := slices.Clone(groups)
	slices.SortStableFunc(out, func(a, b *pb.Group) int { return spec.ConsensusFirst(a.Spec, b.Spec) })
	return out
}
