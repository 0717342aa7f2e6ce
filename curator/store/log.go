package store

import (
	"context"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// A log is a bounded history of records under one prefix, each under a
// timeKey: the events and the audit trail. It is trimmed, oldest first,
// once it grows a tenth past its bound.

// logAppend writes msg at key, then trims the log under prefix to max
// records if it has grown a tenth past that: fenced when l is set, with a
// plain write on kv otherwise. what names a record in errors.
func logAppend(ctx context.Context, kv clientv3.KV, l *Fence, prefix, key string, msg proto.Message, max int64, what string) error {
	data, err := proto.Marshal(msg)
	if err != nil {
		return err
	}
	write := func(op clientv3.Op) error {
		if l != nil {
			_, err := l.txn(ctx, op)
			return err
		}
		_, err := kv.Do(ctx, op)
		return err
	}
	if err := write(clientv3.OpPut(key, string(data))); err != nil {
		return fmt.Errorf("record %s: %w", what, err)
	}
	count, err := kv.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("count the %s log: %w", what, err)
	}
	if count.Count <= max+max/10 {
		return nil
	}
	old, err := kv.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(count.Count-max))
	if err != nil || len(old.Kvs) == 0 {
		return err
	}
	return write(clientv3.OpDelete(prefix, clientv3.WithRange(string(old.Kvs[len(old.Kvs)-1].Key)+"\x00")))
}

// logNewest reads the newest limit records (0: all kept) of the log under
// prefix written after revision after (0: any), oldest first, and the
// revision it read at.
func logNewest[T proto.Message](ctx context.Context, kv clientv3.KV, prefix string, limit, after int64, newT func() T, what string) ([]T, int64, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)}
	if after > 0 {
		opts = append(opts, clientv3.WithMinModRev(after+1))
	}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(limit))
	}
	resp, err := kv.Get(ctx, prefix, opts...)
	if err != nil {
		return nil, 0, fmt.Errorf("list the %s log: %w", what, err)
	}
	out := make([]T, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m := newT()
		if err := proto.Unmarshal(kv.Value, m); err != nil {
			return nil, 0, fmt.Errorf("%s %s is corrupt: %w", what, kv.Key, err)
		}
		out = append(out, m)
	}
	slices.Reverse(out)
	return out, resp.Header.Revision, nil
}
