package main

// `curator-bench swarm`: how long a Docker Swarm's manager set takes to be
// repaired after a promotion cut short half-way (the Swarm node promoted,
// the consensus role not granted: the state the fault point
// swarm/after-promote leaves), by the curator's swarm sync, against the
// same repair made by hand.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"time"

	"github.com/moby/moby/api/types/swarm"
	mobyclient "github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/internal/localcluster"
	"github.com/curatorproject/curator/internal/swarmtest"
	pb "github.com/curatorproject/curator/proto"
)

// Defaults of `curator-bench swarm`.
const (
	DefaultSwarmRounds = 5
	// DefaultSwarmTimeout bounds one repair, and one return to a settled
	// cluster between rounds.
	DefaultSwarmTimeout = time.Minute
	// swarmPoll is how often a round compares the Swarm's managers with
	// the consensus nodes: the resolution of the figures.
	swarmPoll = 10 * time.Millisecond
	// swarmCallTimeout bounds one call to an engine.
	swarmCallTimeout = 2 * time.Second
)

type swarmBenchConfig struct {
	cluster clusterConfig
	rounds  int
	timeout time.Duration
}

// swarmBenchResult is the JSON line: seconds from the cut until the Swarm's
// managers are the consensus nodes again, repaired by the curator's swarm
// sync and by hand (a script with no think time: a lower bound for a
// person), and the curator's median over the by-hand one.
type swarmBenchResult struct {
	Cmd        string    `json:"cmd"`
	Managers   int       `json:"managers"`
	Rounds     int       `json:"rounds"`
	CuratorS   []float64 `json:"curator_s"`
	CuratorP50 float64   `json:"curator_p50_s"`
	CuratorP99 float64   `json:"curator_p99_s"`
	HandS      []float64 `json:"by_hand_s"`
	HandP50    float64   `json:"by_hand_p50_s"`
	HandP99    float64   `json:"by_hand_p99_s"`
	Ratio      float64   `json:"curator_over_by_hand,omitempty"`
	Error      string    `json:"error,omitempty"`
}

