package leader

import (
	"context"
	"fmt"
	"math/big"
	"slices"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// records are the node records of a leadership and what goes with them,
// changed fenced under the lock of node records (lead.muNodes): a node's
// record, its heartbeats and streams when it goes, and the etcd
// certificates revoked with it.
type records struct {
	lead    *Leadership
	cfg     *Config
	reg     *store.Registry
	pki     *store.ClusterPKI
	hb      *heartbeats
	streams *nodeStreams
}

// DestroyNode deletes node id's record, fenced (with the events evs that
// explain it), forgets its heartbeats and ends its streams.
func (r *records) DestroyNode(ctx context.Context, id string, evs ...*pb.Event) error {
	if err := store.NodeDestroy(ctx, r.lead.Fence, id, evs...); err != nil {
		return err
	}
	r.hb.forget(id)
	r.streams.drop(id)
	return nil
}

// currentCRL returns the list in force, making an empty one if there is
// none yet.
func (r *records) currentCRL(ctx context.Context) ([]byte, error) {
	der, err := store.CRLLoad(ctx, r.cfg.Etcd)
	if err != nil || der != nil {
		return der, err
	}
	der, err = r.pki.EtcdCA.NewCRL(nil, 1)
	if err != nil {
		return nil, err
	}
	if err := store.CRLSave(ctx, r.lead.Fence, der); err != nil {
		return nil, err
	}
	return der, nil
}

// revokeEtcdCert lists the etcd certificate of join in the revocation
// list, with the earlier ones a renewal retired that have not expired yet,
// fenced. Revoking a certificate twice changes nothing.
func (r *records) revokeEtcdCert(ctx context.Context, join *pb.ConsensusJoin) error {
	if join == nil {
		return nil
	}
	var revoke []*big.Int
	for _, pemCert := range append([][]byte{join.EtcdCert}, join.RetiredEtcdCerts...) {
		if len(pemCert) == 0 {
			continue
		}
		cert, err := pki.DecodeCert(pemCert)
		if err != nil {
			return fmt.Errorf("revoke etcd certificate: %w", err)
		}
		revoke = append(revoke, cert.SerialNumber)
	}
	if len(revoke) == 0 {
		return nil
	}
	der, err := r.currentCRL(ctx)
	if err != nil {
		return err
	}
	number, serials, err := pki.ParseCRL(der, r.pki.EtcdCA.Cert)
	if err != nil {
		return err
	}
	added := false
	for _, sn := range revoke {
		if !slices.ContainsFunc(serials, func(x *big.Int) bool { return x.Cmp(sn) == 0 }) {
			serials = append(serials, new(big.Int).Set(sn))
			added = true
		}
	}
	if !added {
		return nil
	}
	next, err := r.pki.EtcdCA.NewCRL(serials, number+1)
	if err != nil {
		return err
	}
	if err := store.CRLSave(ctx, r.lead.Fence, next); err != nil {
		return fmt.Errorf("revoke etcd certificate: %w", err)
	}
	return nil
}

// ChangeNode changes node id's record under muNodes: change is given a
// copy of it and says whether it changed anything; if so the copy is
// saved, fenced, with its Updated time. A node that is gone is left so.
func (r *records) ChangeNode(ctx context.Context, id string, change func(n *pb.Node) bool) error {
	r.lead.MuNodes.Lock()
	defer r.lead.MuNodes.Unlock()
	return r.changeNodeLocked(ctx, id, change)
}

// changeNodeLocked is changeNode for a caller that holds muNodes.
func (r *records) changeNodeLocked(ctx context.Context, id string, change func(n *pb.Node) bool) error {
	shared := r.reg.Node(id)
	if shared == nil {
		return nil
	}
	n := store.CloneNode(shared)
	if !change(n) {
		return nil
	}
	n.Updated = timestamppb.New(r.cfg.Now())
	return store.NodeSave(ctx, r.lead.Fence, n)
}

// RequestSwarmJoin sets the Swarm join request in node id's record, for
// its agent to answer. Called with muNodes.
func (r *records) RequestSwarmJoin(ctx context.Context, id string) error {
	return r.changeNodeLocked(ctx, id, func(n *pb.Node) bool {
		n.SwarmJoinRequested = true
		return true
	})
}

// LockCaller locks the node records for a read-modify-write of the calling
// node's own, id (unlock when done), and returns its record, shared:
// ErrNotFound, unlocked, for a node that has no record.
func (r *records) LockCaller(id string) (shared *pb.Node, unlock func(), err error) {
	r.lead.MuNodes.Lock()
	if shared = r.reg.Node(id); shared == nil {
		r.lead.MuNodes.Unlock()
		return nil, nil, fmt.Errorf("node %s: %w", id, spec.ErrNotFound)
	}
	return shared, r.lead.MuNodes.Unlock, nil
}
