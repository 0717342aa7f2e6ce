// Package swarmtest brings up a real Docker Swarm of several engines on
// this one machine, for tests: one dockerd per network namespace, the
// namespaces joined by a bridge in a namespace of its own, on a private
// subnet that exists only there (no default route, nothing on the host's
// network). It is for tests only, and needs root, dockerd, ip, nsenter and
// unshare: Available says why it cannot run.
//
// Each engine runs as
//
//	nsenter --net=/var/run/netns/NAME unshare --mount --uts --propagation private sh -c 'hostname NAME; exec dockerd ...'
//
// nsenter, not `ip netns exec`, which remounts /sys and hides the cgroup
// mount dockerd needs ("Devices cgroup isn't mounted"). The private mount
// namespace keeps every mount dockerd makes out of the host's (they go
// with the engine's last process) and hides a system containerd's socket,
// so each dockerd starts a containerd of its own. The UTS namespace gives
// the engine its own hostname, which Swarm shows as the node's. Each
// engine has its own config file (else dockerd reads the host's
// daemon.json), data root, exec root, pidfile and unix socket, the vfs
// storage driver, and no iptables, masquerading or default bridge: the
// host's own engine, and its firewall, are never touched.
package swarmtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
)

// Defaults of Config.
const (
	// DefaultDispatcherHeartbeat is the Swarm's dispatcher heartbeat: a
	// worker that misses it a few times is Down (about 3 s at 1 s, instead
	// of Swarm's 5 s default and about 15 s).
	DefaultDispatcherHeartbeat = time.Second
	// DefaultStartTimeout bounds how long an engine may take to answer
	// after it is started.
	DefaultStartTimeout = 60 * time.Second
	// DefaultStopTimeout is how long Stop waits for an engine to exit
	// after SIGTERM before it kills it.
	DefaultStopTimeout = 20 * time.Second
)

// Subnet is the private subnet of every harness. Each harness has a bridge
// namespace of its own, so harnesses running at once do not meet.
const Subnet = "10.213.0.0/24"

// SwarmPort is the port Swarm's managers listen on (its default).
const SwarmPort = 2377

// netnsDir is where `ip netns` keeps its named namespaces.
const netnsDir = "/var/run/netns"

// Config says what Swarm to bring up.
type Config struct {
	// Managers is how many engines are Swarm managers (at least 1: the
	// first inits the Swarm); Workers how many are workers.
	Managers, Workers int
	// Spare is how many more engines are started outside the Swarm (for
	// machines a test makes, whose agents join them to it).
	Spare int
	// DispatcherHeartbeat is the Swarm's dispatcher heartbeat period.
	DispatcherHeartbeat time.Duration
	// NoSwarm starts the engines without forming a Swarm.
	NoSwarm bool
}

// Validate says whether the config can be brought up.
func (c Config) Validate() error {
	if c.Managers < 1 && !c.NoSwarm {
		return fmt.Errorf("swarmtest: %d managers: a Swarm needs at least one", c.Managers)
	}
	if c.Managers < 0 || c.Workers < 0 || c.Spare < 0 || c.Managers+c.Workers+c.Spare == 0 {
		return fmt.Errorf("swarmtest: %d managers, %d workers and %d spare engines: no engine to start", c.Managers, c.Workers, c.Spare)
	}
	if c.Managers+c.Workers+c.Spare > 200 {
		return fmt.Errorf("swarmtest: %d engines: the subnet has room for 200", c.Managers+c.Workers+c.Spare)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.DispatcherHeartbeat == 0 {
		c.DispatcherHeartbeat = DefaultDispatcherHeartbeat
	}
	return c
}

// Available returns nil when a harness can run here, else why not.
func Available() error {
	if os.Getenv("TEST_SRCDIR") != "" {
		return errors.New("running under Bazel, whose test sandbox cannot host network namespaces and Docker engines")
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, dockerd)")
	}
	for _, bin := range []string{"dockerd", "ip", "nsenter", "unshare"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("needs %s in PATH: %v", bin, err)
		}
	}
	return nil
}

