package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/providertest"
)

// scriptsDir holds the exec plugin's scripts the tests run (machines as
// local processes), which the end-to-end tests run too.
func scriptsDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../test/testdata/exec")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// execConfig is the Config of the exec plugin on the test scripts, their
// machines kept under state, each a shell that sleeps.
func execConfig(t *testing.T, state string) Config {
	t.Helper()
	dir := scriptsDir(t)
	return Config{
		Path: execPlugin,
		Config: map[string]string{
			"provision": filepath.Join(dir, "provision"), "destroy": filepath.Join(dir, "destroy"),
			"list": filepath.Join(dir, "list"), "last-words": filepath.Join(dir, "last-words"),
			"state": state, "program": "/bin/sh",
			"addresses": "127.0.100.40:7000 127.0.100.41:7000 127.0.100.42:7000 127.0.100.43:7000 127.0.100.44:7000",
		},
		Timeout:    5 * time.Second,
		MinBackoff: 50 * time.Millisecond,
		Logger:     zaptest.NewLogger(t),
	}
}

// newExec returns the Provider of cfg, closed when the test ends.
func newExec(t *testing.T, cfg Config) *Provider {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// sleeperSpec is a machine that says its ID, address and data dir, and
// sleeps; env is added to its environment.
func sleeperSpec(labels, env map[string]string) provider.Spec {
	return provider.Spec{Labels: labels, Env: env,
		Args: []string{"-c", `echo "machine $1 at $2 in $3"; exec sleep 300`, "sh", "{{instance-id}}", "{{address}}", "{{data-dir}}"}}
}

// killMachines kills what the test's machines left running.
func killMachines(state string) {
	pids, _ := filepath.Glob(filepath.Join(state, "*", "pid"))
	for _, f := range pids {
		b, _ := os.ReadFile(f)
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 0 {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

// TestContract: the exec plugin, run by the leader's side of this
// package, meets the contract of every provider; a Provision whose
// plugin hangs once the machine is made (its provision script does not
// return) leaves a machine List finds, once the plugin was stopped and
// started again.
func TestContract(t *testing.T) {
	state := t.TempDir()
	t.Cleanup(func() { killMachines(state) })
	cfg := execConfig(t, state)
	providertest.Contract(t, providertest.Harness{
		New:      func(t *testing.T) provider.Provider { return newExec(t, cfg) },
		Spec:     func(labels map[string]string) provider.Spec { return sleeperSpec(labels, nil) },
		Capacity: 5,
		Orphan: func(t *testing.T, p provider.Provider, spec provider.Spec) string {
			spec.Env = map[string]string{"EXEC_TEST_HANG_AFTER_MAKE": "1"}
			before := listIDs(t, state)
			_, err := p.Provision(context.Background(), spec)
			if err == nil || !strings.Contains(err.Error(), "did not answer provision") {
				t.Fatalf("Provision with a plugin that hangs: %v; want it stopped for not answering", err)
			}
			after := listIDs(t, state)
			for id := range after {
				if !before[id] {
					return id
				}
			}
			t.Fatalf("the hung provision made no machine dir under %s", state)
			return ""
		},
	})
}

// listIDs are the machine dirs under state.
func listIDs(t *testing.T, state string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, n := range testenv.DirNames(t, state) {
		out[n] = true
	}
	return out
}

// TestProvisionContract: what the provision script is given (the agent's
// arguments with the instance ID, its environment beside the contract's
// variables) and what Provision returns of what it printed.
func TestProvisionContract(t *testing.T) {
	state := t.TempDir()
	t.Cleanup(func() { killMachines(state) })
	p := newExec(t, execConfig(t, state))
	labels := map[string]string{provider.LabelCluster: "c", provider.LabelGroup: "g"}
	spec := sleeperSpec(labels, map[string]string{"CURATOR_JOIN_TOKEN": "CUR1-secret"})
	spec.Domain = "rack-2"
	in := providertest.Provision(t, p, spec)
	if !strings.HasPrefix(in.ID, "exec-") || in.Address != "127.0.100.40:7000" || in.Domain != "rack-2" {
		t.Errorf("Provision = %+v, want an exec- ID at the first address, in domain rack-2", in)
	}
	log := filepath.Join(state, in.ID, "agent.log")
	want := "machine " + in.ID + " at 127.0.100.40:7000 in " + filepath.Join(state, in.ID, "data")
	testenv.Eventually(t, 10*time.Second, "the machine's first line", func() error {
		b, _ := os.ReadFile(log)
		if !strings.Contains(string(b), want) {
			return errors.New(string(b))
		}
		return nil
	})
	if w, err := p.LastWords(context.Background(), in.ID); err != nil || w != want {
		t.Errorf("LastWords = %q, %v; want %q", w, err, want)
	}
	listed := providertest.List(t, p, labels)
	if len(listed) != 1 || listed[0].Domain != "rack-2" || listed[0].Address != in.Address {
		t.Errorf("List = %+v", listed)
	}
}

// TestConfigRefused: a config the plugin refuses (a script missing) fails
// each call with the plugin's reason, and the plugin is not run again
// before its backoff.
func TestConfigRefused(t *testing.T) {
	cfg := execConfig(t, t.TempDir())
	delete(cfg.Config, "destroy")
	cfg.Config["list"] = "/no/such/list"
	p := newExec(t, cfg)
	_, err := p.List(context.Background(), nil)
	for _, want := range []string{"provider plugin " + execPlugin + " refused its config", "destroy: the script is required", "list: stat /no/such/list: no such file or directory", "it is started again"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("List with a bad config: %v; want %q", err, want)
		}
	}
}

// TestNotAPlugin: an executable that is not a plugin is refused with
// why, as is a plugin run by hand.
func TestNotAPlugin(t *testing.T) {
	p := newExec(t, Config{Path: "/bin/true", Timeout: 5 * time.Second})
	if _, err := p.List(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "could not start") {
		t.Errorf("List of /bin/true as a plugin: %v", err)
	}
	out, err := exec.Command(execPlugin).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "This binary is a plugin") {
		t.Errorf("the exec plugin run by hand: %v\n%s", err, out)
	}
}

// TestCrashRestarts: a plugin killed (-9) is found exited at the next
// call, which fails saying so; after the backoff the next call starts it
// again and finds the machines, which outlived it.
func TestCrashRestarts(t *testing.T) {
	state := t.TempDir()
	t.Cleanup(func() { killMachines(state) })
	p := newExec(t, execConfig(t, state))
	labels := map[string]string{provider.LabelCluster: "c", provider.LabelGroup: "g"}
	in := providertest.Provision(t, p, sleeperSpec(labels, nil))
	pid := p.pid()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "a call fails, saying the plugin exited", func() error {
		_, err := p.List(context.Background(), labels)
		if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "it is started again") {
			return fmt.Errorf("List: %v", err)
		}
		return nil
	})
	testenv.Eventually(t, 10*time.Second, "the plugin started again, the machine listed", func() error {
		listed, err := p.List(context.Background(), labels)
		if err != nil {
			return err
		}
		if len(listed) != 1 || listed[0].ID != in.ID {
			return errors.New("not the machine")
		}
		return nil
	})
	if now := p.pid(); now == pid || now == 0 {
		t.Errorf("the plugin's pid is %d, was %d: want a new process", now, pid)
	}
}

// TestHangStopped: a plugin that does not answer within the timeout is
// stopped (its process killed) and the call fails, naming the call and
// the timeout; once it answers again it is started again, after the
// backoff.
func TestHangStopped(t *testing.T) {
	state := t.TempDir()
	cfg := execConfig(t, state)
	cfg.Timeout = time.Second
	p := newExec(t, cfg)
	if _, err := p.List(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	pid := p.pid()
	if err := os.WriteFile(filepath.Join(state, "hang"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := p.List(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "did not answer list within 1s (timeout)") {
		t.Fatalf("List of a hung plugin: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("List of a hung plugin took %v, want about its 1s timeout", took)
	}
	testenv.Eventually(t, 10*time.Second, "the hung plugin's process gone", func() error {
		if syscall.Kill(pid, 0) == nil {
			return errors.New("still there")
		}
		return nil
	})
	os.Remove(filepath.Join(state, "hang"))
	testenv.Eventually(t, 10*time.Second, "the plugin answers again", func() error {
		_, err := p.List(context.Background(), nil)
		return err
	})
}
