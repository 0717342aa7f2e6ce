package curator

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/connectivity"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/supervisor"
)

// TestCrashWatchSparesRestartingServer runs a leader and a follower whose
// crash watch probes it. The leader's gRPC server fails and comes back a
// second later, inside the live process: its port refuses meanwhile, while
// its etcd client port (PORT+2, this test cluster's etcd, as on a real
// manager) still answers. The follower must not take that for a crash:
// the leader keeps its election key and leads throughout, and no lease is
// revoked.
func TestCrashWatchSparesRestartingServer(t *testing.T) {
	c := newTestCluster(t)
	lis := make(chan net.Listener, 1)
	var listens atomic.Int32
	svc, err := New(c.curatorConfig(c.first, c.cli))
	if err != nil {
		t.Fatal(err)
	}
	svc.listen = func(network, address string) (net.Listener, error) {
		if listens.Add(1) > 1 {
			time.Sleep(time.Second) // the restart takes a moment
		}
		l, err := net.Listen(network, address)
		if err == nil {
			lis <- l
		}
		return l, err
	}
	supervisor.TestHarness(t, svc.Run)
	waitFor(t, "the first curator leads", svc.IsLeader)
	key := svc.currentLeader().Lead.Key()
	admin, anon := c.dialFirst()
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	follower, _ := c.startCurator(m2, c.etcdClient())
	waitFor(t, "the follower knows the leader", func() bool {
		li := follower.fwd.knownLeader()
		return li != nil && li.id == c.first.id && li.lease != 0
	})

	// Fail the server: Serve returns, the supervisor starts it again.
	(<-lis).Close()
	refused := false
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if probe(context.Background(), c.first.address) == decide.ProbeRefused {
			refused = true
		}
		if st := svc.currentLeader(); st == nil || st.Lead.Key() != key {
			t.Fatal("the leader lost its leadership while its gRPC server restarted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !refused {
		t.Fatal("the leader's gRPC port never refused: the test did not restart the server")
	}
	if got := listens.Load(); got < 2 {
		t.Fatalf("the gRPC server listened %d times, want a restart", got)
	}
	waitFor(t, "the restarted server answers", func() bool { return probe(context.Background(), c.first.address) == decide.ProbeOpen })
	resp, err := c.cli.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the leader's election key %s: %v, %d keys: it was revoked", key, err, len(resp.Kvs))
	}
	events, err := store.EventList(context.Background(), c.cli, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Action == "revoke-dead-leader" {
			t.Errorf("the follower revoked a live leader's lease: %v", ev)
		}
	}
	if !svc.IsLeader() || follower.IsLeader() {
		t.Errorf("leader leads %v, follower leads %v", svc.IsLeader(), follower.IsLeader())
	}
}

// TestLostLeaderConnectionWakesCrashWatch: a follower's own connection to
// the leader, lost (the leader's process gone resets it at once), wakes
// the crash watch to look now instead of at its next period (here a
// minute); a watch confirming a refusal keeps its pause.
func TestLostLeaderConnectionWakesCrashWatch(t *testing.T) {
	c := newTestCluster(t)
	svc, stopLeader := c.startCurator(c.first, c.cli)
	waitFor(t, "the first curator leads", svc.IsLeader)
	admin, anon := c.dialFirst()
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	follower, err := New(c.curatorConfig(m2, c.etcdClient()))
	if err != nil {
		t.Fatal(err)
	}
	follower.crashEvery = time.Minute
	supervisor.TestHarness(t, follower.Run)
	waitFor(t, "the follower knows the leader", func() bool {
		li := follower.fwd.knownLeader()
		return li != nil && li.id == c.first.id
	})
	conn, err := follower.leaderConn(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	conn.Connect()
	waitFor(t, "the follower's connection to the leader is ready", func() bool { return conn.GetState() == connectivity.Ready })
	// The watch's first tick came before the follower knew the leader:
	// with a period of a minute, only a wake makes it look now.
	looks := follower.crashProbes.Load()

	stopped := time.Now()
	stopLeader()
	waitFor(t, "the crash watch looks again", func() bool { return follower.crashProbes.Load() > looks })
	took := time.Since(stopped)
	t.Logf("the crash watch looked %v after the leader stopped (its period: a minute)", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("the crash watch looked %v after the leader stopped: not woken by the lost connection", took)
	}

	// crashWait: a drop cuts a period short, not a confirmation's pause.
	for _, tc := range []struct {
		confirming bool
		atLeast    time.Duration
	}{{false, 0}, {true, 200 * time.Millisecond}} {
		d := make(chan struct{}, 1)
		d <- struct{}{}
		start := time.Now()
		woken, err := follower.crashWait(callCtx(t), 200*time.Millisecond, d, tc.confirming)
		if err != nil {
			t.Fatal(err)
		}
		if woken == tc.confirming {
			t.Errorf("crashWait (confirming %v) with a drop: woken %v", tc.confirming, woken)
		}
		took := time.Since(start)
		if took < tc.atLeast || (!tc.confirming && took >= 200*time.Millisecond) {
			t.Errorf("crashWait (confirming %v) with a drop took %v", tc.confirming, took)
		}
	}
}
