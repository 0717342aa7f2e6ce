package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/raft/v3"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/internal/backoff"
)

// Fence is what a curator holds while it leads: the election key and the
// revision at which it won. It is the only way the leader changes
// anything:
//
//   - every record it writes goes through txn, which fences the write on
//     that key still existing at that revision (the verbs of this
//     package: NodeSave, GroupCommit, ...): once the lease behind the key
//     expires, or another curator wins, every write by this one fails with
//     ErrNotLeader, whatever the old leader still believes;
//   - a change etcd cannot put in a transaction (an etcd membership
//     change, a Swarm call) is preceded by Check, a fenced transaction of
//     nothing: a deposed leader stops there. The membership changes are
//     methods here (AddLearner, PromoteLearner, RemoveMember, MoveLeader),
//     so none is made without it.
type Fence struct {
	cli    *clientv3.Client
	nodeID string
	// key and rev identify our election key.
	key string
	rev int64

	// reg is the leader's view of the node records; node writes wait until
	// it has seen them. Nil in tests of the fence alone.
	reg *Registry
	// statusMu is held across each write of existing node records and
	// its wait for the view (keepStatus, NodeStatusSaveAll).
	statusMu sync.Mutex
}

// NewFence is the fence of the leadership that won election key key at
// revision rev; reg (or nil) is the registry view node writes wait for.
func NewFence(cli *clientv3.Client, nodeID, key string, rev int64, reg *Registry) *Fence {
	return &Fence{cli: cli, nodeID: nodeID, key: key, rev: rev, reg: reg}
}

// Key is the election key the fence holds.
func (l *Fence) Key() string { return l.key }

// Rev is the revision at which the election key was won: the leadership's
// term, which events carry.
func (l *Fence) Rev() int64 { return l.rev }

// fence is the condition under which a leader write may apply.
func (l *Fence) fence() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)
}

// txn applies ops if we still lead. It returns ErrNotLeader when the fence
// fails.
func (l *Fence) txn(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := commit(ctx, l.cli.Txn(ctx).If(l.fence()).Then(ops...))
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return nil, spec.ErrNotLeader
	}
	return resp, nil
}

// droppedRetries bounds how often commit proposes a transaction again that
// raft dropped: a leadership transfer (the placement loop moves etcd's
// leader after a promotion) or an election lasts a few election ticks.
const droppedRetries = 20

// droppedBackoff is the wait before proposing a dropped transaction again:
// 50ms more after each drop.
var droppedBackoff = backoff.Policy{Initial: 50 * time.Millisecond, Step: 50 * time.Millisecond}

// commit commits txn, again while raft drops the proposal. A dropped
// proposal never entered the log, so proposing it again cannot apply it
// twice; etcd's client does not retry it, as it cannot tell it from a
// write that may have applied.
func commit(ctx context.Context, txn clientv3.Txn) (*clientv3.TxnResponse, error) {
	for attempt := 1; ; attempt++ {
		resp, err := txn.Commit()
		if err == nil {
			return resp, nil
		}
		if !dropped(err) || attempt == droppedRetries {
			return nil, fmt.Errorf("leader transaction: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("leader transaction: %w", err)
		case <-time.After(droppedBackoff.Wait(attempt - 1)):
		}
	}
}

// dropped reports whether err is raft's refusal to propose: no leader
// known, or a leadership transfer under way.
func dropped(err error) bool {
	return status.Convert(err).Message() == raft.ErrProposalDropped.Error()
}

// ErrCompare: a condition of txnIf other than the fence failed.
var ErrCompare = errors.New("a condition of the transaction failed")

// txnIf applies ops if we still lead and every one of cmps holds:
// ErrNotLeader when the fence fails, ErrCompare when only cmps do.
func (l *Fence) txnIf(ctx context.Context, cmps []clientv3.Cmp, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := commit(ctx, l.cli.Txn(ctx).If(append([]clientv3.Cmp{l.fence()}, cmps...)...).Then(ops...))
	if err != nil {
		return nil, err
	}
	if resp.Succeeded {
		return resp, nil
	}
	if _, err := l.txn(ctx); err != nil {
		return nil, err
	}
	return nil, ErrCompare
}

// Check is the step before a change that cannot be part of a fenced
// transaction (a Swarm call; the membership changes below make it
// themselves): ErrNotLeader once this leadership is over.
func (l *Fence) Check(ctx context.Context) error {
	_, err := l.txn(ctx)
	return err
}

// AddLearner adds node nodeID to etcd as a learner at peerURL, if we still
// lead, within consensus.ReconfigTimeout.
func (l *Fence) AddLearner(ctx context.Context, nodeID, peerURL string) (params consensus.JoinParams, id uint64, err error) {
	if err := l.Check(ctx); err != nil {
		return consensus.JoinParams{}, 0, err
	}
	err = consensus.Bounded(ctx, consensus.ReconfigTimeout, "add etcd learner "+nodeID, func(ctx context.Context) (err error) {
		params, id, err = consensus.AddLearner(ctx, l.cli, nodeID, peerURL)
		return err
	})
	return params, id, err
}

// PromoteLearner makes learner memberID a voter, if we still lead, within
// consensus.ReconfigTimeout.
func (l *Fence) PromoteLearner(ctx context.Context, memberID uint64) error {
	if err := l.Check(ctx); err != nil {
		return err
	}
	return consensus.Bounded(ctx, consensus.ReconfigTimeout, fmt.Sprintf("promote etcd learner %x", memberID), func(ctx context.Context) error {
		return consensus.PromoteLearner(ctx, l.cli, memberID)
	})
}

// RemoveMember removes etcd member memberID, if we still lead, within
// consensus.ReconfigTimeout. The quorum guard
// (decide.Membership.CheckRemoval) is the caller's.
func (l *Fence) RemoveMember(ctx context.Context, memberID uint64) error {
	if err := l.Check(ctx); err != nil {
		return err
	}
	return consensus.Bounded(ctx, consensus.ReconfigTimeout, fmt.Sprintf("remove etcd member %x", memberID), func(ctx context.Context) error {
		return consensus.RemoveMember(ctx, l.cli, memberID)
	})
}

// MoveLeader hands etcd's leadership to voter to, if we still lead, within
// timeout.
func (l *Fence) MoveLeader(ctx context.Context, to uint64, timeout time.Duration) error {
	if err := l.Check(ctx); err != nil {
		return err
	}
	return consensus.Bounded(ctx, timeout, fmt.Sprintf("move etcd leadership to member %x", to), func(ctx context.Context) error {
		return consensus.MoveLeader(ctx, l.cli, to)
	})
}
