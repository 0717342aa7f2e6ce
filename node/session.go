package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
	"github.com/curatorproject/curator/transport"
)

// The agent keeps one stream to the curator leader, through one manager at
// a time (a session): its heartbeats, whose answers carry its own record
// and the manager list as they change. The leader answers every
// heartbeat; an answer that does not come within answerTimeout means the
// session is dead whatever TCP says (a frozen or cut-off manager keeps its
// connections open), and the agent moves to the next manager. The bound
// is well inside the leader's down-after (five intervals by default), so
// a node that can reach any live manager is never marked down by a
// failover or a partition.
//
// Between two attempts the agent waits as reconnectDelay says: a spread
// over part of the heartbeat interval that grows with the attempts that
// failed in a row, or the wait a manager asked for (a RetryInfo detail on
// its refusal: the managers admit session set-ups at the rate they can
// take, and tell the others when to come back). When a manager goes,
// thousands of nodes notice at once; spread out, they arrive at a rate the
// next leader can take, instead of knocking together and again every
// second.
//
// The session is one type, Session, which the agent runs and which
// curator-bench runs for each simulated node: every figure the bench
// measures is this code's behaviour.

// errNoAnswer ends a session whose heartbeat went unanswered.
var errNoAnswer = errors.New("no answer to a heartbeat in time")

// ErrSessionMoved ends a session the leader asked to move to another manager
// (HeartbeatResponse.move_within_ms): the leader serves sessions itself
// only while no other manager can. The manager is then tried last for
// moveAvoid: the node comes back to it only when no other takes its
// session, and then stays.
var ErrSessionMoved = errors.New("moving the session off the leader to another manager, as it asked")

// moveAvoid is how long a manager that asked a node to move is tried last.
const moveAvoid = 10 * time.Minute

// answerTimeout is how long a heartbeat's answer may take.
func answerTimeout(interval time.Duration) time.Duration {
	return max(2*interval, 400*time.Millisecond)
}

// DefaultSessionInterval is the heartbeat interval a session starts with
// when its config names none (the leader's first answer may set another).
const DefaultSessionInterval = time.Second

// SessionConfig is what a session with the leader needs.
type SessionConfig struct {
	// TLS is the node's client TLS configuration: its certificate and the
	// cluster's CA (pki.ClientTLS or pki.ClientTLSFrom). A reconnection
	// resumes the TLS session, with any manager (transport.SharedSessions).
	TLS *tls.Config
	// Version is the node's version, sent with every heartbeat.
	Version string
	// Interval is the heartbeat interval to start with
	// (DefaultSessionInterval if 0).
	Interval time.Duration
	// Managers returns the managers' addresses as last known.
	Managers func() []string
	// OnWatch is called with the node's record and the manager list as
	// the leader's answers carry them: in the session's first answer, then
	// as either changes.
	OnWatch func(ctx context.Context, resp *pb.WatchNodeResponse)
	// OnEnd is called when a session ends, with the manager it went
	// through and why (never for the end of Run's ctx).
	OnEnd func(ctx context.Context, manager string, err error)
	// OnStart, if set, is called as each session starts.
	OnStart func()
	// OnSent, if set, is called after each heartbeat is sent.
	OnSent func(seq uint64, at time.Time)
	// OnAnswer, if set, is called with each answer of the leader (seq 0
	// answers the stream's opening, or pushes a change).
	OnAnswer func(resp *pb.HeartbeatResponse, at time.Time)
	// OnAnswered, if set, is called with how long each heartbeat waited
	// for its answer.
	OnAnswered func(took time.Duration)
	// OnLogs, if set, is called with each request for the node's logs a
	// push carries (it must not block: the session's reader waits).
	OnLogs func(req *pb.LogsRequest)
	// DialOptions are added to the options of each manager's connection.
	DialOptions []grpc.DialOption
	// First, if not nil, is the node's join's connection, bound to the
	// node (Registration.Conn): the first session runs on it, and the
	// session owns it from NewSession on (it is closed when that session
	// ends, as any other).
	First *JoinConn
}

// Session keeps a node's session with the leader, through one manager
// after another.
type Session struct {
	cfg   SessionConfig
	conns *managerConns
}

