// Package client is the operator's side of the management API: the client
// config written by `curator agent init`, a cache of the cluster's current
// managers kept beside it, and a Client that finds a manager that answers.
//
// Every manager serves the management API (followers forward to the leader),
// so the client may ask any of them. It tries the managers it knows in turn,
// the one that answered last first, and moves on only when a manager cannot
// be reached or does not answer in time: any other error is the cluster's
// answer and is returned as it is.
//
// The management API's calls are typed methods (management.go) that check
// their input first (input.go), so that a typo changes nothing; WaitNode
// waits for a node to get where a change sends it (wait.go).
package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/internal/backoff"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/transport"
)

// Defaults of the Dial options.
const (
	// DefaultAttemptTimeout bounds one call to one manager. A manager that
	// takes longer is treated as unreachable and the next one is tried.
	DefaultAttemptTimeout = 3 * time.Second
	// DefaultChangeAttemptTimeout bounds one call that changes a node or
	// the cluster to one manager. It is longer than DefaultAttemptTimeout
	// because a demotion or a forced removal may first move etcd
	// leadership, which the server allows 10 s: giving up on a manager
	// that is still working would only send the same change to the next.
	DefaultChangeAttemptTimeout = 15 * time.Second
	// DefaultPollInterval is how often WaitNode asks for the node.
	DefaultPollInterval = time.Second
	// DefaultRounds is how many times the client goes through its whole
	// manager list before it gives up. More than one round rides out a
	// leader election, during which managers answer Unavailable.
	DefaultRounds = 3
	// defaultRoundPause is the pause before the second round; it doubles
	// for each round after that.
	defaultRoundPause = 500 * time.Millisecond
	// refreshTimeout bounds the manager-list refresh after a call.
	refreshTimeout = 2 * time.Second
	// DefaultManagersRefresh is how often a client that runs long (a
	// follow, a watch, a wait) asks the cluster for its managers again,
	// so that it learns the managers that joined since it started and
	// can move to them when the ones it knew are gone.
	DefaultManagersRefresh = 10 * time.Second
)

// ErrNoManager is returned (wrapped, with what each manager said) when no
// manager could be reached.
var ErrNoManager = errors.New("no manager answered")

// ErrQuorumLost is returned, with ErrNoManager, when no manager could serve
// the call and at least one said why: the cluster has lost its quorum (too
// few etcd voters answer). The message says which managers answer and what
// to do.
var ErrQuorumLost = errors.New("quorum lost")

// The details by which a manager marks a status as a lost quorum (see
// curator's toStatus).
const (
	errorDomain      = "curator.v1"
	quorumLostReason = "QUORUM_LOST"
	notManagerReason = "FORWARDER_NOT_MANAGER"
)

// isQuorumLost says whether err is a manager's answer that the quorum is
// lost.
func isQuorumLost(err error) bool { return hasReason(err, codes.Unavailable, quorumLostReason) }

// isNotManager says whether err is the leader's refusal of a call that a
// node no longer a manager forwarded (one demoted a moment ago, whose
// curator still runs): another manager can serve the call.
func isNotManager(err error) bool { return hasReason(err, codes.PermissionDenied, notManagerReason) }

// hasReason says whether err is a status with code and the curator's
// ErrorInfo reason.
func hasReason(err error, code codes.Code, reason string) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == reason && info.GetDomain() == errorDomain {
			return true
		}
	}
	return false
}

// Option changes a default of Dial.
type Option func(*options)

type options struct {
	attemptTimeout       time.Duration
	changeAttemptTimeout time.Duration
	pollInterval         time.Duration
	rounds               int
	roundPause           time.Duration
	cachePath            *string
	lg                   *zap.Logger
	managersRefresh      time.Duration
	// only: WithOnlyManager.
	only string
	// leaderWait and waitNote: WithLeaderWait; followForever and
	// followNote: WithFollowUntilCancelled.
	leaderWait    time.Duration
	waitNote      func(string)
	followForever bool
	followNote    func(string)
}

// WithAttemptTimeout sets how long one manager gets to answer one call
// (default DefaultAttemptTimeout).
func WithAttemptTimeout(d time.Duration) Option {
	return func(o *options) { o.attemptTimeout = d }
}

