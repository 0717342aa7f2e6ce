package curator

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/curatorproject/curator/curator/decide"
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

// leaderLoops runs the leader's loops. One is made per leadership, and
// lives as long as it. A loop that remembers something between ticks has
// a type of its own that holds it (healthLoop, learnerLoop, groupLoop,
// swarmLoop), made when the leadership starts and gone with it: no other
// loop or handler reaches it.
type leaderLoops struct {
	*leaderState
	metrics *Metrics

	muRefusals  sync.Mutex
	lastRefusal map[string]string
}

// loops lists every loop a leader runs. A new loop is a file
// loop_<name>.go with its observe, decide and act, and one line here.
func (l *leaderLoops) loops() []loopSpec {
	return []loopSpec{
		l.syncLoop(),
		l.demotionLoop(),
		l.learnerLoop(),
		l.healthLoop(),
		l.placementLoop(),
		l.approvalLoop(),
		l.groupLoop(),
		l.upgradeLoop(),
		l.reaperLoop(),
		l.swarmLoop(),
	}
}

// runLeader runs the leader's runnables: the join batches and every loop.
func (s *Service) runLeader(ctx context.Context, st *leaderState) error {
	l := &leaderLoops{leaderState: st, metrics: s.metrics}
	defer st.providers.close()
	runnables := map[string]supervisor.Runnable{
		"joins": l.runJoins,
	}
	for _, spec := range l.loops() {
		runnables[spec.name] = func(ctx context.Context) error { return l.run(ctx, spec) }
	}
	if err := supervisor.RunGroup(ctx, runnables); err != nil {
		return err
	}
	supervisor.Signal(ctx, supervisor.Healthy)
	<-ctx.Done()
	return ctx.Err()
}

// membershipLoop is the spec of a loop that decides on the membership
// snapshot: it ticks on changes of the nodes that matter to membership and
// on SyncInterval (etcd's member list has no watch).
func (l *leaderLoops) membershipLoop(name string, tick func(ctx context.Context, ms *decide.Membership) (loopResult, error)) loopSpec {
	return loopSpec{
		name:        name,
		tick:        l.membershipTick(tick),
		nodeChanges: store.MembershipChange,
		resync:      l.cfg.SyncInterval,
		minGap:      l.cfg.MinActionGap,
	}
}

// membershipTick observes the membership under muNodes, so that no other
// change of a node comes between what a loop decided on and its act, and
// hands the snapshot to tick.
func (l *leaderLoops) membershipTick(tick func(ctx context.Context, ms *decide.Membership) (loopResult, error)) func(context.Context) (loopResult, error) {
	return func(ctx context.Context) (loopResult, error) {
		l.muNodes.Lock()
		defer l.muNodes.Unlock()
		ms, err := l.observeMembership(ctx)
		if err != nil {
			return loopResult{}, err
		}
		return tick(ctx, ms)
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
func (l *leaderLoops) run(ctx context.Context, spec loopSpec) error {
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
		if !l.guard.held() {
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
			l.recordEvent(ctx, spec.name, res)
		case res.waiting:
			if l.newRefusal(spec.name, "waiting: "+res.reason) {
				lg.Info("waiting", zap.String("node", res.nodeID), zap.String("reason", res.reason))
			}
		case res.action != "":
			l.clearRefusal(spec.name)
			if divergedAt.IsZero() {
				divergedAt = now
			}
			l.metrics.Actions.WithLabelValues(spec.name, res.action).Inc()
			lg.Info(res.action, zap.String("node", res.nodeID), zap.String("reason", res.reason))
			l.recordEvent(ctx, spec.name, res)
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
			l.clearRefusal(spec.name)
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

// recordEvent keeps an event; failing to is logged, not fatal: the action
// itself happened.
func (l *leaderLoops) recordEvent(ctx context.Context, loop string, res loopResult) {
	action := res.action
	if res.refused {
		action = "refuse"
		// A refusal repeats every tick while the state is wrong: record it
		// when it changes, not each time.
		if !l.newRefusal(loop, res.reason) {
			return
		}
	}
	if res.recorded {
		return
	}
	if err := store.EventRecord(ctx, l.Fence, l.event(loop, action, res.nodeID, res.reason)); err != nil && !errors.Is(err, context.Canceled) {
		supervisor.Logger(ctx).Warn("could not record event", zap.Error(err))
	}
}

// clearRefusal forgets a loop's last refusal, so that the same refusal
// coming back is recorded again.
func (l *leaderLoops) clearRefusal(loop string) {
	l.muRefusals.Lock()
	defer l.muRefusals.Unlock()
	delete(l.lastRefusal, loop)
}

// newRefusal notes a loop's refusal (or what it waits for, prefixed
// "waiting: ") and says whether it differs from the
// loop's last one.
func (l *leaderLoops) newRefusal(loop, reason string) bool {
	l.muRefusals.Lock()
	defer l.muRefusals.Unlock()
	if l.lastRefusal == nil {
		l.lastRefusal = map[string]string{}
	}
	if l.lastRefusal[loop] == reason {
		return false
	}
	l.lastRefusal[loop] = reason
	return true
}
