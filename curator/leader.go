package curator

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/store"
)

// leaderState is what a leading curator keeps, as named parts; it lives
// exactly as long as the leadership. The node API (nodeAPI) and the
// management API (managementAPI) act through its parts; each loop is
// given the parts it uses, and nothing else (loops in loop.go). Every
// outside effect has one fenced owner:
//   - node records: records (changeNode, destroyNode, the etcd CRL);
//   - etcd's membership: members (observe, remove a member);
//   - the consensus role: roles (promote, demote, remove a node);
//   - the Swarm: swarm (every engine call that changes it);
//   - machines: machines (every Provision and Destroy);
//   - group records and rollouts: groups;
//   - events: events.
//
// The layer test (layers_test.go) holds the Swarm's and the providers'
// calls to their parts.
type leaderState struct {
	// lead is the fence and the lock of node records.
	lead *leadership
	// cfg is the curator's configuration (read only).
	cfg *Config
	// ctx ends when the leadership does; streams served as leader use it.
	ctx context.Context
	pki *store.ClusterPKI
	// reg is the leader's watch-fed view of the node records.
	reg *store.Registry
	// joins queues the registrations that are written in batches.
	joins *joinQueue
	// guard says whether the election lease is surely still ours.
	guard *leaseGuard
	// knocks is when a node was last turned away by this manager.
	knocks *knocks
	// pushes carries record and manager changes to the session streams.
	pushes *sessionPushes

	hb       *heartbeats
	streams  *nodeStreams
	events   *eventLog
	records  *records
	members  *members
	roles    *roles
	swarm    *swarmEngine
	machines *machines
	groups   *groupRecords

	// kickHealth makes the health loop look at once (a heartbeat from a
	// node that is not ready).
	kickHealth chan struct{}
	// kickSwarm makes the swarm sync look at once (a Swarm node event,
	// the cluster's Swarm mode set).
	kickSwarm chan struct{}
	// kickUpgrade makes the upgrade loop look at once (an upgrade
	// started or cancelled).
	kickUpgrade chan struct{}

	// resigned is closed by resign.
	resigned   chan struct{}
	resignOnce sync.Once
}

// newLeaderState wires the parts of a leadership: lead is its fence, reg
// its registry view, guard its lease guard.
func newLeaderState(ctx context.Context, cfg *Config, lead *leadership, reg *store.Registry, cp *store.ClusterPKI, guard *leaseGuard, kn *knocks) *leaderState {
	st := &leaderState{
		lead: lead, cfg: cfg, ctx: ctx, pki: cp, reg: reg, guard: guard, knocks: kn,
		joins:       newJoinQueue(),
		pushes:      newSessionPushes(),
		streams:     &nodeStreams{},
		kickHealth:  make(chan struct{}, 1),
		kickUpgrade: make(chan struct{}, 1),
		kickSwarm:   make(chan struct{}, 1),
		resigned:    make(chan struct{}),
	}
	st.hb = newHeartbeats(cfg, cfg.Now(), guard)
	st.events = &eventLog{fence: lead.Fence, cfg: cfg, reg: reg}
	st.records = &records{lead: lead, cfg: cfg, reg: reg, pki: cp, hb: st.hb, streams: st.streams}
	st.members = &members{lead: lead, cfg: cfg, reg: reg, hb: st.hb, hearer: consensus.NewHearer(cfg.Etcd)}
	st.swarm = &swarmEngine{fence: lead.Fence, cfg: cfg}
	st.machines = &machines{fence: lead.Fence, lg: cfg.Logger}
	st.roles = &roles{lead: lead, cfg: cfg, pki: cp, records: st.records, members: st.members, swarm: st.swarm, resign: st.resign}
	st.groups = &groupRecords{fence: lead.Fence, cfg: cfg, events: st.events, kicks: make(chan struct{}, 1)}
	return st
}

// close ends what the parts hold open: the hearer's connections and the
// providers'.
func (st *leaderState) close() {
	st.members.hearer.Close()
	st.machines.close()
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

// heartbeats is the leader's memory of when each node last sent a
// heartbeat. It is never written to etcd: only status transitions are, so a
// fleet at rest writes nothing. It counts from when this leader began to
// serve (servingSince): heartbeats before then went elsewhere.
type heartbeats struct {
	cfg *Config
	// since is when the leadership began; guard says when it last came
	// back from doubt.
	since time.Time
	guard *leaseGuard

	mu   sync.Mutex
	last map[string]time.Time
}

func newHeartbeats(cfg *Config, since time.Time, guard *leaseGuard) *heartbeats {
	return &heartbeats{cfg: cfg, since: since, guard: guard, last: map[string]time.Time{}}
}

func (h *heartbeats) beat(id string, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last[id] = t
}

// beatAll notes a heartbeat of each node of ids at t (a liveness digest).
func (h *heartbeats) beatAll(ids []string, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		h.last[id] = t
	}
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

// read calls f with the heartbeats held still: last answers for one node
// (a whole fleet is read under one lock, not one each).
func (h *heartbeats) read(f func(last func(id string) (time.Time, bool))) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(func(id string) (time.Time, bool) {
		t, ok := h.last[id]
		return t, ok
	})
}

// leaderSince is when this leadership began: a node heard or judged
// before then is vouched for by no one here (shownStatus).
func (h *heartbeats) leaderSince() time.Time { return h.since }

// servingSince is when this leader last started to serve: its election,
// or its coming back from doubt. Heartbeats before then went elsewhere.
func (h *heartbeats) servingSince() time.Time {
	since := h.since
	if h.guard != nil {
		if r := h.guard.resumedAt(); r.After(since) {
			since = r
		}
	}
	return since
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
