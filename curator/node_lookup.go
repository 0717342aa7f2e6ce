package curator

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/protobuf/proto"

	pb "github.com/curatorproject/curator/proto"
)

// nodeLookup reads node records from etcd for a curator that does not lead
// (a leader has its registry view): the record of the manager forwarding a
// call, checked for each call it forwards. After a failover the managers
// forward every node's session streams again at once, thousands of calls
// naming the same few managers, to a curator that may still be loading its
// leadership; one etcd read per call then starves etcd, and the lease
// renewals with it (a 10,000-node failover lost its new leader that way).
// So the calls that ask for the same node together share one read
// (singleflight), and what a read found serves the calls of the next
// nodeLookupTTL too.
type nodeLookup struct {
	load   func(ctx context.Context, id string) (*pb.Node, error)
	now    func() time.Time
	flight singleflight.Group

	mu   sync.Mutex
	read map[string]lookedUp
}

type lookedUp struct {
	node *pb.Node
	at   time.Time
}

// nodeLookupTTL is how long a record read serves later calls: a manager
// demoted within it may forward for as long, which a forwarded call is
// allowed anyway (authenticate), and its record is read again after.
const nodeLookupTTL = time.Second

// nodeLookupTimeout bounds one shared read: it runs on no caller's
// context, as the first caller's end must not fail the others.
const nodeLookupTimeout = 5 * time.Second

func newNodeLookup(load func(ctx context.Context, id string) (*pb.Node, error), now func() time.Time) *nodeLookup {
	return &nodeLookup{load: load, now: now, read: map[string]lookedUp{}}
}

// fresh is node id's record if it was read less than nodeLookupTTL ago.
func (l *nodeLookup) fresh(id string) *pb.Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.read[id]; ok && l.now().Sub(r.at) < nodeLookupTTL {
		return r.node
	}
	return nil
}

// node returns node id's record, as read at most nodeLookupTTL ago. The
// record is the caller's to keep (a copy).
func (l *nodeLookup) node(ctx context.Context, id string) (*pb.Node, error) {
	if n := l.fresh(id); n != nil {
		return proto.Clone(n).(*pb.Node), nil
	}
	ch := l.flight.DoChan(id, func() (any, error) {
		// A read that ended since this caller looked serves it too.
		if n := l.fresh(id); n != nil {
			return n, nil
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nodeLookupTimeout)
		defer cancel()
		at := l.now()
		n, err := l.load(rctx, id)
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		for k, v := range l.read {
			if at.Sub(v.at) >= nodeLookupTTL {
				delete(l.read, k)
			}
		}
		l.read[id] = lookedUp{node: n, at: at}
		l.mu.Unlock()
		return n, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return proto.Clone(res.Val.(*pb.Node)).(*pb.Node), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
