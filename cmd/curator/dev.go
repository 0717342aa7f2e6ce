package main

// `curator dev`: a whole local cluster on loopback addresses, made of child
// processes of this same binary. Until groups run on the process provider,
// dev starts the processes itself: the first node with `agent
// init`, the other managers one at a time with `agent join` and the manager
// token (each a voter before the next, so the quorum grows a voter at a
// time), then the workers together.

import (
	"context"
	"errors"
	"fmt"
	"github.com/curatorproject/curator/provider/process"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/node"
	pb "github.com/curatorproject/curator/proto"
)

// Defaults and limits of `curator dev`.
const (
	devDefaultAddresses = "127.0.100.10-127.0.100.250"
	devPort             = 7000
	devMaxManagers      = 7
	// devStartTimeout bounds each step of bringing the cluster up: the
	// first node answering, one manager becoming a voter, every node ready.
	devStartTimeout = 2 * time.Minute
	// devStopGrace is how long nodes get to stop after SIGTERM before
	// they are killed.
	devStopGrace = 10 * time.Second
	devPoll      = 200 * time.Millisecond
	devNodesDir  = "nodes"
	devLogFile   = "agent.log"
)

// devConfig is what the flags of `curator dev` fill.
type devConfig struct {
	managers  int
	workers   int
	dir       string
	addresses string
}

// Validate checks the flags and returns the addresses the nodes get, in
// order: managers first, then workers.
func (c *devConfig) Validate() ([]netip.Addr, error) {
	if c.managers < 1 || c.managers > devMaxManagers {
		return nil, fmt.Errorf("--managers %d: want 1 to %d", c.managers, devMaxManagers)
	}
	if c.workers < 0 {
		return nil, fmt.Errorf("--workers %d: want 0 or more", c.workers)
	}
	addrs, err := process.AddressRange(c.addresses, c.managers+c.workers)
	if err != nil {
		return nil, fmt.Errorf("--addresses %q: %w", c.addresses, err)
	}
	return addrs, nil
}

