package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// upgradeRun is a cluster a test moves between releases, and what it
// watched meanwhile.
type upgradeRun struct {
	*devRun
	// calls and failed count the management calls of the stream beside
	// the upgrade (a list, a label update, every 100 ms).
	calls, failed atomic.Int64
	mu            sync.Mutex
	failures      []string
}

// runCLI runs the checkout's curator with args until it ends or timeout
// passes: stdout and stderr together, and its error.
func runCLI(t *testing.T, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	return runWithTimeout(exec.Command(binary, args...), timeout)
}

// callStream makes a management call every 100 ms until stop: a node
// list, then a label update of a node it listed. A node removed between
// the two (being replaced) is no failure.
func (u *upgradeRun) callStream(t *testing.T) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			nodes, err := nodeLs(t, u.config)
			u.count(err)
			if err != nil || len(nodes) == 0 {
				continue
			}
			n := nodes[i%len(nodes)]
			_, _, err = cli(t, "--config", u.config, "node", "update", n.ID, "--label-add", fmt.Sprintf("seen=%d", i))
			if err != nil && strings.Contains(err.Error(), "NotFound") {
				err = nil
			}
			u.count(err)
		}
	}()
	return func() { close(done); <-finished }
}

func (u *upgradeRun) count(err error) {
	u.calls.Add(1)
	if err != nil {
		u.failed.Add(1)
		u.mu.Lock()
		u.failures = append(u.failures, err.Error())
		u.mu.Unlock()
	}
}

// releaseOf is what bin says its release is (`curator version`).
func releaseOf(t *testing.T, bin string) string {
	t.Helper()
	r, err := testenv.BinaryRelease(bin)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// upgrade runs `curator upgrade --binary bin` to its end and checks
// that every node then runs release, the groups done.
func (u *upgradeRun) upgrade(t *testing.T, bin, release string) time.Duration {
	t.Helper()
	start := time.Now()
	out, err := runCLI(t, 8*time.Minute, "--config", u.config, "upgrade", "--binary", bin)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("upgrade to %s: %v\n%s", release, err, out)
	}
	t.Logf("upgrade to %s in %v:\n%s", release, took.Round(time.Second), out)
	u.waitRelease(t, release)
	return took
}

// waitRelease waits until the cluster's five nodes run release, ready.
func (u *upgradeRun) waitRelease(t *testing.T, release string) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, "every node runs "+release, func() error {
		nodes, err := nodeLs(t, u.config)
		if err != nil {
			return err
		}
		if len(nodes) != 5 {
			return fmt.Errorf("%d nodes, want 5", len(nodes))
		}
		for _, n := range nodes {
			if n.Version != release || n.Status != "ready" {
				return fmt.Errorf("node %s runs %q, %s", n.Name, n.Version, n.Status)
			}
		}
		return nil
	})
}

