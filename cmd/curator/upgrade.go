package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
)

// `curator upgrade`: the whole cluster onto a release. The leader's
// upgrade loop does it, from a record in etcd; against a leader of a
// release without that loop (StartUpgrade is Unimplemented there) the
// command does the same itself, group by group, through the calls every
// release has (group commit, rollout status), and must then run to the
// end. A downgrade hands over so too: once the leader runs the release
// without the loop, the command carries the upgrade on.

func newUpgradeCommand(g *globalFlags) *cobra.Command {
	var binary, image string
	var detach bool
	var format outputFormat
	c := &cobra.Command{
		Use:   "upgrade --binary PATH | --image REF",
		Short: "Take the whole cluster to a release: managers first, the curator leader last",
		Long: `Take every group to a release: the process provider's groups onto --binary (an
absolute path on the managers' hosts), the Docker provider's onto --image. The
groups with the consensus role go first, one group at a time, each under its
rollout policy (surge first, the curator leader's node last: the next leader,
on the new release, carries the upgrade on); then the others. A group whose
rollout fails rolls back under its failure policy and stops the upgrade, saying
where. The command follows the upgrade until it ends (--detach: it returns once
it is started); 'upgrade status' shows it, 'upgrade cancel' stops it. An
admin's command: it chooses what every machine runs.`,
		// No Args: strictTree refuses an argument as an unknown subcommand.
		RunE: func(cmd *cobra.Command, _ []string) error {
			if binary == "" && image == "" {
				return errors.New("upgrade: name the release: --binary PATH or --image REF")
			}
			if binary != "" && !filepath.IsAbs(binary) {
				return fmt.Errorf("upgrade: --binary %q is not an absolute path", binary)
			}
			w := cmd.OutOrStdout()
			return g.dial(cmd.Context(), func(ctx context.Context, c *client.Client) error {
				u, err := c.StartUpgrade(ctx, binary, image)
				if status.Code(err) == codes.Unimplemented {
					g.note("the leader runs a release without `curator upgrade`: this command takes the groups onto the release itself, one by one; let it run to the end")
					return driveUpgrade(ctx, w, c, binary, image)
				}
				if err != nil {
					return apiError("upgrade", err)
				}
				if detach {
					return writeUpgrade(w, format, u)
				}
				return followUpgrade(ctx, w, g, c, format)
			})
		},
	}
	c.Flags().StringVar(&binary, "binary", "", "the curator binary the process provider's groups are to run (absolute path)")
	c.Flags().StringVar(&image, "image", "", "the image the Docker provider's groups are to run")
	c.Flags().BoolVar(&detach, "detach", false, "return once the upgrade is started")
	addOutputFlag(c, &format)
	c.AddCommand(newUpgradeStatusCommand(g), newUpgradeCancelCommand(g))
	return c
}

func newUpgradeStatusCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	var watch bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the last upgrade: a line per group",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !watch {
				return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
					u, err := c.GetUpgrade(ctx)
					if err != nil {
						return apiError("upgrade status", err)
					}
					return writeUpgrade(cmd.OutOrStdout(), format, u)
				})
			}
			return g.dial(cmd.Context(), func(ctx context.Context, c *client.Client) error {
				return followUpgrade(ctx, cmd.OutOrStdout(), g, c, format)
			})
		},
	}
	addOutputFlag(c, &format)
	c.Flags().BoolVar(&watch, "watch", false, "follow the upgrade until it ends")
	return c
}

func newUpgradeCancelCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	c := &cobra.Command{
		Use:   "cancel",
		Short: "Stop the upgrade: the group in flight's rollout is cancelled, no further group is committed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				u, err := c.CancelUpgrade(ctx)
				if err != nil {
					return apiError("upgrade cancel", err)
				}
				return writeUpgrade(cmd.OutOrStdout(), format, u)
			})
		},
	}
	addOutputFlag(c, &format)
	return c
}

