package leader

import (
	"context"
	"io"
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
	streams map[string]map[*SessionStream]struct{}
	// pending are the nodes whose records changed since run last looked;
	// managers says the manager list did (every stream is concerned).
	pending  map[string]struct{}
	managers bool
}

func newSessionPushes() *sessionPushes {
	return &sessionPushes{streams: map[string]map[*SessionStream]struct{}{}, pending: map[string]struct{}{}}
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

// Run pushes the registry's changes to the streams concerned until ctx
// ends.
func (p *sessionPushes) Run(ctx context.Context, reg *store.Registry) {
	kick, unsubscribe := reg.Subscribe(p.note)
	defer unsubscribe()
	for {
		select {
		case <-kick:
		case <-ctx.Done():
			return
		}
		for _, ss := range p.take() {
			ss.Kick()
		}
	}
}

// take returns the streams concerned by the changes noted since the last
// take.
func (p *sessionPushes) take() []*SessionStream {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*SessionStream
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

// Open registers a session stream; the function returned unregisters it.
func (p *sessionPushes) Open(ss *SessionStream) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.streams[ss.ID] == nil {
		p.streams[ss.ID] = map[*SessionStream]struct{}{}
	}
	p.streams[ss.ID][ss] = struct{}{}
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.streams[ss.ID], ss)
		if len(p.streams[ss.ID]) == 0 {
			delete(p.streams, ss.ID)
		}
	}
}

// SessionStream is one node's session stream as the leader holds it:
// what it last carried of the node's record and the manager list, and
// the one send at a time gRPC allows.
type SessionStream struct {
	ID       string
	Reg      *store.Registry
	Leader   string
	Interval uint32 // milliseconds
	Send     func(*pb.HeartbeatResponse) error
	// MoveWithin, if set, is the window in which the node is to move its
	// session to another manager (0: stay), read at each answer.
	MoveWithin func() uint32

	mu       sync.Mutex
	node     *pb.Node
	managers []string
	// closed: the handler returned, and gRPC allows no more sends.
	closed bool
	// sending says a sender runs; dirty, that a change came since it
	// last looked.
	sending, dirty atomic.Bool
}

// Answer answers the heartbeat seq (0: the stream's opening), with what
// the stream has not carried yet.
func (ss *SessionStream) Answer(seq uint64) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	resp := &pb.HeartbeatResponse{IntervalMs: ss.Interval, Seq: seq, Leader: ss.Leader}
	ss.fill(resp)
	if ss.MoveWithin != nil {
		resp.MoveWithinMs = ss.MoveWithin()
	}
	return ss.Send(resp)
}

// fill puts in resp what the stream has not carried yet of the node's
// record and the manager list, and says whether there was any. A node
// removed has nothing more: its stream ends at its next heartbeat. Call
// with mu.
func (ss *SessionStream) fill(resp *pb.HeartbeatResponse) bool {
	n, mgrs := ss.Reg.NodeAndManagers(ss.ID)
	if n == nil || (n == ss.node && slices.Equal(mgrs, ss.managers)) {
		return false
	}
	resp.Watch = &pb.WatchNodeResponse{Node: n, Managers: mgrs}
	ss.node, ss.managers = n, mgrs
	return true
}

// Close ends the stream's sends: its handler returns.
func (ss *SessionStream) Close() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
}

// Kick has a sender push what changed, at once. At most one sender runs
// per stream; a change it may have missed makes it look again. A send
// that fails shows in the handler's next Recv.
func (ss *SessionStream) Kick() {
	ss.dirty.Store(true)
	if ss.sending.Swap(true) {
		return
	}
	go func() {
		for {
			ss.dirty.Store(false)
			ss.mu.Lock()
			resp := &pb.HeartbeatResponse{Leader: ss.Leader}
			if !ss.closed && ss.fill(resp) {
				_ = ss.Send(resp)
			}
			ss.mu.Unlock()
			ss.sending.Store(false)
			if !ss.dirty.Load() || ss.sending.Swap(true) {
				return
			}
		}
	}()
}

// PushLogs pushes a request for node id's logs on one of its session
// streams, and says whether there was one.
func (p *sessionPushes) PushLogs(id string, req *pb.LogsRequest) bool {
	p.mu.Lock()
	var streams []*SessionStream
	for ss := range p.streams[id] {
		streams = append(streams, ss)
	}
	p.mu.Unlock()
	for _, ss := range streams {
		if ss.pushLogs(req) == nil {
			return true
		}
	}
	return false
}

// pushLogs sends req on the stream, at once.
func (ss *SessionStream) pushLogs(req *pb.LogsRequest) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return io.EOF
	}
	return ss.Send(&pb.HeartbeatResponse{Leader: ss.Leader, Logs: req})
}
