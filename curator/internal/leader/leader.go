// Package leader is what lives exactly as long as one leadership of a
// curator: its named parts (State: the fence, heartbeats, members,
// roles, the Swarm, machines, groups, events) and its loops, each a
// struct given the parts it uses. Package curator makes a State when it
// wins the election, serves its APIs through the parts and runs the loops
// (State.Run); nothing here imports package curator.
package leader

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/store"
)

// State is what a leading curator keeps, as named parts; it lives
// exactly as long as the leadership. The node and management APIs
// (package curator) act through its parts; each loop is given the parts
// it uses, and nothing else (loops in loop.go). Every outside effect has
// one fenced owner:
//   - node records: Records (ChangeNode, DestroyNode, the etcd CRL);
//   - etcd's membership: Members (Observe, remove a member);
//   - the consensus role: Roles (Promote, Demote, RemoveNode);
//   - the Swarm: Swarm (every engine call that changes it);
//   - machines: Machines (every Provision and Destroy);
//   - group records and rollouts: Groups;
//   - events: Events.
//
// The layer test (curator/layers_test.go) holds the Swarm's and the
// providers' calls to their parts.
type State struct {
	// Lead is the fence and the lock of node records.
	Lead *Leadership
	// Cfg is the curator's configuration (read only).
	Cfg *Config
	// Ctx ends when the leadership does; streams served as leader use it.
	Ctx context.Context
	PKI *store.ClusterPKI
	// Reg is the leader's watch-fed view of the node records.
	Reg *store.Registry
	// Joins queues the registrations that are written in batches.
	Joins *joinQueue
	// Guard says whether the election lease is surely still ours.
	Guard *leaseGuard
	// Knocks is when a node was last turned away by this manager.
	Knocks *Knocks
	// Pushes carries record and manager changes to the session streams.
	Pushes *sessionPushes

	Heartbeats *heartbeats
	Streams    *nodeStreams
	Events     *eventLog
	Records    *records
	Members    *members
	Roles      *roles
	Swarm      *swarmEngine
	Machines   *machines
	Groups     *groupRecords

	// KickHealth makes the health loop look at once (a heartbeat from a
	// node that is not ready).
	KickHealth chan struct{}
	// KickSwarm makes the swarm sync look at once (a Swarm node event,
	// the cluster's Swarm mode set).
	KickSwarm chan struct{}
	// kickUpgrade makes the upgrade loop look at once (an upgrade
	// started or cancelled).
	kickUpgrade chan struct{}

	// Resigned is closed by resign.
	Resigned   chan struct{}
	resignOnce sync.Once
}

// Config is what a leadership reads of the curator's configuration
// (curator.Config, whose fields of the same names say what each is, with their
// defaults applied): its node, its etcd client and Docker engine, its
// clock and logger, and the loops' timings. It is never changed.
type Config struct {
	NodeID string
	Etcd   *clientv3.Client
	// Docker is nil without the Swarm flavor's engine.
	Docker SwarmEngine
	Now    func() time.Time
	Logger *zap.Logger
	// MembershipChanges tells of each membership change the local etcd
	// member applies (nil: the membership loops see changes at their
	// resync only).
	MembershipChanges func(ctx context.Context, changed func())

	HeartbeatInterval, DownAfter                          time.Duration
	SyncInterval, MinActionGap                            time.Duration
	PollOnly                                              bool
	LearnerDownLimit, PromoteTimeout, MoveLeaderTimeout   time.Duration
	PlacementInterval, PlacementGap, PlacementMoveTimeout time.Duration
	ApprovalInterval, GroupInterval, ReapAfter            time.Duration
	SwarmInterval, SwarmTimeout                           time.Duration
}

// New wires the parts of a leadership: lead is its fence, reg
// its registry view, guard its lease guard.
func New(ctx context.Context, cfg *Config, lead *Leadership, reg *store.Registry, cp *store.ClusterPKI, guard *leaseGuard, kn *Knocks) *State {
	st := &State{
		Lead: lead, Cfg: cfg, Ctx: ctx, PKI: cp, Reg: reg, Guard: guard, Knocks: kn,
		Joins:       newJoinQueue(),
		Pushes:      newSessionPushes(),
		Streams:     &nodeStreams{},
		KickHealth:  make(chan struct{}, 1),
		kickUpgrade: make(chan struct{}, 1),
		KickSwarm:   make(chan struct{}, 1),
		Resigned:    make(chan struct{}),
	}
	st.Heartbeats = newHeartbeats(cfg, cfg.Now(), guard)
	st.Events = &eventLog{fence: lead.Fence, cfg: cfg, reg: reg}
	st.Records = &records{lead: lead, cfg: cfg, reg: reg, pki: cp, hb: st.Heartbeats, streams: st.Streams}
	st.Members = &members{lead: lead, cfg: cfg, reg: reg, hb: st.Heartbeats, hearer: consensus.NewHearer(cfg.Etcd)}
	st.Swarm = &swarmEngine{fence: lead.Fence, cfg: cfg}
	st.Machines = &machines{fence: lead.Fence, lg: cfg.Logger}
	st.Roles = &roles{lead: lead, cfg: cfg, pki: cp, records: st.Records, members: st.Members, swarm: st.Swarm, resign: st.resign}
	st.Groups = &groupRecords{fence: lead.Fence, cfg: cfg, events: st.Events, kicks: make(chan struct{}, 1)}
	return st
}

// Close ends what the parts hold open: the hearer's connections and the
// providers'.
func (st *State) Close() {
	st.Members.hearer.Close()
	st.Machines.close()
}

// Leadership is the fence of a leadership (store.Fence: every write and
// membership change goes through it) and the lock of its read-modify-write
// sequences on node records.
type Leadership struct {
	*store.Fence
	// MuNodes serialises read-modify-write sequences on node records, so a
	// status change and a role change on the same node do not lose each
	// other's write.
	MuNodes sync.Mutex
}

// errResigned ends a leadership given up on purpose.
var ErrResigned = errors.New("resigned leadership")

// resign gives up leadership: the election runnable returns, revoking the
// lease, and another curator takes over.
func (st *State) resign() {
	st.resignOnce.Do(func() { close(st.Resigned) })
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

func (h *heartbeats) Beat(id string, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last[id] = t
}

// BeatAll notes a heartbeat of each node of ids at t (a liveness digest).
func (h *heartbeats) BeatAll(ids []string, t time.Time) {
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

func (h *heartbeats) Get(id string) (time.Time, bool) {
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

// LeaderSince is when this leadership began: a node heard or judged
// before then is vouched for by no one here (shownStatus).
func (h *heartbeats) LeaderSince() time.Time { return h.since }

// ServingSince is when this leader last started to serve: its election,
// or its coming back from doubt. Heartbeats before then went elsewhere.
func (h *heartbeats) ServingSince() time.Time {
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

// Open registers a stream of node id; dropped is closed when the node is
// removed, release unregisters the stream.
func (ns *nodeStreams) Open(id string) (dropped <-chan struct{}, release func()) {
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

// Knocks remembers when a node last knocked at this manager and was
// turned away before its session began: a set-up paced by the gate or
// told to come back later, a TLS handshake shed. Nodes still knocking are
// nodes still arriving: a new leader's health loop does not end the
// failover's hold while they do (decide.Health).
type Knocks struct {
	at atomic.Int64 // Unix nanoseconds; 0: never
}

func (k *Knocks) Note(t time.Time) { k.at.Store(t.UnixNano()) }

// Last is when a node was last turned away (zero: never).
func (k *Knocks) Last() time.Time {
	if ns := k.at.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}
