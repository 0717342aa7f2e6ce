package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator/spec"
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
	c.AddCommand(newGroupCommitCommand(g), newGroupDiffCommand(g), newGroupLsCommand(g), newGroupDescribeCommand(g), newGroupDestroyCommand(g), newGroupScaleCommand(g),
		newGroupSuspendCommand(g, false), newGroupSuspendCommand(g, true))
	return c
}

func newGroupCommitCommand(g *globalFlags) *cobra.Command {
	var yes, dryRun, force bool
	c := &cobra.Command{
		Use:   "commit FILE",
		Short: "Store a group spec; the leader makes the machines match it",
		Long: `Store the group that FILE (YAML, "-" for stdin) describes. Committing the
spec a group has already is a no-op; a bad file is refused with the field and
line at fault, and nothing changes.

A file from 'group describe' carries the revision it was read at (revision:):
its commit is refused if the group's spec changed since (another operator's
commit, a rollback), so that an edit of a stale copy does not undo a change
unseen. 'group diff FILE' shows what differs; --force commits anyway. A file
without a revision commits as it is.

--dry-run says what the commit would change (as 'group diff'), and changes
nothing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readFileArg(cmd, args[0])
			if err != nil {
				return err
			}
			spec, revision, err := spec.ParseGroupFile(data)
			if err != nil {
				return fmt.Errorf("%s: %w; nothing was committed", args[0], err)
			}
			if force {
				revision = nil
			}
			req := &pb.CommitGroupRequest{Spec: spec, ExpectedRevision: revision}
			if dryRun {
				return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
					return showPlan(ctx, cmd.OutOrStdout(), formatTable, c, req, "commit --dry-run")
				})
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				if err := checkCommitSize(ctx, c, spec, yes); err != nil {
					return err
				}
				resp, err := c.CommitGroupChecked(ctx, req)
				if err != nil {
					return apiError("commit group "+spec.Name, err)
				}
				view := resp.GetGroup()
				if !resp.GetChanged() {
					fmt.Fprintf(cmd.OutOrStdout(), "Group %s is unchanged (config SHA %s).\n", spec.Name, shortSHA(view.GetGroup().GetConfigSha()))
					return nil
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Committed group %s: size %d, config SHA %s, revision %d.\n", spec.Name, spec.Size, shortSHA(view.GetGroup().GetConfigSha()), view.GetGroup().GetSpecRevision())
				return nil
			})
		},
	}
	c.Flags().BoolVar(&yes, "yes", false, "commit size 0 for a group that has machines: take them all away")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "say what the commit would change, roll and destroy, and change nothing")
	c.Flags().BoolVar(&force, "force", false, "commit even if the group changed since the file's revision")
	return c
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
			return showAnswer(g, cmd, "list groups", (*client.Client).ListGroups, func(_ context.Context, _ *client.Client, out io.Writer, groups []*pb.GroupView) error {
				return writeGroups(out, format, groups)
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
config SHA and the group's nodes. Both carry the spec's revision: a commit of
the file is refused once the group has changed since (see group commit).`,
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
				out, err := spec.MarshalGroupFile(view.GetGroup().GetSpec(), view.GetGroup().GetSpecRevision())
				if err != nil {
					return err
				}
				// What holds the group goes to stderr: stdout stays the
				// file that commits the same spec.
				for _, n := range groupHolds(view.GetGroup()) {
					fmt.Fprintln(cmd.ErrOrStderr(), n)
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
	var yes bool
	c := &cobra.Command{
		Use:   "destroy NAME --yes",
		Short: "Destroy a group and its machines",
		Long: `Destroy a group: the leader takes its machines away (workers first, consensus
members demoted before their machine goes, the leader's own node last), then
the group. It takes every machine of the group, so it wants --yes, as
'group scale NAME 0' does. Refused while the group's voters are the cluster's
quorum.`,
		Example: `  curator group destroy workers --yes`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return fmt.Errorf("destroying group %s takes every machine of it away: pass --yes if that is what you want (to keep the group with fewer machines: 'curator group scale %s N'); nothing was changed", args[0], args[0])
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				view, err := c.DestroyGroup(ctx, args[0])
				if err != nil {
					return apiError("destroy group "+args[0], err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Destroying group %s: %s to take away; follow it with `curator group ls` and `curator events`.\n", args[0], count(int(view.GetMachines()), "machine"))
				return nil
			})
		},
	}
	c.Flags().BoolVar(&yes, "yes", false, "take every machine of the group away")
	return c
}

// newGroupSuspendCommand is `group suspend` (resume false) or `group
// resume`.
func newGroupSuspendCommand(g *globalFlags, resume bool) *cobra.Command {
	var all bool
	c := &cobra.Command{
		Use:   "suspend NAME | --all",
		Short: "Suspend a group: the leader makes and destroys none of its machines",
		Long: `Suspend a group (or every group, --all): the leader makes, replaces and
destroys none of its machines until it is resumed; group ls says it. A
restored cluster's groups come back suspended (curator agent restore).`,
	}
	verb := "Suspended"
	if resume {
		verb = "Resumed"
		c.Use, c.Short = "resume NAME | --all", "Resume a suspended group (a restored cluster's: --all)"
		c.Long = `Resume a suspended group (or every group, --all): the leader keeps its
machines matched to its spec again. A restored cluster's groups come back
suspended; resume them once the restored records are what you want the
cluster to be.`
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if all == (len(args) == 1) || len(args) > 1 {
			return fmt.Errorf("name one group, or --all")
		}
		return nil
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		name := ""
		if len(args) == 1 {
			name = args[0]
		}
		return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
			views, err := c.SuspendGroup(ctx, name, all, resume)
			if err != nil {
				return apiError(cmd.Name()+" group "+name, err)
			}
			if len(views) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "Nothing to change: already so.")
			}
			for _, v := range views {
				fmt.Fprintf(cmd.OutOrStdout(), "%s group %s (%d of %d machines ready).\n", verb, v.GetGroup().GetSpec().GetName(), v.GetReady(), v.GetGroup().GetSpec().GetSize())
			}
			return nil
		})
	}
	c.Flags().BoolVar(&all, "all", false, "every group")
	return c
}

