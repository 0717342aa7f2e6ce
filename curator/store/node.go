package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

// Node records: small verbs on one entity. Reads need no fence (a reader
// that lost Fence returns stale data at worst); writes go through the
// Fence.

func NodeUnmarshal(key string, value []byte) (*pb.Node, error) {
	n := &pb.Node{}
	if err := proto.Unmarshal(value, n); err != nil {
		return nil, fmt.Errorf("node record %s is corrupt: %w", key, err)
	}
	return n, nil
}

// NodeLoad reads one node by exact ID; ErrNotFound if there is none.
func NodeLoad(ctx context.Context, kv clientv3.KV, id string) (*pb.Node, error) {
	resp, err := kv.Get(ctx, nodeKey(id))
	if err != nil {
		return nil, fmt.Errorf("load node %s: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("node %s: %w", id, spec.ErrNotFound)
	}
	return NodeUnmarshal(string(resp.Kvs[0].Key), resp.Kvs[0].Value)
}

// NodeList reads every node, sorted by ID.
func NodeList(ctx context.Context, kv clientv3.KV) ([]*pb.Node, error) {
	resp, err := kv.Get(ctx, nodePrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	nodes := make([]*pb.Node, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		n, err := NodeUnmarshal(string(kv.Key), kv.Value)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Id < nodes[j].Id })
	return nodes, nil
}

// NodeResolve finds the one node that query names: an exact ID, a node
// name, or a unique prefix of an ID, in that order of preference.
func NodeResolve(nodes []*pb.Node, query string) (*pb.Node, error) {
	query = strings.TrimSpace(query)
	if query == "" {
		return nil, fmt.Errorf("%w: a node ID, ID prefix or name is required", spec.ErrInvalid)
	}
	var byName, byPrefix []*pb.Node
	for _, n := range nodes {
		if n.Id == query {
			return n, nil
		}
		if n.Name == query {
			byName = append(byName, n)
		}
		if strings.HasPrefix(n.Id, query) {
			byPrefix = append(byPrefix, n)
		}
	}
	for _, matches := range [][]*pb.Node{byName, byPrefix} {
		switch len(matches) {
		case 0:
			continue
		case 1:
			return matches[0], nil
		default:
			ids := make([]string, len(matches))
			for i, n := range matches {
				ids[i] = n.Id
			}
			return nil, fmt.Errorf("%w: %s matches %d nodes (%s): give more of the ID", spec.ErrInvalid, spec.QuoteShort(query), len(matches), strings.Join(ids, ", "))
		}
	}
	return nil, fmt.Errorf("no node with ID, ID prefix or name %s: %w (list nodes with `curator node ls`)", spec.QuoteShort(query), spec.ErrNotFound)
}

// MaxNodesPerTxn bounds the records written in one transaction, well
// inside etcd's limit on operations per transaction (128 by default).
const MaxNodesPerTxn = 100

// NodeSave writes a node record, fenced.
func NodeSave(ctx context.Context, l *Fence, n *pb.Node) error {
	if err := NodeSaveAll(ctx, l, []*pb.Node{n}); err != nil {
		return fmt.Errorf("save node %s: %w", n.Id, err)
	}
	return nil
}

// NodeSaveAll writes many changed node records, fenced, in as few
// transactions as etcd allows. A failure part way leaves the earlier
// batches written: each record is whole, and the loops that write many are
// level-triggered.
//
// Each record is written only if it still exists: a change decided on a
// record that was removed meanwhile (a node that left while the health
// loop marked it down) must not bring it back. Such a batch fails with
// ErrNodeGone, and the caller's next look sees the removal.
func NodeSaveAll(ctx context.Context, l *Fence, nodes []*pb.Node) error {
	return NodeWriteAll(ctx, l, nodes, true)
}

// NodeJoinAll writes the records of nodes that join, in batches as
// NodeSaveAll does (the join queue checked each against the Registry).
func NodeJoinAll(ctx context.Context, l *Fence, nodes []*pb.Node) error {
	return NodeWriteAll(ctx, l, nodes, false)
}

func NodeWriteAll(ctx context.Context, l *Fence, nodes []*pb.Node, mustExist bool) error {
	defer l.keepStatus(nodes)()
	return writeNodes(ctx, l, nodes, mustExist)
}

// A node's status (Status, StatusChanged) is the health loop's alone: it
// changes it with NodeStatusSaveAll, without muNodes, so that a
// membership change in flight (which holds muNodes across etcd calls that
// may wait on a dead member) never holds back the judgment that a node is
// down. Neither write undoes the other:
//   - every other write of an existing record keeps the status the view
//     holds (keepStatus), whatever the writer read before;
//   - the health loop writes its status onto the record as the view holds
//     it at that moment, not as it was when it decided;
//   - both hold statusMu across the write and the wait for the view
//     (seen), so what one reads there includes what the other wrote.

// keepStatus gives nodes (records about to be written by any writer but
// the health loop) the status the view holds now, under statusMu; the
// caller unlocks once its write is seen.
func (l *Fence) keepStatus(nodes []*pb.Node) (unlock func()) {
	if l.reg == nil {
		return func() {}
	}
	l.statusMu.Lock()
	for _, n := range nodes {
		if cur := l.reg.Node(n.Id); cur != nil {
			n.Status, n.StatusChanged = cur.Status, cur.StatusChanged
		}
	}
	return l.statusMu.Unlock
}

// StatusChange is a change of a node's status, by the health loop.
type StatusChange struct {
	ID     string
	Status pb.NodeStatus
	At     time.Time
}

// NodeStatusSaveAll writes the health loop's changes of status, each onto
// the node's record as the view holds it now (see keepStatus); a node
// removed since the loop decided is left removed. It needs the view: a
// fence without one refuses.
func NodeStatusSaveAll(ctx context.Context, l *Fence, changes []StatusChange) error {
	if l.reg == nil {
		return errors.New("save node statuses: the fence has no view of the node records")
	}
	l.statusMu.Lock()
	defer l.statusMu.Unlock()
	nodes := make([]*pb.Node, 0, len(changes))
	for _, c := range changes {
		cur := l.reg.Node(c.ID)
		if cur == nil {
			continue
		}
		n := CloneNode(cur)
		n.Status, n.StatusChanged = c.Status, timestamppb.New(c.At)
		nodes = append(nodes, n)
	}
	return writeNodes(ctx, l, nodes, true)
}

// nodeWrites is the transaction that writes nodes: each record put on the
// condition that it is still the one the leader's view holds (its mod
// revision), or, for a record the view does not hold, that it exists
// (mustExist) or nothing. The writers hold statusMu and wait until the
// view has their write, so the view is current for every write of this
// leader's.
//
// The condition is what makes a write that returned an error harmless
// later. A transaction can apply long after its caller gave up on it: a
// proposal that reached an etcd member frozen (SIGSTOP, a stalled VM)
// is forwarded to the raft leader when the member runs again, and the
// fence, which only asks that this leader still lead, holds. Put
// unconditionally, such a record (the health loop's mark-down of a
// node, with its labels as they were then) undid every change made to
// the node in between (the history checker found it: test/history,
// README.md). Now it finds the record changed and applies nothing.
func (l *Fence) nodeWrites(nodes []*pb.Node, mustExist bool) ([]clientv3.Cmp, []clientv3.Op, error) {
	ops := make([]clientv3.Op, 0, len(nodes))
	cmps := make([]clientv3.Cmp, 0, len(nodes))
	for _, n := range nodes {
		data, err := proto.Marshal(n)
		if err != nil {
			return nil, nil, fmt.Errorf("node %s: %w", n.Id, err)
		}
		ops = append(ops, clientv3.OpPut(nodeKey(n.Id), string(data)))
		var rev int64
		if l.reg != nil {
			rev = l.reg.NodeRevision(n.Id)
		}
		switch {
		case rev > 0:
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(nodeKey(n.Id)), "=", rev))
		case mustExist:
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(nodeKey(n.Id)), ">", 0))
		}
	}
	return cmps, ops, nil
}

