package leader

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/internal/metrics"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// healthLoop keeps node status consistent with heartbeats. It ticks at half
// the heartbeat interval, and at once when a heartbeat comes from a node
// that is not ready (after a change, not before healthGap). Heartbeats
// live in the leader's memory: at rest, with every node ready, a tick
// writes nothing. It owns what it remembers between ticks (mem: see
// decide.Health), which no other loop reaches.
type healthLoop struct {
	cfg     *Config
	fence   *store.Fence
	reg     *store.Registry
	hb      *heartbeats
	knocks  *Knocks
	metrics *metrics.Metrics
	kick    chan struct{}
	mem     decide.HealthMemory
}

func newHealthLoop(st *State, metrics *metrics.Metrics) *healthLoop {
	return &healthLoop{cfg: st.Cfg, fence: st.Lead.Fence, reg: st.Reg, hb: st.Heartbeats, knocks: st.Knocks, metrics: metrics, kick: st.KickHealth}
}

func (l *healthLoop) spec() loopSpec {
	return loopSpec{
		name:   "health",
		tick:   l.tick,
		kick:   l.kick,
		resync: l.cfg.HeartbeatInterval / 2,
		minGap: HealthGap(l.cfg.HeartbeatInterval),
	}
}

// HealthGap is the health loop's pause after it changed statuses, before
// it looks again: the nodes that sent their first heartbeat meanwhile are
// then marked ready together, in one write and one event (a join wave
// kicks the loop hundreds of times a second, and each tick reads the
// whole fleet). A twentieth of the heartbeat interval, at most 100 ms.
func HealthGap(interval time.Duration) time.Duration {
	return min(interval/20, 100*time.Millisecond)
}

// The tick takes no muNodes: a membership change holds it across etcd
// calls that may wait on a member that just died, and the judgment that
// that member is down must not wait with it. Status is this loop's alone
// (store.NodeStatusSaveAll says how no write undoes another).
func (l *healthLoop) tick(ctx context.Context) (loopResult, error) {
	hn := l.observe()
	now := l.cfg.Now()
	// A leader that stopped serving for a while (in doubt about its
	// lease) heard nothing meanwhile: count from when it came back, as a
	// new leader counts from its election.
	since := l.hb.ServingSince()
	mem := &l.mem
	d := decide.Health(hn, since, now, l.cfg.DownAfter, l.knocks.Last(), *mem)
	if !mem.Since.Equal(since) {
		mem.Settled = time.Time{}
	}
	if !d.Settling && mem.Settled.IsZero() {
		mem.Settled = now
		supervisor.Logger(ctx).Info("the failover's hold on downs is over: nodes not heard since the takeover are judged on their own silence",
			zap.Time("leader_since", since), zap.Int("heard_since", d.Arrived), zap.Int("nodes", len(hn)), zap.Duration("after", now.Sub(since)))
	}
	*mem = mem.Remember(d, since)
	var res loopResult
	switch {
	case d.Held != "":
		if mem.HoldSince.IsZero() {
			mem.HoldSince = now
			res = loopResult{refused: true, reason: d.Held}
		}
	default:
		mem.HoldSince = time.Time{}
	}
	if len(d.Changes) == 0 {
		return res, nil
	}
	changed := make([]store.StatusChange, 0, len(d.Changes))
	for _, a := range d.Changes {
		changed = append(changed, store.StatusChange{ID: a.NodeID, Status: a.To, At: now})
	}
	if err := store.NodeStatusSaveAll(ctx, l.fence, changed); err != nil {
		return loopResult{}, err
	}
	held := res.reason
	res = summarizeHealth(d.Changes)
	if held != "" {
		res.reason += "; " + held
	}
	return res, nil
}

// observe is what the health loop decides on: each node that is up with
// when this leader last heard it. It sets the node gauges as it reads.
func (l *healthLoop) observe() []decide.HealthNode {
	nodes := l.reg.Nodes()
	hn := make([]decide.HealthNode, 0, len(nodes))
	counts := make([]int, len(pb.NodeStatus_name))
	var earliest time.Time
	l.hb.read(func(heard func(string) (time.Time, bool)) {
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
			last, seen := heard(n.Id)
			hn = append(hn, decide.HealthNode{ID: n.Id, Status: n.Status, Last: last, Seen: seen, Created: n.Created.AsTime()})
		}
	})
	for v, name := range pb.NodeStatus_name {
		l.metrics.Nodes.WithLabelValues(spec.StatusWord(name)).Set(float64(counts[pb.NodeStatus(v)]))
	}
	if !earliest.IsZero() {
		l.metrics.CertEarliestExpiry.Set(float64(earliest.Unix()))
	}
	return hn
}

// summarizeHealth is the loop result (one event) of a tick's changes:
// the node and reason of a single change, a count and the first IDs of
// many.
func summarizeHealth(changes []decide.HealthAction) loopResult {
	if len(changes) == 1 {
		a := changes[0]
		return loopResult{action: "mark-" + spec.StatusWord(a.To.String()), nodeID: a.NodeID, reason: a.Reason}
	}
	byStatus := map[pb.NodeStatus][]string{}
	for _, a := range changes {
		byStatus[a.To] = append(byStatus[a.To], a.NodeID)
	}
	var parts, actions []string
	for _, to := range []pb.NodeStatus{pb.NodeStatus_NODE_STATUS_DOWN, pb.NodeStatus_NODE_STATUS_READY} {
		ids := byStatus[to]
		if len(ids) == 0 {
			continue
		}
		word := spec.StatusWord(to.String())
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
