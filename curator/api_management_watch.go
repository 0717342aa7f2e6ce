package curator

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/curatorproject/curator/curator/internal/faults"
	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// The management API's watches: the operator's live view of the nodes and
// the events (`node ls --watch`, `events --follow`, `curator ui`). Both
// are served by the leader from its watches of etcd and end with its
// leadership (or its doubt about it), like the nodes' streams: the client
// then resumes on another manager. A follower forwards them like any
// stream (forward.go) and ends them when the election names another
// leader.

// nodeWatchResync is how often WatchNodes looks again without a change to
// the node records: a node's manager status comes from etcd's member list
// and the leader's heartbeats, which no watch reports.
const nodeWatchResync = time.Second

// sentNode is what a WatchNodes stream last sent of a node: the record
// (records are replaced, never changed, so the pointer tells a change) and
// the manager status.
type sentNode struct {
	rec *pb.Node
	ms  pb.ManagerStatus
	// status is the status shown (decide.ShownStatus): a node unknown to a new
	// leader turns ready with its first heartbeat, which no record change
	// reports.
	status pb.NodeStatus
}

// sent is what a watch remembers of node n once sent.
func (v *clusterView) sent(n *pb.Node) sentNode {
	return sentNode{rec: n, ms: v.managerStatus(n), status: v.status(n)}
}

// maxPendingNodeChanges bounds the changes a WatchNodes stream queues
// between two sends; past it the stream sends a snapshot instead.
const maxPendingNodeChanges = 10000

// nodeChangeQueue is the node records a WatchNodes stream has to send, in
// the order the registry view saw them, each as it was: a node that went
// down and was removed at once is sent down, then removed, rather than
// just gone. The registry fills it from its watch (under its lock: add
// never blocks).
type nodeChangeQueue struct {
	mu       sync.Mutex
	changes  []nodeChange
	overflow bool
	kick     chan struct{}
}

// nodeChange is a node's record after a change; rec is nil when the node
// is gone.
type nodeChange struct {
	id  string
	rec *pb.Node
}

func (q *nodeChangeQueue) add(old, new *pb.Node) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case len(q.changes) >= maxPendingNodeChanges:
		q.overflow, q.changes = true, nil
	case q.overflow:
	case new == nil:
		q.changes = append(q.changes, nodeChange{id: old.Id})
	default:
		q.changes = append(q.changes, nodeChange{id: new.Id, rec: new})
	}
	supervisor.Kick(q.kick)
	// The queue is the stream's wake-up: the registry's own kick is not
	// needed.
	return false
}

func (q *nodeChangeQueue) take() ([]nodeChange, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	changes, overflow := q.changes, q.overflow
	q.changes, q.overflow = nil, false
	return changes, overflow
}

