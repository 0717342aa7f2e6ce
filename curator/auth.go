package curator

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// Who may call what. The TLS layer has already checked that a presented
// certificate chains to the cluster CA; here we look at what it says.
//
//   - Management: the admin certificate only.
//   - Curator.Register: anyone; the handler checks the join token.
//   - the rest of Curator: a node certificate of a node that is still in the
//     registry, so a removed node's certificate is refused from then on.
//   - the gRPC health and reflection services: any certificate of this
//     cluster (admin or node). They are answered by the manager called,
//     never forwarded (localMethod).
//
// A worker's node certificate thus reaches neither the management API nor
// etcd (etcd only trusts the etcd CA, which issues certificates for
// consensus members alone). A certificate from another CA reaches nothing:
// a client that insists on sending it fails the handshake, and Go's TLS
// client, which leaves out a certificate the server's CA list does not
// name, arrives anonymous and may only call Register, which wants a token.
//
// Managers may forward calls for any caller (forwardedForKey): a manager
// holds an etcd certificate and so full access to the cluster's state
// anyway; trusting it to forward adds nothing it did not have.

// identity is who is calling.
type identity struct {
	// role is pki.RoleAdmin, pki.RoleNode or "" for a caller without a
	// certificate.
	role   string
	nodeID string
}

func (id identity) String() string {
	switch id.role {
	case "":
		return "anonymous"
	case pki.RoleNode:
		return "node:" + id.nodeID
	}
	return id.role
}

func parseIdentity(s string) (identity, error) {
	switch {
	case s == "anonymous":
		return identity{}, nil
	case s == pki.RoleAdmin:
		return identity{role: pki.RoleAdmin}, nil
	case strings.HasPrefix(s, "node:") && len(s) > len("node:"):
		return identity{role: pki.RoleNode, nodeID: strings.TrimPrefix(s, "node:")}, nil
	}
	return identity{}, fmt.Errorf("%w: bad forwarded identity %q", ErrDenied, s)
}

// managementPrefix starts the full name of every management method.
const managementPrefix = "/curator.v1.Management/"

// forwardedForKey carries the original caller's identity when a follower
// forwards a call to the leader.
const forwardedForKey = "x-curator-forwarded-for"

type identityKey struct{}

func withIdentity(ctx context.Context, id identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

func identityFrom(ctx context.Context) identity {
	id, _ := ctx.Value(identityKey{}).(identity)
	return id
}

// logger is for handlers (runnables use supervisor.Logger): it names the
// caller the interceptor authenticated.
func (s *Service) logger(ctx context.Context) *zap.Logger {
	return s.cfg.Logger.With(zap.Stringer("caller", identityFrom(ctx)))
}

// peerIdentity reads the verified certificate of the caller.
func peerIdentity(ctx context.Context) (identity, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return identity{}, fmt.Errorf("%w: no peer", ErrDenied)
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return identity{}, fmt.Errorf("%w: not a TLS connection", ErrDenied)
	}
	if len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		// No certificate, or one the TLS client left out because it is
		// not from this cluster's CA.
		return identity{}, nil
	}
	nodeID, role, err := pki.Identity(info.State.VerifiedChains[0][0])
	if err != nil {
		return identity{}, fmt.Errorf("%w: %v", ErrDenied, err)
	}
	switch role {
	case pki.RoleAdmin:
		return identity{role: pki.RoleAdmin}, nil
	case pki.RoleNode:
		return identity{role: pki.RoleNode, nodeID: nodeID}, nil
	}
	return identity{}, fmt.Errorf("%w: a %q certificate cannot call the curator", ErrDenied, role)
}

// authenticate works out who is calling: the peer itself, or, when the peer
// is a consensus member forwarding a call, the identity it forwards for.
func (s *Service) authenticate(ctx context.Context) (identity, error) {
	id, err := peerIdentity(ctx)
	if err != nil {
		return identity{}, err
	}
	md, _ := metadata.FromIncomingContext(ctx)
	fwd := md.Get(forwardedForKey)
	if len(fwd) == 0 {
		return id, nil
	}
	// Only a curator forwards calls, and only consensus members run one.
	if id.role != pki.RoleNode {
		return identity{}, fmt.Errorf("%w: only a manager may forward calls", ErrDenied)
	}
	n, err := s.lookupNode(ctx, id.nodeID)
	if err != nil || !hasRole(n, pb.Role_ROLE_CONSENSUS) {
		// A manager demoted a moment ago may still forward, until its
		// agent stops its curator: the caller is to ask another manager
		// (Unavailable), not to give up.
		return identity{}, fmt.Errorf("%w: node %s is not a manager (any more) and may not forward calls: ask another manager", ErrNotManager, id.nodeID)
	}
	return parseIdentity(fwd[0])
}

