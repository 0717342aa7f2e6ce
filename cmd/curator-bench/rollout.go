package main

// `curator-bench rollout`: what a rollout costs per machine above the
// machine's own time to come up, measured in the same run on the same
// cluster: a `curator dev` on the process provider.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/client"
	pb "github.com/curatorproject/curator/proto"
)

// Defaults of `curator-bench rollout`.
const (
	DefaultRolloutManagers  = 3
	DefaultRolloutWorkers   = 3
	DefaultRolloutAddresses = "127.0.152.10-127.0.152.60"
	DefaultRolloutTimeout   = 5 * time.Minute
)

type rolloutConfig struct {
	curator   string
	dir       string
	managers  int
	workers   int
	addresses string
	timeout   time.Duration
	// rollback: time bad templates' rollbacks instead.
	rollback bool
}

func (c *rolloutConfig) Validate() error {
	if c.managers < 1 || c.managers > maxManagers || c.workers < 1 {
		return fmt.Errorf("--managers %d, --workers %d: want 1 to %d managers and at least one worker", c.managers, c.workers, maxManagers)
	}
	if c.timeout <= 0 {
		return fmt.Errorf("--timeout %s: want a positive duration", c.timeout)
	}
	return nil
}

// rolloutResult is the JSON line: the machine's own time (a group grown by
// one: provision, join, ready; a voter, for managers) and the rollout's
// time per machine, for workers and managers.
type rolloutResult struct {
	Cmd            string  `json:"cmd"`
	Managers       int     `json:"managers"`
	Workers        int     `json:"workers"`
	WorkerAloneS   float64 `json:"worker_alone_s"`
	WorkersRollS   float64 `json:"workers_rollout_s"`
	PerWorkerS     float64 `json:"per_worker_s"`
	PerWorkerOverS float64 `json:"per_worker_above_alone_s"`
	ManagerAloneS  float64 `json:"manager_alone_s"`
	ManagersRollS  float64 `json:"managers_rollout_s"`
	PerManagerS    float64 `json:"per_manager_s"`
	PerManagerOver float64 `json:"per_manager_above_alone_s"`
	// With --rollback: from the commit of a bad template to the group back
	// on its previous config with every machine ready.
	WorkersRollbackS  float64 `json:"workers_rollback_s,omitempty"`
	ManagersRollbackS float64 `json:"managers_rollback_s,omitempty"`
	Error             string  `json:"error,omitempty"`
}

