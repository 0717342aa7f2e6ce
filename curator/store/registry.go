package store

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/internal/faults"
	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// Registry is the leader's view of the node records: loaded once, then kept
// current by a single etcd watch on the node prefix (reloaded when the watch
// falls behind a compaction). Every loop, handler and node stream of the
// leader reads it instead of etcd, so the cost of a read does not grow with
// the number of readers; subscribers are told of the changes their filter
// takes.
//
// Records in the view are shared and must never be modified: a caller that
// changes a node works on clone(). Only the leader writes node records, and
// every write it makes waits (caughtUp) until the view has seen it, so a
// read after a write always sees the write.
type Registry struct {
	cli *clientv3.Client

	mu sync.RWMutex
	// rev is the etcd revision the view reflects.
	rev int64
	// loaded is closed once the first load is done.
	loaded chan struct{}
	byID   map[string]*pb.Node
	// revs are the records' mod revisions: a write of a record is made
	// on the condition that it is still the one the view holds
	// (writeNodes).
	revs map[string]int64
	// ids caches the node IDs, sorted; nil until a reader asks, and
	// after a node is deleted. added are the IDs of the nodes that came
	// since, which the next reader merges in (sortedIDs): a join wave
	// adds hundreds a second, and copying the whole list for each cost
	// the leader more than its readers (a loop's tick, a page) ask.
	ids   []string
	added []string
	// consensusNodes are the nodes that hold, held or are handing back
	// the consensus role (MembershipChange): what the membership loops
	// look at, a handful in a fleet of thousands.
	consensusNodes map[string]*pb.Node
	// byPeerURL, byName and byAddress map etcd peer URLs, names and gRPC
	// addresses to node IDs.
	byPeerURL map[string]string
	byName    map[string]string
	byAddress map[string]string
	// managers is the managers' gRPC addresses, sorted.
	managers []string
	// advanced is closed whenever rev moves.
	advanced chan struct{}
	// subs are woken by changes their filter accepts.
	subs []*registrySub
}

type registrySub struct {
	filter func(old, new *pb.Node) bool
	ch     chan struct{}
}

func NewRegistry(cli *clientv3.Client) *Registry {
	return &Registry{
		cli:            cli,
		loaded:         make(chan struct{}),
		byID:           map[string]*pb.Node{},
		revs:           map[string]int64{},
		consensusNodes: map[string]*pb.Node{},
		byPeerURL:      map[string]string{},
		byName:         map[string]string{},
		byAddress:      map[string]string{},
		advanced:       make(chan struct{}),
	}
}

