package e2e

import (
	"errors"
	"fmt"
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
)

// execGroup is a workers group on the exec plugin at plugin, whose test
// scripts (testdata/exec) run each machine as a local agent process,
// kept under state, on the addresses given.
func execGroup(plugin, state, addresses string) string {
	scripts, _ := filepath.Abs("testdata/exec")
	return fmt.Sprintf(`name: exec
size: 2
roles: [worker]
replace_after: 10s
provider:
  plugin:
    path: %s
    config:
      provision: %s/provision
      destroy: %s/destroy
      list: %s/list
      last-words: %s/last-words
      state: %s
      program: %s
      addresses: "%s"
      timeout: 5s
template:
  version: v1
  args: [--heartbeat-interval, 200ms]
`, plugin, scripts, scripts, scripts, scripts, state, binary, addresses)
}

// execMachines are the machines recorded under state (the test scripts'
// dirs with an address).
func execMachines(state string) []string {
	addrs, _ := filepath.Glob(filepath.Join(state, "*", "address"))
	var ids []string
	for _, a := range addrs {
		ids = append(ids, filepath.Base(filepath.Dir(a)))
	}
	return ids
}

// killExecMachine kills (-9) the session of machine id under state.
func killExecMachine(t *testing.T, state, id string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, id, "pid"))
	if err != nil {
		t.Fatalf("machine %s: %v", id, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill machine %s: %v", id, err)
	}
}

// TestExecPluginGroup: a group on the exec plugin, whose scripts make its
// machines as local agent processes, is refused on commit while the
// plugin refuses its config; then it is made, and kept at its size
// through a kill -9 of a machine, a kill -9 of the curator leader (the
// next leader starts its own plugin and finds the machines by their
// labels: nothing is made twice), a kill -9 of the plugin (started again,
// the group said why), and a plugin that hangs (stopped at its timeout,
// named in `group ls` until it answers again).
func TestExecPluginGroup(t *testing.T) {
	parallel(t) // its own addresses and dirs
	plugin := filepath.Join(t.TempDir(), "curator-provider-exec")
	if err := testenv.GoBuild(plugin, "./cmd/curator-provider-exec"); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	t.Cleanup(func() {
		for _, id := range execMachines(state) {
			if b, err := os.ReadFile(filepath.Join(state, id, "pid")); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					syscall.Kill(-pid, syscall.SIGKILL)
				}
			}
		}
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(state, "*", "agent.log"))
			for _, l := range logs {
				dumpLog(t, &proc{name: filepath.Base(filepath.Dir(l)), log: l})
			}
		}
	})
	d := startDevCluster(t, binary, nil, "127.0.30.10-127.0.30.19", 3, 0)
	group := execGroup(plugin, state, "127.0.30.50:7000 127.0.30.51:7000 127.0.30.52:7000 127.0.30.53:7000 127.0.30.54:7000")

	// A config the plugin refuses (a script missing) is refused on
	// commit, with the plugin's reason, and makes nothing.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(group, "      destroy: ", "      destroy-typo: ", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := cli(t, "--config", d.config, "group", "commit", bad)
	if err == nil || !strings.Contains(stderr, "refused its config: config: destroy: the script is required") {
		t.Errorf("commit of a config without a destroy script: %v\n%s%s", err, out, stderr)
	}
	if _, err := groupNamed(t, d.config, "exec"); err == nil {
		t.Error("a refused commit made the group")
	}

	d.commitText("exec", group)

	// atSize waits until the group has two ready workers, none of them
	// gone, and two machines: it returns them.
	atSize := func(what string, gone ...string) []nodeJSON {
		t.Helper()
		var ws []nodeJSON
		testenv.Eventually(t, 2*time.Minute, what, func() error {
			var err error
			if ws, err = readyOf(t, d.config, "exec", ""); err != nil {
				return err
			}
			for _, w := range ws {
				if slices.Contains(gone, w.InstanceID) {
					return fmt.Errorf("%s still ready", w.Name)
				}
			}
			if len(ws) != 2 {
				return fmt.Errorf("%d ready", len(ws))
			}
			if ms := execMachines(state); len(ms) != 2 {
				return fmt.Errorf("machines %v", ms)
			}
			return nil
		})
		return ws
	}
	ws := atSize("the exec group made")
	for _, w := range ws {
		if !strings.HasPrefix(w.InstanceID, "exec-") {
			t.Errorf("worker %s has instance %q, want one the exec plugin named", w.Name, w.InstanceID)
		}
	}

	// A machine killed: replaced.
	killExecMachine(t, state, ws[0].InstanceID)
	ws = atSize("the killed machine replaced", ws[0].InstanceID)

	// The curator leader killed: the next one runs the group on.
	l := d.leader()
	killInstance(t, l.InstanceID)
	t.Logf("killed the curator leader %s", l.Name)
	testenv.Eventually(t, time.Minute, "another curator leader", func() error {
		if n := d.leader(); n.Name == l.Name {
			return errors.New("the old one still")
		}
		return nil
	})
	killExecMachine(t, state, ws[0].InstanceID)
	ws = atSize("a machine killed after the leader replaced by the next", ws[0].InstanceID)

	// The plugin killed: the group says so, it is started again, and the
	// group goes on.
	if err := exec.Command("pkill", "-9", "-f", "--", plugin).Run(); err != nil {
		t.Fatalf("pkill the plugin: %v", err)
	}
	testenv.Eventually(t, time.Minute, "an event that the plugin exited", func() error {
		evs, err := eventsOf(t, d.config, "refuse", "group exec: its provider does not answer: provider plugin "+plugin+" exited")
		if err != nil || len(evs) == 0 {
			return fmt.Errorf("none yet (%v)", err)
		}
		return nil
	})
	killExecMachine(t, state, ws[1].InstanceID)
	ws = atSize("a machine killed after the plugin replaced", ws[1].InstanceID)

	// The plugin hangs (its list script does not return): stopped at its
	// timeout, named in group ls; then it answers again.
	if err := os.WriteFile(filepath.Join(state, "hang"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "group ls names the hung plugin", func() error {
		out, _, err := cli(t, "--config", d.config, "group", "ls")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "Group exec is failing: group exec: its provider does not answer: provider plugin "+plugin+" did not answer list within 5s (timeout)") {
			return errors.New(out)
		}
		return nil
	})
	if err := os.Remove(filepath.Join(state, "hang")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the group no longer failing", func() error {
		g, err := groupNamed(t, d.config, "exec")
		if err != nil {
			return err
		}
		if g.ProviderFailing != "" {
			return errors.New(g.ProviderFailing)
		}
		return nil
	})
	killExecMachine(t, state, ws[0].InstanceID)
	atSize("a machine killed after the hang replaced", ws[0].InstanceID)
}
