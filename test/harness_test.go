// Package e2e drives the real curator binary: several agent processes on
// loopback addresses of this host, and the operator CLI against them.
//
// Each test owns one 127.0.N.0/24 range (N distinct per test, away from the
// dev default 127.0.100.x) so tests and a running `curator dev` never share
// an address. Every process a test starts is killed in its cleanup; on
// failure the tail of each node's log is written to the test log.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/localcluster"
	"github.com/curatorproject/curator/internal/testenv"
)

// binary is the curator binary TestMain builds.
var binary string

// Short timers so failover and down detection take seconds.
var agentTimers = []string{"--election-ttl", "2s", "--heartbeat-interval", "200ms", "--down-after", "1s"}

const (
	electionTTL = 2 * time.Second
	downAfter   = 1 * time.Second
	port        = 7000
	// logTail is how many lines of each node's log a failed test shows.
	logTail = 60
)

// waitDevUp waits until dev, a `curator dev` whose output goes to stdout,
// prints how to use its cluster (the export CURATOR_CONFIG line), failing
// the test if dev exits first.
func waitDevUp(t *testing.T, dev *proc, stdout *syncBuffer, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, dev.name+" prints how to use its cluster", func() error {
		if dev.exited() {
			t.Fatalf("%s exited: %v", dev.name, dev.err)
		}
		if !strings.Contains(stdout.String(), "export CURATOR_CONFIG=") {
			return errors.New("not yet")
		}
		return nil
	})
}

func TestMain(m *testing.M) {
	flag.Parse()
	if err := setPoolSize(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(testenv.RunWithCurator(m, "curator-e2e-", &binary))
}

// proc is one process the test started, with its output in a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // set when done is closed
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to timeout for p to exit and returns its exit error.
func (p *proc) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("%s still running %s after it was asked to stop", p.name, timeout)
		return nil
	}
}

// start runs the binary with args, its stdout and stderr in logPath (and in
// stdout, if not nil), and kills it when the test ends. The last lines of
// its log are shown if the test fails.
func start(t *testing.T, name, logPath string, stdout *syncBuffer, args ...string) *proc {
	t.Helper()
	return startBinary(t, binary, nil, name, logPath, stdout, args...)
}

// startBinary is start with another binary and, if env is not nil, that
// environment.
func startBinary(t *testing.T, bin string, env []string, name, logPath string, stdout *syncBuffer, args ...string) *proc {
	t.Helper()
	return startProcess(t, bin, env, nodeProcAttr(), name, logPath, stdout, args...)
}

// startProcess is startBinary with attr as the process's attributes (which
// should include what nodeProcAttr sets).
func startProcess(t *testing.T, bin string, env []string, attr *syscall.SysProcAttr, name, logPath string, stdout *syncBuffer, args ...string) *proc {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if stdout != nil {
		cmd.Stdout = stdout.tee(f)
	}
	cmd.Env = env
	// Own process group: a Ctrl-C on `go test` must not stop the nodes
	// before the test's cleanup does; and on Linux, no node outlives a
	// test binary that was killed before its cleanup ran.
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			dumpLog(t, p)
		}
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

func dumpLog(t *testing.T, p *proc) {
	data, err := os.ReadFile(p.log)
	if err != nil {
		t.Logf("%s: no log: %v", p.name, err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > logTail {
		lines = lines[len(lines)-logTail:]
	}
	t.Logf("---- last %d lines of %s (%s) ----\n%s", len(lines), p.name, p.log, strings.Join(lines, "\n"))
}

// syncBuffer is a bytes.Buffer a child process writes to while the test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	w   *os.File
}

func (b *syncBuffer) tee(f *os.File) *syncBuffer { b.w = f; return b }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w != nil {
		_, _ = b.w.Write(p)
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// cli runs an operator command to completion and returns its stdout and
// stderr; err is set if it failed.
func cli(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return cliTimeout(t, 40*time.Second, args...)
}

// cliTimeout is cli for a command that may take longer.
func cliTimeout(t *testing.T, timeout time.Duration, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "CURATOR_CONFIG=/nonexistent/config.yaml")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("curator %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), errOut.String(), err
}

// nodeJSON is the part of `node ls -o json` the tests read.
type nodeJSON struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	Address       string     `json:"address"`
	State         string     `json:"state"`
	Status        string     `json:"status"`
	Availability  string     `json:"availability"`
	Roles         []string   `json:"roles"`
	ManagerStatus string     `json:"manager_status"`
	Group         string     `json:"group"`
	InstanceID    string     `json:"instance_id"`
	Domain        string     `json:"domain"`
	ConfigSHA     string     `json:"config_sha"`
	Version       string     `json:"version"`
	LastHeartbeat *time.Time `json:"last_heartbeat"`
	CertExpires   *time.Time `json:"cert_expires"`
}

// clusterInfoJSON is the part of `cluster info -o json` the tests read.
type clusterInfoJSON struct {
	ClusterID     string            `json:"cluster_id"`
	Leader        string            `json:"leader"`
	Voters        []string          `json:"voters"`
	Learners      []string          `json:"learners"`
	EtcdLeader    string            `json:"etcd_leader"`
	QuorumHealthy bool              `json:"quorum_healthy"`
	Names         map[string]string `json:"names"`
	CertTTL       string            `json:"cert_ttl"`
	Releases      map[string]uint32 `json:"releases"`
	LowestManager string            `json:"lowest_manager_release"`
	Managers      []string          `json:"managers"`
	Warnings      []string          `json:"warnings"`
}

func nodeLs(t *testing.T, config string) ([]nodeJSON, error) {
	t.Helper()
	out, _, err := cli(t, "--config", config, "node", "ls", "-o", "json")
	if err != nil {
		return nil, err
	}
	var nodes []nodeJSON
	if err := json.Unmarshal([]byte(out), &nodes); err != nil {
		return nil, fmt.Errorf("node ls -o json: %w: %q", err, out)
	}
	return nodes, nil
}

func clusterInfo(t *testing.T, config string) (*clusterInfoJSON, error) {
	t.Helper()
	out, _, err := cli(t, "--config", config, "cluster", "info", "-o", "json")
	if err != nil {
		return nil, err
	}
	var info clusterInfoJSON
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		return nil, fmt.Errorf("cluster info -o json: %w: %q", err, out)
	}
	return &info, nil
}

