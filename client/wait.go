package client

// Waiting for a node to get somewhere: a promoted learner to catch up, a
// handed-over demotion to be finished by the next leader.

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
	tick := time.NewTicker(c.o.pollInterval)
	defer tick.Stop()
	werr := &WaitError{ID: id}
	for {
		got, err := c.GetNode(ctx, id)
		switch {
		case err == nil:
			werr.Last, werr.LastErr = got, nil
			ok, err := done(got)
			if err != nil {
				return nil, err
			}
			if ok {
				return got, nil
			}
		case ctx.Err() != nil:
		case errors.Is(err, ErrNoManager):
			werr.LastErr = err
		default:
			return nil, err
		}
		select {
		case <-ctx.Done():
			werr.Err = ctx.Err()
			return nil, werr
		case <-tick.C:
		}
	}
}
