package leader

import (
	"context"
	"errors"
	"sync"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// eventLog is what a leadership says it did and why: events name the
// leader's node and its term (the revision of its election key), and are
// written fenced. It remembers each loop's last refusal, so that a refusal
// that repeats every tick is recorded once.
type eventLog struct {
	fence *store.Fence
	cfg   *Config
	// reg names an event's node, and its group, as they are when it is
	// recorded.
	reg *store.Registry

	mu          sync.Mutex
	lastRefusal map[string]string
}

// Timestamp is the clock's now, for a record.
func (e *eventLog) Timestamp() *timestamppb.Timestamp { return timestamppb.New(e.cfg.Now()) }

// Event is an event of this leadership, now: loop's action on node
// nodeID (may be empty), for reason.
func (e *eventLog) Event(loop, action, nodeID, reason string) *pb.Event {
	ev := &pb.Event{Time: e.Timestamp(), Loop: loop, NodeId: nodeID, Action: action, Reason: reason, Leader: e.cfg.NodeID, Term: e.fence.Rev()}
	nameEventNode(ev, e.reg)
	return ev
}

// nameEventNode sets ev's node name and group from its node's record in
// reg, so that the event keeps them once the node is gone.
func nameEventNode(ev *pb.Event, reg *store.Registry) {
	if ev.NodeId == "" || reg == nil {
		return
	}
	if n := reg.Node(ev.NodeId); n != nil {
		ev.NodeName = n.Name
		if ev.Group == "" {
			ev.Group = n.Group
		}
	}
}

// record writes event ev, fenced.
func (e *eventLog) record(ctx context.Context, ev *pb.Event) error {
	return store.EventRecord(ctx, e.fence, ev)
}

// recordResult keeps the event of a loop's tick; failing to is logged,
// not fatal: the action itself happened.
func (e *eventLog) recordResult(ctx context.Context, loop string, res loopResult) {
	action := res.action
	if res.refused {
		action = "refuse"
		// A refusal repeats every tick while the state is wrong: record it
		// when it changes, not each time.
		if !e.newRefusal(loop, res.reason) {
			return
		}
	}
	if res.recorded {
		return
	}
	ev := e.Event(loop, action, res.nodeID, res.reason)
	if res.group != "" {
		ev.Group = res.group
	}
	if err := e.record(ctx, ev); err != nil && !errors.Is(err, context.Canceled) {
		supervisor.Logger(ctx).Warn("could not record event", zap.Error(err))
	}
}

// clearRefusal forgets a loop's last refusal, so that the same refusal
// coming back is recorded again.
func (e *eventLog) clearRefusal(loop string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.lastRefusal, loop)
}

// newRefusal notes a loop's refusal (or what it waits for, prefixed
// "waiting: ") and says whether it differs from the loop's last one.
func (e *eventLog) newRefusal(loop, reason string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lastRefusal == nil {
		e.lastRefusal = map[string]string{}
	}
	if e.lastRefusal[loop] == reason {
		return false
	}
	e.lastRefusal[loop] = reason
	return true
}
