package client

// Waiting for a node or a rollout to get somewhere: a promoted learner to
// catch up, a handed-over demotion to be finished by the next leader, a
// rollout to end.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// NodeCondition says whether a node is where a wait wants it. An error ends
// the wait: the node can no longer get there.
type NodeCondition func(*pb.NodeView) (bool, error)

// ErrRoleLost is UntilVoter's error for a node that lost the consensus role
// before it became a voter.
var ErrRoleLost = errors.New("lost the consensus role before it caught up")

// IsVoter tells whether v is an etcd voter, as the leader observes it.
func IsVoter(v *pb.NodeView) bool {
	switch v.GetManagerStatus() {
	case pb.ManagerStatus_MANAGER_STATUS_LEADER, pb.ManagerStatus_MANAGER_STATUS_REACHABLE:
		return true
	}
	return false
}

func hasConsensusRole(v *pb.NodeView) bool {
	return slices.Contains(v.GetNode().GetRoles(), pb.Role_ROLE_CONSENSUS)
}

// UntilVoter waits for a promoted node to be a voter; it fails with
// ErrRoleLost if the node loses the consensus role first.
func UntilVoter(v *pb.NodeView) (bool, error) {
	if IsVoter(v) {
		return true, nil
	}
	if !hasConsensusRole(v) {
		return false, ErrRoleLost
	}
	return false, nil
}

// UntilDemoted waits for a demotion to be finished: the node holds no
// consensus role and no demotion is under way.
func UntilDemoted(v *pb.NodeView) (bool, error) {
	return !v.GetNode().GetDemoting() && !hasConsensusRole(v), nil
}

// WaitError is WaitNode's error when ctx ends before the node is where it
// should be.
type WaitError struct {
	// ID is the node waited for.
	ID string
	// Last is the node as last seen; nil if it was never seen.
	Last *pb.NodeView
	// LastErr is why the last try failed, if it did (no manager answered).
	LastErr error
	// Err is ctx's error.
	Err error
}

func (e *WaitError) Error() string {
	msg := fmt.Sprintf("wait for node %s: %v", e.ID, e.Err)
	if e.LastErr != nil {
		msg += fmt.Sprintf("; the last try failed: %v", e.LastErr)
	}
	return msg
}

func (e *WaitError) Unwrap() error { return e.Err }

// WaitNode asks for node id every poll interval (WithPollInterval) until
// done says it is where it should be, and returns it then. It returns done's
// error as it is, and a *WaitError when ctx ends: give ctx the deadline of
// the wait. A cluster that no manager answers for (an election is under way:
// the node may be the leader that just resigned) is asked again; any other
// error from the cluster ends the wait and is returned as it is.
func (c *Client) WaitNode(ctx context.Context, id string, done NodeCondition) (*pb.NodeView, error) {
	if err := CheckNodeID(id); err != nil {
		return nil, err
	}
	werr := &WaitError{ID: id}
	got, err := poll(ctx, c.o.pollInterval, func(ctx context.Context) (*pb.NodeView, error) { return c.GetNode(ctx, id) }, done, &werr.LastErr)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		werr.Last, werr.Err = got, ctx.Err()
		return nil, werr
	}
	return got, err
}

// RolloutCondition says whether a rollout is where a wait wants it; an
// error ends the wait.
type RolloutCondition func(*pb.Rollout) (bool, error)

// RolloutEnded says whether a rollout is over: done, cancelled or failed.
// A rollout that fails with failure_action rollback is followed at once by
// the rollout back (rollback_of names the failed one), which is not over
// until it is done.
func RolloutEnded(r *pb.Rollout) (bool, error) {
	switch r.GetState() {
	case pb.RolloutState_ROLLOUT_STATE_DONE, pb.RolloutState_ROLLOUT_STATE_CANCELLED, pb.RolloutState_ROLLOUT_STATE_FAILED:
		return true, nil
	}
	return false, nil
}

// WaitRollout asks for group's rollout every poll interval until done says
// it is where it should be (RolloutEnded: over), and returns it then; done
// sees every answer, so a caller can show the progress. As WaitNode, it
// rides out an election, returns done's error and any other error of the
// cluster as they are, and ctx's error (with the last rollout seen) when
// ctx ends.
func (c *Client) WaitRollout(ctx context.Context, group string, done RolloutCondition) (*pb.Rollout, error) {
	var lastErr error
	r, err := poll(ctx, c.o.pollInterval, func(ctx context.Context) (*pb.Rollout, error) { return c.GetRollout(ctx, group) }, done, &lastErr)
	if err != nil && lastErr != nil && ctx.Err() != nil {
		err = fmt.Errorf("wait for the rollout of group %s: %w; the last try failed: %v", group, err, lastErr)
	}
	return r, err
}

// poll calls get every interval until done says yes (the answer and nil),
// done or get fails (their error; ErrNoManager is asked again, and kept in
// lastErr), or ctx ends (the last answer and ctx's error).
func poll[T any](ctx context.Context, interval time.Duration, get func(context.Context) (T, error), done func(T) (bool, error), lastErr *error) (T, error) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last T
	for {
		got, err := get(ctx)
		switch {
		case err == nil:
			last, *lastErr = got, nil
			ok, err := done(got)
			if err != nil {
				var zero T
				return zero, err
			}
			if ok {
				return got, nil
			}
		case ctx.Err() != nil:
		case errors.Is(err, ErrNoManager):
			*lastErr = err
		default:
			var zero T
			return zero, err
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-tick.C:
		}
	}
}
