package store

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	pb "github.com/curatorproject/curator/proto"
)

// Rollout records, at /curator/rollouts/<group>: the config SHA a group
// rolls to, the state (rolling, paused, done, cancelled, failed) and the
// progress. Committing a new SHA replaces the record in the same
// transaction as the group's, so a group never has a new spec without its
// rollout. Each change of the group loop in a rollout is fenced on the
// record being the one it observed (its mod revision), so a cancel, a
// pause or a new commit stops it before its next mutation.

// ErrRolloutChanged: the rollout record changed since the group loop read
// it (a cancel, a pause, a new commit); it looks again.
var ErrRolloutChanged = errors.New("the rollout changed meanwhile")

// RolloutLoad reads a group's rollout and its mod revision; nil and 0 if
// there is none.
func RolloutLoad(ctx context.Context, kv clientv3.KV, group string) (*pb.Rollout, int64, error) {
	resp, err := kv.Get(ctx, rolloutKey(group))
	if err != nil {
		return nil, 0, fmt.Errorf("load rollout of %s: %w", group, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	r := &pb.Rollout{}
	if err := proto.Unmarshal(resp.Kvs[0].Value, r); err != nil {
		return nil, 0, fmt.Errorf("rollout record of %s is corrupt: %w", group, err)
	}
	return r, resp.Kvs[0].ModRevision, nil
}

// RolloutUnchanged is the condition that a group's rollout record is still
// at mod revision rev (0: there is none).
func RolloutUnchanged(group string, rev int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(rolloutKey(group)), "=", rev)
}

// RolloutSave writes a rollout, fenced, if its record is still at mod
// revision rev; ErrRolloutChanged if not. Events evs, the record of why
// (a rollout's end), go in the same transaction: a leader that dies
// after the change has said why.
func RolloutSave(ctx context.Context, l *Fence, r *pb.Rollout, rev int64, evs ...*pb.Event) error {
	data, err := proto.Marshal(r)
	if err != nil {
		return err
	}
	ops, err := eventPuts(evs)
	if err != nil {
		return err
	}
	_, err = l.txnIf(ctx, []clientv3.Cmp{RolloutUnchanged(r.Group, rev)}, append(ops, clientv3.OpPut(rolloutKey(r.Group), string(data)))...)
	if errors.Is(err, ErrCompare) {
		return ErrRolloutChanged
	}
	return err
}

// RolloutCheck says, fenced, whether a group's rollout record is still at
// mod revision rev: the check before every mutation of a rollout.
func RolloutCheck(ctx context.Context, l *Fence, group string, rev int64) error {
	_, err := l.txnIf(ctx, []clientv3.Cmp{RolloutUnchanged(group, rev)})
	if errors.Is(err, ErrCompare) {
		return ErrRolloutChanged
	}
	return err
}

// GroupCommit writes a group and, when its config SHA is new, the rollout
// to it, in one fenced transaction.
func GroupCommit(ctx context.Context, l *Fence, g *pb.Group, r *pb.Rollout) error {
	data, err := proto.Marshal(g)
	if err != nil {
		return err
	}
	ops := []clientv3.Op{clientv3.OpPut(groupKey(g.Spec.GetName()), string(data))}
	if r != nil {
		rdata, err := proto.Marshal(r)
		if err != nil {
			return err
		}
		ops = append(ops, clientv3.OpPut(rolloutKey(r.Group), string(rdata)))
	}
	if _, err := l.txn(ctx, ops...); err != nil {
		return fmt.Errorf("save group %s: %w", g.Spec.GetName(), err)
	}
	return nil
}

// RolloutRollBack writes group g, back on its previous template, and the
// rollout back to it, fenced on the failed rollout's record being still
// at mod revision rev; ErrRolloutChanged if not. Events evs go in the
// same transaction, as in RolloutSave.
func RolloutRollBack(ctx context.Context, l *Fence, g *pb.Group, back *pb.Rollout, rev int64, evs ...*pb.Event) error {
	gdata, err := proto.Marshal(g)
	if err != nil {
		return err
	}
	rdata, err := proto.Marshal(back)
	if err != nil {
		return err
	}
	ops, err := eventPuts(evs)
	if err != nil {
		return err
	}
	_, err = l.txnIf(ctx, []clientv3.Cmp{RolloutUnchanged(back.Group, rev)},
		append(ops, clientv3.OpPut(groupKey(g.Spec.GetName()), string(gdata)), clientv3.OpPut(rolloutKey(back.Group), string(rdata)))...)
	if errors.Is(err, ErrCompare) {
		return ErrRolloutChanged
	}
	return err
}
