package store

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	pb "github.com/curatorproject/curator/proto"
)

// ClusterReads shares reads of the cluster record among the calls that
// ask for it at once: a join wave reads it for every Register (the join
// tokens, the certificates' lifetime, whether joins wait for approval),
// dozens of times a second.
//
// The promise of a read of one's own is kept: a caller is answered by a
// read that started after it asked, never by one already under way, so
// what it gets reflects every write acknowledged before its call (etcd's
// reads are linearizable): a token rotated before a Register started is
// refused by it. Callers that ask while a read is under way share the
// next one, which one of them makes as soon as that read ends.
type ClusterReads struct {
	kv clientv3.KV

	mu sync.Mutex
	// running: a read is under way.
	running bool
	// next is the read the callers waiting for one to start share; nil
	// when none waits.
	next *clusterRead
	// reads counts the reads made, for the tests.
	reads int
}

type clusterRead struct {
	// start is closed when the read before ends: one waiter makes this
	// one.
	start chan struct{}
	done  chan struct{}
	cs    *pb.ClusterState
	err   error
	// waiting is how many callers joined it while the read before ran.
	waiting int
}

// clusterReadTimeout bounds a shared read, whose callers may have gone.
const clusterReadTimeout = 10 * time.Second

// NewClusterReads returns reads of the cluster record through kv.
func NewClusterReads(kv clientv3.KV) *ClusterReads {
	return &ClusterReads{kv: kv}
}

// Load returns the cluster record as a read started after the call finds
// it. The record is shared by the callers of one read: read only.
func (r *ClusterReads) Load(ctx context.Context) (*pb.ClusterState, error) {
	r.mu.Lock()
	if r.next == nil {
		r.next = &clusterRead{start: make(chan struct{}), done: make(chan struct{})}
	}
	rd := r.next
	if !r.running {
		r.running, r.next = true, nil
		r.mu.Unlock()
		r.read(ctx, rd)
		return rd.cs, rd.err
	}
	rd.waiting++
	r.mu.Unlock()
	for {
		select {
		case <-rd.done:
			return rd.cs, rd.err
		case <-rd.start:
			r.mu.Lock()
			mine := !r.running && r.next == rd
			if mine {
				r.running, r.next = true, nil
			}
			r.mu.Unlock()
			if mine {
				r.read(ctx, rd)
				return rd.cs, rd.err
			}
			// Another waiter makes it.
			select {
			case <-rd.done:
				return rd.cs, rd.err
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// read makes rd, for every caller that shares it (its own context may
// end first: the read does not end with it), then hands the next read to
// its waiters.
func (r *ClusterReads) read(ctx context.Context, rd *clusterRead) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), clusterReadTimeout)
	rd.cs, rd.err = ClusterLoad(rctx, r.kv)
	cancel()
	close(rd.done)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	r.running = false
	if r.next != nil {
		close(r.next.start)
	}
}

// Reads is how many reads were made.
func (r *ClusterReads) Reads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads
}
