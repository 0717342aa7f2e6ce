package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// The refusal an old manager gets after a recovery (store.Recover).
const refusedAfterRecovery = "was a manager when the cluster was recovered without it"

// TestForceNewCluster: three managers and two workers; two managers are
// killed for good, and the third is restarted with --force-new-cluster.
// Every record is still there, the dead managers lose their role and show
// down, two new managers join and make three healthy voters again, the
// cluster takes writes, and the old managers that come back are refused
// with what to do, without splitting the cluster.
func TestForceNewCluster(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.160.")
	c.build(3, 2)
	all := []string{"manager-1", "manager-2", "manager-3", "worker-1", "worker-2"}
	c.waitReady(60*time.Second, all...)
	ids := mgmtIDs(t, c, all...)

	began := time.Now()
	for _, name := range []string{"manager-2", "manager-3"} {
		p := c.nodes[name].proc
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-p.done
	}
	survivor := c.nodes["manager-1"]
	if err := survivor.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = survivor.proc.wait(t, 30*time.Second)

	c.agent("manager-1", "run", "--force-new-cluster")
	testenv.Eventually(t, 60*time.Second, "every record; the dead managers down without a role", func() error {
		nodes, err := nodeLs(t, c.config)
		if err != nil {
			return err
		}
		if err := allReady(nodes, "manager-1", "worker-1", "worker-2"); err != nil {
			return err
		}
		for _, name := range []string{"manager-2", "manager-3"} {
			n, ok := byName(nodes, name)
			if !ok {
				return fmt.Errorf("%s: no record", name)
			}
			if n.Status != "down" || slices.Contains(n.Roles, "consensus") {
				return fmt.Errorf("%s: %s, roles %v", name, n.Status, n.Roles)
			}
		}
		return nil
	})
	t.Logf("recovered with every record in %s", time.Since(began).Round(time.Millisecond))

	token := c.token("manager")
	c.join("manager-4", 15, token, survivor)
	c.join("manager-5", 16, token, survivor)
	testenv.Eventually(t, 90*time.Second, "three healthy voters again", func() error {
		info, err := clusterInfo(t, c.config)
		if err != nil {
			return err
		}
		if len(info.Voters) != 3 || !info.QuorumHealthy {
			return fmt.Errorf("voters %v, quorum healthy %v", info.Voters, info.QuorumHealthy)
		}
		return nil
	})
	t.Logf("three voters again %s after the kill", time.Since(began).Round(time.Millisecond))
	if _, _, err := cli(t, "--config", c.config, "node", "update", "worker-1", "--label-add", "recovered=yes"); err != nil {
		t.Fatalf("a write after the recovery: %v", err)
	}

	// The old managers come back: refused, saying what to do; the
	// cluster keeps its three voters.
	info, err := clusterInfo(t, c.config)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"manager-2", "manager-3"} {
		c.agent(name, "run")
	}
	for _, name := range []string{"manager-2", "manager-3"} {
		log := c.nodes[name].proc.log
		testenv.Eventually(t, 30*time.Second, name+" is refused and told to wipe and join again", func() error {
			data, err := os.ReadFile(log)
			if err != nil {
				return err
			}
			for _, want := range []string{refusedAfterRecovery, "curator agent join"} {
				if !strings.Contains(string(data), want) {
					return fmt.Errorf("its log does not say %q yet", want)
				}
			}
			return nil
		})
	}
	time.Sleep(3 * time.Second)
	after, err := clusterInfo(t, c.config)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sorted(after.Voters), sorted(info.Voters)) || !after.QuorumHealthy {
		t.Errorf("voters %v (quorum healthy %v) after the old managers came back, want %v", after.Voters, after.QuorumHealthy, info.Voters)
	}
	nodes, err := nodeLs(t, c.config)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"manager-2", "manager-3"} {
		if n, _ := byName(nodes, name); n.Status == "ready" || n.ID != ids[name] {
			t.Errorf("%s after it came back: %+v, want its old record, not ready", name, n)
		}
	}
}