// nodeCompareFailed says why a write of nodes found a record other than
// it expected: spec.ErrNodeGone if one was removed, else
// spec.ErrNodeChanged (written meanwhile by a write the view has not
// seen yet: the caller looks again).
func nodeCompareFailed(ctx context.Context, l *Fence, nodes []*pb.Node) error {
	for _, n := range nodes {
		resp, err := l.cli.Get(ctx, nodeKey(n.Id), clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Id, err)
		}
		if resp.Count == 0 {
			return spec.ErrNodeGone
		}
	}
	return spec.ErrNodeChanged
}

func writeNodes(ctx context.Context, l *Fence, nodes []*pb.Node, mustExist bool) error {
	for len(nodes) > 0 {
		batch := nodes[:min(len(nodes), MaxNodesPerTxn)]
		nodes = nodes[len(batch):]
		cmps, ops, err := l.nodeWrites(batch, mustExist)
		if err != nil {
			return err
		}
		resp, err := l.txnIf(ctx, cmps, ops...)
		if errors.Is(err, ErrCompare) {
			return nodeCompareFailed(ctx, l, batch)
		}
		if err != nil {
			return err
		}
		if err := l.seen(ctx, resp.Header.Revision); err != nil {
			return err
		}
	}
	return nil
}

// NodeCreate writes a new node record, fenced; ErrExists if the ID is taken.
func NodeCreate(ctx context.Context, l *Fence, n *pb.Node) error {
	data, err := proto.Marshal(n)
	if err != nil {
		return fmt.Errorf("create node %s: %w", n.Id, err)
	}
	resp, err := l.txn(ctx, clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(nodeKey(n.Id)), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(nodeKey(n.Id), string(data))}, nil))
	if err != nil {
		return fmt.Errorf("create node %s: %w", n.Id, err)
	}
	if !resp.Responses[0].GetResponseTxn().Succeeded {
		return fmt.Errorf("node %s: %w", n.Id, spec.ErrExists)
	}
	return l.seen(ctx, resp.Header.Revision)
}

