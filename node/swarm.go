package node

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/curatorproject/curator/node/swarmagent"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// The Swarm flavor's agent side (package swarmagent): with --docker-socket
// the agent keeps its engine's Swarm membership as its record asks, each
// time the record changes and every swarmCheckInterval (an engine that
// left the Swarm, or was restarted, says so to no one).

const (
	swarmCheckInterval = 5 * time.Second
	// swarmAnswerTimeout bounds one answer: a join waits for the Swarm
	// to accept the engine.
	swarmAnswerTimeout = time.Minute
)

func (a *Agent) runSwarm(ctx context.Context) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	lg := supervisor.Logger(ctx)
	leader := pb.NewCuratorClient(a.conn)
	cfg := swarmagent.Config{AdvertiseAddr: a.cfg.SwarmAdvertise}
	tick := time.NewTicker(swarmCheckInterval)
	defer tick.Stop()
	var lastErr string
	for {
		node, ok, changed := a.desired.get()
		if ok {
			actx, cancel := context.WithTimeout(ctx, swarmAnswerTimeout)
			out, err := swarmagent.Answer(actx, cfg, a.docker, leader, node)
			cancel()
			switch {
			case err != nil && ctx.Err() == nil:
				// Said once until it changes: the check repeats.
				if err.Error() != lastErr {
					lg.Warn("could not bring the Docker engine into the Swarm as the node's record asks", zap.Error(err))
					lastErr = err.Error()
				}
			case err == nil:
				lastErr = ""
				if out != swarmagent.Nothing {
					lg.Info("swarm", zap.String("outcome", string(out)))
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-tick.C:
		}
	}
}
