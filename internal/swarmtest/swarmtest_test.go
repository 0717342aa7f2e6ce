package swarmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/curatorproject/curator/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.CheckLeaks(m.Run())) }

// nodeState is what the test checks of one Swarm node.
type nodeState struct {
	manager      bool
	state        swarm.NodeState
	reachability swarm.Reachability
}

func nodeStates(ctx context.Context, e *Engine) (map[string]nodeState, error) {
	res, err := e.Client.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]nodeState{}
	for _, n := range res.Items {
		s := nodeState{manager: n.Spec.Role == swarm.NodeRoleManager, state: n.Status.State}
		if n.ManagerStatus != nil {
			s.reachability = n.ManagerStatus.Reachability
		}
		out[n.ID] = s
	}
	return out, nil
}

// waitState waits until engine on's node list shows node id in state
// want, and returns how long that took.
func waitState(t *testing.T, on *Engine, id string, timeout time.Duration, want func(nodeState) bool, what string) time.Duration {
	t.Helper()
	start := time.Now()
	testenv.Eventually(t, timeout, what, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		states, err := nodeStates(ctx, on)
		if err != nil {
			return err
		}
		if s := states[id]; !want(s) {
			return fmt.Errorf("node %s is %+v", id, s)
		}
		return nil
	})
	return time.Since(start)
}

func TestSwarmHarness(t *testing.T) {
	start := time.Now()
	c := Start(t, Config{Managers: 3, Workers: 1})
	t.Logf("3 managers and 1 worker up in %v", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	first := c.Engines[0]
	states, err := nodeStates(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 4 {
		t.Fatalf("node list has %d nodes, want 4: %+v", len(states), states)
	}
	for _, e := range c.Engines {
		want := nodeState{manager: e.Manager, state: swarm.NodeStateReady}
		if e.Manager {
			want.reachability = swarm.ReachabilityReachable
		}
		if got := states[e.NodeID]; got != want {
			t.Errorf("engine %s (node %s) is %+v, want %+v", e.Name, e.NodeID, got, want)
		}
		info, err := e.Client.Info(ctx, client.InfoOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if info.Info.Name != e.Name {
			t.Errorf("engine %s has hostname %q", e.Name, info.Info.Name)
		}
	}

	// A manager's machine dies: Unreachable at once, Down after Swarm's
	// heartbeats run out; started again, it is back.
	dead := c.Engines[2]
	if err := dead.Kill(); err != nil {
		t.Fatal(err)
	}
	if dead.Running() {
		t.Fatal("killed engine still runs")
	}
	d := waitState(t, first, dead.NodeID, 30*time.Second, func(s nodeState) bool {
		return s.manager && s.reachability == swarm.ReachabilityUnreachable
	}, "the killed manager to be unreachable")
	t.Logf("killed manager unreachable after %v", d.Round(time.Millisecond))
	d = waitState(t, first, dead.NodeID, 60*time.Second, func(s nodeState) bool {
		return s.state == swarm.NodeStateDown
	}, "the killed manager to be down")
	t.Logf("killed manager down after %v more", d.Round(time.Millisecond))

	if err := dead.Start(ctx); err != nil {
		t.Fatal(err)
	}
	d = waitState(t, first, dead.NodeID, 60*time.Second, func(s nodeState) bool {
		return s.state == swarm.NodeStateReady && s.reachability == swarm.ReachabilityReachable
	}, "the restarted manager to be back")
	t.Logf("restarted manager ready and reachable after %v", d.Round(time.Millisecond))

	// The worker stopped cleanly by its pidfile.
	worker := c.Engines[3]
	if err := worker.Stop(); err != nil {
		t.Fatal(err)
	}
	d = waitState(t, first, worker.NodeID, 30*time.Second, func(s nodeState) bool {
		return s.state == swarm.NodeStateDown
	}, "the stopped worker to be down")
	t.Logf("stopped worker down after %v", d.Round(time.Millisecond))

	start = time.Now()
	if err := c.Close(); err != nil {
		t.Fatalf("tear-down: %v", err)
	}
	t.Logf("torn down in %v", time.Since(start).Round(time.Millisecond))
	if left := c.Leftovers(); len(left) > 0 {
		t.Errorf("left after tear-down:\n%v", left)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{Managers: 1}, true},
		{Config{Managers: 3, Workers: 2}, true},
		{Config{Workers: 2, NoSwarm: true}, true},
		{Config{Workers: 2}, false},
		{Config{}, false},
		{Config{Managers: -1, Workers: 2}, false},
		{Config{Managers: 150, Workers: 60}, false},
		{Config{Managers: 1, Spare: 3}, true},
		{Config{Managers: 1, Spare: -1}, false},
		{Config{Managers: 100, Workers: 50, Spare: 51}, false},
	} {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("%+v.Validate() = %v, want ok %v", tt.cfg, err, tt.ok)
		}
	}
}

// TestStartRetriesAnEngineThatExits: a dockerd that exits before it
// answers (as one does now and then on this machine, its containerd
// slow to come up) is started again on a clean namespace, up to
// startAttempts times, and Start says so when every try failed. The
// dockerd found in PATH is a wrapper that fails a number of starts, then
// runs the real one.
func TestStartRetriesAnEngineThatExits(t *testing.T) {
	c := Start(t, Config{NoSwarm: true, Spare: 1})
	e := c.Engines[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	count := filepath.Join(bin, "starts")
	wrap := func(fails int) {
		t.Helper()
		script := fmt.Sprintf(`#!/bin/sh
n=$(($(cat %[1]s 2>/dev/null || echo 0) + 1))
echo $n > %[1]s
if [ $n -le %[2]d ]; then echo "start $n refused by the test" >&2; exit 1; fi
exec %[3]s "$@"
`, count, fails, dockerd)
		if err := os.WriteFile(filepath.Join(bin, "dockerd"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(count); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	starts := func() string {
		b, _ := os.ReadFile(count)
		return strings.TrimSpace(string(b))
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	wrap(startAttempts - 1)
	if err := e.Start(ctx); err != nil {
		t.Fatalf("start after %d failed tries: %v", startAttempts-1, err)
	}
	if got, want := starts(), fmt.Sprint(startAttempts); got != want {
		t.Errorf("dockerd started %s times, want %s", got, want)
	}
	if _, err := e.Client.Ping(ctx, client.PingOptions{}); err != nil {
		t.Errorf("the engine does not answer after its retried start: %v", err)
	}

	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	wrap(startAttempts)
	err = e.Start(ctx)
	if !errors.Is(err, errExited) {
		t.Fatalf("start with every try failing: %v, want an error saying dockerd exited", err)
	}
	if got, want := starts(), fmt.Sprint(startAttempts); got != want {
		t.Errorf("dockerd started %s times, want %s", got, want)
	}
	if e.Running() {
		t.Error("the engine runs after every start failed")
	}
	t.Logf("after %d failed tries: %v", startAttempts, err)
}
