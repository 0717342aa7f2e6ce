// Command curator-bench is curator's load and failover tool, like etcd's own
// `benchmark`: it starts a cluster of real curator processes on loopback
// addresses, drives it through the real APIs over TLS, and ends each
// subcommand with ONE line of JSON on stdout holding the figures. Progress
// goes to stderr, so `curator-bench ... | tail -1 | jq` reads the result.
//
//	curator-bench heartbeats --nodes N [--interval 1s] [--duration 60s] [--kill-leader] [--mass-failure M]
//	curator-bench list --nodes N [--rounds 20]
//	curator-bench rollout [--managers 3] [--workers 3]
//	curator-bench failover [--rounds 10] [--freeze]
//	curator-bench swarm [--managers 3] [--rounds 5]
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "curator-bench",
		Short: "Load and failover figures from a real curator cluster",
		Long: `curator-bench starts a cluster of real curator processes on loopback addresses
(built from this repository, or --curator), simulates nodes in its own process
that join through the real Register RPC and keep real Heartbeat streams over
TLS, and measures. Each subcommand ends with one line of JSON on
stdout; progress goes to stderr.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newHeartbeatsCommand(), newListCommand(), newRolloutCommand(), newFailoverCommand(), newSwarmCommand(), newUpgradeCommand())
	return root
}
