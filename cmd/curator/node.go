package main

import (
	"cmp"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
	pb "github.com/curatorproject/curator/proto"
)

func newNodeCommand(g *globalFlags) *cobra.Command {
	return parentCommand("node", "List, inspect and manage nodes",
		newNodeLsCommand(g),
		newNodeInspectCommand(g),
		newNodePromoteCommand(g),
		newNodeDemoteCommand(g),
		newNodeUpdateCommand(g),
		newNodeApproveCommand(g),
		newNodeRmCommand(g),
	)
}

func newNodeLsCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	c := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the cluster's nodes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				nodes, err := c.ListNodes(ctx)
				if err != nil {
					return apiError("list nodes", err)
				}
				return writeNodes(cmd.OutOrStdout(), format, nodes)
			})
		},
	}
	addOutputFlag(c, &format)
	return c
}

func newNodeInspectCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect ID",
		Short: "Show one node as JSON (ID, unique ID prefix or name)",
		Args:  cobra.MatchAll(cobra.ExactArgs(1), nodeIDArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				node, err := c.GetNode(ctx, args[0])
				if err != nil {
					return apiError("inspect node "+args[0], err)
				}
				return writeJSON(cmd.OutOrStdout(), nodeToJSON(node))
			})
		},
	}
}

// The commands below are part of the CLI contract but not built yet: their
// arguments and flags are in place so that scripts and help text are final.

func newNodePromoteCommand(_ *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "promote ID...",
		Short: "Give nodes the consensus role (not built yet)",
		Args:  cobra.MatchAll(cobra.MinimumNArgs(1), nodeIDArgs),
		RunE:  notBuilt,
	}
}

func newNodeDemoteCommand(_ *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "demote ID...",
		Short: "Take the consensus role from nodes (not built yet)",
		Args:  cobra.MatchAll(cobra.MinimumNArgs(1), nodeIDArgs),
		RunE:  notBuilt,
	}
}

func newNodeUpdateCommand(_ *globalFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   "update ID",
		Short: "Change a node's availability or labels (not built yet)",
		Args:  cobra.MatchAll(cobra.ExactArgs(1), nodeIDArgs),
		RunE:  notBuilt,
	}
	c.Flags().String("availability", "", "active, pause or drain")
	c.Flags().StringArray("label-add", nil, "add or change a label, k=v (repeatable)")
	c.Flags().StringArray("label-rm", nil, "remove a label by key (repeatable)")
	return c
}

func newNodeApproveCommand(_ *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "approve ID",
		Short: "Let a pending node into the cluster (not built yet)",
		Args:  cobra.MatchAll(cobra.ExactArgs(1), nodeIDArgs),
		RunE:  notBuilt,
	}
}

func newNodeRmCommand(_ *globalFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   "rm ID",
		Short: "Remove a node from the cluster (not built yet)",
		Args:  cobra.MatchAll(cobra.ExactArgs(1), nodeIDArgs),
		RunE:  notBuilt,
	}
	c.Flags().Bool("force", false, "remove the node even if it is not down")
	return c
}

// nodeIDArgs refuses empty node IDs: an empty prefix would match every node.
func nodeIDArgs(_ *cobra.Command, args []string) error {
	for _, a := range args {
		if strings.TrimSpace(a) == "" {
			return errors.New("node ID is empty: give a node ID, a unique prefix of one, or a node name")
		}
	}
	return nil
}

// nodeJSON is a node as `node ls -o json` and `node inspect` show it. The
// field names are part of the CLI contract (DESIGN.md): add, never rename.
type nodeJSON struct {
	ID            string            `json:"id"`
	Name          string            `json:"name"`
	Address       string            `json:"address"`
	State         string            `json:"state"`
	Status        string            `json:"status"`
	Availability  string            `json:"availability"`
	Roles         []string          `json:"roles"`
	ManagerStatus string            `json:"manager_status"`
	Group         string            `json:"group"`
	InstanceID    string            `json:"instance_id"`
	ConfigSHA     string            `json:"config_sha"`
	Version       string            `json:"version"`
	Labels        map[string]string `json:"labels"`
	LastHeartbeat *time.Time        `json:"last_heartbeat"`
	StatusChanged *time.Time        `json:"status_changed"`
	Created       *time.Time        `json:"created"`
	Updated       *time.Time        `json:"updated"`
}

func nodeToJSON(v *pb.NodeView) nodeJSON {
	n := v.GetNode()
	roles := make([]string, 0, len(n.GetRoles()))
	for _, r := range n.GetRoles() {
		roles = append(roles, enumWord(r))
	}
	labels := n.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	return nodeJSON{
		ID:            n.GetId(),
		Name:          n.GetName(),
		Address:       n.GetAddress(),
		State:         enumWord(n.GetState()),
		Status:        enumWord(n.GetStatus()),
		Availability:  enumWord(n.GetAvailability()),
		Roles:         roles,
		ManagerStatus: enumWord(v.GetManagerStatus()),
		Group:         n.GetGroup(),
		InstanceID:    n.GetInstanceId(),
		ConfigSHA:     n.GetConfigSha(),
		Version:       n.GetVersion(),
		Labels:        labels,
		LastHeartbeat: timeOrNil(v.GetLastHeartbeat()),
		StatusChanged: timeOrNil(n.GetStatusChanged()),
		Created:       timeOrNil(n.GetCreated()),
		Updated:       timeOrNil(n.GetUpdated()),
	}
}

// writeNodes writes nodes sorted by name, then ID: as a table like
// `docker node ls`, or as a JSON array.
func writeNodes(w io.Writer, format outputFormat, nodes []*pb.NodeView) error {
	list := make([]nodeJSON, 0, len(nodes))
	for _, v := range nodes {
		list = append(list, nodeToJSON(v))
	}
	slices.SortFunc(list, func(a, b nodeJSON) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	if format == formatJSON {
		return writeJSON(w, list)
	}
	rows := [][]string{{"ID", "NAME", "ADDRESS", "STATE", "STATUS", "AVAILABILITY", "ROLES", "MANAGER STATUS", "VERSION"}}
	for _, n := range list {
		rows = append(rows, []string{
			n.ID, n.Name, n.Address, n.State, n.Status, n.Availability,
			strings.Join(n.Roles, ","), n.ManagerStatus, n.Version,
		})
	}
	return writeTable(w, rows)
}
