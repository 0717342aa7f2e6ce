package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/provider/process"
)

// TestClusterThreeManagersTwoWorkers builds a 3-manager, 2-worker cluster
// from processes, checks what node ls and cluster info say, then kills the
// curator leader with SIGKILL and measures how long the cluster takes to
// elect another.
func TestClusterThreeManagersTwoWorkers(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.201.")
	c.build(3, 2)

	names := []string{"manager-1", "manager-2", "manager-3", "worker-1", "worker-2"}
	var nodes []nodeJSON
	testenv.Eventually(t, 60*time.Second, "5 ready nodes, 3 consensus, one leader, 2 reachable", func() error {
		var err error
		if nodes, err = nodeLs(t, c.config); err != nil {
			return err
		}
		if len(nodes) != 5 {
			return fmt.Errorf("%d nodes, want 5", len(nodes))
		}
		if err := allReady(nodes, names...); err != nil {
			return err
		}
		consensus, status := 0, map[string]int{}
		for _, n := range nodes {
			if slices.Contains(n.Roles, "consensus") {
				consensus++
			}
			status[n.ManagerStatus]++
		}
		if consensus != 3 || status["leader"] != 1 || status["reachable"] != 2 {
			return fmt.Errorf("%d consensus members, manager statuses %v; want 3, 1 leader and 2 reachable", consensus, status)
		}
		return nil
	})
	var info *clusterInfoJSON
	testenv.Eventually(t, 30*time.Second, "3 voters and a healthy quorum", func() error {
		var err error
		if info, err = clusterInfo(t, c.config); err != nil {
			return err
		}
		if len(info.Voters) != 3 || len(info.Learners) != 0 || !info.QuorumHealthy || info.Leader == "" {
			return fmt.Errorf("cluster info %+v: want 3 voters, no learner, a leader, quorum healthy", info)
		}
		// The placement loop keeps etcd's leader off the curator leader's
		// node: killing it then costs the curator failover alone.
		if info.EtcdLeader == info.Leader {
			return fmt.Errorf("etcd leader %s is the curator leader's node: placement has not moved it yet", info.EtcdLeader)
		}
		return nil
	})

	oldLeader := info.Leader
	var victim *node
	for _, n := range nodes {
		if n.ID == oldLeader {
			victim = c.nodes[n.Name]
		}
	}
	if victim == nil {
		t.Fatalf("leader %s is not one of the nodes %v", oldLeader, nodes)
	}
	for _, id := range info.Voters {
		if info.Names[id] == "" || !strings.HasPrefix(info.Names[id], "manager-") {
			t.Errorf("cluster info names voter %s %q, want its manager name", id, info.Names[id])
		}
	}
	// A config that names the dead leader first and has no manager cache:
	// the CLI must fall through to the others.
	var others []string
	for _, name := range []string{"manager-1", "manager-2", "manager-3"} {
		if c.nodes[name] != victim {
			others = append(others, c.nodes[name].listen)
		}
	}
	deadFirst := c.writeConfig(append([]string{victim.listen}, others...)...)

	t.Logf("killing leader %s (%s) with SIGKILL; etcd leader is %s", victim.name, oldLeader, info.EtcdLeader)
	killed := time.Now()
	if err := victim.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-victim.proc.done
	failoverLimit := electionTTL + 5*time.Second
	var newLeader string
	testenv.Eventually(t, failoverLimit, "a new curator leader", func() error {
		info, err := clusterInfo(t, deadFirst)
		if err != nil {
			return err
		}
		if info.Leader == "" || info.Leader == oldLeader {
			return fmt.Errorf("leader is %q", info.Leader)
		}
		newLeader = info.Leader
		return nil
	})
	took := time.Since(killed)
	t.Logf("new leader %s after %s (TTL %s)", newLeader, took.Round(time.Millisecond), electionTTL)
	// A killed leader's ports refuse connections: a follower revokes its
	// lease at once, and no one waits out the TTL.
	if took >= electionTTL {
		t.Errorf("a killed leader was replaced after %s, not before its lease (%s) could expire: crash detection did not act", took.Round(time.Millisecond), electionTTL)
	}
	// The follower that revoked the lease recorded it, with its evidence,
	// whichever curator leads now.
	testenv.Eventually(t, 5*time.Second, "a revoke-dead-leader event", func() error {
		events, err := mgmtEvents(t, c)
		if err != nil {
			return err
		}
		for _, ev := range events {
			if ev.Action == "revoke-dead-leader" && ev.NodeID == oldLeader && ev.Leader != oldLeader && strings.Contains(ev.Reason, "refused") {
				return nil
			}
		}
		return fmt.Errorf("no revoke-dead-leader event for %s among %d events", oldLeader, len(events))
	})

	// The new leader grants every node a grace period, then marks the
	// dead one down. Both configs must still work: the admin config
	// (which may name only the dead node, with the others in its cache)
	// and the one that names the dead node first.
	for _, cfg := range []string{deadFirst, c.config} {
		testenv.Eventually(t, 20*time.Second, "old leader down in node ls", func() error {
			nodes, err := nodeLs(t, cfg)
			if err != nil {
				return err
			}
			n, _ := byName(nodes, victim.name)
			if n.Status != "down" {
				return fmt.Errorf("%s is %q", victim.name, n.Status)
			}
			var notReady []string
			for _, other := range nodes {
				if other.Name != victim.name && other.Status != "ready" {
					notReady = append(notReady, other.Name)
				}
			}
			if len(notReady) > 0 {
				return fmt.Errorf("not ready: %v", notReady)
			}
			return nil
		})
	}
	t.Logf("old leader shown down %s after the kill (down-after %s)", time.Since(killed).Round(time.Millisecond), downAfter)
}

