package curator

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// sessionPushes carries the changes of the node records and of the
// manager list to the nodes' session streams (Heartbeat) with no
// goroutine per stream: at a fleet's size every goroutine held per node
// is thousands of stacks, and the leader's memory. One goroutine per
// leadership (run) takes the registry's changes and gives each stream
// concerned a sender that lives while it sends what the stream has not
// carried yet; a stream's answers to heartbeats carry it too.
type sessionPushes struct {
	mu      sync.Mutex
	streams map[string]map[*sessionStream]struct{}
	// pending are the nodes whose records changed since run last looked;
	// managers says the manager list did (every stream is concerned).
	pending  map[string]struct{}
	managers bool
	// relays are the requests for nodes' logs pushed on the streams,
	// waiting for their nodes' answers (api_node_logs.go).
	relays logRelays
}

func newSessionPushes() *sessionPushes {
	return &sessionPushes{streams: map[string]map[*sessionStream]struct{}{}, pending: map[string]struct{}{}}
}

// note is the registry subscription's filter, called under the
// registry's lock for each change: it notes who is concerned.
func (p *sessionPushes) note(old, new *pb.Node) bool {
	id := new.GetId()
	if id == "" {
		id = old.GetId()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending[id] = struct{}{}
	if store.ManagerAddress(old) != store.ManagerAddress(new) {
		p.managers = true
	}
	return true
}

// run pushes the registry's changes to the streams concerned until ctx
// ends.
func (p *sessionPushes) run(ctx context.Context, reg *store.Registry) {
	kick, unsubscribe := reg.Subscribe(p.note)
	defer unsubscribe()
	for {
		select {
		case <-kick:
		case <-ctx.Done():
			return
		}
		for _, ss := range p.take() {
			ss.kick()
		}
	}
}

// take returns the streams concerned by the changes noted since the last
// take.
func (p *sessionPushes) take() []*sessionStream {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*sessionStream
	if p.managers {
		for _, set := range p.streams {
			for ss := range set {
				out = append(out, ss)
			}
		}
	} else {
		for id := range p.pending {
			for ss := range p.streams[id] {
				out = append(out, ss)
			}
		}
	}
	clear(p.pending)
	p.managers = false
	return out
}

// open registers a session stream; the function returned unregisters it.
func (p *sessionPushes) open(ss *sessionStream) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.streams[ss.id] == nil {
		p.streams[ss.id] = map[*sessionStream]struct{}{}
	}
	p.streams[ss.id][ss] = struct{}{}
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.streams[ss.id], ss)
		if len(p.streams[ss.id]) == 0 {
			delete(p.streams, ss.id)
		}
	}
}

// sessionStream is one node's session stream as the leader holds it:
// what it last carried of the node's record and the manager list, and
// the one send at a time gRPC allows.
type sessionStream struct {
	id       string
	reg      *store.Registry
	leader   string
	interval uint32 // milliseconds
	send     func(*pb.HeartbeatResponse) error
	// moveWithin, if set, is the window in which the node is to move its
	// session to another manager (0: stay), read at each answer.
	moveWithin func() uint32

	mu       sync.Mutex
	node     *pb.Node
	managers []string
	// closed: the handler returned, and gRPC allows no more sends.
	closed bool
	// sending says a sender runs; dirty, that a change came since it
	// last looked.
	sending, dirty atomic.Bool
}

// answer answers the heartbeat seq (0: the stream's opening), with what
// the stream has not carried yet.
func (ss *sessionStream) answer(seq uint64) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	resp := &pb.HeartbeatResponse{IntervalMs: ss.interval, Seq: seq, Leader: ss.leader}
	ss.fill(resp)
	if ss.moveWithin != nil {
		resp.MoveWithinMs = ss.moveWithin()
	}
	return ss.send(resp)
}

// fill puts in resp what the stream has not carried yet of the node's
// record and the manager list, and says whether there was any. A node
// removed has nothing more: its stream ends at its next heartbeat. Call
// with mu.
func (ss *sessionStream) fill(resp *pb.HeartbeatResponse) bool {
	n, mgrs := ss.reg.NodeAndManagers(ss.id)
	if n == nil || (n == ss.node && slices.Equal(mgrs, ss.managers)) {
		return false
	}
	resp.Watch = &pb.WatchNodeResponse{Node: n, Managers: mgrs}
	ss.node, ss.managers = n, mgrs
	return true
}

// close ends the stream's sends: its handler returns.
func (ss *sessionStream) close() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
}

// kick has a sender push what changed, at once. At most one sender runs
// per stream; a change it may have missed makes it look again. A send
// that fails shows in the handler's next Recv.
func (ss *sessionStream) kick() {
	ss.dirty.Store(true)
	if ss.sending.Swap(true) {
		return
	}
	go func() {
		for {
			ss.dirty.Store(false)
			ss.mu.Lock()
			resp := &pb.HeartbeatResponse{Leader: ss.leader}
			if !ss.closed && ss.fill(resp) {
				_ = ss.send(resp)
			}
			ss.mu.Unlock()
			ss.sending.Store(false)
			if !ss.dirty.Load() || ss.sending.Swap(true) {
				return
			}
		}
	}()
}