func byName(nodes []nodeJSON, name string) (nodeJSON, bool) {
	for _, n := range nodes {
		if n.Name == name {
			return n, true
		}
	}
	return nodeJSON{}, false
}

// allReady says which of names are missing or not ready in nodes.
func allReady(nodes []nodeJSON, names ...string) error {
	var bad []string
	for _, name := range names {
		n, ok := byName(nodes, name)
		if !ok {
			bad = append(bad, name+" (missing)")
		} else if n.Status != "ready" {
			bad = append(bad, name+" ("+n.Status+")")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("not ready: %s", strings.Join(bad, ", "))
	}
	return nil
}

// cluster is a set of agent processes started by one test.
type cluster struct {
	t      *testing.T
	dir    string
	subnet string // "127.0.N."
	nodes  map[string]*node
	// config is the admin config written by `agent init`.
	config string
	// agentAttr, if set, prepares n's data dir for its agent process and
	// returns that process's attributes: the partition tests run every
	// node under a uid of its own.
	agentAttr func(n *node) *syscall.SysProcAttr
}

type node struct {
	name    string
	listen  string
	dataDir string
	proc    *proc
}

func newCluster(t *testing.T, subnet string) *cluster {
	dir := t.TempDir()
	t.Cleanup(func() {
		if t.Failed() {
			keepLogs(t, dir)
		}
	})
	return &cluster{t: t, dir: dir, subnet: subnet, nodes: map[string]*node{}}
}

func (c *cluster) addr(host int) string { return fmt.Sprintf("%s%d:%d", c.subnet, host, port) }

// agentStarter starts `curator agent VERB` for a node, with env added to
// its environment; args follow the data dir.
type agentStarter func(name string, env map[string]string, verb string, args ...string) *node

// agent starts `curator agent VERB` for name; args follow the data dir.
func (c *cluster) agent(name, verb string, args ...string) *node {
	return c.agentEnv(name, nil, verb, args...)
}

// agentEnv is agent with env added to the process's environment: an
// agentStarter.
func (c *cluster) agentEnv(name string, env map[string]string, verb string, args ...string) *node {
	return c.agentWith(func(logPath string, argv ...string) *proc {
		attr := nodeProcAttr()
		if c.agentAttr != nil {
			attr = c.agentAttr(c.nodes[name])
		}
		return startProcess(c.t, binary, withEnv(nil, env), attr, name, logPath, nil, argv...)
	}, name, verb, args...)
}

// withEnv is base (this process's environment if nil) with env added; nil
// if env is empty and base nil, which is this process's environment too.
func withEnv(base []string, env map[string]string) []string {
	if len(env) == 0 {
		return base
	}
	if base == nil {
		base = os.Environ()
	}
	out := slices.Clone(base)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// agentWith is agent with another way to start the process.
func (c *cluster) agentWith(startProc func(logPath string, argv ...string) *proc, name, verb string, args ...string) *node {
	n := c.nodes[name]
	if n == nil {
		n = &node{name: name, dataDir: filepath.Join(c.dir, name)}
		c.nodes[name] = n
	}
	argv := append([]string{"agent", verb, "--data-dir", n.dataDir}, agentTimers...)
	argv = append(argv, args...)
	n.proc = startProc(filepath.Join(c.dir, name+".log"), argv...)
	return n
}

// init starts the first node on host and waits for its admin config and a
// leader.
// args are more `agent init` arguments.
func (c *cluster) init(name string, host int, args ...string) *node {
	c.t.Helper()
	return c.initWith(c.agentEnv, name, host, args...)
}

// initWith is init with another agent starter.
func (c *cluster) initWith(agent agentStarter, name string, host int, args ...string) *node {
	c.t.Helper()
	n := agent(name, nil, "init", append([]string{"--listen", c.addr(host), "--name", name}, args...)...)
	n.listen = c.addr(host)
	c.config = filepath.Join(n.dataDir, "admin", "config.yaml")
	testenv.Eventually(c.t, 30*time.Second, name+" serves cluster info", func() error {
		if n.proc.exited() {
			c.t.Fatalf("%s exited: %v", name, n.proc.err)
		}
		info, err := clusterInfo(c.t, c.config)
		if err != nil {
			return err
		}
		if info.Leader == "" {
			return errors.New("no leader yet")
		}
		return nil
	})
	return n
}

func (c *cluster) token(role string) string {
	c.t.Helper()
	out, _, err := cli(c.t, "--config", c.config, "token", "show", role)
	if err != nil {
		c.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// build brings up manager-1 with init, then manager-2.. one at a time
// (each a voter before the next, so the quorum grows a voter at a time),
// then worker-1.. together, on hosts 10, 11, ... in that order, the way
// `curator dev` does (internal/localcluster), and waits until every node is
// ready. It returns manager-1.
func (c *cluster) build(managers, workers int) *node {
	c.t.Helper()
	return c.buildWith(c.agentEnv, managers, workers)
}

// buildWith is build with another agent starter.
func (c *cluster) buildWith(agent agentStarter, managers, workers int) *node {
	c.t.Helper()
	var nodes []localcluster.Node
	for i := 1; i <= managers; i++ {
		nodes = append(nodes, localcluster.Node{Name: fmt.Sprintf("manager-%d", i), Manager: true})
	}
	for i := 1; i <= workers; i++ {
		nodes = append(nodes, localcluster.Node{Name: fmt.Sprintf("worker-%d", i)})
	}
	host := 10
	up, err := localcluster.Up(context.Background(), localcluster.Config{
		Nodes: nodes,
		Start: func(_ context.Context, l localcluster.Launch) (localcluster.Process, error) {
			listen := c.addr(host)
			host++
			n := agent(l.Node.Name, l.Env, l.Verb, append([]string{"--listen", listen}, l.Args...)...)
			n.listen = listen
			return n, nil
		},
	})
	if err != nil {
		c.t.Fatalf("bring the cluster up: %v", err)
	}
	c.config = up.AdminConfig
	return c.nodes["manager-1"]
}

// The localcluster.Process of a node the harness started.
func (n *node) Address() string { return n.listen }
func (n *node) DataDir() string { return n.dataDir }
func (n *node) LogFile() string { return n.proc.log }
func (n *node) Exited() error {
	if !n.proc.exited() {
		return nil
	}
	return fmt.Errorf("exit: %v", n.proc.err)
}

// join starts a node that joins with token through manager.
func (c *cluster) join(name string, host int, token string, manager *node) *node {
	return c.joinWith(c.agentEnv, name, host, token, manager)
}

// joinWith is join with another agent starter.
func (c *cluster) joinWith(agent agentStarter, name string, host int, token string, manager *node) *node {
	n := agent(name, nil, "join", "--listen", c.addr(host), "--name", name, "--token", token, "--manager", manager.listen)
	n.listen = c.addr(host)
	return n
}

// waitReady waits until every named node is ready and returns the list.
func (c *cluster) waitReady(timeout time.Duration, names ...string) []nodeJSON {
	c.t.Helper()
	var nodes []nodeJSON
	testenv.Eventually(c.t, timeout, "every node ready", func() error {
		var err error
		if nodes, err = nodeLs(c.t, c.config); err != nil {
			return err
		}
		return allReady(nodes, names...)
	})
	return nodes
}

// writeConfig writes a client config in a fresh folder that names managers
// in that order, with the admin credential of c.config by absolute path, and
// returns its path. The new folder has no manager cache.
func (c *cluster) writeConfig(managers ...string) string {
	c.t.Helper()
	adminDir := filepath.Dir(c.config)
	data, err := os.ReadFile(c.config)
	if err != nil {
		c.t.Fatal(err)
	}
	var clusterID string
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "cluster_id:"); ok {
			clusterID = strings.TrimSpace(v)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cluster_id: %s\nmanagers:\n", clusterID)
	for _, m := range managers {
		fmt.Fprintf(&b, "- %s\n", m)
	}
	fmt.Fprintf(&b, "ca: %s\ncert: %s\nkey: %s\n",
		filepath.Join(adminDir, "ca.crt"), filepath.Join(adminDir, "admin.crt"), filepath.Join(adminDir, "admin.key"))
	path := filepath.Join(c.t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// keepEnv names a directory where a failed test leaves every log of its
// dev cluster, pruned machines' included (the test's own directory is
// removed when it ends): CURATOR_TEST_KEEP=/tmp/keep go test ./test/...
const keepEnv = "CURATOR_TEST_KEEP"

// keepLogs copies the logs under dir to $CURATOR_TEST_KEEP/<test name>.
func keepLogs(t *testing.T, dir string) {
	root := os.Getenv(keepEnv)
	if root == "" {
		return
	}
	dst := filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "-"))
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".log" {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
	if err != nil {
		t.Logf("keeping the logs in %s: %v", dst, err)
		return
	}
	t.Logf("the logs are kept in %s", dst)
}
