package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
	pb "github.com/curatorproject/curator/proto"
)

func newNodeCommand(g *globalFlags) *cobra.Command {
	return parentCommand("node", "List, inspect and manage nodes",
		newNodeLsCommand(g),
		newNodeInspectCommand(g),
		newNodePromoteCommand(g),
		newNodeDemoteCommand(g),
		newNodeUpdateCommand(g),
		newNodeApproveCommand(g),
		newNodeRmCommand(g),
	)
}

func newNodeInspectCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	var pretty bool
	c := &cobra.Command{
		Use:   "inspect ID",
		Short: "Show one node, as JSON by default (ID, unique ID prefix or name)",
		Long: `Show one node (a node ID, a unique prefix of one, or its name): as JSON by
default, or YAML, or node ls's table with one row (-o). --pretty prints it
for a person, as docker node inspect --pretty does: a key and its value a
line, each time with how long ago (or until) it is.`,
		Example: `  curator node inspect worker-3 --pretty
  curator node inspect worker-3 -o json`,
		Args:              cobra.MatchAll(cobra.ExactArgs(1), nodeIDArgs),
		ValidArgsFunction: g.completeNodes(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pretty && cmd.Flags().Changed("output") {
				return errors.New("--pretty prints keys and values: use it without -o (or -o json for the JSON)")
			}
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				node, err := c.GetNode(ctx, args[0])
				if err != nil {
					return apiError("inspect node "+args[0], err)
				}
				if pretty {
					return writePrettyNode(cmd.OutOrStdout(), nodeToJSON(node), time.Now())
				}
				return writeNode(cmd.OutOrStdout(), format, node)
			})
		},
	}
	addOutputFlagDefault(c, &format, formatJSON)
	c.Flags().BoolVar(&pretty, "pretty", false, "print the node for a person: a key and its value a line")
	return c
}

// defaultWaitTimeout bounds --wait of promote and demote.
const defaultWaitTimeout = 60 * time.Second

// pollInterval is how often --wait asks for the node; tests shorten it.
var pollInterval = client.DefaultPollInterval

// withChangeClient is withClient for the commands that change the cluster:
// fn gets the command's own context, not one bounded by callTimeout, so
// that it can wait (--wait, bounded by --timeout) after a change. fn bounds
// each call itself, with within. (The client gives a manager longer to
// answer a change than a read: client.DefaultChangeAttemptTimeout.)
func (g *globalFlags) withChangeClient(cmd *cobra.Command, fn func(context.Context, *client.Client) error) error {
	return g.dial(cmd.Context(), fn, client.WithPollInterval(pollInterval))
}

// within calls fn with ctx bounded by d.
func within[T any](ctx context.Context, d time.Duration, fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return fn(ctx)
}

// waitFlags are --wait and --timeout of promote and demote.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func addWaitFlags(c *cobra.Command, w *waitFlags, waitDefault bool, what string) {
	c.Flags().BoolVar(&w.wait, "wait", waitDefault, "wait until "+what)
	c.Flags().DurationVar(&w.timeout, "timeout", defaultWaitTimeout, "how long --wait waits for each node")
}

// waitNode waits up to --timeout until node v is where until wants it
// (what: "node X to become ..."), and says where it is if it does not get
// there.
func (w *waitFlags) waitNode(ctx context.Context, c *client.Client, v *pb.NodeView, what string, until client.NodeCondition) (*pb.NodeView, error) {
	id := v.GetNode().GetId()
	got, err := within(ctx, w.timeout, func(ctx context.Context) (*pb.NodeView, error) {
		return c.WaitNode(ctx, id, until)
	})
	var werr *client.WaitError
	switch {
	case err == nil:
		return got, nil
	case errors.Is(err, client.ErrRoleLost):
		return nil, fmt.Errorf("node %s %w: see `curator events`", nodeLabel(v), err)
	case !errors.As(err, &werr):
		return nil, apiError("wait for node "+id, err)
	case ctx.Err() != nil:
		// Not our --timeout: the command was stopped.
		return nil, werr
	}
	msg := fmt.Sprintf("gave up after %v waiting for %s: it is %s", w.timeout, what, nodeState(cmp.Or(werr.Last, v)))
	if werr.LastErr != nil {
		msg += fmt.Sprintf("; the last try failed: %v", werr.LastErr)
	}
	return nil, errors.New(msg + "; it may still get there: see `curator node inspect " + id + "` and `curator events`")
}

