package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// groupJSON is the part of `group ls -o json` the tests read.
type groupJSON struct {
	Name       string   `json:"name"`
	Size       int      `json:"size"`
	ConfigSHA  string   `json:"config_sha"`
	Machines   int      `json:"machines"`
	Ready      int      `json:"ready"`
	NodeIDs    []string `json:"node_ids"`
	Destroying bool     `json:"destroying"`
	// The rollout's state and progress, as `rollout status` counts it.
	RolloutState   string `json:"rollout_state"`
	RolloutUpdated int    `json:"rollout_updated"`
	RolloutTotal   int    `json:"rollout_total"`
	RepairHeld     string `json:"repair_held"`
	Suspended      string `json:"suspended"`
	// What the group's provider said when it last refused a machine.
	ProviderFailing string `json:"provider_failing"`
	// The group's machines by failure domain.
	DomainMachines map[string]int `json:"domain_machines"`
}

func groupLs(t *testing.T, config string) ([]groupJSON, error) {
	t.Helper()
	out, _, err := cli(t, "--config", config, "group", "ls", "-o", "json")
	if err != nil {
		return nil, err
	}
	var groups []groupJSON
	if err := json.Unmarshal([]byte(out), &groups); err != nil {
		return nil, fmt.Errorf("group ls -o json: %w: %q", err, out)
	}
	return groups, nil
}

// workersFile is a workers group on the process provider, with the
// harness's short timers (the leader marks a node down after 1 s).
func workersFile(size int, addresses, dir string) string {
	return fmt.Sprintf(`name: workers
size: %d
roles: [worker]
provider:
  process:
    addresses: %s
    dir: %s
template:
  version: v1
  labels: {tier: web}
  args: [--heartbeat-interval, 200ms]
`, size, addresses, dir)
}

