package curator

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// clusterLoad reads the cluster record.
func clusterLoad(ctx context.Context, kv clientv3.KV) (*pb.ClusterState, error) {
	resp, err := kv.Get(ctx, clusterKey)
	if err != nil {
		return nil, fmt.Errorf("load cluster state: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("cluster state: %w (was the cluster initialised with `curator agent init`?)", ErrNotFound)
	}
	cs := &pb.ClusterState{}
	if err := proto.Unmarshal(resp.Kvs[0].Value, cs); err != nil {
		return nil, fmt.Errorf("cluster state is corrupt: %w", err)
	}
	return cs, nil
}

// clusterSave writes the cluster record, fenced.
func clusterSave(ctx context.Context, l *leadership, cs *pb.ClusterState) error {
	data, err := proto.Marshal(cs)
	if err != nil {
		return fmt.Errorf("save cluster state: %w", err)
	}
	if _, err := l.txnAsLeader(ctx, clientv3.OpPut(clusterKey, string(data))); err != nil {
		return fmt.Errorf("save cluster state: %w", err)
	}
	return nil
}

// clusterPKI is the CA material read from etcd.
type clusterPKI struct {
	CA     *pki.CA
	EtcdCA *pki.CA
}

// pkiLoad reads the CAs.
func pkiLoad(ctx context.Context, kv clientv3.KV) (*clusterPKI, error) {
	resp, err := kv.Get(ctx, pkiKey)
	if err != nil {
		return nil, fmt.Errorf("load PKI: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("PKI: %w", ErrNotFound)
	}
	st := &pb.PKIState{}
	if err := proto.Unmarshal(resp.Kvs[0].Value, st); err != nil {
		return nil, fmt.Errorf("PKI record is corrupt: %w", err)
	}
	ca, err := caFromPEM(st.CaCert, st.CaKey)
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	etcdCA, err := caFromPEM(st.EtcdCaCert, st.EtcdCaKey)
	if err != nil {
		return nil, fmt.Errorf("etcd CA: %w", err)
	}
	return &clusterPKI{CA: ca, EtcdCA: etcdCA}, nil
}

func caFromPEM(certPEM, keyPEM []byte) (*pki.CA, error) {
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
