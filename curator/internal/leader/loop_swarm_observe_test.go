package leader

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/swarm"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/internal/swarmtest"
	"github.com/curatorproject/curator/internal/testenv"
)

// TestObserveSwarm reads a real Swarm (two managers and a worker, each a
// Docker engine of its own) into the snapshot, and decides from it once
// the worker's machine is gone.
func TestObserveSwarm(t *testing.T) {
	c := swarmtest.Start(t, swarmtest.Config{Managers: 2, Workers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m0, m1, w := c.Engines[0], c.Engines[1], c.Engines[2]

	want := []decide.SwarmNode{
		{ID: m0.NodeID, Hostname: m0.Name, Addr: m0.Addr, Manager: true, Leader: true, Reachability: swarm.ReachabilityReachable, State: swarm.NodeStateReady, Availability: swarm.NodeAvailabilityActive},
		{ID: m1.NodeID, Hostname: m1.Name, Addr: m1.Addr, Manager: true, Reachability: swarm.ReachabilityReachable, State: swarm.NodeStateReady, Availability: swarm.NodeAvailabilityActive},
		{ID: w.NodeID, Hostname: w.Name, Addr: w.Addr, State: swarm.NodeStateReady, Availability: swarm.NodeAvailabilityActive},
	}
	byID := cmp.Transformer("byID", func(ns []decide.SwarmNode) map[string]decide.SwarmNode {
		out := map[string]decide.SwarmNode{}
		for _, n := range ns {
			out[n.ID] = n
		}
		return out
	})
	// Through the leader's engine and through a follower's: one list.
	for _, e := range []*swarmtest.Engine{m0, m1} {
		got, err := ObserveSwarm(ctx, e.Client)
		if err != nil {
			t.Fatalf("through %s: %v", e.Name, err)
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(decide.SwarmNode{}), byID); diff != "" {
			t.Errorf("through %s (-want +got):\n%s", e.Name, diff)
		}
	}
	// A worker's engine cannot list the Swarm.
	if _, err := ObserveSwarm(ctx, w.Client); err == nil {
		t.Errorf("a worker's engine listed the Swarm's nodes")
	} else {
		t.Logf("through the worker: %v", err)
	}

	// Two curator nodes, the managers; the worker's machine dies, and
	// its Swarm node, of no curator node, is removed once it is down.
	nodes := []decide.SwarmCuratorNode{
		{ID: "n0", Consensus: true, Ready: true, SwarmID: m0.NodeID},
		{ID: "n1", Consensus: true, Ready: true, SwarmID: m1.NodeID},
	}
	got, err := ObserveSwarm(ctx, m0.Client)
	if err != nil {
		t.Fatal(err)
	}
	if a := decide.Swarm(decide.SwarmSnapshot{Nodes: nodes, Swarm: got}); a != nil {
		t.Fatalf("a live Swarm worker of no node: want no action, got %v", a)
	}
	if err := w.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testenv.Eventually(t, 30*time.Second, "the dead worker's Swarm node to be removed", func() error {
		got, err := ObserveSwarm(ctx, m0.Client)
		if err != nil {
			return err
		}
		a := decide.Swarm(decide.SwarmSnapshot{Nodes: nodes, Swarm: got})
		if a == nil || a.Kind != decide.SwarmRemoveNode || a.SwarmID != w.NodeID {
			return fmt.Errorf("decided %v", a)
		}
		t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), a)
		return nil
	})
}