// run loads the view and follows etcd until ctx ends.
func (r *Registry) Run(ctx context.Context) error {
	lg := supervisor.Logger(ctx)
	for {
		rev, err := r.load(ctx)
		if err != nil {
			return err
		}
		err = r.follow(ctx, rev)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		lg.Warn("Registry watch ended: reloading", zap.Error(err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// load replaces the view with what etcd holds and returns the revision.
func (r *Registry) load(ctx context.Context) (int64, error) {
	resp, err := r.cli.Get(ctx, nodePrefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("load the Registry: %w", err)
	}
	nodes := map[string]*pb.Node{}
	revs := map[string]int64{}
	for _, kv := range resp.Kvs {
		n, err := NodeUnmarshal(string(kv.Key), kv.Value)
		if err != nil {
			return 0, err
		}
		nodes[n.Id], revs[n.Id] = n, kv.ModRevision
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Sorted again by the next reader, at once, not a node at a time.
	r.ids, r.added = nil, nil
	for id := range r.byID {
		if _, ok := nodes[id]; !ok {
			r.applyLocked(id, nil, 0)
		}
	}
	for id, n := range nodes {
		r.applyLocked(id, n, revs[id])
	}
	r.advanceLocked(resp.Header.Revision)
	select {
	case <-r.loaded:
	default:
		close(r.loaded)
	}
	return resp.Header.Revision, nil
}

// follow applies the watch from rev+1 until it fails. A compaction past
// our revision ends it with an error, and run reloads.
func (r *Registry) follow(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := r.cli.Watch(wctx, nodePrefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	for wr := range wch {
		if wr.CompactRevision != 0 {
			return fmt.Errorf("the Registry watch fell behind a compaction at revision %d", wr.CompactRevision)
		}
		if err := wr.Err(); err != nil {
			return err
		}
		// A slow apply (a delay given this point in a faults build):
		// the view lags etcd meanwhile.
		faults.Point(faults.RegistryBeforeApply)
		r.mu.Lock()
		for _, ev := range wr.Events {
			id := strings.TrimPrefix(string(ev.Kv.Key), nodePrefix)
			if ev.Type == clientv3.EventTypeDelete {
				r.applyLocked(id, nil, 0)
				continue
			}
			n, err := NodeUnmarshal(string(ev.Kv.Key), ev.Kv.Value)
			if err != nil {
				r.mu.Unlock()
				return err
			}
			r.applyLocked(id, n, ev.Kv.ModRevision)
		}
		last := wr.Header.Revision
		if k := len(wr.Events); k > 0 {
			last = max(last, wr.Events[k-1].Kv.ModRevision)
		}
		r.advanceLocked(last)
		r.mu.Unlock()
	}
	return errors.New("the Registry watch closed")
}

func (r *Registry) advanceLocked(rev int64) {
	if rev <= r.rev {
		return
	}
	r.rev = rev
	close(r.advanced)
	r.advanced = make(chan struct{})
}

// applyLocked makes n (nil: deleted) the record of node id and wakes who
// cares.
func (r *Registry) applyLocked(id string, n *pb.Node, rev int64) {
	old := r.byID[id]
	if old == nil && n == nil {
		return
	}
	if n == nil {
		delete(r.byID, id)
		delete(r.revs, id)
	} else {
		r.byID[id], r.revs[id] = n, rev
	}
	if (old == nil) != (n == nil) && r.ids != nil {
		if n != nil {
			r.added = append(r.added, id)
		} else {
			// Deletions are rare: the next reader sorts the IDs again.
			r.ids, r.added = nil, nil
		}
	}
	if MembershipChange(nil, n) {
		r.consensusNodes[id] = n
	} else {
		delete(r.consensusNodes, id)
	}
	if old != nil {
		if u, ok := NodePeerURL(old); ok && r.byPeerURL[u] == id {
			delete(r.byPeerURL, u)
		}
		if r.byName[old.Name] == id {
			delete(r.byName, old.Name)
		}
		if r.byAddress[old.Address] == id {
			delete(r.byAddress, old.Address)
		}
	}
	if n != nil {
		if u, ok := NodePeerURL(n); ok {
			r.byPeerURL[u] = id
		}
		r.byName[n.Name] = id
		r.byAddress[n.Address] = id
	}
	if ManagerAddress(old) != ManagerAddress(n) {
		r.managers = Managers(maps.Values(r.byID))
	}
	for _, s := range r.subs {
		if s.filter(old, n) {
			supervisor.Kick(s.ch)
		}
	}
}

// ManagerAddress is a node's gRPC address if it is a manager, else "".
func ManagerAddress(n *pb.Node) string {
	if n == nil || !spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
		return ""
	}
	return n.Address
}

func NodePeerURL(n *pb.Node) (string, bool) {
	ip, port, err := spec.SplitAddress(n.Address)
	if err != nil {
		return "", false
	}
	return consensus.PeerURL(ip.String(), port), true
}

// ready is closed once the view has been loaded.
func (r *Registry) Ready() <-chan struct{} { return r.loaded }

// waitLoaded blocks until the view has been loaded.
func (r *Registry) WaitLoaded(ctx context.Context) error {
	select {
	case <-r.loaded:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the leader's Registry is not loaded yet: %w", ctx.Err())
	}
}

// caughtUp blocks until the view reflects revision rev. A revision that
// changed no node key arrives by a progress notification, asked for when
// the watch has nothing else to say.
func (r *Registry) CaughtUp(ctx context.Context, rev int64) error {
	if err := r.WaitLoaded(ctx); err != nil {
		return err
	}
	for {
		r.mu.RLock()
		cur, advanced := r.rev, r.advanced
		r.mu.RUnlock()
		if cur >= rev {
			return nil
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("the leader's Registry did not reach revision %d (at %d): %w", rev, cur, ctx.Err())
		case <-advanced:
			t.Stop()
		case <-t.C:
			if err := r.cli.RequestProgress(ctx); err != nil && ctx.Err() == nil {
				return fmt.Errorf("Registry progress: %w", err)
			}
		}
	}
}

// nodes returns every node, sorted by ID. The records are shared: read
// only.
func (r *Registry) Nodes() []*pb.Node {
	ids := r.sortedIDs()
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*pb.Node, 0, len(ids))
	for _, id := range ids {
		// A node deleted since the IDs were read is left out.
		if n := r.byID[id]; n != nil {
			out = append(out, n)
		}
	}
	return out
}

// NodesPage returns up to limit nodes whose IDs sort after after, in ID
// order, and whether more follow: a page of a listing, without the copy
// of the whole fleet that Nodes makes.
func (r *Registry) NodesPage(after string, limit int) (page []*pb.Node, more bool) {
	ids := r.sortedIDs()
	i, found := slices.BinarySearch(ids, after)
	if found {
		i++
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	page = make([]*pb.Node, 0, min(limit, len(ids)-i))
	for ; i < len(ids) && len(page) < limit; i++ {
		// A node deleted since the IDs were read is left out.
		if n := r.byID[ids[i]]; n != nil {
			page = append(page, n)
		}
	}
	return page, i < len(ids)
}

// sortedIDs returns the node IDs, sorted: a slice that is never changed
// (the IDs added since are merged into a new one).
func (r *Registry) sortedIDs() []string {
	r.mu.RLock()
	ids, added := r.ids, len(r.added)
	r.mu.RUnlock()
	if ids != nil && added == 0 {
		return ids
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.ids == nil:
		r.ids = make([]string, 0, len(r.byID))
		for id := range r.byID {
			r.ids = append(r.ids, id)
		}
		sort.Strings(r.ids)
	case len(r.added) > 0:
		slices.Sort(r.added)
		r.ids = mergeSorted(r.ids, r.added)
	}
	r.added = nil
	return r.ids
}

// mergeSorted returns the sorted a and b (no ID in both) in a new slice.
func mergeSorted(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0] < b[0] {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// revision is the etcd revision the view reflects.
func (r *Registry) Revision() int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.rev
}

// count is how many nodes there are.
func (r *Registry) Count() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.byID)
}

// membershipNodes returns the nodes that hold, held or are handing back
// the consensus role, sorted by ID (shared: read only).
func (r *Registry) MembershipNodes() []*pb.Node {
	r.mu.RLock()
	out := make([]*pb.Node, 0, len(r.consensusNodes))
	for _, n := range r.consensusNodes {
		out = append(out, n)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Id < out[j].Id })
	return out
}

// node returns node id (shared: read only) or nil.
// NodeRevision is the mod revision of node id's record as the view holds
// it (0: the view has no such node).
func (r *Registry) NodeRevision(id string) int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.revs[id]
}

func (r *Registry) Node(id string) *pb.Node {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byID[id]
}

// nodeByPeerURL returns the ID of the node whose etcd peer URL is u, or "".
func (r *Registry) NodeByPeerURL(u string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byPeerURL[u]
}

// nodeNamed returns the node called name (shared: read only) or nil.
func (r *Registry) NodeNamed(name string) *pb.Node {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byID[r.byName[name]]
}

// nodeAt returns the node with gRPC address addr (shared: read only) or nil.
func (r *Registry) NodeAt(addr string) *pb.Node {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byID[r.byAddress[addr]]
}

// managerList returns the managers' gRPC addresses (shared: read only).
func (r *Registry) ManagerList() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.managers
}

