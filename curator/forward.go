package curator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	"github.com/curatorproject/curator/supervisor"
	"github.com/curatorproject/curator/transport"
)

// Followers forward every call to the leader, so a client may talk to any
// manager. Forwarding is generic: the message types come from the protobuf
// registry by method name, so a new RPC needs nothing here. The leader is
// told who the original caller was (forwardedForKey) and believes it only
// from a consensus member (see authenticate).

// forwarder knows the leader, as the election observer last saw it, and
// keeps one connection to it.
type forwarder struct {
	mu sync.Mutex
	// known is the leader; nil while the election is not being followed
	// (yet, or for a moment after an error).
	known *leaderInfo
	// learned is closed, and made anew, each time known is set.
	learned chan struct{}
	addr    string
	conn    *grpc.ClientConn
	// creds are the connections' to the leader, which share one TLS
	// session (transport.SharedSessions): a new leader's connection
	// resumes it.
	creds credentials.TransportCredentials
	// dropped is kicked when the connection to the leader, ready, is
	// lost (watchConn): the crash watch probes the leader at once.
	dropped chan struct{}
}

// drops is the channel the crash watch waits on for a lost connection.
func (f *forwarder) drops() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dropped == nil {
		f.dropped = make(chan struct{}, 1)
	}
	return f.dropped
}

// watchConn kicks dropped each time conn, to the leader, loses its
// connection after it was ready, until conn is closed. A leader whose
// process died resets its connections the moment it dies (the kernel
// closes its sockets), so the crash watch probes it at once rather than
// at its next period; a frozen or cut-off leader resets nothing, and the
// probes decide as before.
func (f *forwarder) watchConn(conn *grpc.ClientConn, dropped chan struct{}) {
	state := conn.GetState()
	for state != connectivity.Shutdown && conn.WaitForStateChange(context.Background(), state) {
		next := conn.GetState()
		if state == connectivity.Ready && next != connectivity.Ready {
			supervisor.Kick(dropped)
		}
		state = next
	}
}

// leaderInfo is the leader as the election names it: its node, its
// address, and the lease of its election key.
type leaderInfo struct {
	id, addr string
	lease    clientv3.LeaseID
	// rev is the create revision of its election key.
	rev int64
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeLocked()
}

func (f *forwarder) closeLocked() {
	if f.conn != nil {
		f.conn.Close()
		f.conn, f.addr = nil, ""
	}
}

// learn records the leader the election observer saw (nil: the election is
// not being followed). When the leader moves, it closes the connection to
// the old one: the streams forwarded over it end at once, and their callers
// reconnect to whoever leads now, rather than wait on a leader that may be
// frozen or cut off.
func (f *forwarder) learn(li *leaderInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.known = li
	if li != nil {
		if f.learned != nil {
			close(f.learned)
		}
		f.learned = nil
	}
	if f.conn != nil && (li == nil || f.addr != li.addr) {
		f.closeLocked()
	}
}

// knownLeader is the leader as last observed, or nil.
func (f *forwarder) knownLeader() *leaderInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.known
}

// leader returns the leader, waiting until the observer knows it, at most
// leaderLookupTimeout: a forwarded call (a stream has no deadline of its
// own) must not hang on a manager that cannot follow the election.
func (f *forwarder) leader(ctx context.Context) (leaderInfo, error) {
	t := time.NewTimer(leaderLookupTimeout)
	defer t.Stop()
	for {
		f.mu.Lock()
		li := f.known
		if li == nil && f.learned == nil {
			f.learned = make(chan struct{})
		}
		learned := f.learned
		f.mu.Unlock()
		if li != nil {
			return *li, nil
		}
		select {
		case <-learned:
		case <-ctx.Done():
			return leaderInfo{}, fmt.Errorf("%w: %v", spec.ErrNoLeader, ctx.Err())
		case <-t.C:
			return leaderInfo{}, fmt.Errorf("%w: this manager does not know of one (it may be cut off from etcd): try another manager", spec.ErrNoLeader)
		}
	}
}

