package curator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	pb "github.com/curatorproject/curator/proto"
)

// Node records: small verbs on one entity. Reads need no fence (a reader
// that lost leadership returns stale data at worst); writes go through the
// leadership.

func nodeUnmarshal(key string, value []byte) (*pb.Node, error) {
	n := &pb.Node{}
	if err := proto.Unmarshal(value, n); err != nil {
		return nil, fmt.Errorf("node record %s is corrupt: %w", key, err)
	}
	return n, nil
}

// nodeLoad reads one node by exact ID; ErrNotFound if there is none.
func nodeLoad(ctx context.Context, kv clientv3.KV, id string) (*pb.Node, error) {
	resp, err := kv.Get(ctx, nodeKey(id))
	if err != nil {
		return nil, fmt.Errorf("load node %s: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("node %s: %w", id, ErrNotFound)
	}
	return nodeUnmarshal(string(resp.Kvs[0].Key), resp.Kvs[0].Value)
}

// nodeList reads every node, sorted by ID.
func nodeList(ctx context.Context, kv clientv3.KV) ([]*pb.Node, error) {
	resp, err := kv.Get(ctx, nodePrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	nodes := make([]*pb.Node, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		n, err := nodeUnmarshal(string(kv.Key), kv.Value)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Id < nodes[j].Id })
	return nodes, nil
}

// nodeResolve finds the one node that query names: an exact ID, a node
// name, or a unique prefix of an ID, in that order of preference.
func nodeResolve(nodes []*pb.Node, query string) (*pb.Node, error) {
	query = strings.TrimSpace(query)
	if query == "" {
		return nil, fmt.Errorf("%w: a node ID, ID prefix or name is required", ErrInvalid)
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
			return nil, fmt.Errorf("%w: %s matches %d nodes (%s): give more of the ID", ErrInvalid, QuoteShort(query), len(matches), strings.Join(ids, ", "))
		}
	}
	return nil, fmt.Errorf("no node with ID, ID prefix or name %s: %w (list nodes with `curator node ls`)", QuoteShort(query), ErrNotFound)
}

// maxNodesPerTxn bounds the records written in one transaction, well
// inside etcd's limit on operations per transaction (128 by default).
const maxNodesPerTxn = 100

// nodeSave writes a node record, fenced.
func nodeSave(ctx context.Context, l *leadership, n *pb.Node) error {
	if err := nodeSaveAll(ctx, l, []*pb.Node{n}); err != nil {
		return fmt.Errorf("save node %s: %w", n.Id, err)
	}
	return nil
}

// nodeSaveAll writes many changed node records, fenced, in as few
// transactions as etcd allows. A failure part way leaves the earlier
// batches written: each record is whole, and the loops that write many are
// level-triggered.
//
// Each record is written only if it still exists: a change decided on a
// record that was removed meanwhile (a node that left while the health
// loop marked it down) must not bring it back. Such a batch fails with
// ErrNodeGone, and the caller's next look sees the removal.
func nodeSaveAll(ctx context.Context, l *leadership, nodes []*pb.Node) error {
	return nodeWriteAll(ctx, l, nodes, true)
}

// nodeJoinAll writes the records of nodes that join, in batches as
// nodeSaveAll does (the join queue checked each against the registry).
func nodeJoinAll(ctx context.Context, l *leadership, nodes []*pb.Node) error {
	return nodeWriteAll(ctx, l, nodes, false)
}

func nodeWriteAll(ctx context.Context, l *leadership, nodes []*pb.Node, mustExist bool) error {
	for len(nodes) > 0 {
		batch := nodes[:min(len(nodes), maxNodesPerTxn)]
		nodes = nodes[len(batch):]
		ops := make([]clientv3.Op, 0, len(batch))
		cmps := make([]clientv3.Cmp, 0, len(batch))
		for _, n := range batch {
			data, err := proto.Marshal(n)
			if err != nil {
				return fmt.Errorf("node %s: %w", n.Id, err)
			}
			ops = append(ops, clientv3.OpPut(nodeKey(n.Id), string(data)))
			if mustExist {
				cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(nodeKey(n.Id)), ">", 0))
			}
		}
		resp, err := l.txnAsLeaderIf(ctx, cmps, ops...)
		if errors.Is(err, errCompare) {
			return ErrNodeGone
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

// nodeCreate writes a new node record, fenced; ErrExists if the ID is taken.
func nodeCreate(ctx context.Context, l *leadership, n *pb.Node) error {
	data, err := proto.Marshal(n)
	if err != nil {
		return fmt.Errorf("create node %s: %w", n.Id, err)
	}
	resp, err := l.txnAsLeader(ctx, clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(nodeKey(n.Id)), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(nodeKey(n.Id), string(data))}, nil))
	if err != nil {
		return fmt.Errorf("create node %s: %w", n.Id, err)
	}
	if !resp.Responses[0].GetResponseTxn().Succeeded {
		return fmt.Errorf("node %s: %w", n.Id, ErrExists)
	}
	return l.seen(ctx, resp.Header.Revision)
}

// nodeDestroy deletes a node record, fenced.
func nodeDestroy(ctx context.Context, l *leadership, id string) error {
	resp, err := l.txnAsLeader(ctx, clientv3.OpDelete(nodeKey(id)))
	if err != nil {
		return fmt.Errorf("destroy node %s: %w", id, err)
	}
	return l.seen(ctx, resp.Header.Revision)
}

// seen waits until the leader's registry view holds revision rev, so that
// what a caller reads after its write includes the write.
func (l *leadership) seen(ctx context.Context, rev int64) error {
	if l.reg == nil {
		return nil
	}
	return l.reg.caughtUp(ctx, rev)
}

// cloneNode returns a copy of a node to change: records in the registry
// view are shared.
func cloneNode(n *pb.Node) *pb.Node { return proto.Clone(n).(*pb.Node) }

// changeNode changes node id's record under muNodes: change is given a
// copy of it and says whether it changed anything; if so the copy is
// saved, fenced, with its Updated time. A node that is gone is left so.
func (st *leaderState) changeNode(ctx context.Context, id string, change func(n *pb.Node) bool) error {
	st.muNodes.Lock()
	defer st.muNodes.Unlock()
	return st.changeNodeLocked(ctx, id, change)
}

// changeNodeLocked is changeNode for a caller that holds muNodes.
func (st *leaderState) changeNodeLocked(ctx context.Context, id string, change func(n *pb.Node) bool) error {
	shared := st.reg.node(id)
	if shared == nil {
		return nil
	}
	n := cloneNode(shared)
	if !change(n) {
		return nil
	}
	n.Updated = st.timestamp()
	return nodeSave(ctx, st.leadership, n)
}

// hasRole says whether n holds role r.
func hasRole(n *pb.Node, r pb.Role) bool {
	for _, have := range n.Roles {
		if have == r {
			return true
		}
	}
	return false
}
