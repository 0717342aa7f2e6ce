package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dockerclient "github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
	"github.com/curatorproject/curator/transport"
)

// Config is the agent's configuration; defaults in withDefaults.
type Config struct {
	DataDir string
	Version string
	// Curator settings, used when this node runs a curator.
	ElectionTTL       time.Duration
	HeartbeatInterval time.Duration
	DownAfter         time.Duration
	ReapAfter         time.Duration
	// Pprof serves Go's profiles on the HTTP port.
	Pprof bool
	// ForceNewCluster restarts this manager's etcd, once, as the only
	// member of its cluster with all its data (`agent run
	// --force-new-cluster`): the way back from a lost quorum whose other
	// managers are gone for good.
	ForceNewCluster bool
	// DockerSocket is this machine's Docker engine, for the Swarm flavor
	// (a unix socket path, or a unix:// or tcp:// URL; empty: none).
	// SwarmAdvertise is the address the engine advertises when the agent
	// joins it to the Swarm (empty: the engine picks).
	DockerSocket   string
	SwarmAdvertise string
	// EtcdTickMs and EtcdElectionMs shorten etcd's timers in tests.
	EtcdTickMs, EtcdElectionMs uint
	// Logger is the base logger for etcd and the API handlers.
	Logger *zap.Logger
	// Logs keeps the agent's last log lines (what Logger writes), which
	// it sends to the leader when asked (`curator logs`); nil: it has
	// none to send.
	Logs *LogRing
	// JoinConn is the connection of the join that made this node, if the
	// manager took it for the node's (Join): the agent's first session
	// runs on it. The agent owns it from New on.
	JoinConn *JoinConn
}

// Agent is the node agent of one machine.
type Agent struct {
	cfg   Config
	state *State
	id    *identity

	resolver *manual.Resolver
	conn     *grpc.ClientConn

	// desired is the node's own record as the leader last sent it.
	desired *value[*pb.Node]
	// managers is the managers' addresses, as last known.
	mu       sync.Mutex
	managers []string
	// refusalWarned is the kind of refusal (refusalOfNode,
	// refusalOfRelease) warned about since the leader last sent this node
	// its record: each manager words a refusal its own way, and the
	// operator is to read it once.
	refusalWarned string
	// refusals counts the sessions refused in a row, since refusedSince
	// (see logStreamError).
	refusals     int
	refusedSince time.Time

	consensus consensusState
	// forceNewCluster is Config.ForceNewCluster until the recovery is
	// written: a later restart of etcd in this process (once new managers
	// joined) must not remove them again.
	forceNewCluster atomic.Bool
	// muConsensusFile orders the writes of consensus.json: the role
	// (runRoles) and a renewed etcd certificate (certs.go).
	muConsensusFile sync.Mutex

	// docker is the machine's Docker engine (nil without --docker-socket).
	docker *dockerclient.Client

	// session keeps the session stream with the leader.
	session *Session
	// logRequests are the requests for the node's logs its session
	// stream carried, for runLogs.
	logRequests chan *pb.LogsRequest

	registry *prometheus.Registry
	metrics  *curator.Metrics

	// left is closed once the node has left the cluster: the agent must
	// stop, and its data dir be wiped.
	left      chan struct{}
	leaveOnce sync.Once
	// leaving is set once `curator agent leave` asked: the refusals that
	// follow the node's removal are the leave, not news.
	leaving atomic.Bool
	// failed gets the error of a recovery that cannot be done (a new
	// cluster forced from data that cannot make one, the records refused):
	// retrying would only say it again, so the agent stops with it.
	failed chan error
}

// Failed delivers an error the agent cannot go on from: stop it, and
// report the error.
func (a *Agent) Failed() <-chan error { return a.failed }

// fail stops the agent with err (the first one counts).
func (a *Agent) fail(err error) {
	select {
	case a.failed <- err:
	default:
	}
}