// awaitNext waits until the election names another leader than was (a
// newer election key), at most d, and says whether it did.
func (f *forwarder) awaitNext(ctx context.Context, was *leaderInfo, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		f.mu.Lock()
		li := f.known
		if li != nil && (was == nil || li.rev != was.rev) {
			f.mu.Unlock()
			return true
		}
		if f.learned == nil {
			f.learned = make(chan struct{})
		}
		learned := f.learned
		f.mu.Unlock()
		select {
		case <-learned:
		case <-ctx.Done():
			return false
		case <-t.C:
			return false
		}
	}
}

// runFollowElection follows the election with etcd's own observer
// (concurrency.Election.Observe), so that forwarded calls find the leader
// without reading the election each time (a failover moves thousands of
// streams at once), and forwarded streams never outlive the leadership
// they were forwarded to. The observer needs a session: a lease of this
// manager's own, which holds no key.
func (s *Service) runFollowElection(ctx context.Context) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	for ctx.Err() == nil {
		err := s.followElection(ctx)
		// Not following any more: forget the leader until we are again.
		s.fwd.learn(nil)
		if ctx.Err() == nil {
			supervisor.Logger(ctx).Warn("following the election stopped: following it again", zap.Error(err))
		}
		select {
		case <-ctx.Done():
		case <-time.After(followRetry):
		}
	}
	return ctx.Err()
}

// followRetry is the wait before following the election again.
const followRetry = 100 * time.Millisecond

// followElection feeds the forwarder the leaders the observer sees, until
// it stops (ctx ends, or etcd fails it).
func (s *Service) followElection(ctx context.Context) error {
	sess, err := concurrency.NewSession(s.cfg.Etcd, concurrency.WithTTL(int(s.cfg.ElectionTTL/time.Second)), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("election observer session: %w", err)
	}
	defer sess.Close()
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	for resp := range store.NewElection(sess).Observe(octx) {
		if len(resp.Kvs) == 0 {
			continue
		}
		id, addr := store.ParseLeaderValue(string(resp.Kvs[0].Value))
		s.fwd.learn(&leaderInfo{id: id, addr: addr, lease: clientv3.LeaseID(resp.Kvs[0].Lease), rev: resp.Kvs[0].CreateRevision})
	}
	return errors.New("the election observer ended")
}

// leaderLookupTimeout bounds how long a forwarded call waits to learn who
// leads.
const leaderLookupTimeout = 2 * time.Second

// leaderValue is what a curator puts in its election key.
func leaderValue(nodeID, address string) string { return nodeID + " " + address }

// leaderConn returns a connection to the current leader.
func (s *Service) leaderConn(ctx context.Context) (*grpc.ClientConn, error) {
	// Without a quorum there is no leader to forward to, whatever the
	// election observer last said: say so, and why, at once.
	if err := s.quorumLost(); err != nil {
		return nil, err
	}
	li, err := s.fwd.leader(ctx)
	if err != nil {
		return nil, err
	}
	if li.id == s.cfg.NodeID {
		// We won the election but are not serving as leader (yet, or any
		// more): the caller should retry in a moment.
		return nil, spec.ErrNoLeader
	}
	f := &s.fwd
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil && f.addr == li.addr {
		return f.conn, nil
	}
	f.closeLocked()
	if f.creds == nil {
		f.creds = transport.SharedSessions(pki.ClientTLSFrom(s.cfg.Certs, s.cfg.CA))
	}
	conn, err := grpc.NewClient(li.addr, transport.DialOptions(f.creds)...)
	if err != nil {
		return nil, fmt.Errorf("dial leader %s at %s: %w", li.id, li.addr, err)
	}
	f.conn, f.addr = conn, li.addr
	if f.dropped == nil {
		f.dropped = make(chan struct{}, 1)
	}
	go f.watchConn(conn, f.dropped)
	return conn, nil
}

// methodTypes finds the request and response types of a full method name,
// /package.Service/Method.
func methodTypes(fullMethod string) (in, out protoreflect.MessageType, err error) {
	svc, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return nil, nil, fmt.Errorf("bad method name %q", fullMethod)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, nil, fmt.Errorf("service %s: %w", svc, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, nil, fmt.Errorf("%s is not a service", svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return nil, nil, fmt.Errorf("no method %s in %s", method, svc)
	}
	if in, err = protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName()); err != nil {
		return nil, nil, err
	}
	if out, err = protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName()); err != nil {
		return nil, nil, err
	}
	return in, out, nil
}

