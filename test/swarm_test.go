package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/curatorproject/curator/internal/swarmtest"
	"github.com/curatorproject/curator/internal/testenv"
)

// swarmNodeJSON is the part of `node ls -o json` the Swarm flavor adds.
type swarmNodeJSON struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Roles        []string `json:"roles"`
	Status       string   `json:"status"`
	SwarmNodeID  string   `json:"swarm_node_id"`
	SwarmRole    string   `json:"swarm_role"`
	SwarmState   string   `json:"swarm_state"`
	SwarmJoining bool     `json:"swarm_join_requested"`
}

// swarmNodes runs `node ls -o json` and returns the nodes by name.
func swarmNodes(t *testing.T, config string) (map[string]swarmNodeJSON, error) {
	t.Helper()
	out, _, err := cli(t, "--config", config, "node", "ls", "-o", "json")
	if err != nil {
		return nil, err
	}
	var list []swarmNodeJSON
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("node ls -o json: %w: %q", err, out)
	}
	byName := map[string]swarmNodeJSON{}
	for _, n := range list {
		byName[n.Name] = n
	}
	return byName, nil
}

// TestSwarmFlavor runs the Swarm flavor with the real binary: three agent
// processes on this host, each given its own Docker engine of a real
// Swarm (internal/swarmtest) by its unix socket. The engine of worker-2
// has left the Swarm: its agent joins it again once the leader asks. Then
// an operator's promote and demote change the Swarm's managers with the
// consensus role.
func TestSwarmFlavor(t *testing.T) {
	inChain(t, engineChain) // Docker engines
	sw := swarmtest.Start(t, swarmtest.Config{Managers: 1, Workers: 2})
	m0, w0, w1 := sw.Engines[0], sw.Engines[1], sw.Engines[2]
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := w1.Client.SwarmLeave(ctx, client.SwarmLeaveOptions{}); err != nil {
		t.Fatal(err)
	}
	engineArgs := func(e *swarmtest.Engine) []string {
		return []string{"--docker-socket", e.Socket, "--swarm-advertise-addr", e.Addr}
	}

	start := time.Now()
	c := newCluster(t, "127.0.248.")
	m := c.init("manager-1", 10, engineArgs(m0)...)
	tok := c.token("worker")
	for i, e := range []*swarmtest.Engine{w0, w1} {
		name := fmt.Sprintf("worker-%d", i+1)
		n := c.agent(name, "join", append([]string{"--listen", c.addr(11 + i), "--name", name, "--token", tok, "--manager", m.listen}, engineArgs(e)...)...)
		n.listen = c.addr(11 + i)
	}
	c.waitReady(60*time.Second, "manager-1", "worker-1", "worker-2")
	t.Logf("cluster up in %v", time.Since(start).Round(time.Millisecond))

	if out, _, err := cli(t, "--config", c.config, "cluster", "update", "--swarm"); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(out, "Swarm flavor:") {
		t.Errorf("cluster update --swarm does not show the flavor:\n%s", out)
	}
	start = time.Now()
	want := func(role string) func(n swarmNodeJSON) error {
		return func(n swarmNodeJSON) error {
			if n.SwarmRole != role || n.SwarmState != "ready" || n.SwarmNodeID == "" || n.SwarmJoining {
				return fmt.Errorf("node %s: %+v", n.Name, n)
			}
			return nil
		}
	}
	waitSwarm := func(what string, checks map[string]func(swarmNodeJSON) error) {
		t.Helper()
		testenv.Eventually(t, 60*time.Second, what, func() error {
			nodes, err := swarmNodes(t, c.config)
			if err != nil {
				return err
			}
			for name, check := range checks {
				if err := check(nodes[name]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	waitSwarm("every node in the Swarm, worker-2 joined again", map[string]func(swarmNodeJSON) error{
		"manager-1": want("manager"), "worker-1": want("worker"), "worker-2": want("worker"),
	})
	t.Logf("Swarm roles shown, worker-2 joined, in %v", time.Since(start).Round(time.Millisecond))
	if out, _, err := cli(t, "--config", c.config, "node", "ls"); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(out, "SWARM ROLE") {
		t.Errorf("node ls shows no Swarm columns:\n%s", out)
	}

	// An operator's promote makes worker-1 a Swarm manager, then an etcd
	// learner; its agent runs etcd and the learner becomes a voter.
	start = time.Now()
	if _, _, err := cli(t, "--config", c.config, "node", "promote", "worker-1"); err != nil {
		t.Fatal(err)
	}
	waitSwarm("worker-1 a Swarm manager and an etcd voter", map[string]func(swarmNodeJSON) error{
		"worker-1": func(n swarmNodeJSON) error {
			if err := want("manager")(n); err != nil {
				return err
			}
			info, err := clusterInfo(t, c.config)
			if err != nil {
				return err
			}
			if len(info.Voters) != 2 {
				return fmt.Errorf("voters %v", info.Voters)
			}
			return nil
		},
	})
	t.Logf("promoted in %v", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	// The Swarm may not take the demotion of a manager promoted a moment
	// ago (it is not in the Swarm's Raft yet): the command then says the
	// loops finish, and waits for them.
	if out, _, err := cli(t, "--config", c.config, "node", "demote", "worker-1"); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("node demote worker-1: %s", strings.TrimSpace(out))
	}
	waitSwarm("worker-1 a Swarm worker and no consensus node", map[string]func(swarmNodeJSON) error{
		"worker-1": func(n swarmNodeJSON) error {
			if err := want("worker")(n); err != nil {
				return err
			}
			if slices.Contains(n.Roles, "consensus") {
				return fmt.Errorf("worker-1 still has roles %v", n.Roles)
			}
			return nil
		},
	})
	t.Logf("demoted in %v", time.Since(start).Round(time.Millisecond))

	// worker-2 leaves the cluster: its agent takes its engine out of the
	// Swarm, and the leader removes the Swarm node, down, of no node.
	start = time.Now()
	nodes, err := swarmNodes(t, c.config)
	if err != nil {
		t.Fatal(err)
	}
	gone := nodes["worker-2"].SwarmNodeID
	if out, _, err := cli(t, "agent", "leave", "--data-dir", c.nodes["worker-2"].dataDir); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("agent leave: %s", strings.TrimSpace(out))
	}
	testenv.Eventually(t, 60*time.Second, "worker-2's engine out of the Swarm and its Swarm node removed", func() error {
		info, err := w1.Client.Info(ctx, client.InfoOptions{})
		if err != nil {
			return err
		}
		if st := info.Info.Swarm.LocalNodeState; st != "inactive" {
			return fmt.Errorf("worker-2's engine is %s", st)
		}
		list, err := m0.Client.NodeList(ctx, client.NodeListOptions{})
		if err != nil {
			return err
		}
		for _, n := range list.Items {
			if n.ID == gone {
				return fmt.Errorf("Swarm node %s is still listed, %s", gone, n.Status.State)
			}
		}
		return nil
	})
	t.Logf("left, and its Swarm node removed, in %v", time.Since(start).Round(time.Millisecond))
}

// TestSwarmFaults: the only manager dies at the Swarm flavor's fault
// points, in the middle of an operator's promote (swarm/after-promote: the
// Swarm worker promoted, nothing else done) and demote
// (swarm/after-demote: the node marked demoting and its Swarm manager
// demoted, its etcd member still there). Restarted without the fault, the
// cluster finishes each change on its own.
func TestSwarmFaults(t *testing.T) {
	inChain(t, engineChain) // Docker engines
	sw := swarmtest.Start(t, swarmtest.Config{Managers: 1, Workers: 1})
	m0, w0 := sw.Engines[0], sw.Engines[1]
	engineArgs := func(e *swarmtest.Engine) []string {
		return []string{"--docker-socket", e.Socket, "--swarm-advertise-addr", e.Addr}
	}
	c := newCluster(t, "127.0.249.")
	promotePoint, demotePoint := "swarm/after-promote", "swarm/after-demote"
	m1 := c.initWith(c.faulty(promotePoint), "manager-1", 10, engineArgs(m0)...)
	w := c.faultAgent("", "worker-1", nil, "join", append([]string{"--listen", c.addr(11), "--name", "worker-1", "--token", c.token("worker"), "--manager", m1.listen}, engineArgs(w0)...)...)
	w.listen = c.addr(11)
	c.waitReady(60*time.Second, "manager-1", "worker-1")
	workerID := c.nodeID("worker-1")
	if _, _, err := cli(t, "--config", c.config, "cluster", "update", "--swarm"); err != nil {
		t.Fatal(err)
	}
	swarmRole := func(name, role string) func() error {
		return func() error {
			nodes, err := swarmNodes(t, c.config)
			if err != nil {
				return err
			}
			if n := nodes[name]; n.SwarmRole != role || n.SwarmState != "ready" {
				return fmt.Errorf("%s: %+v", name, n)
			}
			return nil
		}
	}
	testenv.Eventually(t, 60*time.Second, "worker-1 shown as a Swarm worker", swarmRole("worker-1", "worker"))

	t.Run(promotePoint, func(t *testing.T) {
		promote := c.operatorCommand("promote", c.writeConfig(m1.listen), "node", "promote", "worker-1")
		waitFault(t, m1.proc, promotePoint)
		stopProc(promote)
		crashed := time.Now()
		// The Swarm manager exists, the role does not: the restarted
		// leader's swarm sync carries the promotion on at its etcd step.
		c.faultAgent(demotePoint, "manager-1", nil, "run", engineArgs(m0)...)
		testenv.Eventually(t, convergeTimeout, "worker-1 a voter with the role and a Swarm manager", func() error {
			info, err := clusterInfo(t, c.config)
			if err != nil {
				return err
			}
			nodes, err := nodeLs(t, c.config)
			if err != nil {
				return err
			}
			if err := isVoterWithRole(info, nodes, workerID); err != nil {
				return err
			}
			return swarmRole("worker-1", "manager")()
		})
		t.Logf("converged %v after the crash", time.Since(crashed).Round(time.Millisecond))
		evs, err := events(t, c.config)
		if err != nil {
			t.Fatal(err)
		}
		if ev, ok := findEvent(evs, workerID, [2]string{"swarm-sync", "grant-role"}); !ok {
			t.Errorf("no swarm-sync grant-role event for worker-1: %+v", evs)
		} else {
			t.Logf("event: %s", ev.Reason)
		}
	})

	t.Run(demotePoint, func(t *testing.T) {
		info, err := clusterInfo(t, c.config)
		if err != nil {
			t.Fatal(err)
		}
		if info.Leader == workerID {
			t.Skip("worker-1's curator leads: the fault is armed in manager-1's")
		}
		// A manager promoted a moment ago is not in the Swarm's Raft yet,
		// and the Swarm refuses its demotion until it is.
		testenv.Eventually(t, 60*time.Second, "worker-1 a reachable Swarm manager", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			got, err := m0.Client.NodeInspect(ctx, w0.NodeID, client.NodeInspectOptions{})
			if err != nil {
				return err
			}
			if ms := got.Node.ManagerStatus; ms == nil || ms.Reachability != "reachable" {
				return fmt.Errorf("manager status %+v", ms)
			}
			return nil
		})
		demote := c.operatorCommand("demote", c.writeConfig(m1.listen), "node", "demote", "worker-1")
		waitFault(t, m1.proc, demotePoint)
		stopProc(demote)
		crashed := time.Now()
		// worker-1 is marked demoting and a Swarm worker, and still an
		// etcd voter: the restarted leader's demotions loop finishes.
		c.faultAgent("", "manager-1", nil, "run", engineArgs(m0)...)
		testenv.Eventually(t, convergeTimeout, "worker-1 no consensus node, a Swarm worker", func() error {
			info, err := clusterInfo(t, c.config)
			if err != nil {
				return err
			}
			if len(info.Voters) != 1 || slices.Contains(info.Voters, workerID) {
				return fmt.Errorf("voters %v", info.Voters)
			}
			nodes, err := swarmNodes(t, c.config)
			if err != nil {
				return err
			}
			if n := nodes["worker-1"]; slices.Contains(n.Roles, "consensus") || n.SwarmRole != "worker" {
				return fmt.Errorf("worker-1: %+v", n)
			}
			return nil
		})
		t.Logf("converged %v after the crash", time.Since(crashed).Round(time.Millisecond))
		evs, err := events(t, c.config)
		if err != nil {
			t.Fatal(err)
		}
		if ev, ok := findEvent(evs, workerID, [2]string{"demotions", "demote"}); !ok {
			t.Errorf("no demotions demote event for worker-1: %+v", evs)
		} else {
			t.Logf("event: %s", ev.Reason)
		}
	})
}
