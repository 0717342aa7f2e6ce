package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
)

// Pending promotions: what approving a node that joined with the manager
// token owes it. The approval writes the node's record and the promotion in
// one fenced transaction, so no crash can approve a node and forget that it
// is to be a manager; the manager-approvals loop finishes the promotion
// and deletes the key. The value is the time of the approval.

// NodeApprove writes the approved node n and, if promote, its pending
// promotion, in one fenced transaction.
func NodeApprove(ctx context.Context, l *Fence, n *pb.Node, promote bool) error {
	defer l.keepStatus([]*pb.Node{n})()
	data, err := proto.Marshal(n)
	if err != nil {
		return fmt.Errorf("approve node %s: %w", n.Id, err)
	}
	ops := []clientv3.Op{clientv3.OpPut(nodeKey(n.Id), string(data))}
	if promote {
		at, err := proto.Marshal(n.Updated)
		if err != nil {
			return fmt.Errorf("approve node %s: %w", n.Id, err)
		}
		ops = append(ops, clientv3.OpPut(promotionKey(n.Id), string(at)))
	}
	resp, err := l.txn(ctx, ops...)
	if err != nil {
		return fmt.Errorf("approve node %s: %w", n.Id, err)
	}
	// As every write of a node record: return once the leader's view of
	// the Registry has it.
	return l.seen(ctx, resp.Header.Revision)
}

// PromotionList reads the pending promotions: node ID → time of approval.
func PromotionList(ctx context.Context, kv clientv3.KV) (map[string]time.Time, error) {
	resp, err := kv.Get(ctx, promotionPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list pending promotions: %w", err)
	}
	out := make(map[string]time.Time, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		ts := &timestamppb.Timestamp{}
		if err := proto.Unmarshal(kv.Value, ts); err != nil {
			return nil, fmt.Errorf("pending promotion %s is corrupt: %w", kv.Key, err)
		}
		out[strings.TrimPrefix(string(kv.Key), promotionPrefix)] = ts.AsTime()
	}
	return out, nil
}

// PromotionDrop deletes node id's pending promotion, fenced, and says
// whether there was one.
func PromotionDrop(ctx context.Context, l *Fence, id string) (bool, error) {
	resp, err := l.txn(ctx, clientv3.OpDelete(promotionKey(id)))
	if err != nil {
		return false, fmt.Errorf("drop pending promotion of node %s: %w", id, err)
	}
	return resp.Responses[0].GetResponseDeleteRange().Deleted > 0, nil
}
