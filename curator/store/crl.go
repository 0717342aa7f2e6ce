package store

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The etcd CA's revocation list, at EtcdCRLKey (DER). Every consensus
// member's agent keeps its etcd reading a copy (see node), so a node that
// loses the consensus role loses etcd with it: its etcd certificate is
// listed when it is demoted or removed.

// EtcdCRLKey is where the etcd CA's revocation list is kept.
const EtcdCRLKey = keyPrefix + "etcd-crl"

// CRLLoad reads the list; nil when there is none yet.
func CRLLoad(ctx context.Context, kv clientv3.KV) ([]byte, error) {
	resp, err := kv.Get(ctx, EtcdCRLKey)
	if err != nil {
		return nil, fmt.Errorf("load etcd CRL: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0].Value, nil
}

// CRLSave writes the etcd certificate revocation list, fenced.
func CRLSave(ctx context.Context, l *Fence, der []byte) error {
	_, err := l.txn(ctx, clientv3.OpPut(EtcdCRLKey, string(der)))
	return err
}