func newRolloutCommand() *cobra.Command {
	c := &rolloutConfig{}
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Seconds per machine of a rollout, against a machine's own time to come up",
		Long: `Run 'curator dev' with --managers and --workers (on the process provider), then
time, on that cluster: a worker alone (the workers group grown by one: provision,
join, ready), a rollout of every worker to a new config (max_parallel 1), a
manager alone (grown by one until it is a ready voter), and a rollout of every
manager (surge first, the leader's node last). The last line on stdout is one
JSON object with the figures: per machine, and per machine above its own time.

With --rollback it times instead, for workers and then managers, a bad
template (args: [--no-such-flag]) from its commit to the group back on its
previous config with every machine ready: the rollout fails and rolls back.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.Validate(); err != nil {
				return err
			}
			return runRollout(cmd.Context(), c, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&c.curator, "curator", "", "curator binary to run (default: go build ./cmd/curator into a temporary dir)")
	cmd.Flags().StringVar(&c.dir, "dir", "", "where the dev cluster and the built binary go, kept afterwards (default: a temporary dir, removed afterwards)")
	cmd.Flags().IntVar(&c.managers, "managers", DefaultRolloutManagers, "consensus members")
	cmd.Flags().IntVar(&c.workers, "workers", DefaultRolloutWorkers, "workers")
	cmd.Flags().StringVar(&c.addresses, "addresses", DefaultRolloutAddresses, "loopback addresses FIRST-LAST for the dev cluster")
	cmd.Flags().DurationVar(&c.timeout, "timeout", DefaultRolloutTimeout, "how long each step may take")
	cmd.Flags().BoolVar(&c.rollback, "rollback", false, "time bad templates' failure and rollback instead")
	return cmd
}

func runRollout(ctx context.Context, cfg *rolloutConfig, stdout, stderr io.Writer) error {
	p := newProgress(stderr)
	res := &rolloutResult{Cmd: "rollout", Managers: cfg.managers, Workers: cfg.workers}
	err := measureRollout(ctx, cfg, p, res)
	var problems []error
	if err != nil {
		problems = append(problems, err)
	}
	return finish(stdout, res, func(e string) { res.Error = e }, problems)
}

func measureRollout(ctx context.Context, cfg *rolloutConfig, p *progress, res *rolloutResult) error {
	dir, cleanup, err := benchDir(cfg.dir, "rollout")
	if err != nil {
		return err
	}
	defer cleanup()
	bin, err := curatorBinary(ctx, cfg.curator, dir, p)
	if err != nil {
		return err
	}
	c, stop, err := startDev(ctx, bin, filepath.Join(dir, "dev"), cfg.managers, cfg.workers, cfg.addresses, cfg.timeout, p)
	if err != nil {
		return err
	}
	defer stop()
	b := &rolloutBench{c: c, timeout: cfg.timeout, p: p}
	if cfg.rollback {
		// Both groups settled first: every node ready for longer than a
		// rollout's default monitor, so that the figure is the failure's
		// and the rollback's, not the dev cluster's own start.
		for _, group := range []string{"workers", "managers"} {
			v, err := c.GetGroup(ctx, group)
			if err != nil {
				return err
			}
			if err := b.wait(ctx, group+" ready", func(ctx context.Context) error { return b.groupReady(ctx, v.GetGroup().GetSpec()) }); err != nil {
				return err
			}
		}
		time.Sleep(rollbackSettle)
		if res.WorkersRollbackS, err = b.rollBack(ctx, "workers"); err != nil {
			return err
		}
		if res.ManagersRollbackS, err = b.rollBack(ctx, "managers"); err != nil {
			return err
		}
		p.printf("back on the previous config: workers %.2fs, managers %.2fs", res.WorkersRollbackS, res.ManagersRollbackS)
		return nil
	}

	if res.WorkerAloneS, err = b.alone(ctx, "workers"); err != nil {
		return err
	}
	if res.WorkersRollS, err = b.roll(ctx, "workers"); err != nil {
		return err
	}
	res.PerWorkerS = res.WorkersRollS / float64(cfg.workers+1)
	res.PerWorkerOverS = res.PerWorkerS - res.WorkerAloneS
	if res.ManagerAloneS, err = b.alone(ctx, "managers"); err != nil {
		return err
	}
	if res.ManagersRollS, err = b.roll(ctx, "managers"); err != nil {
		return err
	}
	res.PerManagerS = res.ManagersRollS / float64(cfg.managers+1)
	res.PerManagerOver = res.PerManagerS - res.ManagerAloneS
	p.printf("per worker %.2fs (alone %.2fs), per manager %.2fs (alone %.2fs)", res.PerWorkerS, res.WorkerAloneS, res.PerManagerS, res.ManagerAloneS)
	return nil
}

type rolloutBench struct {
	c       *client.Client
	timeout time.Duration
	p       *progress
}

// commit commits group with change applied to its spec, and returns when,
// the spec and its config's SHA.
func (b *rolloutBench) commit(ctx context.Context, group string, change func(*pb.GroupSpec)) (time.Time, *pb.GroupSpec, string, error) {
	v, err := b.c.GetGroup(ctx, group)
	if err != nil {
		return time.Time{}, nil, "", err
	}
	spec := proto.Clone(v.GetGroup().GetSpec()).(*pb.GroupSpec)
	change(spec)
	start := time.Now()
	view, _, err := b.c.CommitGroup(ctx, spec)
	if err != nil {
		return time.Time{}, nil, "", err
	}
	return start, spec, view.GetGroup().GetConfigSha(), nil
}

// alone grows group by one and times the new machine until its node is
// ready (a ready voter, for managers): the machine's own time.
func (b *rolloutBench) alone(ctx context.Context, group string) (float64, error) {
	start, spec, _, err := b.commit(ctx, group, func(s *pb.GroupSpec) { s.Size++ })
	if err != nil {
		return 0, err
	}
	err = b.wait(ctx, group+" grown by one", func(ctx context.Context) error {
		return b.groupReady(ctx, spec)
	})
	d := time.Since(start).Seconds()
	b.p.printf("%s: one machine alone in %.2fs", group, d)
	return d, err
}

// roll commits a new version of group and times the rollout to done.
func (b *rolloutBench) roll(ctx context.Context, group string) (float64, error) {
	start, spec, sha, err := b.commit(ctx, group, func(s *pb.GroupSpec) { s.Template.Version += "-next" })
	if err != nil {
		return 0, err
	}
	err = b.settle(ctx, group, spec, func(r *pb.Rollout) (bool, error) {
		if r.GetTargetSha() != sha {
			return false, nil
		}
		return client.RolloutEnded(r)
	})
	d := time.Since(start).Seconds()
	b.p.printf("%s: %d machines rolled in %.2fs", group, spec.Size, d)
	return d, err
}

// rollBack commits a template whose machines cannot start to group and
// times it until the rollout has failed and rolled the group back, every
// machine ready on the previous config.
func (b *rolloutBench) rollBack(ctx context.Context, group string) (float64, error) {
	v, err := b.c.GetGroup(ctx, group)
	if err != nil {
		return 0, err
	}
	good := proto.Clone(v.GetGroup().GetSpec()).(*pb.GroupSpec)
	start, _, bad, err := b.commit(ctx, group, func(s *pb.GroupSpec) { s.Template.Args = append(s.Template.Args, "--no-such-flag") })
	if err != nil {
		return 0, err
	}
	err = b.settle(ctx, group, good, func(r *pb.Rollout) (bool, error) {
		switch {
		case r.GetRollbackOf() == bad:
			return client.RolloutEnded(r)
		case r.GetTargetSha() == bad:
			// Over without a rollback (cancelled, or failed with
			// failure_action pause): settle says so.
			return r.GetState() != pb.RolloutState_ROLLOUT_STATE_ROLLING && r.GetState() != pb.RolloutState_ROLLOUT_STATE_PAUSED, nil
		}
		return false, nil
	})
	if err == nil {
		if r, gerr := b.c.GetRollout(ctx, group); gerr == nil && r.GetRollbackOf() != bad {
			err = fmt.Errorf("the rollout of %s to %.12s ended %s without a rollback: %s", group, bad, r.GetState(), r.GetReason())
		}
	}
	d := time.Since(start).Seconds()
	b.p.printf("%s: a bad template failed and rolled back in %.2fs", group, d)
	return d, err
}

// settle waits (client.WaitRollout) until over says group's rollout is
// over, which must be done, then until group has want's size of ready
// nodes of its config.
func (b *rolloutBench) settle(ctx context.Context, group string, want *pb.GroupSpec, over client.RolloutCondition) error {
	wctx, cancel := context.WithTimeout(ctx, b.timeout)
	r, err := b.c.WaitRollout(wctx, group, over)
	cancel()
	if err != nil {
		return err
	}
	if r.GetState() != pb.RolloutState_ROLLOUT_STATE_DONE {
		return fmt.Errorf("the rollout of %s to %.12s is %s: %s", group, r.GetTargetSha(), r.GetState(), r.GetReason())
	}
	return b.wait(ctx, group+" ready on its config", func(ctx context.Context) error {
		return b.groupReady(ctx, want)
	})
}

// rollbackSettle is how long --rollback lets the ready groups be before
// it commits: more than a rollout's default monitor (5 s).
const rollbackSettle = 6 * time.Second

// groupReady says whether spec's group has its size of ready nodes of its
// config (voters, for a consensus group).
func (b *rolloutBench) groupReady(ctx context.Context, spec *pb.GroupSpec) error {
	v, err := b.c.GetGroup(ctx, spec.Name)
	if err != nil {
		return err
	}
	nodes, err := b.c.ListNodes(ctx)
	if err != nil {
		return err
	}
	info, err := b.c.ClusterInfo(ctx)
	if err != nil {
		return err
	}
	ready := 0
	for _, n := range nodes {
		node := n.GetNode()
		if node.GetGroup() != spec.Name || node.GetStatus() != pb.NodeStatus_NODE_STATUS_READY || node.GetConfigSha() != v.GetGroup().GetConfigSha() {
			continue
		}
		if spec.Roles[0] == pb.Role_ROLE_CONSENSUS && !slices.Contains(info.GetVoters(), node.GetId()) {
			continue
		}
		ready++
	}
	if ready != int(spec.Size) || v.GetMachines() != spec.Size {
		return fmt.Errorf("%d of %d ready, %d machines", ready, spec.Size, v.GetMachines())
	}
	return nil
}

// wait polls check every 50 ms until it succeeds or the timeout passes.
func (b *rolloutBench) wait(ctx context.Context, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s (last: %v)", what, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startDev runs bin's `curator dev` in devDir with managers and workers
// on addresses, waits (up to timeout) until it prints how to use its
// cluster, and returns a client of it; stop ends dev (SIGTERM, which
// stops its nodes) and closes the client.
func startDev(ctx context.Context, bin, devDir string, managers, workers int, addresses string, timeout time.Duration, p *progress) (*client.Client, func(), error) {
	dev := exec.Command(bin, "dev", "--managers", fmt.Sprint(managers), "--workers", fmt.Sprint(workers),
		"--dir", devDir, "--addresses", addresses)
	out, err := dev.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	dev.Stderr = io.Discard
	dev.SysProcAttr = childProcAttr()
	p.printf("starting curator dev (%s): %d managers, %d workers", bin, managers, workers)
	if err := dev.Start(); err != nil {
		return nil, nil, err
	}
	stopDev := func() {
		dev.Process.Signal(syscall.SIGTERM)
		dev.Wait()
	}
	up := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "export CURATOR_CONFIG=") {
				up <- nil
				io.Copy(io.Discard, out)
				return
			}
		}
		up <- errors.New("curator dev ended before the cluster was up")
	}()
	select {
	case err = <-up:
	case <-time.After(timeout):
		err = errors.New("timed out waiting for curator dev")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		stopDev()
		return nil, nil, err
	}
	path := filepath.Join(devDir, client.ConfigFileName)
	ccfg, err := client.LoadConfig(path)
	if err != nil {
		stopDev()
		return nil, nil, err
	}
	c, err := client.Dial(ctx, ccfg, path, client.WithCachePath(""))
	if err != nil {
		stopDev()
		return nil, nil, err
	}
	return c, func() {
		c.Close()
		stopDev()
		if n := killLeftUnder(devDir); n > 0 {
			p.printf("%d node processes were left running under %s after dev stopped: killed", n, devDir)
		}
	}, nil
}

// killLeftUnder kills, with SIGKILL, the processes whose command line
// names dir's instances (nodes dev did not stop: machines a leader made
// that no record held any more) and returns how many there were.
func killLeftUnder(dir string) int {
	pattern := dir + "/instances/"
	out, _ := exec.Command("pgrep", "-f", "--", pattern).Output()
	n := len(strings.Fields(string(out)))
	for range 50 {
		if exec.Command("pgrep", "-f", "--", pattern).Run() != nil {
			break
		}
		exec.Command("pkill", "-9", "-f", "--", pattern).Run()
		time.Sleep(100 * time.Millisecond)
	}
	return n
}

// benchDir is where a bench's cluster and binaries go: dir, made if need
// be and kept, or (dir empty) a new temporary dir that cleanup removes.
func benchDir(dir, bench string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o700)
	}
	tmp, err := os.MkdirTemp("", "curator-bench-"+bench+"-")
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}
