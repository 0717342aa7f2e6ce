package curator

import (
	"context"
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

// nodeSave writes a node record, fenced.
func nodeSave(ctx context.Context, l *leadership, n *pb.Node) error {
	data, err := proto.Marshal(n)
	if err != nil {
		return fmt.Errorf("save node %s: %w", n.Id, err)
	}
	if _, err := l.txnAsLeader(ctx, clientv3.OpPut(nodeKey(n.Id), string(data))); err != nil {
		return fmt.Errorf("save node %s: %w", n.Id, err)
	}
	return nil
}

// nodeCreate writes a new node record, fenced; ErrExists if the ID is taken.
func nodeCreate(ctx context.Context, l *leadership, n *pb.Node) error {
	data, err := proto.Marshal(n)
	if err != nil {
		return fmt.Errorf("create node %s: %w", n.Id, err)
	}
	ok, err := l.condTxnAsLeader(ctx,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(nodeKey(n.Id)), "=", 0)},
		clientv3.OpPut(nodeKey(n.Id), string(data)))
	if err != nil {
		return fmt.Errorf("create node %s: %w", n.Id, err)
	}
	if !ok {
		return fmt.Errorf("node %s: %w", n.Id, ErrExists)
	}
	return nil
}

// nodeDestroy deletes a node record, fenced.
func nodeDestroy(ctx context.Context, l *leadership, id string) error {
	if _, err := l.txnAsLeader(ctx, clientv3.OpDelete(nodeKey(id))); err != nil {
		return fmt.Errorf("destroy node %s: %w", id, err)
	}
	return nil
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
