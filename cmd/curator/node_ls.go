package main

// node ls in the idiom of `docker node ls` and `kubectl get -w`: filters,
// IDs only, and a table that follows the cluster.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
	pb "github.com/curatorproject/curator/proto"
)

func newNodeLsCommand(g *globalFlags) *cobra.Command {
	var (
		format  outputFormat
		filters []string
		quiet   bool
		watch   bool
	)
	c := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the cluster's nodes",
		Long: `List the cluster's nodes, sorted by name.

--filter KEY=VALUE keeps the nodes that match (repeatable; a node must match
every filter):
  id=PREFIX           the node's ID starts with PREFIX
  name=PREFIX         the node's name starts with PREFIX
  address=PREFIX      the node's address starts with PREFIX
  role=ROLE           consensus (or manager) or worker
  state=STATE         pending (waits for approval), joined (or up), refused
                      (a former manager the cluster refuses) or decommissioned
  status=STATUS       ready, down or unknown
  availability=A      active, pause or drain
  manager=STATUS      the MANAGER STATUS: leader, reachable, unreachable, learner
  version=V           the agent's version is V
  group=NAME          made by group NAME ("" for no group)
  label=KEY[=VALUE]   has the label KEY (with VALUE)

-o wide adds the node's group, machine (instance) and config SHA, when it
was last heard, how long it has had its status, when its certificate
expires and its labels.

-q prints the IDs alone, one a line. --watch prints the list again at each
change (in a terminal it redraws it) until Ctrl-C.`,
		Example: `  curator node ls --filter role=consensus -q
  curator node ls --filter status=down --filter group=workers
  curator node ls --watch
  curator node ls -o wide`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := parseNodeFilters(filters)
			if err != nil {
				return err
			}
			show := func(w io.Writer, nodes []*pb.NodeView) error {
				list := f.apply(nodes)
				if quiet {
					for _, n := range sortedNodeJSON(list) {
						if _, err := fmt.Fprintln(w, n.ID); err != nil {
							return err
						}
					}
					return nil
				}
				return writeNodes(w, format, list)
			}
			if watch {
				return g.dial(cmd.Context(), func(ctx context.Context, c *client.Client) error {
					return watchNodes(ctx, c, cmd.OutOrStdout(), show)
				})
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				nodes, err := c.ListNodes(ctx)
				if err != nil {
					return apiError("list nodes", err)
				}
				return show(cmd.OutOrStdout(), nodes)
			})
		},
	}
	format = formatTable
	c.Flags().VarP(wideOutput{&format}, "output", "o", "output format: "+strings.Join(append(slices.Clone(outputFormats), string(formatWide)), ", "))
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(append(slices.Clone(outputFormats), string(formatWide)), cobra.ShellCompDirectiveNoFileComp))
	c.Flags().StringArrayVarP(&filters, "filter", "f", nil, "keep the nodes that match KEY=VALUE (repeatable): "+strings.Join(nodeFilterKeys, ", "))
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the node IDs")
	c.Flags().BoolVarP(&watch, "watch", "w", false, "print the list again at each change, until Ctrl-C")
	_ = c.RegisterFlagCompletionFunc("filter", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		var out []string
		for _, k := range nodeFilterKeys {
			out = append(out, k+"=")
		}
		return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
	})
	return c
}

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

// watchNodes shows the node list at once and again at each change the
// leader's node watch sends, until ctx ends (Ctrl-C: a clean exit). In a
// terminal the list is redrawn in place; elsewhere (a pipe, a file) each
// list follows the last, after a blank line.
func watchNodes(ctx context.Context, c *client.Client, w io.Writer, show func(io.Writer, []*pb.NodeView) error) error {
	terminal := isTerminal(w)
	nodes := map[string]*pb.NodeView{}
	shown := 0
	err := c.WatchNodes(ctx, func(resp *pb.WatchNodesResponse) error {
		if resp.GetSnapshot() {
			clear(nodes)
		}
		for _, v := range resp.GetNodes() {
			nodes[v.GetNode().GetId()] = v
		}
		for _, id := range resp.GetRemoved() {
			delete(nodes, id)
		}
		var b strings.Builder
		switch {
		case terminal:
			b.WriteString(clearScreen)
			fmt.Fprintf(&b, "%s  (watching; Ctrl-C to stop)\n\n", time.Now().Format(time.TimeOnly))
		case shown > 0:
			b.WriteString("\n")
		}
		if err := show(&b, slices.Collect(maps.Values(nodes))); err != nil {
			return err
		}
		shown++
		_, err := io.WriteString(w, b.String())
		return err
	})
	if err == nil || (ctx.Err() != nil && errors.Is(err, ctx.Err())) {
		return nil
	}
	return apiError("watch nodes", err)
}

