// Package localcluster brings a cluster of `curator agent` processes up on
// this host: the first node with `agent init`; the other managers one at a
// time with `agent join` and the manager token, each an etcd voter before
// the next, so that the quorum grows a voter at a time; then the workers
// together; then it waits until every node is ready. `curator dev` and the
// end-to-end tests (test/) bring their clusters up with it. How a process
// is started is the caller's (a Starter): dev runs its nodes on the
// process provider, the tests with process attributes of their own.
package localcluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/internal/nodeport"
	"github.com/curatorproject/curator/node"
	pb "github.com/curatorproject/curator/proto"
)

// Defaults of Config.
const (
	// DefaultStepTimeout bounds each step of the bring-up: the first node
	// answering, one manager becoming a voter, every node ready.
	DefaultStepTimeout = 2 * time.Minute
	// DefaultPoll is how often a step checks its condition.
	DefaultPoll = 200 * time.Millisecond
	// callTimeout bounds one check's calls to the cluster.
	callTimeout = 10 * time.Second
	// healthTimeout bounds one node's /healthz.
	healthTimeout = 2 * time.Second
	// DefaultQuorumGrace is how long the nodes' wait goes on while the
	// managers answer that the quorum is lost: managers that hold a
	// majority of the voters elect an etcd leader within seconds of
	// starting, so a loss that lasts longer is one they cannot mend (the
	// other voters are gone), and waiting the whole step says nothing.
	DefaultQuorumGrace = 20 * time.Second
)

// JoinTokenEnv is the environment variable `curator agent join` reads its
// token from when --token is not given: the token stays out of `ps`.
const JoinTokenEnv = "CURATOR_JOIN_TOKEN"

// Node is one node of the cluster to bring up.
type Node struct {
	Name    string
	Manager bool
}

// Launch is one agent process to start: `curator agent VERB --data-dir DIR
// --listen ADDR ARGS...` with Env added to the environment, where the
// Starter chooses DIR and ADDR.
type Launch struct {
	Node Node
	// Verb is "init" or "join".
	Verb string
	Args []string
	Env  map[string]string
}

// Process is an agent process a Starter started.
type Process interface {
	// Address is the IP:PORT the node listens on.
	Address() string
	DataDir() string
	// LogFile is where the process's output goes.
	LogFile() string
	// Exited is nil while the process runs, and says how it ended once it
	// has.
	Exited() error
}

// Removable is a Process whose machine its group may take away on purpose
// while the cluster comes back (a rollout that was under way when the
// cluster stopped goes on, and replaces it): Removed says it was, and the
// bring-up neither waits for its node nor takes its exit for a failure.
// dev's processes are removable; a Process that is not never is.
type Removable interface {
	Removed() bool
}

// removed says whether p's machine was taken away on purpose.
func removed(p Process) bool {
	rp, ok := p.(Removable)
	return ok && rp.Removed()
}

// Starter starts one agent process and returns at once.
type Starter func(ctx context.Context, l Launch) (Process, error)

// Config is a cluster to bring up.
type Config struct {
	// Nodes in the order they start: the first is a manager and runs
	// `agent init`; managers come before workers.
	Nodes []Node
	Start Starter
	// ClientConfig, if set, is where Up writes a client config that names
	// every manager, with the admin credential copied beside it.
	ClientConfig string
	// Progress gets a line for every node started; default none.
	Progress io.Writer
	// StepTimeout and Poll default to DefaultStepTimeout and DefaultPoll.
	StepTimeout time.Duration
	Poll        time.Duration
	// QuorumGrace defaults to DefaultQuorumGrace.
	QuorumGrace time.Duration
}

