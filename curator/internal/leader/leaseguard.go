package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// leaseGuard keeps the leader honest about its lease. etcd expires the
// election lease TTL after the last renewal it received; a leader cut off
// from etcd's quorum (or frozen) cannot tell when that happens, and another
// curator takes over once it has. So the leader renews the lease itself,
// often, and counts from the moment it *sent* each renewal that succeeded:
// the lease surely lives until then + TTL. A margin before that moment the
// leader is in doubt: it stops acting and answering (calls are refused,
// loops idle, IsLeader says no), before any other curator can have been
// elected. At that moment itself (the lease may now be gone) it ends its
// nodes' streams, so that they move to whoever leads next.
//
// Doubt is not loss. While etcd elects a leader of its own, or while the
// machine is too busy for a renewal to come back in time, no renewal
// succeeds, but no lease has expired (a new etcd leader even extends every
// lease by a full TTL): once a renewal succeeds again the leadership is
// exactly what it was (same key, same fence) and the leader serves again,
// with its nodes' streams still open if the doubt was short. Only etcd
// saying the lease is gone, or the election key's deletion, ends a
// leadership. The fence on every write stays the safety net.
type leaseGuard struct {
	cli   *clientv3.Client
	lease clientv3.LeaseID
	ttl   time.Duration
	now   func() time.Time
	lg    *zap.Logger

	mu sync.Mutex
	// until is when the lease may next be in doubt.
	until time.Time
	// streams is closed when the lease may have expired (until +
	// margin, no renewal since): node streams end. A new one is made when
	// a renewal succeeds.
	streams  chan struct{}
	stale    bool
	inDoubt  bool
	resumed  time.Time
	doubtErr error

	once   sync.Once
	lostCh chan struct{}
	reason error
}

func NewLeaseGuard(cli *clientv3.Client, lease clientv3.LeaseID, ttl time.Duration, now func() time.Time, lg *zap.Logger) *leaseGuard {
	// The campaign has just written with this lease, and the session
	// renews it every third of the TTL: it lives at least a while yet.
	// The first renewal comes at once and sets the real deadline.
	return &leaseGuard{cli: cli, lease: lease, ttl: ttl, now: now, lg: lg, until: now().Add(ttl / 4),
		streams: make(chan struct{}), lostCh: make(chan struct{})}
}

// leaseMargin is how long before the lease can expire the leader stops
// serving. It covers the time a renewal spends on the way, and clock rates.
func leaseMargin(ttl time.Duration) time.Duration { return ttl / 4 }

// Held says whether the lease is surely ours right now: the leader may
// answer and act.
func (g *leaseGuard) Held() bool {
	if g == nil {
		return true
	}
	select {
	case <-g.lostCh:
		return false
	default:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.inDoubt && g.now().Before(g.until)
}

// ServingDone returns a channel closed when the lease may have expired:
// the leader's node streams must end then (at once if that time has
// passed).
func (g *leaseGuard) ServingDone() <-chan struct{} {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stale {
		return closedChan
	}
	return g.streams
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// resumedAt is when the leader last came back from doubt (zero if never):
// heartbeats sent while it did not serve went elsewhere, so it counts
// silence from then, as a new leader counts from its election.
func (g *leaseGuard) resumedAt() time.Time {
	if g == nil {
		return time.Time{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.resumed
}

// Lost is closed once the lease is gone for good.
func (g *leaseGuard) Lost() <-chan struct{} { return g.lostCh }

// Why says why the lease was given up.
func (g *leaseGuard) Why() error { return g.reason }

func (g *leaseGuard) lose(err error) {
	g.once.Do(func() {
		g.reason = err
		close(g.lostCh)
	})
}

// renewed records a renewal sent at sent that etcd granted for ttl.
func (g *leaseGuard) renewed(sent time.Time, ttl time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if until := sent.Add(ttl - leaseMargin(g.ttl)); until.After(g.until) {
		g.until = until
	}
	if g.inDoubt && g.now().Before(g.until) {
		g.inDoubt = false
		g.resumed = g.now()
		if g.stale {
			g.stale = false
			g.streams = make(chan struct{})
		}
		g.lg.Warn("the election lease is renewed again: serving as leader again")
	}
}

// checkDeadline enters doubt once the deadline has passed, and ends the
// streams once the lease may have expired; it returns when to look again.
func (g *leaseGuard) checkDeadline(lastErr error) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if !g.inDoubt && !now.Before(g.until) {
		g.inDoubt = true
		g.doubtErr = fmt.Errorf("no renewal of the election lease succeeded in time (last error: %v)", lastErr)
		g.lg.Warn("in doubt about the election lease: not acting until it is renewed", zap.Error(g.doubtErr))
	}
	expiry := g.until.Add(leaseMargin(g.ttl))
	if g.inDoubt && !g.stale && !now.Before(expiry) {
		g.stale = true
		close(g.streams)
		g.lg.Warn("the election lease may have expired: ending the nodes' streams so they move to the next leader")
	}
	if now.Before(g.until) {
		return g.until
	}
	return expiry
}

// doubt says why the leader is in doubt, or nil.
func (g *leaseGuard) doubt() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.inDoubt {
		return nil
	}
	return g.doubtErr
}

// Run renews the lease every quarter TTL until ctx ends or the lease is
// gone.
func (g *leaseGuard) Run(ctx context.Context) {
	every := g.ttl / 4
	for {
		sent := g.now()
		// Never wait for an answer past the next deadline (doubt, then
		// expiry): a leader cut off must stop in time.
		g.mu.Lock()
		next := g.until
		if !sent.Before(next) {
			next = next.Add(leaseMargin(g.ttl))
		}
		left := next.Sub(sent)
		g.mu.Unlock()
		timeout := g.ttl / 3
		if left > 0 && left < timeout {
			timeout = max(left, 10*time.Millisecond)
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := g.cli.KeepAliveOnce(rctx, g.lease)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			g.lose(errors.New("the election lease is gone"))
			return
		case err == nil && resp.TTL <= 0:
			g.lose(errors.New("the election lease expired"))
			return
		case err == nil:
			g.renewed(sent, time.Duration(resp.TTL)*time.Second)
		}
		until := g.checkDeadline(err)
		// Renew again after a quarter TTL, or look at the deadline if
		// that comes first.
		wait := every - g.now().Sub(sent)
		if g.doubt() != nil {
			// In doubt: try often, to serve again the moment etcd
			// answers (after its own election, say).
			wait = min(wait, every/5)
		}
		if d := until.Sub(g.now()); d > 0 && d < wait {
			wait = d
		}
		t := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
