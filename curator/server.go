package curator

import (
	"context"
	"crypto/tls"
	"fmt"
	"runtime"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
	"github.com/curatorproject/curator/transport"
)

// serverTLS: the node certificate with the CA in its chain, so that a
// joining node can pin the CA by the fingerprint in its token, read at each
// handshake so that a renewed one is served at once; client certificates
// are verified when given (Register comes without one) and checked per
// method by authorize.
func (s *Service) serverTLS() *tls.Config {
	cfg := pki.ServerTLSFrom(s.cfg.Certs, s.cfg.CA)
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	s.tickets.Serve(cfg)
	return cfg
}

// serverReadBuffer is the read buffer of each connection the gRPC server
// holds.
const serverReadBuffer = 4 << 10

// The server works on at most one TLS handshake at once for every two
// CPUs it may use (at least one), and closes a connection that waits
// longer than handshakeWait for its turn (transport.LimitHandshakes): well
// within a client's connect timeout, so that a connection waits or is
// told at once, never both. A slot is CPU at work: the other half is left
// to what must not wait behind a reconnecting fleet (the embedded etcd's
// raft loop and the election lease's renewals, the heartbeats of the
// nodes already in session). With four slots per CPU, the new leader of
// a 10,000-node failover on two CPUs doubted its lease within 3 s of the
// kill (one run of one; with one per two CPUs, one run of three).
const handshakeWait = 500 * time.Millisecond

// handshakeSlots is how many TLS handshakes a server works on at once.
func handshakeSlots() int { return max(1, runtime.GOMAXPROCS(0)/2) }

func (s *Service) runGRPC(ctx context.Context) error {
	lis, err := s.listen("tcp", s.cfg.Address)
	if err != nil {
		return fmt.Errorf("curator listen on %s: %w (is another curator or agent using this address?)", s.cfg.Address, err)
	}
	srv := grpc.NewServer(append(transport.ServerOptions(),
		grpc.Creds(transport.LimitHandshakes(credentials.NewTLS(s.serverTLS()),
			handshakeSlots(), s.shedAfter, func() {
				s.metrics.HandshakesShed.Inc()
				s.knocks.Note(s.cfg.Now())
			})),
		// A manager holds a connection per node whose session goes
		// through it, thousands, each idle but for a heartbeat an
		// interval: a small read buffer (messages are tiny) instead of
		// 32 KiB per connection for good (gRPC's write buffers come
		// from a pool already).
		grpc.ReadBufferSize(serverReadBuffer),
		// Each connection's binding to a joined node (conn_binding.go).
		grpc.StatsHandler(bindingStats{accepted: s.metrics.Connections}),
		grpc.UnaryInterceptor(s.unaryInterceptor),
		grpc.StreamInterceptor(s.streamInterceptor),
	)...)
	pb.RegisterManagementServer(srv, &managementAPI{s: s})
	pb.RegisterCuratorServer(srv, &nodeAPI{s: s})
	healthpb.RegisterHealthServer(srv, s.health)
	reflection.Register(srv)
	s.updateHealth()
	defer s.health.Shutdown()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	supervisor.Signal(ctx, supervisor.Healthy)
	select {
	case err := <-errc:
		return fmt.Errorf("gRPC server: %w", err)
	case <-ctx.Done():
	}
	s.health.Shutdown()
	// Streams (heartbeats, watches) never end on their own: give unary
	// calls a moment, then cut the rest.
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Second):
		srv.Stop()
		<-stopped
	}
	<-errc
	return ctx.Err()
}

// The standard gRPC health service and server reflection, so that
// grpcurl and load balancers work with the admin certificate (or any
// certificate of the cluster: see authorize). Both are answered by the
// manager called, never forwarded.
//
// Health: the server as a whole ("") is SERVING while the curator runs.
// Its two services, curator.v1.Curator and curator.v1.Management, are
// SERVING while a call to them is served or forwarded here: this curator
// leads (and is not in doubt about its lease), or it knows a leader to
// forward to and its last quorum check did not find the quorum lost. The
// status is brought up to date after each quorum check (every
// quorumCheckEvery), and is NOT_SERVING once the curator stops.

// curatorServices are the services whose health tells whether calls are
// served.
var curatorServices = []string{pb.Curator_ServiceDesc.ServiceName, pb.Management_ServiceDesc.ServiceName}

// localMethod says whether a method is answered by the manager called,
// whoever leads: the health and reflection services.
func localMethod(method string) bool {
	for _, svc := range []string{healthpb.Health_ServiceDesc.ServiceName, "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"} {
		if strings.HasPrefix(method, "/"+svc+"/") {
			return true
		}
	}
	return false
}

// servingStatus is the health of the curator services (see above).
func (s *Service) servingStatus() healthpb.HealthCheckResponse_ServingStatus {
	if s.IsLeader() {
		return healthpb.HealthCheckResponse_SERVING
	}
	if s.quorumLost() != nil {
		return healthpb.HealthCheckResponse_NOT_SERVING
	}
	if li := s.fwd.knownLeader(); li != nil && li.id != s.cfg.NodeID {
		return healthpb.HealthCheckResponse_SERVING
	}
	return healthpb.HealthCheckResponse_NOT_SERVING
}

// updateHealth sets the health of the curator services.
func (s *Service) updateHealth() {
	st := s.servingStatus()
	for _, svc := range curatorServices {
		s.health.SetServingStatus(svc, st)
	}
}
