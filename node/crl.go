package node

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/internal/atomicfile"
	"github.com/curatorproject/curator/pki"
	"github.com/curatorproject/curator/supervisor"
)

// etcd reads the etcd CA's revocation list from a file on every handshake.
// A consensus member keeps that file current from the cluster's copy, so
// the etcd certificate of a node that was demoted or removed stops working
// on every member.

// updateCRL writes der to path if it is a list signed by ca and newer than
// the one there. An empty der changes nothing.
func updateCRL(path string, der []byte, ca *x509.Certificate) error {
	if len(der) == 0 {
		return nil
	}
	number, _, err := pki.ParseCRL(der, ca)
	if err != nil {
		return fmt.Errorf("etcd revocation list: %w", err)
	}
	if cur, err := os.ReadFile(path); err == nil {
		if have, _, err := pki.ParseCRL(cur, ca); err == nil && have >= number {
			return nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return atomicfile.Write(path, der, 0o600)
}

// followCRL keeps the file at path in step with the cluster's list.
func followCRL(ctx context.Context, cli *clientv3.Client, path string, ca *x509.Certificate) error {
	lg := supervisor.Logger(ctx)
	resp, err := cli.Get(ctx, store.EtcdCRLKey)
	if err != nil {
		return err
	}
	apply := func(der []byte) error {
		if err := updateCRL(path, der, ca); err != nil {
			return err
		}
		lg.Debug("etcd revocation list current")
		return nil
	}
	if len(resp.Kvs) > 0 {
		if err := apply(resp.Kvs[0].Value); err != nil {
			return err
		}
	}
	supervisor.Signal(ctx, supervisor.Healthy)
	wch := cli.Watch(clientv3.WithRequireLeader(ctx), store.EtcdCRLKey, clientv3.WithRev(resp.Header.Revision+1))
	for wr := range wch {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypePut {
				if err := apply(ev.Kv.Value); err != nil {
					lg.Warn("bad etcd revocation list from the cluster", zap.Error(err))
				}
			}
		}
	}
	return ctx.Err()
}