// NodeAndManagers returns node id (nil if there is none) and the manager
// list, as of one moment.
func (r *Registry) NodeAndManagers(id string) (*pb.Node, []string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byID[id], r.managers
}

// subscribe returns a channel kicked (without blocking) by every change the
// filter accepts (old is nil for a new node, new nil for a deleted one),
// and the function that ends the subscription.
func (r *Registry) Subscribe(filter func(old, new *pb.Node) bool) (<-chan struct{}, func()) {
	sub := &registrySub{filter: filter, ch: make(chan struct{}, 1)}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subs = append(r.subs, sub)
	return sub.ch, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.subs = slices.DeleteFunc(r.subs, func(s *registrySub) bool { return s == sub })
	}
}

// MembershipChange says whether a node change can matter to etcd
// membership: it concerns a node that holds, held or is handing back the
// consensus role. A worker joining, beating or leaving cannot.
func MembershipChange(old, new *pb.Node) bool {
	for _, n := range []*pb.Node{old, new} {
		if n != nil && (spec.HasRole(n, pb.Role_ROLE_CONSENSUS) || n.Demoting || n.Consensus != nil) {
			return true
		}
	}
	return false
}

// managers lists the gRPC addresses of the nodes with the consensus role,
// sorted.
func Managers(nodes iter.Seq[*pb.Node]) []string {
	var out []string
	for n := range nodes {
		if a := ManagerAddress(n); a != "" {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}