// TestGroupsScaleAndDestroy commits a workers group on the process
// provider to a one-manager cluster, scales it up and down, and destroys
// it: a bad file changes nothing, describe | commit is a no-op, each step
// shows in the node table, and each action is an event with its reason.
func TestGroupsScaleAndDestroy(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.208.")
	c.init("manager-1", 10)
	dir := t.TempDir()
	t.Cleanup(func() { killInstancesUnder(dir) })
	const addresses = "127.0.208.20-127.0.208.40"
	file := filepath.Join(t.TempDir(), "workers.yaml")
	commit := func(content string) (string, error) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		out, stderr, err := cli(t, "--config", c.config, "group", "commit", file)
		return out + stderr, err
	}
	workers := func(want int) {
		t.Helper()
		testenv.Eventually(t, time.Minute, fmt.Sprintf("%d ready workers of the group, and no other", want), func() error {
			nodes, err := nodeLs(t, c.config)
			if err != nil {
				return err
			}
			var ready, other []string
			for _, n := range nodes {
				switch {
				case n.Group == "workers" && n.Status == "ready":
					ready = append(ready, n.Name)
				case n.Group == "workers":
					other = append(other, n.Name+" "+n.Status)
				}
			}
			if len(ready) != want || len(other) > 0 {
				return fmt.Errorf("ready %v, not ready %v", ready, other)
			}
			groups, err := groupLs(t, c.config)
			if err != nil {
				return err
			}
			if want > 0 && (len(groups) != 1 || groups[0].Machines != want || groups[0].Ready != want) {
				return fmt.Errorf("group ls: %+v", groups)
			}
			return nil
		})
	}

	// A bad file is refused with the field and its line, and changes
	// nothing.
	out, err := commit(strings.Replace(workersFile(2, addresses, dir), "size: 2", "size: two", 1))
	if err == nil || !strings.Contains(out, "line 2: size") || !strings.Contains(out, "nothing was committed") {
		t.Errorf("commit of a bad size: %v\n%s", err, out)
	}
	if groups, err := groupLs(t, c.config); err != nil || len(groups) != 0 {
		t.Errorf("after a bad commit: groups %+v (%v), want none", groups, err)
	}

	if out, err := commit(workersFile(2, addresses, dir)); err != nil || !strings.Contains(out, "Committed group workers") {
		t.Fatalf("commit: %v\n%s", err, out)
	}
	workers(2)
	nodes, err := nodeLs(t, c.config)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Group == "workers" && (n.InstanceID == "" || len(n.ConfigSHA) != 64) {
			t.Errorf("worker %s: instance %q, config SHA %q", n.Name, n.InstanceID, n.ConfigSHA)
		}
	}

	// describe -o yaml | commit - changes nothing.
	described, _, err := cli(t, "--config", c.config, "group", "describe", "workers")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := commit(described); err != nil || !strings.Contains(out, "unchanged") {
		t.Errorf("committing what describe printed: %v\n%s\ndescribe said:\n%s", err, out, described)
	}

	// diff says what a commit would change, roll and destroy, and
	// changes nothing.
	diff := func(args ...string) string {
		t.Helper()
		other := filepath.Join(t.TempDir(), "diff.yaml")
		if err := os.WriteFile(other, []byte(args[len(args)-1]), 0o600); err != nil {
			t.Fatal(err)
		}
		out, stderr, err := cli(t, append(append([]string{"--config", c.config, "group"}, args[:len(args)-1]...), other)...)
		if err != nil {
			t.Fatalf("group %v: %v\n%s%s", args[:len(args)-1], err, out, stderr)
		}
		return out
	}
	if out := diff("diff", workersFile(3, addresses, dir)); !strings.Contains(out, "size: 2 -> 3\n") || !strings.Contains(out, "Rolls: no") || !strings.Contains(out, "Destroys: nothing.") {
		t.Errorf("group diff of a scale up:\n%s", out)
	}
	if out := diff("diff", strings.Replace(workersFile(2, addresses, dir), "version: v1", "version: v2", 1)); !strings.Contains(out, `template.version: "v1" -> "v2"`) || !strings.Contains(out, "Rolls: yes") {
		t.Errorf("group diff of a new version:\n%s", out)
	}
	// A describe goes stale once another commit changes the group: its
	// commit is refused, saying what to do, and --force overrides.
	if out, err := commit(workersFile(3, addresses, dir)); err != nil {
		t.Fatalf("scale up: %v\n%s", err, out)
	}
	workers(3)
	if !strings.HasPrefix(described, "revision: ") {
		t.Fatalf("describe carries no revision:\n%s", described)
	}
	if out := diff("diff", described); !strings.Contains(out, "size: 3 -> 2\n") || !strings.Contains(out, "Stale: the file was read at revision") {
		t.Errorf("group diff of a stale describe:\n%s", out)
	}
	if out, err := commit(described); err == nil || !strings.Contains(out, "changed since this spec was read") || !strings.Contains(out, "group diff") || !strings.Contains(out, "--force") {
		t.Errorf("commit of a stale describe: %v\n%s", err, out)
	}
	if out := diff("commit", "--dry-run", workersFile(1, addresses, dir)); !strings.Contains(out, "Destroys: 2 of the group's 3 machines: the size goes from 3 to 1.") {
		t.Errorf("commit --dry-run of a scale down:\n%s", out)
	}
	workers(3)
	if out := diff("commit", "--force", described); !strings.Contains(out, "Committed group workers: size 2") {
		t.Errorf("commit --force of a stale describe:\n%s", out)
	}
	workers(2)
	if out, err := commit(workersFile(1, addresses, dir)); err != nil {
		t.Fatalf("scale down: %v\n%s", err, out)
	}
	workers(1)

	// Without --yes a destroy is refused, saying so, and changes nothing.
	if out, stderr, err := cli(t, "--config", c.config, "group", "destroy", "workers"); err == nil || !strings.Contains(stderr, "pass --yes") || !strings.Contains(stderr, "nothing was changed") {
		t.Errorf("destroy without --yes: %v\n%s%s; want a refusal asking for --yes", err, out, stderr)
	}
	if groups, err := groupLs(t, c.config); err != nil || len(groups) != 1 || groups[0].Destroying {
		t.Errorf("after a destroy without --yes: %+v (%v)", groups, err)
	}
	if out, stderr, err := cli(t, "--config", c.config, "group", "destroy", "--yes", "workers"); err != nil {
		t.Fatalf("destroy: %v\n%s%s", err, out, stderr)
	}
	testenv.Eventually(t, time.Minute, "the group and its nodes are gone", func() error {
		groups, err := groupLs(t, c.config)
		if err != nil {
			return err
		}
		if len(groups) > 0 {
			return fmt.Errorf("groups %+v", groups)
		}
		nodes, err := nodeLs(t, c.config)
		if err != nil {
			return err
		}
		if len(nodes) != 1 {
			return fmt.Errorf("%d nodes", len(nodes))
		}
		return nil
	})
	evs, err := events(t, c.config)
	if err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"commit-group", "provision", "destroy-machine", "remove-node", "destroy-group", "delete-group"} {
		if !slices.ContainsFunc(evs, func(e eventJSON) bool { return e.Loop == "groups" && e.Action == action && e.Reason != "" }) {
			t.Errorf("no groups %s event: %+v", action, evs)
		}
	}
}

