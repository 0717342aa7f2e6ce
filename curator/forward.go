package curator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/curatorproject/curator/pki"
	"github.com/curatorproject/curator/supervisor"
	"github.com/curatorproject/curator/transport"
)

// Followers forward every call to the leader, so a client may talk to any
// manager. Forwarding is generic: the message types come from the protobuf
// registry by method name, so a new RPC needs nothing here. The leader is
// told who the original caller was (forwardedForKey) and believes it only
// from a consensus member (see authenticate).

// forwarder keeps one connection to the current leader.
type forwarder struct {
	// known is the leader as the election watch last saw it; nil when
	// the watch is not running or there is no leader.
	known atomic.Pointer[leaderInfo]

	mu   sync.Mutex
	addr string
	conn *grpc.ClientConn
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		f.conn.Close()
		f.conn, f.addr = nil, ""
	}
}

type leaderInfo struct{ id, addr string }

// leaderMoved closes the connection to the old leader when the election
// names another one (or none): the streams forwarded over it end at once,
// and their callers reconnect to whoever leads now, rather than wait on a
// leader that may be frozen or cut off.
func (f *forwarder) leaderMoved(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil && f.addr != addr {
		f.conn.Close()
		f.conn, f.addr = nil, ""
	}
}

// runFollowElection follows the election so that forwarded streams never
// outlive the leadership they were forwarded to.
func (s *Service) runFollowElection(ctx context.Context) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		// Read who leads, then follow every change: forwarded calls use
		// what this learns instead of reading the election each time (a
		// failover moves thousands of streams at once).
		note := func() {
			id, addr, err := currentLeaderInfo(ctx, s.cfg.Etcd)
			switch {
			case err == nil:
				s.fwd.known.Store(&leaderInfo{id: id, addr: addr})
			case errors.Is(err, ErrNoLeader):
				s.fwd.known.Store(nil)
			default:
				return
			}
			s.fwd.leaderMoved(addr)
		}
		wch := s.cfg.Etcd.Watch(wctx, electionPrefix+"/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		for wr := range wch {
			if wr.Err() != nil {
				break
			}
			note()
		}
		// Not following any more: look it up per call until we are.
		s.fwd.known.Store(nil)
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return ctx.Err()
}

// leaderLookupTimeout bounds a follower's read of who leads.
const leaderLookupTimeout = 2 * time.Second

// leaderValue is what a curator puts in its election key.
func leaderValue(nodeID, address string) string { return nodeID + " " + address }

func parseLeaderValue(v string) (nodeID, address string) {
	nodeID, address, _ = strings.Cut(v, " ")
	return nodeID, address
}

// currentLeaderInfo reads the election: the node ID and address of the
// curator leader, or ErrNoLeader.
func currentLeaderInfo(ctx context.Context, cli *clientv3.Client) (nodeID, address string, err error) {
	// Bounded, and refused at once by an etcd member that has no leader
	// (cut off, or removed from the cluster): a forwarded stream has no
	// deadline of its own, and must not hang on a member that cannot
	// answer.
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), leaderLookupTimeout)
	defer cancel()
	resp, err := cli.Get(ctx, electionPrefix+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", "", fmt.Errorf("%w: this manager cannot read the election (%v): try another manager", ErrNoLeader, err)
	}
	if len(resp.Kvs) == 0 {
		return "", "", ErrNoLeader
	}
	nodeID, address = parseLeaderValue(string(resp.Kvs[0].Value))
	return nodeID, address, nil
}

// leaderConn returns a connection to the current leader.
func (s *Service) leaderConn(ctx context.Context) (*grpc.ClientConn, error) {
	// Without a quorum there is no leader to forward to, whatever the
	// election watch last said: say so, and why, at once.
	if err := s.quorumLost(); err != nil {
		return nil, err
	}
	var id, addr string
	if li := s.fwd.known.Load(); li != nil {
		id, addr = li.id, li.addr
	} else {
		var err error
		if id, addr, err = currentLeaderInfo(ctx, s.cfg.Etcd); err != nil {
			return nil, err
		}
	}
	if id == s.cfg.NodeID {
		// We won the election but are not serving as leader (yet, or any
		// more): the caller should retry in a moment.
		return nil, ErrNoLeader
	}
	f := &s.fwd
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil && f.addr == addr {
		return f.conn, nil
	}
	if f.conn != nil {
		f.conn.Close()
	}
	tlsCfg := pki.ClientTLS(pki.TLSCertificate(s.cfg.NodeCert, s.cfg.NodeKey), s.cfg.CA)
	conn, err := grpc.NewClient(addr, transport.DialOptions(credentials.NewTLS(tlsCfg))...)
	if err != nil {
		return nil, fmt.Errorf("dial leader %s at %s: %w", id, addr, err)
	}
	f.conn, f.addr = conn, addr
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
	return metadata.NewOutgoingContext(ctx, metadata.Pairs(forwardedForKey, id.String()))
}

func (s *Service) forwardUnary(ctx context.Context, id identity, method string, req any) (any, error) {
	_, outType, err := methodTypes(method)
	if err != nil {
		return nil, toStatus(err)
	}
	conn, err := s.leaderConn(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := outType.New().Interface()
	if err := conn.Invoke(forwardContext(ctx, id), method, req, out); err != nil {
		return nil, forwardError(ctx, err)
	}
	return out, nil
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