func shortSHA(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// groupJSON is a group in `group ls -o json` and `group describe -o json`.
type groupJSON struct {
	// Revision is the spec's (see group commit).
	Revision     uint64         `json:"revision"`
	Name         string         `json:"name"`
	Size         uint32         `json:"size"`
	Roles        []string       `json:"roles"`
	MaxParallel  uint32         `json:"max_parallel"`
	ReplaceAfter string         `json:"replace_after"`
	JoinTimeout  string         `json:"join_timeout"`
	Provider     map[string]any `json:"provider"`
	// Domains are the failure domains the group spreads across, with
	// domain_hold; DomainMachines the machines listed in each, and
	// UnreachableDomains those its provider could not list now.
	Domains            []string          `json:"domains"`
	DomainHold         string            `json:"domain_hold,omitempty"`
	DomainMachines     map[string]uint32 `json:"domain_machines"`
	UnreachableDomains []string          `json:"unreachable_domains"`
	Template           groupTemplateJSON `json:"template"`
	ConfigSHA          string            `json:"config_sha"`
	Machines           uint32            `json:"machines"`
	Ready              uint32            `json:"ready"`
	NodeIDs            []string          `json:"node_ids"`
	Destroying         bool              `json:"destroying"`
	RolloutState       string            `json:"rollout_state"`
	// The rollout's progress, as `rollout status` gives it.
	RolloutUpdated uint32 `json:"rollout_updated"`
	RolloutTotal   uint32 `json:"rollout_total"`
	// The repair ceiling and budget, and what holds the group: its
	// repair hold (why, empty when its repairs go on) and a suspension.
	MaxUnhealthy      string `json:"max_unhealthy"`
	MaxReplacements   uint32 `json:"max_replacements"`
	ReplacementWindow string `json:"replacement_window"`
	RepairHeld        string `json:"repair_held"`
	Suspended         string `json:"suspended"`
	// ProviderFailing: what the group's provider said when it last
	// refused to make or destroy a machine (empty: it does not).
	ProviderFailing string `json:"provider_failing,omitempty"`
}

type groupTemplateJSON struct {
	Version string            `json:"version"`
	Labels  map[string]string `json:"labels"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	// What the machines run, as the leader recorded it at the commit
	// (absent for a group committed before releases were recorded).
	Release *groupReleaseJSON `json:"release,omitempty"`
}

// groupReleaseJSON is a template's release: the binary or image and its
// digest.
type groupReleaseJSON struct {
	Binary string `json:"binary,omitempty"`
	Image  string `json:"image,omitempty"`
	Digest string `json:"digest"`
}

func groupToJSON(v *pb.GroupView) groupJSON {
	spec := v.GetGroup().GetSpec()
	out := groupJSON{
		Revision: v.GetGroup().GetSpecRevision(),
		Name:     spec.GetName(), Size: spec.GetSize(), MaxParallel: spec.GetMaxParallel(),
		ReplaceAfter: spec.GetReplaceAfter().AsDuration().String(), JoinTimeout: spec.GetJoinTimeout().AsDuration().String(),
		Template: groupTemplateJSON{
			Version: spec.GetTemplate().GetVersion(), Labels: nonNil(spec.GetTemplate().GetLabels()),
			Args: slices.Concat([]string{}, spec.GetTemplate().GetArgs()), Env: nonNil(spec.GetTemplate().GetEnv()),
		},
		ConfigSHA: v.GetGroup().GetConfigSha(), Machines: v.GetMachines(), Ready: v.GetReady(),
		NodeIDs: slices.Concat([]string{}, v.GetNodeIds()), Destroying: v.GetGroup().GetDestroying(), RolloutState: v.GetRolloutState(),
		RolloutUpdated: v.GetRolloutUpdated(), RolloutTotal: v.GetRolloutTotal(),
		MaxUnhealthy: spec.GetMaxUnhealthy(), MaxReplacements: spec.GetMaxReplacements(),
		ReplacementWindow: spec.GetReplacementWindow().AsDuration().String(),
		RepairHeld:        v.GetGroup().GetRepairHeld(), Suspended: v.GetGroup().GetSuspended(),
		ProviderFailing: v.GetGroup().GetProviderFailing(),
		Domains:         slices.Concat([]string{}, spec.GetDomains()),
		DomainMachines:  map[string]uint32{}, UnreachableDomains: slices.Concat([]string{}, v.GetUnreachableDomains()),
	}
	maps.Copy(out.DomainMachines, v.GetDomainMachines())
	if h := spec.GetDomainHold(); h != nil {
		out.DomainHold = h.AsDuration().String()
	}
	if r := spec.GetTemplate().GetRelease(); r != nil {
		out.Template.Release = &groupReleaseJSON{Binary: r.Binary, Image: r.Image, Digest: r.Digest}
	}
	out.Roles = []string{}
	for _, r := range spec.GetRoles() {
		out.Roles = append(out.Roles, enumWord(r))
	}
	switch p := spec.GetProvider().GetKind().(type) {
	case *pb.ProviderSpec_Process:
		process := map[string]any{"addresses": p.Process.Addresses, "port": p.Process.Port, "dir": p.Process.Dir, "binary": p.Process.Binary}
		if len(p.Process.Domains) > 0 {
			process["domains"] = maps.Clone(p.Process.Domains)
		}
		out.Provider = map[string]any{"process": process}
	case *pb.ProviderSpec_Docker:
		docker := map[string]any{"network": p.Docker.Network, "subnet": p.Docker.Subnet, "image": p.Docker.Image, "port": p.Docker.Port}
		if len(p.Docker.Engines) > 0 {
			engines := map[string]any{}
			for name, e := range p.Docker.Engines {
				engines[name] = map[string]any{"host": e.GetHost(), "subnet": e.GetSubnet()}
			}
			docker["engines"] = engines
		}
		out.Provider = map[string]any{"docker": docker}
	case *pb.ProviderSpec_Plugin:
		out.Provider = map[string]any{"plugin": map[string]any{"path": p.Plugin.Path, "config": nonNil(p.Plugin.Config)}}
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
	rows := [][]string{{"NAME", "ROLES", "SIZE", "READY", "MACHINES", "CONFIG SHA", "ROLLOUT", "REPAIRS"}}
	withDomains := slices.ContainsFunc(groups, func(v *pb.GroupView) bool { return len(v.GetGroup().GetSpec().GetDomains()) > 0 })
	if withDomains {
		rows[0] = append(rows[0], "DOMAINS")
	}
	var notes []string
	for _, v := range groups {
		spec := v.GetGroup().GetSpec()
		var roles []string
		for _, r := range spec.GetRoles() {
			roles = append(roles, enumWord(r))
		}
		rollout := v.GetRolloutState()
		if rollout != "" && rollout != "done" {
			// A done rollout's count is READY's, of the group as it is.
			rollout += fmt.Sprintf(" %d/%d", v.GetRolloutUpdated(), v.GetRolloutTotal())
		}
		if v.GetGroup().GetDestroying() {
			rollout = "destroying"
		}
		rows = append(rows, []string{
			spec.GetName(), strings.Join(roles, ","), fmt.Sprint(spec.GetSize()),
			fmt.Sprintf("%d/%d", v.GetReady(), spec.GetSize()), fmt.Sprint(v.GetMachines()),
			shortSHA(v.GetGroup().GetConfigSha()), orDash(rollout), repairsWord(v.GetGroup()),
		})
		if withDomains {
			rows[len(rows)-1] = append(rows[len(rows)-1], domainsCell(v))
		}
		notes = append(notes, groupHolds(v.GetGroup())...)
		if d := v.GetUnreachableDomains(); len(d) > 0 {
			notes = append(notes, fmt.Sprintf("Group %s: its provider cannot list domain %s now: the machines there are unknown, not gone.", spec.GetName(), strings.Join(d, ", ")))
		}
	}
	if err := writeTable(w, rows); err != nil {
		return err
	}
	for _, n := range notes {
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	return nil
}

// domainsCell is the DOMAINS column of `group ls`: the machines listed in
// each of the group's domains, "?" for one its provider cannot list now
// ("a:1 b:? c:1"), "-" for a group of no domains.
func domainsCell(v *pb.GroupView) string {
	var cells []string
	for _, d := range v.GetGroup().GetSpec().GetDomains() {
		if slices.Contains(v.GetUnreachableDomains(), d) {
			cells = append(cells, d+":?")
			continue
		}
		cells = append(cells, fmt.Sprintf("%s:%d", d, v.GetDomainMachines()[d]))
	}
	return orDash(strings.Join(cells, " "))
}

// repairsWord is the REPAIRS column of `group ls`: on, held (by the
// repair ceiling or budget), suspended, or failing (its provider refuses
// to make or destroy machines).
func repairsWord(g *pb.Group) string {
	switch {
	case g.GetSuspended() != "":
		return "suspended"
	case g.GetRepairHeld() != "":
		return "held"
	case g.GetProviderFailing() != "":
		return "failing"
	}
	return "on"
}

// groupHolds says what holds group g's loop back, one line each.
func groupHolds(g *pb.Group) []string {
	var out []string
	name := g.GetSpec().GetName()
	if g.GetSuspended() != "" {
		out = append(out, fmt.Sprintf("Group %s is suspended (%s): it makes and destroys nothing until `curator group resume %s`.", name, g.GetSuspended(), name))
	}
	if g.GetRepairHeld() != "" {
		out = append(out, fmt.Sprintf("The repairs of group %s are held: %s.", name, g.GetRepairHeld()))
	}
	if g.GetProviderFailing() != "" {
		out = append(out, fmt.Sprintf("Group %s is failing: %s.", name, g.GetProviderFailing()))
	}
	return out
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
		Short: "Follow, pause, resume, cancel, restart and undo a group's rolling update",
		Long: `Committing a group whose config SHA changed starts a rollout to that SHA:
workers are replaced up to max_parallel at a time (a new machine first, by
default), consensus members one at a time with the new one a ready voter before
the old one is demoted, the curator leader's own node last. A new machine that
dies or is not ready in time fails the rollout, which rolls the group back to
its previous config (the group's rollout: policy). The rollout lives in etcd: a
new leader carries it on. SHAs may be given by a unique prefix.`,
	}
	c.AddCommand(newRolloutStatusCommand(g), newRolloutHistoryCommand(g))
	for _, action := range []string{"cancel", "pause", "resume", "restart", "undo"} {
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
		"cancel":  "Cancel a group's rollout: what is done stays done, nothing more is rolled (one paused by its failure rolls back)",
		"pause":   "Pause a group's rollout after the step in flight",
		"resume":  "Resume a paused rollout",
		"restart": "Start a cancelled or failed rollout again (or the one a rollback undid)",
		"undo":    "Roll a group back to a past config (--to SHA; default: the one before)",
	}[action]
	var sha, to string
	c := &cobra.Command{
		Use:   action + " GROUP",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				r, err := c.ChangeRolloutTo(ctx, args[0], action, sha, to)
				if err != nil {
					return apiError("rollout "+action+" "+args[0], err)
				}
				if action == "cancel" && r.RollbackOf != "" && r.State == pb.RolloutState_ROLLOUT_STATE_ROLLING {
					// A cancel of a rollout paused by its failure: the
					// answer is the rollback to the config before.
					fmt.Fprintf(cmd.OutOrStdout(), "Rollout of group %s to %s had failed: cancelled; the group rolls back to its previous config %s.\n", r.Group, shortSHA(r.RollbackOf), shortSHA(r.TargetSha))
					return nil
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Rollout of group %s to %s: %s (%d of %d updated).\n", r.Group, shortSHA(r.TargetSha), rolloutState(r), r.Updated, r.Total)
				return nil
			})
		},
	}
	c.Flags().StringVar(&sha, "sha", "", "act only if the rollout is to this config SHA or unique prefix (default: whatever it is now)")
	if action == "undo" {
		c.Flags().StringVar(&to, "to", "", "the past config SHA (or unique prefix) to go back to (default: the one before the current)")
	}
	return c
}

// rolloutHistoryJSON is one row of `rollout history -o json`.
type rolloutHistoryJSON struct {
	SHA        string     `json:"sha"`
	State      string     `json:"state"`
	Reason     string     `json:"reason,omitempty"`
	Started    *time.Time `json:"started"`
	Finished   *time.Time `json:"finished"`
	RollbackOf string     `json:"rollback_of,omitempty"`
	Current    bool       `json:"current"`
}

func newRolloutHistoryCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	c := &cobra.Command{
		Use:   "history GROUP",
		Short: "List a group's configs: the current one first, with SHAs, times and outcomes",
		Long: `List a group's configs, the current first, then the last ten before it:
each with its config SHA, when its rollout started and ended, and how (done,
failed, cancelled, a rollback; "committed" for the group's first config). Any
of them can be gone back to with rollout undo --to SHA.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				r, err := c.GetRollout(ctx, args[0])
				if err != nil {
					return apiError("rollout history "+args[0], err)
				}
				rows := []rolloutHistoryJSON{{SHA: r.TargetSha, State: rolloutState(r), Reason: r.Reason, Started: timeOrNil(r.Started), Finished: timeOrNil(r.Finished), RollbackOf: r.RollbackOf, Current: true}}
				for _, h := range r.History {
					state := "committed"
					if h.State != pb.RolloutState_ROLLOUT_STATE_UNSPECIFIED {
						state = enumWord(h.State)
					}
					rows = append(rows, rolloutHistoryJSON{SHA: h.Sha, State: state, Reason: h.Reason, Started: timeOrNil(h.Started), Finished: timeOrNil(h.Finished), RollbackOf: h.RollbackOf})
				}
				if format.structured() {
					return writeData(cmd.OutOrStdout(), format, rows)
				}
				table := [][]string{{"CONFIG SHA", "STARTED", "FINISHED", "OUTCOME", "REASON"}}
				for _, row := range rows {
					outcome := row.State
					if row.RollbackOf != "" {
						outcome += " (rollback of " + shortSHA(row.RollbackOf) + ")"
					}
					if row.Current {
						outcome += " (current)"
					}
					table = append(table, []string{shortSHA(row.SHA), timeWord(row.Started), timeWord(row.Finished), outcome, orDash(row.Reason)})
				}
				return writeTable(cmd.OutOrStdout(), table)
			})
		},
	}
	addOutputFlag(c, &format)
	return c
}