// TestGroupDestroyKeepsQuorum: destroying the group that holds every voter
// is refused, with what to do, and changes nothing.
func TestGroupDestroyKeepsQuorum(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.209.")
	// The first node is the group's too: the group holds every voter.
	c.init("manager-1", 10, "--group", "managers")
	dir := t.TempDir()
	t.Cleanup(func() { killInstancesUnder(dir) })
	file := filepath.Join(t.TempDir(), "managers.yaml")
	spec := fmt.Sprintf(`name: managers
size: 2
roles: [consensus]
provider:
  process: {addresses: 127.0.209.20-127.0.209.30, dir: %s}
template:
  args: [--heartbeat-interval, 200ms, --election-ttl, 2s]
`, dir)
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, stderr, err := cli(t, "--config", c.config, "group", "commit", file); err != nil {
		t.Fatalf("commit: %v\n%s%s", err, out, stderr)
	}
	testenv.Eventually(t, 2*time.Minute, "two voters, both the group's", func() error {
		info, err := clusterInfo(t, c.config)
		if err != nil {
			return err
		}
		if len(info.Voters) != 2 {
			return fmt.Errorf("voters %v, learners %v", info.Voters, info.Learners)
		}
		return nil
	})
	// Every voter is the group's: without them none would be left.
	out, stderr, err := cli(t, "--config", c.config, "group", "destroy", "managers", "--yes")
	if err == nil || !strings.Contains(stderr, "would destroy the cluster") || !strings.Contains(stderr, "commit another group") {
		t.Errorf("destroying the voters' group: %v\n%s%s", err, out, stderr)
	}
	groups, err := groupLs(t, c.config)
	if err != nil || len(groups) != 1 || groups[0].Destroying {
		t.Errorf("after a refused destroy: %+v (%v)", groups, err)
	}
}

// killInstancesUnder kills every process of an instance in dir/instances,
// again until none is left: a leader that is being killed may have started
// one more machine a moment before.
func killInstancesUnder(dir string) {
	pattern := dir + "/instances/"
	for range 50 {
		exec.Command("pkill", "-9", "-f", "--", pattern).Run()
		time.Sleep(100 * time.Millisecond)
		if exec.Command("pgrep", "-f", "--", pattern).Run() != nil {
			return // none left
		}
	}
}

// TestGroupCrashLoopBackoff commits a workers group whose machines exit at
// once (an argument the agent does not know): each death is an event with
// the agent's last words, the group's provisions are held back 1 s, 2 s,
// 4 s... after each (not one made every tick), and committing the fixed
// file (a new config SHA) ends the backoff and the worker joins.
func TestGroupCrashLoopBackoff(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.215.")
	c.init("manager-1", 10)
	dir := t.TempDir()
	t.Cleanup(func() { killInstancesUnder(dir) })
	const addresses = "127.0.215.20-127.0.215.40"
	file := filepath.Join(t.TempDir(), "workers.yaml")
	commit := func(content string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, stderr, err := cli(t, "--config", c.config, "group", "commit", file); err != nil {
			t.Fatalf("commit: %v\n%s%s", err, out, stderr)
		}
	}
	good := workersFile(1, addresses, dir)
	commit(strings.Replace(good, "args: [--heartbeat-interval, 200ms]", "args: [--no-such-flag]", 1))

	var exited, provisioned []eventJSON
	testenv.Eventually(t, time.Minute, "four machines of the group dead before joining", func() error {
		evs, err := events(t, c.config)
		if err != nil {
			return err
		}
		exited, provisioned = nil, nil
		for _, e := range evs {
			switch {
			case e.Loop == "groups" && e.Action == "machine-exited":
				exited = append(exited, e)
			case e.Loop == "groups" && e.Action == "provision":
				provisioned = append(provisioned, e)
			}
		}
		if len(exited) < 4 {
			return fmt.Errorf("%d machine-exited events", len(exited))
		}
		return nil
	})
	byTime := func(a, b eventJSON) int { return a.Time.Compare(*b.Time) }
	slices.SortFunc(exited, byTime)
	slices.SortFunc(provisioned, byTime)
	for i, e := range exited {
		for _, want := range []string{fmt.Sprintf("(%d in a row)", i+1), fmt.Sprintf("the next is made in %v", time.Second<<i), `its last words: Error: unknown flag: --no-such-flag`} {
			if !strings.Contains(e.Reason, want) {
				t.Errorf("death %d: reason %q lacks %q", i+1, e.Reason, want)
			}
		}
		// The next provision waits for the backoff (the event is
		// recorded a moment after the death was seen).
		for _, p := range provisioned {
			if p.Time.After(*e.Time) {
				if gap := p.Time.Sub(*e.Time); gap < time.Second<<i-100*time.Millisecond {
					t.Errorf("death %d: the next machine made %v after it, before the %v backoff", i+1, gap, time.Second<<i)
				}
				break
			}
		}
	}
	// Without the backoff a machine is made every tick: dozens by now.
	if len(provisioned) > len(exited)+1 {
		t.Errorf("%d machines made for %d deaths", len(provisioned), len(exited))
	}
	if t.Failed() {
		t.Logf("deaths %+v\nprovisions %+v", exited, provisioned)
	}

	// The fix, committed, is made at once: its worker joins.
	commit(good)
	testenv.Eventually(t, 30*time.Second, "the fixed group's worker ready", func() error {
		nodes, err := nodeLs(t, c.config)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.Group == "workers" && n.Status == "ready" {
				return nil
			}
		}
		return fmt.Errorf("nodes %+v", nodes)
	})
}
