package main

import "github.com/spf13/cobra"

func newAgentCommand() *cobra.Command {
	c := &cobra.Command{Use: "agent", Short: "Run the node agent on this machine"}
	c.AddCommand(
		&cobra.Command{Use: "init", Short: "Create a new cluster with this machine as its first node", RunE: notBuilt},
		&cobra.Command{Use: "join", Short: "Join this machine to a cluster", RunE: notBuilt},
		&cobra.Command{Use: "run", Short: "Restart a node from its data dir", RunE: notBuilt},
		&cobra.Command{Use: "leave", Short: "Leave the cluster gracefully", RunE: notBuilt},
	)
	return c
}

func newDevCommand() *cobra.Command {
	return &cobra.Command{Use: "dev", Short: "Run a local cluster of several processes", RunE: notBuilt}
}

func newNodeCommand(_ *globalFlags) *cobra.Command {
	return &cobra.Command{Use: "node", Short: "List, inspect and manage nodes", RunE: notBuilt}
}

func newClusterCommand(_ *globalFlags) *cobra.Command {
	return &cobra.Command{Use: "cluster", Short: "Show and change cluster settings", RunE: notBuilt}
}

func newTokenCommand(_ *globalFlags) *cobra.Command {
	return &cobra.Command{Use: "token", Short: "Show and rotate join tokens", RunE: notBuilt}
}
