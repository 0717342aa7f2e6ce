// Package swarmagent is what a node's agent does for the Swarm flavor
// (docs/architecture.md, "The swarm flavor"): it keeps its own Docker
// engine's Swarm membership as the node's record asks, and reports the
// engine's Swarm node ID to the curator leader. The leader never reaches
// into a node's engine; it sets a join request in the node's record, and
// the agent answers it here:
//
//   - an engine in a Swarm (LocalNodeState active) only has its Swarm node
//     ID reported, when the record does not carry it yet;
//   - an engine in no Swarm, or in a broken one, is joined to the
//     cluster's Swarm as a worker once the record asks: stale Swarm state
//     left first (`swarm leave --force`), then the worker join token and
//     the managers' addresses asked of the leader (SwarmJoin: the token is
//     never kept in a record), then the join, then the new Swarm node ID
//     reported, which clears the request;
//   - an engine that is joining (pending) is left to finish;
//   - an engine in a Swarm whose record asks it to leave (its machine is
//     about to be destroyed on purpose: a rollout, a group made smaller)
//     leaves it, without force (Leave), and is not joined again while
//     the record asks it to leave.
//
// Always as a worker: the leader's swarm sync promotes a consensus node's
// Swarm node afterwards, within the Swarm's quorum.
package swarmagent

import (
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
	"google.golang.org/grpc"

	pb "github.com/curatorproject/curator/proto"
)

// Engine is what the agent needs of its own Docker engine (a
// *client.Client, API version negotiated).
type Engine interface {
	Info(ctx context.Context, options client.InfoOptions) (client.SystemInfoResult, error)
	SwarmJoin(ctx context.Context, options client.SwarmJoinOptions) (client.SwarmJoinResult, error)
	SwarmLeave(ctx context.Context, options client.SwarmLeaveOptions) (client.SwarmLeaveResult, error)
}

// Leader is what it needs of the curator leader (a pb.CuratorClient).
type Leader interface {
	SwarmJoin(ctx context.Context, in *pb.SwarmJoinRequest, opts ...grpc.CallOption) (*pb.SwarmJoinResponse, error)
	ReportSwarmNode(ctx context.Context, in *pb.ReportSwarmNodeRequest, opts ...grpc.CallOption) (*pb.ReportSwarmNodeResponse, error)
}

// DefaultListenAddr is where a joining engine's Swarm listens (Swarm's
// own default).
const DefaultListenAddr = "0.0.0.0:2377"

// Config says how the engine joins.
type Config struct {
	// ListenAddr is where its Swarm listens; empty means
	// DefaultListenAddr.
	ListenAddr string
	// AdvertiseAddr is the address the Swarm's other nodes reach it at
	// (IP or IP:PORT); empty lets the engine pick it (it refuses when the
	// machine has more than one address to pick from).
	AdvertiseAddr string
	// PendingFor is how long the engine has been pending (trying to
	// reach its Swarm) as the caller has seen it: past StalePending, an
	// engine asked to join is taken for one with the stale state of a
	// Swarm that removed it, left and joined anew.
	PendingFor time.Duration
}

// StalePending is how long an engine may stay pending while its record
// asks it to join before it is taken for stale. A join or a reconnection
// is pending for seconds; an engine back with the state of a node its
// Swarm removed (a machine restarted after its replacement's record
// went) stays pending for good, knocking at managers that turn it away.
const StalePending = 20 * time.Second

// Outcome is what Answer did.
type Outcome string

const (
	// Nothing: the engine is as the record asks, or is joining.
	Nothing Outcome = "nothing"
	// Reported: the engine's Swarm node ID was reported.
	Reported Outcome = "reported"
	// Joined: the engine joined the Swarm as a worker, and its new Swarm
	// node ID was reported.
	Joined Outcome = "joined"
	// Left: the engine left the Swarm, as the record asked.
	Left Outcome = "left"
	// Pending: the engine is trying to reach its Swarm; nothing was done
	// (the caller counts how long, for Config.PendingFor).
	Pending Outcome = "pending"
)

