package consensus

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestStatusDuringRemovalKeepsTheProcess: etcd (v3.7.3, etcd-io/etcd#21966)
// panics when a Maintenance.Status call reaches a member while its own
// removal is being applied ("failed to find local ID in cluster members"),
// and with etcd embedded that panic ended the whole agent: CI saw a demoted
// manager's agent die that way, Status being what every manager's quorum
// check asks each member. The member is removed while Status calls hammer
// it over one connection; the process lives (a panic here ends the test
// binary) and the member's Run ends with ErrRemoved as it should.
func TestStatusDuringRemovalKeepsTheProcess(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	for round := range 3 {
		nodes := p.newCluster(t, 3)
		cli := p.client(t, nodes...)
		leader := leaderNode(t, cli, nodes)
		var victim *testNode
		for _, n := range nodes {
			if n != leader {
				victim = n
				break
			}
		}
		hammer := p.client(t, victim)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for ctx.Err() == nil {
					sctx, scancel := context.WithTimeout(ctx, time.Second)
					_, _ = hammer.Status(sctx, victim.clientURL())
					scancel()
				}
			})
		}
		time.Sleep(50 * time.Millisecond)
		rctx, rcancel := context.WithTimeout(context.Background(), testTimeout)
		err := RemoveMember(rctx, p.client(t, leader), victim.svc.Status().MemberID)
		rcancel()
		if err != nil {
			cancel()
			wg.Wait()
			t.Fatal(err)
		}
		err = victim.wait(testTimeout)
		cancel()
		wg.Wait()
		if !errors.Is(err, ErrRemoved) {
			t.Fatalf("round %d: Run of a member removed under Status calls: %v, want ErrRemoved", round, err)
		}
	}
}

// TestSurvivesStopPanic: a call whose handler panics while this member's
// server is stopping (etcd's Status reading a backend the stop closed)
// is answered Unavailable, where the panic took the agent's process with
// it; the same panic while the server runs goes on, as etcd's own.
func TestSurvivesStopPanic(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	n := p.newCluster(t, 1)[0]
	n.svc.mu.Lock()
	srv := n.svc.cur.etcd.Server
	n.svc.mu.Unlock()
	guard := &stoppingServer{}
	guard.server.Store(srv)
	intercept := survivesRemoval(guard)
	panics := func(context.Context, any) (any, error) {
		panic("runtime error: invalid memory address or nil pointer dereference")
	}
	call := func() (panicked any, err error) {
		defer func() { panicked = recover() }()
		_, err = intercept(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/etcdserverpb.Maintenance/Status"}, panics)
		return nil, err
	}
	if panicked, err := call(); panicked == nil {
		t.Errorf("a panic while the server runs answered %v, want the panic to go on", err)
	}
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
	if panicked, err := call(); panicked != nil || status.Code(err) != codes.Unavailable {
		t.Errorf("a panic once the server stops: %v (panicked: %v), want Unavailable", err, panicked)
	}
}
