package client

import (
	"context"

	pb "github.com/curatorproject/curator/proto"
)

// StartUpgrade starts the upgrade of the whole cluster to a release: the
// process provider's groups onto binary, the Docker provider's onto
// image (either may be empty).
func (c *Client) StartUpgrade(ctx context.Context, binary, image string) (*pb.Upgrade, error) {
	var u *pb.Upgrade
	err := c.Management(ctx, func(ctx context.Context, m pb.ManagementClient) (err error) {
		u, err = m.StartUpgrade(ctx, &pb.StartUpgradeRequest{Binary: binary, Image: image})
		return err
	})
	return u, err
}

// GetUpgrade returns the cluster's last upgrade.
func (c *Client) GetUpgrade(ctx context.Context) (*pb.Upgrade, error) {
	var u *pb.Upgrade
	err := c.Management(ctx, func(ctx context.Context, m pb.ManagementClient) (err error) {
		u, err = m.GetUpgrade(ctx, &pb.GetUpgradeRequest{})
		return err
	})
	return u, err
}

// CancelUpgrade stops the upgrade under way.
func (c *Client) CancelUpgrade(ctx context.Context) (*pb.Upgrade, error) {
	var u *pb.Upgrade
	err := c.Management(ctx, func(ctx context.Context, m pb.ManagementClient) (err error) {
		u, err = m.CancelUpgrade(ctx, &pb.CancelUpgradeRequest{})
		return err
	})
	return u, err
}

// WaitUpgrade asks for the upgrade every poll interval until done says
// it is where it should be, and returns it then; done sees every answer.
// As WaitRollout, it rides out an election.
func (c *Client) WaitUpgrade(ctx context.Context, done func(*pb.Upgrade) (bool, error)) (*pb.Upgrade, error) {
	var lastErr error
	return poll(ctx, c.o.pollInterval, c.GetUpgrade, done, &lastErr)
}