func newSwarmCommand() *cobra.Command {
	c := &swarmBenchConfig{}
	cmd := &cobra.Command{
		Use:   "swarm",
		Short: "A Swarm promotion cut half-way: how fast the curator repairs it, against by hand",
		Long: `Bring up a real Docker Swarm on this machine (one dockerd per network
namespace, as the tests' internal/swarmtest does: needs root, dockerd, ip,
nsenter and unshare) with --managers Swarm managers and one worker, and a
curator cluster on it: --managers managers and one worker, each agent given its
own engine (--docker-socket), the Swarm flavor on. Each round cuts a promotion
half-way: the worker's Swarm node is promoted through the engine API and nothing
else is done (the state the fault point swarm/after-promote leaves), and times
until the Swarm's managers are the consensus nodes again; then the worker is
demoted and the cluster settles.

First --rounds rounds repaired by the curator's swarm sync, then, with the
flavor off, --rounds rounds repaired by hand, scripted with no think time: the
steps an operator runs, 'docker node ls' (the Swarm's node list), 'curator node
ls', and 'curator node promote' of each Swarm manager whose node lacks the
consensus role. The by-hand figure is a lower bound for a person, who must also
notice the fault and type. The last line on stdout is one JSON object with the
figures.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSwarmBench(cmd.Context(), c, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.cluster.register(cmd)
	cmd.Flags().IntVar(&c.rounds, "rounds", DefaultSwarmRounds, "rounds of each repair")
	cmd.Flags().DurationVar(&c.timeout, "timeout", DefaultSwarmTimeout, "bound of one repair, and of settling between rounds")
	return cmd
}

func runSwarmBench(ctx context.Context, cfg *swarmBenchConfig, stdout, stderr io.Writer) error {
	managers, simBase, err := cfg.cluster.Validate()
	if err != nil {
		return err
	}
	if cfg.rounds < 1 || cfg.timeout <= 0 {
		return fmt.Errorf("--rounds %d, --timeout %s: want at least 1 round and a positive timeout", cfg.rounds, cfg.timeout)
	}
	if err := swarmtest.Available(); err != nil {
		return fmt.Errorf("cannot bring up a Swarm here: %w; run it as root where dockerd is installed", err)
	}
	p := newProgress(stderr)
	res := &swarmBenchResult{Cmd: "swarm", Managers: len(managers), Rounds: cfg.rounds}
	problems := func() []error {
		start := time.Now()
		sw, err := swarmtest.New(ctx, swarmtest.Config{Managers: len(managers), Workers: 1})
		if sw != nil {
			defer sw.Close()
		}
		if err != nil {
			return []error{fmt.Errorf("bring up the Swarm: %w", err)}
		}
		p.printf("Swarm of %d managers and a worker up in %s", len(managers), time.Since(start).Round(time.Millisecond))
		b := &swarmBench{cfg: cfg, sw: sw, p: p, managers: len(managers)}
		cfg.cluster.nodeArgs = map[string][]string{}
		for i := range managers {
			cfg.cluster.nodeArgs[fmt.Sprintf("manager-%d", i+1)] = engineArgs(sw.Engines[i])
		}
		c, err := startCluster(ctx, cfg.cluster, managers, p)
		if c != nil {
			defer c.close()
		}
		if err != nil {
			return []error{err}
		}
		b.c = c
		if err := b.setUp(ctx, netip.AddrPortFrom(simBase, uint16(cfg.cluster.port))); err != nil {
			return []error{err}
		}
		return b.measure(ctx, res)
	}()
	return finish(stdout, res, func(e string) { res.Error = e }, problems)
}

// engineArgs are the agent flags that give it engine e.
func engineArgs(e *swarmtest.Engine) []string {
	return []string{"--docker-socket", e.Socket, "--swarm-advertise-addr", e.Addr}
}

type swarmBench struct {
	cfg *swarmBenchConfig
	sw  *swarmtest.Cluster
	c   *cluster
	p   *progress
	// managers is how many managers the cluster has; worker the worker
	// node's ID.
	managers int
	worker   string
}

// setUp joins the worker node with the Swarm's worker engine, turns the
// flavor on and waits until the cluster is settled.
func (b *swarmBench) setUp(ctx context.Context, addr netip.AddrPort) error {
	w := b.sw.Engines[len(b.sw.Engines)-1]
	args := append([]string{"--name", "worker-1", "--manager", b.c.managers[0].listen.String()}, engineArgs(w)...)
	if _, err := b.c.start("worker-1", addr, []string{localcluster.JoinTokenEnv + "=" + b.c.workerToken}, "join", args...); err != nil {
		return err
	}
	if err := b.c.waitFor(ctx, "worker-1 to be ready", func(ctx context.Context) error {
		nodes, err := b.c.admin.ListNodes(ctx)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.GetNode().GetName() == "worker-1" && n.GetNode().GetStatus() == pb.NodeStatus_NODE_STATUS_READY {
				b.worker = n.GetNode().GetId()
				return nil
			}
		}
		return errors.New("not yet")
	}); err != nil {
		return err
	}
	on := true
	if _, err := b.c.admin.UpdateCluster(ctx, client.ClusterUpdate{Swarm: &on}); err != nil {
		return fmt.Errorf("turn the Swarm flavor on: %w", err)
	}
	return b.settle(ctx, "every node to report its Swarm node, the roles the Swarm's")
}

// measure runs the rounds: the curator's repairs, then by hand.
func (b *swarmBench) measure(ctx context.Context, res *swarmBenchResult) []error {
	var cur, hand []time.Duration
	for i := range b.cfg.rounds {
		d, err := b.round(ctx, nil)
		if err != nil {
			return []error{fmt.Errorf("curator round %d: %w", i+1, err)}
		}
		b.p.printf("curator round %d: repaired in %s", i+1, d.Round(time.Millisecond))
		cur = append(cur, d)
	}
	off := false
	if _, err := b.c.admin.UpdateCluster(ctx, client.ClusterUpdate{Swarm: &off}); err != nil {
		return []error{fmt.Errorf("turn the Swarm flavor off for the rounds by hand: %w", err)}
	}
	for i := range b.cfg.rounds {
		d, err := b.round(ctx, b.byHand)
		if err != nil {
			return []error{fmt.Errorf("round %d by hand: %w", i+1, err)}
		}
		b.p.printf("round %d by hand: repaired in %s", i+1, d.Round(time.Millisecond))
		hand = append(hand, d)
	}
	for _, d := range cur {
		res.CuratorS = append(res.CuratorS, secs(d))
	}
	for _, d := range hand {
		res.HandS = append(res.HandS, secs(d))
	}
	res.CuratorP50, res.CuratorP99 = secs(quantile(cur, 0.5)), secs(quantile(cur, 0.99))
	res.HandP50, res.HandP99 = secs(quantile(hand, 0.5)), secs(quantile(hand, 0.99))
	if res.HandP50 > 0 {
		res.Ratio = round3(res.CuratorP50 / res.HandP50)
	}
	b.p.printf("repaired by the curator: median %.3fs p99 %.3fs; by hand (scripted): median %.3fs p99 %.3fs", res.CuratorP50, res.CuratorP99, res.HandP50, res.HandP99)
	return nil
}

// round cuts a promotion of the worker half-way, times until the Swarm's
// managers are the consensus nodes again (repair, if not nil, runs right
// after the cut: the fix by hand), and puts the worker back.
func (b *swarmBench) round(ctx context.Context, repair func(context.Context) error) (time.Duration, error) {
	n, err := b.node(ctx, b.worker)
	if err != nil {
		return 0, err
	}
	if err := b.setRole(ctx, n.GetSwarmNodeId(), swarm.NodeRoleManager); err != nil {
		return 0, fmt.Errorf("cut: promote worker-1's Swarm node: %w", err)
	}
	start := time.Now()
	if repair != nil {
		if err := repair(ctx); err != nil {
			return 0, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.timeout)
	defer cancel()
	for {
		if err := b.agree(rctx); err == nil {
			break
		} else if rctx.Err() != nil {
			return 0, fmt.Errorf("not repaired within %s: %v", b.cfg.timeout, err)
		}
		time.Sleep(swarmPoll)
	}
	d := time.Since(start)
	// Back to a worker: the curator's demote (with the flavor off, its
	// etcd part alone, the Swarm's by hand).
	if _, err := b.c.admin.DemoteNode(ctx, b.worker); err != nil {
		return 0, fmt.Errorf("demote worker-1 after the round: %w", err)
	}
	if repair != nil {
		if err := b.setRole(ctx, n.GetSwarmNodeId(), swarm.NodeRoleWorker); err != nil {
			// A promoted engine now and then never joins the Swarm's
			// Raft, and the Swarm can then not demote it: take it out
			// and join it again, as an operator would.
			b.p.printf("the Swarm does not demote worker-1's Swarm node (%v): joining its engine again", err)
			if err := b.rejoin(ctx, n.GetSwarmNodeId()); err != nil {
				return 0, err
			}
		}
	}
	if err := b.settle(ctx, "worker-1 a worker again, the cluster settled"); err != nil {
		b.p.printf("not settled (%v): joining worker-1's engine again", err)
		if err := b.rejoin(ctx, n.GetSwarmNodeId()); err != nil {
			return 0, err
		}
		return d, b.settle(ctx, "worker-1 a worker again after joining its engine again")
	}
	return d, nil
}

// rejoin takes the worker's engine out of the Swarm (`docker swarm leave
// --force`), removes its Swarm node old (`docker node rm --force`) and
// joins the engine again as a worker; its agent reports the new Swarm
// node ID. Between rounds only: a promoted engine that never joined the
// Swarm's Raft cannot be demoted.
func (b *swarmBench) rejoin(ctx context.Context, old string) error {
	w := b.sw.Engines[len(b.sw.Engines)-1]
	if _, err := w.Client.SwarmLeave(ctx, mobyclient.SwarmLeaveOptions{Force: true}); err != nil {
		return fmt.Errorf("worker-1's engine: swarm leave --force: %w", err)
	}
	m := b.sw.Engines[0]
	var last error
	if err := b.c.waitFor(ctx, "worker-1's old Swarm node removed", func(ctx context.Context) error {
		_, last = m.Client.NodeRemove(ctx, old, mobyclient.NodeRemoveOptions{Force: true})
		return last
	}); err != nil {
		return err
	}
	token, _, err := m.JoinTokens(ctx)
	if err != nil {
		return err
	}
	return w.Join(ctx, token, m.SwarmAddr())
}

// byHand is what an operator runs: `docker node ls`, `curator node ls`,
// and `curator node promote` of each Swarm manager whose node lacks the
// consensus role.
func (b *swarmBench) byHand(ctx context.Context) error {
	list, err := b.swarmNodes(ctx)
	if err != nil {
		return fmt.Errorf("docker node ls: %w", err)
	}
	nodes, err := b.c.admin.ListNodes(ctx)
	if err != nil {
		return fmt.Errorf("curator node ls: %w", err)
	}
	for _, v := range nodes {
		n := v.GetNode()
		sn, ok := list[n.GetSwarmNodeId()]
		if ok && sn.Spec.Role == swarm.NodeRoleManager && !slices.Contains(n.GetRoles(), pb.Role_ROLE_CONSENSUS) {
			if _, err := b.c.admin.PromoteNode(ctx, n.GetId()); err != nil {
				return fmt.Errorf("curator node promote %s: %w", n.GetName(), err)
			}
		}
	}
	return nil
}

// agree says whether the Swarm's managers are the consensus nodes.
func (b *swarmBench) agree(ctx context.Context) error {
	list, err := b.swarmNodes(ctx)
	if err != nil {
		return err
	}
	nodes, err := b.c.admin.ListNodes(ctx)
	if err != nil {
		return err
	}
	var managers, consensus []string
	for id, sn := range list {
		if sn.Spec.Role == swarm.NodeRoleManager {
			managers = append(managers, id)
		}
	}
	for _, v := range nodes {
		if slices.Contains(v.GetNode().GetRoles(), pb.Role_ROLE_CONSENSUS) {
			consensus = append(consensus, v.GetNode().GetSwarmNodeId())
		}
	}
	slices.Sort(managers)
	slices.Sort(consensus)
	if !slices.Equal(managers, consensus) {
		return fmt.Errorf("the Swarm's managers %v, the consensus nodes' Swarm nodes %v", managers, consensus)
	}
	return nil
}

// settle waits until the roles agree with the Swarm, every node has its
// Swarm node, none is demoting, etcd has the managers as voters and no
// learner, and every Swarm node is ready and every manager reachable.
func (b *swarmBench) settle(ctx context.Context, what string) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.timeout)
	defer cancel()
	return b.c.waitFor(ctx, what, func(ctx context.Context) error {
		if err := b.agree(ctx); err != nil {
			return err
		}
		list, err := b.swarmNodes(ctx)
		if err != nil {
			return err
		}
		for id, sn := range list {
			if sn.Status.State != swarm.NodeStateReady {
				return fmt.Errorf("the Swarm's node %s is %s", id, sn.Status.State)
			}
			if sn.Spec.Role == swarm.NodeRoleManager && (sn.ManagerStatus == nil || sn.ManagerStatus.Reachability != swarm.ReachabilityReachable) {
				return fmt.Errorf("the Swarm's manager %s is not reachable yet", id)
			}
		}
		nodes, err := b.c.admin.ListNodes(ctx)
		if err != nil {
			return err
		}
		for _, v := range nodes {
			if n := v.GetNode(); n.GetSwarmNodeId() == "" || n.GetDemoting() {
				return fmt.Errorf("node %s: Swarm node %q, demoting %v", n.GetName(), n.GetSwarmNodeId(), n.GetDemoting())
			}
		}
		info, err := b.c.admin.ClusterInfo(ctx)
		if err != nil {
			return err
		}
		if len(info.GetVoters()) != b.managers || len(info.GetLearners()) != 0 {
			return fmt.Errorf("voters %v, learners %v", info.GetVoters(), info.GetLearners())
		}
		return nil
	})
}

