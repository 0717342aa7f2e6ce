package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

func newGroupScaleCommand(g *globalFlags) *cobra.Command {
	var yes bool
	c := &cobra.Command{
		Use:   "scale NAME SIZE",
		Short: "Change a group's size",
		Long: `Change a group's size, keeping the rest of its spec: the same as
'group describe NAME', the size changed, and 'group commit -'. The leader
provisions what is missing or takes extras away (workers first, within a
healthy majority of voters). Size 0 takes every machine of the group away at
once: it wants --yes.`,
		Example: `  curator group scale workers 5`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			size, err := strconv.ParseUint(args[1], 10, 32)
			if err != nil || size > spec.MaxGroupSize {
				return fmt.Errorf("size %q: want a whole number from 0 to %d", args[1], spec.MaxGroupSize)
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				view, err := c.GetGroup(ctx, name)
				if err != nil {
					return apiError("scale group "+name, err)
				}
				spec := view.GetGroup().GetSpec()
				if spec.GetSize() == uint32(size) {
					fmt.Fprintf(cmd.OutOrStdout(), "Group %s has size %d already.\n", name, size)
					return nil
				}
				if err := refuseEmptying(name, spec.GetSize(), uint32(size), yes); err != nil {
					return err
				}
				was := spec.Size
				spec.Size = uint32(size)
				// At the revision read: a change meanwhile is not undone.
				rev := view.GetGroup().GetSpecRevision()
				if _, err := c.CommitGroupChecked(ctx, &pb.CommitGroupRequest{Spec: spec, ExpectedRevision: &rev}); err != nil {
					if status.Code(err) == codes.FailedPrecondition && strings.Contains(err.Error(), "changed since this spec was read") {
						return fmt.Errorf("scale group %s: the group changed between this command's read and its commit (another operator's commit, a rollback): nothing was changed; run it again", name)
					}
					return apiError("scale group "+name, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Scaled group %s from %d to %d; follow it with `curator group ls` and `curator events`.\n", name, was, size)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&yes, "yes", false, "scale to 0: take every machine of the group away")
	return c
}

// refuseEmptying refuses, without --yes, a size of 0 for a group that has
// machines: it takes them all away at once.
func refuseEmptying(name string, from, to uint32, yes bool) error {
	if to != 0 || from == 0 || yes {
		return nil
	}
	return fmt.Errorf("size 0 takes all %d machines of group %s away at once: pass --yes if that is what you want (or 'curator group destroy %s'); nothing was changed", from, name, name)
}

// checkCommitSize is group commit's guard for a spec of size 0: refused
// without --yes when the group stored now has machines.
func checkCommitSize(ctx context.Context, c *client.Client, spec *pb.GroupSpec, yes bool) error {
	if spec.GetSize() != 0 || yes {
		return nil
	}
	view, err := c.GetGroup(ctx, spec.GetName())
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		return apiError("commit group "+spec.GetName(), err)
	}
	return refuseEmptying(spec.GetName(), view.GetGroup().GetSpec().GetSize(), 0, yes)
}
