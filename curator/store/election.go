package store

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The election's keys, /curator/election/<lease>, are etcd's concurrency
// package's; their value is the candidate's "<node id> <address>"
// (leaderValue). The leader deletes the keys of a node whose etcd member it
// removed: that node's curator cannot reach etcd any more to do it, and
// every other candidate would wait behind its key until its lease expires.

// ElectionKeysDrop deletes, fenced, the election keys of node id.
func ElectionKeysDrop(ctx context.Context, l *Fence, id string) error {
	resp, err := l.cli.Get(ctx, electionPrefix+"/", clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("election keys of node %s: %w", id, err)
	}
	var ops []clientv3.Op
	for _, kv := range resp.Kvs {
		if nodeID, _ := ParseLeaderValue(string(kv.Value)); nodeID == id && string(kv.Key) != l.key {
			ops = append(ops, clientv3.OpDelete(string(kv.Key)))
		}
	}
	if len(ops) == 0 {
		return nil
	}
	if _, err := l.txn(ctx, ops...); err != nil {
		return fmt.Errorf("drop the election keys of node %s: %w", id, err)
	}
	return nil
}

func ParseLeaderValue(v string) (nodeID, address string) {
	nodeID, address, _ = strings.Cut(v, " ")
	return nodeID, address
}

// NewElection is the curators' election, on session sess.
func NewElection(sess *concurrency.Session) *concurrency.Election {
	return concurrency.NewElection(sess, electionPrefix)
}

// NodeHasNewerKey says whether node id holds an election key created
// after revision rev (a key at rev is then a past incarnation's). An error
// reading the keys says no.
func NodeHasNewerKey(ctx context.Context, kv clientv3.KV, id string, rev int64) bool {
	resp, err := kv.Get(ctx, electionPrefix+"/", clientv3.WithPrefix())
	if err != nil {
		return false
	}
	for _, kv := range resp.Kvs {
		if nodeID, _ := ParseLeaderValue(string(kv.Value)); nodeID == id && kv.CreateRevision > rev {
			return true
		}
	}
	return false
}
