package store

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	pb "github.com/curatorproject/curator/proto"
)

// Group records, at /curator/groups/<name>: the committed spec, its config
// SHA, and whether the group is being destroyed. Only the leader writes
// them, fenced; the group loop reads them every tick.

// GroupLoad reads one group; nil if there is none.
func GroupLoad(ctx context.Context, kv clientv3.KV, name string) (*pb.Group, error) {
	resp, err := kv.Get(ctx, groupKey(name))
	if err != nil {
		return nil, fmt.Errorf("load group %s: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return GroupUnmarshal(resp.Kvs[0])
}

func GroupUnmarshal(kv interface {
	GetKey() []byte
	GetValue() []byte
}) (*pb.Group, error) {
	g := &pb.Group{}
	if err := proto.Unmarshal(kv.GetValue(), g); err != nil {
		return nil, fmt.Errorf("group record %s is corrupt: %w", kv.GetKey(), err)
	}
	return g, nil
}

// GroupList reads every group, in name order.
func GroupList(ctx context.Context, kv clientv3.KV) ([]*pb.Group, error) {
	resp, err := kv.Get(ctx, groupPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	out := make([]*pb.Group, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		g, err := GroupUnmarshal(kv)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// GroupSave writes a group, fenced.
func GroupSave(ctx context.Context, l *Fence, g *pb.Group) error {
	data, err := proto.Marshal(g)
	if err != nil {
		return fmt.Errorf("save group %s: %w", g.Spec.GetName(), err)
	}
	if _, err := l.txn(ctx, clientv3.OpPut(groupKey(g.Spec.GetName()), string(data))); err != nil {
		return fmt.Errorf("save group %s: %w", g.Spec.GetName(), err)
	}
	return nil
}

// GroupChange changes group name's record as change says, fenced and on
// the record it read: a write made meanwhile by anyone (an operator's
// commit through another path, a test) is read again and changed anew,
// never overwritten. Nothing is written when the group is gone.
func GroupChange(ctx context.Context, l *Fence, name string, change func(*pb.Group)) error {
	for {
		resp, err := l.cli.Get(ctx, groupKey(name))
		if err != nil {
			return fmt.Errorf("load group %s: %w", name, err)
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		g, err := GroupUnmarshal(resp.Kvs[0])
		if err != nil {
			return err
		}
		change(g)
		data, err := proto.Marshal(g)
		if err != nil {
			return fmt.Errorf("save group %s: %w", name, err)
		}
		key := groupKey(name)
		_, err = l.txnIf(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)}, clientv3.OpPut(key, string(data)))
		switch {
		case errors.Is(err, ErrCompare):
			continue // changed since the read: read it again
		case err != nil:
			return fmt.Errorf("save group %s: %w", name, err)
		}
		return nil
	}
}

// GroupDestroy deletes a group's record, fenced.
func GroupDestroy(ctx context.Context, l *Fence, name string) error {
	if _, err := l.txn(ctx, clientv3.OpDelete(groupKey(name)), clientv3.OpDelete(rolloutKey(name))); err != nil {
		return fmt.Errorf("delete group %s: %w", name, err)
	}
	return nil
}