// isTerminal says whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// nodeFilterKeys are the keys of node ls --filter.
var nodeFilterKeys = []string{"id", "name", "address", "role", "state", "status", "availability", "manager", "group", "version", "label"}

// managerStatusWords are the values of --filter manager=.
var managerStatusWords = []string{"leader", "reachable", "unreachable", "learner"}

// nodeFilter is node ls's filters: a node is listed if it matches every
// one.
type nodeFilter []func(nodeJSON) bool

// parseNodeFilters reads --filter KEY=VALUE flags. A key or value it does
// not know is an error that names the ones it does: a typo must not list
// nothing (or everything) in silence.
func parseNodeFilters(flags []string) (nodeFilter, error) {
	var f nodeFilter
	for _, flag := range flags {
		key, value, ok := strings.Cut(flag, "=")
		if !ok {
			return nil, fmt.Errorf("--filter %q: want KEY=VALUE, with KEY one of %s", flag, strings.Join(nodeFilterKeys, ", "))
		}
		oneOf := func(words ...string) error {
			if !slices.Contains(words, value) {
				return fmt.Errorf("--filter %s=%q: %s is one of %s", key, value, key, strings.Join(words, ", "))
			}
			return nil
		}
		var match func(nodeJSON) bool
		switch key {
		case "id":
			match = func(n nodeJSON) bool { return strings.HasPrefix(n.ID, value) }
		case "name":
			match = func(n nodeJSON) bool { return strings.HasPrefix(n.Name, value) }
		case "role":
			if err := oneOf("consensus", "manager", "worker"); err != nil {
				return nil, err
			}
			role := value
			if role == "manager" {
				role = "consensus"
			}
			match = func(n nodeJSON) bool { return slices.Contains(n.Roles, role) }
		case "address":
			match = func(n nodeJSON) bool { return strings.HasPrefix(n.Address, value) }
		case "state":
			if err := oneOf("pending", "up", "joined", "refused", "decommissioned"); err != nil {
				return nil, err
			}
			match = func(n nodeJSON) bool {
				switch value {
				case "refused":
					return n.Refused != ""
				case "up", "joined":
					return n.State == "up" && n.Refused == ""
				}
				return n.State == value
			}
		case "manager":
			if err := oneOf(managerStatusWords...); err != nil {
				return nil, err
			}
			match = func(n nodeJSON) bool { return n.ManagerStatus == value }
		case "version":
			match = func(n nodeJSON) bool { return n.Version == value }
		case "status":
			if err := oneOf("ready", "down", "unknown"); err != nil {
				return nil, err
			}
			match = func(n nodeJSON) bool { return n.Status == value }
		case "availability":
			if err := oneOf(client.AvailabilityWords...); err != nil {
				return nil, err
			}
			match = func(n nodeJSON) bool { return n.Availability == value }
		case "group":
			match = func(n nodeJSON) bool { return n.Group == value }
		case "label":
			k, v, withValue := strings.Cut(value, "=")
			if k == "" {
				return nil, fmt.Errorf("--filter label=%q: want label=KEY or label=KEY=VALUE", value)
			}
			match = func(n nodeJSON) bool {
				got, has := n.Labels[k]
				return has && (!withValue || got == v)
			}
		default:
			return nil, fmt.Errorf("--filter %q: unknown key %q; the keys are %s", flag, key, strings.Join(nodeFilterKeys, ", "))
		}
		f = append(f, match)
	}
	return f, nil
}

// apply returns the nodes that match every filter.
func (f nodeFilter) apply(nodes []*pb.NodeView) []*pb.NodeView {
	var out []*pb.NodeView
	for _, v := range nodes {
		j := nodeToJSON(v)
		if !slices.ContainsFunc(f, func(match func(nodeJSON) bool) bool { return !match(j) }) {
			out = append(out, v)
		}
	}
	return out
}

// completeNodes completes node IDs and names (shown with each other) for
// a command that takes up to most of them (0: any number), asking the
// cluster briefly; it offers nothing if the cluster does not answer.
func (g *globalFlags) completeNodes(most int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if most > 0 && len(args) >= most {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
		defer cancel()
		var nodes []*pb.NodeView
		_ = g.dial(ctx, func(ctx context.Context, c *client.Client) (err error) {
			nodes, err = c.ListNodes(ctx)
			return err
		}, client.WithRounds(1), client.WithLeaderWait(0, nil))
		var out []string
		for _, n := range sortedNodeJSON(nodes) {
			if slices.Contains(args, n.ID) || slices.Contains(args, n.Name) {
				continue
			}
			if strings.HasPrefix(n.ID, toComplete) {
				out = append(out, n.ID+"\t"+n.Name)
			}
			if n.Name != "" && n.Name != n.ID && strings.HasPrefix(n.Name, toComplete) {
				out = append(out, n.Name+"\t"+n.ID)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