func newNodePromoteCommand(g *globalFlags) *cobra.Command {
	var w waitFlags
	c := &cobra.Command{
		Use:   "promote ID...",
		Short: "Give nodes the consensus role",
		Long: `Give each node the consensus role, in order: the leader adds it to etcd as a
learner and the node starts etcd; once it has caught up, the leader makes it
a voter. Promoting a node that already has the role changes nothing.

The command returns once the learner is added. With --wait it waits, for each
node before the next, until the node is a voter: etcd lets one learner catch
up at a time, so promote several nodes with --wait.

With the Swarm flavor on (cluster update --swarm), the node's Docker engine
is made a Swarm manager first, within the Swarm's quorum.

It stops at the first node the cluster refuses (down, pending approval, past
the voter limit), after the ones before it are done.`,
		Args:              cobra.MatchAll(cobra.MinimumNArgs(1), nodeIDArgs),
		ValidArgsFunction: g.completeNodes(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return eachNode(g, cmd, args, "promote", (*client.Client).PromoteNode, func(ctx context.Context, c *client.Client, out io.Writer, v *pb.NodeView) error {
				if client.IsVoter(v) {
					fmt.Fprintf(out, "promoted %s: etcd voter\n", nodeLabel(v))
					return nil
				}
				fmt.Fprintf(out, "promoted %s: etcd learner, voter once caught up\n", nodeLabel(v))
				if !w.wait {
					return nil
				}
				v, err := w.waitNode(ctx, c, v, "node "+nodeLabel(v)+" to become an etcd voter", client.UntilVoter)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "%s caught up: etcd voter\n", nodeLabel(v))
				return nil
			})
		},
	}
	addWaitFlags(c, &w, false, "each node is an etcd voter")
	return c
}

func newNodeDemoteCommand(g *globalFlags) *cobra.Command {
	var w waitFlags
	c := &cobra.Command{
		Use:   "demote ID...",
		Short: "Take the consensus role from nodes",
		Long: `Take the consensus role from each node, in order: the leader moves etcd
leadership off the node if it holds it, removes its etcd member, then its
role. Demoting a node without the role changes nothing and says so; one that
was approved as a manager and waits for its promotion stays a worker. A
pending node (waiting for approval) is refused: it has nothing to demote.

A node that runs the curator leader cannot finish its own demotion: it marks
itself, resigns, and the next leader finishes. --wait (the default) waits
until that is done, so that the command returns with the node demoted;
--wait=false returns at once.

With the Swarm flavor on (cluster update --swarm), the node's Swarm manager
is demoted first, within the Swarm's quorum. One the Swarm does not take at
once (a manager promoted a moment ago is not in its Raft yet) is left to the
leader's loops, which --wait waits for as well.

It stops at the first node the cluster refuses (the last voter, or one whose
removal would leave fewer healthy voters than a quorum), after the ones
before it are done.`,
		Args:              cobra.MatchAll(cobra.MinimumNArgs(1), nodeIDArgs),
		ValidArgsFunction: g.completeNodes(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return eachNode(g, cmd, args, "demote", (*client.Client).DemoteNode, func(ctx context.Context, c *client.Client, out io.Writer, resp *pb.DemoteResponse) error {
				v := resp.GetNode()
				switch resp.GetOutcome() {
				case client.DemoteDone:
					fmt.Fprintf(out, "demoted %s: no longer a consensus member\n", nodeLabel(v))
					return nil
				case client.DemoteNotAManager:
					fmt.Fprintf(out, "%s holds no consensus role: nothing to demote\n", nodeLabel(v))
					return nil
				case client.DemotePromotionCalledOff:
					fmt.Fprintf(out, "%s was approved as a manager but not promoted yet: its promotion is called off, it stays a worker\n", nodeLabel(v))
					return nil
				case client.DemoteHandedOver:
					fmt.Fprintf(out, "node %s leads the curators: it resigned, and the next leader finishes its demotion\n", nodeLabel(v))
				case client.DemoteLeftToLoops:
					fmt.Fprintf(out, "node %s is marked demoting: the Swarm did not take the demotion of its manager yet, and the leader's loops finish it (see `curator events`)\n", nodeLabel(v))
				default:
					// A newer server: say what it said.
					fmt.Fprintf(out, "demote %s: %s\n", nodeLabel(v), resp.GetOutcome())
					return nil
				}
				if !w.wait {
					return nil
				}
				waitFor := "the next leader to finish demoting node " + nodeLabel(v)
				if resp.GetOutcome() == client.DemoteLeftToLoops {
					waitFor = "the leader's loops to finish demoting node " + nodeLabel(v)
				}
				v, err := w.waitNode(ctx, c, v, waitFor, client.UntilDemoted)
				if err != nil {
					return err
				}
				who := "the next leader finished"
				if resp.GetOutcome() == client.DemoteLeftToLoops {
					who = "the leader's loops finished"
				}
				fmt.Fprintf(out, "demoted %s: %s, no longer a consensus member\n", nodeLabel(v), who)
				return nil
			})
		},
	}
	addWaitFlags(c, &w, true, "a curator leader's demotion is finished by the next leader")
	return c
}

