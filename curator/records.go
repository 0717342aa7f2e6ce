package curator

import (
	"context"
	"fmt"
	"math/big"
	"slices"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// currentCRL returns the list in force, making an empty one if there is
// none yet.
func (st *leaderState) currentCRL(ctx context.Context) ([]byte, error) {
	der, err := store.CRLLoad(ctx, st.cfg.Etcd)
	if err != nil || der != nil {
		return der, err
	}
	der, err = st.pki.EtcdCA.NewCRL(nil, 1)
	if err != nil {
		return nil, err
	}
	if err := store.CRLSave(ctx, st.Fence, der); err != nil {
		return nil, err
	}
	return der, nil
}

// revokeEtcdCert lists the etcd certificate of join in the revocation
// list, with the earlier ones a renewal retired that have not expired yet,
// fenced. Revoking a certificate twice changes nothing.
func (st *leaderState) revokeEtcdCert(ctx context.Context, join *pb.ConsensusJoin) error {
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
	der, err := st.currentCRL(ctx)
	if err != nil {
		return err
	}
	number, serials, err := pki.ParseCRL(der, st.pki.EtcdCA.Cert)
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
	next, err := st.pki.EtcdCA.NewCRL(serials, number+1)
	if err != nil {
		return err
	}
	if err := store.CRLSave(ctx, st.Fence, next); err != nil {
		return fmt.Errorf("revoke etcd certificate: %w", err)
	}
	return nil
}

// changeNode changes node id's record under muNodes: change is given a
// copy of it and says whether it changed anything; if so the copy is
// saved, fenced, with its Updated time. A node that is gone is left so.
func (st *leaderState) changeNode(ctx context.Context, id string, change func(n *pb.Node) bool) error {
	st.muNodes.Lock()
	defer st.muNodes.Unlock()
	return st.changeNodeLocked(ctx, id, change)
}

// changeNodeLocked is changeNode for a caller that holds muNodes.
func (st *leaderState) changeNodeLocked(ctx context.Context, id string, change func(n *pb.Node) bool) error {
	shared := st.reg.Node(id)
	if shared == nil {
		return nil
	}
	n := store.CloneNode(shared)
	if !change(n) {
		return nil
	}
	n.Updated = st.timestamp()
	return store.NodeSave(ctx, st.Fence, n)
}

// lockCaller locks the node records for a read-modify-write of the calling
// node's own (unlock when done) and returns its ID and record, shared:
// ErrNotFound, unlocked, for a node that has no record.
func (st *leaderState) lockCaller(ctx context.Context) (id string, shared *pb.Node, unlock func(), err error) {
	id = identityFrom(ctx).nodeID
	st.muNodes.Lock()
	if shared = st.reg.Node(id); shared == nil {
		st.muNodes.Unlock()
		return id, nil, nil, fmt.Errorf("node %s: %w", id, spec.ErrNotFound)
	}
	return id, shared, st.muNodes.Unlock, nil
}
