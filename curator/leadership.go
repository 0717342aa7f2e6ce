package curator

import (
	"context"
	"errors"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// leadership is what a curator holds while it leads: the election key and
// the revision at which it won. Every write the leader makes goes through
// txnAsLeader, which fences it on that key still existing at that revision:
// once the lease behind the key expires, or another curator wins, every
// write by this one fails with ErrNotLeader, whatever the old leader still
// believes.
type leadership struct {
	cli    *clientv3.Client
	nodeID string
	// key and rev identify our election key.
	key string
	rev int64

	// reg is the leader's view of the node records; node writes wait until
	// it has seen them. Nil outside a leadership (tests of the fence).
	reg *registry

	// muNodes serialises read-modify-write sequences on node records, so a
	// status change and a role change on the same node do not lose each
	// other's write.
	muNodes sync.Mutex
}

// fence is the condition under which a leader write may apply.
func (l *leadership) fence() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)
}

// txnAsLeader applies ops if we still lead. It returns ErrNotLeader when the
// fence fails.
func (l *leadership) txnAsLeader(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := l.cli.Txn(ctx).If(l.fence()).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("leader transaction: %w", err)
	}
	if !resp.Succeeded {
		return nil, ErrNotLeader
	}
	return resp, nil
}

// errCompare: a condition of txnAsLeaderIf other than the fence failed.
var errCompare = errors.New("a condition of the transaction failed")

// txnAsLeaderIf applies ops if we still lead and every one of cmps holds:
// ErrNotLeader when the fence fails, errCompare when only cmps do.
func (l *leadership) txnAsLeaderIf(ctx context.Context, cmps []clientv3.Cmp, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := l.cli.Txn(ctx).If(append([]clientv3.Cmp{l.fence()}, cmps...)...).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("leader transaction: %w", err)
	}
	if resp.Succeeded {
		return resp, nil
	}
	if _, err := l.txnAsLeader(ctx); err != nil {
		return nil, err
	}
	return nil, errCompare
}