// Validate says what is wrong with c, if anything.
func (c Config) Validate() error {
	if len(c.Nodes) == 0 {
		return errors.New("no nodes")
	}
	if c.Start == nil {
		return errors.New("no starter")
	}
	seen := map[string]bool{}
	for i, n := range c.Nodes {
		switch {
		case n.Name == "":
			return fmt.Errorf("node %d has no name", i)
		case seen[n.Name]:
			return fmt.Errorf("node %s twice", n.Name)
		case n.Manager && i > 0 && !c.Nodes[i-1].Manager:
			return fmt.Errorf("manager %s after a worker: managers start first", n.Name)
		}
		seen[n.Name] = true
	}
	if !c.Nodes[0].Manager {
		return fmt.Errorf("the first node, %s, must be a manager", c.Nodes[0].Name)
	}
	if c.StepTimeout < 0 || c.Poll < 0 || c.QuorumGrace < 0 {
		return errors.New("negative step timeout, poll or quorum grace")
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.StepTimeout = cmp.Or(c.StepTimeout, DefaultStepTimeout)
	c.Poll = cmp.Or(c.Poll, DefaultPoll)
	c.QuorumGrace = cmp.Or(c.QuorumGrace, DefaultQuorumGrace)
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// Cluster is a cluster Up brought up, or whose nodes Resume waited for.
type Cluster struct {
	// Procs are the node processes by node name.
	Procs map[string]Process
	// AdminConfig is the admin client config the first node wrote.
	AdminConfig string
	// Nodes are the nodes as listed once every one was ready.
	Nodes []*pb.NodeView
}

// run is one bring-up: the config, the processes started so far in order,
// and the admin client.
type run struct {
	cfg   Config
	names []string
	procs map[string]Process
	cl    *client.Client
	// gone: since when each Removable process was seen exited and not
	// (yet) removed.
	gone map[string]time.Time
}

// removeGrace is how long a Removable process may be seen exited before
// its machine's removal is: a provider stops the process first, then
// drops its record.
const removeGrace = 5 * time.Second

// Up brings the cluster of cfg up and returns once every node is ready. On
// error the processes it started are left running: the caller stops them,
// as it does after success.
func Up(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("local cluster: %w", err)
	}
	r := &run{cfg: cfg.withDefaults(), procs: map[string]Process{}}
	first, adminCfg, err := r.init(ctx, Launch{Node: cfg.Nodes[0], Verb: "init", Args: []string{"--name", cfg.Nodes[0].Name}})
	if err != nil {
		return nil, err
	}
	defer r.cl.Close()

	var managerToken, workerToken string
	if err := r.waitFor(ctx, "the join tokens", func(ctx context.Context) error {
		var err error
		if managerToken, err = r.cl.Token(ctx, "manager"); err != nil {
			return err
		}
		workerToken, err = r.cl.Token(ctx, "worker")
		return err
	}); err != nil {
		return nil, err
	}

	managers := []string{first.Address()}
	for _, n := range cfg.Nodes[1:] {
		token := workerToken
		if n.Manager {
			token = managerToken
		}
		if _, err := r.start(ctx, Launch{
			Node: n, Verb: "join",
			Args: []string{"--name", n.Name, "--manager", first.Address()},
			Env:  map[string]string{JoinTokenEnv: token},
		}); err != nil {
			return nil, err
		}
		if !n.Manager {
			continue // workers join together; waitReady waits for them
		}
		managers = append(managers, r.procs[n.Name].Address())
		if err := r.waitFor(ctx, n.Name+" to be an etcd voter", func(ctx context.Context) error {
			return isVoter(ctx, r.cl, n.Name)
		}); err != nil {
			return nil, err
		}
	}
	if cfg.ClientConfig != "" {
		if err := writeClientConfig(adminCfg, cfg.ClientConfig, managers); err != nil {
			return nil, err
		}
	}
	nodes, err := r.waitReady(ctx)
	if err != nil {
		return nil, err
	}
	return &Cluster{Procs: r.procs, AdminConfig: adminCfg, Nodes: nodes}, nil
}

// Resume waits until every node of procs (by node name), started again on
// the data dirs of a cluster Up brought up before, is ready, talking to the
// cluster through the client config at clientConfig.
func Resume(ctx context.Context, cfg Config, clientConfig string, procs map[string]Process) (*Cluster, error) {
	cfg = cfg.withDefaults()
	r := &run{cfg: cfg, procs: procs}
	for name := range procs {
		r.names = append(r.names, name)
	}
	slices.Sort(r.names)
	var err error
	if r.cl, err = dial(ctx, clientConfig); err != nil {
		return nil, err
	}
	defer r.cl.Close()
	nodes, err := r.waitReady(ctx)
	if err != nil {
		return nil, err
	}
	return &Cluster{Procs: procs, Nodes: nodes}, nil
}

// init starts the first node (l runs `agent init`), waits for the admin
// config it writes and connects r's client with it.
func (r *run) init(ctx context.Context, l Launch) (first Process, adminCfg string, err error) {
	if first, err = r.start(ctx, l); err != nil {
		return nil, "", err
	}
	adminCfg = filepath.Join(first.DataDir(), node.AdminDir, client.ConfigFileName)
	if err := r.waitFor(ctx, "the admin config "+adminCfg, func(context.Context) error {
		_, err := os.Stat(adminCfg)
		return err
	}); err != nil {
		return nil, "", err
	}
	if r.cl, err = dial(ctx, adminCfg); err != nil {
		return nil, "", err
	}
	return first, adminCfg, nil
}

// start starts l's process and notes it.
func (r *run) start(ctx context.Context, l Launch) (Process, error) {
	p, err := r.cfg.Start(ctx, l)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", l.Node.Name, err)
	}
	r.names = append(r.names, l.Node.Name)
	r.procs[l.Node.Name] = p
	fmt.Fprintf(r.cfg.Progress, "started %s on %s (log: %s)\n", l.Node.Name, p.Address(), p.LogFile())
	return p, nil
}

// exited reports the first started process that has exited.
func (r *run) exited() error {
	now := time.Now()
	for _, name := range r.names {
		p := r.procs[name]
		err := p.Exited()
		if err == nil {
			continue
		}
		if _, ok := p.(Removable); ok {
			if removed(p) {
				continue
			}
			if r.gone == nil {
				r.gone = map[string]time.Time{}
			}
			if since, seen := r.gone[name]; !seen || now.Sub(since) < removeGrace {
				if !seen {
					r.gone[name] = now
				}
				continue
			}
		}
		return fmt.Errorf("%s exited (%v); see %s", name, err, p.LogFile())
	}
	return nil
}

