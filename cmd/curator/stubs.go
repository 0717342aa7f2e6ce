package main

import "github.com/spf13/cobra"

func newDevCommand() *cobra.Command {
	return &cobra.Command{Use: "dev", Short: "Run a local cluster of several processes", RunE: notBuilt}
}