// followUpgrade prints the upgrade each time it changes until it ends:
// an error unless it is done. When the leader turns out to run a release
// without the upgrade loop (a downgrade got to the curator leader's
// node), it carries the upgrade on itself.
func followUpgrade(ctx context.Context, w io.Writer, g *globalFlags, c *client.Client, format outputFormat) error {
	var last string
	var seen *pb.Upgrade
	u, err := c.WaitUpgrade(ctx, func(u *pb.Upgrade) (bool, error) {
		seen = u
		line := upgradeLine(u)
		if line != last {
			last = line
			if err := writeUpgradeLine(w, format, u); err != nil {
				return false, err
			}
		}
		return u.State != pb.UpgradeState_UPGRADE_STATE_ROLLING, nil
	})
	if status.Code(err) == codes.Unimplemented && seen != nil {
		g.note("the leader now runs a release without `curator upgrade`: this command carries the upgrade on itself, one group at a time")
		return driveUpgrade(ctx, w, c, seen.Binary, seen.Image)
	}
	if err != nil {
		return apiError("upgrade status", err)
	}
	switch u.State {
	case pb.UpgradeState_UPGRADE_STATE_DONE:
		return nil
	case pb.UpgradeState_UPGRADE_STATE_FAILED:
		return fmt.Errorf("upgrade to %s failed: %s", spec.ReleaseName(u.Binary, u.Image), u.Reason)
	}
	return fmt.Errorf("upgrade to %s %s: %s", spec.ReleaseName(u.Binary, u.Image), upgradeStateWord(u.State), u.Reason)
}

// driveUpgrade takes the groups onto the release through group commits,
// as the upgrade loop does: the consensus groups first, one group at a
// time, each once the one before rolled. A group on the release already
// is only waited for. The template gets the label curator/release (the
// release's digest, or its name), so that a leader whose config SHA does
// not cover the binary rolls the group all the same.
func driveUpgrade(ctx context.Context, w io.Writer, c *client.Client, binary, image string) error {
	views, err := c.ListGroups(ctx)
	if err != nil {
		return apiError("upgrade: list groups", err)
	}
	slices.SortStableFunc(views, func(a, b *pb.GroupView) int {
		return spec.ConsensusFirst(a.GetGroup().GetSpec(), b.GetGroup().GetSpec())
	})
	label := releaseLabel(binary, image)
	for _, v := range views {
		name := v.GetGroup().GetSpec().GetName()
		gs := proto.Clone(v.GetGroup().GetSpec()).(*pb.GroupSpec)
		changed, skip := spec.UpgradeProvider(gs, binary, image)
		if skip != "" {
			fmt.Fprintf(w, "group %s: skipped: %s\n", name, skip)
			continue
		}
		if changed {
			if gs.Template == nil {
				gs.Template = &pb.InstanceTemplate{}
			}
			if gs.Template.Labels == nil {
				gs.Template.Labels = map[string]string{}
			}
			gs.Template.Labels[releaseLabelKey] = label
			gs.Template.Release = nil // the leader's to say
			if _, _, err := c.CommitGroup(ctx, gs); err != nil {
				return apiError("upgrade: commit group "+name, err)
			}
			fmt.Fprintf(w, "group %s: committed onto %s: rolling\n", name, spec.ReleaseName(binary, image))
		}
		r, err := c.WaitRollout(ctx, name, client.RolloutEnded)
		switch {
		case status.Code(err) == codes.NotFound && !changed:
			fmt.Fprintf(w, "group %s: runs the release already\n", name)
			continue
		case err != nil:
			return apiError("upgrade: the rollout of group "+name, err)
		case r.State != pb.RolloutState_ROLLOUT_STATE_DONE || r.RollbackOf != "":
			return fmt.Errorf("upgrade to %s stopped at group %s: its rollout is %s (%s): the groups after it were left as they are",
				spec.ReleaseName(binary, image), name, rolloutState(r), r.Reason)
		}
		fmt.Fprintf(w, "group %s: done (%d machines)\n", name, r.Total)
	}
	fmt.Fprintf(w, "upgrade to %s: done\n", spec.ReleaseName(binary, image))
	return nil
}

