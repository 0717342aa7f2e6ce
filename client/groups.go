package client

import (
	"context"

	pb "github.com/curatorproject/curator/proto"
)

// CommitGroup stores a group's spec; changed is false when the group had
// that spec already.
func (c *Client) CommitGroup(ctx context.Context, spec *pb.GroupSpec) (view *pb.GroupView, changed bool, err error) {
	err = c.Management(ctx, func(ctx context.Context, m pb.ManagementClient) error {
		resp, err := m.CommitGroup(ctx, &pb.CommitGroupRequest{Spec: spec})
		view, changed = resp.GetGroup(), resp.GetChanged()
		return err
	})
	return view, changed, err
}

// CommitGroupChecked is CommitGroup of a request with its checks: the
// revision the spec was read at (req.ExpectedRevision), if any.
func (c *Client) CommitGroupChecked(ctx context.Context, req *pb.CommitGroupRequest) (resp *pb.CommitGroupResponse, err error) {
	err = c.Management(ctx, func(ctx context.Context, m pb.ManagementClient) error {
		resp, err = m.CommitGroup(ctx, req)
		return err
	})
	return resp, err
}

// PlanGroup says what a commit of req would do, and changes nothing.
func (c *Client) PlanGroup(ctx context.Context, req *pb.CommitGroupRequest) (plan *pb.GroupPlan, err error) {
	err = c.Management(ctx, func(ctx context.Context, m pb.ManagementClient) error {
		plan, err = m.PlanGroup(ctx, req)
		return err
	})
	return plan, err
}

// ListGroups returns every group, in name order.
func (c *Client) ListGroups(ctx context.Context) ([]*pb.GroupView, error) {
	var groups []*pb.GroupView
	err := c.Management(ctx, func(ctx context.Context, m pb.ManagementClient) error {
		resp, err := m.ListGroups(ctx, &pb.ListGroupsRequest{})
		groups = resp.GetGroups()
		return err
	})
	return groups, err
}

// GetGroup returns one group by name.
func (c *Client) GetGroup(ctx context.Context, name string) (*pb.GroupView, error) {
	var group *pb.GroupView
	err := c.Management(ctx, func(ctx context.Context, m pb.ManagementClient) (err error) {
		group, err = m.GetGroup(ctx, &pb.GetGroupRequest{Name: name})
		return err
	})
	return group, err
}

// DestroyGroup marks a group for destruction: the leader destroys its
// machines, then the group.
func (c *Client) DestroyGroup(ctx context.Context, name string) (*pb.GroupView, error) {
	var group *pb.GroupView
	err := c.Management(ctx, func(ctx context.Context, m pb.ManagementClient) (err error) {
		group, err = m.DestroyGroup(ctx, &pb.DestroyGroupRequest{Name: name})
		return err
	})
	return group, err
}

// SuspendGroup suspends group name (all: every group), or resumes it;
// it returns the groups it changed.
func (c *Client) SuspendGroup(ctx context.Context, name string, all, resume bool) ([]*pb.GroupView, error) {
	var out []*pb.GroupView
	err := c.Management(ctx, func(ctx context.Context, m pb.ManagementClient) error {
		resp, err := m.SuspendGroup(ctx, &pb.SuspendGroupRequest{Name: name, All: all, Resume: resume})
		out = resp.GetGroups()
		return err
	})
	return out, err
}

// GetRollout returns a group's rollout.
func (c *Client) GetRollout(ctx context.Context, group string) (*pb.Rollout, error) {
	var r *pb.Rollout
	err := c.Management(ctx, func(ctx context.Context, m pb.ManagementClient) (err error) {
		r, err = m.GetRollout(ctx, &pb.GetRolloutRequest{Group: group})
		return err
	})
	return r, err
}

// ChangeRollout cancels, pauses or resumes ("cancel", "pause", "resume") a
// group's rollout to targetSHA (empty: the current one).
func (c *Client) ChangeRollout(ctx context.Context, group, action, targetSHA string) (*pb.Rollout, error) {
	return c.ChangeRolloutTo(ctx, group, action, targetSHA, "")
}

// ChangeRolloutTo is ChangeRollout with the config an undo goes back to
// (toSHA, a unique prefix will do; empty: the one before the current).
func (c *Client) ChangeRolloutTo(ctx context.Context, group, action, targetSHA, toSHA string) (*pb.Rollout, error) {
	var r *pb.Rollout
	err := c.Management(ctx, func(ctx context.Context, m pb.ManagementClient) (err error) {
		r, err = m.ChangeRollout(ctx, &pb.ChangeRolloutRequest{Group: group, Action: action, TargetSha: targetSHA, ToSha: toSHA})
		return err
	})
	return r, err
}
