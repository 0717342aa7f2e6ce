package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

func newEventsCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	var limit uint32
	var follow bool
	var since string
	filter := &pb.EventFilter{}
	c := &cobra.Command{
		Use:   "events",
		Short: "What the background loops did, and why",
		Long: `List what the leader's background loops did (or refused to do) and why,
oldest first: the consensus sync, learner promotion, health and group loops,
and beside them what operators changed (LOOP operator, ACTOR the
certificate's name and role; curator audit has the full trail). NODE is the
node's name where it is known (-o json: node_id and node_name).

--follow (as docker events and tail -f) prints the newest --limit events,
then each new one as it is recorded, until Ctrl-C; across a failover it
resumes where it was, without a gap or a repeat. With -o json it prints one
event a line, with -o yaml one document an event.

--group, --node, --kind and --since select events, on the leader (--limit
counts those selected; --follow sends only those). --node is a node's ID, a
prefix of one, or its name, a removed node's too: an event keeps the name
and group its node had when it was recorded. --kind is an action
(mark-down, refuse, RemoveNode, ...) or a loop (health, groups, operator).`,
		Example: `  curator events --node worker-3 --since 1h
  curator events --group web --kind refuse
  curator events --follow --kind operator`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := parseSince(since, time.Now())
			if err != nil {
				return err
			}
			if !t.IsZero() {
				filter.Since = timestamppb.New(t)
			}
			if follow {
				return g.dial(cmd.Context(), func(ctx context.Context, c *client.Client) error {
					return followEvents(ctx, c, cmd.OutOrStdout(), format, limit, filter)
				})
			}
			return showAnswer(g, cmd, "list events", func(c *client.Client, ctx context.Context) ([]*pb.Event, error) {
				return c.ListEventsFiltered(ctx, limit, filter)
			}, func(ctx context.Context, c *client.Client, out io.Writer, events []*pb.Event) error {
				return writeEvents(out, format, events, nodeNames(ctx, c))
			})
		},
	}
	addOutputFlag(c, &format)
	c.Flags().Uint32Var(&limit, "limit", 100, "show at most this many of the newest events (0: all that are kept)")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "print new events as they are recorded, until Ctrl-C")
	c.Flags().StringVar(&filter.Group, "group", "", "only events of this group (or of its nodes)")
	c.Flags().StringVar(&filter.Node, "node", "", "only events of this node: ID, ID prefix or name (a removed node's too)")
	c.Flags().StringVar(&filter.Kind, "kind", "", "only events of this action (mark-down, refuse, RemoveNode, ...) or loop (health, groups, operator, ...)")
	c.Flags().StringVar(&since, "since", "", "only events since this time (RFC 3339) or this long ago (1h)")
	return c
}

type eventJSON struct {
	Time     *time.Time `json:"time"`
	Loop     string     `json:"loop"`
	NodeID   string     `json:"node_id"`
	NodeName string     `json:"node_name,omitempty"`
	Action   string     `json:"action"`
	Reason   string     `json:"reason"`
	Leader   string     `json:"leader"`
	Term     int64      `json:"term,omitempty"`
	// Actor is who acted, for an operator's call: "alice (operator)".
	Actor string `json:"actor,omitempty"`
	// Group is the group the event is about (or its node was in).
	Group string `json:"group,omitempty"`
}

func eventToJSON(e *pb.Event, names map[string]string) eventJSON {
	return eventJSON{Time: timeOrNil(e.Time), Loop: e.Loop, NodeID: e.NodeId, NodeName: eventNodeName(e, names), Action: e.Action,
		Reason: e.Reason, Leader: e.Leader, Term: e.Term, Actor: e.Actor, Group: e.Group}
}

// eventNodeName is the name of e's node: as the cluster names it now,
// else as recorded with the event (a node removed since).
func eventNodeName(e *pb.Event, names map[string]string) string {
	if name := names[e.NodeId]; name != "" {
		return name
	}
	return e.NodeName
}

// nodeNames maps the node IDs the cluster knows to their names, for the
// NODE column; empty if the nodes cannot be listed (the events still
// show, by ID).
func nodeNames(ctx context.Context, c *client.Client) map[string]string {
	names := map[string]string{}
	nodes, err := c.ListNodes(ctx)
	if err != nil {
		return names
	}
	for _, n := range nodes {
		if n.GetNode().GetName() != "" {
			names[n.GetNode().GetId()] = n.GetNode().GetName()
		}
	}
	return names
}

var eventHeader = []string{"TIME", "ACTOR", "LOOP", "ACTION", "NODE", "REASON"}

func writeEvents(w io.Writer, format outputFormat, events []*pb.Event, names map[string]string) error {
	if format.structured() {
		out := make([]eventJSON, 0, len(events))
		for _, e := range events {
			out = append(out, eventToJSON(e, names))
		}
		return writeData(w, format, out)
	}
	if len(events) == 0 {
		_, err := fmt.Fprintln(w, "No events: the loops have had nothing to do.")
		return err
	}
	rows := [][]string{eventHeader}
	for _, e := range events {
		rows = append(rows, eventRow(e, names))
	}
	return writeTable(w, rows)
}

// eventRow is an event's row: ACTOR is the operator for an operator's
// call and "curator" for a loop's; NODE the node's name where known.
func eventRow(e *pb.Event, names map[string]string) []string {
	actor := e.Actor
	if actor == "" {
		actor = "curator"
	}
	node := e.NodeId
	if name := eventNodeName(e, names); name != "" {
		node = name
	}
	return []string{e.Time.AsTime().UTC().Format(time.RFC3339), actor, e.Loop, e.Action, node, e.Reason}
}

// followEvents prints the newest limit events, then each new one, until
// ctx ends (Ctrl-C: a clean exit). A table cannot be aligned on rows to
// come, so its columns have fixed widths, wide enough for the usual words.
func followEvents(ctx context.Context, c *client.Client, w io.Writer, format outputFormat, limit uint32, filter *pb.EventFilter) error {
	backlog := limit
	if backlog == 0 {
		backlog = store.MaxEvents
	}
	if format == formatTable {
		if _, err := fmt.Fprintln(w, followRow(slices.Clone(eventHeader))); err != nil {
			return err
		}
	}
	names := nodeNames(ctx, c)
	var namesAt time.Time
	err := c.WatchEventsFiltered(ctx, 0, backlog, filter, func(resp *pb.WatchEventsResponse) error {
		for _, e := range resp.GetEvents() {
			// A node that joined since: ask again, at most every few
			// seconds.
			if _, known := names[e.NodeId]; e.NodeId != "" && e.NodeName == "" && !known && time.Since(namesAt) > 5*time.Second {
				names, namesAt = nodeNames(ctx, c), time.Now()
			}
			var err error
			switch format {
			case formatJSON:
				var line []byte
				if line, err = json.Marshal(eventToJSON(e, names)); err == nil {
					_, err = fmt.Fprintf(w, "%s\n", line)
				}
			case formatYAML:
				var doc []byte
				if doc, err = yamlOf(eventToJSON(e, names)); err == nil {
					_, err = fmt.Fprintf(w, "---\n%s", doc)
				}
			default:
				_, err = fmt.Fprintln(w, followRow(eventRow(e, names)))
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
	return fmt.Sprintf("%-20s   %-20s   %-15s   %-15s   %-24s   %s", cells[0], cells[1], cells[2], cells[3], cells[4], cells[5])
}
