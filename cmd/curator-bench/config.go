package main

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/curatorproject/curator/provider/process"

	"github.com/spf13/cobra"
)

// Defaults of every subcommand, in one place; flags only fill the configs.
const (
	DefaultManagers = 3
	// DefaultAddresses is away from `curator dev`'s 127.0.100.x and from
	// the e2e tests' ranges, so the bench runs beside both.
	DefaultAddresses       = "127.0.150.10-127.0.150.250"
	DefaultPort            = 7000
	DefaultInterval        = time.Second
	DefaultDuration        = 60 * time.Second
	DefaultDownAfter       = 5 * time.Second
	DefaultElectionTTL     = 3 * time.Second
	DefaultJoinConcurrency = 32
	DefaultJoinTimeout     = 10 * time.Minute
	DefaultReadyTimeout    = 2 * time.Minute
	DefaultListRounds      = 20
	DefaultCLIRounds       = 10
	maxManagers            = 7
	// simPortBase and simPortsPerIP: simulated nodes listen nowhere, but
	// Register wants a unique IP:PORT for each, so they take ports from
	// simPortBase on the address after the managers' (and the next ones
	// after every simPortsPerIP nodes).
	simPortBase   = 10000
	simPortsPerIP = 50000
)

// clusterConfig is the cluster the bench starts.
type clusterConfig struct {
	// curator is the binary to run; "" builds ./cmd/curator of the module
	// the bench is run in, into the bench's dir.
	curator   string
	managers  int
	dir       string
	addresses string
	port      int
	// Agent timers, passed to every manager.
	interval    time.Duration
	downAfter   time.Duration
	electionTTL time.Duration
	// pprof starts the managers with --pprof, so the leader can be
	// profiled.
	pprof bool
	// nodeArgs are more agent arguments of the node of each name (not a
	// flag: `swarm` gives each its own Docker engine).
	nodeArgs map[string][]string
}

func (c *clusterConfig) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&c.curator, "curator", "", "curator binary to run (default: go build ./cmd/curator into the bench's dir)")
	fs.IntVar(&c.managers, "managers", DefaultManagers, "consensus members (1 to 7), each a real curator process")
	fs.StringVar(&c.dir, "dir", "", "where the managers keep their data dirs and logs, kept afterwards (default: a temporary dir, removed afterwards)")
	fs.StringVar(&c.addresses, "addresses", DefaultAddresses, "loopback addresses FIRST-LAST: the managers take the first ones, simulated nodes' (unused) addresses the next")
	fs.IntVar(&c.port, "port", DefaultPort, "the managers' gRPC port (etcd peer, etcd client and HTTP take the next three)")
	fs.DurationVar(&c.interval, "interval", DefaultInterval, "heartbeat interval of the cluster and of every simulated node")
	fs.DurationVar(&c.downAfter, "down-after", DefaultDownAfter, "the cluster's --down-after")
	fs.DurationVar(&c.electionTTL, "election-ttl", DefaultElectionTTL, "the cluster's --election-ttl")
	fs.BoolVar(&c.pprof, "pprof", false, "start the managers with --pprof (heartbeats --profile then also writes the leader's CPU profile)")
}

// Validate checks the flags and returns the managers' addresses and the
// first address of the simulated nodes.
func (c *clusterConfig) Validate() (managers []netip.AddrPort, simBase netip.Addr, err error) {
	if c.managers < 1 || c.managers > maxManagers {
		return nil, netip.Addr{}, fmt.Errorf("--managers %d: want 1 to %d", c.managers, maxManagers)
	}
	if c.port < 1 || c.port > 65532 {
		return nil, netip.Addr{}, fmt.Errorf("--port %d: want 1 to 65532", c.port)
	}
	if c.interval <= 0 || c.downAfter <= c.interval {
		return nil, netip.Addr{}, fmt.Errorf("--down-after (%s) must be longer than --interval (%s)", c.downAfter, c.interval)
	}
	if c.electionTTL < time.Second || c.electionTTL%time.Second != 0 {
		return nil, netip.Addr{}, fmt.Errorf("--election-ttl %s: a whole number of seconds, at least 1s", c.electionTTL)
	}
	addrs, err := process.AddressRange(c.addresses, c.managers+1)
	if err != nil {
		return nil, netip.Addr{}, fmt.Errorf("--addresses %q: %w", c.addresses, err)
	}
	for _, a := range addrs[:c.managers] {
		managers = append(managers, netip.AddrPortFrom(a, uint16(c.port)))
	}
	return managers, addrs[c.managers], nil
}

// simAddress is the address simulated node i registers with.
func simAddress(base netip.Addr, i int) string {
	a := base
	for range i / simPortsPerIP {
		a = a.Next()
	}
	return netip.AddrPortFrom(a, uint16(simPortBase+i%simPortsPerIP)).String()
}

// fleetConfig is the simulated nodes.
type fleetConfig struct {
	nodes           int
	joinConcurrency int
	// joinTimeout bounds the whole join wave; readyTimeout the wait for
	// every node to be ready after it.
	joinTimeout  time.Duration
	readyTimeout time.Duration
	// joinProfile is a dir for each manager's CPU profile over the first
	// joinProfileWindow of the join wave (manager-N-join-cpu.pprof; the
	// managers must run with --pprof); "": none. Not a flag: heartbeats
	// --profile sets it.
	joinProfile string
	// joinConn: the first session runs on the join's connection, as the
	// agent's does (false: the session dials its own, as before, for a
	// baseline).
	joinConn bool
}

func (c *fleetConfig) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.IntVar(&c.nodes, "nodes", 100, "simulated nodes")
	fs.IntVar(&c.joinConcurrency, "join-concurrency", DefaultJoinConcurrency, "Register calls in flight at once")
	fs.DurationVar(&c.joinTimeout, "join-timeout", DefaultJoinTimeout, "how long every node gets to join")
	fs.DurationVar(&c.readyTimeout, "ready-timeout", DefaultReadyTimeout, "how long every node gets to be ready once all joined")
	fs.BoolVar(&c.joinConn, "join-conn", true, "each node's first session on its join's connection, as the agent's (false: a connection of the session's own, for a baseline)")
}

// Validate checks the flags.
func (c *fleetConfig) Validate() error {
	if c.nodes < 1 {
		return fmt.Errorf("--nodes %d: want 1 or more", c.nodes)
	}
	if c.joinConcurrency < 1 {
		return fmt.Errorf("--join-concurrency %d: want 1 or more", c.joinConcurrency)
	}
	if c.joinTimeout <= 0 || c.readyTimeout <= 0 {
		return errors.New("--join-timeout and --ready-timeout must be positive")
	}
	return nil
}
