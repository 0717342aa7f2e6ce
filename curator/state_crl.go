package curator

import (
	"context"
	"fmt"
	"math/big"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// The etcd CA's revocation list, at EtcdCRLKey (DER). Every consensus
// member's agent keeps its etcd reading a copy (see node), so a node that
// loses the consensus role loses etcd with it: its etcd certificate is
// listed when it is demoted or removed.

// EtcdCRLKey is where the etcd CA's revocation list is kept.
const EtcdCRLKey = keyPrefix + "etcd-crl"

// crlLoad reads the list; nil when there is none yet.
func crlLoad(ctx context.Context, kv clientv3.KV) ([]byte, error) {
	resp, err := kv.Get(ctx, EtcdCRLKey)
	if err != nil {
		return nil, fmt.Errorf("load etcd CRL: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0].Value, nil
}

// currentCRL returns the list in force, making an empty one if there is
// none yet.
func (st *leaderState) currentCRL(ctx context.Context) ([]byte, error) {
	der, err := crlLoad(ctx, st.cfg.Etcd)
	if err != nil || der != nil {
		return der, err
	}
	der, err = st.pki.EtcdCA.NewCRL(nil, 1)
	if err != nil {
		return nil, err
	}
	if _, err := st.txnAsLeader(ctx, clientv3.OpPut(EtcdCRLKey, string(der))); err != nil {
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
	if _, err := st.txnAsLeader(ctx, clientv3.OpPut(EtcdCRLKey, string(next))); err != nil {
		return fmt.Errorf("revoke etcd certificate: %w", err)
	}
	return nil
}