func forwardContext(ctx context.Context, id identity) context.Context {
	return metadata.NewOutgoingContext(ctx, metadata.Pairs(forwardedForKey, id.forwarded(), forwardedFromKey, id.peer))
}

func (s *Service) forwardUnary(ctx context.Context, id identity, method string, req any) (any, error) {
	_, outType, err := methodTypes(method)
	if err != nil {
		return nil, toStatus(err)
	}
	for again := false; ; again = true {
		was := s.fwd.knownLeader()
		if was != nil && was.id == s.cfg.NodeID {
			return nil, errLeadingNext
		}
		conn, err := s.leaderConn(ctx)
		if err != nil {
			return nil, toStatus(err)
		}
		out := outType.New().Interface()
		err = conn.Invoke(forwardContext(ctx, id), method, req, out)
		if err == nil {
			return out, nil
		}
		// The leader went away under the call (it died, or said it no
		// longer leads): forward it once more, to the next leader, as
		// soon as the election names one, rather than send the caller
		// round the managers. A caller would try another manager with the
		// call all the same (Unavailable), so this adds no retry it did
		// not make.
		if again || s.stopping.Load() || !leaderMoved(ctx, err) || !s.fwd.awaitNext(ctx, was, leaderLookupTimeout) {
			return nil, forwardError(ctx, err)
		}
	}
}

// errLeadingNext says the election named this manager, which does not
// serve as leader yet: the call is served here once it does
// (awaitLeading), not forwarded.
var errLeadingNext = errors.New("this manager is named leader and does not serve as one yet")

// awaitLeading waits until this manager serves as leader, at most d, and
// returns its leadership (nil: it does not, or ctx ended).
func (s *Service) awaitLeading(ctx context.Context, d time.Duration) *leader.State {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for {
		if l := s.currentLeader(); l != nil {
			return l
		}
		li := s.fwd.knownLeader()
		if li == nil || li.id != s.cfg.NodeID {
			return nil // another leads, or none is known
		}
		select {
		case <-ctx.Done():
			return nil
		case <-deadline:
			return nil
		case <-tick.C:
		}
	}
}

// forwardError makes a forwarded call that this follower cut short (it is
// stopping, and closed its connection to the leader) read as what it is to
// the caller: this manager is unavailable, try another.
func forwardError(ctx context.Context, err error) error {
	if status.Code(err) == codes.Canceled && ctx.Err() == nil {
		return status.Errorf(codes.Unavailable, "the manager forwarding this call to the leader is stopping (%v): try another manager", status.Convert(err).Message())
	}
	return err
}

func (s *Service) forwardStream(ctx context.Context, id identity, info *grpc.StreamServerInfo, ss grpc.ServerStream) error {
	inType, outType, err := methodTypes(info.FullMethod)
	if err != nil {
		return toStatus(err)
	}
	conn, err := s.leaderConn(ctx)
	if err != nil {
		return toStatus(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	desc := &grpc.StreamDesc{ServerStreams: info.IsServerStream, ClientStreams: info.IsClientStream}
	cs, err := conn.NewStream(forwardContext(ctx, id), desc, info.FullMethod)
	if err != nil {
		return forwardError(ss.Context(), err)
	}
	pump := func() error {
		for {
			m := inType.New().Interface()
			if err := ss.RecvMsg(m); err != nil {
				if errors.Is(err, io.EOF) {
					return cs.CloseSend()
				}
				return err
			}
			if err := cs.SendMsg(m); err != nil {
				return err
			}
			if !info.IsClientStream {
				return cs.CloseSend()
			}
		}
	}
	if !info.IsClientStream {
		if err := pump(); err != nil {
			return err
		}
	} else {
		// The caller's side is pumped in the background. The goroutine
		// ends when the caller's stream does, which gRPC guarantees once
		// this handler returns; cancel() ends the leader's side.
		go func() {
			if err := pump(); err != nil {
				cancel()
			}
		}()
	}
	for {
		m := outType.New().Interface()
		if err := cs.RecvMsg(m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return forwardError(ss.Context(), err)
		}
		if err := ss.SendMsg(m); err != nil {
			return err
		}
	}
}
