package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
	"github.com/curatorproject/curator/transport"
)

// The agent keeps two streams to the curator leader, a heartbeat and a
// watch of its own record, through one manager at a time (a session). The
// leader answers every heartbeat; an answer that does not come within
// answerTimeout means the session is dead whatever TCP says (a frozen or
// cut-off manager keeps its connections open), and the agent moves to the
// next manager at once. The bound is well inside the leader's down-after
// (five intervals by default), so a node that can reach any live manager
// is never marked down by a failover or a partition.

// errNoAnswer ends a session whose heartbeat went unanswered.
var errNoAnswer = errors.New("no answer to a heartbeat in time")

// answerTimeout is how long a heartbeat's answer may take.
func answerTimeout(interval time.Duration) time.Duration {
	return max(2*interval, 400*time.Millisecond)
}

// interval is the heartbeat interval the agent starts with (the leader's
// first answer may set another).
func (a *Agent) interval() time.Duration {
	if a.cfg.HeartbeatInterval > 0 {
		return a.cfg.HeartbeatInterval
	}
	return time.Second
}

// managerConns keeps one connection per manager address, so a session
// picks exactly the manager it means.
type managerConns struct {
	creds credentials.TransportCredentials
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	// failed is when a session through each manager last failed.
	failed map[string]time.Time
	// next rotates the first manager tried, spreading nodes over managers.
	next int
}

func newManagerConns(id *identity) *managerConns {
	return &managerConns{
		creds:  credentials.NewTLS(pki.ClientTLSFrom(id.certs, id.ca)),
		conns:  map[string]*grpc.ClientConn{},
		failed: map[string]time.Time{},
	}
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
	c, err := grpc.NewClient(addr, append(transport.DialOptions(mc.creds), grpc.WithAuthority(host))...)
	if err != nil {
		return nil, err
	}
	mc.conns[addr] = c
	return c, nil
}

// order returns the managers to try: rotated, and those that failed in
// the last few seconds last.
func (mc *managerConns) order(mgrs []string, now time.Time) []string {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if len(mgrs) == 0 {
		return nil
	}
	start := mc.next % len(mgrs)
	mc.next++
	rotated := append(slices.Clone(mgrs[start:]), mgrs[:start]...)
	var fresh, stale []string
	for _, m := range rotated {
		if t, ok := mc.failed[m]; ok && now.Sub(t) < 5*time.Second {
			stale = append(stale, m)
		} else {
			fresh = append(fresh, m)
		}
	}
	return append(fresh, stale...)
}

func (mc *managerConns) noteFailure(addr string, t time.Time) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	mc.failed[addr] = t
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
		}
	}
}

func (mc *managerConns) close() {
	mc.retain(nil)
}

// runSession keeps a session with the leader, through one manager after
// another.
func (a *Agent) runSession(ctx context.Context) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	lg := supervisor.Logger(ctx)
	retry := newRetry(100*time.Millisecond, time.Second)
	for {
		a.mu.Lock()
		mgrs := slices.Clone(a.managers)
		a.mu.Unlock()
		a.sessions.retain(mgrs)
		for _, m := range a.sessions.order(mgrs, time.Now()) {
			started := time.Now()
			err := a.session(ctx, m)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			a.sessions.noteFailure(m, time.Now())
			a.logStreamError(lg, "session with "+m, err)
			if lived := time.Since(started); lived > 5*time.Second {
				// It lived a while: this is a fresh failure, not a
				// round of refusals.
				retry.reset()
			}
			if time.Since(started) > answerTimeout(a.interval()) {
				// A session that was up ended: when a manager goes, all
				// its nodes notice at once. Spread them over half an
				// interval rather than have them all knock together.
				if err := supervisor.Sleep(ctx, rand.N(a.interval()/2+1)); err != nil {
					return err
				}
			}
		}
		if err := retry.wait(ctx); err != nil {
			return err
		}
	}
}

// session runs the heartbeat and the watch through manager addr until
// either ends; then both end.
func (a *Agent) session(ctx context.Context, addr string) error {
	conn, err := a.sessions.conn(addr)
	if err != nil {
		return err
	}
	cli := pb.NewCuratorClient(conn)
	a.metrics.AgentSessions.Inc()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { errc <- a.heartbeat(ctx, cli) })
	wg.Go(func() { errc <- a.watch(ctx, cli) })
	return <-errc
}

// heartbeat sends one heartbeat per interval and ends the stream when an
// answer is late.
func (a *Agent) heartbeat(ctx context.Context, cli pb.CuratorClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	interval := a.interval()
	// The stream must open and answer within the bound too.
	opened := time.AfterFunc(answerTimeout(interval), cancel)
	stream, err := cli.Heartbeat(ctx)
	if err != nil {
		return err
	}
	var seq uint64
	if err := stream.Send(&pb.HeartbeatRequest{Version: a.cfg.Version, Seq: seq}); err != nil {
		return err
	}
	first, err := stream.Recv()
	if !opened.Stop() {
		return fmt.Errorf("%w: the stream did not open within %s", errNoAnswer, answerTimeout(interval))
	}
	if err != nil {
		return err
	}
	if first.IntervalMs > 0 {
		interval = time.Duration(first.IntervalMs) * time.Millisecond
	}
	answers := make(chan *pb.HeartbeatResponse, 1)
	recvErr := make(chan error, 1)
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
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
	var answered uint64
	deadline := time.NewTimer(time.Hour)
	deadline.Stop()
	defer deadline.Stop()
	rearm := func() {
		deadline.Stop()
		if t, ok := sent[answered+1]; ok {
			deadline.Reset(time.Until(t.Add(answerTimeout(interval))))
		}
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-recvErr:
			return err
		case resp := <-answers:
			for answered < resp.Seq {
				answered++
				delete(sent, answered)
			}
			rearm()
		case <-deadline.C:
			if t, ok := sent[answered+1]; ok {
				return fmt.Errorf("%w: heartbeat %d unanswered after %s", errNoAnswer, answered+1, time.Since(t).Round(time.Millisecond))
			}
		case <-tick.C:
			seq++
			sent[seq] = time.Now()
			if err := stream.Send(&pb.HeartbeatRequest{Version: a.cfg.Version, Seq: seq}); err != nil {
				return err
			}
			if seq == answered+1 {
				rearm()
			}
		}
	}
}

// watch follows the node's own record and the manager list.
func (a *Agent) watch(ctx context.Context, cli pb.CuratorClient) error {
	stream, err := cli.WatchNode(ctx, &pb.WatchNodeRequest{})
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		a.setManagers(ctx, resp.Managers)
		if resp.Node != nil {
			a.desired.set(resp.Node)
		}
	}
}
