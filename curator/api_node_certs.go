package curator

import (
	"context"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// RenewCertificate issues the calling node a new node certificate and, if
// it holds the consensus role, a new etcd certificate (docs/architecture.md,
// "Certificates"). The caller proved who it is with its current node
// certificate in the TLS handshake (an expired one fails there), and the
// interceptor has checked that the node is still in the registry; the
// check is repeated here under muNodes, so a node removed a moment ago
// gets nothing.
//
// The key stays the node's for life: the node's ID is derived from it,
// so a new key would be a new node. The leader certifies the key and the
// address in the node's record, never anything the caller sends, so a
// renewal can only extend what the node was given when it joined.
func (a *nodeAPI) RenewCertificate(ctx context.Context, _ *pb.RenewCertificateRequest) (*pb.RenewCertificateResponse, error) {
	s := a.s
	st, err := s.leaderFor()
	if err != nil {
		return nil, err
	}
	id := identityFrom(ctx).nodeID
	cs, err := store.ClusterLoad(ctx, s.cfg.Etcd)
	if err != nil {
		return nil, err
	}
	ttl := spec.CertTTL(cs)
	st.Lead.MuNodes.Lock()
	defer st.Lead.MuNodes.Unlock()
	shared := st.Reg.Node(id)
	if shared == nil || shared.State == pb.NodeState_NODE_STATE_DECOMMISSIONED {
		return nil, fmt.Errorf("%w: node %s was removed from this cluster and cannot renew its certificate: to join again, stop its agent, wipe its data dir and run `curator agent join`", spec.ErrDenied, id)
	}
	n := store.CloneNode(shared)
	pub, err := spec.ParsePublicKey(n.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", id, err)
	}
	ip, _, err := spec.SplitAddress(n.Address)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", id, err)
	}
	cert, err := st.PKI.CA.Issue(pki.CertRequest{PublicKey: pub, NodeID: id, Role: pki.RoleNode, IPs: []net.IP{ip}, Validity: ttl})
	if err != nil {
		return nil, fmt.Errorf("renew node certificate of %s: %w", id, err)
	}
	resp := &pb.RenewCertificateResponse{NodeCert: pki.EncodeCert(cert), CaCert: pki.EncodeCert(st.PKI.CA.Cert)}
	if spec.HasRole(n, pb.Role_ROLE_CONSENSUS) && n.Consensus != nil && len(n.Consensus.EtcdCert) > 0 {
		etcdCert, err := st.PKI.EtcdCA.Issue(pki.CertRequest{PublicKey: pub, NodeID: id, Role: pki.RoleConsensus, IPs: []net.IP{ip}, Validity: ttl})
		if err != nil {
			return nil, fmt.Errorf("renew etcd certificate of %s: %w", id, err)
		}
		// The record names every etcd certificate the node may still
		// present, so a demotion revokes them all (revokeEtcdCert).
		n.Consensus.RetiredEtcdCerts = retiredEtcdCerts(append(n.Consensus.RetiredEtcdCerts, n.Consensus.EtcdCert), st.Cfg.Now())
		n.Consensus.EtcdCert = pki.EncodeCert(etcdCert)
		resp.EtcdCert = n.Consensus.EtcdCert
	}
	n.CertExpires = timestamppb.New(cert.NotAfter)
	if err := store.NodeSave(ctx, st.Lead.Fence, n); err != nil {
		return nil, err
	}
	s.logger(ctx).Info("renewed certificates", zap.String("node", id), zap.Time("expires", cert.NotAfter), zap.Bool("etcd", len(resp.EtcdCert) > 0))
	s.metrics.CertRenewals.Inc()
	return resp, nil
}

// retiredEtcdCerts keeps the certificates (PEM) that have not expired at
// now; one that cannot be read is kept, to be revoked rather than lost.
func retiredEtcdCerts(certs [][]byte, now time.Time) [][]byte {
	var keep [][]byte
	for _, c := range certs {
		cert, err := pki.DecodeCert(c)
		if err == nil && cert.NotAfter.Before(now) {
			continue
		}
		keep = append(keep, c)
	}
	return keep
}
