package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator"
	pb "github.com/curatorproject/curator/proto"
)

func newGroupCommand(g *globalFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   "group",
		Short: "Manage groups of machines",
		Long: `A group is a named set of machines of one kind: roles, a size, and how a
provider (process or docker) makes each machine. The leader keeps each group at
its size: it provisions what is missing, replaces machines whose node has been
down past replace_after, destroys machines whose node never joined, and takes
extras away, workers first and within a healthy majority of voters.`,
	}
	c.AddCommand(newGroupCommitCommand(g), newGroupLsCommand(g), newGroupDescribeCommand(g), newGroupDestroyCommand(g))
	return c
}

func newGroupCommitCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "commit FILE",
		Short: "Store a group spec; the leader makes the machines match it",
		Long: `Store the group that FILE (YAML, "-" for stdin) describes. Committing the
spec a group has already is a no-op; a bad file is refused with the field and
line at fault, and nothing changes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readFileArg(cmd, args[0])
			if err != nil {
				return err
			}
			spec, err := curator.ParseGroupSpec(data)
			if err != nil {
				return fmt.Errorf("%s: %w; nothing was committed", args[0], err)
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				view, changed, err := c.CommitGroup(ctx, spec)
				if err != nil {
					return apiError("commit group "+spec.Name, err)
				}
				if !changed {
					fmt.Fprintf(cmd.OutOrStdout(), "Group %s is unchanged (config SHA %s).\n", spec.Name, shortSHA(view.GetGroup().GetConfigSha()))
					return nil
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Committed group %s: size %d, config SHA %s.\n", spec.Name, spec.Size, shortSHA(view.GetGroup().GetConfigSha()))
				return nil
			})
		},
	}
}

// readFileArg reads a file named on the command line, "-" meaning stdin.
func readFileArg(cmd *cobra.Command, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(cmd.InOrStdin())
	}
	return os.ReadFile(name)
}

func newGroupLsCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	c := &cobra.Command{
		Use:   "ls",
		Short: "List groups",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				groups, err := c.ListGroups(ctx)
				if err != nil {
					return apiError("list groups", err)
				}
				return writeGroups(cmd.OutOrStdout(), format, groups)
			})
		},
	}
	addOutputFlag(c, &format)
	return c
}

func newGroupDescribeCommand(g *globalFlags) *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a group's spec",
		Long: `Show a group's spec: -o yaml (the default) in the commit file's format, so
that 'group describe NAME | group commit -' changes nothing; -o json adds the
config SHA and the group's nodes.`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error {
			if format != "yaml" && format != "json" {
				return fmt.Errorf("output format %q is not one of yaml, json", format)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				view, err := c.GetGroup(ctx, args[0])
				if err != nil {
					return apiError("describe group "+args[0], err)
				}
				if format == "json" {
					return writeJSON(cmd.OutOrStdout(), groupToJSON(view))
				}
				out, err := curator.MarshalGroupSpec(view.GetGroup().GetSpec())
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(out)
				return err
			})
		},
	}
	c.Flags().StringVarP(&format, "output", "o", "yaml", "output format: yaml or json")
	return c
}

func newGroupDestroyCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "destroy NAME",
		Short: "Destroy a group and its machines",
		Long: `Destroy a group: the leader takes its machines away (workers first, consensus
members demoted before their machine goes, the leader's own node last), then
the group. Refused while the group's voters are the cluster's quorum.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				view, err := c.DestroyGroup(ctx, args[0])
				if err != nil {
					return apiError("destroy group "+args[0], err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Destroying group %s: %d machines to take away; follow it with `curator group ls` and `curator events`.\n", args[0], view.GetMachines())
				return nil
			})
		},
	}
}

func shortSHA(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// groupJSON is a group in `group ls -o json` and `group describe -o json`.
type groupJSON struct {
	Name         string            `json:"name"`
	Size         uint32            `json:"size"`
	Roles        []string          `json:"roles"`
	MaxParallel  uint32            `json:"max_parallel"`
	ReplaceAfter string            `json:"replace_after"`
	JoinTimeout  string            `json:"join_timeout"`
	Provider     map[string]any    `json:"provider"`
	Template     groupTemplateJSON `json:"template"`
	ConfigSHA    string            `json:"config_sha"`
	Machines     uint32            `json:"machines"`
	Ready        uint32            `json:"ready"`
	NodeIDs      []string          `json:"node_ids"`
	Destroying   bool              `json:"destroying"`
	RolloutState string            `json:"rollout_state"`
}

type groupTemplateJSON struct {
	Version string            `json:"version"`
	Labels  map[string]string `json:"labels"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