// WithChangeAttemptTimeout sets how long one manager gets to answer one
// call that changes a node or the cluster (default
// DefaultChangeAttemptTimeout).
func WithChangeAttemptTimeout(d time.Duration) Option {
	return func(o *options) { o.changeAttemptTimeout = d }
}

// WithPollInterval sets how often WaitNode asks for the node (default
// DefaultPollInterval).
func WithPollInterval(d time.Duration) Option {
	return func(o *options) { o.pollInterval = d }
}

// WithRounds sets how many times the whole manager list is tried before the
// client gives up (default DefaultRounds; at least 1).
func WithRounds(n int) Option {
	return func(o *options) { o.rounds = max(n, 1) }
}

// WithManagersRefresh sets how often a client asks the cluster for its
// managers again (DefaultManagersRefresh).
func WithManagersRefresh(d time.Duration) Option {
	return func(o *options) { o.managersRefresh = d }
}

// WithCachePath sets the manager cache file; "" disables the cache. The
// default is CachePath(configPath), or no cache if configPath is "".
func WithCachePath(path string) Option {
	return func(o *options) { o.cachePath = &path }
}

// WithOnlyManager has the client call the manager at addr and no other:
// no manager the cluster reports, no cache. A history of calls made
// through several clients, each through its own manager, tests what a
// caller sees of each manager (a follower forwards to the leader).
func WithOnlyManager(addr string) Option {
	return func(o *options) { o.only = addr }
}

// WithLogger sets a logger for what the client tries (default: none).
func WithLogger(lg *zap.Logger) Option {
	return func(o *options) { o.lg = lg }
}

// Client calls the management API through whichever manager answers. It is
// safe for concurrent use. Close it when done.
type Client struct {
	clusterID string
	creds     credentials.TransportCredentials
	cachePath string
	o         options

	mu sync.Mutex
	// addrs is the order in which managers are tried: the one that
	// answered last first, then what the cluster reported, then the cache,
	// then the config.
	addrs []string
	conns map[string]*grpc.ClientConn
	// retired are failed connections replaced by fresh ones (see conn).
	retired []*grpc.ClientConn
	// cached is what the cache file holds, so an unchanged list is not
	// rewritten on every command.
	cached []string
	// refreshedAt is when the manager list was last asked for (zero:
	// never); refresh asks again after o.managersRefresh.
	refreshedAt time.Time
}

// Dial prepares a client for the cluster described by cfg, which was read
// from configPath (relative credential paths are taken from its folder, and
// the manager cache lives beside it). Connections are made on first use, so
// Dial fails only on a bad config or unreadable credentials.
func Dial(ctx context.Context, cfg *Config, configPath string, opts ...Option) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, errors.New("dial: no config")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("dial: client config %s: %w", configPath, err)
	}
	o := options{
		attemptTimeout:       DefaultAttemptTimeout,
		changeAttemptTimeout: DefaultChangeAttemptTimeout,
		pollInterval:         DefaultPollInterval,
		rounds:               DefaultRounds,
		roundPause:           defaultRoundPause,
		managersRefresh:      DefaultManagersRefresh,
		lg:                   zap.NewNop(),
	}
	for _, opt := range opts {
		opt(&o)
	}
	tlsCfg, err := cfg.tlsConfig(configPath)
	if err != nil {
		return nil, fmt.Errorf("dial: client config %s: %w", configPath, err)
	}
	c := &Client{
		clusterID: cfg.ClusterID,
		creds:     credentials.NewTLS(tlsCfg),
		o:         o,
		conns:     map[string]*grpc.ClientConn{},
	}
	switch {
	case o.cachePath != nil:
		c.cachePath = *o.cachePath
	case configPath != "":
		c.cachePath = CachePath(configPath)
	}
	if c.cachePath != "" {
		cached, err := readCache(c.cachePath, cfg.ClusterID)
		if err != nil {
			// Only a hint: a broken cache costs nothing but the
			// managers it named, and the next success rewrites it.
			o.lg.Debug("ignoring manager cache", zap.Error(err))
		}
		c.cached = cached
		c.addrs = cached
	}
	c.addrs = dedup(c.addrs, cfg.Managers)
	if o.only != "" {
		c.addrs, c.cachePath = []string{o.only}, ""
	}
	return c, nil
}