// TestBackupRestore: a backup of a cluster of three managers and a worker,
// every manager's data dir wiped, and a restore at the first manager's
// address: every record is there, the worker (left running) finds the
// cluster again, and a damaged or truncated backup is refused and changes
// nothing.
func TestBackupRestore(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.161.")
	c.build(3, 1)
	all := []string{"manager-1", "manager-2", "manager-3", "worker-1"}
	c.waitReady(60*time.Second, all...)
	ids := mgmtIDs(t, c, all...)

	backup := filepath.Join(t.TempDir(), "cluster.backup")
	out, _, err := cli(t, "--config", c.config, "cluster", "backup", backup)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "sha256 ") {
		t.Errorf("backup says %q, want its checksum", out)
	}
	fi, err := os.Stat(backup)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("backup mode %v, want 0600", fi.Mode().Perm())
	}
	if _, stderr, err := cli(t, "--config", c.config, "cluster", "backup", backup); err == nil || !strings.Contains(stderr, "never overwrites") {
		t.Errorf("a backup over an existing file: %v, %q", err, stderr)
	}

	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	flipped := slices.Clone(data)
	flipped[len(flipped)/2] ^= 0xff
	for name, bad := range map[string][]byte{"truncated": data[:len(data)-4096], "flipped": flipped, "empty": nil} {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "restore-"+name)
		_, stderr, err := cli(t, "agent", "restore", "--data-dir", dir, "--listen", c.addr(30), "--from", path)
		if err == nil || !strings.Contains(stderr, "damaged") || !strings.Contains(stderr, "nothing was changed") {
			t.Errorf("restore of a %s backup: %v, stderr %q", name, err, stderr)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("restore of a %s backup left %s behind: %v", name, dir, err)
		}
	}

	// The managers are lost; the worker keeps running.
	first := c.nodes["manager-1"].listen
	for _, name := range []string{"manager-1", "manager-2", "manager-3"} {
		n := c.nodes[name]
		if err := n.proc.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-n.proc.done
		if err := os.RemoveAll(n.dataDir); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	restored := c.agent("restored", "restore", "--listen", first, "--from", backup, "--name", "restored")
	restored.listen = first
	c.config = filepath.Join(restored.dataDir, "admin", "config.yaml")
	testenv.Eventually(t, 60*time.Second, "every record, the worker found again", func() error {
		nodes, err := nodeLs(t, c.config)
		if err != nil {
			return err
		}
		if err := allReady(nodes, "restored", "worker-1"); err != nil {
			return err
		}
		for _, name := range []string{"manager-2", "manager-3"} {
			n, ok := byName(nodes, name)
			if !ok || n.ID != ids[name] {
				return fmt.Errorf("%s: no record", name)
			}
			if slices.Contains(n.Roles, "consensus") {
				return fmt.Errorf("%s: roles %v", name, n.Roles)
			}
		}
		if _, ok := byName(nodes, "manager-1"); ok {
			return errors.New("manager-1's record is still there: the restored node took its address")
		}
		return nil
	})
	t.Logf("restored, the worker back, in %s", time.Since(began).Round(time.Millisecond))
	info, err := clusterInfo(t, c.config)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Voters) != 1 || info.Names[info.Voters[0]] != "restored" {
		t.Errorf("voters %v, want the restored node alone", info.Voters)
	}
	// A restore into a data dir that holds a node is refused.
	if _, stderr, err := cli(t, "agent", "restore", "--data-dir", restored.dataDir, "--listen", c.addr(31), "--from", backup); err == nil || !strings.Contains(stderr, "holds node") {
		t.Errorf("restore over a node: %v, %q", err, stderr)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestForceNewClusterGroups: the same disaster on a cluster whose managers
// are a group (`curator dev`, process provider), recovered the way its
// operator would. Two manager instances are killed with -9 for good
// (nothing restarts them: their instances stay, dead); dev is stopped (it
// stops the survivor and the worker and keeps them) and started again on
// its dir with --force-new-cluster, which restarts the one manager left on
// its own instance with `agent run --force-new-cluster`, and does not
// start the dead ones. Every record is still there; the managers group
// replaces the two dead machines by itself (their records removed, then
// their dirs, two new machines made and promoted) until there are three
// healthy voters again; and a rollout of the managers group then finishes.
func TestForceNewClusterGroups(t *testing.T) {
	parallel(t) // its own addresses and dirs
	const addresses = "127.0.162.10-127.0.162.40"
	d := startDevCluster(t, binary, nil, addresses, 3, 1)
	// Three voters before the disaster: dev is up once its nodes are
	// ready, and a manager that joined last may still be a learner,
	// whose data is no survivor's (etcd refuses to force a new cluster
	// from it).
	var managers []nodeJSON
	testenv.Eventually(t, time.Minute, "three managers, all healthy voters", func() error {
		nodes, err := nodeLs(t, d.config)
		if err != nil {
			return err
		}
		info, err := clusterInfo(t, d.config)
		if err != nil {
			return err
		}
		managers = nil
		for _, n := range nodes {
			if n.Group == "managers" && n.Status == "ready" && slices.Contains(info.Voters, n.ID) {
				managers = append(managers, n)
			}
		}
		if len(managers) != 3 || !info.QuorumHealthy {
			return fmt.Errorf("voters %v, learners %v", info.Voters, info.Learners)
		}
		return nil
	})
	survivor, dead := managers[0], managers[1:]

	began := time.Now()
	for _, n := range dead {
		killInstance(t, n.InstanceID)
	}
	// Dead before dev stops: dev stops (and keeps, for its next start)
	// whatever still runs when it ends.
	for _, n := range dead {
		testenv.Eventually(t, 10*time.Second, n.Name+"'s process is gone", func() error {
			if exec.Command("pgrep", "-f", "--", "/instances/"+n.InstanceID+"/data").Run() == nil {
				return errors.New("still running")
			}
			return nil
		})
	}
	d.stop()
	t.Logf("two managers killed, dev stopped in %s", time.Since(began).Round(time.Millisecond))
	d = startDevIn(t, binary, nil, d.dir, addresses, 3, 1, "--force-new-cluster")
	for _, x := range dead {
		if exec.Command("pgrep", "-f", "--", "/instances/"+x.InstanceID+"/data").Run() == nil {
			t.Errorf("the dead manager %s was started again", x.Name)
		}
	}
	testenv.Eventually(t, time.Minute, "every record after the forced new cluster", func() error {
		nodes, err := nodeLs(t, d.config)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.ID == survivor.ID && n.Status != "ready" {
				return fmt.Errorf("the survivor %s is %s", n.Name, n.Status)
			}
		}
		for _, x := range append(slices.Clone(dead), survivor) {
			if _, ok := byID(nodes, x.ID); !ok {
				return fmt.Errorf("%s: no record", x.Name)
			}
		}
		return nil
	})
	t.Logf("recovered with every record in %s", time.Since(began).Round(time.Millisecond))

	testenv.Eventually(t, 3*time.Minute, "the group replaces the dead managers: three healthy voters of the group", func() error {
		nodes, err := nodeLs(t, d.config)
		if err != nil {
			return err
		}
		for _, x := range dead {
			if _, ok := byID(nodes, x.ID); ok {
				return fmt.Errorf("%s's record is still there", x.Name)
			}
			// Its record gone, the group clears its dir.
			if _, err := os.Stat(filepath.Join(d.dir, "instances", x.InstanceID)); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("the dead manager %s's dir is still there (%v)", x.Name, err)
			}
		}
		info, err := clusterInfo(t, d.config)
		if err != nil {
			return err
		}
		if len(info.Voters) != 3 || !info.QuorumHealthy {
			return fmt.Errorf("voters %v, learners %v, quorum healthy %v", info.Voters, info.Learners, info.QuorumHealthy)
		}
		for _, id := range info.Voters {
			n, ok := byID(nodes, id)
			if !ok || n.Group != "managers" || n.Status != "ready" {
				return fmt.Errorf("voter %s: %+v", id, n)
			}
		}
		return nil
	})
	t.Logf("three healthy voters again %s after the kill", time.Since(began).Round(time.Millisecond))
	// The recovery and the group's repair, each an event with its reason:
	// the dead managers refused, then their records removed by the
	// managers group and two machines made.
	evs, err := events(t, d.config)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs, func(e eventJSON) bool {
		return e.Loop == "recovery" && e.Action == "recover" && e.NodeID == survivor.ID &&
			strings.Contains(e.Reason, dead[0].ID) && strings.Contains(e.Reason, dead[1].ID)
	}) {
		t.Errorf("no recovery event naming the dead managers: %+v", evs)
	}
	for _, x := range dead {
		if !slices.ContainsFunc(evs, func(e eventJSON) bool {
			return e.Loop == "groups" && e.Action == "remove-node" && e.NodeID == x.ID
		}) {
			t.Errorf("the managers group did not remove %s's record: %+v", x.Name, evs)
		}
	}
	if n := countEvents(evs, func(e eventJSON) bool {
		return e.Loop == "groups" && e.Action == "provision" && strings.Contains(e.Reason, "group managers has 1 of 3")
	}); n < 1 {
		t.Errorf("the managers group made no machine for the dead ones: %+v", evs)
	}

	rolled := time.Now()
	sha := d.commitVersion("managers", "v2")
	r := d.waitRollout("managers", "done", 4*time.Minute)
	if r.TargetSHA != sha || r.Updated != 3 || r.Total != 3 {
		t.Errorf("rollout %+v, want 3 of 3 updated to %s", r, sha)
	}
	d.waitManagersOn(sha, time.Minute)
	t.Logf("rolled the managers in %s after the recovery", time.Since(rolled).Round(time.Millisecond))
}

// countEvents counts the events that match.
func countEvents(evs []eventJSON, match func(eventJSON) bool) int {
	n := 0
	for _, e := range evs {
		if match(e) {
			n++
		}
	}
	return n
}
