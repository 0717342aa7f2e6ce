package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/coreos/go-systemd/v22/journal"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/node"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// joinTokenEnv holds a join token when --token is not given.
const joinTokenEnv = curator.JoinTokenEnv

// agentFlags are the flags of the commands that run an agent.
type agentFlags struct {
	dataDir           string
	logLevel          string
	electionTTL       time.Duration
	heartbeatInterval time.Duration
	downAfter         time.Duration
	reapAfter         time.Duration
	pprof             bool
	// forceNewCluster is `agent run --force-new-cluster`.
	forceNewCluster bool
	// dockerSocket and swarmAdvertiseAddr are for the Swarm flavor.
	dockerSocket       string
	swarmAdvertiseAddr string
}

func (f *agentFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.dataDir, "data-dir", "", "the node's data dir (required)")
	c.Flags().StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	c.Flags().DurationVar(&f.electionTTL, "election-ttl", curator.DefaultElectionTTL, "lease TTL of the curator leader election (whole seconds)")
	c.Flags().DurationVar(&f.heartbeatInterval, "heartbeat-interval", curator.DefaultHeartbeatInterval, "how often nodes send heartbeats")
	c.Flags().DurationVar(&f.downAfter, "down-after", curator.DefaultDownAfter, "how long without a heartbeat before a node is marked down")
	c.Flags().DurationVar(&f.reapAfter, "reap-after", curator.DefaultReapAfter, "how long a node that no group answers for may be down before the leader removes it")
	c.Flags().BoolVar(&f.pprof, "pprof", false, "serve Go's profiles at http://IP:PORT+3/debug/pprof/ (no authentication: for a trusted network)")
	c.Flags().StringVar(&f.dockerSocket, "docker-socket", "", "this machine's Docker engine (a unix socket path, or unix:// tcp:// URL) for the Swarm flavor: the agent joins it to the cluster's Swarm and reports its Swarm node ID, and as leader the curator keeps the Swarm's managers through it (turn the flavor on with 'curator cluster update --swarm')")
	c.Flags().StringVar(&f.swarmAdvertiseAddr, "swarm-advertise-addr", "", "the address (IP or IP:PORT) the engine advertises when the agent joins it to the Swarm; empty lets the engine pick")
	_ = c.MarkFlagRequired("data-dir")
}

func (f *agentFlags) validate() error {
	if err := (curator.Timers{ElectionTTL: f.electionTTL, HeartbeatInterval: f.heartbeatInterval, DownAfter: f.downAfter, ReapAfter: f.reapAfter}).Check(); err != nil {
		return err
	}
	_, err := parseLogLevel(f.logLevel)
	return err
}

func parseLogLevel(s string) (zapcore.Level, error) {
	var l zapcore.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

func newLogger(level string, w io.Writer) (*zap.Logger, error) {
	l, err := parseLogLevel(level)
	if err != nil {
		return nil, err
	}
	enc := zap.NewDevelopmentEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	if ok, _ := journal.StderrIsJournalStream(); ok {
		// journald stamps each line itself: a second time only
		// widens it. (An unreadable JOURNAL_STREAM is not journald's.)
		enc.TimeKey = ""
	}
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(w), l)
	return zap.New(core), nil
}

// validateNew is validate for the commands that make a node (init, join),
// with their --availability: a word of client.AvailabilityWords in any
// case, active if empty.
func (f *agentFlags) validateNew(availability string) (pb.Availability, error) {
	if err := f.validate(); err != nil {
		return 0, err
	}
	return client.ParseAvailability(strings.ToLower(cmp.Or(availability, "active")))
}

// runAgent runs the agent in dir in the foreground until ctx ends (SIGINT
// or SIGTERM: a clean stop, not a leave; a leader resigns first).
func runAgent(ctx context.Context, cmd *cobra.Command, f *agentFlags) error {
	return runAgentJoined(ctx, cmd, f, nil)
}

