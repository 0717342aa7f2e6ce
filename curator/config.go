package curator

import (
	"cmp"
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/curatorproject/curator/curator/internal/faults"
	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/pki"
)

// Config is everything one curator needs. Defaults live in one place
// (withDefaults); flags only fill the struct.
type Config struct {
	// NodeID is the ID of the node this curator runs on.
	NodeID string
	// Address is the node's gRPC address, IP:PORT; the curator serves on it.
	Address string
	// Etcd is a client of the node's own etcd member.
	Etcd *clientv3.Client
	// NodeCert and NodeKey are the node's certificate (issued by the cluster
	// CA, role node) and key; CA is the cluster CA.
	NodeCert *x509.Certificate
	NodeKey  crypto.Signer
	CA       *x509.Certificate
	// Certs, if set, is where the node's current certificate is kept (its
	// chain with the CA): the agent replaces it when it renews, and the
	// curator's server and its forwarding client present whatever it
	// holds at each handshake. Nil means NodeCert and NodeKey for ever.
	Certs *pki.CertSource

	// ElectionTTL is the lease TTL of the leader election: a crashed leader
	// is replaced within it (plus an etcd election).
	ElectionTTL time.Duration
	// HeartbeatInterval is how often nodes send a heartbeat.
	HeartbeatInterval time.Duration
	// DownAfter is how long without a heartbeat before a node is down. A
	// new leader also waits this long before it marks any node down.
	DownAfter time.Duration
	// SyncInterval is the resync period of the loops that follow etcd's
	// member list, which has no watch; node changes trigger them at once,
	// and so do membership changes where MembershipChanges tells of them.
	SyncInterval time.Duration
	// MembershipChanges, if set, runs until ctx ends and calls changed
	// each time this node's etcd member applies a change of the
	// membership (consensus.Service.MembershipChanges): the loops that
	// decide on the membership look at once, not at their next resync.
	MembershipChanges func(ctx context.Context, changed func())
	// PollOnly makes the loops tick on SyncInterval alone, ignoring
	// changes in the registry view and making one change per period: a
	// fixed poll (as Monogon's curator runs), kept to measure against.
	PollOnly bool
	// MinActionGap is the least time between two actions of one loop.
	MinActionGap time.Duration
	// LearnerDownLimit is how long a learner's node may be down before the
	// learner is removed.
	LearnerDownLimit time.Duration
	// PromoteTimeout bounds one attempt to promote a learner: etcd refuses
	// until the learner has caught up, and the loop tries again next tick.
	PromoteTimeout time.Duration
	// MoveLeaderTimeout bounds moving etcd leadership off a voter that is
	// being demoted or removed: well under what a client waits (20 s), so
	// that a transfer that cannot finish is reported, not waited on.
	MoveLeaderTimeout time.Duration
	// PlacementInterval is the period of the placement loop, which keeps
	// etcd leadership off the curator leader's node; PlacementGap is the
	// least time between two of its moves (etcd needs a moment to settle
	// after one: never flap); PlacementMoveTimeout bounds one move.
	PlacementInterval    time.Duration
	PlacementGap         time.Duration
	PlacementMoveTimeout time.Duration
	// ApprovalInterval is the period of the manager-approvals loop without
	// node changes (at least SyncInterval): a pending promotion is only
	// ever for a node that joined with the manager token, whose changes
	// (its approval first) wake the loop at once.
	ApprovalInterval time.Duration
	// GroupInterval is the resync period of the group loop, which lists
	// every group's machines through its provider; node changes and group
	// commits trigger it at once.
	GroupInterval time.Duration
	// ReapAfter is how long a node that belongs to no group may be down
	// before the reaper removes it.
	ReapAfter time.Duration
	// Docker is this node's Docker engine, for the Swarm flavor (nil: the
	// node's agent runs without one). Leading with the flavor on, the
	// curator reads and changes the Swarm through it.
	Docker SwarmEngine
	// SwarmInterval is the resync period of the swarm sync, which reads
	// the Swarm's node list; node changes and the Swarm's node events
	// (its engine's events stream) trigger it at once, and the period
	// covers what the stream missed. SwarmTimeout bounds each call to the engine: during a
	// Swarm election a manager's calls hang about 12 s, and a tick must
	// not wait for that.
	SwarmInterval time.Duration
	SwarmTimeout  time.Duration
	// SessionRate is how many session set-ups (new Heartbeat streams) a
	// manager admits per second, SessionBurst how many at once above
	// that; the others are refused with a time to come back (see
	// admission.go). 0 means the default.
	SessionRate  float64
	SessionBurst int
	// Version is the binary's version, reported by cluster info.
	Version string
	// Now is the clock; nil means the host's (off by
	// CURATOR_FAULT_CLOCK_SKEW in a binary built with -tags faults).
	Now func() time.Time
	// Metrics are the collectors to update; nil means unregistered ones.
	Metrics *Metrics
	// Logger is for the API handlers (runnables log through the
	// supervisor); nil means no logs.
	Logger *zap.Logger
}

