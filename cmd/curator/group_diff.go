package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

func newGroupDiffCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	c := &cobra.Command{
		Use:   "diff FILE",
		Short: "Show what committing FILE would change, roll and destroy",
		Long: `Show what 'group commit FILE' would do, and change nothing: each field that
changes (old -> new; an environment's values are never shown), whether the
group rolls (its config SHA changes: a rollout replaces its machines), and
what it destroys (machines a smaller size takes away, machines a provider
change leaves behind). The leader makes the commit's own checks: a file it
would refuse is refused here, with the same error. A file read at a revision
the group has moved past is said to be stale: its commit would be refused
unless forced.`,
		Example: `  curator group describe workers > workers.yaml
  $EDITOR workers.yaml
  curator group diff workers.yaml && curator group commit workers.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readFileArg(cmd, args[0])
			if err != nil {
				return err
			}
			gs, revision, err := spec.ParseGroupFile(data)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				return showPlan(ctx, cmd.OutOrStdout(), format, c, &pb.CommitGroupRequest{Spec: gs, ExpectedRevision: revision}, "diff")
			})
		},
	}
	addOutputFlag(c, &format)
	return c
}

// planJSON is `group diff -o json`.
type planJSON struct {
	Group             string   `json:"group"`
	NewGroup          bool     `json:"new_group"`
	Changes           []string `json:"changes"`
	Rolls             bool     `json:"rolls"`
	ConfigSHA         string   `json:"config_sha"`
	PreviousConfigSHA string   `json:"previous_config_sha,omitempty"`
	Machines          uint32   `json:"machines"`
	Destroys          []string `json:"destroys"`
	// Revision is the group's now; FileRevision the file's (absent: it
	// has none), and Stale whether a commit of it would be refused.
	Revision     uint64  `json:"revision"`
	FileRevision *uint64 `json:"file_revision,omitempty"`
	Stale        bool    `json:"stale"`
}

// showPlan asks the leader what a commit of req would do and writes it.
func showPlan(ctx context.Context, w io.Writer, format outputFormat, c *client.Client, req *pb.CommitGroupRequest, what string) error {
	p, err := c.PlanGroup(ctx, req)
	if err != nil {
		return apiError("group "+what+" "+req.GetSpec().GetName(), err)
	}
	out := planJSON{
		Group: p.Name, NewGroup: p.NewGroup, Changes: append([]string{}, p.Changes...), Rolls: p.Rolls,
		ConfigSHA: p.ConfigSha, PreviousConfigSHA: p.PreviousConfigSha, Machines: p.Machines,
		Destroys: append([]string{}, p.Destroys...), Revision: p.Revision, FileRevision: req.ExpectedRevision,
		Stale: req.ExpectedRevision != nil && *req.ExpectedRevision != p.Revision,
	}
	if format.structured() {
		return writeData(w, format, out)
	}
	_, err = io.WriteString(w, planText(out))
	return err
}

// planText is a plan as `group diff` writes it for a reader.
func planText(p planJSON) string {
	var b strings.Builder
	switch {
	case p.NewGroup:
		fmt.Fprintf(&b, "Group %s does not exist: the commit makes it (config SHA %s).\n", p.Group, shortSHA(p.ConfigSHA))
	case len(p.Changes) == 0:
		fmt.Fprintf(&b, "Group %s: no change (revision %d).\n", p.Group, p.Revision)
	default:
		fmt.Fprintf(&b, "Group %s (revision %d, %d machines) changes:\n", p.Group, p.Revision, p.Machines)
	}
	for _, c := range p.Changes {
		if c != "a new group" {
			fmt.Fprintf(&b, "  %s\n", c)
		}
	}
	if !p.NewGroup && len(p.Changes) > 0 {
		if p.Rolls {
			fmt.Fprintf(&b, "Rolls: yes: the config SHA goes from %s to %s; a rollout replaces the group's machines.\n", shortSHA(p.PreviousConfigSHA), shortSHA(p.ConfigSHA))
		} else {
			fmt.Fprintf(&b, "Rolls: no: the config SHA stays %s.\n", shortSHA(p.ConfigSHA))
		}
		if len(p.Destroys) == 0 {
			b.WriteString("Destroys: nothing.\n")
		}
		for _, d := range p.Destroys {
			fmt.Fprintf(&b, "Destroys: %s.\n", d)
		}
	}
	if p.Stale {
		if p.NewGroup {
			fmt.Fprintf(&b, "Stale: the file was read at revision %d of a group that no longer exists: a commit of it is refused until its revision: line is removed.\n", *p.FileRevision)
		} else {
			fmt.Fprintf(&b, "Stale: the file was read at revision %d, the group is at %d: a commit of it is refused (the changes above would undo the group's since); describe it again and edit that, or commit with --force.\n", *p.FileRevision, p.Revision)
		}
	}
	return b.String()
}