// NewSession returns a session; Run runs it, Close releases its
// connections.
func NewSession(cfg SessionConfig) (s *Session, err error) {
	defer func() {
		if err != nil {
			cfg.First.Close()
		}
	}()
	if cfg.TLS == nil {
		return nil, errors.New("session: no TLS configuration")
	}
	if cfg.Managers == nil {
		return nil, errors.New("session: no manager list")
	}
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("session: interval %s: want 0 (the default) or more", cfg.Interval)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultSessionInterval
	}
	mc := &managerConns{
		creds: transport.SharedSessions(cfg.TLS), opts: cfg.DialOptions,
		conns: map[string]*grpc.ClientConn{}, failed: map[string]managerFailure{}, avoid: map[string]time.Time{},
		// Every agent is handed the managers in the same order: each
		// starts at a manager of its own, so sessions spread over them.
		next: rand.IntN(1 << 20),
	}
	if f := cfg.First; f != nil {
		// The join's manager first, on the join's connection: no
		// handshake of the session's own.
		mc.conns[f.Manager] = f.conn
		mc.first = f.Manager
		if i := slices.Index(cfg.Managers(), f.Manager); i >= 0 {
			mc.next = i
		}
		cfg.First = nil
	}
	return &Session{cfg: cfg, conns: mc}, nil
}

// Close closes the connections to the managers.
func (s *Session) Close() { s.conns.close() }

// managerConns keeps one connection per manager address, so a session
// picks exactly the manager it means.
type managerConns struct {
	creds credentials.TransportCredentials
	opts  []grpc.DialOption
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	// failed is how each manager failed this node last: when, and how
	// many times in a row.
	failed map[string]managerFailure
	// avoid is until when each manager that asked this node to move is
	// tried last (ErrSessionMoved).
	avoid map[string]time.Time
	// next rotates the first manager tried, spreading nodes over managers.
	next int
	// first is the manager whose connection is the join's, while it is
	// kept (SessionConfig.First): it calls as the node only until the
	// node's first certificate expires, so it serves one session, and a
	// session after it, even one coming back, dials anew.
	first string
}

func (mc *managerConns) conn(addr string) (*grpc.ClientConn, error) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if c, ok := mc.conns[addr]; ok {
		return c, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("manager address %q: %w", addr, err)
	}
	// Certificates name managers by IP: check the one dialled.
	opts := append(transport.DialOptions(mc.creds), grpc.WithAuthority(host))
	c, err := grpc.NewClient(addr, append(opts, mc.opts...)...)
	if err != nil {
		return nil, err
	}
	mc.conns[addr] = c
	return c, nil
}

// managerFailure is a manager's failures in a row, as one node saw them:
// sessions through it that ended before the leader answered, and
// connections to it that failed during a pick.
type managerFailure struct {
	last  time.Time
	inRow int
}

// Staleness: a manager that failed is tried after the others for
// staleAfterFailure, twice as long with each failure in a row, up to
// maxStale. A manager that is gone (killed, its machine dead) stays
// listed until the reaper removes it; without the growing window every
// node of a fleet would dial it again every few seconds for as long,
// thousands of refused dials a second that cost the nodes' hosts what a
// failover needs.
const (
	staleAfterFailure = 5 * time.Second
	maxStale          = time.Minute
)

// staleFor is how long a manager that failed n times in a row is tried
// last.
func staleFor(n int) time.Duration {
	d := staleAfterFailure
	for i := 1; i < n && d < maxStale; i++ {
		d *= 2
	}
	return min(d, maxStale)
}

// order returns the managers to try: rotated, and those that failed
// recently (see staleFor) last.
func (mc *managerConns) order(mgrs []string, now time.Time) []string {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if len(mgrs) == 0 {
		return nil
	}
	start := mc.next % len(mgrs)
	mc.next++
	rotated := append(slices.Clone(mgrs[start:]), mgrs[:start]...)
	var fresh, stale, avoided []string
	for _, m := range rotated {
		if f, ok := mc.failed[m]; ok && now.Sub(f.last) < staleFor(f.inRow) {
			stale = append(stale, m)
		} else if now.Before(mc.avoid[m]) {
			avoided = append(avoided, m)
		} else {
			fresh = append(fresh, m)
		}
	}
	return append(append(fresh, stale...), avoided...)
}

