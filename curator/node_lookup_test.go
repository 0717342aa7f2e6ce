package curator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/tests/v3/framework/integration"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// TestNodeLookupSharesReads: the calls a failover forwards again all at
// once, each checking the same forwarding manager's record, make one etcd
// read; the record read serves for nodeLookupTTL, then is read again; a
// caller that gives up does not fail the others; a missing node is not
// remembered.
func TestNodeLookupSharesReads(t *testing.T) {
	integration.BeforeTest(t)
	clus := integration.NewCluster(t, &integration.ClusterConfig{Size: 1})
	t.Cleanup(func() { clus.Terminate(t) })
	cli := clus.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	put, err := cli.Put(ctx, "/test/election", "leader")
	if err != nil {
		t.Fatal(err)
	}
	fence := store.NewFence(cli, "manager-1", "/test/election", put.Header.Revision, nil)
	manager := &pb.Node{Id: "manager2aaaaaaaaaaaaaaaaa", Name: "manager-2", Address: "127.0.0.2:7000", Roles: []pb.Role{pb.Role_ROLE_CONSENSUS}}
	if err := store.NodeCreate(ctx, fence, manager); err != nil {
		t.Fatal(err)
	}

	var reads atomic.Int32
	// gate, when set, holds every read until it is closed.
	var gate atomic.Pointer[chan struct{}]
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	l := newNodeLookup(func(ctx context.Context, id string) (*pb.Node, error) {
		reads.Add(1)
		if g := gate.Load(); g != nil {
			<-*g
		}
		return store.NodeLoad(ctx, cli, id)
	}, clock)

	// A failover's wave: 500 calls at once.
	var wg sync.WaitGroup
	errs := make(chan error, 500)
	for range 500 {
		wg.Go(func() {
			n, err := l.node(ctx, manager.Id)
			if err == nil && !spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
				err = errors.New("the record read has no consensus role")
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := reads.Load(); got != 1 {
		t.Errorf("500 lookups at once made %d etcd reads, want 1", got)
	}

	// A copy each: a caller that changes its record changes no one else's.
	n, err := l.node(ctx, manager.Id)
	if err != nil {
		t.Fatal(err)
	}
	n.Roles = nil
	if n, _ := l.node(ctx, manager.Id); !spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
		t.Error("a caller's change to its record reached the next caller")
	}

	// Once the read is nodeLookupTTL old, the next call reads again.
	mu.Lock()
	now = now.Add(nodeLookupTTL)
	mu.Unlock()
	if _, err := l.node(ctx, manager.Id); err != nil {
		t.Fatal(err)
	}
	if got := reads.Load(); got != 2 {
		t.Errorf("a lookup after the TTL: %d reads in all, want 2", got)
	}

	// A caller that gives up while the read it started is under way gets
	// its own error; the read goes on and serves a caller still waiting.
	mu.Lock()
	now = now.Add(nodeLookupTTL)
	mu.Unlock()
	held := make(chan struct{})
	gate.Store(&held)
	before := reads.Load()
	gone, giveUp := context.WithCancel(ctx)
	goneErr := make(chan error, 1)
	go func() {
		_, err := l.node(gone, manager.Id)
		goneErr <- err
	}()
	for reads.Load() == before {
		time.Sleep(time.Millisecond)
	}
	waiting := make(chan error, 1)
	go func() {
		n, err := l.node(ctx, manager.Id)
		if err == nil && n.Id != manager.Id {
			err = fmt.Errorf("read node %s, want %s", n.Id, manager.Id)
		}
		waiting <- err
	}()
	giveUp()
	if err := <-goneErr; !errors.Is(err, context.Canceled) {
		t.Errorf("a lookup whose caller is gone: %v, want context.Canceled", err)
	}
	gate.Store(nil)
	close(held)
	if err := <-waiting; err != nil {
		t.Errorf("a lookup beside a caller that gave up: %v", err)
	}
	if got := reads.Load() - before; got != 1 {
		t.Errorf("the two lookups made %d reads, want 1", got)
	}

	// A node that is not there is read each time (a node that joins a
	// moment later is found at once).
	before = reads.Load()
	for range 3 {
		if _, err := l.node(ctx, "nosuchnodeaaaaaaaaaaaaaaa"); !errors.Is(err, spec.ErrNotFound) {
			t.Fatalf("lookup of a missing node: %v, want ErrNotFound", err)
		}
	}
	if got := reads.Load() - before; got != 3 {
		t.Errorf("3 lookups of a missing node made %d reads, want 3", got)
	}
}
