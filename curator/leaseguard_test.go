package curator

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/pki"
)

// silentBridge forwards TCP connections to target; while blackholed it
// holds every byte both ways, as a network that loses packets does (TCP
// retransmits them once it heals): no connection is closed, nothing is
// refused, nothing arrives.
type silentBridge struct {
	ln        net.Listener
	target    string
	blackhole atomic.Bool
	wg        sync.WaitGroup
	mu        sync.Mutex
	conns     []net.Conn
}

func newSilentBridge(t *testing.T, ip, target string) *silentBridge {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	b := &silentBridge{ln: ln, target: target}
	b.wg.Go(b.serve)
	t.Cleanup(b.close)
	return b
}

func (b *silentBridge) addr() string { return b.ln.Addr().String() }

func (b *silentBridge) serve() {
	for {
		in, err := b.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", b.target)
		if err != nil {
			in.Close()
			continue
		}
		b.mu.Lock()
		b.conns = append(b.conns, in, out)
		b.mu.Unlock()
		b.wg.Go(func() { b.pipe(out, in) })
		b.wg.Go(func() { b.pipe(in, out) })
	}
}

func (b *silentBridge) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for b.blackhole.Load() {
			time.Sleep(5 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			return
		}
	}
}

func (b *silentBridge) close() {
	b.ln.Close()
	b.mu.Lock()
	for _, c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// TestLeaseGuardStopsBeforeTheLeaseExpires: a leader whose etcd goes
// silent gives up its leadership while etcd still holds its lease, so no
// other curator can have been elected while it still answers.
func TestLeaseGuardStopsBeforeTheLeaseExpires(t *testing.T) {
	c := newTestCluster(t)
	host, _, _ := net.SplitHostPort(c.first.address)
	target := c.etcdURL[len("https://"):]
	bridge := newSilentBridge(t, host, target)
	cli, err := consensus.NewClient([]string{"https://" + bridge.addr()}, c.tlsCert(c.etcdCA, "client", pki.RoleConsensus), c.etcdCA.Cert)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

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
	for wr := range c.cli.Watch(wctx, "lease-probe", clientv3.WithCreatedNotify()) {
		if wr.Created {
			break
		}
	}
	go func() {
		for wr := range c.cli.Watch(wctx, "lease-probe") {
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					expired <- time.Now()
					return
				}
			}
		}
	}()

	g := newLeaseGuard(cli, lease.ID, ttl, time.Now, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.run(ctx) }()
	defer func() { cancel(); <-done }()

	// Renewed all along: held for longer than a TTL.
	deadline := time.Now().Add(3 * ttl / 2)
	for time.Now().Before(deadline) {
		if !g.held() {
			t.Fatalf("lease guard gave up a lease it renews: %v", g.why())
		}
		time.Sleep(50 * time.Millisecond)
	}

	streams := g.servingDone()
	bridge.blackhole.Store(true)
	silent := time.Now()
	var stopped, streamsEnded time.Time
	for deadline := time.Now().Add(2 * ttl); stopped.IsZero(); {
		if !g.held() {
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
	case <-g.lost():
		t.Fatalf("silence alone lost the lease: %v", g.why())
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
	bridge.blackhole.Store(false)
	select {
	case <-g.lost():
	case <-time.After(2 * ttl):
		t.Fatal("the guard did not learn that its lease expired")
	}
	if g.held() {
		t.Error("held() after the lease was lost")
	}
}

// TestLeaseGuardServesAgainAfterAShortSilence: a silence long enough to
// put the leader in doubt but shorter than the lease (etcd electing a
// leader of its own, say) ends the doubt, not the leadership.
func TestLeaseGuardServesAgainAfterAShortSilence(t *testing.T) {
	c := newTestCluster(t)
	host, _, _ := net.SplitHostPort(c.first.address)
	bridge := newSilentBridge(t, host, c.etcdURL[len("https://"):])
	cli, err := consensus.NewClient([]string{"https://" + bridge.addr()}, c.tlsCert(c.etcdCA, "client", pki.RoleConsensus), c.etcdCA.Cert)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const ttl = 4 * time.Second
	lease, err := cli.Grant(callCtx(t), int64(ttl/time.Second))
	if err != nil {
		t.Fatal(err)
	}
	g := newLeaseGuard(cli, lease.ID, ttl, time.Now, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the guard serves", g.held)
	time.Sleep(ttl / 2)

	streams := g.servingDone()
	bridge.blackhole.Store(true)
	waitFor(t, "the guard is in doubt", func() bool { return !g.held() })
	bridge.blackhole.Store(false)
	healed := time.Now()
	waitFor(t, "the guard serves again", g.held)
	if r := g.resumedAt(); r.Before(healed) {
		t.Errorf("resumedAt = %v, before the network healed (%v)", r, healed)
	}
	select {
	case <-g.lost():
		t.Fatalf("a short silence lost the lease: %v", g.why())
	case <-streams:
		t.Error("a doubt shorter than the margin ended the nodes' streams")
	default:
	}
	t.Logf("served again %v after the network healed", time.Since(healed).Round(time.Millisecond))
}

// TestLeaseGuardLosesARevokedLease: a lease revoked (an operator, or
// expiry seen by etcd) is given up at the next renewal.
func TestLeaseGuardLosesARevokedLease(t *testing.T) {
	c := newTestCluster(t)
	const ttl = 2 * time.Second
	lease, err := c.cli.Grant(callCtx(t), int64(ttl/time.Second))
	if err != nil {
		t.Fatal(err)
	}
	g := newLeaseGuard(c.cli, lease.ID, ttl, time.Now, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.run(ctx) }()
	defer func() { cancel(); <-done }()
	if _, err := c.cli.Revoke(callCtx(t), lease.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.lost():
	case <-time.After(ttl):
		t.Fatal("lease guard holds a revoked lease")
	}
}