// Defaults.
const (
	DefaultElectionTTL          = 3 * time.Second
	DefaultHeartbeatInterval    = time.Second
	DefaultDownAfter            = 5 * time.Second
	DefaultSyncInterval         = 250 * time.Millisecond
	DefaultMinActionGap         = 50 * time.Millisecond
	DefaultLearnerDownLimit     = time.Minute
	DefaultPromoteTimeout       = time.Second
	DefaultMoveLeaderTimeout    = 5 * time.Second
	DefaultPlacementInterval    = time.Second
	DefaultPlacementGap         = 2 * time.Second
	DefaultPlacementMoveTimeout = 5 * time.Second
	DefaultApprovalInterval     = 5 * time.Second
	DefaultGroupInterval        = 2 * time.Second
	DefaultReapAfter            = time.Hour
	DefaultSwarmInterval        = 2 * time.Second
	DefaultSwarmTimeout         = 1500 * time.Millisecond
	DefaultSessionRate          = 1000.0
	DefaultSessionBurst         = 100
)

func (c Config) withDefaults() Config {
	for _, d := range []struct {
		field *time.Duration
		def   time.Duration
	}{
		{&c.ElectionTTL, DefaultElectionTTL},
		{&c.HeartbeatInterval, DefaultHeartbeatInterval},
		{&c.DownAfter, DefaultDownAfter},
		{&c.SyncInterval, DefaultSyncInterval},
		{&c.MinActionGap, DefaultMinActionGap},
		{&c.LearnerDownLimit, DefaultLearnerDownLimit},
		{&c.PromoteTimeout, DefaultPromoteTimeout},
		{&c.MoveLeaderTimeout, DefaultMoveLeaderTimeout},
		{&c.PlacementInterval, DefaultPlacementInterval},
		{&c.PlacementGap, DefaultPlacementGap},
		{&c.PlacementMoveTimeout, DefaultPlacementMoveTimeout},
		{&c.ApprovalInterval, DefaultApprovalInterval},
		{&c.GroupInterval, DefaultGroupInterval},
		{&c.ReapAfter, DefaultReapAfter},
		{&c.SwarmInterval, DefaultSwarmInterval},
		{&c.SwarmTimeout, DefaultSwarmTimeout},
	} {
		if *d.field == 0 {
			*d.field = d.def
		}
	}
	c.SessionRate = cmp.Or(c.SessionRate, DefaultSessionRate)
	c.SessionBurst = cmp.Or(c.SessionBurst, DefaultSessionBurst)
	if c.Now == nil {
		c.Now = faults.Now
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// leader is what a leadership reads of c (defaults applied).
func (c *Config) leader() *leader.Config {
	return &leader.Config{
		NodeID: c.NodeID, Etcd: c.Etcd, Docker: c.Docker, Now: c.Now, Logger: c.Logger,
		MembershipChanges: c.MembershipChanges,
		HeartbeatInterval: c.HeartbeatInterval, DownAfter: c.DownAfter,
		SyncInterval: c.SyncInterval, MinActionGap: c.MinActionGap, PollOnly: c.PollOnly,
		LearnerDownLimit: c.LearnerDownLimit, PromoteTimeout: c.PromoteTimeout, MoveLeaderTimeout: c.MoveLeaderTimeout,
		PlacementInterval: c.PlacementInterval, PlacementGap: c.PlacementGap, PlacementMoveTimeout: c.PlacementMoveTimeout,
		ApprovalInterval: c.ApprovalInterval, GroupInterval: c.GroupInterval, ReapAfter: c.ReapAfter,
		SwarmInterval: c.SwarmInterval, SwarmTimeout: c.SwarmTimeout,
	}
}

// Timers are the curator's timings an operator sets, as the agent's flags
// of the same names.
type Timers struct {
	ElectionTTL, HeartbeatInterval, DownAfter, ReapAfter time.Duration
}

// Check says what is wrong with t, naming each timing by its flag: the
// one set of rules for the agent's flags and the curator's Config.
func (t Timers) Check() error {
	var errs []error
	if t.ElectionTTL < time.Second || t.ElectionTTL%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--election-ttl %s: must be a whole number of seconds, at least 1s (etcd leases count in seconds)", t.ElectionTTL))
	}
	if t.HeartbeatInterval <= 0 || t.DownAfter <= t.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("--down-after (%s) must be longer than --heartbeat-interval (%s)", t.DownAfter, t.HeartbeatInterval))
	}
	if t.ReapAfter <= t.DownAfter {
		errs = append(errs, fmt.Errorf("--reap-after (%s) must be longer than --down-after (%s): a node is reaped only once it is down", t.ReapAfter, t.DownAfter))
	}
	return errors.Join(errs...)
}

