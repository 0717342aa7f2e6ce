package main

// `curator-bench failover`: how fast a crashed (or frozen) curator leader is
// replaced, against etcd's own raft failover measured in the same run.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"syscall"
	"time"

	"github.com/curatorproject/curator/client"
	"github.com/spf13/cobra"
)

// Defaults of `curator-bench failover`.
const (
	DefaultFailoverRounds = 10
	// failoverPoll is how often a round asks whether a new leader
	// answers: the resolution of the figures.
	failoverPoll = 10 * time.Millisecond
	// failoverCallTimeout bounds one management call of a round: a call
	// caught on its way to the dead leader is given up and asked again,
	// so it does not stretch the figure.
	failoverCallTimeout = 150 * time.Millisecond
)

type failoverConfig struct {
	cluster clusterConfig
	rounds  int
	freeze  bool
}

// failoverResult is the JSON line: seconds from the kill (or SIGSTOP) of
// the curator leader until a new leader answers a management call, and
// from the kill of the etcd leader's node until etcd names a new leader.
type failoverResult struct {
	Cmd          string    `json:"cmd"`
	Rounds       int       `json:"rounds"`
	Freeze       bool      `json:"freeze"`
	ElectionTTLS float64   `json:"election_ttl_s"`
	CuratorS     []float64 `json:"curator_s"`
	CuratorP50S  float64   `json:"curator_p50_s"`
	CuratorP99S  float64   `json:"curator_p99_s"`
	EtcdS        []float64 `json:"etcd_s,omitempty"`
	EtcdP50S     float64   `json:"etcd_p50_s,omitempty"`
	EtcdP99S     float64   `json:"etcd_p99_s,omitempty"`
	// Ratio is the curator's median over etcd's.
	Ratio float64 `json:"curator_over_etcd,omitempty"`
	Error string  `json:"error,omitempty"`
}