// avoiding says whether addr asked this node to move less than moveAvoid
// before now: a session through it now is one no other manager took.
func (mc *managerConns) avoiding(addr string, now time.Time) bool {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return now.Before(mc.avoid[addr])
}

// moved notes that the node moved its session off addr at now.
func (mc *managerConns) moved(addr string, now time.Time) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	mc.avoid[addr] = now.Add(moveAvoid)
}

// pick returns the manager to try next of candidates, in their order of
// preference: the first whose connection is up, or, if none is, the first
// to come up within wait (the first choice is dialled at once, the next
// as soon as every one dialled so far failed, and all the others a
// quarter of wait later, so a manager that cannot be reached, its packets
// dropped, costs a quarter of wait, not all of it: a node cut off from
// its manager and the next one gets to a third in time; a manager that
// refuses at once costs nothing, and the ones after it in the order, the
// managers that failed this node lately, are not dialled). Connections
// dialled for the pick and not picked are closed again: a node keeps one
// connection. A connection that failed counts against its manager (see
// staleFor). With none up after wait, or every one dialled failed once,
// the first: a failed connection is not left to dial again on gRPC's own
// schedule (within a second, for the whole wait), which in a fleet that
// lost a manager multiplied the handshakes the others had to refuse; the
// session's own backoff says when to try again.
func (mc *managerConns) pick(ctx context.Context, candidates []string, wait time.Duration) string {
	if len(candidates) == 1 {
		return candidates[0]
	}
	conns := make([]*grpc.ClientConn, len(candidates))
	wasUp := make([]bool, len(candidates))
	// Each dialled connection's watcher says when it is up; none polls.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	up := make(chan int, len(candidates))
	failed := make(chan int, len(candidates))
	dial := func(i int) {
		c, err := mc.conn(candidates[i])
		if err != nil {
			failed <- i
			return
		}
		conns[i] = c
		wasUp[i] = c.GetState() == connectivity.Ready
		c.Connect()
		go func() {
			for {
				switch st := c.GetState(); st {
				case connectivity.Ready:
					up <- i
					return
				case connectivity.TransientFailure:
					failed <- i
					return
				default:
					if st == connectivity.Shutdown || !c.WaitForStateChange(wctx, st) {
						return
					}
				}
			}
		}()
	}
	dialled, failures := 1, 0
	failedAt := make([]bool, len(candidates))
	dialRest := func() {
		for ; dialled < len(candidates); dialled++ {
			dial(dialled)
		}
	}
	// The first choice has a head start of a quarter of wait: when all
	// managers are up but slow (a wave of reconnections), a node does
	// not add a second handshake to the wave.
	dial(0)
	chosen := 0
	head := time.NewTimer(wait / 4)
	defer head.Stop()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
search:
	for {
		select {
		case i := <-up:
			chosen = i
			break search
		case i := <-failed:
			failures++
			failedAt[i] = true
			if failures < dialled {
				continue
			}
			if dialled == len(candidates) {
				break search
			}
			dial(dialled)
			dialled++
		case <-head.C:
			dialRest()
		case <-deadline.C:
			break search
		case <-ctx.Done():
			break search
		}
	}
	stop()
	now := time.Now()
	for i, c := range conns {
		if i == chosen {
			continue
		}
		if failedAt[i] {
			mc.noteFailure(candidates[i], now)
		}
		if c != nil && !wasUp[i] {
			mc.drop(candidates[i], c)
		}
	}
	return candidates[chosen]
}

// drop closes the connection c to addr, if it is still the one kept.
func (mc *managerConns) drop(addr string, c *grpc.ClientConn) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.conns[addr] == c {
		delete(mc.conns, addr)
		c.Close()
	}
}

// close1 closes the connection to addr, if there is one.
func (mc *managerConns) close1(addr string) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if c, ok := mc.conns[addr]; ok {
		c.Close()
		delete(mc.conns, addr)
	}
	if addr == mc.first {
		mc.first = ""
	}
}

