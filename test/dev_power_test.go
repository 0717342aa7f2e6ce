package e2e

import (
	"encoding/json"
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

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/curator"
	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/provider"
)

// TestDevPowerLoss: a power loss (kill -9 of dev and of every agent in one
// go) loses nothing. `curator dev --dir DIR` with no other flag restarts
// the cluster as it was made (one manager, two workers, on its own
// addresses): the same cluster ID, the same nodes, the groups, a label and
// the audit trail, and it says that the nodes died without being stopped;
// a machine that died before its node joined is not started, and its
// group clears it.
// Before, a worker killed by hand while dev ran is replaced by its group,
// which clears its dir once its node is removed (an event says so), and
// it does not come back with the restart. A flag that disagrees with what
// the dir was made with is refused.
func TestDevPowerLoss(t *testing.T) {
	parallel(t) // its own addresses and dirs
	dir := t.TempDir()
	const addresses = "127.0.110.10-127.0.110.30"
	t.Cleanup(func() { stopDevNodes(t, dir) })
	var stdout syncBuffer
	dev := start(t, "dev", filepath.Join(dir, "dev.log"), &stdout, "dev", "--managers", "1", "--workers", "2", "--dir", dir, "--addresses", addresses)
	waitDevUp(t, dev, &stdout, 3*time.Minute)
	config := filepath.Join(dir, "config.yaml")
	testenv.Eventually(t, time.Minute, "three nodes ready", func() error {
		nodes, err := nodeLs(t, config)
		if err != nil {
			return err
		}
		if len(nodes) != 3 {
			return fmt.Errorf("%d nodes", len(nodes))
		}
		return allReady(nodes, nodeNames(nodes)...)
	})

	// A worker killed by hand: its group replaces it, and clears its dir
	// once its node is removed, keeping its log.
	victim := nodeOfGroup(t, config, "workers")
	killInstance(t, victim.InstanceID)
	testenv.Eventually(t, 2*time.Minute, victim.Name+" replaced, its dir cleared", func() error {
		nodes, err := nodeLs(t, config)
		if err != nil {
			return err
		}
		if _, ok := byName(nodes, victim.Name); ok {
			return fmt.Errorf("%s is still listed", victim.Name)
		}
		if len(nodes) != 3 {
			return fmt.Errorf("%d nodes", len(nodes))
		}
		if err := allReady(nodes, nodeNames(nodes)...); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(dir, "instances", victim.InstanceID)); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s's dir is still there (%v)", victim.Name, err)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(dir, "pruned", victim.InstanceID+".log")); err != nil {
		t.Errorf("%s's log is not kept: %v", victim.Name, err)
	}
	evs, err := events(t, config)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs, func(e eventJSON) bool {
		return e.Loop == "groups" && e.Action == "prune-machine" && strings.Contains(e.Reason, victim.InstanceID)
	}) {
		t.Errorf("no groups prune-machine event names %s: %+v", victim.InstanceID, evs)
	}

	// What is to survive: the cluster's ID, its nodes, a label, its
	// groups and its audit trail.
	worker := nodeOfGroup(t, config, "workers")
	if _, _, err := cli(t, "--config", config, "node", "update", worker.Name, "--label-add", "power=kept"); err != nil {
		t.Fatal(err)
	}
	info, err := clusterInfo(t, config)
	if err != nil {
		t.Fatal(err)
	}
	before, err := nodeLs(t, config)
	if err != nil {
		t.Fatal(err)
	}
	trail := auditTrail(t, config)

	// The power loss: dev and every agent, -9, in one command.
	pids := []string{fmt.Sprint(dev.cmd.Process.Pid)}
	out, err := exec.Command("pgrep", "-f", "--", filepath.Join(dir, "instances")+"/").Output()
	if err != nil {
		t.Fatalf("no agent of %s runs: %v", dir, err)
	}
	pids = append(pids, strings.Fields(string(out))...)
	if out, err := exec.Command("kill", append([]string{"-9"}, pids...)...).CombinedOutput(); err != nil {
		t.Fatalf("kill -9 %v: %v: %s", pids, err, out)
	}
	dev.wait(t, 30*time.Second)
	testenv.Eventually(t, 10*time.Second, "every agent gone", func() error {
		if exec.Command("pgrep", "-f", "--", filepath.Join(dir, "instances")+"/").Run() == nil {
			return errors.New("still running")
		}
		return nil
	})
	for _, n := range before {
		if _, err := os.Stat(filepath.Join(dir, "instances", n.InstanceID, "data")); err != nil {
			t.Errorf("%s's data dir after the power loss: %v", n.Name, err)
		}
	}

	// A machine of the workers group that died before its node joined
	// (its data dir holds no node): dev does not start it (agent run
	// would exit at once), and the group clears it.
	never := writeDeadInstance(t, dir, "proc-0000dead", info.ClusterID, "workers", "127.0.110.30:7000")

	// A flag that disagrees with what the dir was made with is refused,
	// and starts nothing.
	_, stderr, err := cli(t, "dev", "--dir", dir, "--managers", "3")
	if want := "--managers 3: " + dir + " holds a dev cluster made with --managers 1"; err == nil || !strings.Contains(stderr, want) {
		t.Errorf("dev --managers 3 on the dir: %v, stderr %q; want a refusal with %q", err, stderr, want)
	}
	if exec.Command("pgrep", "-f", "--", filepath.Join(dir, "instances")+"/").Run() == nil {
		t.Error("a refused dev started nodes")
	}

	// Restarted as an operator would, with no flag but the dir.
	stdout = syncBuffer{}
	dev = start(t, "dev after the power loss", filepath.Join(dir, "dev-again.log"), &stdout, "dev", "--dir", dir)
	waitDevUp(t, dev, &stdout, 3*time.Minute)
	said := readFile(t, filepath.Join(dir, "dev-again.log"))
	for _, want := range []string{
		"4 nodes of " + dir + " died without being stopped (power loss?): starting them again",
		"not starting workers-" + never + ": it never joined",
		"made with --managers 1 --workers 2 --addresses " + addresses,
	} {
		if !strings.Contains(said, want) {
			t.Errorf("dev after the power loss does not say %q:\n%s", want, said)
		}
	}
	testenv.Eventually(t, time.Minute, "the same nodes ready", func() error {
		after, err := nodeLs(t, config)
		if err != nil {
			return err
		}
		if len(after) != len(before) {
			return fmt.Errorf("%d nodes, %d before", len(after), len(before))
		}
		for _, n := range before {
			a, ok := byID(after, n.ID)
			if !ok || a.Name != n.Name || a.Address != n.Address || a.Status != "ready" {
				return fmt.Errorf("%s after the restart: %+v", n.Name, a)
			}
		}
		return nil
	})
	again, err := clusterInfo(t, config)
	if err != nil {
		t.Fatal(err)
	}
	if again.ClusterID != info.ClusterID {
		t.Errorf("cluster ID %s after the restart, %s before", again.ClusterID, info.ClusterID)
	}
	for _, n := range before {
		if !strings.HasPrefix(n.Address, "127.0.110.") {
			t.Errorf("%s is on %s, not on the dir's addresses %s", n.Name, n.Address, addresses)
		}
	}
	groups, err := groupLs(t, config)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int{}
	for _, g := range groups {
		sizes[g.Name] = g.Size
	}
	if diff := cmp.Diff(map[string]int{"managers": 1, "workers": 2}, sizes); diff != "" {
		t.Errorf("group sizes after the restart (-want +got):\n%s", diff)
	}
	listed, _, err := cli(t, "--config", config, "node", "ls", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var labelled []labelledNode
	if err := json.Unmarshal([]byte(listed), &labelled); err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(labelled, func(n labelledNode) bool { return n.Name == worker.Name }); i < 0 || labelled[i].Labels["power"] != "kept" {
		t.Errorf("%s's label power=kept is gone after the restart: %s", worker.Name, listed)
	}
	if now := auditTrail(t, config); len(now) < len(trail) || !cmp.Equal(now[:len(trail)], trail) {
		t.Errorf("the audit trail after the restart has %d entries, %d before, not the same first ones", len(now), len(trail))
	}
	testenv.Eventually(t, time.Minute, "the machine that never joined cleared", func() error {
		if _, err := os.Stat(filepath.Join(dir, "instances", never)); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("its dir is still there (%v)", err)
		}
		return nil
	})
	// The worker its group replaced does not come back.
	if exec.Command("pgrep", "-f", "--", filepath.Join(dir, "instances", victim.InstanceID)+"/").Run() == nil {
		t.Errorf("%s, replaced before the power loss, runs again", victim.Name)
	}
	stopDev(t, dev, addresses, syscall.SIGTERM, 3)
}

