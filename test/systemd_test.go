package e2e

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// notifySocket is a NOTIFY_SOCKET the test listens on, as systemd does for
// a Type=notify unit: each datagram is a message of newline-separated
// VAR=value assignments.
type notifySocket struct {
	path string
	msgs chan string
}

func listenNotify(t *testing.T, name string) *notifySocket {
	t.Helper()
	// A unix socket path must be short: t.TempDir() may be too long.
	dir, err := os.MkdirTemp("", "notify")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &notifySocket{path: filepath.Join(dir, name), msgs: make(chan string, 16)}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: s.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			s.msgs <- string(buf[:n])
		}
	}()
	return s
}

// waitFor waits for a message with the assignment want (READY=1) and
// returns the message.
func (s *notifySocket) waitFor(t *testing.T, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m := <-s.msgs:
			if strings.Contains("\n"+m+"\n", "\n"+want+"\n") {
				return m
			}
		case <-deadline:
			t.Fatalf("no %s on %s within %s", want, s.path, timeout)
			return ""
		}
	}
}

// none checks that no message with want comes within d.
func (s *notifySocket) none(t *testing.T, want string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case m := <-s.msgs:
			if strings.Contains("\n"+m+"\n", "\n"+want+"\n") {
				t.Fatalf("%s on %s too early: %q", want, s.path, m)
			}
		case <-deadline:
			return
		}
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestAgentUnderSystemd runs agents as a Type=notify unit would: READY=1 on
// a real NOTIFY_SOCKET once the node is in the cluster with a session up
// (not while no manager answers), STOPPING=1 and status 0 on SIGTERM,
// status 0 after agent leave, and status 3 with the reason when the
// cluster removed the node.
func TestAgentUnderSystemd(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.187.")
	socks := map[string]*notifySocket{}
	notified := func(name string, env map[string]string, verb string, args ...string) *node {
		s := listenNotify(t, name)
		socks[name] = s
		e := map[string]string{"NOTIFY_SOCKET": s.path}
		for k, v := range env {
			e[k] = v
		}
		return c.agentEnv(name, e, verb, args...)
	}
	m1 := c.initWith(notified, "manager-1", 10)
	socks["manager-1"].waitFor(t, "READY=1", 30*time.Second)
	w1 := c.joinWith(notified, "worker-1", 20, c.token("worker"), m1)
	socks["worker-1"].waitFor(t, "READY=1", 30*time.Second)
	if _, err := mgmtNodes(t, c); err != nil {
		t.Fatal(err)
	}
	mgmtWaitNode(t, c, "worker-1", "listed", func(mgmtNode) error { return nil })

	// events --follow waits for the managers to come back (below).
	followLog := filepath.Join(c.dir, "follow.log")
	follow := start(t, "events --follow", followLog, nil, "--config", c.config, "events", "--follow", "--limit", "1")

	// SIGTERM is a clean stop: STOPPING=1, then status 0.
	for _, n := range []*node{w1, m1} {
		_ = n.proc.cmd.Process.Signal(syscall.SIGTERM)
		if err := n.proc.wait(t, 30*time.Second); err != nil {
			t.Fatalf("%s after SIGTERM: %v, want status 0", n.name, err)
		}
		socks[n.name].waitFor(t, "STOPPING=1", 5*time.Second)
	}

	// With no manager up, the worker's agent runs but is not ready; it is
	// once its manager is back and its session up.
	notified("worker-1", nil, "run")
	socks["worker-1"].none(t, "READY=1", 3*time.Second)
	if w1.proc.exited() {
		t.Fatalf("worker-1 exited while no manager answered: %v", w1.proc.err)
	}
	testenv.Eventually(t, 30*time.Second, "events --follow says it waits for a manager", func() error {
		if follow.exited() {
			t.Fatalf("events --follow exited when its only manager stopped: %v\n%s", follow.err, readFile(t, followLog))
		}
		if !strings.Contains(readFile(t, followLog), "waiting for one to come back") {
			return errors.New("not yet")
		}
		return nil
	})
	notified("manager-1", nil, "run")
	socks["manager-1"].waitFor(t, "READY=1", 30*time.Second)
	socks["worker-1"].waitFor(t, "READY=1", 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "events --follow follows on", func() error {
		if follow.exited() {
			t.Fatalf("events --follow exited: %v", follow.err)
		}
		if !strings.Contains(readFile(t, followLog), "answers again: following on") {
			return errors.New("not yet")
		}
		return nil
	})
	_ = follow.cmd.Process.Signal(syscall.SIGINT)
	if err := follow.wait(t, 10*time.Second); err != nil {
		t.Errorf("events --follow after Ctrl-C: %v", err)
	}

	// A clean leave exits 0.
	c.joinWith(notified, "worker-2", 21, c.token("worker"), m1)
	socks["worker-2"].waitFor(t, "READY=1", 30*time.Second)
	if _, _, err := mgmtLeave(t, c, "worker-2", false); err != nil {
		t.Fatal(err)
	}
	mgmtAssertLeft(t, c, "worker-2")

	// A removed node's agent stops with status 3 and says why.
	mgmtRun(t, c, "node", "rm", "--force", "worker-1")
	var err error
	// Refusals in a row over 10 s stop it; a manager that cannot tell
	// (no leader for a moment, on a host as busy as the whole test run
	// makes it) answers otherwise between them and starts the count again.
	testenv.Eventually(t, 2*time.Minute, "worker-1 exits", func() error {
		if !w1.proc.exited() {
			return errors.New("still running")
		}
		err = w1.proc.err
		return nil
	})
	if code := exitCode(err); code != 3 {
		t.Errorf("removed worker-1 exited with %v (status %d), want status 3", err, code)
	}
	log, rerr := os.ReadFile(w1.proc.log)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !strings.Contains(string(log), "Error: the cluster refuses this node: ") || !strings.Contains(string(log), "not a member of this cluster") {
		t.Errorf("removed worker-1's log does not end with why it stopped:\n%s", tail(string(log), 5))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
