package store

import (
	"context"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	pb "github.com/curatorproject/curator/proto"
)

// heldKV is a real etcd KV whose Gets, once made, wait for release before
// they answer: a read that took its value and has not returned yet.
type heldKV struct {
	clientv3.KV
	got     chan struct{}
	release chan struct{}
}

func (h *heldKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := h.KV.Get(ctx, key, opts...)
	h.got <- struct{}{}
	<-h.release
	return resp, err
}

func putCluster(t *testing.T, cli *clientv3.Client, secret string) {
	t.Helper()
	data, err := proto.Marshal(&pb.ClusterState{ClusterId: "c", WorkerTokenSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(callCtx(t), clusterKey, string(data)); err != nil {
		t.Fatal(err)
	}
}

// TestClusterReadsShareTheNextRead: callers that ask while a read is
// under way share one read, made after it, so that each sees every write
// acknowledged before it asked (a token rotated before a Register is
// refused by it): five callers that come during a read that took the old
// secret get the new one, from one read.
func TestClusterReadsShareTheNextRead(t *testing.T) {
	cli := testEtcd(t)
	putCluster(t, cli, "old")
	kv := &heldKV{KV: cli, got: make(chan struct{}, 10), release: make(chan struct{})}
	r := NewClusterReads(kv)

	first := make(chan *pb.ClusterState, 1)
	go func() {
		cs, err := r.Load(callCtx(t))
		if err != nil {
			t.Error(err)
		}
		first <- cs
	}()
	<-kv.got // the first read holds "old"
	putCluster(t, cli, "new")

	const callers = 5
	var wg sync.WaitGroup
	got := make([]string, callers)
	for i := range callers {
		wg.Go(func() {
			cs, err := r.Load(callCtx(t))
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = cs.WorkerTokenSecret
		})
	}
	// Let the callers queue behind the read under way, then let it go.
	waitUntil(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.next != nil && r.next.waiting == callers })
	close(kv.release)
	if cs := <-first; cs.GetWorkerTokenSecret() != "old" {
		t.Errorf("the first read found %q, want old", cs.GetWorkerTokenSecret())
	}
	wg.Wait()
	for i, s := range got {
		if s != "new" {
			t.Errorf("caller %d, who asked after the write, got %q, want new", i, s)
		}
	}
	if n := r.Reads(); n != 2 {
		t.Errorf("%d reads for %d callers, want 2 (the first, and one shared by the rest)", n, callers+1)
	}
}

// TestClusterReadsCallerGone: a caller whose context ends stops waiting;
// the others are answered, and a read after finds the record.
func TestClusterReadsCallerGone(t *testing.T) {
	cli := testEtcd(t)
	putCluster(t, cli, "s")
	kv := &heldKV{KV: cli, got: make(chan struct{}, 10), release: make(chan struct{})}
	r := NewClusterReads(kv)
	done := make(chan error, 1)
	go func() {
		_, err := r.Load(callCtx(t))
		done <- err
	}()
	<-kv.got
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := r.Load(ctx)
		gone <- err
	}()
	waitUntil(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.next != nil })
	cancel()
	if err := <-gone; err == nil {
		t.Error("a caller whose context ended got an answer, want its context's error")
	}
	close(kv.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cs, err := r.Load(callCtx(t))
	if err != nil || cs.GetWorkerTokenSecret() != "s" {
		t.Errorf("a read after: %v, %v; want the record", cs, err)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(time.Millisecond)
	}
}
