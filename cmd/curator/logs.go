package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/client"
	pb "github.com/curatorproject/curator/proto"
)

func newLogsCommand(g *globalFlags) *cobra.Command {
	var (
		follow     bool
		since      string
		tail       uint32
		timestamps bool
	)
	c := &cobra.Command{
		Use:   "logs NODE",
		Short: "Print a node agent's log, through the managers",
		Long: `Print the log of the agent on NODE (an ID, a unique prefix of one, or a name)
through the managers, with no shell on the machine, as docker service logs and
talosctl logs do: the leader asks the node over its session, and the node sends
its lines back. An agent keeps its last 10000 lines in memory (since it last
started; older ones, and those of an agent that is down, are where its stderr
goes: the journal, or the process provider's log file). A node that is down or
cut off is an error that names it.

--follow (-f) prints new lines as they are logged, until Ctrl-C; --since keeps
the lines logged since a time (RFC 3339) or that long ago (10m); --tail the last
N. It needs the operator role: a log may say more than a reader sees.`,
		Example: `  curator logs worker-3 --since 10m
  curator logs 4fq2 -f --tail 20`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			from, err := parseSince(since, time.Now())
			if err != nil {
				return err
			}
			req := &pb.NodeLogsRequest{Id: args[0], Tail: tail, Follow: follow}
			if !from.IsZero() {
				req.Since = timestamppb.New(from)
			}
			run := g.withClient
			if follow {
				run = func(cmd *cobra.Command, fn func(context.Context, *client.Client) error) error {
					return g.dial(cmd.Context(), fn)
				}
			}
			return run(cmd, func(ctx context.Context, c *client.Client) error {
				err := c.NodeLogs(ctx, req, func(lines []*pb.LogLine) error {
					return writeLogLines(cmd.OutOrStdout(), lines, timestamps)
				})
				if err != nil && follow && ctx.Err() != nil {
					return nil // Ctrl-C
				}
				if err != nil {
					return apiError("logs "+args[0], err)
				}
				return nil
			})
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "print new lines as they are logged, until Ctrl-C")
	c.Flags().StringVar(&since, "since", "", "only lines since this time (RFC 3339) or this long ago (10m)")
	c.Flags().Uint32Var(&tail, "tail", 0, "only the last N lines (0: every line kept)")
	c.Flags().BoolVarP(&timestamps, "timestamps", "t", false, "put the time each line was logged before it (an agent under journald logs none of its own)")
	return c
}

// writeLogLines writes lines as the agent logged them (with -t, each
// after when it was).
func writeLogLines(w io.Writer, lines []*pb.LogLine, timestamps bool) error {
	for _, l := range lines {
		var err error
		if timestamps {
			_, err = fmt.Fprintf(w, "%s %s\n", l.GetTime().AsTime().Local().Format(time.RFC3339Nano), l.GetText())
		} else {
			_, err = fmt.Fprintln(w, l.GetText())
		}
		if err != nil {
			return err
		}
	}
	return nil
}