// TestRestartFromDisk stops every node of a cluster with SIGTERM and starts
// them again with `agent run`: the same nodes come back ready.
func TestRestartFromDisk(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.202.")
	m1 := c.init("manager-1", 10)
	c.join("worker-1", 11, c.token("worker"), m1)
	before := c.waitReady(30*time.Second, "manager-1", "worker-1")

	for _, name := range []string{"worker-1", "manager-1"} {
		p := c.nodes[name].proc
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := p.wait(t, 20*time.Second); err != nil {
			t.Fatalf("%s after SIGTERM: %v, want exit status 0", name, err)
		}
	}
	restarted := time.Now()
	c.agent("manager-1", "run")
	c.agent("worker-1", "run")

	testenv.Eventually(t, 30*time.Second, "both nodes ready again, with fresh heartbeats", func() error {
		after, err := nodeLs(t, c.config)
		if err != nil {
			return err
		}
		if len(after) != len(before) {
			return fmt.Errorf("%d nodes after restart, %d before", len(after), len(before))
		}
		for _, b := range before {
			a, ok := byName(after, b.Name)
			switch {
			case !ok:
				return fmt.Errorf("%s missing after restart", b.Name)
			case a.ID != b.ID:
				t.Fatalf("%s has ID %s after restart, %s before", b.Name, a.ID, b.ID)
			case a.Status != "ready":
				return fmt.Errorf("%s is %q", a.Name, a.Status)
			case a.LastHeartbeat == nil || a.LastHeartbeat.Before(restarted):
				return fmt.Errorf("%s: no heartbeat since the restart (last %v)", a.Name, a.LastHeartbeat)
			}
		}
		return nil
	})
}

