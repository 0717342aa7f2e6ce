package curator

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/supervisor"
)

// runLearners promotes learners to voters once etcd says they have caught
// up. A learner that is not yet in sync is simply tried again next tick.
func (s *Service) runLearners(ctx context.Context, st *leaderState) error {
	lg := supervisor.Logger(ctx)
	supervisor.Signal(ctx, supervisor.Healthy)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		members, err := consensus.Members(ctx, s.cfg.Etcd)
		if err != nil {
			return err
		}
		for _, m := range members {
			if !m.IsLearner || m.NodeID == "" {
				// A learner without a name has not started its etcd yet.
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := consensus.PromoteLearner(pctx, s.cfg.Etcd, m.ID)
			cancel()
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
					lg.Warn("could not promote learner", zap.String("node", m.NodeID), zap.Error(err))
				}
				continue
			}
			lg.Info("promoted learner to voter", zap.String("node", m.NodeID), zap.Uint64("member", m.ID))
			break // one change per tick
		}
	}
}
