package main

import "github.com/spf13/cobra"

func newGroupCommand(_ *globalFlags) *cobra.Command {
	c := &cobra.Command{Use: "group", Short: "Manage groups of machines (not built yet)"}
	c.AddCommand(
		&cobra.Command{Use: "commit FILE", Short: "Store a group spec and roll it out", Args: cobra.ExactArgs(1), RunE: notBuilt},
		&cobra.Command{Use: "ls", Short: "List groups", Args: cobra.NoArgs, RunE: notBuilt},
		&cobra.Command{Use: "describe NAME", Short: "Show a group's spec", Args: cobra.ExactArgs(1), RunE: notBuilt},
		&cobra.Command{Use: "destroy NAME", Short: "Destroy a group and its machines", Args: cobra.ExactArgs(1), RunE: notBuilt},
	)
	return c
}

func newRolloutCommand(_ *globalFlags) *cobra.Command {
	c := &cobra.Command{Use: "rollout", Short: "Follow and cancel rolling updates (not built yet)"}
	c.AddCommand(
		&cobra.Command{Use: "status GROUP", Short: "Show a group's rollout", Args: cobra.ExactArgs(1), RunE: notBuilt},
		&cobra.Command{Use: "cancel GROUP", Short: "Cancel a group's rollout", Args: cobra.ExactArgs(1), RunE: notBuilt},
	)
	return c
}