// waitFor polls check until it succeeds, a process exits, ctx ends or the
// step timeout passes.
func (r *run) waitFor(ctx context.Context, what string, check func(context.Context) error) error {
	return Wait(ctx, r.cfg.StepTimeout, r.cfg.Poll, what, check, r.exited)
}

// Wait polls check every poll, each call bounded by its own timeout,
// until it succeeds, stop reports why waiting is pointless (a process
// exited), ctx ends or timeout passes; the error says what it waited for
// and the last check's error.
func Wait(ctx context.Context, timeout, poll time.Duration, what string, check func(context.Context) error, stop func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		callCtx, callCancel := context.WithTimeout(ctx, callTimeout)
		last := check(callCtx)
		callCancel()
		if last == nil {
			return nil
		}
		if err := stop(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("timed out after %s waiting for %s (last: %v)", timeout, what, last)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// waitReady waits until every started node is ready and returns the list.
// It gives up early, with the managers' own word (client.ErrQuorumLost),
// once they have said for QuorumGrace that the quorum is lost, and says
// at once that it waits for one.
func (r *run) waitReady(ctx context.Context) ([]*pb.NodeView, error) {
	var nodes []*pb.NodeView
	var lostSince time.Time
	var quorumGone error
	check := func(ctx context.Context) error {
		var err error
		if nodes, err = r.cl.ListNodes(ctx); err != nil {
			if msg := r.quorumLostHealth(ctx); msg != "" && !errors.Is(err, client.ErrQuorumLost) {
				// A manager whose etcd cannot join its cluster serves
				// no call: its /healthz says why.
				err = fmt.Errorf("%w: %s", client.ErrQuorumLost, msg)
			}
			switch {
			case !errors.Is(err, client.ErrQuorumLost):
				lostSince = time.Time{}
			case lostSince.IsZero():
				lostSince = time.Now()
				fmt.Fprintf(r.cfg.Progress, "the managers say the quorum is lost: waiting up to %s for those started to make one\n", r.cfg.QuorumGrace)
			case time.Since(lostSince) >= r.cfg.QuorumGrace:
				quorumGone = fmt.Errorf("the quorum is still lost %s after the managers first said so: %w", r.cfg.QuorumGrace, err)
			}
			return err
		}
		if notReady := r.notReady(nodes); len(notReady) > 0 {
			return fmt.Errorf("not ready: %s", strings.Join(notReady, ", "))
		}
		return nil
	}
	stop := func() error {
		if err := r.exited(); err != nil {
			return err
		}
		return quorumGone
	}
	err := Wait(ctx, r.cfg.StepTimeout, r.cfg.Poll, "every node to be ready", check, stop)
	return nodes, err
}

// quorumLostHealth is what the first started node whose /healthz says the
// quorum is lost says about it ("" when none does).
func (r *run) quorumLostHealth(ctx context.Context) string {
	for _, name := range r.names {
		host, port, err := net.SplitHostPort(r.procs[name].Address())
		if err != nil {
			continue
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			continue
		}
		url := "http://" + net.JoinHostPort(host, strconv.Itoa(p+nodeport.HTTP)) + "/healthz"
		hctx, cancel := context.WithTimeout(ctx, healthTimeout)
		req, err := http.NewRequestWithContext(hctx, http.MethodGet, url, nil)
		if err != nil {
			cancel()
			continue
		}
		var h struct{ Quorum, Message string }
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			err = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&h)
			resp.Body.Close()
		}
		cancel()
		if err == nil && h.Quorum == "lost" && h.Message != "" {
			return h.Message
		}
	}
	return ""
}

// notReady names the started nodes not ready in nodes, but for those
// whose machines were removed on purpose.
func (r *run) notReady(nodes []*pb.NodeView) []string {
	var names []string
	for _, name := range r.names {
		i := slices.IndexFunc(nodes, func(v *pb.NodeView) bool { return v.GetNode().GetName() == name })
		if (i < 0 || nodes[i].GetNode().GetStatus() != pb.NodeStatus_NODE_STATUS_READY) && !removed(r.procs[name]) {
			names = append(names, name)
		}
	}
	return names
}

// dial connects to the cluster with the client config at path, leaving no
// manager cache beside it: that is for the operator's own commands.
func dial(ctx context.Context, path string) (*client.Client, error) {
	cfg, err := client.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	return client.Dial(ctx, cfg, path, client.WithRounds(1), client.WithCachePath(""))
}

// isVoter says whether the node called name is an etcd voter.
func isVoter(ctx context.Context, cl *client.Client, name string) error {
	info, err := cl.ClusterInfo(ctx)
	if err != nil {
		return err
	}
	for _, id := range info.GetVoters() {
		if info.GetNames()[id] == name {
			return nil
		}
	}
	return fmt.Errorf("%s is not a voter yet", name)
}

// writeClientConfig copies the admin config at from, with its CA,
// certificate and key, into the folder of to, naming managers as the
// managers.
func writeClientConfig(from, to string, managers []string) error {
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