func newFailoverCommand() *cobra.Command {
	c := &failoverConfig{}
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "Kill the curator leader, and the etcd leader, --rounds times: how fast each is replaced",
		Long: `Start --managers real curator processes (3 by default). Each round kills (-9)
the curator leader's process (never the etcd leader's node), times the kill
until a new leader answers a management call, restarts the killed node and waits
for every manager to be a voter again; then, as the baseline, kills the node
that is etcd's leader (not the curator leader) and times until etcd names a new
leader, and restarts it. With --freeze the curator leader is stopped (SIGSTOP)
instead of killed, and continued once a new leader answers: the path bounded by
the election lease; there is no etcd baseline then. The last line on stdout is
one JSON object with the figures.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFailover(cmd.Context(), c, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.cluster.register(cmd)
	cmd.Flags().IntVar(&c.rounds, "rounds", DefaultFailoverRounds, "rounds")
	cmd.Flags().BoolVar(&c.freeze, "freeze", false, "SIGSTOP the curator leader instead of killing it")
	return cmd
}

func runFailover(ctx context.Context, cfg *failoverConfig, stdout, stderr io.Writer) error {
	managers, _, err := cfg.cluster.Validate()
	if err != nil {
		return err
	}
	if cfg.rounds < 1 || cfg.cluster.managers < 3 {
		return fmt.Errorf("--rounds %d, --managers %d: want at least 1 round and 3 managers", cfg.rounds, cfg.cluster.managers)
	}
	p := newProgress(stderr)
	res := &failoverResult{Cmd: "failover", Rounds: cfg.rounds, Freeze: cfg.freeze, ElectionTTLS: cfg.cluster.electionTTL.Seconds()}
	c, err := startCluster(ctx, cfg.cluster, managers, p)
	if c != nil {
		defer c.close()
	}
	var problems []error
	if err == nil {
		problems = measureFailover(ctx, cfg, c, p, res)
	} else {
		problems = append(problems, err)
	}
	return finish(stdout, res, func(e string) { res.Error = e }, problems)
}

func measureFailover(ctx context.Context, cfg *failoverConfig, c *cluster, p *progress, res *failoverResult) []error {
	var cur, etcd []time.Duration
	for i := range cfg.rounds {
		d, err := curatorFailover(ctx, cfg, c, p)
		if err != nil {
			return []error{fmt.Errorf("round %d, curator leader: %w", i+1, err)}
		}
		cur = append(cur, d)
		if !cfg.freeze {
			d, err := etcdFailover(ctx, c, p)
			if err != nil {
				return []error{fmt.Errorf("round %d, etcd leader: %w", i+1, err)}
			}
			etcd = append(etcd, d)
		}
	}
	for _, d := range cur {
		res.CuratorS = append(res.CuratorS, d.Seconds())
	}
	res.CuratorP50S, res.CuratorP99S = secs(quantile(cur, 0.5)), secs(quantile(cur, 0.99))
	if len(etcd) > 0 {
		for _, d := range etcd {
			res.EtcdS = append(res.EtcdS, d.Seconds())
		}
		res.EtcdP50S, res.EtcdP99S = secs(quantile(etcd, 0.5)), secs(quantile(etcd, 0.99))
		res.Ratio = res.CuratorP50S / res.EtcdP50S
	}
	if cfg.freeze {
		p.printf("curator leader replaced: median %.3fs p99 %.3fs (election TTL %s)", res.CuratorP50S, res.CuratorP99S, cfg.cluster.electionTTL)
	} else {
		p.printf("curator leader replaced: median %.3fs p99 %.3fs; etcd's own: median %.3fs", res.CuratorP50S, res.CuratorP99S, res.EtcdP50S)
	}
	return nil
}

// curatorFailover kills (or freezes) the curator leader and times until a
// new leader answers, then brings the cluster back to every manager a
// voter.
func curatorFailover(ctx context.Context, cfg *failoverConfig, c *cluster, p *progress) (time.Duration, error) {
	old, m, err := settledLeader(ctx, c)
	if err != nil {
		return 0, err
	}
	// Ask the other managers: a frozen one accepts connections and never
	// answers, and would hold every call to its timeout.
	others, err := clientWithout(ctx, c, m)
	if err != nil {
		return 0, err
	}
	defer others.Close()
	t0 := time.Now()
	if cfg.freeze {
		if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return 0, err
		}
	} else {
		c.kill(m)
	}
	d, err := waitNewLeader(ctx, others, old, t0, cfg.cluster.electionTTL+10*time.Second)
	if err != nil {
		return 0, err
	}
	p.printf("curator leader %s %s: a new leader answered after %.3fs", m.name, map[bool]string{true: "frozen", false: "killed"}[cfg.freeze], d.Seconds())
	if cfg.freeze {
		if err := m.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			return 0, err
		}
	} else if err := restart(c, m); err != nil {
		return 0, err
	}
	return d, allVoters(ctx, c)
}

// etcdFailover kills the node that is etcd's leader (not the curator
// leader's) and times until etcd names another, then restarts it.
func etcdFailover(ctx context.Context, c *cluster, p *progress) (time.Duration, error) {
	cli, err := c.etcdClient()
	if err != nil {
		return 0, err
	}
	curator, _, err := settledLeader(ctx, c)
	if err != nil {
		return 0, err
	}
	var victim *managerProc
	var leaderID uint64
	for _, m := range c.managers {
		st, err := cli.Status(ctx, etcdEndpoint(m))
		if err == nil && st.Leader == st.Header.MemberId {
			victim, leaderID = m, st.Leader
		}
	}
	if victim == nil {
		return 0, errors.New("no etcd leader found")
	}
	if info, err := c.admin.ClusterInfo(ctx); err == nil && info.GetNames()[curator] == victim.name {
		return 0, fmt.Errorf("the etcd leader %s is the curator leader's node: placement has not moved it yet", victim.name)
	}
	t0 := time.Now()
	c.kill(victim)
	deadline := t0.Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, m := range c.managers {
			if m == victim {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			st, err := cli.Status(sctx, etcdEndpoint(m))
			cancel()
			if err == nil && st.Leader != 0 && st.Leader != leaderID {
				d := time.Since(t0)
				p.printf("etcd leader %s killed: etcd named a new leader after %.3fs", victim.name, d.Seconds())
				if err := restart(c, victim); err != nil {
					return 0, err
				}
				return d, allVoters(ctx, c)
			}
		}
		time.Sleep(failoverPoll)
	}
	return 0, errors.New("etcd named no new leader within a minute")
}

// settledLeader waits until the curator leader and the etcd leader are on
// different nodes (the placement loop keeps them apart), and have been for
// the election TTL and a second more, and returns the curator leader. The
// wait matters: etcd extends every lease by its election timeout when it
// changes leader (and the placement loop changes it after most failovers),
// so a round begun right after would pay that extension on top of the
// lease; a crash in steady state does not.
func settledLeader(ctx context.Context, c *cluster) (string, *managerProc, error) {
	var id string
	var m *managerProc
	var pair string
	var since time.Time
	steady := c.cfg.electionTTL + time.Second
	err := c.waitFor(ctx, "the curator and etcd leaders on two nodes, unchanged for "+steady.String(), func(ctx context.Context) error {
		info, err := c.admin.ClusterInfo(ctx)
		if err != nil {
			return err
		}
		if info.GetLeader() == "" || info.GetEtcdLeader() == "" || info.GetLeader() == info.GetEtcdLeader() {
			pair = ""
			return fmt.Errorf("curator leader %q, etcd leader %q", info.GetLeader(), info.GetEtcdLeader())
		}
		if now := info.GetLeader() + " " + info.GetEtcdLeader(); now != pair {
			pair, since = now, time.Now()
		}
		if d := time.Since(since); d < steady {
			return fmt.Errorf("curator leader %s and etcd leader %s for %s only", info.GetLeader(), info.GetEtcdLeader(), d.Round(time.Millisecond))
		}
		id, m, err = c.leader(ctx)
		return err
	})
	return id, m, err
}

// waitNewLeader polls every failoverPoll until a leader other than old
// answers a management call, and returns the time since t0.
func waitNewLeader(ctx context.Context, cl *client.Client, old string, t0 time.Time, limit time.Duration) (time.Duration, error) {
	for time.Since(t0) < limit {
		cctx, cancel := context.WithTimeout(ctx, failoverCallTimeout)
		info, err := cl.ClusterInfo(cctx)
		cancel()
		if err == nil && info.GetLeader() != "" && info.GetLeader() != old {
			return time.Since(t0), nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		time.Sleep(failoverPoll)
	}
	return 0, fmt.Errorf("no new leader within %s", limit)
}

// restart starts a killed manager again from its data dir.
func restart(c *cluster, m *managerProc) error {
	c.managers = slices.DeleteFunc(c.managers, func(x *managerProc) bool { return x == m })
	argv := []string{"agent", "run", "--data-dir", m.dataDir,
		"--heartbeat-interval", c.cfg.interval.String(), "--down-after", c.cfg.downAfter.String(),
		"--election-ttl", c.cfg.electionTTL.String()}
	_, err := c.run(m.name, m.listen, m.dataDir, nil, argv)
	return err
}

// allVoters waits until every manager is a voter and the quorum healthy.
func allVoters(ctx context.Context, c *cluster) error {
	return c.waitFor(ctx, "every manager a voter, the quorum healthy", func(ctx context.Context) error {
		info, err := c.admin.ClusterInfo(ctx)
		if err != nil {
			return err
		}
		if len(info.GetVoters()) != len(c.managers) || !info.GetQuorumHealthy() {
			return fmt.Errorf("%d voters of %d, quorum healthy %v", len(info.GetVoters()), len(c.managers), info.GetQuorumHealthy())
		}
		return nil
	})
}

// clientWithout is an admin client of every manager but m.
func clientWithout(ctx context.Context, c *cluster, m *managerProc) (*client.Client, error) {
	cfg, err := client.LoadConfig(c.cfgPath)
	if err != nil {
		return nil, err
	}
	cfg.Managers = slices.DeleteFunc(cfg.Managers, func(a string) bool { return a == m.listen.String() })
	return client.Dial(ctx, cfg, c.cfgPath, client.WithCachePath(""))
}