// nodeLabel names a node in a message: its ID, and its name if it has one.
func nodeLabel(v *pb.NodeView) string {
	n := v.GetNode()
	if n.GetName() == "" || n.GetName() == n.GetId() {
		return n.GetId()
	}
	return fmt.Sprintf("%s (%s)", n.GetId(), n.GetName())
}

// nodeState says where a node is, for a wait that ran out.
func nodeState(v *pb.NodeView) string {
	j := nodeToJSON(v)
	roles := strings.Join(j.Roles, ",")
	if roles == "" {
		roles = "none"
	}
	ms := j.ManagerStatus
	if ms == "" {
		ms = "none"
	}
	s := fmt.Sprintf("%s and %s, roles %s, manager status %s", j.State, j.Status, roles, ms)
	if j.Demoting {
		s += ", demoting"
	}
	return s
}

func newNodeUpdateCommand(g *globalFlags) *cobra.Command {
	var (
		availability string
		labelAdd     []string
		labelRm      []string
		format       outputFormat
	)
	c := &cobra.Command{
		Use:   "update ID",
		Short: "Change a node's availability or labels",
		Long: `Change a node's availability (active: takes work; pause: keeps its work but
takes no new work; drain: gives its work up) or its labels, and print the
node as node ls does. Give at least one change.`,
		Example: `  curator node update n2 --availability drain
  curator node update n2 --label-add zone=a --label-add tier=web --label-rm old`,
		Args:              cobra.MatchAll(cobra.ExactArgs(1), nodeIDArgs),
		ValidArgsFunction: g.completeNodes(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := nodeUpdate(cmd.Flags().Changed("availability"), availability, labelAdd, labelRm)
			if err != nil {
				return err
			}
			return g.withChangeClient(cmd, func(ctx context.Context, c *client.Client) error {
				v, err := within(ctx, callTimeout, func(ctx context.Context) (*pb.NodeView, error) {
					return c.UpdateNode(ctx, args[0], u)
				})
				if err != nil {
					return apiError("update node "+args[0], err)
				}
				return writeNode(cmd.OutOrStdout(), format, v)
			})
		},
	}
	c.Flags().StringVar(&availability, "availability", "", "active, pause or drain")
	c.Flags().StringArrayVar(&labelAdd, "label-add", nil, "add or change a label, k=v (repeatable)")
	c.Flags().StringArrayVar(&labelRm, "label-rm", nil, "remove a label by key (repeatable)")
	c.MarkFlagsOneRequired("availability", "label-add", "label-rm")
	_ = c.RegisterFlagCompletionFunc("availability", cobra.FixedCompletions(client.AvailabilityWords, cobra.ShellCompDirectiveNoFileComp))
	addOutputFlag(c, &format)
	return c
}

// nodeUpdate makes node update's change from its flags, checked as the
// client checks it, before the command talks to the cluster: a typo changes
// nothing, and the error names the flag.
func nodeUpdate(availabilitySet bool, availability string, labelAdd, labelRm []string) (u client.NodeUpdate, err error) {
	if availabilitySet {
		if u.Availability, err = client.ParseAvailability(availability); err != nil {
			return u, err
		}
	}
	if u.LabelAdd, err = client.ParseLabels(labelAdd); err != nil {
		return u, fmt.Errorf("--label-add: %w", err)
	}
	if u.LabelRm, err = client.ParseLabelKeys(labelRm); err != nil {
		return u, fmt.Errorf("--label-rm: %w", err)
	}
	return u, u.Validate()
}

func newNodeApproveCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	c := &cobra.Command{
		Use:   "approve ID",
		Short: "Let a pending node into the cluster",
		Long: `Let a node that waits for approval (cluster update --require-approval=true)
into the cluster, and print it as node ls does. A node that joined with the
manager token then becomes a consensus member, as if it had joined now: the
leader promotes it once it is ready (see curator events). Approving a node
that is not pending is refused (AlreadyExists) and changes nothing. To refuse
a pending node, remove it with node rm.`,
		Args:              cobra.MatchAll(cobra.ExactArgs(1), nodeIDArgs),
		ValidArgsFunction: g.completeNodes(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withChangeClient(cmd, func(ctx context.Context, c *client.Client) error {
				v, err := within(ctx, callTimeout, func(ctx context.Context) (*pb.NodeView, error) {
					return c.ApproveNode(ctx, args[0])
				})
				if err != nil {
					return apiError("approve node "+args[0], err)
				}
				return writeNode(cmd.OutOrStdout(), format, v)
			})
		},
	}
	addOutputFlag(c, &format)
	return c
}

