package store

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	pb "github.com/curatorproject/curator/proto"
)

// ErrUpgradeChanged is UpgradeSave's answer when the upgrade's record
// changed since it was read: read it again and decide anew.
var ErrUpgradeChanged = errors.New("the upgrade changed meanwhile")

// UpgradeLoad reads the cluster's last upgrade and its mod revision; nil
// and 0 if there has been none.
func UpgradeLoad(ctx context.Context, kv clientv3.KV) (*pb.Upgrade, int64, error) {
	resp, err := kv.Get(ctx, upgradeKey)
	if err != nil {
		return nil, 0, fmt.Errorf("load upgrade: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	u := &pb.Upgrade{}
	if err := proto.Unmarshal(resp.Kvs[0].Value, u); err != nil {
		return nil, 0, fmt.Errorf("upgrade record is corrupt: %w", err)
	}
	return u, resp.Kvs[0].ModRevision, nil
}

// UpgradeSave writes the upgrade, fenced, if its record is still at mod
// revision rev (0: there is none); ErrUpgradeChanged if not. Events evs
// go in the same transaction.
func UpgradeSave(ctx context.Context, l *Fence, u *pb.Upgrade, rev int64, evs ...*pb.Event) error {
	data, err := proto.Marshal(u)
	if err != nil {
		return err
	}
	ops, err := eventPuts(evs)
	if err != nil {
		return err
	}
	cmp := clientv3.Compare(clientv3.ModRevision(upgradeKey), "=", rev)
	_, err = l.txnIf(ctx, []clientv3.Cmp{cmp}, append(ops, clientv3.OpPut(upgradeKey, string(data)))...)
	if errors.Is(err, ErrCompare) {
		return ErrUpgradeChanged
	}
	return err
}
