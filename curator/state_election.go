package curator

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The election's keys, /curator/election/<lease>, are etcd's concurrency
// package's; their value is the candidate's "<node id> <address>"
// (leaderValue). The leader deletes the keys of a node whose etcd member it
// removed: that node's curator cannot reach etcd any more to do it, and
// every other candidate would wait behind its key until its lease expires.

// electionKeysDrop deletes, fenced, the election keys of node id.
func electionKeysDrop(ctx context.Context, l *leadership, id string) error {
	resp, err := l.cli.Get(ctx, electionPrefix+"/", clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("election keys of node %s: %w", id, err)
	}
	var ops []clientv3.Op
	for _, kv := range resp.Kvs {
		if nodeID, _ := parseLeaderValue(string(kv.Value)); nodeID == id && string(kv.Key) != l.key {
			ops = append(ops, clientv3.OpDelete(string(kv.Key)))
		}
	}
	if len(ops) == 0 {
		return nil
	}
	if _, err := l.txnAsLeader(ctx, ops...); err != nil {
		return fmt.Errorf("drop the election keys of node %s: %w", id, err)
	}
	return nil
}
