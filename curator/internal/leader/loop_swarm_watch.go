package leader

import (
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
	"go.uber.org/zap"

	"github.com/curatorproject/curator/internal/backoff"
	"github.com/curatorproject/curator/supervisor"
)

// The swarm sync's watch (docs/architecture.md, "The swarm flavor"): a
// change made in the Swarm alone (a promotion cut short after its Swarm
// step, a node demoted or removed by hand) touches no node record, so no
// registry change ticks the loop. The leader's engine is a Swarm manager,
// and a manager's events stream reports every node created, updated or
// removed: the watch kicks the loop on each such event, and the loop reads
// the whole Swarm again, as on any tick. An event carries nothing the
// loop decides on; a missed one (the stream down, the engine restarting)
// costs only time, since the periodic read (SwarmInterval) stays.
//
// The watch is the loop's: it starts when the loop's runnable starts and
// ends with it, and while the loop runs it opens the stream again when it
// ends, after a wait (swarmWatchBackoff: 100 ms doubled up to 5 s, back
// to the least after a stream that brought an event or lasted longer
// than the most). A stream
// opened again starts at the last event's time (the engine's clock), so
// the engine replays what came while it was down.

// swarmEventer is what the watch needs of the leader's engine.
type swarmEventer interface {
	Events(ctx context.Context, options client.EventsListOptions) client.EventsResult
}

// swarmWatchBackoff is the wait before the stream is opened again.
var swarmWatchBackoff = backoff.Policy{Initial: 100 * time.Millisecond, Factor: 2, Max: 5 * time.Second}

// WatchSwarm kicks ch on each Swarm node event of engine, until ctx ends.
func WatchSwarm(ctx context.Context, engine swarmEventer, ch chan struct{}) {
	lg := supervisor.Logger(ctx)
	wait := swarmWatchBackoff.Initial
	var since string
	for ctx.Err() == nil {
		opened := time.Now()
		got, err := watchSwarmOnce(ctx, engine, since, ch)
		if got != "" || time.Since(opened) > swarmWatchBackoff.Max {
			since = got
			wait = swarmWatchBackoff.Initial
		}
		if ctx.Err() != nil {
			return
		}
		lg.Debug("swarm event stream ended; opening it again", zap.Duration("backoff", wait), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = swarmWatchBackoff.Next(wait)
	}
}

// watchSwarmOnce reads one stream of node events from since ("": from
// now), kicking ch on each, and returns the last event's time ("" for
// none) and why the stream ended.
func watchSwarmOnce(ctx context.Context, engine swarmEventer, since string, ch chan struct{}) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the client's reader
	res := engine.Events(ctx, client.EventsListOptions{
		Since:   since,
		Filters: make(client.Filters).Add("type", string(events.NodeEventType)),
	})
	var last string
	for {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case err := <-res.Err:
			return last, err
		case m := <-res.Messages:
			supervisor.Kick(ch)
			if m.TimeNano != 0 {
				last = fmt.Sprintf("%d.%09d", m.TimeNano/int64(time.Second), m.TimeNano%int64(time.Second))
			}
		}
	}
}