// runAgentJoined is runAgent right after a join, whose connection the
// agent's first session takes (nil: none).
func runAgentJoined(ctx context.Context, cmd *cobra.Command, f *agentFlags, joinConn *node.JoinConn) error {
	// The agent keeps its last lines too, for `curator logs` through the
	// managers (node.LogRing).
	ring := node.NewLogRing(node.DefaultLogLines)
	lg, err := newLogger(f.logLevel, io.MultiWriter(ring, cmd.ErrOrStderr()))
	if err != nil {
		joinConn.Close()
		return err
	}
	defer lg.Sync() //nolint:errcheck
	a, err := node.New(node.Config{
		Logs:    ring,
		DataDir: f.dataDir, Version: binaryVersion(),
		ElectionTTL: f.electionTTL, HeartbeatInterval: f.heartbeatInterval, DownAfter: f.downAfter,
		ReapAfter:       f.reapAfter,
		Pprof:           f.pprof,
		ForceNewCluster: f.forceNewCluster,
		DockerSocket:    f.dockerSocket,
		SwarmAdvertise:  f.swarmAdvertiseAddr,
		Logger:          lg,
		JoinConn:        joinConn,
	})
	if err != nil {
		return err
	}
	defer a.Close()
	// The readiness notice is owned here: it ends with ctx (stop), which
	// the deferred Wait, running last, waits for.
	var notified sync.WaitGroup
	defer notified.Wait()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	notified.Go(func() { notifyReady(ctx, lg, a) })
	failed := make(chan error, 1)
	go func() {
		select {
		case <-a.Left():
			stop()
		case err := <-a.Failed():
			failed <- err
			stop()
		case <-ctx.Done():
		}
	}()
	sup := supervisor.New(ctx, a.Run, supervisor.WithLogger(lg))
	<-sup.Done()
	notifySystemd(lg, daemon.SdNotifyStopping)
	select {
	case err := <-failed:
		if errors.Is(err, node.ErrRefused) {
			return &exitError{code: exitRefused, err: err}
		}
		return err
	case <-a.Left():
		if err := a.Wipe(); err != nil {
			return fmt.Errorf("left the cluster, but could not wipe %s: %w", f.dataDir, err)
		}
		lg.Info("left the cluster; data dir wiped", zap.String("data_dir", f.dataDir))
	default:
		lg.Info("agent stopped")
	}
	return nil
}

func newAgentCommand() *cobra.Command {
	c := &cobra.Command{Use: "agent", Short: "Run the node agent on this machine"}
	c.AddCommand(newAgentInitCommand(), newAgentJoinCommand(), newAgentRunCommand(), newAgentLeaveCommand(), newAgentRestoreCommand(), newAgentInstallUnitCommand())
	return c
}

func newAgentLeaveCommand() *cobra.Command {
	var dataDir string
	var force bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "leave --data-dir DIR [--force]",
		Short: "Leave the cluster gracefully: the running agent in DIR demotes itself, leaves, and wipes DIR",
		Long: `Ask the agent running on DIR to leave the cluster. A manager is demoted first
(etcd leadership moved off it; a curator leader hands over to the next), with
the quorum guard; then the node's record is removed, the agent stops and DIR is
wiped (except DIR/admin), so the machine can join again. The last manager
refuses unless --force, as leaving destroys the cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			msg, err := node.RequestLeave(ctx, dataDir, force)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
	c.Flags().StringVar(&dataDir, "data-dir", "", "the data dir of the running agent (required)")
	c.Flags().BoolVar(&force, "force", false, "leave even as the last manager, destroying the cluster")
	c.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the leave to finish")
	_ = c.MarkFlagRequired("data-dir")
	return c
}

func newAgentInitCommand() *cobra.Command {
	f := &agentFlags{}
	var listen, name, availability, clusterID string
	var certTTL time.Duration
	m := &machineFlags{}
	c := &cobra.Command{
		Use:   "init --data-dir DIR --listen IP:PORT",
		Short: "Create a new cluster with this machine as its first node, and run it",
		Long: `Create a new cluster: its CA, the first node (an etcd voter and the first
curator), the admin credential and a client config in DIR/admin/config.yaml.
Then run the node in the foreground.

DIR must be new or empty (log files aside), and the node's four ports (PORT
to PORT+3) free: otherwise init says why and writes nothing. A data dir that
holds a node is restarted with 'curator agent run'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			av, err := f.validateNew(availability)
			if err != nil {
				return err
			}
			machine, err := m.machine()
			if err != nil {
				return err
			}
			res, err := node.Init(node.InitConfig{DataDir: f.dataDir, Address: listen, Name: name, Availability: av, Version: binaryVersion(), Machine: machine, ClusterID: clusterID, CertTTL: certTTL})
			if err != nil {
				return err
			}
			printInitDone(cmd.OutOrStdout(), fmt.Sprintf("Initialised cluster %s. This node is %s, listening on %s.", res.ClusterID, res.NodeID, listen), res, listen, selfCommand())
			return runAgent(cmd.Context(), cmd, f)
		},
	}
	f.register(c)
	c.Flags().StringVar(&listen, "listen", "", "IP:PORT for the curator's gRPC; etcd uses PORT+1 and PORT+2, HTTP PORT+3 (required)")
	_ = c.MarkFlagRequired("listen")
	c.Flags().StringVar(&name, "name", "", "the node's name (default: the start of its ID)")
	c.Flags().StringVar(&availability, "availability", "active", "active, pause or drain")
	c.Flags().StringVar(&clusterID, "cluster-id", "", "the new cluster's ID, 16 hex digits (default: a new random one)")
	c.Flags().DurationVar(&certTTL, "cert-ttl", spec.DefaultCertTTL, "how long node and etcd certificates last (10s to 5 years; nodes renew at two thirds of it; 'cluster update --cert-ttl' changes it)")
	m.register(c)
	return c
}