// Answer makes the engine what node, the node's own record as the leader
// last sent it, asks, in one step: see the package comment.
func Answer(ctx context.Context, cfg Config, engine Engine, leader Leader, node *pb.Node) (Outcome, error) {
	info, err := engine.Info(ctx, client.InfoOptions{})
	if err != nil {
		return Nothing, fmt.Errorf("read the Docker engine's info (is --docker-socket right, and dockerd running?): %w", err)
	}
	sw := info.Info.Swarm
	if node.GetSwarmLeaveRequested() != nil {
		return leaveAsked(ctx, engine, leader, node, sw.LocalNodeState)
	}
	switch sw.LocalNodeState {
	case swarm.LocalNodeStateActive:
		if sw.NodeID == "" || sw.NodeID == node.GetSwarmNodeId() {
			return Nothing, nil
		}
		if err := report(ctx, leader, sw.NodeID); err != nil {
			return Nothing, err
		}
		return Reported, nil
	case swarm.LocalNodeStatePending:
		if !node.GetSwarmJoinRequested() || cfg.PendingFor < StalePending {
			return Pending, nil
		}
		// Pending for that long while asked to join: stale state, left
		// below before the join.
	case swarm.LocalNodeStateLocked:
		return Nothing, fmt.Errorf("the Docker engine's Swarm state is locked (autolock): unlock it with `docker swarm unlock`")
	}
	if !node.GetSwarmJoinRequested() || node.GetSwarmLeaveRequested() != nil {
		return Nothing, nil
	}
	if sw.LocalNodeState != swarm.LocalNodeStateInactive {
		// Stale state (an error, a Swarm that removed it): leave it.
		if _, err := engine.SwarmLeave(ctx, client.SwarmLeaveOptions{Force: true}); err != nil {
			return Nothing, fmt.Errorf("leave the engine's stale Swarm state (%s: %s): %w", sw.LocalNodeState, sw.Error, err)
		}
	}
	join, err := leader.SwarmJoin(ctx, &pb.SwarmJoinRequest{})
	if err != nil {
		return Nothing, fmt.Errorf("ask the leader how to join the Swarm: %w", err)
	}
	listen := cfg.ListenAddr
	if listen == "" {
		listen = DefaultListenAddr
	}
	if _, err := engine.SwarmJoin(ctx, client.SwarmJoinOptions{
		ListenAddr:    listen,
		AdvertiseAddr: cfg.AdvertiseAddr,
		RemoteAddrs:   join.ManagerAddrs,
		JoinToken:     join.WorkerToken,
	}); err != nil {
		return Nothing, fmt.Errorf("join the Swarm through %v as a worker: %w", join.ManagerAddrs, err)
	}
	info, err = engine.Info(ctx, client.InfoOptions{})
	if err != nil {
		return Nothing, fmt.Errorf("read the Docker engine's info after joining: %w", err)
	}
	if info.Info.Swarm.NodeID == "" {
		return Nothing, fmt.Errorf("the Docker engine joined the Swarm but shows no Swarm node ID (state %s)", info.Info.Swarm.LocalNodeState)
	}
	if err := report(ctx, leader, info.Info.Swarm.NodeID); err != nil {
		return Nothing, err
	}
	return Joined, nil
}

// leaveAsked answers a record that asks the engine to leave the Swarm: an
// engine in it leaves (Leave: without force, so a Swarm manager is
// refused), and once it is in none, that is reported, which clears the
// record's Swarm node ID and lets its machine go. An engine joining or in
// a broken state is left as it is; the group loop stops waiting for it at
// its join timeout.
func leaveAsked(ctx context.Context, engine Engine, leader Leader, node *pb.Node, state swarm.LocalNodeState) (Outcome, error) {
	out := Nothing
	switch state {
	case swarm.LocalNodeStateActive:
		if err := Leave(ctx, engine); err != nil {
			return Nothing, fmt.Errorf("the node's record asks its engine to leave the Swarm before its machine goes: %w", err)
		}
		out = Left
	case swarm.LocalNodeStateInactive:
	default:
		return Nothing, nil
	}
	if node.GetSwarmNodeId() == "" {
		return out, nil
	}
	if _, err := leader.ReportSwarmNode(ctx, &pb.ReportSwarmNodeRequest{Left: true}); err != nil {
		return Nothing, fmt.Errorf("report to the leader that the engine left the Swarm: %w", err)
	}
	return Left, nil
}

func report(ctx context.Context, leader Leader, id string) error {
	if _, err := leader.ReportSwarmNode(ctx, &pb.ReportSwarmNodeRequest{SwarmNodeId: id}); err != nil {
		return fmt.Errorf("report Swarm node %s to the leader: %w", id, err)
	}
	return nil
}

// Leave takes the engine out of its Swarm, once its node has left the
// cluster: without force, so that an engine that is still a Swarm manager
// (its demotion did not reach the Swarm) is refused rather than taken out
// of the Swarm's quorum. An engine in no Swarm has nothing to leave.
func Leave(ctx context.Context, engine Engine) error {
	info, err := engine.Info(ctx, client.InfoOptions{})
	if err != nil {
		return fmt.Errorf("read the Docker engine's info: %w", err)
	}
	if info.Info.Swarm.LocalNodeState == swarm.LocalNodeStateInactive {
		return nil
	}
	if _, err := engine.SwarmLeave(ctx, client.SwarmLeaveOptions{}); err != nil {
		return fmt.Errorf("leave the Swarm: %w", err)
	}
	return nil
}
