package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/swarmtest"
	"github.com/curatorproject/curator/internal/testenv"
)

var benchNodes = flag.Int("bench.nodes", 1000, "simulated nodes of TestHeartbeatsShort")

// Timers and bounds of TestHeartbeatsShort: the fleet's own (a 5 s
// interval, down after 15 s). The whole run must stay near 90 s on the
// 2-core machine: the join wave gets 40 s (1,000 nodes at the goal's
// 300/s take 3.3, on a busy machine about 10), readiness 15 s.
const (
	shortMassFailure = 100
	shortInterval    = 5 * time.Second
	shortDownAfter   = 15 * time.Second
	shortDuration    = 5 * time.Second
	shortJoinTimeout = 40 * time.Second
	shortReadyTime   = 15 * time.Second
	shortRunTimeout  = 3 * time.Minute
	// maxJoinHandshakes bounds the managers' TLS handshakes a join, over
	// the wave (join_handshakes_per_join): 1.33 expected, 2.33 before
	// the session ran on the join's connection; the rest is retries.
	maxJoinHandshakes = 1.7
	// shortAddresses is this test's own range, away from the e2e tests'
	// and the bench's default, so it runs beside them.
	shortAddresses = "127.0.151.10-127.0.151.250"
)

// TestHeartbeatsShort runs the real tool on a short `heartbeats`: 3 real
// managers, 1,000 simulated nodes (each the agent's own join and session
// code) at a 5 s interval, a 5 s window at rest, a leader kill and a mass
// failure of 100 nodes, and asserts the goals of issues 11 and 27: no etcd
// write at rest, every node answered by the new leader and none marked
// down by a leader kill, and the 100 stopped nodes all down within
// down-after + 2 s.
func TestHeartbeatsShort(t *testing.T) {
	t.Parallel() // its own addresses: the short runs go two at a time
	if testing.Short() {
		t.Skip("starts a cluster and hundreds of simulated nodes")
	}
	var res heartbeatsResult
	runErr := runBench(t, &res, "heartbeats",
		"--nodes", strconv.Itoa(*benchNodes), "--duration", shortDuration.String(),
		"--interval", shortInterval.String(), "--down-after", shortDownAfter.String(),
		"--kill-leader", "--mass-failure", strconv.Itoa(min(shortMassFailure, *benchNodes)),
		"--join-timeout", shortJoinTimeout.String(), "--ready-timeout", shortReadyTime.String(),
		"--addresses", shortAddresses)
	if runErr != nil {
		t.Errorf("curator-bench heartbeats: %v (error in the result: %s)", runErr, res.Error)
	}
	if res.Joined != *benchNodes {
		t.Errorf("%d of %d nodes joined (%.1f/s)", res.Joined, *benchNodes, res.JoinRate)
	}
	if res.Ready != *benchNodes {
		t.Errorf("%d of %d nodes ready %s after the join wave", res.Ready, *benchNodes, shortReadyTime)
	}
	// A join's first session runs on its Register's connection: a
	// handshake a join, and one more for the third of the sessions that
	// began at the leader and moved off it (two and a third without).
	if res.JoinHandshakesPerJoin == 0 || res.JoinHandshakesPerJoin > maxJoinHandshakes {
		t.Errorf("%.2f TLS handshakes a join on the managers, want at most %.1f: the first session on the join's connection", res.JoinHandshakesPerJoin, maxJoinHandshakes)
	}
	if res.Rest == nil {
		t.Fatal("no figures at rest: the fleet never came to rest")
	}
	if res.Rest.EtcdRevisions != 0 {
		t.Errorf("at rest: %d etcd writes in %.1fs (%.2f/s), want 0", res.Rest.EtcdRevisions, res.Rest.WindowS, res.Rest.EtcdWritesPerS)
	}
	if res.Rest.RTTSamples == 0 {
		t.Error("at rest: no heartbeat was answered")
	}
	// Two thirds of the sessions go through a follower from the start,
	// the leader's own third once they moved.
	if r := res.Rest; r.LeaderDigestedPerS < 0.5*r.HeartbeatsPerS {
		t.Errorf("at rest the leader took %.1f heartbeats/s in digests and read %.1f/s on streams, of %.1f/s answered: want half or more in digests",
			r.LeaderDigestedPerS, r.LeaderReadPerS, r.HeartbeatsPerS)
	}
	if kl := res.KillLeader; kl == nil {
		t.Error("no figures of the leader kill")
	} else {
		if kl.Unanswered != 0 {
			t.Errorf("leader kill: %d nodes never answered by the new leader", kl.Unanswered)
		}
		if kl.MarkedDown != 0 {
			t.Errorf("leader kill: %d nodes marked down (%d mark-down events), want 0", kl.MarkedDown, kl.MarkDownEvents)
		}
	}
	if mf := res.MassFailure; mf == nil {
		t.Error("no figures of the mass failure")
	} else {
		if !mf.WithinBound {
			t.Errorf("mass failure: %d of %d stopped nodes down, the last %.2fs after the stop, want all within %.1fs (down-after + 2 s)",
				mf.Stopped-mf.NotDown, mf.Stopped, mf.AllDownS, mf.BoundS)
		}
		if mf.OthersNotReady != 0 {
			t.Errorf("mass failure: %d nodes that were not stopped are not ready", mf.OthersNotReady)
		}
	}
}

