package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClusterThreeManagersTwoWorkers builds a 3-manager, 2-worker cluster
// from processes, checks what node ls and cluster info say, then kills the
// curator leader with SIGKILL and measures how long the cluster takes to
// elect another.
func TestClusterThreeManagersTwoWorkers(t *testing.T) {
	c := newCluster(t, "127.0.201.")
	c.build(3, 2)

	names := []string{"manager-1", "manager-2", "manager-3", "worker-1", "worker-2"}
	var nodes []nodeJSON
	eventually(t, 60*time.Second, "5 ready nodes, 3 consensus, one leader, 2 reachable", func() error {
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
	eventually(t, 30*time.Second, "3 voters and a healthy quorum", func() error {
		var err error
		if info, err = clusterInfo(t, c.config); err != nil {
			return err
		}
		if len(info.Voters) != 3 || len(info.Learners) != 0 || !info.QuorumHealthy || info.Leader == "" {
			return fmt.Errorf("cluster info %+v: want 3 voters, no learner, a leader, quorum healthy", info)
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
	eventually(t, failoverLimit, "a new curator leader", func() error {
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
	t.Logf("new leader %s after %s (TTL %s)", newLeader, time.Since(killed).Round(time.Millisecond), electionTTL)

	// The new leader grants every node a grace period, then marks the
	// dead one down. Both configs must still work: the admin config
	// (which may name only the dead node, with the others in its cache)
	// and the one that names the dead node first.
	for _, cfg := range []string{deadFirst, c.config} {
		eventually(t, 20*time.Second, "old leader down in node ls", func() error {
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

	eventually(t, 30*time.Second, "both nodes ready again, with fresh heartbeats", func() error {
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

// TestDev runs `curator dev`, uses the config it writes, and checks that
// SIGTERM to dev stops every node it started.
func TestDev(t *testing.T) {
	dir := t.TempDir()
	var stdout syncBuffer
	dev := start(t, "dev", filepath.Join(dir, "dev.log"), &stdout,
		"dev", "--managers", "3", "--workers", "2", "--dir", dir, "--addresses", "127.0.203.10-127.0.203.40")
	eventually(t, 3*time.Minute, "dev prints the node table and how to use it", func() error {
		if dev.exited() {
			t.Fatalf("dev exited: %v", dev.err)
		}
		if !strings.Contains(stdout.String(), "export CURATOR_CONFIG=") {
			return errors.New("not yet")
		}
		return nil
	})
	out := stdout.String()
	names := []string{"manager-1", "manager-2", "manager-3", "worker-1", "worker-2"}
	for _, name := range names {
		if !strings.Contains(out, name) {
			t.Errorf("dev's output has no %s:\n%s", name, out)
		}
	}
	config := filepath.Join(dir, "config.yaml")
	if !strings.Contains(out, "export CURATOR_CONFIG="+config) {
		t.Errorf("dev's output does not say export CURATOR_CONFIG=%s:\n%s", config, out)
	}
	// The commands dev prints work when pasted into a shell, with no
	// curator on the PATH (this binary is a build of the test's own).
	lines := strings.Split(out, "\n")
	if i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "export CURATOR_CONFIG=") }); i < 0 || i+1 >= len(lines) {
		t.Errorf("dev's output has no export line and command after it:\n%s", out)
	} else {
		script := strings.TrimSpace(lines[i]) + "\n" + strings.TrimSpace(lines[i+1])
		sh := exec.Command("sh", "-c", script)
		sh.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
		pasted, err := sh.CombinedOutput()
		if err != nil || !strings.Contains(string(pasted), "manager-1") {
			t.Errorf("the commands dev printed, pasted into a shell:\n%s\nfailed (%v):\n%s", script, err, pasted)
		}
	}
	nodes, err := nodeLs(t, config)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 5 {
		t.Errorf("%d nodes, want 5: %+v", len(nodes), nodes)
	}
	if err := allReady(nodes, names...); err != nil {
		t.Error(err)
	}
	for _, name := range names {
		dumpOnFailure(t, name, filepath.Join(dir, "nodes", name, "agent.log"))
	}

	stopDev(t, dev, len(names))

	// Run again on the same dir: dev restarts the same nodes from disk.
	stdout = syncBuffer{}
	dev = start(t, "dev again", filepath.Join(dir, "dev.log"), &stdout, "dev", "--dir", dir, "--addresses", "127.0.203.10-127.0.203.40")
	eventually(t, 2*time.Minute, "dev restarts the cluster and prints the table", func() error {
		if dev.exited() {
			t.Fatalf("dev exited: %v", dev.err)
		}
		if !strings.Contains(stdout.String(), "export CURATOR_CONFIG=") {
			return errors.New("not yet")
		}
		return nil
	})
	again, err := nodeLs(t, config)
	if err != nil {
		t.Fatal(err)
	}
	if err := allReady(again, names...); err != nil {
		t.Error(err)
	}
	for _, n := range nodes {
		if a, _ := byName(again, n.Name); a.ID != n.ID {
			t.Errorf("%s has ID %q after dev restarted it, %q before", n.Name, a.ID, n.ID)
		}
	}
	stopDev(t, dev, len(names))
}

// stopDev sends SIGTERM to dev, waits for it, and checks that none of its
// nodes listens any more on any of its ports.
func stopDev(t *testing.T, dev *proc, nodes int) {
	t.Helper()
	began := time.Now()
	if err := dev.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := dev.wait(t, 30*time.Second); err != nil {
		t.Errorf("dev after SIGTERM: %v, want exit status 0", err)
	}
	t.Logf("dev stopped %d nodes in %s", nodes, time.Since(began).Round(time.Millisecond))
	for i := range nodes {
		for p := port; p < port+4; p++ {
			addr := fmt.Sprintf("127.0.203.%d:%d", 10+i, p)
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
				t.Errorf("%s still accepts connections after dev stopped", addr)
			}
		}
	}
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

	t.Run("node ls -o yaml", func(t *testing.T) {
		_, stderr, err := cli(t, "--config", c.config, "node", "ls", "-o", "yaml")
		if err == nil {
			t.Fatal("node ls -o yaml succeeded")
		}
		if !strings.Contains(stderr, "yaml") || !strings.Contains(stderr, "json") {
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