// printInitDone says what init (or restore) made, headline first, and the
// commands to go on with; self is how to run this binary (selfCommand).
func printInitDone(w io.Writer, headline string, res *node.InitResult, listen, self string) {
	fmt.Fprintf(w, `%s

Admin config: %s
  export CURATOR_CONFIG=%s
  %s node ls

Join a manager (it becomes an etcd voter on its own):
  %s agent join --data-dir DIR --listen IP:PORT --manager %s \
    --token %s

Join a worker:
  %s agent join --data-dir DIR --listen IP:PORT --manager %s \
    --token %s

Tokens can be shown again with '%s token show manager|worker'.

`, headline, res.AdminConfig, shellQuote(res.AdminConfig), self,
		self, listen, res.ManagerToken, self, listen, res.WorkerToken, self)
}

// printRestoreDone says what restore made: the cluster it restored, this
// node as its only manager, what became of the old managers, and the
// commands to go on with, as init's.
func printRestoreDone(w io.Writer, res *node.RestoreResult, from, listen, self string) {
	headline := fmt.Sprintf(`Restored cluster %s from %s: %d node records. This node is %s, listening on
%s, the cluster's only manager. The old managers' records lose their role and
show down; join new managers with the command below (an old manager's machine
is wiped first: its data dir belongs to the cluster before the restore).
Every group comes back suspended: the leader makes and destroys no machine
until you resume them, once the records are what the cluster should be:
  curator group ls
  curator group resume --all`,
		res.ClusterID, from, res.Nodes, res.NodeID, listen)
	printInitDone(w, headline, &res.InitResult, listen, self)
}

