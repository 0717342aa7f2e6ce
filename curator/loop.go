package curator

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// A leader loop observes the whole state, decides on at most one action
// (a pure function), and acts. It is level-triggered: each tick recomputes
// from scratch, so a missed event or a new leader loses nothing; etcd watch
// events only make it tick sooner, and a periodic resync covers what has no
// watch (etcd's member list). After an action it waits at least minGap
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
	// resync is the period of ticks without events.
	resync time.Duration
	// minGap is the least time between two actions.
	minGap time.Duration
}

func (s *Service) runLoop(ctx context.Context, st *leaderState, spec loopSpec) error {
	lg := supervisor.Logger(ctx)
	var trigger <-chan struct{}
	if spec.nodeChanges != nil && !s.cfg.PollOnly {
		ch, unsubscribe := st.reg.subscribe(spec.nodeChanges)
		defer unsubscribe()
		trigger = ch
	}

	supervisor.Signal(ctx, supervisor.Healthy)
	resync := time.NewTicker(spec.resync)
	defer resync.Stop()
	var divergedAt time.Time
	for {
		if !st.guard.held() {
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
		s.metrics.Ticks.WithLabelValues(spec.name).Inc()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.metrics.Errors.WithLabelValues(spec.name).Inc()
			return err
		}
		now := s.cfg.Now()
		switch {
		case res.refused:
			s.metrics.Refusals.WithLabelValues(spec.name).Inc()
			lg.Error("refusing to act", zap.String("node", res.nodeID), zap.String("reason", res.reason))
			s.recordEvent(ctx, st, spec.name, res)
		case res.action != "":
			st.clearRefusal(spec.name)
			if divergedAt.IsZero() {
				divergedAt = now
			}
			s.metrics.Actions.WithLabelValues(spec.name, res.action).Inc()
			lg.Info(res.action, zap.String("node", res.nodeID), zap.String("reason", res.reason))
			s.recordEvent(ctx, st, spec.name, res)
			if s.cfg.PollOnly {
				// The fixed poll: one change per period, nothing sooner.
				break
			}
			// More may be needed: tick again after the gap.
			if spec.minGap > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(spec.minGap):
				}
			}
			continue
		default:
			st.clearRefusal(spec.name)
			if !divergedAt.IsZero() {
				s.metrics.Converge.WithLabelValues(spec.name).Observe(now.Sub(divergedAt).Seconds())
				divergedAt = time.Time{}
			}
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
func (s *Service) recordEvent(ctx context.Context, st *leaderState, loop string, res loopResult) {
	action := res.action
	if res.refused {
		action = "refuse"
		// A refusal repeats every tick while the state is wrong: record it
		// when it changes, not each time.
		if !st.newRefusal(loop, res.reason) {
			return
		}
	}
	ev := &pb.Event{
		Time: timestamppb.New(s.cfg.Now()), Loop: loop, NodeId: res.nodeID,
		Action: action, Reason: res.reason, Leader: s.cfg.NodeID,
	}
	if err := eventRecord(ctx, st.leadership, ev); err != nil && !errors.Is(err, context.Canceled) {
		supervisor.Logger(ctx).Warn("could not record event", zap.Error(err))
	}
}