func newNodeRmCommand(g *globalFlags) *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:     "rm ID",
		Aliases: []string{"remove"},
		Short:   "Remove a node from the cluster",
		Long: `Remove a node's record; its certificate is refused from then on. A node that
is ready, or that holds the consensus role, is refused unless --force: with
--force a consensus member's etcd member is removed first, within the quorum
guard. To let a node go gracefully, run curator agent leave on it instead.`,
		Args:              cobra.MatchAll(cobra.ExactArgs(1), nodeIDArgs),
		ValidArgsFunction: g.completeNodes(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withChangeClient(cmd, func(ctx context.Context, c *client.Client) error {
				id, err := within(ctx, callTimeout, func(ctx context.Context) (string, error) {
					return c.RemoveNode(ctx, args[0], force)
				})
				if err != nil {
					return apiError("remove node "+args[0], err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", id)
				return err
			})
		},
	}
	c.Flags().BoolVar(&force, "force", false, "remove the node even if it is ready or a consensus member")
	return c
}

// nodeIDArgs refuses empty node IDs before anything is sent.
func nodeIDArgs(_ *cobra.Command, args []string) error {
	for _, a := range args {
		if err := client.CheckNodeID(a); err != nil {
			return err
		}
	}
	return nil
}

// nodeJSON is a node as `node ls -o json` and `node inspect` show it. The
// field names are part of the CLI contract (docs/architecture.md): add, never rename.
type nodeJSON struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Address string `json:"address"`
	State   string `json:"state"`
	// Refused is why the cluster refuses the node (a former manager
	// after a recovery without it), if it does.
	Refused       string   `json:"refused,omitempty"`
	Status        string   `json:"status"`
	Availability  string   `json:"availability"`
	Roles         []string `json:"roles"`
	ManagerStatus string   `json:"manager_status"`
	Group         string   `json:"group"`
	InstanceID    string   `json:"instance_id"`
	// Domain is the failure domain of the node's machine, as its group's
	// provider lists it ("" for none).
	Domain        string            `json:"domain"`
	ConfigSHA     string            `json:"config_sha"`
	Version       string            `json:"version"`
	Labels        map[string]string `json:"labels"`
	LastHeartbeat *time.Time        `json:"last_heartbeat"`
	StatusChanged *time.Time        `json:"status_changed"`
	Created       *time.Time        `json:"created"`
	Updated       *time.Time        `json:"updated"`
	// JoinedAs is the token the node joined with: "worker" or "manager".
	JoinedAs string `json:"joined_as"`
	// Demoting is set from a demotion's start until its end.
	Demoting bool `json:"demoting"`
	// CertExpires is when the node's certificate expires; its agent
	// renews it at about two thirds of its life.
	CertExpires *time.Time `json:"cert_expires"`
	// The Swarm flavor: the node's Swarm node ID as its agent reported
	// it, whether the leader asked its agent to join the Swarm, and its
	// Swarm role and state as the leader last read them ("" when its
	// Swarm node is not in the Swarm's list, or the flavor is off).
	SwarmNodeID        string `json:"swarm_node_id"`
	SwarmJoinRequested bool   `json:"swarm_join_requested"`
	SwarmRole          string `json:"swarm_role"`
	SwarmState         string `json:"swarm_state"`
}

func nodeToJSON(v *pb.NodeView) nodeJSON {
	n := v.GetNode()
	roles := make([]string, 0, len(n.GetRoles()))
	for _, r := range n.GetRoles() {
		roles = append(roles, enumWord(r))
	}
	labels := n.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	return nodeJSON{
		ID:            n.GetId(),
		Name:          n.GetName(),
		Address:       n.GetAddress(),
		State:         enumWord(n.GetState()),
		Refused:       n.GetRefused(),
		Status:        enumWord(n.GetStatus()),
		Availability:  enumWord(n.GetAvailability()),
		Roles:         roles,
		ManagerStatus: enumWord(v.GetManagerStatus()),
		Group:         n.GetGroup(),
		InstanceID:    n.GetInstanceId(),
		Domain:        n.GetDomain(),
		ConfigSHA:     n.GetConfigSha(),
		Version:       n.GetVersion(),
		Labels:        labels,
		LastHeartbeat: timeOrNil(v.GetLastHeartbeat()),
		StatusChanged: timeOrNil(n.GetStatusChanged()),
		Created:       timeOrNil(n.GetCreated()),
		Updated:       timeOrNil(n.GetUpdated()),
		JoinedAs:      n.GetJoinedAs(),
		Demoting:      n.GetDemoting(),
		CertExpires:   timeOrNil(n.GetCertExpires()),

		SwarmNodeID:        n.GetSwarmNodeId(),
		SwarmJoinRequested: n.GetSwarmJoinRequested(),
		SwarmRole:          v.GetSwarmRole(),
		SwarmState:         v.GetSwarmState(),
	}
}

