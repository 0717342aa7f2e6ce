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
	c := newCluster(t, "127.0.231.")
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
}
