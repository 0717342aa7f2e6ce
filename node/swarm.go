package node

import (
	"context"
	"fmt"
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
	// pendingSince is when the engine was first seen pending in a row.
	var pendingSince time.Time
	for {
		node, ok, changed := a.desired.get()
		if ok {
			if !pendingSince.IsZero() {
				cfg.PendingFor = time.Since(pendingSince)
			}
			actx, cancel := context.WithTimeout(ctx, swarmAnswerTimeout)
			out, err := swarmagent.Answer(actx, cfg, a.docker, leader, node)
			cancel()
			switch {
			case out != swarmagent.Pending:
				pendingSince, cfg.PendingFor = time.Time{}, 0
			case pendingSince.IsZero():
				pendingSince = time.Now()
			}
			switch {
			case err != nil && ctx.Err() == nil:
				// Said once until it changes: the check repeats.
				if err.Error() != lastErr {
					lg.Warn("could not bring the Docker engine into the Swarm as the node's record asks", zap.Error(err))
					lastErr = err.Error()
				}
			case err == nil:
				lastErr = ""
				if out != swarmagent.Nothing && out != swarmagent.Pending {
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

// leaveSwarm takes the engine out of the Swarm, once the node has left the
// cluster with the flavor on, and says how that went: a failure is said,
// not fatal (the node has left; the leader removes its Swarm node once it
// is down, and `docker swarm leave` does the rest by hand).
func (a *Agent) leaveSwarm(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, swarmAnswerTimeout)
	defer cancel()
	if err := swarmagent.Leave(ctx, a.docker); err != nil {
		a.cfg.Logger.Warn("could not take the Docker engine out of the Swarm", zap.Error(err))
		return fmt.Sprintf("its Docker engine did not leave the Swarm (%v): run `docker swarm leave` on it", err)
	}
	return "its Docker engine left the Swarm"
}