// writeNode writes one node: as node ls's table with one row, or as the
// JSON object node inspect prints.
func writeNode(w io.Writer, format outputFormat, v *pb.NodeView) error {
	if format.structured() {
		return writeData(w, format, nodeToJSON(v))
	}
	return writeNodes(w, format, []*pb.NodeView{v})
}

// writeNodes writes nodes sorted by name, then ID: as a table like
// `docker node ls`, or as a JSON array.
func writeNodes(w io.Writer, format outputFormat, nodes []*pb.NodeView) error {
	return writeNodesAt(w, format, nodes, time.Now())
}

// writeNodesAt is writeNodes, -o wide's ages counted at now.
func writeNodesAt(w io.Writer, format outputFormat, nodes []*pb.NodeView, now time.Time) error {
	list := sortedNodeJSON(nodes)
	if format.structured() {
		return writeData(w, format, list)
	}
	// The Swarm columns show where the Swarm flavor is: some node has a
	// Swarm node, or is asked to join one.
	swarm := slices.ContainsFunc(list, func(n nodeJSON) bool {
		return n.SwarmRole != "" || n.SwarmNodeID != "" || n.SwarmJoinRequested
	})
	header := []string{"ID", "NAME", "ADDRESS", "STATE", "STATUS", "AVAILABILITY", "ROLES", "MANAGER STATUS", "VERSION"}
	if swarm {
		header = append(header, "SWARM ROLE", "SWARM STATE")
	}
	if format == formatWide {
		header = append(header, wideHeader...)
	}
	rows := [][]string{header}
	for _, n := range list {
		row := []string{
			n.ID, n.Name, n.Address, n.stateCell(), n.Status, n.Availability,
			strings.Join(n.Roles, ","), n.ManagerStatus, n.Version,
		}
		if swarm {
			role, state := cmp.Or(n.SwarmRole, "-"), cmp.Or(n.SwarmState, "-")
			if n.SwarmJoinRequested {
				state = "joining"
			}
			row = append(row, role, state)
		}
		if format == formatWide {
			row = append(row, n.wideCells(now)...)
		}
		rows = append(rows, row)
	}
	return writeTable(w, rows)
}

// stateCell is the table's STATE: where the node is in its life, in words
// that do not read as its health beside STATUS ("joined", not "up"), and
// "refused" for a node the cluster refuses (JSON: state up, refused WHY).
func (n nodeJSON) stateCell() string {
	switch {
	case n.Refused != "":
		return "refused"
	case n.State == "up":
		return "joined"
	}
	return n.State
}

// sortedNodeJSON is nodes as JSON, sorted by name, then ID.
func sortedNodeJSON(nodes []*pb.NodeView) []nodeJSON {
	list := make([]nodeJSON, 0, len(nodes))
	for _, v := range nodes {
		list = append(list, nodeToJSON(v))
	}
	slices.SortFunc(list, func(a, b nodeJSON) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return list
}

// eachNode calls call for each node of args in turn, each within
// callTimeout, and gives its answer to then; it stops at the first error,
// after the nodes before it are done ("VERB node ID: ...").
func eachNode[T any](g *globalFlags, cmd *cobra.Command, args []string, verb string,
	call func(*client.Client, context.Context, string) (T, error),
	then func(ctx context.Context, c *client.Client, out io.Writer, answer T) error) error {
	return g.withChangeClient(cmd, func(ctx context.Context, c *client.Client) error {
		for _, id := range args {
			answer, err := within(ctx, callTimeout, func(ctx context.Context) (T, error) { return call(c, ctx, id) })
			if err != nil {
				return apiError(verb+" node "+id, err)
			}
			if err := then(ctx, c, cmd.OutOrStdout(), answer); err != nil {
				return err
			}
		}
		return nil
	})
}