// Managers returns the managers the client knows, in the order it tries them.
func (c *Client) Managers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.addrs)
}

// Close closes every connection the client opened.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for addr, conn := range c.conns {
		if err := conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		}
		delete(c.conns, addr)
	}
	for _, conn := range c.retired {
		if err := conn.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.retired = nil
	return errors.Join(errs...)
}

// Management runs fn against one manager after another until one answers.
// fn gets a context bounded by the attempt timeout and must make its calls
// with it. fn moves on to the next manager by returning an error with code
// Unavailable or DeadlineExceeded (or by running out of time); any other
// error is returned at once. fn may therefore run more than once, against
// different managers: keep it to calls that may be repeated.
//
// After the first success the client refreshes its manager cache from
// GetClusterInfo, best effort: a failure there never fails the call.
func (c *Client) Management(ctx context.Context, fn func(context.Context, pb.ManagementClient) error) error {
	return c.manage(ctx, c.o.attemptTimeout, fn)
}

// manage is Management with attempts bounded by timeout.
func (c *Client) manage(ctx context.Context, timeout time.Duration, fn func(context.Context, pb.ManagementClient) error) error {
	addr, err := c.call(ctx, timeout, fn)
	if err != nil {
		return err
	}
	c.refresh(ctx, addr)
	return nil
}

// call runs fn against the managers in turn, for up to o.rounds rounds, and
// returns the address of the one that answered. Each attempt gets timeout.
func (c *Client) call(ctx context.Context, timeout time.Duration, fn func(context.Context, pb.ManagementClient) error) (string, error) {
	failed := map[string]error{} // the last error of each manager tried
	var order []string           // of first failure, for the message
	pauses := backoff.Policy{Initial: c.o.roundPause, Factor: 2, Max: max(maxWaitPause, c.o.roundPause)}
	started := time.Now()
	for round := 0; ; round++ {
		if round >= c.o.rounds {
			// A leader hand-over is waited out (WithLeaderWait).
			if !c.keepWaitingForLeader(started, failed) {
				break
			}
			if round == c.o.rounds {
				c.o.note(c.o.waitNote, fmt.Sprintf("no curator leader is elected right now (a leader hand-over?): waiting up to %s for one", c.o.leaderWait.Round(time.Second)))
			}
		}
		if round > 0 {
			select {
			case <-ctx.Done():
				return "", c.giveUp(ctx.Err(), order, failed)
			case <-time.After(pauses.Wait(round - 1)):
			}
		}
		for _, addr := range c.Managers() {
			if ctx.Err() != nil {
				return "", c.giveUp(ctx.Err(), order, failed)
			}
			err := c.attempt(ctx, addr, timeout, fn)
			if err == nil {
				c.answered(addr)
				return addr, nil
			}
			if ctx.Err() != nil {
				return "", c.giveUp(ctx.Err(), order, failed)
			}
			if !isUnreachable(err) {
				return "", err
			}
			c.o.lg.Debug("manager did not answer", zap.String("manager", addr), zap.Int("round", round), zap.Error(err))
			if _, ok := failed[addr]; !ok {
				order = append(order, addr)
			}
			failed[addr] = err
		}
	}
	return "", c.giveUp(nil, order, failed)
}

// attempt runs fn once against addr, within timeout.
func (c *Client) attempt(ctx context.Context, addr string, timeout time.Duration, fn func(context.Context, pb.ManagementClient) error) error {
	conn, err := c.conn(addr)
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = fn(actx, pb.NewManagementClient(conn))
	if isUnreachable(err) {
		c.retire(addr, conn)
	}
	if err != nil && actx.Err() != nil && ctx.Err() == nil {
		// The attempt ran out of time, whatever fn made of that.
		return status.Errorf(codes.DeadlineExceeded, "no answer within %v", timeout)
	}
	return err
}

// isUnreachable tells a manager that could not answer (move on to the next)
// from an answer (return it).
func isUnreachable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return isNotManager(err)
}

