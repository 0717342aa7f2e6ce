package curator

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// leaderState is what a leading curator keeps: the fence, and what only the
// leader knows (heartbeats, open streams). It lives exactly as long as the
// leadership. The node API (nodeAPI), the management API (managementAPI)
// and the loops (leaderLoops) each act through it; the membership changes
// they share (roles.go) are its methods, so each is written once and
// fenced once.
type leaderState struct {
	*leadership
	// cfg is the curator's configuration (read only).
	cfg *Config
	// ctx ends when the leadership does; streams served as leader use it.
	ctx   context.Context
	since time.Time
	pki   *store.ClusterPKI
	hb    *heartbeats
	// reg is the leader's watch-fed view of the node records.
	reg *store.Registry
	// joins queues the registrations that are written in batches.
	joins *joinQueue
	// guard says whether the election lease is surely still ours.
	guard *leaseGuard
	// hearer asks etcd's members who etcd hears from, for the membership
	// snapshot (observeMembership).
	hearer *consensus.Hearer
	// kickHealth makes the health loop look at once (a heartbeat from a
	// node that is not ready).
	kickHealth chan struct{}
	// kickSwarm makes the swarm sync look at once (a Swarm node event,
	// the cluster's Swarm mode set).
	kickSwarm chan struct{}
	// knocks is when a node was last turned away by this manager.
	knocks *knocks
	// kickGroups makes the group loop look at once (a group committed or
	// destroyed); providers are the groups' providers, made from their
	// specs, which the group loop and the group API use.
	kickGroups chan struct{}
	// kickUpgrade makes the upgrade loop look at once (an upgrade
	// started or cancelled).
	kickUpgrade chan struct{}
	providers   groupProviders
	// muGroups serialises the group API's read-modify-writes of group
	// records.
	muGroups sync.Mutex

	// swarmSeen is the Swarm's node list as the swarm sync last read it,
	// for `node ls`.
	swarmSeen swarmSeen

	// streams are the nodes' open session streams, so that removing a
	// node ends them (at its next heartbeat).
	streams nodeStreams
	// pushes carries record and manager changes to the session streams.
	pushes *sessionPushes

	// resigned is closed by resign.
	resigned   chan struct{}
	resignOnce sync.Once
}

// leadership is the fence of a leadership (store.Fence: every write and
// membership change goes through it) and the lock of its read-modify-write
// sequences on node records.
type leadership struct {
	*store.Fence
	// muNodes serialises read-modify-write sequences on node records, so a
	// status change and a role change on the same node do not lose each
	// other's write.
	muNodes sync.Mutex
}

// errResigned ends a leadership given up on purpose.
var errResigned = errors.New("resigned leadership")

// resign gives up leadership: the election runnable returns, revoking the
// lease, and another curator takes over.
func (st *leaderState) resign() {
	st.resignOnce.Do(func() { close(st.resigned) })
}

// timestamp is the clock's now, for a record.
func (st *leaderState) timestamp() *timestamppb.Timestamp { return timestamppb.New(st.cfg.Now()) }

// event is an event of this leadership, now: loop's action on node
// nodeID (may be empty), for reason.
func (st *leaderState) event(loop, action, nodeID, reason string) *pb.Event {
	return &pb.Event{Time: st.timestamp(), Loop: loop, NodeId: nodeID, Action: action, Reason: reason, Leader: st.cfg.NodeID, Term: st.Rev()}
}

// destroyNode deletes node id's record, fenced (with the events evs that
// explain it), forgets its heartbeats and ends its streams.
func (st *leaderState) destroyNode(ctx context.Context, id string, evs ...*pb.Event) error {
	if err := store.NodeDestroy(ctx, st.Fence, id, evs...); err != nil {
		return err
	}
	st.hb.forget(id)
	st.streams.drop(id)
	return nil
}

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

// nodeStreams tracks the streams each node has open with the leader. A
// node's certificate is checked when a stream opens; a node removed while
// its streams are open must not keep them.
type nodeStreams struct {
	mu     sync.Mutex
	next   int
	byNode map[string]map[int]chan struct{}
}

// open registers a stream of node id; dropped is closed when the node is
// removed, release unregisters the stream.
func (ns *nodeStreams) open(id string) (dropped <-chan struct{}, release func()) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.byNode == nil {
		ns.byNode = map[string]map[int]chan struct{}{}
	}
	if ns.byNode[id] == nil {
		ns.byNode[id] = map[int]chan struct{}{}
	}
	ns.next++
	key, ch := ns.next, make(chan struct{})
	ns.byNode[id][key] = ch
	return ch, func() {
		ns.mu.Lock()
		defer ns.mu.Unlock()
		delete(ns.byNode[id], key)
	}
}

// drop ends every open stream of node id.
func (ns *nodeStreams) drop(id string) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	for key, ch := range ns.byNode[id] {
		close(ch)
		delete(ns.byNode[id], key)
	}
	delete(ns.byNode, id)
}