// timeWord is a time as a history row shows it, "-" for none.
func timeWord(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
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
	PreviousSHA    string     `json:"previous_sha,omitempty"`
	Failures       uint32     `json:"failures"`
	LastFailure    string     `json:"last_failure,omitempty"`
	RollbackOf     string     `json:"rollback_of,omitempty"`
}

func rolloutState(r *pb.Rollout) string { return enumWord(r.GetState()) }

func rolloutToJSON(r *pb.Rollout) rolloutJSON {
	out := rolloutJSON{
		Group: r.Group, TargetSHA: r.TargetSha, State: rolloutState(r), Reason: r.Reason,
		Updated: r.Updated, Total: r.Total, Node: r.Node, Step: r.Step,
		Started: timeOrNil(r.Started), Finished: timeOrNil(r.Finished), Rolled: r.Rolled,
		PreviousSHA: r.PreviousSha, Failures: r.Failures, LastFailure: r.LastFailure, RollbackOf: r.RollbackOf,
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
	if r.Failures > 0 && r.State == pb.RolloutState_ROLLOUT_STATE_ROLLING {
		line += fmt.Sprintf(", %d failed", r.Failures)
	}
	if r.Reason != "" && (r.State != pb.RolloutState_ROLLOUT_STATE_ROLLING || r.RollbackOf != "") {
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

// watchRollout follows a rollout until it ends (client.WaitRollout: every
// second, riding out an election). In a terminal it redraws one progress line; elsewhere it writes
// a line, or a JSON object, per change.
func watchRollout(ctx context.Context, w io.Writer, format outputFormat, c *client.Client, group string) error {
	tty := !format.structured() && isTerminal(w)
	var last string
	var werr error
	show := func(r *pb.Rollout) (bool, error) {
		switch {
		case tty:
			fmt.Fprintf(w, "\r\033[K%s", rolloutLine(r, time.Now()))
		case format.structured():
			if b, _ := json.Marshal(rolloutToJSON(r)); string(b) != last {
				last = string(b)
				if werr = writeData(w, format, rolloutToJSON(r)); werr != nil {
					return false, werr
				}
			}
		default:
			if line := rolloutLine(r, r.GetStarted().AsTime()); line != last {
				last = line
				fmt.Fprintln(w, rolloutLine(r, time.Now()))
			}
		}
		return client.RolloutEnded(r)
	}
	_, err := c.WaitRollout(ctx, group, show)
	if tty {
		fmt.Fprintln(w)
	}
	switch {
	case werr != nil:
		return werr
	case err == nil, ctx.Err() != nil:
		return nil
	}
	return apiError("rollout status "+group, err)
}