func groupToJSON(v *pb.GroupView) groupJSON {
	spec := v.GetGroup().GetSpec()
	out := groupJSON{
		Name: spec.GetName(), Size: spec.GetSize(), MaxParallel: spec.GetMaxParallel(),
		ReplaceAfter: spec.GetReplaceAfter().AsDuration().String(), JoinTimeout: spec.GetJoinTimeout().AsDuration().String(),
		Template: groupTemplateJSON{
			Version: spec.GetTemplate().GetVersion(), Labels: nonNil(spec.GetTemplate().GetLabels()),
			Args: slices.Concat([]string{}, spec.GetTemplate().GetArgs()), Env: nonNil(spec.GetTemplate().GetEnv()),
		},
		ConfigSHA: v.GetGroup().GetConfigSha(), Machines: v.GetMachines(), Ready: v.GetReady(),
		NodeIDs: slices.Concat([]string{}, v.GetNodeIds()), Destroying: v.GetGroup().GetDestroying(), RolloutState: v.GetRolloutState(),
	}
	out.Roles = []string{}
	for _, r := range spec.GetRoles() {
		out.Roles = append(out.Roles, enumWord(r))
	}
	switch p := spec.GetProvider().GetKind().(type) {
	case *pb.ProviderSpec_Process:
		out.Provider = map[string]any{"process": map[string]any{"addresses": p.Process.Addresses, "port": p.Process.Port, "dir": p.Process.Dir, "binary": p.Process.Binary}}
	case *pb.ProviderSpec_Docker:
		out.Provider = map[string]any{"docker": map[string]any{"network": p.Docker.Network, "subnet": p.Docker.Subnet, "image": p.Docker.Image, "port": p.Docker.Port}}
	}
	return out
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func writeGroups(w io.Writer, format outputFormat, groups []*pb.GroupView) error {
	if format.structured() {
		out := make([]groupJSON, 0, len(groups))
		for _, v := range groups {
			out = append(out, groupToJSON(v))
		}
		return writeData(w, format, out)
	}
	if len(groups) == 0 {
		_, err := fmt.Fprintln(w, "No groups: commit one with `curator group commit FILE`.")
		return err
	}
	rows := [][]string{{"NAME", "ROLES", "SIZE", "READY", "MACHINES", "CONFIG SHA", "ROLLOUT"}}
	for _, v := range groups {
		spec := v.GetGroup().GetSpec()
		var roles []string
		for _, r := range spec.GetRoles() {
			roles = append(roles, enumWord(r))
		}
		rollout := v.GetRolloutState()
		if v.GetGroup().GetDestroying() {
			rollout = "destroying"
		}
		rows = append(rows, []string{
			spec.GetName(), strings.Join(roles, ","), fmt.Sprint(spec.GetSize()),
			fmt.Sprintf("%d/%d", v.GetReady(), spec.GetSize()), fmt.Sprint(v.GetMachines()),
			shortSHA(v.GetGroup().GetConfigSha()), orDash(rollout),
		})
	}
	return writeTable(w, rows)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newRolloutCommand(g *globalFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   "rollout",
		Short: "Follow, pause, resume and cancel a group's rolling update",
		Long: `Committing a group whose config SHA changed starts a rollout to that SHA:
workers are replaced max_parallel at a time (drained, destroyed, a new machine
provisioned and waited for), consensus members one at a time with the new one a
ready voter before the old one is demoted, the curator leader's own node last.
The rollout lives in etcd: a new leader carries it on.`,
	}
	c.AddCommand(newRolloutStatusCommand(g))
	for _, action := range []string{"cancel", "pause", "resume"} {
		c.AddCommand(newRolloutChangeCommand(g, action))
	}
	return c
}

func newRolloutStatusCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	var watch bool
	c := &cobra.Command{
		Use:   "status GROUP",
		Short: "Show a group's rollout",
		Long: `Show a group's rollout: its state (rolling, paused, done, cancelled, failed
with why), how many machines run the target config of how many, and the node in
flight with its step. --watch follows it until it ends: a live progress line in
a terminal, a line (or with -o json an object) per change otherwise.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !watch {
				return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
					r, err := c.GetRollout(ctx, args[0])
					if err != nil {
						return apiError("rollout status "+args[0], err)
					}
					return writeRollout(cmd.OutOrStdout(), format, r)
				})
			}
			return g.dial(cmd.Context(), func(ctx context.Context, c *client.Client) error {
				return watchRollout(ctx, cmd.OutOrStdout(), format, c, args[0])
			})
		},
	}
	addOutputFlag(c, &format)
	c.Flags().BoolVar(&watch, "watch", false, "follow the rollout until it ends")
	return c
}

func newRolloutChangeCommand(g *globalFlags, action string) *cobra.Command {
	short := map[string]string{
		"cancel": "Cancel a group's rollout: what is done stays done, nothing more is rolled",
		"pause":  "Pause a group's rollout after the step in flight",
		"resume": "Resume a paused rollout",
	}[action]
	var sha string
	c := &cobra.Command{
		Use:   action + " GROUP",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				r, err := c.ChangeRollout(ctx, args[0], action, sha)
				if err != nil {
					return apiError("rollout "+action+" "+args[0], err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Rollout of group %s to %s: %s (%d of %d updated).\n", r.Group, shortSHA(r.TargetSha), rolloutState(r), r.Updated, r.Total)
				return nil
			})
		},
	}
	c.Flags().StringVar(&sha, "sha", "", "act only if the rollout is to this config SHA (default: whatever it is now)")
	return c
}

// rolloutJSON is `rollout status -o json`.
type rolloutJSON struct {
	Group          string     `json:"group"`
	TargetSHA      string     `json:"target_sha"`
	State          string     `json:"state"`
	Reason         string     `json:"reason,omitempty"`
	Updated        uint32     `json:"updated"`
	Total          uint32     `json:"total"`
	Node           string     `json:"node,omitempty"`
	Step           string     `json:"step,omitempty"`
	Started        *time.Time `json:"started"`
	Finished       *time.Time `json:"finished"`
	Rolled         uint32     `json:"rolled"`
	SecondsPerNode float64    `json:"seconds_per_node"`
}

func rolloutState(r *pb.Rollout) string { return enumWord(r.GetState()) }

func rolloutToJSON(r *pb.Rollout) rolloutJSON {
	out := rolloutJSON{
		Group: r.Group, TargetSHA: r.TargetSha, State: rolloutState(r), Reason: r.Reason,
		Updated: r.Updated, Total: r.Total, Node: r.Node, Step: r.Step,
		Started: timeOrNil(r.Started), Finished: timeOrNil(r.Finished), Rolled: r.Rolled,
	}
	if r.Rolled > 0 {
		out.SecondsPerNode = r.RolledSeconds / float64(r.Rolled)
	}
	return out
}

// rolloutLine is a rollout in one line: state, progress, node in flight,
// elapsed.
func rolloutLine(r *pb.Rollout, now time.Time) string {
	line := fmt.Sprintf("%s %s to %s: %d/%d updated", r.Group, rolloutState(r), shortSHA(r.TargetSha), r.Updated, r.Total)
	if r.Node != "" && r.State == pb.RolloutState_ROLLOUT_STATE_ROLLING {
		line += fmt.Sprintf(", %s: %s", r.Step, r.Node)
	}
	end := now
	if r.Finished != nil {
		end = r.Finished.AsTime()
	}
	if r.Started != nil {
		line += fmt.Sprintf(", %s", end.Sub(r.Started.AsTime()).Round(time.Second))
	}
	if r.Reason != "" && r.State != pb.RolloutState_ROLLOUT_STATE_ROLLING {
		line += ": " + r.Reason
	}
	return line
}

func writeRollout(w io.Writer, format outputFormat, r *pb.Rollout) error {
	if format.structured() {
		return writeData(w, format, rolloutToJSON(r))
	}
	_, err := fmt.Fprintln(w, rolloutLine(r, time.Now()))
	return err
}

// rolloutEnded says whether a rollout is in a state it leaves only by a
// new commit.
func rolloutEnded(r *pb.Rollout) bool {
	switch r.GetState() {
	case pb.RolloutState_ROLLOUT_STATE_DONE, pb.RolloutState_ROLLOUT_STATE_CANCELLED, pb.RolloutState_ROLLOUT_STATE_FAILED:
		return true
	}
	return false
}

// watchRollout follows a rollout until it ends, asking every second (and
// riding out an election: a cluster no manager answers for is asked
// again). In a terminal it redraws one progress line; elsewhere it writes
// a line, or a JSON object, per change.
func watchRollout(ctx context.Context, w io.Writer, format outputFormat, c *client.Client, group string) error {
	tty := !format.structured() && isTerminal(w)
	var last string
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		r, err := c.GetRollout(ctx, group)
		switch {
		case err == nil:
			switch {
			case tty:
				fmt.Fprintf(w, "\r\033[K%s", rolloutLine(r, time.Now()))
			case format.structured():
				if b, _ := json.Marshal(rolloutToJSON(r)); string(b) != last {
					last = string(b)
					if err := writeData(w, format, rolloutToJSON(r)); err != nil {
						return err
					}
				}
			default:
				if line := rolloutLine(r, r.GetStarted().AsTime()); line != last {
					last = line
					fmt.Fprintln(w, rolloutLine(r, time.Now()))
				}
			}
			if rolloutEnded(r) {
				if tty {
					fmt.Fprintln(w)
				}
				return nil
			}
		case !errors.Is(err, client.ErrNoManager):
			return apiError("rollout status "+group, err)
		}
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(w)
			}
			return nil
		case <-tick.C:
		}
	}
}
