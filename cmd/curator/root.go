package main

import (
	"io"

	"github.com/spf13/cobra"
)

// globalFlags are the flags every operator command shares.
type globalFlags struct {
	config string
	// stderr is the running command's, for the client's notes (a wait).
	stderr io.Writer
}

func newRootCommand() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "curator",
		Short: "A self-healing control plane for a fleet of machines",
		Long: `curator runs a node agent on every machine; three, five or seven of them
also run an embedded etcd and the curator, whose leader serves this CLI and
keeps node roles, etcd membership and node health consistent.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			g.stderr = cmd.ErrOrStderr()
		},
	}
	root.PersistentFlags().StringVar(&g.config, "config", "",
		"client config file (default $CURATOR_CONFIG, then ~/.config/curator/config.yaml)")

	root.AddGroup(
		&cobra.Group{ID: "agent", Title: "Running a node:"},
		&cobra.Group{ID: "operate", Title: "Operating a cluster:"},
	)
	for _, c := range []*cobra.Command{newAgentCommand(), newDevCommand()} {
		c.GroupID = "agent"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{
		newNodeCommand(g), newClusterCommand(g), newTokenCommand(g),
		newGroupCommand(g), newRolloutCommand(g), newUpgradeCommand(g), newEventsCommand(g), newAuditCommand(g), newLogsCommand(g), newUICommand(g),
	} {
		c.GroupID = "operate"
		root.AddCommand(c)
	}
	root.AddCommand(newVersionCommand())
	root.Version = binaryVersion()
	root.SetVersionTemplate("curator {{.Version}}\n")
	strictTree(root)
	return root
}
