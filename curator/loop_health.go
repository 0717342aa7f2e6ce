package curator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
)

// decideStatus is the health rule, a pure function. A node is ready while
// its last heartbeat is younger than downAfter, and down once it is older.
// A leader that has not heard from a node since it took over (or came back
// from doubt) gives it twice downAfter from that moment, as Swarm doubles
// its grace after a leader change: heartbeats sent to the old leader are
// lost with it, and every node has to find the new one first.
func decideStatus(cur pb.NodeStatus, last time.Time, seen bool, leaderSince, now time.Time, downAfter time.Duration) pb.NodeStatus {
	if seen && now.Sub(last) < downAfter {
		return pb.NodeStatus_NODE_STATUS_READY
	}
	if seen && last.After(leaderSince) {
		// Heard by this leader, then silent.
		if now.Sub(last) >= downAfter {
			return pb.NodeStatus_NODE_STATUS_DOWN
		}
		return cur
	}
	if now.Sub(leaderSince) >= 2*downAfter {
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
	// created is when the node joined.
	created time.Time
}

type healthAction struct {
	nodeID string
	to     pb.NodeStatus
	reason string
}

// healthDecision is what one health tick changes.
type healthDecision struct {
	// changes are every status change to make, written together.
	changes []healthAction
	// held, when set, says why the changes to down were held back.
	held string
	// heard is how many nodes were heard from within downAfter.
	heard int
}

// healthMemory is what the health loop carries from one tick to the next.
type healthMemory struct {
	// holdSince is when the loop first held nodes back from down for
	// hearing too few (zero when it does not).
	holdSince time.Time
	// heard is the last tick's count of nodes heard from, and grewAt when
	// that count last grew.
	heard  int
	grewAt time.Time
}

// settleLimit is how long after it takes over (or comes back from doubt)
// a leader may wait for its nodes' streams to settle.
func settleLimit(downAfter time.Duration) time.Duration { return 6 * downAfter }

// decideHealth returns every status change to make. It is the health rule
// of decideStatus applied to each node, with two guards against a leader
// mistaking its own view for the fleet's:
//
//   - settling: a leader that took over less than settleLimit ago, and is
//     still hearing from more nodes by the tick (grown within half a
//     downAfter), marks none down: after a failover the streams move to it
//     as fast as the machines allow, which under load can take longer than
//     the grace period;
//   - hearing few: a leader that hears from no more than half of the nodes
//     does not mark several of them down at once, for one more downAfter
//     from mem.holdSince. A fleet-wide failure is rare; a leader that cannot
//     hear the fleet (its own network failing) is not. Past the extra wait
//     the nodes are marked down: they really are silent.
func decideHealth(nodes []healthNode, leaderSince, now time.Time, downAfter time.Duration, mem healthMemory) healthDecision {
	var d healthDecision
	downs := 0
	for _, n := range nodes {
		if n.seen && now.Sub(n.last) < downAfter {
			d.heard++
		}
		// A node that joined after this leader took over gets its grace
		// from its joining.
		graceFrom := leaderSince
		if n.created.After(graceFrom) {
			graceFrom = n.created
		}
		want := decideStatus(n.status, n.last, n.seen, graceFrom, now, downAfter)
		if want == n.status {
			continue
		}
		reason := fmt.Sprintf("node %s sends heartbeats", n.id)
		if n.status == pb.NodeStatus_NODE_STATUS_DOWN {
			reason = fmt.Sprintf("node %s sends heartbeats again", n.id)
		}
		if want == pb.NodeStatus_NODE_STATUS_DOWN {
			downs++
			reason = fmt.Sprintf("node %s sent no heartbeat for %s", n.id, downAfter)
			if n.seen {
				reason = fmt.Sprintf("node %s sent no heartbeat since %s (limit %s)", n.id, n.last.Format(time.RFC3339Nano), downAfter)
			}
		}
		d.changes = append(d.changes, healthAction{nodeID: n.id, to: want, reason: reason})
	}
	if downs == 0 {
		return d
	}
	growing := d.heard > mem.heard || (!mem.grewAt.IsZero() && now.Sub(mem.grewAt) < downAfter/2)
	switch {
	case now.Sub(leaderSince) < settleLimit(downAfter) && growing:
		d.held = fmt.Sprintf("holding %d nodes back from down: streams are still moving to this leader (it hears from %d of %d nodes, more than a moment ago)", downs, d.heard, len(nodes))
	case downs >= 2 && 2*d.heard <= len(nodes) && (mem.holdSince.IsZero() || now.Sub(mem.holdSince) < downAfter):
		d.held = fmt.Sprintf("holding %d nodes back from down: this leader hears from only %d of %d nodes, which is more likely its own view than a fleet-wide failure; they are marked down if still silent after another %s", downs, d.heard, len(nodes), downAfter)
	default:
		return d
	}
	d.changes = slices.DeleteFunc(d.changes, func(a healthAction) bool { return a.to == pb.NodeStatus_NODE_STATUS_DOWN })
	return d
}

// healthLoop keeps node status consistent with heartbeats. It ticks at half
// the heartbeat interval, and at once when a heartbeat comes from a node
// that is not ready. Heartbeats live in the leader's memory: at rest, with
// every node ready, a tick writes nothing.
func (l *leaderLoops) healthLoop() loopSpec {
	return loopSpec{
		name:   "health",
		tick:   l.healthTick,
		kick:   l.kickHealth,
		resync: l.cfg.HeartbeatInterval / 2,
		minGap: 0,
	}
}

func (l *leaderLoops) healthTick(ctx context.Context) (loopResult, error) {
	l.muNodes.Lock()
	defer l.muNodes.Unlock()
	nodes := l.reg.nodes()
	hn := make([]healthNode, 0, len(nodes))
	counts := make([]int, len(pb.NodeStatus_name))
	var earliest time.Time
	l.hb.mu.Lock()
	for _, n := range nodes {
		if int(n.Status) >= 0 && int(n.Status) < len(counts) {
			counts[n.Status]++
		}
		if n.CertExpires != nil && (earliest.IsZero() || n.CertExpires.AsTime().Before(earliest)) {
			earliest = n.CertExpires.AsTime()
		}
		if n.State != pb.NodeState_NODE_STATE_UP {
			continue
		}
		last, seen := l.hb.last[n.Id]
		hn = append(hn, healthNode{id: n.Id, status: n.Status, last: last, seen: seen, created: n.Created.AsTime()})
	}
	l.hb.mu.Unlock()
	for v, name := range pb.NodeStatus_name {
		l.metrics.Nodes.WithLabelValues(statusWord(name)).Set(float64(counts[pb.NodeStatus(v)]))
	}
	if !earliest.IsZero() {
		l.metrics.CertEarliestExpiry.Set(float64(earliest.Unix()))
	}
	now := l.cfg.Now()
	// A leader that stopped serving for a while (in doubt about its
	// lease) heard nothing meanwhile: count from when it came back, as a
	// new leader counts from its election.
	since := l.since
	if r := l.guard.resumedAt(); r.After(since) {
		since = r
	}
	mem := &l.health
	d := decideHealth(hn, since, now, l.cfg.DownAfter, *mem)
	if d.heard > mem.heard {
		mem.grewAt = now
	}
	mem.heard = d.heard
	var res loopResult
	switch {
	case d.held != "":
		if mem.holdSince.IsZero() {
			mem.holdSince = now
			res = loopResult{refused: true, reason: d.held}
		}
	default:
		mem.holdSince = time.Time{}
	}
	if len(d.changes) == 0 {
		return res, nil
	}
	changed := make([]*pb.Node, 0, len(d.changes))
	for _, a := range d.changes {
		// Under muNodes only this loop changes status: the record is
		// the one decided on.
		n := cloneNode(l.reg.node(a.nodeID))
		n.Status = a.to
		n.StatusChanged = timestamppb.New(now)
		changed = append(changed, n)
	}
	if err := nodeSaveAll(ctx, l.leadership, changed); err != nil {
		return loopResult{}, err
	}
	held := res.reason
	res = summarizeHealth(d.changes)
	if held != "" {
		res.reason += "; " + held
	}
	return res, nil
}

// summarizeHealth is the loop result (one event) of a tick's changes:
// the node and reason of a single change, a count and the first IDs of
// many.
func summarizeHealth(changes []healthAction) loopResult {
	if len(changes) == 1 {
		a := changes[0]
		return loopResult{action: "mark-" + statusWord(a.to.String()), nodeID: a.nodeID, reason: a.reason}
	}
	byStatus := map[pb.NodeStatus][]string{}
	for _, a := range changes {
		byStatus[a.to] = append(byStatus[a.to], a.nodeID)
	}
	var parts, actions []string
	for _, to := range []pb.NodeStatus{pb.NodeStatus_NODE_STATUS_DOWN, pb.NodeStatus_NODE_STATUS_READY} {
		ids := byStatus[to]
		if len(ids) == 0 {
			continue
		}
		word := statusWord(to.String())
		actions = append(actions, "mark-"+word)
		shown := ids[:min(len(ids), 10)]
		more := ""
		if len(ids) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(ids)-len(shown))
		}
		parts = append(parts, fmt.Sprintf("%d nodes %s: %s%s", len(ids), word, strings.Join(shown, ", "), more))
	}
	return loopResult{action: strings.Join(actions, "+"), reason: strings.Join(parts, "; ")}
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
