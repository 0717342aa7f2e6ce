package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
	pb "github.com/curatorproject/curator/proto"
)

func newEventsCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	var limit uint32
	c := &cobra.Command{
		Use:   "events",
		Short: "What the background loops did, and why",
		Long: `List what the leader's background loops did (or refused to do) and why,
oldest first: the consensus sync, learner promotion and health loops.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				var events []*pb.Event
				err := c.Management(ctx, func(ctx context.Context, m pb.ManagementClient) error {
					resp, err := m.ListEvents(ctx, &pb.ListEventsRequest{Limit: limit})
					if err != nil {
						return err
					}
					events = resp.Events
					return nil
				})
				if err != nil {
					return apiError("list events", err)
				}
				return writeEvents(cmd.OutOrStdout(), format, events)
			})
		},
	}
	addOutputFlag(c, &format)
	c.Flags().Uint32Var(&limit, "limit", 100, "show at most this many of the newest events (0: all that are kept)")
	return c
}

type eventJSON struct {
	Time   *time.Time `json:"time"`
	Loop   string     `json:"loop"`
	NodeID string     `json:"node_id"`
	Action string     `json:"action"`
	Reason string     `json:"reason"`
	Leader string     `json:"leader"`
}

func writeEvents(w io.Writer, format outputFormat, events []*pb.Event) error {
	if format == formatJSON {
		out := make([]eventJSON, 0, len(events))
		for _, e := range events {
			out = append(out, eventJSON{Time: timeOrNil(e.Time), Loop: e.Loop, NodeID: e.NodeId, Action: e.Action, Reason: e.Reason, Leader: e.Leader})
		}
		return writeJSON(w, out)
	}
	if len(events) == 0 {
		_, err := fmt.Fprintln(w, "No events: the loops have had nothing to do.")
		return err
	}
	rows := [][]string{{"TIME", "LOOP", "ACTION", "NODE", "REASON"}}
	for _, e := range events {
		rows = append(rows, []string{e.Time.AsTime().UTC().Format(time.RFC3339), e.Loop, e.Action, e.NodeId, e.Reason})
	}
	return writeTable(w, rows)
}
