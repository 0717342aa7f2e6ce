package leader

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/internal/metrics"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// A leader loop observes the whole state, decides on at most one action
// (a pure function), and acts. It is level-triggered: each tick recomputes
// from scratch, so a missed event or a new leader loses nothing; etcd watch
// events (and a loop's own watch, such as the swarm sync's of the Swarm's
// node events) only make it tick sooner, and a periodic resync covers what
// has no watch (etcd's member list) or what a watch missed. After an action it waits at least minGap
// before the next, so a loop that disagrees with reality cannot hammer it.
// A failed tick ends the runnable and the supervisor restarts it with
// backoff.

// loopResult is what one tick did.
type loopResult struct {
	// action is empty when there was nothing to do.
	action string
	nodeID string
	reason string
	// group is the group the result is about (the group loop's), kept
	// with its event.
	group string
	// refused: the loop found something wrong it will not touch.
	refused bool
	// again: tick again after the gap, as after an action (a change
	// held back, the changes behind it going on).
	again bool
	// waiting: the loop waits for a step another loop takes (reason
	// says which); not a refusal, logged once when it changes, and the
	// loop ticks again on the change that step makes.
	waiting bool
	// recorded: the action's event went in the action's own transaction
	// (or the action was not taken): the loop does not record it again.
	recorded bool
}

// loopRunner runs one leadership's loops: each tick under the lease
// guard, its outcome counted, logged and recorded (events). One is made
// per leadership, and lives as long as it.
type loopRunner struct {
	cfg     *Config
	guard   *leaseGuard
	reg     *store.Registry
	metrics *metrics.Metrics
	events  *eventLog
}

// loops lists every loop a leader runs, each given the parts it uses. A
// new loop is a file loop_<name>.go with its type, observe, decide and
// act, and one line here.
func loops(st *State, metrics *metrics.Metrics) []loopSpec {
	return []loopSpec{
		newSyncLoop(st, metrics).spec(),
		newDemotionLoop(st).spec(),
		newLearnerLoop(st).spec(),
		newHealthLoop(st, metrics).spec(),
		newPlacementLoop(st).spec(),
		newApprovalLoop(st).spec(),
		newGroupLoop(st, metrics).spec(),
		newUpgradeLoop(st, metrics).spec(),
		newReaperLoop(st).spec(),
		newSwarmLoop(st, metrics).spec(),
	}
}

// Run runs the leader's runnables: the join batches and every loop,
// counted in metrics.
func (st *State) Run(ctx context.Context, metrics *metrics.Metrics) error {
	r := &loopRunner{cfg: st.Cfg, guard: st.Guard, reg: st.Reg, metrics: metrics, events: st.Events}
	runnables := map[string]supervisor.Runnable{
		"joins":              st.runJoins,
		"membership-changes": st.Members.follow,
	}
	for _, spec := range loops(st, metrics) {
		runnables[spec.name] = func(ctx context.Context) error { return r.run(ctx, spec) }
	}
	if err := supervisor.RunGroup(ctx, runnables); err != nil {
		return err
	}
	supervisor.Signal(ctx, supervisor.Healthy)
	<-ctx.Done()
	return ctx.Err()
}

// membershipLoop is the spec of a loop that decides on the membership
// snapshot: it ticks on changes of the nodes that matter to membership,
// on each membership change the local etcd member applies (members.follow)
// and on SyncInterval (etcd's member list has no watch: the safety net). The snapshot is
// observed under muNodes (members.locked), so that no other change of a
// node comes between what a loop decided on and its act.
func membershipLoop(name string, cfg *Config, m *members, tick func(ctx context.Context, ms *decide.Membership) (loopResult, error)) loopSpec {
	return loopSpec{
		name:        name,
		tick:        m.locked(tick),
		nodeChanges: store.MembershipChange,
		kick:        m.changes.subscribe(),
		resync:      cfg.SyncInterval,
		minGap:      cfg.MinActionGap,
	}
}

type loopSpec struct {
	name string
	// tick observes, decides and acts once.
	tick func(ctx context.Context) (loopResult, error)
	// nodeChanges, if set, picks the changes of node records (old nil for
	// a new node, new nil for a deleted one) that trigger a tick.
	nodeChanges func(old, new *pb.Node) bool
	// kick, if set, also triggers a tick.
	kick <-chan struct{}
	// watch, if set, runs beside the loop, started and ended with it (and
	// not run with PollOnly): a watch of something outside etcd that
	// kicks the loop (kick) when it changes.
	watch func(ctx context.Context)
	// resync is the period of ticks without events.
	resync time.Duration
	// minGap is the least time between two actions.
	minGap time.Duration
}

// run runs one loop until ctx ends or a tick fails.
func (l *loopRunner) run(ctx context.Context, spec loopSpec) error {
	lg := supervisor.Logger(ctx)
	var trigger <-chan struct{}
	if spec.nodeChanges != nil && !l.cfg.PollOnly {
		ch, unsubscribe := l.reg.Subscribe(spec.nodeChanges)
		defer unsubscribe()
		trigger = ch
	}
	if spec.watch != nil && !l.cfg.PollOnly {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			spec.watch(wctx)
		}()
		defer func() {
			cancel()
			<-done
		}()
	}

	supervisor.Signal(ctx, supervisor.Healthy)
	resync := time.NewTicker(spec.resync)
	defer resync.Stop()
	var divergedAt time.Time
	for {
		if !l.guard.Held() {
			// In doubt about the lease: act on nothing until it is
			// renewed (or lost, which ends the leadership).
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-resync.C:
				continue
			}
		}
		res, err := spec.tick(ctx)
		l.metrics.Ticks.WithLabelValues(spec.name).Inc()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			l.metrics.Errors.WithLabelValues(spec.name).Inc()
			return err
		}
		now := l.cfg.Now()
		switch {
		case res.refused:
			l.metrics.Refusals.WithLabelValues(spec.name).Inc()
			lg.Error("refusing to act", zap.String("node", res.nodeID), zap.String("reason", res.reason))
			l.events.recordResult(ctx, spec.name, res)
		case res.waiting:
			if l.events.newRefusal(spec.name, "waiting: "+res.reason) {
				lg.Info("waiting", zap.String("node", res.nodeID), zap.String("reason", res.reason))
			}
		case res.action != "":
			l.events.clearRefusal(spec.name)
			if divergedAt.IsZero() {
				divergedAt = now
			}
			l.metrics.Actions.WithLabelValues(spec.name, res.action).Inc()
			lg.Info(res.action, zap.String("node", res.nodeID), zap.String("reason", res.reason))
			l.events.recordResult(ctx, spec.name, res)
			if l.cfg.PollOnly {
				// The fixed poll: one change per period, nothing sooner.
				break
			}
			// More may be needed: tick again after the gap.
			if err := supervisor.Sleep(ctx, spec.minGap); err != nil {
				return err
			}
			continue
		case res.again:
			// A change held back, nothing done: not converged.
		default:
			l.events.clearRefusal(spec.name)
			if !divergedAt.IsZero() {
				l.metrics.Converge.WithLabelValues(spec.name).Observe(now.Sub(divergedAt).Seconds())
				divergedAt = time.Time{}
			}
		}
		if res.again && !l.cfg.PollOnly {
			if err := supervisor.Sleep(ctx, spec.minGap); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-trigger:
		case <-spec.kick:
		case <-resync.C:
		}
	}
}

// orEmpty is *r, or no result for nil.
func orEmpty(r *loopResult) *loopResult {
	if r == nil {
		return &loopResult{}
	}
	return r
}
