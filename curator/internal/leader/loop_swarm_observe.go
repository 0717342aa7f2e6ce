package leader

import (
	"context"
	"fmt"
	"net"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/curatorproject/curator/curator/decide"
)

// swarmNodeLister is what reading the Swarm needs of a Docker engine that
// is a Swarm manager: its node list.
type swarmNodeLister interface {
	NodeList(ctx context.Context, options client.NodeListOptions) (client.NodeListResult, error)
}

// SwarmEngine is what the leader needs of its own node's Docker engine
// with the Swarm flavor on (a *client.Client, API version negotiated):
// the leader holds the consensus role, so its engine is a Swarm manager,
// through which it reads and changes the Swarm's nodes and reads the
// worker join token, and whose node events it watches.
type SwarmEngine interface {
	swarmNodeLister
	swarmEventer
	NodeInspect(ctx context.Context, nodeID string, options client.NodeInspectOptions) (client.NodeInspectResult, error)
	NodeUpdate(ctx context.Context, nodeID string, options client.NodeUpdateOptions) (client.NodeUpdateResult, error)
	NodeRemove(ctx context.Context, nodeID string, options client.NodeRemoveOptions) (client.NodeRemoveResult, error)
	SwarmInspect(ctx context.Context, options client.SwarmInspectOptions) (client.SwarmInspectResult, error)
}

// ObserveSwarm reads the Swarm's node list through one manager's engine
// (any manager: a follower forwards the call to the Swarm's leader, and
// the call fails, after Swarm's own timeout, while the Swarm has no
// leader). A worker's engine answers with an error saying it is not a
// manager.
func ObserveSwarm(ctx context.Context, engine swarmNodeLister) ([]decide.SwarmNode, error) {
	res, err := engine.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the Swarm's nodes: %w", err)
	}
	out := make([]decide.SwarmNode, 0, len(res.Items))
	for _, n := range res.Items {
		out = append(out, swarmNodeOf(n))
	}
	return out, nil
}

// swarmNodeOf is what the decision reads of a Swarm node.
func swarmNodeOf(n swarm.Node) decide.SwarmNode {
	sn := decide.SwarmNode{
		ID:           n.ID,
		Hostname:     n.Description.Hostname,
		Addr:         n.Status.Addr,
		Manager:      n.Spec.Role == swarm.NodeRoleManager,
		State:        n.Status.State,
		Availability: n.Spec.Availability,
	}
	if m := n.ManagerStatus; m != nil && sn.Manager {
		sn.Leader = m.Leader
		sn.Reachability = m.Reachability
		if sn.Addr == "" || sn.Addr == "0.0.0.0" {
			// A manager's status address is where its Raft listens.
			if host, _, err := net.SplitHostPort(m.Addr); err == nil {
				sn.Addr = host
			}
		}
	}
	return sn
}