// ended closes the join's connection once a session through it ended.
func (mc *managerConns) ended(addr string) {
	mc.mu.Lock()
	first := addr == mc.first
	mc.mu.Unlock()
	if first {
		mc.close1(addr)
	}
}

// noteFailure counts a failure of addr at t, one more in a row.
func (mc *managerConns) noteFailure(addr string, t time.Time) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	mc.failed[addr] = managerFailure{last: t, inRow: mc.failed[addr].inRow + 1}
}

// noteEnd notes the end at t of a session through addr: a failure, the
// first in a row if the leader had answered it (up).
func (mc *managerConns) noteEnd(addr string, t time.Time, up bool) {
	if up {
		mc.mu.Lock()
		delete(mc.failed, addr)
		mc.mu.Unlock()
	}
	mc.noteFailure(addr, t)
}

// retain closes the connections of managers no longer listed.
func (mc *managerConns) retain(mgrs []string) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	for addr, c := range mc.conns {
		if !slices.Contains(mgrs, addr) {
			c.Close()
			delete(mc.conns, addr)
			delete(mc.failed, addr)
			delete(mc.avoid, addr)
			if addr == mc.first {
				mc.first = ""
			}
		}
	}
}

func (mc *managerConns) close() {
	mc.retain(nil)
}

// Run keeps a session with the leader, through one manager after another,
// until ctx ends.
func (s *Session) Run(ctx context.Context) error {
	// failures counts the sessions in a row that ended before the leader
	// answered them; it sets how far apart the attempts spread.
	failures := 0
	// comeBack is the manager this node is coming back to, as it asked.
	comeBack := ""
	for {
		mgrs := s.cfg.Managers()
		s.conns.retain(mgrs)
		order := s.conns.order(mgrs, time.Now())
		if len(order) == 0 {
			// No manager known: wait as after a failure, for the list.
			failures++
			if err := supervisor.Sleep(ctx, reconnectDelay(failures, s.cfg.Interval, 0, rand.Float64())); err != nil {
				return err
			}
		}
		for len(order) > 0 {
			m := s.conns.pick(ctx, order, answerTimeout(s.cfg.Interval))
			order = slices.DeleteFunc(order, func(x string) bool { return x == m })
			up, err := s.session(ctx, m)
			s.conns.ended(m)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			hint := retryHint(err)
			if errors.Is(err, ErrSessionMoved) {
				// Not a failure: the next manager at once, this one
				// last for a while.
				comeBack = ""
				s.conns.moved(m, time.Now())
				s.conns.close1(m)
				if s.cfg.OnEnd != nil {
					s.cfg.OnEnd(ctx, m, err)
				}
				failures = 0
				if err := supervisor.Sleep(ctx, minReconnectDelay); err != nil {
					return err
				}
				continue
			}
			if !up && hint > 0 && m != comeBack {
				// The manager answered with a time to come back (its
				// admission handed this node a slot, or it knows no
				// leader yet): come back to it, on the connection
				// already up, once; another manager would cost a
				// handshake and take the node outside its slots.
				comeBack = m
				order = slices.Insert(order, 0, m)
			} else {
				comeBack = ""
				s.conns.noteEnd(m, time.Now(), up)
				// Close the connection rather than have it redial a
				// dead manager in the background (a socket and a
				// goroutine each, for every node of a fleet when a
				// manager dies): the next attempt through it dials
				// again, and resumes TLS.
				s.conns.close1(m)
			}
			if s.cfg.OnEnd != nil {
				s.cfg.OnEnd(ctx, m, err)
			}
			if up {
				failures = 0
			} else {
				failures++
			}
			if err := supervisor.Sleep(ctx, reconnectDelay(failures, s.cfg.Interval, hint, rand.Float64())); err != nil {
				return err
			}
		}
	}
}

// session runs the heartbeat stream through manager addr until it ends.
// up says whether the leader answered.
func (s *Session) session(ctx context.Context, addr string) (up bool, err error) {
	conn, err := s.conns.conn(addr)
	if err != nil {
		return false, err
	}
	if s.cfg.OnStart != nil {
		s.cfg.OnStart()
	}
	return s.heartbeat(ctx, pb.NewCuratorClient(conn), !s.conns.avoiding(addr, time.Now()))
}

