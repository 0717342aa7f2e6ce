package curator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
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

func (h *heartbeats) forget(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.last, id)
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

// healthNode is a node as the health loop sees it.
type healthNode struct {
	id     string
	status pb.NodeStatus
	last   time.Time
	seen   bool
}

type healthAction struct {
	nodeID string
	to     pb.NodeStatus
	reason string
}

// decideHealth returns the one status change to make, or nil.
func decideHealth(nodes []healthNode, leaderSince, now time.Time, downAfter time.Duration) *healthAction {
	for _, n := range nodes {
		want := decideStatus(n.status, n.last, n.seen, leaderSince, now, downAfter)
		if want == n.status {
			continue
		}
		reason := fmt.Sprintf("node %s sends heartbeats", n.id)
		if n.status == pb.NodeStatus_NODE_STATUS_DOWN {
			reason = fmt.Sprintf("node %s sends heartbeats again", n.id)
		}
		if want == pb.NodeStatus_NODE_STATUS_DOWN {
			reason = fmt.Sprintf("node %s sent no heartbeat for %s", n.id, downAfter)
			if n.seen {
				reason = fmt.Sprintf("node %s sent no heartbeat since %s (limit %s)", n.id, n.last.Format(time.RFC3339Nano), downAfter)
			}
		}
		return &healthAction{nodeID: n.id, to: want, reason: reason}
	}
	return nil
}

// healthLoop keeps node status consistent with heartbeats. It ticks at half
// the heartbeat interval, and at once when a heartbeat comes from a node
// that is not ready.
func (s *Service) healthLoop(st *leaderState) loopSpec {
	return loopSpec{
		name:   "health",
		tick:   func(ctx context.Context) (loopResult, error) { return s.healthTick(ctx, st) },
		kick:   st.kickHealth,
		resync: s.cfg.HeartbeatInterval / 2,
		minGap: 0,
	}
}

func (s *Service) healthTick(ctx context.Context, st *leaderState) (loopResult, error) {
	st.muNodes.Lock()
	defer st.muNodes.Unlock()
	nodes, err := nodeList(ctx, s.cfg.Etcd)
	if err != nil {
		return loopResult{}, err
	}
	var hn []healthNode
	byID := map[string]*pb.Node{}
	counts := map[pb.NodeStatus]int{}
	for _, n := range nodes {
		counts[n.Status]++
		if n.State != pb.NodeState_NODE_STATE_UP {
			continue
		}
		byID[n.Id] = n
		last, seen := st.hb.get(n.Id)
		hn = append(hn, healthNode{id: n.Id, status: n.Status, last: last, seen: seen})
	}
	for v, name := range pb.NodeStatus_name {
		s.metrics.Nodes.WithLabelValues(statusWord(name)).Set(float64(counts[pb.NodeStatus(v)]))
	}
	now := s.cfg.Now()
	a := decideHealth(hn, st.since, now, s.cfg.DownAfter)
	if a == nil {
		return loopResult{}, nil
	}
	n := byID[a.nodeID]
	n.Status = a.to
	n.StatusChanged = timestamppb.New(now)
	if err := nodeSave(ctx, st.leadership, n); err != nil {
		return loopResult{}, err
	}
	return loopResult{action: "mark-" + statusWord(a.to.String()), nodeID: a.nodeID, reason: a.reason}, nil
}

// statusWord is NODE_STATUS_READY → ready.
func statusWord(enum string) string {
	return strings.ToLower(strings.TrimPrefix(enum, "NODE_STATUS_"))
}

// kick wakes a loop without blocking.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