func (a *Agent) requestLeave() { a.leaveOnce.Do(func() { close(a.left) }) }

// Left is closed once the node has left the cluster (`curator agent
// leave`): stop the agent, then call Wipe.
func (a *Agent) Left() <-chan struct{} { return a.left }

// Wipe deletes the node's data dir after it left, so the machine can join
// again. The admin credential of the first node (admin/) is kept: it may be
// the operator's only copy, and it is no use to anyone without a cluster.
func (a *Agent) Wipe() error {
	entries, err := os.ReadDir(a.cfg.DataDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == AdminDir {
			continue
		}
		if err := os.RemoveAll(filepath.Join(a.cfg.DataDir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// New loads the node in cfg.DataDir, and checks that its four ports are
// free, so that a node that cannot run says so at once instead of
// restarting its servers with backoff for ever.
func New(cfg Config) (a *Agent, err error) {
	defer func() {
		if err != nil {
			cfg.JoinConn.Close()
		}
	}()
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	st, err := loadState(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if err := CheckPorts(st.Address); err != nil {
		return nil, fmt.Errorf("%w: is this node running already? Stop the other process first (the node's address, %s, is fixed in %s)", err, st.Address, cfg.DataDir)
	}
	id, err := loadIdentity(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	mgrs, err := loadManagers(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("known managers: %w", err)
	}
	a = &Agent{cfg: cfg, state: st, id: id, desired: newValue[*pb.Node](), managers: mgrs, left: make(chan struct{}), failed: make(chan error, 1), logRequests: make(chan *pb.LogsRequest, 8)}
	if cfg.ForceNewCluster {
		join, err := loadConsensus(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		if join == nil {
			return nil, fmt.Errorf("--force-new-cluster: %s holds no manager (no consensus role): run it on a surviving manager's data dir", cfg.DataDir)
		}
		// A learner's data, or a member that never finished joining,
		// cannot make a cluster: say so now, before anything starts.
		if err := consensus.CheckForceNewCluster(filepath.Join(cfg.DataDir, etcdDir), st.NodeID); err != nil {
			return nil, fmt.Errorf("--force-new-cluster: %w", err)
		}
		a.forceNewCluster.Store(true)
	}
	if cfg.DockerSocket != "" {
		host := cfg.DockerSocket
		if !strings.Contains(host, "://") {
			host = "unix://" + host
		}
		if a.docker, err = dockerclient.New(dockerclient.WithHost(host)); err != nil {
			return nil, fmt.Errorf("--docker-socket %s: %w", cfg.DockerSocket, err)
		}
	}
	a.session, err = NewSession(SessionConfig{
		First:    cfg.JoinConn,
		TLS:      pki.ClientTLSFrom(id.certs, id.ca),
		Version:  cfg.Version,
		Interval: cfg.HeartbeatInterval,
		Managers: func() []string {
			a.mu.Lock()
			defer a.mu.Unlock()
			return slices.Clone(a.managers)
		},
		OnWatch: func(ctx context.Context, resp *pb.WatchNodeResponse) {
			a.refusalOver()
			a.setManagers(ctx, resp.Managers)
			if resp.Node != nil {
				a.desired.set(resp.Node)
			}
		},
		OnEnd: func(ctx context.Context, manager string, err error) {
			if ctx.Err() == nil {
				a.metrics.AgentSessionEnds.WithLabelValues(sessionEndReason(err)).Inc()
			}
			a.logStreamError(supervisor.Logger(ctx), "session with "+manager, err)
		},
		OnStart:    func() { a.metrics.AgentSessions.Inc() },
		OnAnswered: func(took time.Duration) { a.metrics.AgentHeartbeatAnswers.Observe(took.Seconds()) },
		OnLogs: func(req *pb.LogsRequest) {
			select {
			case a.logRequests <- req:
			default: // runLogs is behind: the caller is told the node did not answer
			}
		},
	})
	if err != nil {
		return nil, err
	}
	a.registry = prometheus.NewRegistry()
	a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.metrics = curator.NewMetrics(a.registry)
	a.resolver = manual.NewBuilderWithScheme("curator-managers")
	a.resolver.InitialState(resolverState(mgrs))
	tlsCfg := pki.ClientTLSFrom(id.certs, id.ca)
	a.conn, err = grpc.NewClient(a.resolver.Scheme()+":///managers", append(transport.DialOptions(transport.SharedSessions(tlsCfg)),
		grpc.WithResolvers(a.resolver),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"round_robin":{}}]}`),
	)...)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// WaitJoined waits until the node is in the cluster with a session up: the
// leader sent the node's own record over the session's stream. It is
// when a supervisor may call the agent ready (sd_notify READY=1).
func (a *Agent) WaitJoined(ctx context.Context) error {
	for {
		_, known, changed := a.desired.get()
		if known {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// NodeID is the ID of this agent's node.
func (a *Agent) NodeID() string { return a.state.NodeID }

func resolverState(addrs []string) resolver.State {
	var s resolver.State
	for _, m := range addrs {
		// Certificates name managers by IP: check the one dialled.
		host, _, err := net.SplitHostPort(m)
		if err != nil {
			continue
		}
		s.Addresses = append(s.Addresses, resolver.Address{Addr: m, ServerName: host})
	}
	return s
}

// setManagers records a new manager list, on disk and for the connection.
func (a *Agent) setManagers(ctx context.Context, mgrs []string) {
	if len(mgrs) == 0 {
		return
	}
	a.mu.Lock()
	same := slices.Equal(a.managers, mgrs)
	a.managers = slices.Clone(mgrs)
	a.mu.Unlock()
	if same {
		return
	}
	if err := saveManagers(a.cfg.DataDir, mgrs); err != nil {
		supervisor.Logger(ctx).Warn("could not save the manager list", zap.Error(err))
	}
	a.resolver.UpdateState(resolverState(mgrs))
	supervisor.Logger(ctx).Info("managers changed", zap.Strings("managers", mgrs))
}

// Run is the agent's runnable.
func (a *Agent) Run(ctx context.Context) error {
	runnables := map[string]supervisor.Runnable{
		"session": a.runSession,
		"roles":   a.runRoles,
		"local":   a.runLocal,
		"http":    a.runHTTP,
		"certs":   a.runCertRenewal,
		"logs":    a.runLogs,
	}
	if a.docker != nil {
		runnables["swarm"] = a.runSwarm
	}
	if err := supervisor.RunGroup(ctx, runnables); err != nil {
		return err
	}
	supervisor.Signal(ctx, supervisor.Healthy)
	supervisor.Logger(ctx).Info("agent running", zap.String("node", a.state.NodeID), zap.String("address", a.state.Address))
	<-ctx.Done()
	return ctx.Err()
}

// Close releases the connection to the managers.
func (a *Agent) Close() error {
	a.session.Close()
	if a.docker != nil {
		a.docker.Close()
	}
	return a.conn.Close()
}

// value is a variable that can be waited on for changes.
type value[T any] struct {
	mu      sync.Mutex
	v       T
	set_    bool
	changed chan struct{}
}

func newValue[T any]() *value[T] { return &value[T]{changed: make(chan struct{})} }

func (v *value[T]) set(x T) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.v, v.set_ = x, true
	close(v.changed)
	v.changed = make(chan struct{})
}

// get returns the value, whether it was ever set, and a channel closed at
// the next change.
func (v *value[T]) get() (T, bool, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.v, v.set_, v.changed
}

// ErrRefused is why an agent stops when the cluster refuses its node for
// good (removed, decommissioned, refused after a recovery): running on
// cannot help, and neither can a restart, so a supervisor must see it
// (`curator agent run` exits with status 3).
var ErrRefused = errors.New("the cluster refuses this node")

// Refusals in a row that stop the agent: at least refusalsToStop sessions,
// over at least refusalGrace, with nothing else in between (a leader
// change or a restore in progress answers otherwise within that time).
const (
	refusalsToStop = 3
	refusalGrace   = 10 * time.Second
)

// logStreamError logs why a stream to the leader ended. Most reasons pass
// (a leader change, a manager restarting) and are debug noise; a refusal
// means this node is no longer welcome, which an operator must see, once,
// and which stops the agent (ErrRefused) once it holds for refusalGrace.
func (a *Agent) logStreamError(lg *zap.Logger, stream string, err error) {
	if errors.Is(err, ErrSessionMoved) {
		lg.Info(stream + " moves to another manager: the leader serves sessions itself only while no other manager can")
		return
	}
	if !isRefusal(err) {
		a.mu.Lock()
		a.refusals = 0
		a.mu.Unlock()
		lg.Debug(stream+" stream ended", zap.Error(err))
		return
	}
	msg := status.Convert(err).Message()
	if a.leaving.Load() {
		lg.Debug(stream+" stream ended: the node is leaving", zap.String("reason", msg))
		return
	}
	skew := hasReason(err, spec.ReleaseSkewReason)
	kind := refusalOfNode
	if skew {
		kind = refusalOfRelease
	}
	now := time.Now()
	a.mu.Lock()
	seen := a.refusalWarned == kind
	a.refusalWarned = kind
	if a.refusals == 0 {
		a.refusedSince = now
	}
	a.refusals++
	refusedFor := now.Sub(a.refusedSince)
	stop := a.refusals >= refusalsToStop && refusedFor >= refusalGrace
	a.mu.Unlock()
	if !seen && skew {
		lg.Warn("the cluster refuses this node's release: run this node on a release the version policy allows (`curator version` says which this is); its data is fine, keep it",
			zap.String("stream", stream), zap.String("reason", msg), zap.Duration("stops_after", refusalGrace))
	} else if !seen {
		lg.Warn("the cluster refuses this node: was it removed (`curator node ls` tells)? To join again, stop this agent, wipe its data dir and run `curator agent join`",
			zap.String("stream", stream), zap.String("reason", msg), zap.Duration("stops_after", refusalGrace))
	}
	switch {
	case stop && skew:
		a.fail(fmt.Errorf("%w: %s (refused for %s): start this node again on a release the cluster allows; keep %s", ErrRefused, msg, refusedFor.Round(time.Second), a.cfg.DataDir))
	case stop:
		a.fail(fmt.Errorf("%w: %s (refused for %s): to join again, wipe %s and run `curator agent join`", ErrRefused, msg, refusedFor.Round(time.Second), a.cfg.DataDir))
	}
}

// The kinds of refusal logStreamError warns about, once each.
const (
	refusalOfNode    = "node"
	refusalOfRelease = "release"
)

// refusalOver notes that the leader sent this node its record: a refusal
// after it is warned about again.
func (a *Agent) refusalOver() {
	a.mu.Lock()
	a.refusalWarned = ""
	a.mu.Unlock()
}

// sessionEndReason is the reason label of a session that ended with err
// (curator_agent_session_ends_total).
func sessionEndReason(err error) string {
	switch {
	case errors.Is(err, ErrSessionMoved):
		return "moved"
	case isRefusal(err):
		return "refused"
	}
	return "lost"
}

// isRefusal says whether a stream ended because the cluster refuses this
// node (not because the manager it went through cannot forward).
func isRefusal(err error) bool {
	switch status.Code(err) {
	case codes.PermissionDenied, codes.NotFound, codes.Unauthenticated:
		return !hasReason(err, spec.NotManagerReason)
	}
	return false
}

// hasReason says whether err's status carries an ErrorInfo with reason.
func hasReason(err error, reason string) bool {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason == reason {
			return true
		}
	}
	return false
}
