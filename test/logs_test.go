package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/pki"
)

// TestLogs reads node agents' logs through the managers, with the real
// binary (`curator logs`): a worker's and the leader's own, filtered by
// --tail and --since; a --follow that prints a line the leader logs
// afterwards and stops at Ctrl-C; a reader's certificate refused; and a
// worker killed is an error that names it.
func TestLogs(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.163.")
	c.init("manager-1", 10)
	worker := c.join("worker-1", 11, c.token("worker"), c.nodes["manager-1"])
	c.waitReady(time.Minute, "manager-1", "worker-1")
	dir := t.TempDir()
	t.Cleanup(func() { killInstancesUnder(dir) })
	logs := func(config string, args ...string) (string, error) {
		t.Helper()
		out, stderr, err := cli(t, append([]string{"--config", config, "logs"}, args...)...)
		return out + stderr, err
	}
	commit := func(name string) {
		t.Helper()
		file := filepath.Join(t.TempDir(), name+".yaml")
		spec := fmt.Sprintf("name: %s\nsize: 0\nroles: [worker]\nprovider: {process: {addresses: 127.0.163.20-127.0.163.29, dir: %s}}\n", name, dir)
		if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
		mgmtRun(t, c, "group", "commit", file)
	}

	// A worker's log: its start is there; --tail keeps the last lines
	// (of the leader's own node, which logged the worker's join last).
	out, err := logs(c.config, "worker-1")
	if err != nil || !strings.Contains(out, "agent running") {
		t.Fatalf("logs worker-1: %v\n%s", err, out)
	}
	if out, err := logs(c.config, "manager-1", "--tail", "2"); err != nil || strings.Count(out, "\n") != 2 || !strings.Contains(out, "node joined") {
		t.Errorf("logs manager-1 --tail 2: %v, want its 2 last lines, the worker's join last:\n%s", err, out)
	}

	// The leader's own log, since a moment: what it logged after, not
	// its start.
	since := time.Now().Add(time.Second).Truncate(time.Second)
	time.Sleep(time.Until(since) + 10*time.Millisecond) // --since is to the second
	commit("logs-since")
	testenv.Eventually(t, 20*time.Second, "the commit in the leader's log since "+since.Format(time.RFC3339), func() error {
		out, err := logs(c.config, "manager-1", "--since", since.Format(time.RFC3339))
		if err != nil {
			return err
		}
		if strings.Contains(out, "agent running") {
			t.Fatalf("logs --since %s has the agent's start:\n%s", since.Format(time.RFC3339), out)
		}
		if !strings.Contains(out, "logs-since") {
			return fmt.Errorf("no commit of logs-since in:\n%s", out)
		}
		return nil
	})

	// --follow prints what the leader logs after it started, until
	// Ctrl-C, which is a clean end.
	var followed syncBuffer
	f := exec.Command(binary, "--config", c.config, "logs", "manager-1", "--follow", "--tail", "1")
	f.Stdout, f.Stderr = &followed, &followed
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the follow's first line", func() error {
		if followed.String() == "" {
			return fmt.Errorf("nothing yet")
		}
		return nil
	})
	commit("logs-follow")
	testenv.Eventually(t, 20*time.Second, "the follow prints the commit", func() error {
		if !strings.Contains(followed.String(), "logs-follow") {
			return fmt.Errorf("not yet:\n%s", followed.String())
		}
		return nil
	})
	if err := f.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- f.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("logs --follow after Ctrl-C: %v\n%s", err, followed.String())
		}
	case <-time.After(20 * time.Second):
		_ = f.Process.Kill()
		t.Fatalf("logs --follow did not stop at Ctrl-C")
	}

	// A reader may not read logs.
	rdir := filepath.Join(t.TempDir(), "reader")
	mgmtRun(t, c, "cluster", "admin-cert", "--role", pki.OperatorReader, "--name", "who-reads", "--ttl", "1h", "--out", rdir)
	if out, err := logs(filepath.Join(rdir, "config.yaml"), "worker-1"); err == nil || !strings.Contains(out, "NodeLogs needs the operator role") {
		t.Errorf("a reader's logs worker-1: %v\n%s", err, out)
	}

	// A worker that is down: an error that names it.
	if err := worker.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "logs of the killed worker refused", func() error {
		out, err := logs(c.config, "worker-1")
		if err == nil {
			return fmt.Errorf("still answered:\n%s", out)
		}
		if !strings.Contains(out, "node worker-1 (") || !strings.Contains(out, "has no session with the leader") {
			t.Fatalf("logs of a killed worker: %v\n%s", err, out)
		}
		return nil
	})
}
