package client

// The management API as typed methods: each checks its input (input.go),
// builds its request and makes its call through Management's failover. A
// call that changes a node or the cluster gets the change attempt timeout.

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/curatorproject/curator/proto"
)

// ListPageSize is how many nodes ListNodes asks for at a time: the most a
// page holds (the leader bounds a page by its bytes as well). A page of
// 10,000 nodes' listing costs its round trip and a page's own work
// (BenchmarkListNodes: p99 74 ms by 5,000, 129 ms by 2,000).
const ListPageSize = 5000

// listPageFallback is the page asked for after a page too large for the
// client (a leader of a release that bounds pages by count alone, and
// nodes with many labels).
const listPageFallback = 500

// What DemoteNode's answer says it did (DemoteResponse.outcome).
const (
	// DemoteDone: the node is no longer a consensus member.
	DemoteDone = "demoted"
	// DemoteHandedOver: the node runs the curator leader, which marked it
	// and resigned; the next leader finishes (WaitNode with UntilDemoted).
	DemoteHandedOver = "handed-over"
	// DemoteNotAManager: the node holds no consensus role; nothing changed.
	DemoteNotAManager = "not-a-manager"
	// DemotePromotionCalledOff: the node was approved as a manager but
	// not promoted yet; it stays a worker.
	DemotePromotionCalledOff = "promotion-called-off"
	// DemoteLeftToLoops: with the Swarm flavor on, the node is marked
	// demoting but the Swarm did not take the demotion of its manager yet
	// (one promoted a moment ago is not in the Swarm's Raft yet); the
	// leader's loops finish (WaitNode with UntilDemoted).
	DemoteLeftToLoops = "left-to-loops"
)

// rpc is a method of pb.ManagementClient as a method expression, such as
// pb.ManagementClient.GetNode.
type rpc[Req, Resp any] func(pb.ManagementClient, context.Context, Req, ...grpc.CallOption) (Resp, error)

// invoke makes one call of method with Management's failover, each attempt
// bounded by timeout, and returns the answer.
func invoke[Req, Resp any](ctx context.Context, c *Client, timeout time.Duration, method rpc[Req, Resp], req Req) (Resp, error) {
	var resp Resp
	err := c.manage(ctx, timeout, func(ctx context.Context, m pb.ManagementClient) (err error) {
		resp, err = method(m, ctx, req)
		return err
	})
	return resp, err
}

// changeNode makes a call that changes the node id, after checking id.
func changeNode[Req, Resp any](ctx context.Context, c *Client, id string, method rpc[Req, Resp], req Req) (Resp, error) {
	if err := CheckNodeID(id); err != nil {
		var zero Resp
		return zero, err
	}
	return invoke(ctx, c, c.o.changeAttemptTimeout, method, req)
}

// ListNodes returns every node the cluster knows, following the pages.
func (c *Client) ListNodes(ctx context.Context) ([]*pb.NodeView, error) {
	var nodes []*pb.NodeView
	err := c.Management(ctx, func(ctx context.Context, m pb.ManagementClient) error {
		nodes = nil
		req := &pb.ListNodesRequest{PageSize: ListPageSize}
		for {
			resp, err := m.ListNodes(ctx, req)
			if status.Code(err) == codes.ResourceExhausted && req.PageSize > listPageFallback {
				req.PageSize = listPageFallback
				continue
			}
			if err != nil {
				return err
			}
			nodes = append(nodes, resp.Nodes...)
			if resp.NextPageToken == "" {
				return nil
			}
			req.PageToken = resp.NextPageToken
		}
	})
	return nodes, err
}

// GetNode returns one node by ID, unique ID prefix or name.
func (c *Client) GetNode(ctx context.Context, id string) (*pb.NodeView, error) {
	if err := CheckNodeID(id); err != nil {
		return nil, err
	}
	return invoke(ctx, c, c.o.attemptTimeout, pb.ManagementClient.GetNode, &pb.GetNodeRequest{Id: id})
}

