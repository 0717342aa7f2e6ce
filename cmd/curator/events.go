package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator"
	pb "github.com/curatorproject/curator/proto"
)

func newEventsCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	var limit uint32
	var follow bool
	c := &cobra.Command{
		Use:   "events",
		Short: "What the background loops did, and why",
		Long: `List what the leader's background loops did (or refused to do) and why,
oldest first: the consensus sync, learner promotion, health and group loops.

--follow (as docker events and tail -f) prints the newest --limit events,
then each new one as it is recorded, until Ctrl-C; across a failover it
resumes where it was, without a gap or a repeat. With -o json it prints one
event a line, with -o yaml one document an event.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if follow {
				return g.dial(cmd.Context(), func(ctx context.Context, c *client.Client) error {
					return followEvents(ctx, c, cmd.OutOrStdout(), format, limit)
				})
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				events, err := c.ListEvents(ctx, limit)
				if err != nil {
					return apiError("list events", err)
				}
				return writeEvents(cmd.OutOrStdout(), format, events)
			})
		},
	}
	addOutputFlag(c, &format)
	c.Flags().Uint32Var(&limit, "limit", 100, "show at most this many of the newest events (0: all that are kept)")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "print new events as they are recorded, until Ctrl-C")
	return c
}

type eventJSON struct {
	Time   *time.Time `json:"time"`
	Loop   string     `json:"loop"`
	NodeID string     `json:"node_id"`
	Action string     `json:"action"`
	Reason string     `json:"reason"`
	Leader string     `json:"leader"`
	Term   int64      `json:"term,omitempty"`
}

func eventToJSON(e *pb.Event) eventJSON {
	return eventJSON{Time: timeOrNil(e.Time), Loop: e.Loop, NodeID: e.NodeId, Action: e.Action, Reason: e.Reason, Leader: e.Leader, Term: e.Term}
}

func writeEvents(w io.Writer, format outputFormat, events []*pb.Event) error {
	if format.structured() {
		out := make([]eventJSON, 0, len(events))
		for _, e := range events {
			out = append(out, eventToJSON(e))
		}
		return writeData(w, format, out)
	}
	if len(events) == 0 {
		_, err := fmt.Fprintln(w, "No events: the loops have had nothing to do.")
		return err
	}
	rows := [][]string{{"TIME", "LOOP", "ACTION", "NODE", "REASON"}}
	for _, e := range events {
		rows = append(rows, eventRow(e))
	}
	return writeTable(w, rows)
}

func eventRow(e *pb.Event) []string {
	return []string{e.Time.AsTime().UTC().Format(time.RFC3339), e.Loop, e.Action, e.NodeId, e.Reason}
}

// followEvents prints the newest limit events, then each new one, until
// ctx ends (Ctrl-C: a clean exit). A table cannot be aligned on rows to
// come, so its columns have fixed widths, wide enough for the usual words.
func followEvents(ctx context.Context, c *client.Client, w io.Writer, format outputFormat, limit uint32) error {
	backlog := limit
	if backlog == 0 {
		backlog = curator.MaxEvents
	}
	if format == formatTable {
		if _, err := fmt.Fprintln(w, followRow([]string{"TIME", "LOOP", "ACTION", "NODE", "REASON"})); err != nil {
			return err
		}
	}
	err := c.WatchEvents(ctx, 0, backlog, func(resp *pb.WatchEventsResponse) error {
		for _, e := range resp.GetEvents() {
			var err error
			switch format {
			case formatJSON:
				var line []byte
				if line, err = json.Marshal(eventToJSON(e)); err == nil {
					_, err = fmt.Fprintf(w, "%s\n", line)
				}
			case formatYAML:
				var doc []byte
				if doc, err = yamlOf(eventToJSON(e)); err == nil {
					_, err = fmt.Fprintf(w, "---\n%s", doc)
				}
			default:
				_, err = fmt.Fprintln(w, followRow(eventRow(e)))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || (ctx.Err() != nil && errors.Is(err, ctx.Err())) {
		return nil
	}
	return apiError("follow events", err)
}

// followRow lays out a row of events --follow's table.
func followRow(cells []string) string {
	for i, cell := range cells {
		cells[i] = tableCell(cell)
	}
	return fmt.Sprintf("%-20s   %-17s   %-15s   %-24s   %s", cells[0], cells[1], cells[2], cells[3], cells[4])
}