// Cluster is a harness: its engines, in order (managers first, the first
// one inited the Swarm), their bridge, and what they keep on disk.
type Cluster struct {
	// Engines are the managers, then the workers, then the spare
	// engines (Spare).
	Engines []*Engine
	// Prefix starts the name of every namespace, and the hostname of
	// every engine, of this harness.
	Prefix string

	cfg      Config
	dir      string
	bridgeNS string
	closeMu  sync.Mutex
	closed   bool
}

// Engine is one Docker engine of a harness: a dockerd in its own network
// namespace.
type Engine struct {
	// Name is the engine's hostname (the Swarm node's) and its network
	// namespace's name.
	Name string
	// Addr is its address on the harness's subnet.
	Addr string
	// Socket is the path of its API socket; Host the same as a client
	// host ("unix://...").
	Socket, Host string
	// Manager says whether it joined the Swarm as a manager.
	Manager bool
	// NodeID is its Swarm node ID ("" without a Swarm).
	NodeID string
	// Client talks to it (API version negotiated).
	Client *client.Client

	dir string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

// Start brings up cfg's engines and Swarm (every node Ready, every manager
// reachable), and tears them down when the
// test ends. It skips the test, saying why, where the harness cannot run.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("swarmtest: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := New(ctx, cfg)
	if c != nil {
		t.Cleanup(func() {
			if t.Failed() {
				c.dumpLogs(t)
			}
			if err := c.Close(); err != nil {
				t.Errorf("swarmtest: tear-down: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("swarmtest: %v", err)
	}
	return c
}

// New brings up cfg's engines and Swarm. On an error it returns what it
// made (nil if nothing), for the caller to Close.
func New(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := Available(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	var b [3]byte
	_, _ = rand.Read(b[:])
	prefix := "swt" + hex.EncodeToString(b[:])
	// A short dir: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", prefix+"-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Prefix: prefix, cfg: cfg, dir: dir, bridgeNS: prefix + "-br"}
	if err := c.makeBridge(ctx); err != nil {
		return c, err
	}
	for i := range cfg.Managers + cfg.Workers + cfg.Spare {
		manager := i < cfg.Managers
		name := fmt.Sprintf("%s-w%d", prefix, i-cfg.Managers)
		switch {
		case manager:
			name = fmt.Sprintf("%s-m%d", prefix, i)
		case i >= cfg.Managers+cfg.Workers:
			name = fmt.Sprintf("%s-s%d", prefix, i-cfg.Managers-cfg.Workers)
		}
		e := &Engine{Name: name, Addr: fmt.Sprintf("10.213.0.%d", 10+i), Manager: manager, dir: filepath.Join(dir, name)}
		e.Socket = filepath.Join(e.dir, "docker.sock")
		e.Host = "unix://" + e.Socket
		c.Engines = append(c.Engines, e)
		if err := c.addEngine(ctx, e, i); err != nil {
			return c, err
		}
	}
	// The engines come up together: each takes a second or more.
	errs := make([]error, len(c.Engines))
	var wg sync.WaitGroup
	for i, e := range c.Engines {
		wg.Go(func() { errs[i] = e.Start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	if cfg.NoSwarm {
		return c, nil
	}
	return c, c.formSwarm(ctx)
}

// ip runs `ip args...`.
func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// makeBridge makes the namespace of the bridge, and the bridge.
func (c *Cluster) makeBridge(ctx context.Context) error {
	for _, args := range [][]string{
		{"netns", "add", c.bridgeNS},
		{"-n", c.bridgeNS, "link", "set", "lo", "up"},
		{"-n", c.bridgeNS, "link", "add", "br0", "type", "bridge"},
		{"-n", c.bridgeNS, "link", "set", "br0", "up"},
	} {
		if err := ip(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// addEngine makes engine e's namespace, its link to the bridge, its
// address, and its dirs and config file. The veth pair is made with its
// ends in the two namespaces at once, so no name is ever taken in the
// host's.
func (c *Cluster) addEngine(ctx context.Context, e *Engine, i int) error {
	peer := fmt.Sprintf("v%d", i)
	for _, args := range [][]string{
		{"netns", "add", e.Name},
		{"link", "add", "eth0", "netns", e.Name, "type", "veth", "peer", "name", peer, "netns", c.bridgeNS},
		{"-n", c.bridgeNS, "link", "set", peer, "master", "br0"},
		{"-n", c.bridgeNS, "link", "set", peer, "up"},
		{"-n", e.Name, "addr", "add", e.Addr + "/24", "dev", "eth0"},
		{"-n", e.Name, "link", "set", "eth0", "up"},
		{"-n", e.Name, "link", "set", "lo", "up"},
	} {
		if err := ip(ctx, args...); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(e.dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(e.dir, "daemon.json"), []byte("{}\n"), 0o600)
}

// formSwarm inits the Swarm on the first engine and joins the others,
// managers one at a time first (each a Raft member before the next), then
// the workers.
func (c *Cluster) formSwarm(ctx context.Context) error {
	first := c.Engines[0]
	spec := swarm.Spec{}
	spec.Dispatcher.HeartbeatPeriod = c.cfg.DispatcherHeartbeat
	if _, err := first.Client.SwarmInit(ctx, client.SwarmInitOptions{
		ListenAddr:    first.swarmAddr(),
		AdvertiseAddr: first.swarmAddr(),
		Spec:          spec,
	}); err != nil {
		return fmt.Errorf("swarm init on %s: %w", first.Name, err)
	}
	sw, err := first.Client.SwarmInspect(ctx, client.SwarmInspectOptions{})
	if err != nil {
		return fmt.Errorf("swarm inspect on %s: %w", first.Name, err)
	}
	for _, e := range c.Engines[1:c.swarmSize()] {
		token := sw.Swarm.JoinTokens.Worker
		if e.Manager {
			token = sw.Swarm.JoinTokens.Manager
		}
		if err := e.Join(ctx, token, first.swarmAddr()); err != nil {
			return err
		}
	}
	for _, e := range c.Engines[:c.swarmSize()] {
		info, err := e.Client.Info(ctx, client.InfoOptions{})
		if err != nil {
			return fmt.Errorf("info of %s: %w", e.Name, err)
		}
		e.NodeID = info.Info.Swarm.NodeID
	}
	return c.waitSettled(ctx)
}

// swarmSize is how many of the engines, the first, form the Swarm.
func (c *Cluster) swarmSize() int { return c.cfg.Managers + c.cfg.Workers }

// Spare returns the engines started outside the Swarm (Config.Spare).
func (c *Cluster) Spare() []*Engine { return c.Engines[c.swarmSize():] }

// waitSettled waits until the first engine's node list shows every engine
// Ready, and every manager reachable: a node just joined is briefly in an
// unknown state.
func (c *Cluster) waitSettled(ctx context.Context) error {
	var last error
	for {
		last = c.settled(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the Swarm did not settle: %v", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) settled(ctx context.Context) error {
	res, err := c.Engines[0].Client.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return err
	}
	byID := map[string]swarm.Node{}
	for _, n := range res.Items {
		byID[n.ID] = n
	}
	for _, e := range c.Engines[:c.swarmSize()] {
		n, ok := byID[e.NodeID]
		switch {
		case !ok:
			return fmt.Errorf("%s (node %s) is not listed", e.Name, e.NodeID)
		case n.Status.State != swarm.NodeStateReady:
			return fmt.Errorf("%s is %s", e.Name, n.Status.State)
		case e.Manager && (n.ManagerStatus == nil || n.ManagerStatus.Reachability != swarm.ReachabilityReachable):
			return fmt.Errorf("manager %s is not reachable yet", e.Name)
		}
	}
	return nil
}

// JoinTokens returns the Swarm's worker and manager join tokens, asked of
// engine e (a manager).
func (e *Engine) JoinTokens(ctx context.Context) (worker, manager string, err error) {
	sw, err := e.Client.SwarmInspect(ctx, client.SwarmInspectOptions{})
	if err != nil {
		return "", "", fmt.Errorf("swarm inspect on %s: %w", e.Name, err)
	}
	return sw.Swarm.JoinTokens.Worker, sw.Swarm.JoinTokens.Manager, nil
}

// Join joins engine e to the Swarm of the manager at remote (IP:PORT)
// with token.
func (e *Engine) Join(ctx context.Context, token, remote string) error {
	if _, err := e.Client.SwarmJoin(ctx, client.SwarmJoinOptions{
		ListenAddr:    e.swarmAddr(),
		AdvertiseAddr: e.swarmAddr(),
		RemoteAddrs:   []string{remote},
		JoinToken:     token,
	}); err != nil {
		return fmt.Errorf("swarm join of %s: %w", e.Name, err)
	}
	return nil
}

// SwarmAddr is the address (IP:PORT) the engine's Swarm listens on and
// advertises.
func (e *Engine) SwarmAddr() string { return e.swarmAddr() }

func (e *Engine) swarmAddr() string { return fmt.Sprintf("%s:%d", e.Addr, SwarmPort) }

func (e *Engine) pidfile() string { return filepath.Join(e.dir, "docker.pid") }

// LogPath is the file the engine's dockerd (and its containerd) log to.
func (e *Engine) LogPath() string { return filepath.Join(e.dir, "dockerd.log") }

// startAttempts is how many times Start starts a dockerd that exits
// before it answers, as a machine's service manager restarts a daemon
// that fails while booting: on a loaded machine dockerd gives up on its
// containerd after a fixed wait ("timeout waiting for containerd to
// start") and exits.
const startAttempts = 3

// errExited marks a dockerd that exited before it answered.
var errExited = errors.New("exited before it answered")

// Start starts the engine's dockerd (again, after Kill or Stop) and waits
// until it answers, starting it again if it exits first.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cmd != nil {
		select {
		case <-e.done:
		default:
			return fmt.Errorf("engine %s is running", e.Name)
		}
	}
	var err error
	for range startAttempts {
		if err = e.startOnce(ctx); !errors.Is(err, errExited) {
			return err
		}
		// A containerd dockerd gave up on may still run, holding its
		// state: the next try starts on a machine with nothing running.
		if kerr := killNetns(e.Name); kerr != nil {
			return errors.Join(err, kerr)
		}
	}
	return err
}

// startOnce starts dockerd once and waits until it answers or exits.
func (e *Engine) startOnce(ctx context.Context) error {
	log, err := os.OpenFile(e.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	// nsenter, unshare and sh each exec the next: the process started is
	// dockerd itself, and its pid the one in its pidfile. A system
	// containerd's socket dir, if any, is hidden under a tmpfs so that
	// dockerd starts a containerd of its own.
	script := `hostname "$0" || exit 1
if [ -d /run/containerd ]; then mount -t tmpfs tmpfs /run/containerd || exit 1; fi
exec dockerd "$@"`
	cmd := exec.Command("nsenter", "--net="+filepath.Join(netnsDir, e.Name), "--",
		"unshare", "--mount", "--uts", "--propagation", "private", "--",
		"sh", "-c", script, e.Name,
		"--config-file", filepath.Join(e.dir, "daemon.json"),
		"--data-root", filepath.Join(e.dir, "data"),
		"--exec-root", filepath.Join(e.dir, "exec"),
		"--pidfile", e.pidfile(),
		"-H", e.Host,
		"--storage-driver", "vfs",
		"--iptables=false", "--ip6tables=false", "--ip-masq=false", "--bridge=none",
	)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", e.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(done)
	}()
	e.cmd, e.done = cmd, done
	if e.Client == nil {
		cli, err := client.New(client.WithHost(e.Host))
		if err != nil {
			return fmt.Errorf("client for %s: %w", e.Name, err)
		}
		e.Client = cli
	}
	return e.waitUp(ctx, done)
}

// waitUp waits until the engine answers a ping, or its process exits.
func (e *Engine) waitUp(ctx context.Context, done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultStartTimeout)
	defer cancel()
	var last error
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		_, err := e.Client.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true})
		pcancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-done:
			return fmt.Errorf("dockerd of %s %w (its log: %s): %v", e.Name, errExited, e.LogPath(), last)
		case <-ctx.Done():
			return fmt.Errorf("dockerd of %s did not answer: %v", e.Name, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Running says whether the engine's dockerd runs.
func (e *Engine) Running() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cmd == nil {
		return false
	}
	select {
	case <-e.done:
		return false
	default:
		return true
	}
}

// Kill kills every process of the engine's network namespace at once
// (dockerd and its containerd): the machine died.
func (e *Engine) Kill() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := killNetns(e.Name); err != nil {
		return err
	}
	if e.done != nil {
		<-e.done
	}
	return nil
}

// Stop stops the engine's dockerd by its pidfile (SIGTERM), and kills it
// and whatever else runs in its namespace if it has not exited after
// DefaultStopTimeout.
func (e *Engine) Stop() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopLocked()
}

func (e *Engine) stopLocked() error {
	var errs []error
	if e.done != nil {
		if pid, err := readPid(e.pidfile()); err == nil {
			_ = signalPid(pid, "CONT") // a Cut engine's dockerd is stopped
			if err := signalPid(pid, "TERM"); err != nil {
				errs = append(errs, err)
			}
		}
		select {
		case <-e.done:
		case <-time.After(DefaultStopTimeout):
			errs = append(errs, fmt.Errorf("dockerd of %s did not exit %s after SIGTERM: killed", e.Name, DefaultStopTimeout))
		}
	}
	// Its containerd exits after dockerd; what remains is killed.
	if err := killNetns(e.Name); err != nil {
		errs = append(errs, err)
	}
	if e.done != nil {
		<-e.done
	}
	return errors.Join(errs...)
}

// Restart stops the engine and starts it again.
func (e *Engine) Restart(ctx context.Context) error {
	if err := e.Stop(); err != nil {
		return err
	}
	return e.Start(ctx)
}

// Close tears the harness down: each engine stopped by its pidfile, what
// remains in each namespace killed, the namespaces deleted, the dirs
// removed. It is called by Start's cleanup; calling it again does nothing.
func (c *Cluster) Close() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	errs := make([]error, len(c.Engines))
	var wg sync.WaitGroup
	for i, e := range c.Engines {
		wg.Go(func() {
			err := e.Stop()
			if e.Client != nil {
				_ = e.Client.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, e := range c.Engines {
		errs = append(errs, deleteNetns(e.Name))
	}
	errs = append(errs, deleteNetns(c.bridgeNS))
	errs = append(errs, unmountUnder(c.dir))
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Leftovers lists what of the harness remains on the host after Close:
// namespaces, processes, mounts, files. Empty when the tear-down was
// clean.
func (c *Cluster) Leftovers() []string {
	var left []string
	if ents, err := os.ReadDir(netnsDir); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), c.Prefix) {
				left = append(left, "network namespace "+e.Name())
			}
		}
	}
	for _, p := range processesMentioning(c.dir) {
		left = append(left, "process "+p)
	}
	for _, m := range mountsMentioning(c.dir, c.Prefix) {
		left = append(left, "mount "+m)
	}
	if _, err := os.Stat(c.dir); err == nil {
		left = append(left, "dir "+c.dir)
	}
	return left
}

// dumpLogs shows the end of each engine's log.
func (c *Cluster) dumpLogs(t testing.TB) {
	t.Helper()
	for _, e := range c.Engines {
		b, err := os.ReadFile(e.LogPath())
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		t.Logf("swarmtest: end of %s's log:\n%s", e.Name, strings.Join(lines, "\n"))
	}
}

// NodesVia reads the Swarm's node list, by ID, through the first of
// engines that answers within timeout (a manager; a worker's engine, or
// one in an election, fails and the next is asked).
func NodesVia(ctx context.Context, engines []*Engine, timeout time.Duration) (map[string]swarm.Node, error) {
	var last error
	for _, e := range engines {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		list, err := e.Client.NodeList(cctx, client.NodeListOptions{})
		cancel()
		if err != nil {
			last = err
			continue
		}
		out := make(map[string]swarm.Node, len(list.Items))
		for _, n := range list.Items {
			out[n.ID] = n
		}
		return out, nil
	}
	return nil, fmt.Errorf("no engine answers with the Swarm's node list: %w", last)
}