func newAgentJoinCommand() *cobra.Command {
	f := &agentFlags{}
	var listen, name, token, availability string
	var managers []string
	var timeout time.Duration
	var runIfJoined bool
	m := &machineFlags{}
	c := &cobra.Command{
		Use:   "join --data-dir DIR --listen IP:PORT --token TOKEN --manager IP:PORT",
		Short: "Join this machine to a cluster, and run it",
		Long: `Join a cluster with a join token: with the manager token the node becomes a
consensus member on its own (an etcd learner, then a voter), within the voter
limit; with the worker token it is a worker. The node checks that the cluster's
CA has the fingerprint in the token before it trusts it. Then it runs in the
foreground.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			av, err := f.validateNew(availability)
			if err != nil {
				return err
			}
			if token == "" {
				token = os.Getenv(joinTokenEnv)
			}
			if token == "" {
				return fmt.Errorf("--token (or $%s) is required: get one with `curator token show worker|manager`", joinTokenEnv)
			}
			machine, err := m.machine()
			if err != nil {
				return err
			}
			if runIfJoined && node.Initialised(f.dataDir) {
				fmt.Fprintf(cmd.OutOrStdout(), "%s already holds a node: running it.\n", f.dataDir)
				return runAgent(cmd.Context(), cmd, f)
			}
			st, conn, err := node.Join(cmd.Context(), node.JoinConfig{
				DataDir: f.dataDir, Address: listen, Name: name, Token: token, Managers: managers,
				Availability: av, Version: binaryVersion(), Timeout: timeout, Machine: machine,
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Joined cluster %s as node %s, listening on %s.\n", st.ClusterID, st.NodeID, listen)
			return runAgentJoined(cmd.Context(), cmd, f, conn)
		},
	}
	f.register(c)
	c.Flags().StringVar(&listen, "listen", "", "IP:PORT this node listens on (required)")
	c.Flags().StringVar(&name, "name", "", "the node's name (default: the start of its ID)")
	c.Flags().StringVar(&token, "token", "", "join token, from 'curator token show worker|manager' (default $"+joinTokenEnv+", which keeps it out of ps)")
	c.Flags().StringArrayVar(&managers, "manager", nil, "a manager's IP:PORT (repeatable; at least one)")
	c.Flags().StringVar(&availability, "availability", "active", "active, pause or drain: drain makes a manager-only node that never takes work")
	c.Flags().DurationVar(&timeout, "join-timeout", time.Minute, "how long to keep trying the managers")
	c.Flags().BoolVar(&runIfJoined, "run-if-joined", false, "if the data dir already holds a node, run it instead of joining (for machines that a provider restarts with the same command)")
	m.register(c)
	_ = c.MarkFlagRequired("listen")
	_ = c.MarkFlagRequired("manager")
	return c
}

// machineFlags are what a group's provider tells a node it starts about
// its machine; an operator joining a node by hand leaves them out.
type machineFlags struct {
	group, instanceID, configSHA string
	labels                       []string
}

func (m *machineFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&m.group, "group", "", "the group this node's machine belongs to (set by the group's provider)")
	c.Flags().StringVar(&m.instanceID, "instance-id", "", "the provider's ID of this node's machine (set by the group's provider)")
	c.Flags().StringVar(&m.configSHA, "config-sha", "", "the group config SHA this machine was made from (set by the group's provider)")
	c.Flags().StringArrayVar(&m.labels, "label", nil, "a node label KEY=VALUE (repeatable)")
}

func (m *machineFlags) machine() (node.Machine, error) {
	out := node.Machine{Group: m.group, InstanceID: m.instanceID, ConfigSHA: m.configSHA}
	for _, kv := range m.labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return out, fmt.Errorf("--label %s: give a label as KEY=VALUE", spec.QuoteShort(kv))
		}
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		out.Labels[k] = v
	}
	return out, nil
}

func newAgentRunCommand() *cobra.Command {
	f := &agentFlags{}
	c := &cobra.Command{
		Use:   "run --data-dir DIR [--force-new-cluster]",
		Short: "Restart a node from its data dir, in the foreground",
		Long: `Restart a node from its data dir, in the foreground.

With --force-new-cluster, on a manager whose cluster lost its quorum for good
(a majority of the managers is gone and will not come back): its etcd restarts
as the only member of the cluster, with all its data, as 'docker swarm init
--force-new-cluster' does. The managers that are gone lose their role, their
nodes show down, and the groups or the reaper replace them; join new managers
to get back to three. A former manager that comes back is refused until it is
wiped and joins again. Stop this node's agent first; never run it on two
survivors.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			return runAgent(cmd.Context(), cmd, f)
		},
	}
	f.register(c)
	c.Flags().BoolVar(&f.forceNewCluster, "force-new-cluster", false, "restart this manager's etcd as the only member of its cluster, with all its data (after a quorum lost for good)")
	return c
}

func newAgentRestoreCommand() *cobra.Command {
	f := &agentFlags{}
	var listen, name, from string
	c := &cobra.Command{
		Use:   "restore --data-dir DIR --listen IP:PORT --from FILE",
		Short: "Start a one-manager cluster from a backup, and run it",
		Long: `Start a new one-manager cluster that holds every record of a backup
('curator cluster backup FILE'), with this machine as its manager, and run it
in the foreground. The backup's checksum is checked first: a damaged or
truncated file is refused and nothing is written.

The node gets a new identity, certificates from the backup's CAs and a new
admin credential in DIR/admin/config.yaml; etcd gets new cluster and member
IDs, so no manager of the old cluster can join it. Listen at an old manager's
address and the workers that knew it find the cluster again. The old
managers' records lose their role and show down; join new managers with the
printed command. DIR must be new or empty.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			res, err := node.Restore(node.RestoreConfig{DataDir: f.dataDir, Address: listen, From: from, Name: name, Version: binaryVersion()})
			if err != nil {
				return err
			}
			printRestoreDone(cmd.OutOrStdout(), res, from, listen, selfCommand())
			return runAgent(cmd.Context(), cmd, f)
		},
	}
	f.register(c)
	c.Flags().StringVar(&listen, "listen", "", "IP:PORT this node listens on; an old manager's address lets the workers find it (required)")
	c.Flags().StringVar(&from, "from", "", "the backup file (required)")
	c.Flags().StringVar(&name, "name", "", "the node's name (default: the start of its ID)")
	_ = c.MarkFlagRequired("listen")
	_ = c.MarkFlagRequired("from")
	return c
}