// NodeDestroy deletes a node record, fenced, and writes the events evs
// that explain it in the same transaction (a leader that dies after it
// loses no event).
func NodeDestroy(ctx context.Context, l *Fence, id string, evs ...*pb.Event) error {
	ops, err := eventPuts(evs)
	if err != nil {
		return err
	}
	resp, err := l.txn(ctx, append(ops, clientv3.OpDelete(nodeKey(id)))...)
	if err != nil {
		return fmt.Errorf("destroy node %s: %w", id, err)
	}
	return l.seen(ctx, resp.Header.Revision)
}

// seen waits until the leader's Registry view holds revision rev, so that
// what a caller reads after its write includes the write.
func (l *Fence) seen(ctx context.Context, rev int64) error {
	if l.reg == nil {
		return nil
	}
	return l.reg.CaughtUp(ctx, rev)
}

// CloneNode returns a copy of a node to change: records in the Registry
// view are shared.
func CloneNode(n *pb.Node) *pb.Node { return proto.Clone(n).(*pb.Node) }

// NodeLoadRev reads node id's record as NodeLoad does, with the revision
// of the read (nil and the revision when there is none), for NodeWatch.
func NodeLoadRev(ctx context.Context, kv clientv3.KV, id string) (*pb.Node, int64, error) {
	resp, err := kv.Get(ctx, nodeKey(id))
	if err != nil {
		return nil, 0, fmt.Errorf("read node %s: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, resp.Header.Revision, nil
	}
	n, err := NodeUnmarshal(nodeKey(id), resp.Kvs[0].Value)
	return n, resp.Header.Revision, err
}

// NodeWatch watches node id's record from revision from on (a watch that
// needs etcd to have a leader).
func NodeWatch(ctx context.Context, w clientv3.Watcher, id string, from int64) clientv3.WatchChan {
	return w.Watch(clientv3.WithRequireLeader(ctx), nodeKey(id), clientv3.WithRev(from))
}

// NodeListLocal reads every node record from the etcd member the client
// talks to, serializable: answered without a leader, perhaps stale.
func NodeListLocal(ctx context.Context, kv clientv3.KV) ([]*pb.Node, error) {
	resp, err := kv.Get(ctx, nodePrefix, clientv3.WithPrefix(), clientv3.WithSerializable())
	if err != nil {
		return nil, err
	}
	var out []*pb.Node
	for _, kv := range resp.Kvs {
		if n, err := NodeUnmarshal(string(kv.Key), kv.Value); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}