// writeDeadInstance writes, in dev's dir, the record of a process
// provider instance id of group that ran (a pid, of a process that has
// exited) and died before its node joined: an empty data dir. It returns
// id.
func writeDeadInstance(t *testing.T, dir, id, clusterID, group, address string) string {
	t.Helper()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	rec, err := json.Marshal(map[string]any{
		"id":      id,
		"labels":  map[string]string{provider.LabelCluster: clusterID, provider.LabelGroup: group, provider.LabelConfigSHA: "0"},
		"address": address,
		"pid":     gone.Process.Pid,
		"args":    []string{"agent", "join"},
		"started": time.Now().UTC(),
		"created": time.Now().UTC(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "instances", id, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "instances", id, "instance.json"), rec, 0o600); err != nil {
		t.Fatal(err)
	}
	return id
}

// labelledNode is a node's name and labels in `node ls -o json`.
type labelledNode struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

// auditTrail is the cluster's audit trail, oldest first.
func auditTrail(t *testing.T, config string) []auditEntryJSON {
	t.Helper()
	out, _, err := cli(t, "--config", config, "audit", "--limit", "0", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var trail []auditEntryJSON
	if err := json.Unmarshal([]byte(out), &trail); err != nil {
		t.Fatalf("audit -o json: %v: %q", err, out)
	}
	if len(trail) == 0 {
		t.Fatal("an empty audit trail")
	}
	return trail
}

// TestDevKeepsACluster: a dir that holds a cluster (its client config, its
// CA, dev's settings) but no node to start is never made into a new
// cluster: dev refuses, saying what is in the dir and what to do, and
// makes nothing.
func TestDevKeepsACluster(t *testing.T) {
	parallel(t) // its own addresses and dirs
	const addresses = "127.0.111.10-127.0.111.20"
	for _, tc := range []struct {
		name  string
		files map[string]string
		flags []string
		want  string
	}{
		{"a client config", map[string]string{"config.yaml": "managers: [127.0.111.10:7000]\n", "ca.crt": "x"}, []string{"--addresses", addresses},
			"holds a cluster (the client config config.yaml, the cluster's CA certificate ca.crt) but no node of it to start"},
		{"dev's settings", map[string]string{"dev.json": `{"managers": 1, "workers": 0, "addresses": "` + addresses + `"}`}, nil,
			"holds a cluster (dev's settings dev.json) but no node of it to start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Cleanup(func() { stopDevNodes(t, dir) })
			for name, data := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, stderr, err := cli(t, append([]string{"dev", "--dir", dir}, tc.flags...)...)
			if err == nil || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "dev does not make a new cluster over it") {
				t.Errorf("dev on a dir with %s: %v, stderr %q; want a refusal with %q", tc.name, err, stderr, tc.want)
			}
			instances, _ := filepath.Glob(filepath.Join(dir, "instances", "*"))
			if len(instances) != 0 {
				t.Errorf("dev made %v", instances)
			}
			if _, err := os.Stat(filepath.Join(dir, "dev.json")); tc.files["dev.json"] == "" && err == nil {
				t.Error("a refused dev wrote its settings")
			}
		})
	}
}