// built are curator and curator-bench, built from this tree once for
// every short run (the first run to need them builds them), in a dir
// TestMain removes: each run built its own pair before, ten links of two
// large binaries on two cores.
var built struct {
	once           sync.Once
	dir            string
	curator, bench string
	err            error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "curator-bench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	built.dir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// shortBinaries returns the paths of curator and curator-bench, built
// from this tree, failing t if they do not build.
func shortBinaries(t *testing.T) (curator, bench string) {
	t.Helper()
	built.once.Do(func() {
		built.curator, built.bench = filepath.Join(built.dir, "curator"), filepath.Join(built.dir, "curator-bench")
		for bin, pkg := range map[string]string{built.curator: "./cmd/curator", built.bench: "./cmd/curator-bench"} {
			if err := testenv.GoBuild(bin, pkg); err != nil {
				built.err = err
				return
			}
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.curator, built.bench
}

// runBench runs `curator-bench SUBCOMMAND --curator ... --dir ... ARGS...`
// with the binaries of shortBinaries, logs its progress, and reads the one
// JSON line it prints into res. It returns the run's error; a stdout that
// is not that one line fails the test.
func runBench(t *testing.T, res any, subcommand string, args ...string) error {
	t.Helper()
	return runBenchFor(t, shortRunTimeout, res, subcommand, args...)
}

// runBenchFor is runBench with a time limit of its own.
func runBenchFor(t *testing.T, limit time.Duration, res any, subcommand string, args ...string) error {
	t.Helper()
	curator, bench := shortBinaries(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bench, append([]string{subcommand, "--curator", curator, "--dir", filepath.Join(dir, "cluster")}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	runErr := cmd.Run()
	t.Logf("curator-bench %s took %s; its progress:\n%s", subcommand, time.Since(start).Round(time.Second), stderr.String())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	last := lines[len(lines)-1]
	t.Logf("result: %s", last)
	if err := json.Unmarshal([]byte(last), res); err != nil {
		t.Fatalf("the last line on stdout is not the JSON result (%v; run: %v): %q", err, runErr, last)
	}
	if len(lines) != 1 {
		t.Errorf("stdout holds %d lines, want the one JSON line", len(lines))
	}
	return runErr
}

// TestRolloutShort runs the real tool on a short `rollout`: one manager
// and one worker, each rolled (the manager is the curator leader's own
// node: it hands over), and asserts that the figures are there and that a
// machine's rollout costs no more than a few seconds above its own time.
func TestRolloutShort(t *testing.T) {
	t.Parallel() // its own addresses: the short runs go two at a time
	if testing.Short() {
		t.Skip("starts a dev cluster")
	}
	var res map[string]any
	runErr := runBench(t, &res, "rollout", "--managers", "1", "--workers", "1",
		"--addresses", "127.0.153.10-127.0.153.40", "--timeout", "2m")
	if runErr != nil || res["error"] != nil {
		t.Fatalf("curator-bench rollout: %v; %v", runErr, res["error"])
	}
	for _, k := range []string{"worker_alone_s", "per_worker_s", "manager_alone_s", "per_manager_s"} {
		if v, _ := res[k].(float64); v <= 0 {
			t.Errorf("%s = %v, want > 0", k, res[k])
		}
	}
	// Generous: the goal (2 s above a machine's own time) is measured by
	// the full run; here a 2-core machine runs other tests beside it.
	for _, k := range []string{"per_worker_above_alone_s", "per_manager_above_alone_s"} {
		if v, _ := res[k].(float64); v > 15 {
			t.Errorf("%s = %.1f s: a rollout costs far more per machine than the machine itself", k, v)
		}
	}
}

// TestUpgradeShort runs the real tool on a short `upgrade`: three
// managers (one alone would take its address with it when it is
// replaced, and the client knows no other) and one worker of the
// previous release, rolled, upgraded to this checkout and back, with
// management calls beside that must not fail.
func TestUpgradeShort(t *testing.T) {
	t.Parallel() // its own addresses: the short runs go two at a time
	if testing.Short() {
		t.Skip("builds the previous release and starts a dev cluster")
	}
	var res upgradeResult
	runErr := runBenchFor(t, 8*time.Minute, &res, "upgrade", "--managers", "3", "--workers", "1",
		"--addresses", "127.0.157.10-127.0.157.40", "--timeout", "3m")
	if runErr != nil || res.Error != "" {
		t.Fatalf("curator-bench upgrade: %v; %s", runErr, res.Error)
	}
	if res.RolloutS <= 0 || res.UpgradeS <= 0 || res.DowngradeS <= 0 || res.UpgradeRatio <= 0 || res.From == res.To || res.Calls == 0 {
		t.Errorf("figures %+v: want each step timed, two releases, calls made", res)
	}
	if res.CallsFailed != 0 {
		t.Errorf("%d of %d management calls failed during the upgrades", res.CallsFailed, res.Calls)
	}
}

// TestFailoverShort runs the real tool on a short `failover`: two rounds
// of killing the curator leader (and etcd's), and asserts that a killed
// leader is replaced well before its election lease (3 s) could expire:
// crash detection revokes it.
func TestFailoverShort(t *testing.T) {
	t.Parallel() // its own addresses: the short runs go two at a time
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	var res struct {
		Error       string  `json:"error"`
		CuratorP50S float64 `json:"curator_p50_s"`
		EtcdP50S    float64 `json:"etcd_p50_s"`
		TTL         float64 `json:"election_ttl_s"`
	}
	runErr := runBench(t, &res, "failover", "--rounds", "2", "--addresses", "127.0.154.10-127.0.154.40")
	if runErr != nil || res.Error != "" {
		t.Fatalf("curator-bench failover: %v; %s", runErr, res.Error)
	}
	if res.CuratorP50S <= 0 || res.EtcdP50S <= 0 {
		t.Errorf("figures missing: %+v", res)
	}
	// The goal (0.5 s, below etcd's own) is for the full run; here a
	// 2-core machine runs other tests beside it.
	if res.CuratorP50S >= res.TTL {
		t.Errorf("a killed leader was replaced after %.2fs (median), not before its %.0fs lease: crash detection did not act", res.CuratorP50S, res.TTL)
	}
}

// TestSwarmShort runs the real tool on a short `swarm`: one round of each
// repair of a Swarm promotion cut half-way, on a real Swarm
// (internal/swarmtest: skipped, saying why, without root and dockerd),
// and asserts that both repairs ended with the figures.
func TestSwarmShort(t *testing.T) {
	t.Parallel() // its own addresses: the short runs go two at a time
	if testing.Short() {
		t.Skip("starts a Swarm and a cluster")
	}
	if err := swarmtest.Available(); err != nil {
		t.Skipf("swarmtest: %v", err)
	}
	var res swarmBenchResult
	runErr := runBench(t, &res, "swarm", "--rounds", "1", "--addresses", "127.0.155.10-127.0.155.40")
	if runErr != nil || res.Error != "" {
		t.Fatalf("curator-bench swarm: %v; %s", runErr, res.Error)
	}
	if len(res.CuratorS) != 1 || len(res.HandS) != 1 || res.CuratorP50 <= 0 || res.HandP50 <= 0 {
		t.Errorf("figures missing: %+v", res)
	}
}