func newDevCommand() *cobra.Command {
	c := &devConfig{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster of several processes",
		Long: `Run a whole cluster on this machine: --managers consensus members and
--workers workers, each a 'curator agent' process on its own loopback address
(port 7000), with its data dir and log (agent.log) in DIR/nodes/NAME. The client
config is written to DIR/config.yaml. dev stays in the foreground and stops
every node on Ctrl-C or SIGTERM.

Run again with the same --dir, dev restarts the nodes found there from disk.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addrs, err := c.Validate()
			if err != nil {
				return err
			}
			devFollowParent()
			return runDev(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), c, addrs)
		},
	}
	cmd.Flags().IntVar(&c.managers, "managers", 3, "consensus members (1 to 7)")
	cmd.Flags().IntVar(&c.workers, "workers", 2, "workers")
	cmd.Flags().StringVar(&c.dir, "dir", "", "where the nodes keep their data dirs and logs (default: a new temporary dir)")
	cmd.Flags().StringVar(&c.addresses, "addresses", devDefaultAddresses, "loopback addresses for the nodes, FIRST-LAST")
	return cmd
}

// devNode is one node dev starts.
type devNode struct {
	name    string
	dataDir string
	proc    *exec.Cmd
	// exited is closed when the process has exited; err is then its exit.
	exited chan struct{}
	err    error
}

// devCluster is the set of nodes dev started; stop ends them all.
type devCluster struct {
	self   string
	stderr io.Writer
	mu     sync.Mutex
	nodes  []*devNode
}

func runDev(ctx context.Context, stdout, stderr io.Writer, c *devConfig, addrs []netip.Addr) (err error) {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary: %w", err)
	}
	dir := c.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "curator-dev-"); err != nil {
			return err
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, devNodesDir), 0o700); err != nil {
		return err
	}
	dc := &devCluster{self: self, stderr: stderr}
	defer func() {
		if stopErr := dc.stop(); err == nil {
			err = stopErr
		}
	}()
	cfgPath := filepath.Join(dir, client.ConfigFileName)

	names := devNames(c.managers, c.workers)
	if node.Initialised(filepath.Join(dir, devNodesDir, "manager-1")) {
		names, err = dc.restart(ctx, dir)
		if err != nil {
			return err
		}
	} else {
		if err := dc.create(ctx, dir, cfgPath, names, addrs); err != nil {
			return err
		}
	}

	fmt.Fprintf(stderr, "waiting for %d nodes to be ready\n", len(names))
	nodes, err := dc.waitReady(ctx, cfgPath, names)
	if err != nil {
		return err
	}
	if err := writeNodes(stdout, formatTable, nodes); err != nil {
		return err
	}
	again := selfCommand()
	fmt.Fprintf(stdout, `
Cluster running in %s (node logs in %s/NAME/%s).
  export CURATOR_CONFIG=%s
  %s node ls

Press Ctrl-C to stop every node; run '%s dev --dir %s' to start them again.
`, dir, filepath.Join(dir, devNodesDir), devLogFile, shellQuote(cfgPath), again, again, shellQuote(dir))
	dc.watch(ctx)
	<-ctx.Done()
	fmt.Fprintln(stderr, "stopping every node")
	return nil
}

func devNames(managers, workers int) []string {
	var names []string
	for i := range managers {
		names = append(names, "manager-"+strconv.Itoa(i+1))
	}
	for i := range workers {
		names = append(names, "worker-"+strconv.Itoa(i+1))
	}
	return names
}

// create makes a new cluster in dir: init, managers one by one, workers.
func (dc *devCluster) create(ctx context.Context, dir, cfgPath string, names []string, addrs []netip.Addr) error {
	listen := func(i int) string { return netip.AddrPortFrom(addrs[i], devPort).String() }
	first := names[0]
	n, err := dc.start(dir, first, "init", "--listen", listen(0), "--name", first)
	if err != nil {
		return err
	}
	adminCfg := filepath.Join(n.dataDir, node.AdminDir, client.ConfigFileName)
	fmt.Fprintf(dc.stderr, "started %s on %s (log: %s)\n", first, listen(0), filepath.Join(n.dataDir, devLogFile))
	if err := dc.waitFor(ctx, n, "the admin config", func(context.Context) error {
		_, err := os.Stat(adminCfg)
		return err
	}); err != nil {
		return err
	}
	var managers []string
	for i, name := range names {
		if strings.HasPrefix(name, "manager-") {
			managers = append(managers, listen(i))
		}
	}
	if err := copyDevConfig(adminCfg, cfgPath, managers); err != nil {
		return err
	}
	cl, err := dialDev(ctx, cfgPath)
	if err != nil {
		return err
	}
	defer cl.Close()

	var managerToken, workerToken string
	if err := dc.waitFor(ctx, n, "the join tokens", func(ctx context.Context) error {
		var err error
		if managerToken, err = cl.Token(ctx, "manager"); err != nil {
			return err
		}
		workerToken, err = cl.Token(ctx, "worker")
		return err
	}); err != nil {
		return err
	}

	// Managers join one at a time, each a voter before the next, so that
	// the quorum grows a voter at a time. Workers join together;
	// waitReady waits for them. Tokens go in the environment, not on the
	// command line where `ps` shows them.
	for i := 1; i < len(names); i++ {
		name := names[i]
		token := workerToken
		if strings.HasPrefix(name, "manager-") {
			token = managerToken
		}
		jn, err := dc.startEnv(dir, name, []string{joinTokenEnv + "=" + token}, "join", "--listen", listen(i), "--name", name,
			"--manager", listen(0))
		if err != nil {
			return err
		}
		fmt.Fprintf(dc.stderr, "started %s on %s\n", name, listen(i))
		if token == workerToken {
			continue
		}
		if err := dc.waitFor(ctx, jn, name+" to be an etcd voter", func(ctx context.Context) error {
			return isVoter(ctx, cl, name)
		}); err != nil {
			return err
		}
	}
	return nil
}

// restart starts every node found in dir with `agent run`.
func (dc *devCluster) restart(ctx context.Context, dir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, devNodesDir))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && node.Initialised(filepath.Join(dir, devNodesDir, e.Name())) {
			names = append(names, e.Name())
		}
	}
	fmt.Fprintf(dc.stderr, "%s already holds a dev cluster: restarting its %d nodes from disk (--managers, --workers and --addresses are ignored: each node keeps its address)\n", dir, len(names))
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, err := dc.start(dir, name, "run"); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// start runs `curator agent VERB --data-dir DIR/nodes/NAME ARGS...` with its
// output in the node's agent.log.
func (dc *devCluster) start(dir, name, verb string, args ...string) (*devNode, error) {
	return dc.startEnv(dir, name, nil, verb, args...)
}

// startEnv is start with env added to the child's environment.
func (dc *devCluster) startEnv(dir, name string, env []string, verb string, args ...string) (*devNode, error) {
	dataDir := filepath.Join(dir, devNodesDir, name)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(filepath.Join(dataDir, devLogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child holds its own copy
	argv := append([]string{"agent", verb, "--data-dir", dataDir}, args...)
	proc := exec.Command(dc.self, argv...)
	proc.Stdout, proc.Stderr = log, log
	if env != nil {
		proc.Env = append(os.Environ(), env...)
	}
	proc.SysProcAttr = devProcAttr()
	if err := proc.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	n := &devNode{name: name, dataDir: dataDir, proc: proc, exited: make(chan struct{})}
	go func() {
		n.err = proc.Wait()
		close(n.exited)
	}()
	dc.mu.Lock()
	dc.nodes = append(dc.nodes, n)
	dc.mu.Unlock()
	return n, nil
}

// waitFor polls check until it succeeds, n exits, ctx ends or
// devStartTimeout passes.
func (dc *devCluster) waitFor(ctx context.Context, n *devNode, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, devStartTimeout)
	defer cancel()
	tick := time.NewTicker(devPoll)
	defer tick.Stop()
	var last error
	for {
		callCtx, callCancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(callCtx)
		callCancel()
		if last == nil {
			return nil
		}
		select {
		case <-n.exited:
			return fmt.Errorf("%s exited (%v) while dev waited for %s; see %s", n.name, n.err, what, filepath.Join(n.dataDir, devLogFile))
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("timed out waiting for %s (last: %v); see %s", what, last, filepath.Join(n.dataDir, devLogFile))
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// waitReady waits until every named node is ready and returns the node list.
func (dc *devCluster) waitReady(ctx context.Context, cfgPath string, names []string) ([]*pb.NodeView, error) {
	cl, err := dialDev(ctx, cfgPath)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	dc.mu.Lock()
	first := dc.nodes[0]
	dc.mu.Unlock()
	var nodes []*pb.NodeView
	err = dc.waitFor(ctx, first, "every node to be ready", func(ctx context.Context) error {
		if err := dc.anyExited(); err != nil {
			return err
		}
		var err error
		if nodes, err = cl.ListNodes(ctx); err != nil {
			return err
		}
		var notReady []string
		for _, name := range names {
			i := slices.IndexFunc(nodes, func(v *pb.NodeView) bool { return v.GetNode().GetName() == name })
			if i < 0 || nodes[i].GetNode().GetStatus() != pb.NodeStatus_NODE_STATUS_READY {
				notReady = append(notReady, name)
			}
		}
		if len(notReady) > 0 {
			return fmt.Errorf("not ready: %s", strings.Join(notReady, ", "))
		}
		return nil
	})
	return nodes, err
}

// anyExited reports a node that has exited.
func (dc *devCluster) anyExited() error {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	for _, n := range dc.nodes {
		select {
		case <-n.exited:
			return fmt.Errorf("%s exited (%v); see %s", n.name, n.err, filepath.Join(n.dataDir, devLogFile))
		default:
		}
	}
	return nil
}

// watch says on stderr when a node exits while the cluster runs (someone
// may be testing a failure on purpose, so dev carries on).
func (dc *devCluster) watch(ctx context.Context) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	for _, n := range dc.nodes {
		go func() {
			select {
			case <-n.exited:
				if ctx.Err() == nil {
					fmt.Fprintf(dc.stderr, "%s exited (%v); see %s\n", n.name, n.err, filepath.Join(n.dataDir, devLogFile))
				}
			case <-ctx.Done():
			}
		}()
	}
}

// stop stops every node and waits for them: the workers together, then the
// managers one at a time, last started first. Stopping managers together
// costs several seconds: the etcd leader tries to hand its leadership to
// members that are stopping too, and waits for that to time out. A node
// still running devStopGrace after its SIGTERM is killed.
func (dc *devCluster) stop() error {
	dc.mu.Lock()
	nodes := slices.Clone(dc.nodes)
	dc.mu.Unlock()
	var workers, managers []*devNode
	for _, n := range nodes {
		if strings.HasPrefix(n.name, "manager-") {
			managers = append(managers, n)
		} else {
			workers = append(workers, n)
		}
	}
	slices.Reverse(managers)
	var killed []string
	for _, batch := range append([][]*devNode{workers}, splitEach(managers)...) {
		killed = append(killed, stopNodes(batch)...)
	}
	if len(killed) > 0 {
		return fmt.Errorf("killed %s: still running %s after SIGTERM", strings.Join(killed, ", "), devStopGrace)
	}
	return nil
}

func splitEach(nodes []*devNode) [][]*devNode {
	var out [][]*devNode
	for _, n := range nodes {
		out = append(out, []*devNode{n})
	}
	return out
}

// stopNodes sends SIGTERM to nodes, SIGKILL to those still running after
// devStopGrace, and waits for all of them. It returns the killed ones.
func stopNodes(nodes []*devNode) []string {
	for _, n := range nodes {
		_ = n.proc.Process.Signal(syscall.SIGTERM) // fails only if it has exited
	}
	deadline := time.After(devStopGrace)
	var killed []string
	for _, n := range nodes {
		select {
		case <-n.exited:
			continue
		case <-deadline:
		}
		_ = n.proc.Process.Kill()
		<-n.exited
		killed = append(killed, n.name)
	}
	return killed
}

func dialDev(ctx context.Context, cfgPath string) (*client.Client, error) {
	cfg, err := client.LoadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	return client.Dial(ctx, cfg, cfgPath, client.WithRounds(1))
}

// isVoter says whether the node called name is an etcd voter.
func isVoter(ctx context.Context, cl *client.Client, name string) error {
	nodes, err := cl.ListNodes(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(nodes, func(v *pb.NodeView) bool { return v.GetNode().GetName() == name })
	if i < 0 {
		return fmt.Errorf("%s has not registered", name)
	}
	info, err := cl.ClusterInfo(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(info.GetVoters(), nodes[i].GetNode().GetId()) {
		return fmt.Errorf("%s is not a voter yet", name)
	}
	return nil
}

// copyDevConfig copies the admin config at from, with its CA, certificate
// and key, into the folder of to, naming managers as the managers.
func copyDevConfig(from, to string, managers []string) error {
	cfg, err := client.LoadConfig(from)
	if err != nil {
		return err
	}
	fromDir, toDir := filepath.Dir(from), filepath.Dir(to)
	for _, p := range []*string{&cfg.CA, &cfg.Cert, &cfg.Key} {
		src := *p
		if !filepath.IsAbs(src) {
			src = filepath.Join(fromDir, src)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("copy admin credential: %w", err)
		}
		base := filepath.Base(src)
		if err := os.WriteFile(filepath.Join(toDir, base), data, 0o600); err != nil {
			return fmt.Errorf("copy admin credential: %w", err)
		}
		*p = base
	}
	cfg.Managers = managers
	return cfg.Save(to)
}
