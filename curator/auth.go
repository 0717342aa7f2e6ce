package curator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/internal/faults"
	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
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
	// For an admin certificate: its operator role (pki.OperatorRoles),
	// its name (common name) and serial (lowercase hex).
	opRole, name, serial string
	// peer is the caller's address: the original caller's for a
	// forwarded call.
	peer string
	// joinConn: a node's join's connection, bound to it without a
	// certificate (conn_binding.go).
	joinConn bool
}

func (id identity) String() string {
	switch id.role {
	case "":
		return "anonymous"
	case pki.RoleNode:
		return "node:" + id.nodeID
	case pki.RoleAdmin:
		return id.name + " (" + id.opRole + ")"
	}
	return id.role
}

// caller is who the leader judges a change by (an admin certificate's
// operator role and name).
func (id identity) caller() leader.Caller { return leader.Caller{OpRole: id.opRole, Name: id.name} }

// forwarded is the identity as a follower forwards it (forwardedForKey):
// "node:ID", "anonymous", or "admin:ROLE:SERIAL:NAME" (the name last, so
// that any name survives). A leader reads a bare "admin", from a follower
// of before operator roles, as the full admin it then was.
func (id identity) forwarded() string {
	if id.role == pki.RoleAdmin {
		return strings.Join([]string{pki.RoleAdmin, id.opRole, id.serial, id.name}, ":")
	}
	return id.String()
}

func parseIdentity(s string) (identity, error) {
	switch {
	case s == "anonymous":
		return identity{}, nil
	case s == pki.RoleAdmin:
		return identity{role: pki.RoleAdmin, opRole: pki.OperatorAdmin, name: DefaultAdminName}, nil
	case strings.HasPrefix(s, pki.RoleAdmin+":"):
		parts := strings.SplitN(s, ":", 4)
		if len(parts) != 4 || parts[3] == "" {
			break
		}
		if _, err := pki.ParseOperatorRole(parts[1]); err != nil {
			return identity{}, fmt.Errorf("%w: bad forwarded identity: %v", spec.ErrDenied, err)
		}
		return identity{role: pki.RoleAdmin, opRole: parts[1], serial: parts[2], name: parts[3]}, nil
	case strings.HasPrefix(s, "node:") && len(s) > len("node:"):
		return identity{role: pki.RoleNode, nodeID: strings.TrimPrefix(s, "node:")}, nil
	}
	return identity{}, fmt.Errorf("%w: bad forwarded identity %s", spec.ErrDenied, spec.QuoteShort(s))
}

// managementPrefix starts the full name of every management method.
const managementPrefix = "/curator.v1.Management/"

// forwardedForKey carries the original caller's identity when a follower
// forwards a call to the leader, and forwardedFromKey its address.
const (
	forwardedForKey  = "x-curator-forwarded-for"
	forwardedFromKey = "x-curator-forwarded-from"
)

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
		return identity{}, fmt.Errorf("%w: no peer", spec.ErrDenied)
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return identity{}, fmt.Errorf("%w: not a TLS connection", spec.ErrDenied)
	}
	if len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		// No certificate, or one the TLS client left out because it is
		// not from this cluster's CA: a joined node's connection that
		// proved its key (conn_binding.go), or no one.
		if nodeID, ok := boundNode(ctx, time.Now()); ok {
			return identity{role: pki.RoleNode, nodeID: nodeID, joinConn: true}, nil
		}
		return identity{}, nil
	}
	cert := info.State.VerifiedChains[0][0]
	nodeID, role, err := pki.Identity(cert)
	if err != nil {
		return identity{}, fmt.Errorf("%w: %v", spec.ErrDenied, err)
	}
	switch role {
	case pki.RoleAdmin:
		opRole, err := pki.OperatorRole(cert)
		if err != nil {
			return identity{}, fmt.Errorf("%w: %v", spec.ErrDenied, err)
		}
		return identity{role: pki.RoleAdmin, opRole: opRole, name: nodeID, serial: cert.SerialNumber.Text(16)}, nil
	case pki.RoleNode:
		return identity{role: pki.RoleNode, nodeID: nodeID}, nil
	}
	return identity{}, fmt.Errorf("%w: a %q certificate cannot call the curator", spec.ErrDenied, role)
}

// authenticate works out who is calling: the peer itself, or, when the peer
// is a consensus member forwarding a call, the identity it forwards for.
func (s *Service) authenticate(ctx context.Context) (identity, error) {
	addr := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	id, err := peerIdentity(ctx)
	if err != nil {
		return identity{peer: addr}, err
	}
	id.peer = addr
	md, _ := metadata.FromIncomingContext(ctx)
	fwd := md.Get(forwardedForKey)
	if len(fwd) == 0 {
		return id, nil
	}
	// Only a curator forwards calls, and only consensus members run one.
	if id.role != pki.RoleNode {
		return identity{}, fmt.Errorf("%w: only a manager may forward calls", spec.ErrDenied)
	}
	n, err := s.lookupNode(ctx, id.nodeID)
	if err != nil || !spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
		// A manager demoted a moment ago may still forward, until its
		// agent stops its curator: the caller is to ask another manager
		// (Unavailable), not to give up.
		return identity{}, fmt.Errorf("%w: node %s is not a manager (any more) and may not forward calls: ask another manager", spec.ErrNotManager, id.nodeID)
	}
	orig, err := parseIdentity(fwd[0])
	if err != nil {
		return identity{}, err
	}
	orig.peer = addr + " (forwarded)"
	if from := md.Get(forwardedFromKey); len(from) > 0 {
		orig.peer = from[0][:min(len(from[0]), 100)]
	}
	return orig, nil
}