// TestDev runs `curator dev` and uses the config it writes: both groups
// are listed, a worker and a manager killed for good (-9) are replaced by
// their groups and their records reaped, each step an event with its
// reason; SIGTERM to dev stops every node, dev on the same dir starts the
// same nodes again, and after dev is killed (-9) the next dev picks up the
// nodes it left running.
func TestDev(t *testing.T) {
	parallel(t) // its own addresses and dirs
	dir := t.TempDir()
	const addresses = "127.0.203.10-127.0.203.40"
	var stdout syncBuffer
	runDev := func(name string) *proc {
		stdout = syncBuffer{}
		dev := start(t, name, filepath.Join(dir, "dev.log"), &stdout, "dev", "--managers", "3", "--workers", "2", "--dir", dir, "--addresses", addresses)
		waitDevUp(t, dev, &stdout, 3*time.Minute)
		return dev
	}
	dev := runDev("dev")
	t.Cleanup(func() { stopDevNodes(t, dir) })
	out := stdout.String()
	config := filepath.Join(dir, "config.yaml")
	if !strings.Contains(out, "export CURATOR_CONFIG="+config) {
		t.Errorf("dev's output does not say export CURATOR_CONFIG=%s:\n%s", config, out)
	}
	nodes, err := nodeLs(t, config)
	if err != nil {
		t.Fatal(err)
	}
	names := nodeNames(nodes)
	groupOf := map[string]int{}
	for _, n := range nodes {
		groupOf[n.Group]++
		if !strings.Contains(out, n.Name) {
			t.Errorf("dev's output has no %s:\n%s", n.Name, out)
		}
	}
	if len(nodes) != 5 || groupOf["managers"] != 3 || groupOf["workers"] != 2 {
		t.Errorf("nodes by group %v, want managers 3 and workers 2: %+v", groupOf, nodes)
	}
	if err := allReady(nodes, names...); err != nil {
		t.Error(err)
	}
	// Every node reports the release of the binary, and cluster info
	// counts them.
	release, _, err := cli(t, "version", "-o", "json")
	var built struct{ Release string }
	if err != nil || json.Unmarshal([]byte(release), &built) != nil || built.Release == "" {
		t.Errorf("version -o json (%v): %q", err, release)
	}
	for _, n := range nodes {
		if n.Version != built.Release {
			t.Errorf("%s reports release %q, want the binary's %q", n.Name, n.Version, built.Release)
		}
	}
	if info, err := clusterInfo(t, config); err != nil {
		t.Error(err)
	} else if !maps.Equal(info.Releases, map[string]uint32{built.Release: 5}) || info.LowestManager != built.Release {
		t.Errorf("cluster info releases %v, lowest on the managers %q; want 5 nodes on %q", info.Releases, info.LowestManager, built.Release)
	}
	// The commands dev prints work when pasted into a shell, with no
	// curator on the PATH (this binary is a build of the test's own).
	lines := strings.Split(out, "\n")
	if i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "export CURATOR_CONFIG=") }); i < 0 || i+2 >= len(lines) {
		t.Errorf("dev's output has no export line and commands after it:\n%s", out)
	} else {
		script := strings.Join([]string{strings.TrimSpace(lines[i]), strings.TrimSpace(lines[i+1]), strings.TrimSpace(lines[i+2])}, "\n")
		sh := exec.Command("sh", "-c", script)
		sh.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
		pasted, err := sh.CombinedOutput()
		if err != nil || !strings.Contains(string(pasted), nodes[0].Name) || !strings.Contains(string(pasted), "workers") {
			t.Errorf("the commands dev printed, pasted into a shell:\n%s\nfailed (%v):\n%s", script, err, pasted)
		}
	}
	// Each node's log is where dev says: a line names the node and the
	// log in DIR/instances.
	logs, _ := filepath.Glob(filepath.Join(dir, "instances", "*", "agent.log"))
	if len(logs) != len(names) {
		t.Errorf("%d node logs in %s/instances, want %d", len(logs), dir, len(names))
	}
	for _, log := range logs {
		dumpOnFailure(t, filepath.Base(filepath.Dir(log)), log)
		if !slices.ContainsFunc(lines, func(l string) bool {
			f := strings.Fields(l)
			return len(f) == 2 && slices.Contains(names, f[0]) && f[1] == log
		}) {
			t.Errorf("dev's output names no node with the log %s:\n%s", log, out)
		}
	}
	groups, _, err := cli(t, "--config", config, "group", "ls")
	if err != nil || !strings.Contains(groups, "managers") || !strings.Contains(groups, "workers") {
		t.Errorf("group ls (%v):\n%s", err, groups)
	}

	// A worker and a manager killed for good come back as new machines,
	// and the dead nodes leave the table, within the 3 minutes.
	for _, group := range []string{"workers", "managers"} {
		victim := nodeOfGroup(t, config, group)
		stopMonitor := monitorHealthyVoters(t, config, 2)
		killInstance(t, victim.InstanceID)
		testenv.Eventually(t, 3*time.Minute, group+" node "+victim.Name+" replaced and its record reaped", func() error {
			now, err := nodeLs(t, config)
			if err != nil {
				return err
			}
			if _, ok := byName(now, victim.Name); ok {
				return fmt.Errorf("%s is still listed", victim.Name)
			}
			ready := 0
			for _, n := range now {
				if n.Group == group && n.Status == "ready" {
					ready++
				}
			}
			if want := groupOf[group]; ready != want {
				return fmt.Errorf("%d of %d %s ready", ready, want, group)
			}
			info, err := clusterInfo(t, config)
			if err != nil {
				return err
			}
			if len(info.Voters) != 3 || !info.QuorumHealthy {
				return fmt.Errorf("%d voters, quorum healthy %v", len(info.Voters), info.QuorumHealthy)
			}
			return nil
		})
		stopMonitor()
		evs, err := events(t, config)
		if err != nil {
			t.Fatal(err)
		}
		for _, action := range []string{"remove-node", "provision"} {
			if !slices.ContainsFunc(evs, func(e eventJSON) bool {
				return e.Loop == "groups" && e.Action == action && e.Reason != "" && (action != "remove-node" || e.NodeID == victim.ID)
			}) {
				t.Errorf("no groups %s event for %s: %+v", action, victim.Name, evs)
			}
		}
	}
	nodes, err = nodeLs(t, config)
	if err != nil {
		t.Fatal(err)
	}

	stopDev(t, dev, addresses, syscall.SIGTERM, 5)

	// Run again on the same dir: dev restarts the same nodes from disk.
	dev = runDev("dev again")
	again, err := nodeLs(t, config)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if a, ok := byName(again, n.Name); !ok || a.ID != n.ID || a.Status != "ready" {
			t.Errorf("%s after dev restarted it: %+v, before: %+v", n.Name, a, n)
		}
	}
	// Killed, dev leaves its nodes running; the next dev on the dir stops
	// them and starts them again.
	if err := dev.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	dev.wait(t, 30*time.Second)
	dev = runDev("dev after a killed dev")
	if !strings.Contains(stdout.String()+readFile(t, filepath.Join(dir, "dev.log")), "still running") {
		t.Errorf("dev after a killed dev does not say it found nodes running:\n%s", readFile(t, filepath.Join(dir, "dev.log")))
	}
	if again, err = nodeLs(t, config); err != nil {
		t.Fatal(err)
	}
	if err := allReady(again, nodeNames(nodes)...); err != nil {
		t.Error(err)
	}
	stopDev(t, dev, addresses, syscall.SIGTERM, 5)
}

