package curator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/internal/swarmtest"
	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/node/swarmagent"
	pb "github.com/curatorproject/curator/proto"
)

// swarmTestTimeout bounds each wait on the Swarm (a node Down takes a few
// dispatcher heartbeats).
const swarmTestTimeout = 45 * time.Second

// runSwarmAgent stands in for node id's agent with --docker-socket: it
// answers the node's record with its engine, through the node's own
// connection to the curators, as the agent's swarm runnable does
// (swarmagent.Answer), every 100 ms until the test ends.
func runSwarmAgent(t *testing.T, c *testCluster, id string, conn *grpc.ClientConn, e *swarmtest.Engine) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	cfg := swarmagent.Config{ListenAddr: e.SwarmAddr(), AdvertiseAddr: e.Addr}
	leader := pb.NewCuratorClient(conn)
	go func() {
		defer close(done)
		var last string
		for ctx.Err() == nil {
			n, err := store.NodeLoad(ctx, c.cli, id)
			if err == nil {
				actx, acancel := context.WithTimeout(ctx, 30*time.Second)
				var out swarmagent.Outcome
				out, err = swarmagent.Answer(actx, cfg, e.Client, leader, n)
				acancel()
				if out != swarmagent.Nothing && out != swarmagent.Pending {
					t.Logf("agent of %s (%s): %s", id[:8], e.Name, out)
				}
			}
			if err != nil && ctx.Err() == nil && err.Error() != last {
				t.Logf("agent of %s (%s): %v", id[:8], e.Name, err)
			}
			if err != nil {
				last = err.Error()
			} else {
				last = ""
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// swarmNodes reads the Swarm's nodes by ID through engine e.
func swarmNodes(ctx context.Context, e *swarmtest.Engine) (map[string]decide.SwarmNode, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := leader.ObserveSwarm(ctx, e.Client)
	if err != nil {
		return nil, err
	}
	out := map[string]decide.SwarmNode{}
	for _, sn := range list {
		out[sn.ID] = sn
	}
	return out, nil
}

// setSwarmRole changes Swarm node id's role by hand, through engine e.
func setSwarmRole(t *testing.T, e *swarmtest.Engine, id string, role swarm.NodeRole) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	got, err := e.Client.NodeInspect(ctx, id, client.NodeInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := got.Node.Spec
	spec.Role = role
	if _, err := e.Client.NodeUpdate(ctx, id, client.NodeUpdateOptions{Version: got.Node.Version, Spec: spec}); err != nil {
		t.Fatal(err)
	}
}

// swarmEvent waits for an event of loop with action and node ("" for
// any node), recorded after since.
func (c *testCluster) swarmEvent(since time.Time, loop, action, nodeID string) *pb.Event {
	c.t.Helper()
	var found *pb.Event
	testenv.Eventually(c.t, swarmTestTimeout, fmt.Sprintf("a %s event %s of node %q", loop, action, nodeID), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		events, err := store.EventList(ctx, c.cli, 0)
		if err != nil {
			return err
		}
		for _, ev := range events {
			if ev.Loop == loop && ev.Action == action && (nodeID == "" || ev.NodeId == nodeID) && ev.Time.AsTime().After(since) {
				found = ev
				return nil
			}
		}
		return fmt.Errorf("%d events, none such", len(events))
	})
	c.t.Logf("event %s/%s: %s", found.Loop, found.Action, found.Reason)
	return found
}

// failingEngine is a real engine whose node updates of the Swarm nodes
// in fail fail, as an engine that times out does: the swarm sync sees a
// Swarm call fail, and everything else is the real Swarm's.
type failingEngine struct {
	leader.SwarmEngine
	mu   sync.Mutex
	fail map[string]bool
}

func (e *failingEngine) failUpdates(ids ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fail = map[string]bool{}
	for _, id := range ids {
		e.fail[id] = true
	}
}

func (e *failingEngine) NodeUpdate(ctx context.Context, id string, options client.NodeUpdateOptions) (client.NodeUpdateResult, error) {
	e.mu.Lock()
	fail := e.fail[id]
	e.mu.Unlock()
	if fail {
		return client.NodeUpdateResult{}, fmt.Errorf("update of Swarm node %s failed: %w", id, context.DeadlineExceeded)
	}
	return e.SwarmEngine.NodeUpdate(ctx, id, options)
}

// TestSwarmSync runs the swarm sync against a real Swarm: one manager
// engine (the leader's node's) and four workers, three of them nodes of
// the cluster, each answered by a stand-in agent (swarmagent.Answer, as
// the agent runs it) on its own engine. A curator that dies half-way
// through a promotion or a demotion is stood in for by stopping the
// curator, making the first half by hand, and starting a new one: the
// state the fault points swarm/after-promote and swarm/after-demote leave.
func TestSwarmSync(t *testing.T) {
	if err := swarmtest.Available(); err != nil {
		t.Skipf("swarmtest: %v", err)
	}
	start := time.Now()
	sw := swarmtest.Start(t, swarmtest.Config{Managers: 1, Workers: 4})
	t.Logf("Swarm of 5 engines up in %v", time.Since(start).Round(time.Millisecond))
	m0, w0, w1, w2, w3 := sw.Engines[0], sw.Engines[1], sw.Engines[2], sw.Engines[3], sw.Engines[4]

	c := newTestCluster(t)
	engine := &failingEngine{SwarmEngine: m0.Client}
	startCurator := func() (*Service, context.CancelFunc) {
		cfg := c.curatorConfig(c.first, c.cli)
		cfg.Docker = engine
		cfg.SwarmInterval = 200 * time.Millisecond
		return c.leadWith(cfg)
	}
	svc, stop := startCurator()
	admin, anon := c.dialFirst()
	tok := c.token(admin, "worker")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The leader's node on m0; b, d, e on w0, w1, w2; w3 is no node's.
	firstConn := dial(t, c.first.address, c.first.tlsCert(), c.root.Cert)
	runSwarmAgent(t, c, c.first.id, firstConn, m0)
	nodes := map[string]*testNode{}
	engineOf := map[string]*swarmtest.Engine{c.first.id: m0}
	for _, x := range []struct {
		name string
		e    *swarmtest.Engine
	}{{"b", w0}, {"d", w1}, {"e", w2}} {
		n, _ := c.register(anon, tok, x.name)
		conn := dial(t, c.first.address, n.tlsCert(), c.root.Cert)
		keepBeating(t, conn)
		runSwarmAgent(t, c, n.id, conn, x.e)
		nodes[x.name] = n
		engineOf[n.id] = x.e
	}
	b, d := nodes["b"], nodes["d"]
	for _, n := range nodes {
		c.waitStatus(n.id, pb.NodeStatus_NODE_STATUS_READY)
	}

	// The flavor on: every node's agent reports its engine's Swarm node,
	// and the roles agree with the Swarm (one consensus node, one
	// manager): nothing to change.
	setSwarm(t, admin, true)
	waitFor(t, "every node to have its Swarm node ID", func() bool {
		for id, e := range engineOf {
			if c.loadNode(id).SwarmNodeId != e.NodeID {
				return false
			}
		}
		return true
	})
	mgmt := pb.NewManagementClient(admin)
	testenv.Eventually(t, testTimeout, "node ls to show the Swarm roles", func() error {
		resp, err := mgmt.ListNodes(ctx, &pb.ListNodesRequest{})
		if err != nil {
			return err
		}
		for _, v := range resp.Nodes {
			want := "worker"
			if v.Node.Id == c.first.id {
				want = "manager"
			}
			if v.SwarmRole != want || v.SwarmState != "ready" {
				return fmt.Errorf("node %s (%s): swarm role %q, state %q", v.Node.Name, v.Node.Id[:8], v.SwarmRole, v.SwarmState)
			}
		}
		return nil
	})

	t.Run("promotion cut short after its Swarm step is finished", func(t *testing.T) {
		start := time.Now()
		stop()
		setSwarmRole(t, m0, w0.NodeID, swarm.NodeRoleManager)
		svc, stop = startCurator()
		c.swarmEvent(start, "swarm-sync", string(decide.SwarmGrantRole), b.id)
		waitFor(t, "node b to have the consensus role", func() bool { return spec.HasRole(c.loadNode(b.id), pb.Role_ROLE_CONSENSUS) })
		members, err := consensus.Members(ctx, c.cli)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(members, func(m consensus.Member) bool {
			return m.ID == c.loadNode(b.id).GetConsensus().GetMemberId() && m.IsLearner
		}) {
			t.Errorf("node b's etcd learner is not among the members %+v", members)
		}
		t.Logf("finished in %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("demotion cut short after its Swarm step is finished", func(t *testing.T) {
		start := time.Now()
		stop()
		testenv.Eventually(t, swarmTestTimeout, "w0 to be a reachable manager", func() error {
			got, err := swarmNodes(ctx, m0)
			if err != nil {
				return err
			}
			if sn := got[w0.NodeID]; !sn.Reachable() {
				return fmt.Errorf("w0 is %+v", sn)
			}
			return nil
		})
		setSwarmRole(t, m0, w0.NodeID, swarm.NodeRoleWorker)
		n := c.loadNode(b.id)
		n.Demoting = true
		if err := putNode(ctx, c, n); err != nil {
			t.Fatal(err)
		}
		svc, stop = startCurator()
		c.swarmEvent(start, "demotions", string(decide.DemotionFinish), b.id)
		waitFor(t, "node b's demotion to finish", func() bool {
			n := c.loadNode(b.id)
			return !spec.HasRole(n, pb.Role_ROLE_CONSENSUS) && !n.Demoting
		})
		members, err := consensus.Members(ctx, c.cli)
		if err != nil {
			t.Fatal(err)
		}
		if len(members) != 1 {
			t.Errorf("etcd members after the demotion: %+v", members)
		}
		t.Logf("finished in %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("a demotion through the management API demotes the Swarm manager first", func(t *testing.T) {
		start := time.Now()
		pctx, pcancel := context.WithTimeout(ctx, testTimeout)
		defer pcancel()
		if _, err := mgmt.PromoteNode(pctx, &pb.NodeRequest{Id: d.id}); err != nil {
			t.Fatal(err)
		}
		got, err := swarmNodes(ctx, m0)
		if err != nil {
			t.Fatal(err)
		}
		if !got[w1.NodeID].Manager || !spec.HasRole(c.loadNode(d.id), pb.Role_ROLE_CONSENSUS) {
			t.Fatalf("after PromoteNode: Swarm node %+v, roles %v", got[w1.NodeID], c.loadNode(d.id).Roles)
		}
		testenv.Eventually(t, swarmTestTimeout, "w1 to be a reachable manager", func() error {
			got, err := swarmNodes(ctx, m0)
			if err != nil {
				return err
			}
			if sn := got[w1.NodeID]; !sn.Reachable() {
				return fmt.Errorf("w1 is %+v", sn)
			}
			return nil
		})
		resp, err := mgmt.DemoteNode(pctx, &pb.NodeRequest{Id: d.id})
		if err != nil {
			t.Fatal(err)
		}
		got, err = swarmNodes(ctx, m0)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Outcome != "demoted" || got[w1.NodeID].Manager || spec.HasRole(c.loadNode(d.id), pb.Role_ROLE_CONSENSUS) {
			t.Errorf("after DemoteNode (%s): Swarm node %+v, roles %v", resp.Outcome, got[w1.NodeID], c.loadNode(d.id).Roles)
		}
		t.Logf("promoted and demoted in %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("a demotion left to the loops changes the Swarm first", func(t *testing.T) {
		// A leader that marked a node demoting and resigned (its own) or
		// died: the next one demotes the Swarm manager, and only then
		// removes the etcd member. On e's engine, never a manager yet: a
		// Swarm node demoted a moment ago takes half a minute to be a
		// reachable manager again.
		start := time.Now()
		e := nodes["e"]
		pctx, pcancel := context.WithTimeout(ctx, testTimeout)
		defer pcancel()
		if _, err := mgmt.PromoteNode(pctx, &pb.NodeRequest{Id: e.id}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, swarmTestTimeout, "w2 to be a reachable manager", func() error {
			got, err := swarmNodes(ctx, m0)
			if err != nil {
				return err
			}
			if sn := got[w2.NodeID]; !sn.Reachable() {
				return fmt.Errorf("w2 is %+v", sn)
			}
			return nil
		})
		stop()
		n := c.loadNode(e.id)
		n.Demoting = true
		if err := putNode(ctx, c, n); err != nil {
			t.Fatal(err)
		}
		svc, stop = startCurator()
		swarmDemote := c.swarmEvent(start, "swarm-sync", string(decide.SwarmDemote), e.id)
		finish := c.swarmEvent(start, "demotions", string(decide.DemotionFinish), e.id)
		if !finish.Time.AsTime().After(swarmDemote.Time.AsTime()) {
			t.Errorf("the etcd member was removed (%v) before the Swarm demote (%v)", finish.Time.AsTime(), swarmDemote.Time.AsTime())
		}
		waitFor(t, "node e's demotion to finish", func() bool {
			n := c.loadNode(e.id)
			return !spec.HasRole(n, pb.Role_ROLE_CONSENSUS) && !n.Demoting
		})
		got, err := swarmNodes(ctx, m0)
		if err != nil {
			t.Fatal(err)
		}
		if got[w2.NodeID].Manager {
			t.Errorf("w2 is still a Swarm manager: %+v", got[w2.NodeID])
		}
		t.Logf("finished in %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("a node's availability is its Swarm node's", func(t *testing.T) {
		// d is on w1, a Swarm worker again after the demotion above.
		start := time.Now()
		swarmAvail := func(want swarm.NodeAvailability) {
			t.Helper()
			testenv.Eventually(t, swarmTestTimeout, fmt.Sprintf("w1 to be %s", want), func() error {
				got, err := swarmNodes(ctx, m0)
				if err != nil {
					return err
				}
				if a := got[w1.NodeID].Availability; a != want {
					return fmt.Errorf("w1 is %s", a)
				}
				return nil
			})
		}
		update := func(a pb.Availability) {
			t.Helper()
			uctx, ucancel := context.WithTimeout(ctx, testTimeout)
			defer ucancel()
			if _, err := mgmt.UpdateNode(uctx, &pb.UpdateNodeRequest{Id: d.id, Availability: a}); err != nil {
				t.Fatal(err)
			}
		}
		update(pb.Availability_AVAILABILITY_DRAIN)
		swarmAvail(swarm.NodeAvailabilityDrain)
		c.swarmEvent(start, "swarm-sync", string(decide.SwarmAvailability), d.id)
		t.Logf("drained in Swarm %v after the update", time.Since(start).Round(time.Millisecond))

		// Changed in Swarm by hand: set back to the node's.
		ictx, icancel := context.WithTimeout(ctx, testTimeout)
		defer icancel()
		got, err := m0.Client.NodeInspect(ictx, w1.NodeID, client.NodeInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec := got.Node.Spec
		spec.Availability = swarm.NodeAvailabilityActive
		if _, err := m0.Client.NodeUpdate(ictx, w1.NodeID, client.NodeUpdateOptions{Version: got.Node.Version, Spec: spec}); err != nil {
			t.Fatal(err)
		}
		swarmAvail(swarm.NodeAvailabilityDrain)

		update(pb.Availability_AVAILABILITY_ACTIVE)
		swarmAvail(swarm.NodeAvailabilityActive)
	})

	t.Run("a Swarm call that keeps failing holds back its change alone", func(t *testing.T) {
		// b (on w0) and d (on w1) are drained; the one decided first
		// (the lower node ID) has its Swarm node's updates fail.
		first, second := b, d
		if d.id < b.id {
			first, second = d, b
		}
		firstEngine, secondEngine := engineOf[first.id], engineOf[second.id]
		start := time.Now()
		engine.failUpdates(firstEngine.NodeID)
		defer engine.failUpdates()
		update := func(id string, a pb.Availability) {
			t.Helper()
			uctx, ucancel := context.WithTimeout(ctx, testTimeout)
			defer ucancel()
			if _, err := mgmt.UpdateNode(uctx, &pb.UpdateNodeRequest{Id: id, Availability: a}); err != nil {
				t.Fatal(err)
			}
		}
		avails := func(want map[*swarmtest.Engine]swarm.NodeAvailability) error {
			got, err := swarmNodes(ctx, m0)
			if err != nil {
				return err
			}
			for e, a := range want {
				if got[e.NodeID].Availability != a {
					return fmt.Errorf("%s is %s, want %s", e.Name, got[e.NodeID].Availability, a)
				}
			}
			return nil
		}
		update(first.id, pb.Availability_AVAILABILITY_DRAIN)
		update(second.id, pb.Availability_AVAILABILITY_DRAIN)
		ev := c.swarmEvent(start, "swarm-sync", "refuse", first.id)
		if !strings.Contains(ev.Reason, "trying it again in") && !strings.Contains(ev.Reason, "it is held back") {
			t.Errorf("the refusal does not say the change is held back: %s", ev.Reason)
		}
		testenv.Eventually(t, swarmTestTimeout, "the second node's Swarm node drained, the first's not", func() error {
			return avails(map[*swarmtest.Engine]swarm.NodeAvailability{
				firstEngine: swarm.NodeAvailabilityActive, secondEngine: swarm.NodeAvailabilityDrain})
		})
		t.Logf("the change behind the failing one made %v after the updates", time.Since(start).Round(time.Millisecond))

		// The engine answers again: the held change goes through.
		engine.failUpdates()
		healed := time.Now()
		testenv.Eventually(t, swarmTestTimeout+leader.SwarmHoldMax, "the first node's Swarm node drained", func() error {
			return avails(map[*swarmtest.Engine]swarm.NodeAvailability{firstEngine: swarm.NodeAvailabilityDrain})
		})
		t.Logf("the held change made %v after the engine answered again", time.Since(healed).Round(time.Millisecond))

		update(first.id, pb.Availability_AVAILABILITY_ACTIVE)
		update(second.id, pb.Availability_AVAILABILITY_ACTIVE)
		testenv.Eventually(t, swarmTestTimeout, "both active again", func() error {
			return avails(map[*swarmtest.Engine]swarm.NodeAvailability{
				firstEngine: swarm.NodeAvailabilityActive, secondEngine: swarm.NodeAvailabilityActive})
		})
	})

	t.Run("a dead machine's Swarm node is removed once it is down", func(t *testing.T) {
		start := time.Now()
		if err := w3.Kill(); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, swarmTestTimeout, "the dead worker's Swarm node to be removed", func() error {
			got, err := swarmNodes(ctx, m0)
			if err != nil {
				return err
			}
			if sn, ok := got[w3.NodeID]; ok {
				return fmt.Errorf("still listed: %+v", sn)
			}
			return nil
		})
		c.swarmEvent(start, "swarm-sync", string(decide.SwarmRemoveNode), "")
		t.Logf("removed %v after the kill", time.Since(start).Round(time.Millisecond))
	})

	t.Run("a node that left the Swarm is joined again", func(t *testing.T) {
		start := time.Now()
		old := w2.NodeID
		e := nodes["e"]
		lctx, lcancel := context.WithTimeout(ctx, testTimeout)
		defer lcancel()
		if _, err := w2.Client.SwarmLeave(lctx, client.SwarmLeaveOptions{}); err != nil {
			t.Fatal(err)
		}
		var now string
		waitFor(t, "node e to report a new Swarm node", func() bool {
			now = c.loadNode(e.id).SwarmNodeId
			return now != old && now != ""
		})
		c.swarmEvent(start, "swarm-sync", string(decide.SwarmJoin), e.id)
		testenv.Eventually(t, swarmTestTimeout, "the Swarm to list e's new node ready and its old one no more", func() error {
			got, err := swarmNodes(ctx, m0)
			if err != nil {
				return err
			}
			if sn, ok := got[old]; ok {
				return fmt.Errorf("the old Swarm node is still listed: %+v", sn)
			}
			if sn := got[now]; sn.State != swarm.NodeStateReady || sn.Manager {
				return fmt.Errorf("the new Swarm node is %+v", sn)
			}
			return nil
		})
		if n := c.loadNode(e.id); n.SwarmJoinRequested {
			t.Error("the join request is still set")
		}
		t.Logf("joined again in %v", time.Since(start).Round(time.Millisecond))
	})
	_ = svc
}

// putNode writes a node record straight into etcd, as a leader that died
// half-way through a change left it.
func putNode(ctx context.Context, c *testCluster, n *pb.Node) error {
	data, err := proto.Marshal(n)
	if err != nil {
		return err
	}
	_, err = c.cli.Put(ctx, store.Keys.Node(n.Id), string(data))
	return err
}
