package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// BootstrapParams is what `agent init` knows when it creates a cluster.
type BootstrapParams struct {
	// ClusterID names the new cluster.
	ClusterID string
	// WorkerToken and ManagerToken are the first join tokens; empty means
	// make new ones.
	WorkerToken, ManagerToken *pki.Token
	CA, EtcdCA                *pki.CA
	// First is the first node's record: ID, name, address, public key,
	// availability, version and consensus join parameters.
	First *pb.Node
	// CertTTL is the cluster's cert_ttl; 0 means DefaultCertTTL.
	CertTTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Bootstrap writes the records of a new cluster into its first etcd member:
// the cluster record (ID, token secrets, settings), the CAs and the first
// node. It runs before any curator exists, so it is not fenced; it writes
// all of it in one transaction and only if no cluster record exists yet,
// so running it again (an init that crashed half-way and is resumed) is
// harmless. It returns the cluster record in force.
func Bootstrap(ctx context.Context, cli *clientv3.Client, p BootstrapParams) (*pb.ClusterState, error) {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	if p.ClusterID == "" || p.CA == nil || p.EtcdCA == nil || p.First == nil {
		return nil, errors.New("bootstrap: cluster ID, CAs and first node are all required")
	}
	worker, manager := p.WorkerToken, p.ManagerToken
	for _, t := range []**pki.Token{&worker, &manager} {
		if *t == nil {
			tok, err := pki.NewToken(p.CA.Cert)
			if err != nil {
				return nil, err
			}
			*t = &tok
		}
	}
	ts := timestamppb.New(now())
	cs := &pb.ClusterState{
		ClusterId:          p.ClusterID,
		WorkerTokenSecret:  worker.Secret,
		ManagerTokenSecret: manager.Secret,
		MaxVoters:          spec.DefaultMaxVoters,
		Created:            ts,
	}
	if p.CertTTL != 0 {
		if err := spec.CheckCertTTL(p.CertTTL); err != nil {
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
		cs.CertTtl = durationpb.New(p.CertTTL)
	}
	caKey, err := pki.EncodeKey(p.CA.Key)
	if err != nil {
		return nil, err
	}
	etcdKey, err := pki.EncodeKey(p.EtcdCA.Key)
	if err != nil {
		return nil, err
	}
	pkiState := &pb.PKIState{
		CaCert: pki.EncodeCert(p.CA.Cert), CaKey: caKey,
		EtcdCaCert: pki.EncodeCert(p.EtcdCA.Cert), EtcdCaKey: etcdKey,
	}
	first := proto.Clone(p.First).(*pb.Node)
	first.State = pb.NodeState_NODE_STATE_UP
	first.Status = pb.NodeStatus_NODE_STATUS_UNKNOWN
	first.Created, first.Updated, first.StatusChanged = ts, ts, ts
	if first.Labels == nil {
		first.Labels = map[string]string{}
	}
	var ops []clientv3.Op
	for key, msg := range map[string]proto.Message{clusterKey: cs, pkiKey: pkiState, nodeKey(first.Id): first} {
		data, err := proto.Marshal(msg)
		if err != nil {
			return nil, err
		}
		ops = append(ops, clientv3.OpPut(key, string(data)))
	}
	// The etcd CA's revocation list starts empty; the first node holds a
	// copy in its join parameters already.
	crl := first.GetConsensus().GetEtcdCrl()
	if crl == nil {
		if crl, err = p.EtcdCA.NewCRL(nil, 1); err != nil {
			return nil, err
		}
	}
	ops = append(ops, clientv3.OpPut(EtcdCRLKey, string(crl)))
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(clusterKey), "=", 0)).
		Then(ops...).
		Else(clientv3.OpGet(clusterKey)).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("bootstrap cluster records: %w", err)
	}
	if resp.Succeeded {
		return cs, nil
	}
	existing := &pb.ClusterState{}
	if err := proto.Unmarshal(resp.Responses[0].GetResponseRange().Kvs[0].Value, existing); err != nil {
		return nil, fmt.Errorf("cluster state is corrupt: %w", err)
	}
	return existing, nil
}