// releaseLabelKey is the template label driveUpgrade sets.
const releaseLabelKey = "curator/release"

// releaseLabel is the label value of a release: 12 hex digits of the
// binary's digest when this host can read it, else its name as a label
// value may hold it.
func releaseLabel(binary, image string) string {
	if binary != "" {
		if d, err := provider.FileDigest(binary); err == nil {
			return strings.TrimPrefix(d, "sha256:")[:12]
		}
	}
	name := filepath.Base(cmp.Or(binary, image))
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	return strings.Trim(b.String(), "-._")[:min(b.Len(), 63)]
}

func upgradeStateWord(s pb.UpgradeState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "UPGRADE_STATE_"))
}

// upgradeLine is the upgrade in a line: its state and each group's.
func upgradeLine(u *pb.Upgrade) string {
	var groups []string
	for _, ug := range u.Groups {
		groups = append(groups, ug.Name+" "+ug.State)
	}
	line := fmt.Sprintf("upgrade to %s: %s (%s)", spec.ReleaseName(u.Binary, u.Image), upgradeStateWord(u.State), strings.Join(groups, ", "))
	if u.Reason != "" {
		line += ": " + u.Reason
	}
	return line
}

// upgradeJSON is an upgrade in `upgrade status -o json`.
type upgradeJSON struct {
	Binary    string             `json:"binary"`
	Image     string             `json:"image"`
	State     string             `json:"state"`
	Reason    string             `json:"reason"`
	StartedBy string             `json:"started_by"`
	Started   string             `json:"started"`
	Finished  string             `json:"finished"`
	Groups    []upgradeGroupJSON `json:"groups"`
}

type upgradeGroupJSON struct {
	Name        string `json:"name"`
	State       string `json:"state"`
	TargetSHA   string `json:"target_sha"`
	PreviousSHA string `json:"previous_sha"`
	Reason      string `json:"reason"`
}

func upgradeToJSON(u *pb.Upgrade) upgradeJSON {
	out := upgradeJSON{Binary: u.Binary, Image: u.Image, State: upgradeStateWord(u.State), Reason: u.Reason, StartedBy: u.StartedBy,
		Started: timeText(u.Started.AsTime()), Groups: []upgradeGroupJSON{}}
	if u.Finished != nil {
		out.Finished = timeText(u.Finished.AsTime())
	}
	for _, g := range u.Groups {
		out.Groups = append(out.Groups, upgradeGroupJSON{Name: g.Name, State: g.State, TargetSHA: g.TargetSha, PreviousSHA: g.PreviousSha, Reason: g.Reason})
	}
	return out
}

func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// writeUpgradeLine writes one change of a followed upgrade.
func writeUpgradeLine(w io.Writer, format outputFormat, u *pb.Upgrade) error {
	if format.structured() {
		return writeData(w, format, upgradeToJSON(u))
	}
	_, err := fmt.Fprintln(w, upgradeLine(u))
	return err
}

// writeUpgrade writes the upgrade: a heading, then a line per group.
func writeUpgrade(w io.Writer, format outputFormat, u *pb.Upgrade) error {
	if format.structured() {
		return writeData(w, format, upgradeToJSON(u))
	}
	fmt.Fprintf(w, "Upgrade to %s: %s, started %s by %s\n", spec.ReleaseName(u.Binary, u.Image), upgradeStateWord(u.State), timeText(u.Started.AsTime()), orDash(u.StartedBy))
	if u.Reason != "" {
		fmt.Fprintf(w, "%s\n", u.Reason)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSTATE\tCONFIG\tWAS\tREASON")
	for _, g := range u.Groups {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", g.Name, g.State, orDash(shortSHA(g.TargetSha)), orDash(shortSHA(g.PreviousSha)), orDash(g.Reason))
	}
	return tw.Flush()
}
