package store

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// ClusterLoad reads the cluster record.
func ClusterLoad(ctx context.Context, kv clientv3.KV) (*pb.ClusterState, error) {
	resp, err := kv.Get(ctx, clusterKey)
	if err != nil {
		return nil, fmt.Errorf("load cluster state: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("cluster state: %w (was the cluster initialised with `curator agent init`?)", spec.ErrNotFound)
	}
	cs := &pb.ClusterState{}
	if err := proto.Unmarshal(resp.Kvs[0].Value, cs); err != nil {
		return nil, fmt.Errorf("cluster state is corrupt: %w", err)
	}
	return cs, nil
}

// ClusterSave writes the cluster record, fenced.
func ClusterSave(ctx context.Context, l *Fence, cs *pb.ClusterState) error {
	data, err := proto.Marshal(cs)
	if err != nil {
		return fmt.Errorf("save cluster state: %w", err)
	}
	if _, err := l.txn(ctx, clientv3.OpPut(clusterKey, string(data))); err != nil {
		return fmt.Errorf("save cluster state: %w", err)
	}
	return nil
}

// ClusterPKI is the CA material read from etcd.
type ClusterPKI struct {
	CA     *pki.CA
	EtcdCA *pki.CA
}

// PKILoad reads the CAs.
func PKILoad(ctx context.Context, kv clientv3.KV) (*ClusterPKI, error) {
	resp, err := kv.Get(ctx, pkiKey)
	if err != nil {
		return nil, fmt.Errorf("load PKI: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("PKI: %w", spec.ErrNotFound)
	}
	st := &pb.PKIState{}
	if err := proto.Unmarshal(resp.Kvs[0].Value, st); err != nil {
		return nil, fmt.Errorf("PKI record is corrupt: %w", err)
	}
	ca, err := CAFromPEM(st.CaCert, st.CaKey)
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	etcdCA, err := CAFromPEM(st.EtcdCaCert, st.EtcdCaKey)
	if err != nil {
		return nil, fmt.Errorf("etcd CA: %w", err)
	}
	return &ClusterPKI{CA: ca, EtcdCA: etcdCA}, nil
}

func CAFromPEM(certPEM, keyPEM []byte) (*pki.CA, error) {
	cert, err := pki.DecodeCert(certPEM)
	if err != nil {
		return nil, err
	}
	key, err := pki.DecodeKey(keyPEM)
	if err != nil {
		return nil, err
	}
	return &pki.CA{Cert: cert, Key: key}, nil
}

// ClusterStorageRaise sets the cluster record's storage version to v,
// fenced, with the events evs, on the record as it is now: another write
// of the record between the read and the write (a cluster update) makes
// it try again, so that neither is lost. It returns what the version was.
func ClusterStorageRaise(ctx context.Context, l *Fence, v uint32, evs ...*pb.Event) (was uint32, err error) {
	ops, err := eventPuts(evs)
	if err != nil {
		return 0, err
	}
	for range 10 {
		resp, err := l.cli.Get(ctx, clusterKey)
		if err != nil {
			return 0, fmt.Errorf("load cluster state: %w", err)
		}
		if len(resp.Kvs) == 0 {
			return 0, fmt.Errorf("cluster state: %w", spec.ErrNotFound)
		}
		cs := &pb.ClusterState{}
		if err := proto.Unmarshal(resp.Kvs[0].Value, cs); err != nil {
			return 0, fmt.Errorf("cluster state is corrupt: %w", err)
		}
		was = cs.StorageVersion
		cs.StorageVersion = v
		data, err := proto.Marshal(cs)
		if err != nil {
			return was, err
		}
		unchanged := clientv3.Compare(clientv3.ModRevision(clusterKey), "=", resp.Kvs[0].ModRevision)
		_, err = l.txnIf(ctx, []clientv3.Cmp{unchanged}, append(ops, clientv3.OpPut(clusterKey, string(data)))...)
		if !errors.Is(err, ErrCompare) {
			return was, err
		}
	}
	return was, fmt.Errorf("save cluster state: it changed under each of 10 tries")
}