// TestUpgradeAcrossReleases: a cluster of 3 managers and 2 workers made
// by the previous release (built from this repository's history) goes to
// this checkout's release with `curator upgrade`, back, and again with
// the curator leader killed in the middle; a release that cannot start
// is rolled back, the cluster whole on the one it ran; a node of a
// release outside the version policy is refused, saying why. All along a
// stream of management calls goes on and the quorum stays healthy.
func TestUpgradeAcrossReleases(t *testing.T) {
	parallel(t) // its own addresses and dirs
	old, commit := testenv.PreviousRelease(t)
	// This checkout as a release of the next minor, and one far ahead of
	// it (for the version policy): the test's binary is a build without
	// a release (dev), which the policy does not judge.
	dir := t.TempDir()
	newBin, ahead := filepath.Join(dir, "curator-new"), filepath.Join(dir, "curator-ahead")
	for bin, release := range map[string]string{newBin: "v0.1.0-dev+e2e", ahead: "v9.9.0"} {
		if err := testenv.GoBuild(bin, "./cmd/curator", "-ldflags", "-X main.version="+release); err != nil {
			t.Fatal(err)
		}
	}
	oldRelease, newRelease := releaseOf(t, old), releaseOf(t, newBin)
	t.Logf("previous release %.12s: %s; this checkout: %s", commit, oldRelease, newRelease)

	u := &upgradeRun{devRun: startDevCluster(t, old, nil, "127.0.250.10-127.0.250.60", 3, 2)}
	u.waitRelease(t, oldRelease)
	stopMonitor := monitorHealthyVoters(t, u.config, 2)
	stopCalls := u.callStream(t)

	up := u.upgrade(t, newBin, newRelease)
	down := u.upgrade(t, old, oldRelease)

	// Again, the curator leader killed once the managers' rollout has
	// rolled one of them.
	start := time.Now()
	var out bytes.Buffer
	cmd := exec.Command(binary, "--config", u.config, "upgrade", "--binary", newBin)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	testenv.Eventually(t, 3*time.Minute, "the managers' rollout has rolled one", func() error {
		r, err := rolloutStatus(t, u.config, "managers")
		if err != nil {
			return err
		}
		if r.Rolled < 1 || r.State != "rolling" {
			return fmt.Errorf("%+v", r)
		}
		return nil
	})
	l := u.leader()
	killInstance(t, l.InstanceID)
	t.Logf("killed the curator leader %s (%s) in the middle of the upgrade", l.Name, l.Version)
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("upgrade with the leader killed: %v\n%s", err, out.String())
		}
	case <-time.After(8 * time.Minute):
		t.Fatalf("upgrade with the leader killed still runs:\n%s", out.String())
	}
	killed := time.Since(start)
	t.Logf("upgrade with the leader killed in %v:\n%s", killed.Round(time.Second), out.String())
	u.waitRelease(t, newRelease)

	stopCalls()
	stopMonitor()
	t.Logf("%d management calls beside the upgrades, %d failed", u.calls.Load(), u.failed.Load())
	if u.failed.Load() > 0 {
		t.Errorf("management calls failed during the upgrades: %q", u.failures)
	}
	u.noneDownButReplaced(t)

	// A release that cannot start: the managers' new machine dies, the
	// rollout rolls back, the upgrade stops, the cluster stays whole.
	bad := filepath.Join(dir, "curator-bad")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho this release cannot start >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out2, err := runCLI(t, 8*time.Minute, "--config", u.config, "upgrade", "--binary", bad)
	if err == nil || !strings.Contains(out2, "failed") || !strings.Contains(out2, "group managers") {
		t.Errorf("upgrade to a release that cannot start: %v, want it failed at group managers:\n%s", err, out2)
	}
	t.Logf("upgrade to a release that cannot start:\n%s", out2)
	u.waitRelease(t, newRelease)

	// A node of a release outside the policy: two minors ahead of the
	// managers.
	token, _, err := cli(t, "--config", u.config, "token", "show", "worker")
	if err != nil {
		t.Fatal(err)
	}
	managers, err := clusterInfo(t, u.config)
	if err != nil {
		t.Fatal(err)
	}
	join := exec.Command(ahead, "agent", "join", "--data-dir", filepath.Join(dir, "ahead"), "--listen", "127.0.250.99:7000",
		"--manager", managers.Managers[0])
	join.Env = append(os.Environ(), "CURATOR_JOIN_TOKEN="+strings.TrimSpace(token))
	joinOut, err := runWithTimeout(join, time.Minute)
	if err == nil || !strings.Contains(joinOut, "v9.9.0") || !strings.Contains(joinOut, "release") {
		t.Errorf("a node of release v9.9.0 joining: %v, want a refusal naming its release:\n%s", err, joinOut)
	}
	t.Logf("figures: upgrade %v, downgrade %v, upgrade with the leader killed %v; %d management calls, %d failed",
		up.Round(time.Second), down.Round(time.Second), killed.Round(time.Second), u.calls.Load(), u.failed.Load())
}

// runWithTimeout runs cmd until it ends or timeout passes: its output.
func runWithTimeout(cmd *exec.Cmd, timeout time.Duration) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		return out.String(), fmt.Errorf("still running after %v", timeout)
	}
}

// noneDownButReplaced: every node the health loop marked down was one a
// rollout replaced (or the leader the test killed, which a rollout
// replaced too).
func (u *upgradeRun) noneDownButReplaced(t *testing.T) {
	t.Helper()
	evs, err := events(t, u.config)
	if err != nil {
		t.Fatal(err)
	}
	removed := map[string]bool{}
	for _, e := range evs {
		if e.Action == "remove-node" || e.Action == "destroy-machine" || e.Action == "drain" {
			removed[e.NodeID] = true
		}
	}
	for _, e := range evs {
		if e.Action == "mark-down" && !removed[e.NodeID] {
			t.Errorf("node %s was marked down and never replaced: %s", e.NodeID, e.Reason)
		}
	}
}
