package swarmtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// What the tests of failure domains need of the engines: the containers
// of each engine reaching the others' (each engine's own bridge network
// and subnet, routed through the engines' namespaces), and an engine cut
// off as a host going dark is.

// Route has every engine's namespace forward IPv4 and route each subnet
// of subnets (by engine) through that engine's address: a container of
// one engine's bridge network then reaches the containers of the others,
// with no NAT between them. The engines run with no iptables rules of
// their own, so nothing filters the forwarded packets.
func (c *Cluster) Route(ctx context.Context, subnets map[*Engine]string) error {
	for _, e := range c.Engines {
		if err := nsSh(ctx, e.Name, "echo 1 > /proc/sys/net/ipv4/ip_forward"); err != nil {
			return err
		}
		for via, subnet := range subnets {
			if via == e {
				continue
			}
			if err := ip(ctx, "-n", e.Name, "route", "replace", subnet, "via", via.Addr); err != nil {
				return err
			}
		}
	}
	return nil
}

// nsSh runs the shell script in network namespace ns (nsenter, so that
// /proc/sys/net is the namespace's).
func nsSh(ctx context.Context, ns, script string) error {
	out, err := exec.CommandContext(ctx, "nsenter", "--net="+filepath.Join(netnsDir, ns), "--", "sh", "-c", script).CombinedOutput()
	if err != nil {
		return fmt.Errorf("in %s: %s: %v: %s", ns, script, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Command is command name run in the engine's network namespace, to
// reach its containers (and, through Route, every engine's) from the
// host.
func (e *Engine) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + filepath.Join(netnsDir, e.Name), "--", name}, args...)...)
}

// Cut takes the engine's host off the network as a host going dark does:
// its link to the bridge goes down (its containers reach nothing, and
// nothing reaches them), and its dockerd is frozen (SIGSTOP), so that its
// API, a unix socket on this machine, does not answer either. Its
// containers keep running. Heal undoes it.
func (e *Engine) Cut(ctx context.Context) error {
	if err := ip(ctx, "-n", e.Name, "link", "set", "eth0", "down"); err != nil {
		return err
	}
	pid, err := readPid(e.pidfile())
	if err != nil {
		return err
	}
	if err := signalPid(pid, "STOP"); err != nil {
		return err
	}
	return waitStopped(ctx, pid)
}

// waitStopped waits until every thread of process pid is stopped: a
// SIGSTOP is sent at once but taken by each thread when it next runs,
// and a thread at work may still answer a call meanwhile.
func waitStopped(ctx context.Context, pid int) error {
	for {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return err
		}
		stopped := len(tasks) > 0
		for _, task := range tasks {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
			if err != nil {
				continue // the thread exited
			}
			// The state follows the command, in parentheses.
			_, after, _ := strings.Cut(string(stat), ") ")
			if len(after) == 0 || (after[0] != 'T' && after[0] != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("process %d not stopped: %w", pid, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Heal brings an engine Cut back: its dockerd goes on, its link comes up.
// Its routes went with the link: Route adds them again.
func (e *Engine) Heal(ctx context.Context) error {
	pid, err := readPid(e.pidfile())
	if err != nil {
		return err
	}
	if err := signalPid(pid, "CONT"); err != nil {
		return err
	}
	return ip(ctx, "-n", e.Name, "link", "set", "eth0", "up")
}
