package curator

import (
	"context"
	"crypto"
	"crypto/x509"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// A joining node keeps the connection its Register came on for its first
// session (pki/binding.go): its Register carries a signature, by the key
// it asks a certificate for, of the connection's keying material. The
// manager holding the connection checks it, and once the Register has
// succeeded (served here, or forwarded to the leader and answered), the
// connection calls as that node, as if it had presented the certificate
// the answer carries, until that certificate expires. Everything a node
// certificate may not do, such a connection may not do either: it is
// given the identity of a node, never more (authorize decides as for a
// certificate), and the node must still be a member (checkNodeMember).
//
// Only a connection that presented no certificate is bound, once: a
// connection that already calls as someone (a follower forwarding, an
// operator, a node) keeps its identity, and so a Register forwarded to
// the leader, whose proof is of the node's connection with the follower,
// binds nothing on the leader's side.

// connBinding is what a connection is bound to, if anything.
type connBinding struct {
	mu       sync.Mutex
	nodeID   string
	notAfter time.Time
}

type connBindingKey struct{}

// bindingStats gives each connection the server accepts its connBinding,
// in the context its calls' contexts come from, and counts it.
type bindingStats struct{ accepted prometheus.Counter }

func (b bindingStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	b.accepted.Inc()
	return context.WithValue(ctx, connBindingKey{}, &connBinding{})
}
func (bindingStats) HandleConn(context.Context, stats.ConnStats)                     {}
func (bindingStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (bindingStats) HandleRPC(context.Context, stats.RPCStats)                       {}

// boundNode returns the node the call's connection is bound to, if it is
// and the node's certificate has not expired at now.
func boundNode(ctx context.Context, now time.Time) (string, bool) {
	b, _ := ctx.Value(connBindingKey{}).(*connBinding)
	if b == nil {
		return "", false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nodeID == "" || !now.Before(b.notAfter) {
		return "", false
	}
	return b.nodeID, true
}

// bindRegistered binds the call's connection to the node resp names, if
// req proves the node's key on this connection and the connection is
// not anyone's yet; it says whether it did in resp. A proof that does not
// hold binds nothing: the join has succeeded all the same, and the node
// dials again with its certificate.
func (s *Service) bindRegistered(ctx context.Context, req *pb.RegisterRequest, resp *pb.RegisterResponse) {
	resp.ConnectionBound = false
	if len(req.ConnectionProof) == 0 {
		return
	}
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(forwardedForKey)) > 0 {
		// The follower that forwards it holds the node's connection.
		return
	}
	why := s.bindConn(ctx, req, resp)
	if why != "" {
		s.logger(ctx).Info("join's connection not kept for its session", zap.String("node", resp.NodeId), zap.String("why", why))
		return
	}
	resp.ConnectionBound = true
	s.metrics.JoinConnectionsKept.Inc()
}

// bindConn binds the call's connection as bindRegistered says, or says
// why not.
func (s *Service) bindConn(ctx context.Context, req *pb.RegisterRequest, resp *pb.RegisterResponse) string {
	b, _ := ctx.Value(connBindingKey{}).(*connBinding)
	if b == nil {
		return "the server keeps no binding for this connection"
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "no peer"
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return "not a TLS connection"
	}
	if len(info.State.PeerCertificates) > 0 {
		return "the connection presented a certificate"
	}
	pub, err := spec.ParsePublicKey(req.PublicKey)
	if err != nil {
		return err.Error()
	}
	if id, err := pki.NodeID(pub); err != nil || id != resp.NodeId {
		return "the answer names another node than the key"
	}
	cert, err := pki.DecodeCert(resp.NodeCert)
	if err != nil {
		return "the answer's certificate: " + err.Error()
	}
	if !samePublicKey(cert, pub) {
		return "the answer's certificate is not of the node's key"
	}
	material, err := pki.BindingMaterial(&info.State, req.PublicKey)
	if err != nil {
		return err.Error()
	}
	if err := pki.VerifyBinding(pub, material, req.ConnectionProof); err != nil {
		return err.Error()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nodeID != "" {
		return "the connection is already bound"
	}
	b.nodeID, b.notAfter = resp.NodeId, cert.NotAfter
	return ""
}

// samePublicKey says whether cert certifies pub.
func samePublicKey(cert *x509.Certificate, pub crypto.PublicKey) bool {
	k, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(pub)
}
