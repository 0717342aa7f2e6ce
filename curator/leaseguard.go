package curator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leaseGuard keeps the leader honest about its lease. etcd expires the
// election lease TTL after the last renewal it received; a leader cut off
// from etcd's quorum (or frozen) cannot tell when that happens, and another
// curator takes over once it has. So the leader renews the lease itself,
// often, and counts from the moment it *sent* each renewal that succeeded:
// the lease surely lives until then + TTL. Until a margin before that
// moment the leadership is held; past it the leader stops answering and
// acting, before any other curator can have been elected. The fence on
// every write stays the safety net; this closes the window in which a
// deposed leader would still answer reads and streams.
type leaseGuard struct {
	cli   *clientv3.Client
	lease clientv3.LeaseID
	ttl   time.Duration
	now   func() time.Time

	// until is when the lease may next be in doubt, in Unix nanoseconds.
	until atomic.Int64

	once   sync.Once
	lostCh chan struct{}
	reason error
}

func newLeaseGuard(cli *clientv3.Client, lease clientv3.LeaseID, ttl time.Duration, now func() time.Time) *leaseGuard {
	g := &leaseGuard{cli: cli, lease: lease, ttl: ttl, now: now, lostCh: make(chan struct{})}
	// The campaign has just written with this lease, and the session
	// renews it every third of the TTL: it lives at least a while yet.
	// The first renewal comes at once and sets the real deadline.
	g.until.Store(now().Add(ttl / 4).UnixNano())
	return g
}

// leaseMargin is how long before the lease can expire the leader stops.
// It covers the time a renewal spends on the way, and clock rates.
func leaseMargin(ttl time.Duration) time.Duration { return ttl / 4 }

// held says whether the lease is surely still ours.
func (g *leaseGuard) held() bool {
	if g == nil {
		return true
	}
	select {
	case <-g.lostCh:
		return false
	default:
	}
	return g.now().UnixNano() < g.until.Load()
}

// lost is closed once the lease is in doubt.
func (g *leaseGuard) lost() <-chan struct{} { return g.lostCh }

// why says why the lease was given up.
func (g *leaseGuard) why() error { return g.reason }

func (g *leaseGuard) lose(err error) {
	g.once.Do(func() {
		g.reason = err
		close(g.lostCh)
	})
}

// run renews the lease every quarter TTL until ctx ends or the lease is in
// doubt.
func (g *leaseGuard) run(ctx context.Context) {
	every := g.ttl / 4
	for {
		sent := g.now()
		// Never wait for an answer past the deadline: a leader cut off
		// must notice in time.
		timeout := min(g.ttl/3, max(time.Unix(0, g.until.Load()).Sub(sent), 10*time.Millisecond))
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
			until := sent.Add(time.Duration(resp.TTL)*time.Second - leaseMargin(g.ttl))
			if until.UnixNano() > g.until.Load() {
				g.until.Store(until.UnixNano())
			}
		}
		until := time.Unix(0, g.until.Load())
		if !g.now().Before(until) {
			g.lose(fmt.Errorf("no renewal of the election lease succeeded since %s (last error: %v)", until.Add(leaseMargin(g.ttl)-g.ttl).Format(time.RFC3339Nano), err))
			return
		}
		// Renew again after a quarter TTL, or check at the deadline if
		// that comes first.
		wait := min(every-g.now().Sub(sent), until.Sub(g.now()))
		t := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