// heartbeat sends one heartbeat per interval and ends the stream when an
// answer is late. up says whether the leader answered. mayMove says
// whether the node moves when the leader asks it to (not when it came
// back to a manager that asked before: no other took its session).
func (s *Session) heartbeat(ctx context.Context, cli pb.CuratorClient, mayMove bool) (up bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	interval := s.cfg.Interval
	// The stream must open and answer within the bound too.
	opened := time.AfterFunc(answerTimeout(interval), cancel)
	stream, err := cli.Heartbeat(ctx)
	if err != nil {
		return false, err
	}
	var seq uint64
	if err := stream.Send(&pb.HeartbeatRequest{Version: s.cfg.Version, Seq: seq}); err != nil {
		return false, err
	}
	first, err := stream.Recv()
	if !opened.Stop() {
		return false, fmt.Errorf("%w: the stream did not open within %s", errNoAnswer, answerTimeout(interval))
	}
	if err != nil {
		return false, err
	}
	if s.cfg.OnAnswer != nil {
		s.cfg.OnAnswer(first, time.Now())
	}
	s.watched(ctx, first)
	if first.IntervalMs > 0 {
		interval = time.Duration(first.IntervalMs) * time.Millisecond
	}
	// move fires when the node leaves, at a moment of its own within the
	// window the leader gave.
	var move <-chan time.Time
	asked := func(resp *pb.HeartbeatResponse) {
		if mayMove && move == nil && resp.MoveWithinMs > 0 {
			within := time.Duration(resp.MoveWithinMs) * time.Millisecond
			move = time.After(time.Duration(rand.Float64() * float64(within)))
		}
	}
	asked(first)
	answers := make(chan *pb.HeartbeatResponse, 1)
	recvErr := make(chan error, 1)
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			s.watched(ctx, resp)
			select {
			case answers <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	// sent holds when each unanswered heartbeat went; answers come in
	// order, and the oldest unanswered one sets the deadline.
	sent := map[uint64]time.Time{}
	var acked uint64
	deadline := time.NewTimer(time.Hour)
	deadline.Stop()
	defer deadline.Stop()
	rearm := func() {
		deadline.Stop()
		if t, ok := sent[acked+1]; ok {
			deadline.Reset(time.Until(t.Add(answerTimeout(interval))))
		}
	}
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case err := <-recvErr:
			return true, err
		case <-move:
			return true, ErrSessionMoved
		case resp := <-answers:
			if s.cfg.OnAnswer != nil {
				s.cfg.OnAnswer(resp, time.Now())
			}
			asked(resp)
			for acked < resp.Seq {
				acked++
				if t, ok := sent[acked]; ok && s.cfg.OnAnswered != nil {
					s.cfg.OnAnswered(time.Since(t))
				}
				delete(sent, acked)
			}
			rearm()
		case <-deadline.C:
			if t, ok := sent[acked+1]; ok {
				return true, fmt.Errorf("%w: heartbeat %d unanswered after %s", errNoAnswer, acked+1, time.Since(t).Round(time.Millisecond))
			}
		case <-tick.C:
			seq++
			now := time.Now()
			sent[seq] = now
			if err := stream.Send(&pb.HeartbeatRequest{Version: s.cfg.Version, Seq: seq}); err != nil {
				return true, err
			}
			if s.cfg.OnSent != nil {
				s.cfg.OnSent(seq, now)
			}
			if seq == acked+1 {
				rearm()
			}
		}
	}
}

// watched hands what an answer carries of the node's record and the
// manager list to OnWatch, and a request for the node's logs to OnLogs.
func (s *Session) watched(ctx context.Context, resp *pb.HeartbeatResponse) {
	if resp.Watch != nil && s.cfg.OnWatch != nil {
		s.cfg.OnWatch(ctx, resp.Watch)
	}
	if resp.Logs != nil && s.cfg.OnLogs != nil {
		s.cfg.OnLogs(resp.Logs)
	}
}

// runSession is the agent's session runnable.
func (a *Agent) runSession(ctx context.Context) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	return a.session.Run(ctx)
}
