package e2e

// An operator's first hour, against real processes: bad input to the agent
// commands (a port in use, a data dir that holds a node or other files,
// bad names) is refused before anything is written; an approved manager
// becomes a manager; refusals say why, once, and change nothing; a stopped
// leader hands over at once; a lost quorum is stated.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/internal/testenv"
)

// agentRefused runs an agent command that must exit non-zero at once with
// stderr holding every one of want, and returns stderr.
func agentRefused(t *testing.T, args []string, want ...string) string {
	t.Helper()
	began := time.Now()
	_, stderr, err := cli(t, args...)
	if err == nil {
		t.Fatalf("curator %s succeeded; want a refusal", strings.Join(args, " "))
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("curator %s took %s to refuse; want it at once", strings.Join(args, " "), took.Round(time.Millisecond))
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("curator %s: stderr %q does not say %q", strings.Join(args, " "), strings.TrimSpace(stderr), w)
		}
	}
	return stderr
}

func TestOperatorFirstHour(t *testing.T) {
	parallel(t) // its own addresses and dirs
	began := time.Now()
	c := newCluster(t, "127.0.241.")
	m1 := c.init("manager-1", 10)
	workerToken, managerToken := c.token("worker"), c.token("manager")
	c.join("worker-1", 11, workerToken, m1)
	c.waitReady(30*time.Second, "manager-1", "worker-1")
	ids := mgmtIDs(t, c, "manager-1", "worker-1")
	t.Logf("cluster of 1 manager and 1 worker up in %s", time.Since(began).Round(time.Millisecond))

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a port in use", func(t *testing.T) {
			before := mgmtSnap(t, c)
			for i, tc := range []struct {
				verb string
				off  int
				what string
			}{
				{"init", 1, "etcd peer, PORT+1"},
				{"join", 3, "HTTP, PORT+3"},
				{"join", 0, "gRPC, PORT"},
			} {
				host := 50 + i
				testenv.Occupy(t, fmt.Sprintf("%s%d:%d", c.subnet, host, port+tc.off))
				dir := filepath.Join(t.TempDir(), "node")
				args := []string{"agent", tc.verb, "--data-dir", dir, "--listen", c.addr(host)}
				if tc.verb == "join" {
					args = append(args, "--token", workerToken, "--manager", m1.listen)
				}
				agentRefused(t, args, fmt.Sprintf("%s%d:%d (%s) is in use", c.subnet, host, port+tc.off, tc.what), "--listen", "nothing was written")
				if got := testenv.DirNames(t, dir); got != nil {
					t.Errorf("agent %s refused for a port in use, but wrote %v", tc.verb, got)
				}
			}
			// `agent run` of a node that runs already: its own ports.
			agentRefused(t, []string{"agent", "run", "--data-dir", m1.dataDir},
				m1.listen+" (gRPC, PORT) is in use", "running already")
			if diff := cmp.Diff(before, mgmtSnap(t, c)); diff != "" {
				t.Errorf("refused agent commands changed the cluster (-before +after):\n%s", diff)
			}
		}},
		{"a data dir that holds a node, or other files", func(t *testing.T) {
			state, err := os.ReadFile(filepath.Join(m1.dataDir, "state.json"))
			if err != nil {
				t.Fatal(err)
			}
			listing := testenv.DirNames(t, m1.dataDir)
			agentRefused(t, []string{"agent", "init", "--data-dir", m1.dataDir, "--listen", c.addr(60), "--name", "copy"},
				"holds node "+ids["manager-1"], "curator agent run --data-dir "+m1.dataDir)
			agentRefused(t, []string{"agent", "join", "--data-dir", m1.dataDir, "--listen", c.addr(60), "--token", workerToken, "--manager", m1.listen},
				"holds node "+ids["manager-1"], "curator agent run --data-dir "+m1.dataDir)
			after, err := os.ReadFile(filepath.Join(m1.dataDir, "state.json"))
			if err != nil || string(after) != string(state) || !slices.Equal(listing, testenv.DirNames(t, m1.dataDir)) {
				t.Errorf("refused init/join changed the node's data dir")
			}
			other := t.TempDir()
			if err := os.WriteFile(filepath.Join(other, "photos.tar"), []byte("mine"), 0o600); err != nil {
				t.Fatal(err)
			}
			agentRefused(t, []string{"agent", "init", "--data-dir", other, "--listen", c.addr(61)}, "is not empty (it holds photos.tar)")
			if got := testenv.DirNames(t, other); !slices.Equal(got, []string{"photos.tar"}) {
				t.Errorf("a refused init changed a dir of other files: %v", got)
			}
		}},
		{"names", func(t *testing.T) {
			before := mgmtSnap(t, c)
			huge := strings.Repeat("n", 100<<10)
			for _, tc := range []struct {
				name string
				want []string
			}{
				{"fake\nrow", []string{`node name "fake\nrow"`}},
				{huge, []string{"(102400 bytes)"}},
				// A valid name the leader refuses: it is a node's ID.
				{ids["worker-1"], []string{"is the ID of node " + ids["worker-1"], "join refused"}},
			} {
				dir := filepath.Join(t.TempDir(), "node")
				stderr := agentRefused(t, []string{"agent", "join", "--data-dir", dir, "--listen", c.addr(62), "--name", tc.name,
					"--token", workerToken, "--manager", m1.listen}, tc.want...)
				if len(stderr) > 2000 {
					t.Errorf("a %d-byte error: it must not echo the name", len(stderr))
				}
				// A failed join leaves nothing behind, not even its key.
				if got := testenv.DirNames(t, dir); got != nil {
					t.Errorf("a refused join left %v in its data dir", got)
				}
			}
			stderr := agentRefused(t, []string{"--config", c.config, "node", "update", "worker-1", "--label-add", "k=" + huge}, "(102400 bytes)")
			if len(stderr) > 2000 {
				t.Errorf("a %d-byte error: it must not echo the label", len(stderr))
			}
			if diff := cmp.Diff(before, mgmtSnap(t, c)); diff != "" {
				t.Errorf("refused names changed the cluster (-before +after):\n%s", diff)
			}
		}},
		{"voter limit", func(t *testing.T) {
			mgmtRefused(t, c, []string{"cluster", "update", "--max-voters", "8"}, "InvalidArgument", "max voters 8: the limit is 7", "3, 5 or 7")
			mgmtRefused(t, c, []string{"cluster", "update", "--max-voters", "0"}, "InvalidArgument", "at least 1")
			_, stderr, _ := cli(t, "--config", c.config, "cluster", "update", "--max-voters", "8")
			if n := strings.Count(stderr, "update cluster:"); n != 1 {
				t.Errorf("stderr %q says %q %d times, want once", stderr, "update cluster:", n)
			}
			out := mgmtRun(t, c, "cluster", "update", "--max-voters", "4")
			if !strings.Contains(out, "WARNING: max voters is 4, an even number") {
				t.Errorf("cluster update --max-voters 4 printed %q; want a warning about the even limit", out)
			}
			mgmtRun(t, c, "cluster", "update", "--max-voters", "7")
		}},
		{"refusals name their command once", func(t *testing.T) {
			_, stderr, err := cli(t, "--config", c.config, "node", "promote", "no-such-node")
			if err == nil || !strings.Contains(stderr, "promote node no-such-node: no node with ID") {
				t.Errorf("node promote of an unknown node: %v, stderr %q; want it to say `promote node no-such-node: no node with ID ...`", err, stderr)
			}
			if strings.Contains(stderr, "promote:") {
				t.Errorf("stderr %q repeats its prefix", stderr)
			}
			out := mgmtRun(t, c, "node", "demote", "worker-1")
			if !strings.Contains(out, "holds no consensus role: nothing to demote") {
				t.Errorf("node demote of a worker said %q; want it to say there is nothing to demote", out)
			}
		}},
		{"an approved manager becomes a manager", func(t *testing.T) {
			mgmtRun(t, c, "cluster", "update", "--require-approval=true")
			c.join("manager-2", 12, managerToken, m1)
			mgmtWaitNode(t, c, "manager-2", "pending", func(n mgmtNode) error {
				if n.State != "pending" {
					return fmt.Errorf("state %q", n.State)
				}
				return nil
			})
			ids["manager-2"] = mgmtIDs(t, c, "manager-2")["manager-2"]
			mgmtRefused(t, c, []string{"node", "demote", "manager-2"}, "FailedPrecondition", "pending approval", "nothing to demote")
			mgmtRun(t, c, "node", "approve", "manager-2")
			mgmtWaitVoters(t, c, ids, "manager-1", "manager-2")
			mgmtRefused(t, c, []string{"node", "approve", "manager-2"}, "AlreadyExists", "approved already")
			events, err := mgmtEvents(t, c)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(events, func(e mgmtEvent) bool {
				return e.Loop == "manager-approvals" && e.Action == "promote" && e.NodeID == ids["manager-2"]
			}) {
				t.Errorf("no manager-approvals event promoting manager-2: %+v", events)
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return
		}
	}
	t.Logf("all steps in %s", time.Since(began).Round(time.Millisecond))
}

