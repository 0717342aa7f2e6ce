package leader

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/internal/metrics"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// groupRecords are the group records and their rollouts as a leadership
// changes them: a commit, a rollback, a change of what the group loop
// keeps in the record. Each is a read-modify-write under mu (the group
// API's commits hold it too), written fenced, and wakes the group loop
// (kick).
type groupRecords struct {
	fence  *store.Fence
	cfg    *Config
	events *eventLog
	Mu     sync.Mutex
	// kicks makes the group loop look at once.
	kicks chan struct{}
}

// Kick makes the group loop look at once.
func (gr *groupRecords) Kick() { supervisor.Kick(gr.kicks) }

// RecordEvent records an event of group, in the group loop's name; failing to is
// logged, the change itself made.
func (gr *groupRecords) RecordEvent(ctx context.Context, group, action, reason string) {
	ev := gr.events.Event("groups", action, "", reason)
	ev.Group = group
	if err := gr.events.record(ctx, ev); err != nil {
		gr.cfg.Logger.Warn("could not record event", zap.Error(err))
	}
}

// Caller is who a change is judged by and logged as: an operator
// certificate's role and name, which the API read from the call, or the
// admin a loop acts for (the upgrade loop, as whoever started it).
type Caller struct {
	// OpRole is the operator role (pki.OperatorRoles).
	OpRole string
	Name   string
}

func (c Caller) String() string { return c.Name + " (" + c.OpRole + ")" }

// CommittedSpec is old's spec as a commit compares with it (nil for a
// new group): normalized, a copy.
func CommittedSpec(old *pb.Group) *pb.GroupSpec {
	if old == nil {
		return nil
	}
	from := proto.Clone(old.Spec).(*pb.GroupSpec)
	spec.NormalizeGroupSpec(from)
	return from
}

// Commit stores gs over group old (nil: a new group), with mu held,
// judged as who's change (spec.CheckGroupChange: an operator may not
// change what the machines run). When the config SHA changes, it starts
// a rollout to it that replaces any other and keeps the configs before it
// (the previous one, what a rollback returns to, and the history). why,
// if given, says why in the event (an undo, an upgrade).
func (gr *groupRecords) Commit(ctx context.Context, who Caller, metrics *metrics.Metrics, gs *pb.GroupSpec, old *pb.Group, why string) (*pb.Group, *pb.Rollout, error) {
	from := CommittedSpec(old)
	if err := spec.CheckGroupChange(who.OpRole, who.Name, from, gs); err != nil {
		return nil, nil, err
	}
	now := timestamppb.New(gr.cfg.Now())
	g := &pb.Group{Spec: gs, ConfigSha: spec.GroupConfigSHA(gs.Template), Created: now, Updated: now, SpecRevision: old.GetSpecRevision() + 1}
	var rollout *pb.Rollout
	if old != nil {
		g.Created = old.Created
		// What the group loop keeps of the group (its repair hold and
		// budget) and a suspension outlive a commit.
		g.RepairHeld, g.Replacements, g.Suspended, g.RepairResumed = old.RepairHeld, old.Replacements, old.Suspended, old.RepairResumed
		if old.ConfigSha != g.ConfigSha {
			prev, _, err := store.RolloutLoad(ctx, gr.cfg.Etcd, gs.Name)
			if err != nil {
				return nil, nil, err
			}
			rollout = &pb.Rollout{Group: gs.Name, TargetSha: g.ConfigSha, State: pb.RolloutState_ROLLOUT_STATE_ROLLING, Started: now, Total: gs.Size,
				PreviousSha: old.ConfigSha, PreviousTemplate: old.Spec.Template, History: spec.RolloutHistory(old, prev)}
		}
	}
	if err := store.GroupCommit(ctx, gr.fence, g, rollout); err != nil {
		return nil, nil, err
	}
	action := "commit-group"
	reason := fmt.Sprintf("group %s committed: size %d, config SHA %s", gs.Name, gs.Size, g.ConfigSha[:12])
	if rollout != nil {
		action = "start-rollout"
		reason = fmt.Sprintf("group %s committed with config SHA %s (was %s): rolling its machines", gs.Name, spec.ShortSHA(g.ConfigSha), spec.ShortSHA(old.ConfigSha))
		metrics.Rollouts.WithLabelValues("started").Inc()
	}
	if why != "" {
		reason += " (" + why + ")"
	}
	gr.RecordEvent(ctx, gs.Name, action, reason)
	gr.cfg.Logger.With(zap.Stringer("caller", who)).Info("group committed", zap.String("group", gs.Name), zap.Uint32("size", gs.Size), zap.String("config_sha", g.ConfigSha), zap.String("why", why))
	gr.Kick()
	return g, rollout, nil
}

// RollBackLocked is rollBack's transaction, with muGroups held: the
// group's template becomes the previous one again and a new record
// rolls to it, both in one fenced transaction on the failed record (r,
// at mod revision rev; store.ErrRolloutChanged if it changed). The
// failed rollout's reason is kept in the rollback's. It returns the
// rollback's record, or nil when the group is gone or was committed
// anew meanwhile (nothing to roll back).
func (gr *groupRecords) RollBackLocked(ctx context.Context, r *pb.Rollout, rev int64, evs ...*pb.Event) (*pb.Rollout, error) {
	g, err := store.GroupLoad(ctx, gr.cfg.Etcd, r.Group)
	if err != nil || g == nil || g.Destroying || g.ConfigSha != r.TargetSha {
		return nil, err // gone, or committed anew meanwhile
	}
	now := timestamppb.New(gr.cfg.Now())
	bad := g.Spec.Template
	g.Spec.Template = proto.Clone(r.PreviousTemplate).(*pb.InstanceTemplate)
	spec.ProviderFromRelease(g.Spec) // the binary or image that ran before
	g.ConfigSha = spec.GroupConfigSHA(g.Spec.Template)
	g.Updated = now
	g.SpecRevision++ // a describe before the rollback is stale after it
	back := &pb.Rollout{
		Group: r.Group, TargetSha: g.ConfigSha, State: pb.RolloutState_ROLLOUT_STATE_ROLLING, Started: now, Total: g.Spec.Size,
		PreviousSha: r.TargetSha, PreviousTemplate: bad, RollbackOf: r.TargetSha,
		Reason: rollingBackPrefix + r.Reason,
	}
	back.History = append([]*pb.RolloutSummary{spec.SummaryOf(r, bad)}, r.History...)
	back.History = back.History[:min(len(back.History), spec.MaxRolloutHistory)]
	evs = append(evs, gr.events.Event("groups", "rollback-rollout", "", fmt.Sprintf("group %s rolls back from %s to its previous config %s: %s", r.Group, spec.ShortSHA(r.TargetSha), spec.ShortSHA(g.ConfigSha), r.Reason)))
	if err := store.RolloutRollBack(ctx, gr.fence, g, back, rev, evs...); err != nil {
		return nil, err
	}
	return back, nil
}

// change changes group name's record (as change says), fenced, with
// the group API's lock held so that a commit meanwhile is not lost.
func (gr *groupRecords) change(ctx context.Context, name string, change func(*pb.Group)) error {
	gr.Mu.Lock()
	defer gr.Mu.Unlock()
	return store.GroupChange(ctx, gr.fence, name, change)
}
