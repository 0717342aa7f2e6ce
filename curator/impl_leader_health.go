package curator

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// heartbeats is the leader's memory of when each node last sent a
// heartbeat. It is never written to etcd: only status transitions are, so a
// fleet at rest writes nothing.
type heartbeats struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func newHeartbeats() *heartbeats { return &heartbeats{last: map[string]time.Time{}} }

func (h *heartbeats) beat(id string, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last[id] = t
}

func (h *heartbeats) get(id string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.last[id]
	return t, ok
}

// decideStatus is the health rule, a pure function. A node is ready while
// its last heartbeat is younger than downAfter, and down once it is older.
// A leader that has not heard from a node since it took over counts from
// the moment it took over: every node gets a grace period of downAfter
// before a new leader marks it down, as heartbeats sent to the old leader
// are lost with it.
func decideStatus(cur pb.NodeStatus, last time.Time, seen bool, leaderSince, now time.Time, downAfter time.Duration) pb.NodeStatus {
	if seen && now.Sub(last) < downAfter {
		return pb.NodeStatus_NODE_STATUS_READY
	}
	ref := leaderSince
	if seen && last.After(ref) {
		ref = last
	}
	if now.Sub(ref) >= downAfter {
		return pb.NodeStatus_NODE_STATUS_DOWN
	}
	return cur
}

// runHealth keeps node status consistent with heartbeats. It ticks at half
// the heartbeat interval, and at once when a heartbeat comes from a node
// that is not ready.
func (s *Service) runHealth(ctx context.Context, st *leaderState) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	tick := time.NewTicker(s.cfg.HeartbeatInterval / 2)
	defer tick.Stop()
	for {
		if err := s.healthTick(ctx, st); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		case <-st.kickHealth:
		}
	}
}

func (s *Service) healthTick(ctx context.Context, st *leaderState) error {
	lg := supervisor.Logger(ctx)
	st.muNodes.Lock()
	defer st.muNodes.Unlock()
	nodes, err := nodeList(ctx, s.cfg.Etcd)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	for _, n := range nodes {
		if n.State != pb.NodeState_NODE_STATE_UP {
			continue
		}
		last, seen := st.hb.get(n.Id)
		want := decideStatus(n.Status, last, seen, st.since, now, s.cfg.DownAfter)
		if want == n.Status {
			continue
		}
		from := n.Status
		n.Status = want
		n.StatusChanged = timestamppb.New(now)
		if err := nodeSave(ctx, st.leadership, n); err != nil {
			return err
		}
		lg.Info("node status changed", zap.String("node", n.Id), zap.String("name", n.Name),
			zap.Stringer("from", from), zap.Stringer("to", want))
	}
	return nil
}

// kick wakes a loop without blocking.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