// ClusterInfo returns the cluster's state, and refreshes the manager cache
// from it.
func (c *Client) ClusterInfo(ctx context.Context) (*pb.ClusterInfo, error) {
	var info *pb.ClusterInfo
	addr, err := c.call(ctx, c.o.attemptTimeout, func(ctx context.Context, m pb.ManagementClient) (err error) {
		info, err = m.GetClusterInfo(ctx, &pb.ClusterInfoRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.refreshedAt = time.Now()
	c.mu.Unlock()
	c.noteManagers(addr, info.GetManagers())
	return info, nil
}

// ListEvents returns what the leader's loops did, oldest first: at most
// limit of the newest, or all that are kept if limit is 0.
func (c *Client) ListEvents(ctx context.Context, limit uint32) ([]*pb.Event, error) {
	return c.ListEventsFiltered(ctx, limit, nil)
}

// ListEventsFiltered is ListEvents of the events filter selects (nil:
// all): the leader selects them, and limit counts those it selected.
func (c *Client) ListEventsFiltered(ctx context.Context, limit uint32, filter *pb.EventFilter) ([]*pb.Event, error) {
	resp, err := invoke(ctx, c, c.o.attemptTimeout, pb.ManagementClient.ListEvents, &pb.ListEventsRequest{Limit: limit, Filter: filter})
	return resp.GetEvents(), err
}

// Token returns the join token for role, one of TokenRoles.
func (c *Client) Token(ctx context.Context, role string) (string, error) {
	if err := CheckTokenRole(role); err != nil {
		return "", err
	}
	return tokenOf(invoke(ctx, c, c.o.attemptTimeout, pb.ManagementClient.GetToken, &pb.GetTokenRequest{Role: role}))
}

// RotateToken replaces the join token for role and returns the new one. If a
// manager fails mid-call the rotation may be repeated on the next: harmless,
// since only the token returned last is valid either way.
func (c *Client) RotateToken(ctx context.Context, role string) (string, error) {
	if err := CheckTokenRole(role); err != nil {
		return "", err
	}
	return tokenOf(invoke(ctx, c, c.o.attemptTimeout, pb.ManagementClient.RotateToken, &pb.RotateTokenRequest{Role: role}))
}

// tokenOf is the token of a GetToken or RotateToken answer, checked.
func tokenOf(resp *pb.TokenResponse, err error) (string, error) {
	if err != nil {
		return "", err
	}
	if err := checkToken(resp.GetToken()); err != nil {
		return "", err
	}
	return resp.GetToken(), nil
}

// PromoteNode gives node id the consensus role: the leader adds it to etcd
// as a learner and makes it a voter once it has caught up (IsVoter; wait for
// it with WaitNode and UntilVoter). A node that has the role already is
// returned unchanged.
func (c *Client) PromoteNode(ctx context.Context, id string) (*pb.NodeView, error) {
	return changeNode(ctx, c, id, pb.ManagementClient.PromoteNode, &pb.NodeRequest{Id: id})
}

// DemoteNode takes the consensus role from node id. The answer's outcome is
// one of the Demote constants; DemoteHandedOver means the next leader
// finishes (wait for it with WaitNode and UntilDemoted).
func (c *Client) DemoteNode(ctx context.Context, id string) (*pb.DemoteResponse, error) {
	return changeNode(ctx, c, id, pb.ManagementClient.DemoteNode, &pb.NodeRequest{Id: id})
}

// UpdateNode changes node id's availability and labels, after checking u
// (NodeUpdate.Validate), and returns the node as it is then.
func (c *Client) UpdateNode(ctx context.Context, id string, u NodeUpdate) (*pb.NodeView, error) {
	if err := u.Validate(); err != nil {
		return nil, err
	}
	return changeNode(ctx, c, id, pb.ManagementClient.UpdateNode, &pb.UpdateNodeRequest{
		Id: id, Availability: u.Availability, LabelAdd: u.LabelAdd, LabelRm: u.LabelRm,
	})
}

// ApproveNode lets node id, which waits for approval, into the cluster, and
// returns it.
func (c *Client) ApproveNode(ctx context.Context, id string) (*pb.NodeView, error) {
	return changeNode(ctx, c, id, pb.ManagementClient.ApproveNode, &pb.NodeRequest{Id: id})
}

// RemoveNode removes node id's record and returns the full ID of the node
// removed. A node that is ready or holds the consensus role is refused
// unless force; with force a consensus member's etcd member is removed
// first, within the quorum guard.
func (c *Client) RemoveNode(ctx context.Context, id string, force bool) (string, error) {
	resp, err := changeNode(ctx, c, id, pb.ManagementClient.RemoveNode, &pb.RemoveNodeRequest{Id: id, Force: force})
	return resp.GetId(), err
}

// UpdateCluster changes the settings u gives, after checking it
// (ClusterUpdate.Validate), and returns the cluster as it is then.
func (c *Client) UpdateCluster(ctx context.Context, u ClusterUpdate) (*pb.ClusterInfo, error) {
	if err := u.Validate(); err != nil {
		return nil, err
	}
	return invoke(ctx, c, c.o.changeAttemptTimeout, pb.ManagementClient.UpdateCluster, &pb.UpdateClusterRequest{
		RequireApproval: u.RequireApproval, MaxVoters: u.MaxVoters, CertTtl: durationOrNil(u.CertTTL), Swarm: u.Swarm,
	})
}

func durationOrNil(d *time.Duration) *durationpb.Duration {
	if d == nil {
		return nil
	}
	return durationpb.New(*d)
}