func (c *Client) giveUp(ctxErr error, order []string, failed map[string]error) error {
	var b strings.Builder
	quorum := ""
	for i, addr := range order {
		if i > 0 {
			b.WriteString("; ")
		}
		msg := status.Convert(failed[addr]).Message()
		if isQuorumLost(failed[addr]) {
			quorum = msg
			msg = "answers, but without a quorum"
		}
		fmt.Fprintf(&b, "%s: %s", addr, msg)
	}
	if quorum != "" {
		// What a manager that answers said is the news: lead with it.
		quorum = strings.TrimPrefix(quorum, ErrQuorumLost.Error()+": ")
		return fmt.Errorf("%w: %s (%w with a quorum; tried %s)", ErrQuorumLost, quorum, ErrNoManager, b.String())
	}
	switch {
	case ctxErr != nil && len(order) == 0:
		return fmt.Errorf("%w: %w", ErrNoManager, ctxErr)
	case ctxErr != nil:
		return fmt.Errorf("%w: %w (tried %s)", ErrNoManager, ctxErr, b.String())
	default:
		return fmt.Errorf("%w (tried %s)", ErrNoManager, b.String())
	}
}

// conn returns the connection to addr, creating it (it connects lazily) on
// first use.
//
// A connection that failed stays in TRANSIENT_FAILURE until gRPC's reconnect
// backoff (seconds, growing to minutes) runs out, and every call on it fails
// at once with the old error. So a connection on which a manager could not
// be reached is retired (see retire) and replaced by a fresh one, which
// connects on the next call, and a manager that came back is found in the
// next round.
func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	conn, ok := c.conns[addr]
	if ok && conn.GetState() != connectivity.TransientFailure {
		return conn, nil
	}
	if ok {
		c.retired = append(c.retired, conn)
	}
	conn, err := grpc.NewClient(addr, transport.DialOptions(c.creds)...)
	if err != nil {
		return nil, fmt.Errorf("manager %q: %w", addr, err)
	}
	c.conns[addr] = conn
	return conn, nil
}

// retire drops conn, on which addr could not be reached, so that the next
// call to addr dials afresh. It is closed with the client, not now: another
// goroutine may still be using it.
func (c *Client) retire(addr string, conn *grpc.ClientConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns[addr] == conn {
		delete(c.conns, addr)
		c.retired = append(c.retired, conn)
	}
}

// answered moves addr to the front, so the next call goes there first.
func (c *Client) answered(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addrs = dedup([]string{addr}, c.addrs)
}

// refresh asks addr for the current managers, at the first call of the
// client and then at most every o.managersRefresh, and records them. It
// never fails: the call it follows has already succeeded.
func (c *Client) refresh(ctx context.Context, addr string) {
	c.mu.Lock()
	due := c.refreshedAt.IsZero() || time.Since(c.refreshedAt) >= c.o.managersRefresh
	if due {
		c.refreshedAt = time.Now()
	}
	c.mu.Unlock()
	if !due {
		return
	}
	conn, err := c.conn(addr)
	if err != nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	info, err := pb.NewManagementClient(conn).GetClusterInfo(rctx, &pb.ClusterInfoRequest{})
	if err != nil {
		c.o.lg.Debug("could not refresh the manager list", zap.String("manager", addr), zap.Error(err))
		return
	}
	c.noteManagers(addr, info.GetManagers())
}

// noteManagers records the managers the cluster reported, with addr (which
// just answered) first if it is one of them: in memory and, if the list
// changed, in the cache file.
func (c *Client) noteManagers(addr string, managers []string) {
	list := dedup(nil, managers)
	if len(list) == 0 || c.o.only != "" {
		return
	}
	if slices.Contains(list, addr) {
		list = dedup([]string{addr}, list)
	}
	c.mu.Lock()
	// Keep the managers we knew behind the reported ones: the report may
	// come from a manager with a stale view.
	c.addrs = dedup(list, c.addrs)
	write := c.cachePath != "" && !slices.Equal(list, c.cached)
	if write {
		c.cached = list
	}
	c.mu.Unlock()
	if !write {
		return
	}
	if err := writeCache(c.cachePath, c.clusterID, list, time.Now()); err != nil {
		c.o.lg.Debug("could not write the manager cache", zap.String("path", c.cachePath), zap.Error(err))
	}
}

// dedup returns the non-empty strings of a and then b, each once, in order.
func dedup(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	for _, s := range slices.Concat(a, b) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