// TestRolloutSurgeOfADeadLeader: a rollout's surge machine that the
// curator leader made just before it died (a fault point), and that
// died before its node joined (a bad template), is found by the next
// leader: a machine-exited event says an earlier leader made it, the
// rollout counts it as its failed machine and rolls back, and the
// machine's dir is cleared with a prune-machine event. Before, the next
// leader removed its dir with a log line only, and the rollout failed
// only on a machine of its own.
func TestRolloutSurgeOfADeadLeader(t *testing.T) {
	parallel(t) // its own addresses and dirs
	bin := faultsBinary(t)
	d := startDevCluster(t, bin, []string{curator.FaultEnv + "=" + curator.FaultRolloutAfterProvision}, "127.0.112.10-127.0.112.40", 3, 0)
	first := d.leader()
	log := keepFile(t, filepath.Join(d.dir, "instances", first.InstanceID, "agent.log"))
	bad, old := d.commitArgs("managers", "[--no-such-flag]")
	var r rolloutStatusJSON
	testenv.Eventually(t, 2*time.Minute, "the rollout failed and rolled back", func() error {
		var err error
		if r, err = rolloutStatus(t, d.config, "managers"); err != nil {
			return err
		}
		if r.TargetSHA != old || r.RollbackOf != bad || r.State != "done" {
			return fmt.Errorf("%+v", r)
		}
		return nil
	})
	if !strings.Contains(log(), "dying at "+curator.FaultRolloutAfterProvision) {
		t.Fatalf("the first leader %s did not die at %s", first.Name, curator.FaultRolloutAfterProvision)
	}
	evs, err := events(t, d.config)
	if err != nil {
		t.Fatal(err)
	}
	// The surge machine the first leader made, and died before it could
	// say so (no provision event names it): the next leader's
	// machine-exited event names it. It says an earlier leader made it
	// when the machine was dead by the next leader's first look; on a
	// busy host the next leader may see it still starting, and then it
	// is a death of its own.
	surge := ""
	for _, e := range evs {
		if e.Loop != "groups" || e.Action != "machine-exited" || e.Leader == first.ID {
			continue
		}
		m := strings.TrimSuffix(strings.Fields(strings.SplitN(e.Reason, "machine ", 2)[1])[0], ",")
		if !slices.ContainsFunc(evs, func(e eventJSON) bool { return e.Action == "provision" && strings.Contains(e.Reason, m) }) {
			surge = m
		}
	}
	if surge == "" {
		t.Fatalf("no machine-exited event of the next leader names a machine no leader said it made: %+v", evs)
	}
	if !slices.ContainsFunc(evs, func(e eventJSON) bool {
		return e.Loop == "groups" && e.Action == "prune-machine" && strings.Contains(e.Reason, surge)
	}) {
		t.Errorf("no groups prune-machine event names %s: %+v", surge, evs)
	}
	if _, err := os.Stat(filepath.Join(d.dir, "instances", surge)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the surge machine's dir is still there (%v)", err)
	}
	if !strings.Contains(r.Reason, surge) {
		t.Errorf("the rollback's reason does not name the dead leader's surge machine %s as the failure: %q", surge, r.Reason)
	}
}