// authorize checks that id may call method.
func authorize(id identity, method string) error {
	switch {
	case strings.HasPrefix(method, managementPrefix):
		if id.role != pki.RoleAdmin {
			return fmt.Errorf("%w: the management API needs this cluster's admin certificate (%s may not call %s; a certificate from another cluster's CA is not even sent)", ErrDenied, id, method)
		}
	case localMethod(method):
		if id.role != pki.RoleAdmin && id.role != pki.RoleNode {
			return fmt.Errorf("%w: %s needs a certificate of this cluster (%s may not call it)", ErrDenied, method, id)
		}
	case method == "/curator.v1.Curator/Register":
	case strings.HasPrefix(method, "/curator.v1.Curator/"):
		if id.role != pki.RoleNode {
			return fmt.Errorf("%w: %s needs a node certificate (%s may not call it)", ErrDenied, method, id)
		}
	default:
		return fmt.Errorf("%w: unknown method %s", ErrDenied, method)
	}
	return nil
}

// lookupNode reads one node (read only): from the registry view while we
// lead, from etcd otherwise.
func (s *Service) lookupNode(ctx context.Context, id string) (*pb.Node, error) {
	if st := s.currentLeader(); st != nil {
		if n := st.reg.node(id); n != nil {
			return n, nil
		}
		return nil, fmt.Errorf("node %s: %w", id, ErrNotFound)
	}
	return nodeLoad(ctx, s.cfg.Etcd, id)
}

// checkNodeMember refuses a node that is no longer in the registry. Only the
// leader checks, as it serves every node call.
func (s *Service) checkNodeMember(ctx context.Context, id identity) error {
	if id.role != pki.RoleNode {
		return nil
	}
	n, err := s.lookupNode(ctx, id.nodeID)
	if err != nil {
		return fmt.Errorf("%w: node %s is not a member of this cluster (was it removed?)", ErrDenied, id.nodeID)
	}
	if n.State == pb.NodeState_NODE_STATE_DECOMMISSIONED {
		return fmt.Errorf("%w: node %s has been decommissioned", ErrDenied, id.nodeID)
	}
	if n.Refused != "" {
		return fmt.Errorf("%w: %s", ErrDenied, n.Refused)
	}
	return nil
}

// unaryInterceptor authenticates and authorizes every call, then serves it
// here if we lead or forwards it to the leader if we do not.
func (s *Service) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	id, err := s.authenticate(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := authorize(id, info.FullMethod); err != nil {
		return nil, toStatus(err)
	}
	if strings.HasPrefix(info.FullMethod, managementPrefix) {
		// Refused here, on whichever manager was called, and again on
		// the leader (api_management_check.go).
		m, _ := req.(proto.Message)
		if err := CheckManagementRequest(m); err != nil {
			return nil, toStatus(err)
		}
	}
	ctx = withIdentity(ctx, id)
	if localMethod(info.FullMethod) {
		return handler(ctx, req)
	}
	if l := s.currentLeader(); l != nil {
		if err := s.checkNodeMember(ctx, id); err != nil {
			return nil, toStatus(err)
		}
		resp, err := handler(ctx, req)
		return resp, toStatus(err)
	}
	return s.forwardUnary(ctx, id, info.FullMethod, req)
}

type wrappedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w *wrappedStream) Context() context.Context { return w.ctx }

func (s *Service) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	id, err := s.authenticate(ctx)
	if err != nil {
		return toStatus(err)
	}
	if err := authorize(id, info.FullMethod); err != nil {
		return toStatus(err)
	}
	ctx = withIdentity(ctx, id)
	if localMethod(info.FullMethod) {
		return handler(srv, &wrappedStream{ServerStream: ss, ctx: ctx})
	}
	if l := s.currentLeader(); l != nil {
		if err := s.checkNodeMember(ctx, id); err != nil {
			return toStatus(err)
		}
		return toStatus(handler(srv, &wrappedStream{ServerStream: ss, ctx: ctx}))
	}
	return s.forwardStream(ctx, id, info, ss)
}