// node returns node id's record.
func (b *swarmBench) node(ctx context.Context, id string) (*pb.Node, error) {
	nodes, err := b.c.admin.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	for _, v := range nodes {
		if v.GetNode().GetId() == id {
			return v.GetNode(), nil
		}
	}
	return nil, fmt.Errorf("node %s is not listed", id)
}

// swarmNodes reads the Swarm's node list, by ID, through the first engine
// that answers (a manager).
func (b *swarmBench) swarmNodes(ctx context.Context) (map[string]swarm.Node, error) {
	return swarmtest.NodesVia(ctx, b.sw.Engines, swarmCallTimeout)
}

// setRole makes Swarm node id a manager or a worker, through the first
// engine that takes it, again until one does (the Swarm refuses to demote
// a manager that has not joined its Raft yet) or --timeout has passed.
func (b *swarmBench) setRole(ctx context.Context, id string, role swarm.NodeRole) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.timeout)
	defer cancel()
	for {
		var errs []error
		for _, e := range b.sw.Engines {
			cctx, ccancel := context.WithTimeout(ctx, swarmCallTimeout)
			got, err := e.Client.NodeInspect(cctx, id, mobyclient.NodeInspectOptions{})
			if err == nil {
				spec := got.Node.Spec
				spec.Role = role
				_, err = e.Client.NodeUpdate(cctx, id, mobyclient.NodeUpdateOptions{Version: got.Node.Version, Spec: spec})
			}
			ccancel()
			if err == nil {
				return nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", e.Name, err))
		}
		select {
		case <-ctx.Done():
			return errors.Join(errs...)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