// Validate says what is wrong with c, if anything.
func (c Config) Validate() error {
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("node ID is empty"))
	}
	if _, _, err := spec.SplitAddress(c.Address); err != nil {
		errs = append(errs, err)
	}
	if c.Etcd == nil {
		errs = append(errs, errors.New("no etcd client"))
	}
	if c.NodeCert == nil || c.NodeKey == nil || c.CA == nil {
		errs = append(errs, errors.New("node certificate, key and CA are all required"))
	}
	if err := (Timers{ElectionTTL: c.ElectionTTL, HeartbeatInterval: c.HeartbeatInterval, DownAfter: c.DownAfter, ReapAfter: c.ReapAfter}).Check(); err != nil {
		errs = append(errs, err)
	}
	if c.SyncInterval < 0 || c.MinActionGap < 0 || c.LearnerDownLimit < 0 || c.GroupInterval < 0 {
		errs = append(errs, errors.New("sync interval, minimum action gap, learner down limit and group interval must not be negative"))
	}
	if c.PromoteTimeout <= 0 || c.MoveLeaderTimeout <= 0 || c.PlacementMoveTimeout <= 0 {
		errs = append(errs, errors.New("promote, move-leader and placement move timeouts must be positive"))
	}
	if c.SwarmInterval < 0 || c.SwarmTimeout < 0 {
		errs = append(errs, errors.New("swarm interval and swarm timeout must not be negative"))
	}
	if c.PlacementInterval <= 0 || c.PlacementGap < 0 || c.ApprovalInterval <= 0 {
		errs = append(errs, errors.New("placement and approval intervals must be positive, and the placement gap not negative"))
	}
	if c.SessionRate < 0 || c.SessionBurst < 0 {
		errs = append(errs, fmt.Errorf("session rate (%g/s) and burst (%d) must not be negative", c.SessionRate, c.SessionBurst))
	}
	return errors.Join(errs...)
}
