package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
	pb "github.com/curatorproject/curator/proto"
)

// auditPollInterval is how often audit --follow asks for new entries.
const auditPollInterval = time.Second

// auditFilter is what audit's flags select.
type auditFilter struct {
	who, call, node string
	since           time.Time
}

// match says whether an entry passes the filter: --who is the
// certificate's name (or serial), --call the call's name, both in any
// case; --node is in the target (as the caller named it) or starts the
// ID of the node it resolved to; --since is a time or how long ago.
func (f auditFilter) match(e *pb.AuditEntry) bool {
	if f.who != "" && !strings.EqualFold(e.Name, f.who) && !strings.EqualFold(e.Serial, f.who) {
		return false
	}
	if f.call != "" && !strings.EqualFold(e.Call, f.call) {
		return false
	}
	if f.node != "" && !strings.Contains(e.Target, f.node) && (e.NodeId == "" || !strings.HasPrefix(e.NodeId, f.node)) {
		return false
	}
	if !f.since.IsZero() && e.Time.AsTime().Before(f.since) {
		return false
	}
	return true
}

// parseSince reads --since: an RFC 3339 time, or a duration back from
// now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: want a time (2006-01-02T15:04:05Z) or how long ago (1h)", s)
	}
	return t, nil
}

func newAuditCommand(g *globalFlags) *cobra.Command {
	var (
		format outputFormat
		limit  uint32
		follow bool
		since  string
		filter auditFilter
	)
	c := &cobra.Command{
		Use:   "audit",
		Short: "Who did what to the cluster, from where, and how it ended",
		Long: `List the audit trail, oldest first: every management call that changed
something or handed out a secret, and every refused call, with who made it
(the certificate's name, role and serial), from where, what it was (the call
and its arguments in short, never a secret), on what, and how it ended. A
group commit also says what it set (or, refused, tried to): each changed field
of the spec, old -> new, with the environment's values never shown. The
leader keeps the newest 2000.

--who, --call, --node and --since select entries; --follow prints the
selected ones, then each new one as it is recorded, until Ctrl-C. With -o json
it prints a list (with --follow, one entry a line).`,
		Example: `  curator audit --who alice --since 24h
  curator audit --call DemoteNode -o json
  curator audit --follow`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if filter.since, err = parseSince(since, time.Now()); err != nil {
				return err
			}
			if !follow {
				return showAnswer(g, cmd, "list the audit trail", func(c *client.Client, ctx context.Context) ([]*pb.AuditEntry, error) {
					entries, _, err := c.Audit(ctx, 0, 0)
					return entries, err
				}, func(_ context.Context, _ *client.Client, out io.Writer, entries []*pb.AuditEntry) error {
					return writeAudit(out, format, selectAudit(entries, filter, limit))
				})
			}
			return g.dial(cmd.Context(), func(ctx context.Context, c *client.Client) error {
				return followAudit(ctx, c, cmd.OutOrStdout(), format, filter, limit)
			})
		},
	}
	addOutputFlag(c, &format)
	c.Flags().Uint32Var(&limit, "limit", 100, "show at most this many of the newest entries selected (0: all that are kept)")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "print new entries as they are recorded, until Ctrl-C")
	c.Flags().StringVar(&filter.who, "who", "", "only the calls of this certificate name or serial")
	c.Flags().StringVar(&filter.call, "call", "", "only this call (DemoteNode, RotateToken, ...)")
	c.Flags().StringVar(&filter.node, "node", "", "only calls on this node (or group), as it was named")
	c.Flags().StringVar(&since, "since", "", "only entries since this time (RFC 3339) or this long ago (1h)")
	return c
}

// selectAudit keeps the entries filter selects, at most limit of the
// newest (0: all).
func selectAudit(entries []*pb.AuditEntry, filter auditFilter, limit uint32) []*pb.AuditEntry {
	var out []*pb.AuditEntry
	for _, e := range entries {
		if filter.match(e) {
			out = append(out, e)
		}
	}
	if limit > 0 && len(out) > int(limit) {
		out = out[len(out)-int(limit):]
	}
	return out
}

// auditJSON is an entry as `audit -o json` shows it. The field names are
// part of the CLI contract.
type auditJSON struct {
	Time     *time.Time `json:"time"`
	Name     string     `json:"name"`
	Role     string     `json:"role"`
	Serial   string     `json:"serial"`
	Peer     string     `json:"peer"`
	Call     string     `json:"call"`
	Args     string     `json:"args"`
	Target   string     `json:"target"`
	NodeID   string     `json:"node_id,omitempty"`
	Outcome  string     `json:"outcome"`
	Recorder string     `json:"recorder"`
	// Changes is what the call set (a group commit: each changed field).
	Changes string `json:"changes,omitempty"`
}

func auditToJSON(e *pb.AuditEntry) auditJSON {
	return auditJSON{Time: timeOrNil(e.Time), Name: e.Name, Role: e.Role, Serial: e.Serial, Peer: e.Peer,
		Call: e.Call, Args: e.Args, Target: e.Target, NodeID: e.NodeId, Outcome: e.Outcome, Recorder: e.Recorder, Changes: e.Changes}
}

func auditRow(e *pb.AuditEntry) []string {
	who := e.Name
	if e.Role != "" {
		who += " (" + e.Role + ")"
	}
	args := e.Args
	if e.Changes != "" {
		args += "; set " + e.Changes
	}
	return []string{e.Time.AsTime().UTC().Format(time.RFC3339), who, e.Peer, e.Call, e.Target, e.Outcome, args}
}

var auditHeader = []string{"TIME", "WHO", "FROM", "CALL", "ON", "OUTCOME", "ARGS"}

func writeAudit(w io.Writer, format outputFormat, entries []*pb.AuditEntry) error {
	if format.structured() {
		out := make([]auditJSON, 0, len(entries))
		for _, e := range entries {
			out = append(out, auditToJSON(e))
		}
		return writeData(w, format, out)
	}
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "No audit entries.")
		return err
	}
	rows := [][]string{auditHeader}
	for _, e := range entries {
		rows = append(rows, auditRow(e))
	}
	return writeTable(w, rows)
}

// followAudit prints the selected entries, then each new one, until ctx
// ends, asking every auditPollInterval for what came after the revision
// it last read at.
func followAudit(ctx context.Context, c *client.Client, w io.Writer, format outputFormat, filter auditFilter, limit uint32) error {
	if format == formatTable {
		if _, err := fmt.Fprintln(w, strings.Join(auditHeader, "   ")); err != nil {
			return err
		}
	}
	var after int64
	first := true
	for {
		entries, rev, err := c.Audit(ctx, 0, after)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return apiError("follow the audit trail", err)
		}
		sel := entries
		if first {
			sel = selectAudit(entries, filter, limit)
		} else {
			sel = selectAudit(entries, filter, 0)
		}
		first = false
		for _, e := range sel {
			switch format {
			case formatJSON, formatYAML:
				line, err := json.Marshal(auditToJSON(e))
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(w, "%s\n", line)
				if err != nil {
					return err
				}
			default:
				cells := auditRow(e)
				for i := range cells {
					cells[i] = tableCell(cells[i])
				}
				if _, err := fmt.Fprintln(w, strings.Join(cells, "   ")); err != nil {
					return err
				}
			}
		}
		if rev > after {
			after = rev
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(auditPollInterval):
		}
	}
}