// authorize checks that id may call method.
func authorize(id identity, method string) error {
	switch {
	case strings.HasPrefix(method, managementPrefix):
		if id.role != pki.RoleAdmin {
			return fmt.Errorf("%w: the management API needs this cluster's admin certificate (%s may not call %s; a certificate from another cluster's CA is not even sent)", spec.ErrDenied, id, method)
		}
		call := strings.TrimPrefix(method, managementPrefix)
		need := spec.ManagementRole(call)
		if need == "" {
			return fmt.Errorf("%w: %s has no operator role in the role table", spec.ErrDenied, call)
		}
		if !pki.OperatorRoleAllows(id.opRole, need) {
			return fmt.Errorf("%w: %s needs the %s role; the certificate %q holds %s", spec.ErrDenied, call, need, id.name, id.opRole)
		}
	case localMethod(method):
		if id.role != pki.RoleAdmin && id.role != pki.RoleNode {
			return fmt.Errorf("%w: %s needs a certificate of this cluster (%s may not call it)", spec.ErrDenied, method, id)
		}
	case method == "/curator.v1.Curator/Register":
	case strings.HasPrefix(method, "/curator.v1.Curator/"):
		if id.role != pki.RoleNode {
			return fmt.Errorf("%w: %s needs a node certificate (%s may not call it)", spec.ErrDenied, method, id)
		}
	default:
		return fmt.Errorf("%w: unknown method %s", spec.ErrDenied, method)
	}
	return nil
}

// lookupNode reads one node (read only): from the registry view while we
// lead, from etcd otherwise (nodeLookup: one read shared by the calls
// that ask together).
func (s *Service) lookupNode(ctx context.Context, id string) (*pb.Node, error) {
	if st := s.currentLeader(); st != nil {
		if n := st.Reg.Node(id); n != nil {
			return n, nil
		}
		return nil, fmt.Errorf("node %s: %w", id, spec.ErrNotFound)
	}
	return s.nodes.node(ctx, id)
}

// checkNodeMember refuses a node that is no longer in the registry. Only the
// leader checks, as it serves every node call.
func (s *Service) checkNodeMember(ctx context.Context, id identity) error {
	if id.role != pki.RoleNode {
		return nil
	}
	n, err := s.lookupNode(ctx, id.nodeID)
	if err != nil {
		return fmt.Errorf("%w: node %s is not a member of this cluster (was it removed?)", spec.ErrDenied, id.nodeID)
	}
	if n.State == pb.NodeState_NODE_STATE_DECOMMISSIONED {
		return fmt.Errorf("%w: node %s has been decommissioned", spec.ErrDenied, id.nodeID)
	}
	if n.Refused != "" {
		return fmt.Errorf("%w: %s", spec.ErrDenied, n.Refused)
	}
	return nil
}

// unaryInterceptor authenticates and authorizes every call, then serves it
// here if we lead or forwards it to the leader if we do not. A management
// call is recorded in the audit trail (audit.go) by the manager that
// answers it: the leader, or a follower that refused it before forwarding.
func (s *Service) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := s.unaryCall(ctx, req, info, handler)
	if err == nil && info.FullMethod == pb.Curator_Register_FullMethodName {
		// Served here or by the leader: the connection is this
		// manager's to bind (conn_binding.go).
		if req, ok := req.(*pb.RegisterRequest); ok {
			if resp, ok := resp.(*pb.RegisterResponse); ok {
				s.bindRegistered(ctx, req, resp)
			}
		}
	}
	return resp, err
}