// WatchNodes sends every node, then each change in the order the registry
// view saw it (one answer holds at most one change of a node, so a state
// a node passed through is never folded away), and the manager statuses
// that moved.
func (m *managementAPI) WatchNodes(_ *pb.WatchNodesRequest, stream grpc.ServerStreamingServer[pb.WatchNodesResponse]) error {
	st, err := m.s.leaderFor()
	if err != nil {
		return err
	}
	ctx := stream.Context()
	q := &nodeChangeQueue{kick: make(chan struct{}, 1)}
	_, unsubscribe := st.Reg.Subscribe(q.add)
	defer unsubscribe()
	doubt := st.Guard.ServingDone()
	resync := time.NewTicker(nodeWatchResync)
	defer resync.Stop()
	sent := map[string]sentNode{}
	snapshot := true
	for {
		if err := m.sendNodes(stream, st, q, sent, snapshot); err != nil {
			return err
		}
		snapshot = false
		select {
		case <-q.kick:
		case <-resync.C:
		case <-st.Ctx.Done():
			return spec.ErrNotLeader
		case <-doubt:
			return spec.ErrNotLeader
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sendNodes sends what changed since the last call: a snapshot of every
// node (the first time, or after the queue overflowed), else the queued
// changes, then the manager statuses that moved.
func (m *managementAPI) sendNodes(stream grpc.ServerStreamingServer[pb.WatchNodesResponse], st *leader.State, q *nodeChangeQueue, sent map[string]sentNode, snapshot bool) error {
	changes, overflow := q.take()
	// The revision and the nodes are read before the members: a record
	// the registry has since replaced is sent by the next call.
	rev := st.Reg.Revision()
	nodes := st.Reg.Nodes()
	ms, err := st.Members.Observe(stream.Context())
	if err != nil {
		return fmt.Errorf("list etcd members: %w", err)
	}
	v := &clusterView{st: st, nodes: nodes, ms: ms}
	if snapshot || overflow {
		clear(sent)
		resp := &pb.WatchNodesResponse{Snapshot: true, Revision: rev}
		for _, n := range nodes {
			sent[n.Id] = v.sent(n)
			resp.Nodes = append(resp.Nodes, v.nodeView(n))
		}
		faults.Point(faults.WatchBeforeSend)
		return stream.Send(resp)
	}
	resp := &pb.WatchNodesResponse{Revision: rev}
	inResp := map[string]bool{}
	flush := func() error {
		if len(resp.Nodes) == 0 && len(resp.Removed) == 0 {
			return nil
		}
		faults.Point(faults.WatchBeforeSend)
		err := stream.Send(resp)
		resp, inResp = &pb.WatchNodesResponse{Revision: rev}, map[string]bool{}
		return err
	}
	for _, c := range changes {
		if inResp[c.id] {
			if err := flush(); err != nil {
				return err
			}
		}
		if c.rec == nil {
			if _, ok := sent[c.id]; ok {
				delete(sent, c.id)
				resp.Removed = append(resp.Removed, c.id)
				inResp[c.id] = true
			}
			continue
		}
		now := v.sent(c.rec)
		if sent[c.id] != now {
			sent[c.id] = now
			resp.Nodes = append(resp.Nodes, v.nodeView(c.rec))
			inResp[c.id] = true
		}
	}
	// Manager statuses move with etcd's members and the heartbeats, and a
	// node's shown status with this leader's first heartbeat from it,
	// which no change reports.
	for _, n := range nodes {
		if s, ok := sent[n.Id]; ok && !inResp[n.Id] && s.rec == n && s != v.sent(n) {
			sent[n.Id] = v.sent(n)
			resp.Nodes = append(resp.Nodes, v.nodeView(n))
		}
	}
	return flush()
}

// WatchEvents sends the events after the revision asked for (or the
// newest backlog), then each new one as etcd records it, each once and in
// the order etcd wrote them. Every answer carries the revision up to
// which the client has everything: resumed from there, on whichever
// curator leads next, the stream neither repeats nor skips an event (but
// those trimmed from the bounded history meanwhile).
func (m *managementAPI) WatchEvents(req *pb.WatchEventsRequest, stream grpc.ServerStreamingServer[pb.WatchEventsResponse]) error {
	st, err := m.s.leaderFor()
	if err != nil {
		return err
	}
	if err := spec.CheckManagementRequest(req); err != nil {
		return err
	}
	ctx := stream.Context()
	doubt := st.Guard.ServingDone()
	after := req.AfterRevision
	backlog := int64(req.Backlog)
	match := spec.NewEventMatch(req.Filter, st.Reg.Nodes())
	first := true
	for {
		// Read what is kept after `after`, then watch from the revision
		// read at; a watch that ends (a compaction it fell behind) reads
		// again from what was sent. A filtered backlog is the newest
		// backlog of those selected, among all that are kept.
		read := backlog
		if backlog > 0 && !match.All() {
			read = 2 * store.MaxEvents // every event kept (trimmed a tenth past it)
		}
		events, rev, err := store.EventsAfter(ctx, m.s.cfg.Etcd, after, read)
		if err != nil {
			return err
		}
		if after > 0 {
			events = newestMatching(events, match, 0)
		} else {
			events = newestMatching(events, match, uint32(backlog))
		}
		backlog = 0
		if first || len(events) > 0 || rev > after {
			faults.Point(faults.WatchBeforeSend)
			if err := stream.Send(&pb.WatchEventsResponse{Events: events, Revision: rev}); err != nil {
				return err
			}
		}
		first = false
		after = rev
		after, err = m.followEvents(stream, st, doubt, after, match)
		if err != nil {
			return err
		}
	}
}

// followEvents sends the events etcd records after revision after until
// the watch ends (it returns the revision sent up to, to read again from)
// or the stream or the leadership does (an error).
func (m *managementAPI) followEvents(stream grpc.ServerStreamingServer[pb.WatchEventsResponse], st *leader.State, doubt <-chan struct{}, after int64, match *spec.EventMatch) (int64, error) {
	ctx := stream.Context()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := store.EventWatch(wctx, m.s.cfg.Etcd, after+1)
	for {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case wr, ok = <-wch:
		case <-st.Ctx.Done():
			return 0, spec.ErrNotLeader
		case <-doubt:
			return 0, spec.ErrNotLeader
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if !ok || wr.Canceled || wr.Err() != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return after, nil
		}
		resp := &pb.WatchEventsResponse{}
		for _, wev := range wr.Events {
			ev, err := store.EventCreated(wev)
			if err != nil {
				return 0, err
			}
			if ev != nil && match.Match(ev) {
				resp.Events = append(resp.Events, ev)
			}
			// etcd sends a revision's events together, and a watch that
			// catches up may send later revisions in later answers: what
			// was sent reaches the last event's revision, not the
			// header's.
			after = max(after, wev.Kv.ModRevision)
		}
		if wr.IsProgressNotify() {
			after = max(after, wr.Header.Revision)
		}
		resp.Revision = after
		if len(resp.Events) == 0 && !wr.IsProgressNotify() {
			continue
		}
		faults.Point(faults.WatchBeforeSend)
		if err := stream.Send(resp); err != nil {
			return 0, err
		}
	}
}