// monitorHealthyVoters checks, every 200 ms until stop is called, that
// the cluster has at least min healthy voters (voters whose node is ready),
// and fails the test at the first sample that has fewer.
func monitorHealthyVoters(t *testing.T, config string, min int) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		samples := 0
		for {
			select {
			case <-done:
				t.Logf("healthy voters: %d samples, never fewer than %d", samples, min)
				return
			case <-time.After(200 * time.Millisecond):
			}
			info, err := clusterInfo(t, config)
			if err != nil {
				continue // a call that fails says nothing of the voters
			}
			nodes, err := nodeLs(t, config)
			if err != nil {
				continue
			}
			healthy, unknown := 0, false
			for _, id := range info.Voters {
				n, ok := byID(nodes, id)
				if ok && n.Status == "ready" {
					healthy++
				}
				// A leader that took over a moment ago shows the nodes it
				// has not heard from yet as unknown: such a sample says
				// nothing of the voters.
				unknown = unknown || ok && n.Status == "unknown"
			}
			if unknown {
				continue
			}
			samples++
			if healthy < min {
				t.Errorf("only %d healthy voters (voters %v): want at least %d at all times", healthy, info.Voters, min)
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

func byID(nodes []nodeJSON, id string) (nodeJSON, bool) {
	i := slices.IndexFunc(nodes, func(n nodeJSON) bool { return n.ID == id })
	if i < 0 {
		return nodeJSON{}, false
	}
	return nodes[i], true
}

func nodeNames(nodes []nodeJSON) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

// nodeOfGroup returns a ready node of group that does not run the curator
// leader.
func nodeOfGroup(t *testing.T, config, group string) nodeJSON {
	t.Helper()
	nodes, err := nodeLs(t, config)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Group == group && n.Status == "ready" && n.ManagerStatus != "leader" {
			return n
		}
	}
	t.Fatalf("no ready node of group %s that is not the leader: %+v", group, nodes)
	return nodeJSON{}
}

// killInstance kills the process of a process-provider instance with -9.
func killInstance(t *testing.T, id string) {
	t.Helper()
	// Every node runs with its data dir, DIR/instances/ID/data.
	out, err := exec.Command("pgrep", "-f", "--", "/instances/"+id+"/data").Output()
	if err != nil {
		t.Fatalf("no process of instance %s: %v", id, err)
	}
	for _, pid := range strings.Fields(string(out)) {
		exec.Command("kill", "-9", pid).Run()
	}
}

// stopDevNodes stops whatever a failed test left running of dev's nodes.
func stopDevNodes(t *testing.T, dir string) {
	killInstancesUnder(dir)
}

func readFile(t *testing.T, path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// stopDev sends sig to dev, whose nodes are on the range addresses, and
// waits for it. After SIGTERM, dev has stopped its nodes when it exits:
// none of them listens any more on any of its ports.
func stopDev(t *testing.T, dev *proc, addresses string, sig syscall.Signal, nodes int) {
	t.Helper()
	began := time.Now()
	if err := dev.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if err := dev.wait(t, 30*time.Second); err != nil {
		t.Errorf("dev after SIGTERM: %v, want exit status 0", err)
	}
	pool, err := process.PoolAddresses(addresses, port)
	if err != nil {
		t.Fatal(err)
	}
	var open []string
	for _, a := range pool {
		host, _, _ := net.SplitHostPort(a)
		for p := port; p < port+4; p++ {
			addr := net.JoinHostPort(host, strconv.Itoa(p))
			conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
			if err == nil {
				conn.Close()
				open = append(open, addr)
			}
		}
	}
	if len(open) > 0 {
		t.Errorf("%s still accept connections after dev stopped", strings.Join(open, ", "))
	}
	t.Logf("dev (%s) stopped %d nodes in %s", sig, nodes, time.Since(began).Round(time.Millisecond))
}

// dumpOnFailure shows the end of a log the test did not start itself if
// the test fails.
func dumpOnFailure(t *testing.T, name, path string) {
	t.Cleanup(func() {
		if t.Failed() {
			dumpLog(t, &proc{name: name, log: path})
		}
	})
}

// TestBadInput checks that bad tokens and flags fail with a clear message.
func TestBadInput(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.204.")
	m1 := c.init("manager-1", 10)

	t.Run("malformed token", func(t *testing.T) {
		dataDir := filepath.Join(t.TempDir(), "node")
		_, stderr, err := cli(t, "agent", "join", "--data-dir", dataDir, "--listen", c.addr(20),
			"--token", "not-a-token", "--manager", m1.listen)
		if err == nil {
			t.Fatal("join with a malformed token succeeded")
		}
		if !strings.Contains(stderr, "CUR1-<fingerprint>-<secret>") {
			t.Errorf("stderr %q does not say what a token looks like", stderr)
		}
		assertNoState(t, dataDir)
	})

	t.Run("wrong CA fingerprint", func(t *testing.T) {
		token := c.token("worker")
		parts := strings.SplitN(token, "-", 3)
		if len(parts) != 3 || parts[0] != "CUR1" || len(parts[1]) == 0 {
			t.Fatalf("token %q does not look like CUR1-<fingerprint>-<secret>", token)
		}
		fp := []byte(parts[1])
		if fp[0] == '0' {
			fp[0] = '1'
		} else {
			fp[0] = '0'
		}
		bad := parts[0] + "-" + string(fp) + "-" + parts[2]
		dataDir := filepath.Join(t.TempDir(), "node")
		began := time.Now()
		_, stderr, err := cli(t, "agent", "join", "--data-dir", dataDir, "--listen", c.addr(21),
			"--token", bad, "--manager", m1.listen)
		if err == nil {
			t.Fatal("join with a token for another CA succeeded")
		}
		// A server that fails the pin is not retried as if it were down:
		// the refusal comes at once, not after the minute of --join-timeout.
		if took := time.Since(began); took > 5*time.Second {
			t.Errorf("refused only after %s: a wrong CA must be final, not retried", took.Round(time.Millisecond))
		}
		if !strings.Contains(stderr, "wrong token or wrong cluster") {
			t.Errorf("stderr %q does not say wrong token or wrong cluster", stderr)
		}
		// Nothing is left behind, not even the node's key.
		assertNoState(t, dataDir)
	})

	t.Run("dev flags", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--managers", "0"}, "--managers 0: want 1 to 7"},
			{[]string{"--managers", "8"}, "--managers 8: want 1 to 7"},
			{[]string{"--workers", "-1"}, "--workers -1: want 0 or more"},
			{[]string{"--addresses", "127.0.205.10"}, "want FIRST-LAST"},
			{[]string{"--addresses", "127.0.205.x-127.0.205.20"}, "not an IPv4 address"},
			{[]string{"--addresses", "127.0.205.20-127.0.205.10"}, "comes after"},
			{[]string{"--addresses", "127.0.205.10-127.0.205.13"}, "holds 4 addresses, 5 nodes need 5"},
		} {
			args := append([]string{"dev", "--dir", t.TempDir()}, tc.args...)
			_, stderr, err := cli(t, args...)
			if err == nil {
				t.Errorf("curator %v succeeded", args)
				continue
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("curator %v: stderr %q does not say %q", args, stderr, tc.want)
			}
		}
	})

	t.Run("node ls -o xml", func(t *testing.T) {
		_, stderr, err := cli(t, "--config", c.config, "node", "ls", "-o", "xml")
		if err == nil {
			t.Fatal("node ls -o xml succeeded")
		}
		if !strings.Contains(stderr, "xml") || !strings.Contains(stderr, "json") || !strings.Contains(stderr, "yaml") {
			t.Errorf("stderr %q does not name the bad format and the good ones", stderr)
		}
	})
}

// assertNoState checks that a failed join left no node in dataDir.
func assertNoState(t *testing.T, dataDir string) {
	t.Helper()
	entries, err := os.ReadDir(dataDir)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("failed join left %v in %s", names, dataDir)
	}
}
