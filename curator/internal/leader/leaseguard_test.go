package leader

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/tests/v3/framework/integration"
	"go.uber.org/zap/zaptest"
)

// guardCluster is a three-member etcd cluster from etcd's integration
// framework whose clients reach their members through bridges that can
// blackhole every byte, as a silent network does: nothing is closed or
// refused, nothing arrives.
func guardCluster(t *testing.T) *integration.Cluster {
	t.Helper()
	integration.BeforeTest(t, integration.WithoutGoLeakDetection())
	clus := integration.NewCluster(t, &integration.ClusterConfig{Size: 3, UseBridge: true})
	t.Cleanup(func() { clus.Terminate(t) })
	return clus
}

// TestLeaseGuardStopsBeforeTheLeaseExpires: a leader whose etcd goes
// silent gives up its leadership while etcd still holds its lease, so no
// other curator can have been elected while it still answers.
func TestLeaseGuardStopsBeforeTheLeaseExpires(t *testing.T) {
	clus := guardCluster(t)
	cli, probe := clus.Client(0), clus.Client(1)
	bridge := clus.Members[0].Bridge()

	const ttl = 4 * time.Second
	lease, err := cli.Grant(callCtx(t), int64(ttl/time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// etcd deletes this key when it expires the lease: the test sees the
	// expiry from etcd's side, not the guard's.
	if _, err := cli.Put(callCtx(t), "lease-probe", "", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	expired := make(chan time.Time, 1)
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	for wr := range probe.Watch(wctx, "lease-probe", clientv3.WithCreatedNotify()) {
		if wr.Created {
			break
		}
	}
	go func() {
		for wr := range probe.Watch(wctx, "lease-probe") {
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					expired <- time.Now()
					return
				}
			}
		}
	}()

	g := NewLeaseGuard(cli, lease.ID, ttl, time.Now, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// Renewed all along: held for longer than a TTL.
	deadline := time.Now().Add(3 * ttl / 2)
	for time.Now().Before(deadline) {
		if !g.Held() {
			t.Fatalf("lease guard gave up a lease it renews: %v", g.Why())
		}
		time.Sleep(50 * time.Millisecond)
	}

	streams := g.ServingDone()
	bridge.Blackhole()
	silent := time.Now()
	var stopped, streamsEnded time.Time
	for deadline := time.Now().Add(2 * ttl); stopped.IsZero(); {
		if !g.Held() {
			stopped = time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease guard still serves %s after etcd went silent", 2*ttl)
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-streams:
		streamsEnded = time.Now()
	case <-time.After(2 * ttl):
		t.Fatalf("the nodes' streams still open %s after etcd went silent", 2*ttl)
	}
	select {
	case <-g.Lost():
		t.Fatalf("silence alone lost the lease: %v", g.Why())
	default:
	}
	var expiredAt time.Time
	select {
	case expiredAt = <-expired:
	case <-time.After(2 * ttl):
		t.Fatal("etcd never expired the lease")
	}
	// etcd looks for expired leases every 500 ms, so it expired the lease
	// at most that long before it deleted the key. The guard must have
	// stopped serving before that.
	const etcdRevokeEvery = 500 * time.Millisecond
	if !stopped.Before(expiredAt.Add(-etcdRevokeEvery)) {
		t.Errorf("the guard stopped serving %v after the silence, etcd expired the lease %v after it (± %v): two leaders could have answered",
			stopped.Sub(silent), expiredAt.Sub(silent), etcdRevokeEvery)
	}
	// The streams end once the lease may have gone, and no later than
	// etcd actually let it go.
	if streamsEnded.Before(stopped) || streamsEnded.After(expiredAt) {
		t.Errorf("streams ended %v after the silence: want after the guard stopped serving (%v) and by the lease's expiry (%v)",
			streamsEnded.Sub(silent), stopped.Sub(silent), expiredAt.Sub(silent))
	}
	t.Logf("stopped serving %v after etcd went silent, ended the streams %v after it; etcd expired the lease %v after it",
		stopped.Sub(silent).Round(time.Millisecond), streamsEnded.Sub(silent).Round(time.Millisecond), expiredAt.Sub(silent).Round(time.Millisecond))
	// The network heals: etcd says the lease is gone, and the leadership
	// ends for good.
	bridge.Unblackhole()
	select {
	case <-g.Lost():
	case <-time.After(2 * ttl):
		t.Fatal("the guard did not learn that its lease expired")
	}
	if g.Held() {
		t.Error("held() after the lease was lost")
	}
}

// TestLeaseGuardServesAgainAfterAShortSilence: a silence long enough to
// put the leader in doubt but shorter than the lease (etcd electing a
// leader of its own, say) ends the doubt, not the leadership.
func TestLeaseGuardServesAgainAfterAShortSilence(t *testing.T) {
	clus := guardCluster(t)
	cli := clus.Client(0)
	bridge := clus.Members[0].Bridge()
	const ttl = 4 * time.Second
	lease, err := cli.Grant(callCtx(t), int64(ttl/time.Second))
	if err != nil {
		t.Fatal(err)
	}
	g := NewLeaseGuard(cli, lease.ID, ttl, time.Now, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the guard serves", g.Held)
	time.Sleep(ttl / 2)

	streams := g.ServingDone()
	bridge.Blackhole()
	waitFor(t, "the guard is in doubt", func() bool { return !g.Held() })
	bridge.Unblackhole()
	healed := time.Now()
	waitFor(t, "the guard serves again", g.Held)
	if r := g.resumedAt(); r.Before(healed) {
		t.Errorf("resumedAt = %v, before the network healed (%v)", r, healed)
	}
	select {
	case <-g.Lost():
		t.Fatalf("a short silence lost the lease: %v", g.Why())
	case <-streams:
		t.Error("a doubt shorter than the margin ended the nodes' streams")
	default:
	}
	t.Logf("served again %v after the network healed", time.Since(healed).Round(time.Millisecond))
}

// TestLeaseGuardLosesARevokedLease: a lease revoked (an operator, or
// expiry seen by etcd) is given up at the next renewal.
func TestLeaseGuardLosesARevokedLease(t *testing.T) {
	cli := guardCluster(t).Client(0)
	const ttl = 2 * time.Second
	lease, err := cli.Grant(callCtx(t), int64(ttl/time.Second))
	if err != nil {
		t.Fatal(err)
	}
	g := NewLeaseGuard(cli, lease.ID, ttl, time.Now, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if _, err := cli.Revoke(callCtx(t), lease.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.Lost():
	case <-time.After(ttl):
		t.Fatal("lease guard holds a revoked lease")
	}
}
