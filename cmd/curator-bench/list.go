package main

// `curator-bench list`: how long listing a fleet takes, through the RPC and
// through the operator's command.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"
)

// cliTimeout bounds one `curator node ls`.
const cliTimeout = 2 * time.Minute

// listGoal is the p99 a listing of 10,000 nodes should take.
const listGoal = 100 * time.Millisecond

type listConfig struct {
	cluster   clusterConfig
	fleet     fleetConfig
	rounds    int
	cliRounds int
	pageSize  uint32
}

func (c *listConfig) Validate() error {
	if err := c.fleet.Validate(); err != nil {
		return err
	}
	if c.rounds < 1 || c.cliRounds < 0 {
		return fmt.Errorf("--rounds %d, --cli-rounds %d: want at least 1 and 0", c.rounds, c.cliRounds)
	}
	return nil
}

func newListCommand() *cobra.Command {
	c := &listConfig{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "ListNodes and `curator node ls -o json` over a fleet: p50/p99 and size",
		Long: `Start a cluster of --managers real curator processes and join --nodes
simulated nodes, which keep heartbeating and watching (as live agents do), so
the list is of a live fleet. Once every node is ready, time --rounds ListNodes
calls (following next_page_token to the last page; --page-size, 0: the
server's) with the admin credential, and --cli-rounds runs of the real
'curator node ls -o json'. The last line on stdout is one JSON object with the
figures.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runList(cmd.Context(), c, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.cluster.register(cmd)
	c.fleet.register(cmd)
	cmd.Flags().IntVar(&c.rounds, "rounds", DefaultListRounds, "ListNodes calls timed")
	cmd.Flags().IntVar(&c.cliRounds, "cli-rounds", DefaultCLIRounds, "`curator node ls -o json` runs timed")
	cmd.Flags().Uint32Var(&c.pageSize, "page-size", 0, "ListNodes page size (0: the server's default)")
	return cmd
}

// listResult is the JSON line of `list`.
type listResult struct {
	Cmd      string `json:"cmd"`
	Nodes    int    `json:"nodes"`
	Managers int    `json:"managers"`
	// Heartbeating: the simulated nodes keep their streams open while
	// the lists are timed.
	Heartbeating bool `json:"heartbeating"`
	joinFigures
	// Listed is how many nodes one list returned (simulated nodes and
	// managers); RPCPages and RPCBytes how many pages it took and their
	// size as protobuf.
	Listed    int     `json:"listed"`
	RPCRounds int     `json:"rpc_rounds"`
	RPCP50Ms  float64 `json:"rpc_p50_ms"`
	RPCP99Ms  float64 `json:"rpc_p99_ms"`
	// RPCGoalRatio is RPCP99Ms over the goal (listGoal): at most 1
	// meets it.
	RPCGoalRatio float64 `json:"rpc_p99_goal_ratio"`
	RPCPages     int     `json:"rpc_pages"`
	RPCBytes     int     `json:"rpc_bytes"`
	PageSize     uint32  `json:"page_size"`
	// The CLI: wall time of the whole process, and its output.
	CLIRounds int     `json:"cli_rounds"`
	CLIP50Ms  float64 `json:"cli_p50_ms"`
	CLIP99Ms  float64 `json:"cli_p99_ms"`
	CLIBytes  int     `json:"cli_bytes"`
	CLIListed int     `json:"cli_listed"`
	Error     string  `json:"error,omitempty"`
}

func runList(ctx context.Context, cfg *listConfig, stdout, stderr io.Writer) error {
	managers, simBase, err := cfg.cluster.Validate()
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	p := newProgress(stderr)
	res := &listResult{
		Cmd: "list", Nodes: cfg.fleet.nodes, Managers: cfg.cluster.managers, Heartbeating: true,
		RPCRounds: cfg.rounds, CLIRounds: cfg.cliRounds, PageSize: cfg.pageSize,
	}
	problems := withFleet(ctx, cfg.cluster, managers, simBase, cfg.fleet, p, &res.joinFigures,
		func(c *cluster, _ *fleet) []error {
			if err := measureList(ctx, cfg, c, p, res); err != nil {
				return []error{err}
			}
			return nil
		}, nil)
	return finish(stdout, res, func(e string) { res.Error = e }, problems)
}

func measureList(ctx context.Context, cfg *listConfig, c *cluster, p *progress, res *listResult) error {
	var rpc []time.Duration
	for range cfg.rounds {
		t := time.Now()
		nodes, pages, size, err := c.listNodes(ctx, cfg.pageSize)
		if err != nil {
			return err
		}
		rpc = append(rpc, time.Since(t))
		res.Listed, res.RPCPages, res.RPCBytes = len(nodes), pages, size
	}
	res.RPCP50Ms, res.RPCP99Ms = ms(quantile(rpc, 0.5)), ms(quantile(rpc, 0.99))
	res.RPCGoalRatio = round3(float64(quantile(rpc, 0.99)) / float64(listGoal))
	p.printf("ListNodes of %d nodes: p50 %.1fms p99 %.1fms, %d pages, %d bytes", res.Listed, res.RPCP50Ms, res.RPCP99Ms, res.RPCPages, res.RPCBytes)
	var cli []time.Duration
	for range cfg.cliRounds {
		out, d, err := nodeLs(ctx, c)
		if err != nil {
			return err
		}
		cli = append(cli, d)
		var nodes []json.RawMessage
		if err := json.Unmarshal(out, &nodes); err != nil {
			return fmt.Errorf("curator node ls -o json: %w", err)
		}
		res.CLIBytes, res.CLIListed = len(out), len(nodes)
	}
	res.CLIP50Ms, res.CLIP99Ms = ms(quantile(cli, 0.5)), ms(quantile(cli, 0.99))
	if cfg.cliRounds > 0 {
		p.printf("curator node ls -o json of %d nodes: p50 %.1fms p99 %.1fms, %d bytes", res.CLIListed, res.CLIP50Ms, res.CLIP99Ms, res.CLIBytes)
	}
	return nil
}

// nodeLs runs the real `curator node ls -o json` against the cluster and
// returns its output and wall time.
func nodeLs(ctx context.Context, c *cluster) ([]byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, "--config", c.cfgPath, "node", "ls", "-o", "json")
	cmd.Env = append(os.Environ(), "CURATOR_CONFIG="+c.cfgPath)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	t := time.Now()
	err := cmd.Run()
	d := time.Since(t)
	if err != nil {
		return nil, d, fmt.Errorf("curator node ls -o json: %w: %s", err, bytes.TrimSpace(errOut.Bytes()))
	}
	return out.Bytes(), d, nil
}