// TestLeaderStopAndQuorumLoss: a curator leader stopped with SIGTERM exits
// within 2 s and hands over at once (it revokes its election lease, rather
// than leave the others to wait it out); with two of three managers dead,
// the CLI, cluster info and the survivor's /healthz say the quorum is lost,
// which managers answer, and what to do.
func TestLeaderStopAndQuorumLoss(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.242.")
	// A long election TTL tells a handover (at once) from a lease that
	// expires (6 s).
	const ttl = 6 * time.Second
	longTTL := func(name string, env map[string]string, verb string, args ...string) *node {
		return c.agentEnv(name, env, verb, append(args, "--election-ttl", ttl.String())...)
	}
	c.buildWith(longTTL, 3, 0)
	names := []string{"manager-1", "manager-2", "manager-3"}
	ids := mgmtIDs(t, c, names...)
	info := mgmtWaitVoters(t, c, ids, names...)

	t.Run("SIGTERM to the leader", func(t *testing.T) {
		leader := mgmtNameOf(ids, info.Leader)
		victim := c.nodes[leader]
		var others []string
		for _, name := range names {
			if name != leader {
				others = append(others, c.nodes[name].listen)
			}
		}
		cfg := c.writeConfig(others...)
		stopped := time.Now()
		if err := victim.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := victim.proc.wait(t, 20*time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v, want exit status 0", leader, err)
		}
		exited := time.Since(stopped)
		var handedOver time.Duration
		testenv.Eventually(t, 3*ttl, "a new leader", func() error {
			got, err := clusterInfo(t, cfg)
			if err != nil {
				return err
			}
			if got.Leader == "" || got.Leader == info.Leader {
				return fmt.Errorf("leader %q", got.Leader)
			}
			handedOver = time.Since(stopped)
			return nil
		})
		t.Logf("%s exited %s after SIGTERM; the next leader was found %s after it (election TTL %s)",
			leader, exited.Round(time.Millisecond), handedOver.Round(time.Millisecond), ttl)
		if exited > 2*time.Second {
			t.Errorf("the leader took %s to stop after SIGTERM, want at most 2s", exited.Round(time.Millisecond))
		}
		if handedOver > ttl/2 {
			t.Errorf("the next leader came %s after SIGTERM, want well within the election TTL (%s): a stopping leader resigns", handedOver.Round(time.Millisecond), ttl)
		}
		if log, err := os.ReadFile(victim.proc.log); err == nil && strings.Contains(string(log), "could not revoke the election lease") {
			t.Errorf("%s could not revoke its election lease on its way out", leader)
		}
		c.agent(leader, "run", "--election-ttl", ttl.String())
		c.waitReady(30*time.Second, names...)
		info = mgmtWaitVoters(t, c, ids, names...)
	})

	t.Run("stopping the managers", func(t *testing.T) {
		// The etcd leader first, then the other two together: the one
		// that leads etcd then must not wait for the other to take
		// leadership (etcd's own stop would wait seven seconds).
		etcdLeader := mgmtNameOf(ids, info.EtcdLeader)
		stop := func(names ...string) {
			t.Helper()
			began := time.Now()
			for _, name := range names {
				if err := c.nodes[name].proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range names {
				if err := c.nodes[name].proc.wait(t, 20*time.Second); err != nil {
					t.Errorf("%s after SIGTERM: %v, want exit status 0", name, err)
				}
				took := time.Since(began)
				t.Logf("%s stopped %s after SIGTERM", name, took.Round(time.Millisecond))
				if took > 3*time.Second {
					t.Errorf("%s took %s to stop after SIGTERM, want at most 3s", name, took.Round(time.Millisecond))
				}
			}
		}
		stop(etcdLeader)
		var rest []string
		for _, name := range names {
			if name != etcdLeader {
				rest = append(rest, name)
			}
		}
		stop(rest...)
		for _, name := range names {
			c.agent(name, "run", "--election-ttl", ttl.String())
		}
		c.waitReady(60*time.Second, names...)
		info = mgmtWaitVoters(t, c, ids, names...)
	})

	t.Run("two of three managers dead", func(t *testing.T) {
		// The survivor is the current leader: it must notice it lost its
		// quorum, as a follower would.
		survivor := mgmtNameOf(ids, info.Leader)
		var dead []string
		for _, name := range names {
			if name == survivor {
				continue
			}
			dead = append(dead, name)
			p := c.nodes[name].proc
			if err := p.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-p.done
		}
		s := c.nodes[survivor]
		want := []string{
			"quorum lost",
			"1 of its 3 voters answer",
			survivor + " (" + s.listen + ", this manager)",
			dead[0] + " (" + c.nodes[dead[0]].listen + ")",
			dead[1] + " (" + c.nodes[dead[1]].listen + ")",
			"restart the stopped managers; if they are gone for good, stop the agent of one surviving manager and restart it with `curator agent run --data-dir DIR --force-new-cluster`, then join new managers (or restore a backup: `curator agent restore`)",
		}
		for _, cfg := range []string{c.config, c.writeConfig(s.listen)} {
			for _, args := range [][]string{{"node", "ls"}, {"cluster", "info"}} {
				testenv.Eventually(t, 30*time.Second, "curator "+strings.Join(args, " ")+" says the quorum is lost", func() error {
					_, stderr, err := cli(t, append([]string{"--config", cfg}, args...)...)
					if err == nil {
						return errors.New("it succeeded")
					}
					for _, w := range want {
						if !strings.Contains(stderr, w) {
							return fmt.Errorf("stderr %q does not say %q", strings.TrimSpace(stderr), w)
						}
					}
					return nil
				})
			}
		}
		host, _, _ := net.SplitHostPort(s.listen)
		url := fmt.Sprintf("http://%s:%d/healthz", host, port+3)
		testenv.Eventually(t, 10*time.Second, "the survivor's /healthz says the quorum is lost", func() error {
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			var h struct {
				Quorum  string `json:"quorum"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(body, &h); err != nil {
				return fmt.Errorf("%v: %s", err, body)
			}
			if resp.StatusCode != http.StatusServiceUnavailable || h.Quorum != "lost" {
				return fmt.Errorf("%s: %s", resp.Status, body)
			}
			for _, w := range want {
				if !strings.Contains(h.Message, w) {
					return fmt.Errorf("message %q does not say %q", h.Message, w)
				}
			}
			return nil
		})
	})
}