// unaryCall is unaryInterceptor but for the binding of a Register's
// connection.
func (s *Service) unaryCall(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	// A delay given this point (a faults build) holds every answer,
	// served, forwarded or refused, after what the call did took effect.
	defer faults.Point(faults.APIBeforeReply)
	mgmt := strings.HasPrefix(info.FullMethod, managementPrefix)
	id, err := s.admit(ctx, info.FullMethod)
	if err == nil && mgmt {
		// Refused here, on whichever manager was called, and again on
		// the leader (curator/spec/request.go).
		m, _ := req.(proto.Message)
		err = spec.CheckManagementRequest(m)
	}
	if err != nil {
		err = toStatus(err)
		if mgmt {
			s.auditRefusal(ctx, id, info.FullMethod, req, err)
		}
		return nil, err
	}
	// Ended at once if its certificate is revoked meanwhile
	// (revocation.go).
	ctx, release, err := s.calls.open(withIdentity(ctx, id), id)
	if err != nil {
		err = toStatus(err)
		if mgmt {
			s.auditRefusal(ctx, id, info.FullMethod, req, err)
		}
		return nil, err
	}
	defer release()
	if localMethod(info.FullMethod) {
		resp, err := handler(ctx, req)
		return resp, revokedOr(ctx, err)
	}
	serve := func(l *leader.State) (any, error) {
		if err := s.checkNodeMember(ctx, id); err != nil {
			return nil, toStatus(err)
		}
		// The node a call is on, looked up before it runs: a node
		// removed by the call is gone after.
		var on *pb.Node
		ctx := ctx
		if mgmt {
			on = auditNode(l, req)
			ctx, _ = withAuditNote(ctx)
		}
		resp, err := handler(ctx, req)
		err = revokedOr(ctx, err)
		if mgmt {
			s.auditOn(ctx, id, info.FullMethod, req, on, err)
		}
		return resp, err
	}
	if l := s.currentLeader(); l != nil {
		return serve(l)
	}
	resp, err := s.forwardUnary(ctx, id, info.FullMethod, req)
	if errors.Is(err, errLeadingNext) {
		// The election named this manager: the call is served here
		// once it serves as leader.
		if l := s.awaitLeading(ctx, leaderLookupTimeout); l != nil {
			return serve(l)
		}
		err = toStatus(spec.ErrNoLeader)
	}
	return resp, revokedOr(ctx, err)
}

// revokedOr is the status of a call's outcome err: the revocation of its
// certificate if that is what ended it, whatever the handler made of the
// cancelled context.
func revokedOr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if re := revokedCause(ctx); re != nil {
		return toStatus(re)
	}
	return toStatus(err)
}

// admit authenticates and authorizes a call: who is calling (as far as is
// known when it is refused) and whether they may.
func (s *Service) admit(ctx context.Context, method string) (identity, error) {
	id, err := s.authenticate(ctx)
	if err != nil {
		return id, err
	}
	if err := authorize(id, method); err != nil {
		return id, err
	}
	if id.role == pki.RoleAdmin && id.serial != "" {
		revoked, err := store.AdminCertRevoked(ctx, s.cfg.Etcd, id.serial)
		if err != nil && !revoked {
			return id, err
		}
		if revoked {
			return id, &revokedError{serial: id.serial, name: id.name}
		}
	}
	return id, nil
}

type wrappedStream struct {
	grpc.ServerStream
	ctx context.Context
	// first is the stream's request, kept for the audit trail.
	first any
	// check, if set, is asked before each answer is sent: an error ends
	// the stream instead (sendCheck).
	check func() error
}

func (w *wrappedStream) Context() context.Context { return w.ctx }

func (w *wrappedStream) SendMsg(m any) error {
	if w.check != nil {
		if err := w.check(); err != nil {
			return err
		}
	}
	return w.ServerStream.SendMsg(m)
}

func (w *wrappedStream) RecvMsg(m any) error {
	err := w.ServerStream.RecvMsg(m)
	if err == nil && w.first == nil {
		w.first = m
	}
	return err
}

func (s *Service) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	mgmt := strings.HasPrefix(info.FullMethod, managementPrefix)
	id, err := s.admit(ctx, info.FullMethod)
	if err != nil {
		err = toStatus(err)
		if mgmt {
			s.auditRefusal(ctx, id, info.FullMethod, nil, err)
		}
		return err
	}
	// Ended at once if its certificate is revoked meanwhile
	// (revocation.go).
	ctx, release, err := s.calls.open(withIdentity(ctx, id), id)
	if err != nil {
		err = toStatus(err)
		if mgmt {
			s.auditRefusal(ctx, id, info.FullMethod, nil, err)
		}
		return err
	}
	defer release()
	if localMethod(info.FullMethod) {
		return revokedOr(ctx, handler(srv, &wrappedStream{ServerStream: ss, ctx: ctx}))
	}
	if info.FullMethod == pb.Curator_Heartbeat_FullMethodName {
		// A session set-up: admitted at the manager's rate, or told
		// when to come back (admission.go).
		if err := s.sessions.admit(s.cfg.Now()); err != nil {
			s.metrics.SessionsRefused.Inc()
			s.knocks.Note(s.cfg.Now())
			return toStatus(err)
		}
		if id.joinConn {
			s.metrics.JoinConnectionSessions.Inc()
		}
	}
	if l := s.currentLeader(); l != nil {
		if err := s.checkNodeMember(ctx, id); err != nil {
			return toStatus(err)
		}
		ws := &wrappedStream{ServerStream: ss, ctx: ctx}
		if id.role == pki.RoleAdmin && id.serial != "" {
			ws.check = s.sendCheck(ctx, id)
		}
		err := revokedOr(ctx, handler(srv, ws))
		if mgmt {
			s.audit(ctx, id, info.FullMethod, ws.first, err)
		}
		return err
	}
	if sessionMethod(info.FullMethod) {
		return s.forwardSession(ctx, id, srv, info, ss, handler)
	}
	return revokedOr(ctx, s.forwardStream(ctx, id, info, ss))
}
