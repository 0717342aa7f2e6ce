package consensus

import (
	"sync/atomic"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// removedMemberPanic is what etcd panics with when a call asks whether this
// member is a learner while the member's own removal is being applied
// (RaftCluster.IsLocalMemberLearner; etcd-io/etcd#21966, open in v3.7.3).
// Maintenance.Status asks it, and every manager's quorum check calls Status
// on each member.
const removedMemberPanic = "failed to find local ID in cluster members"

// stoppingServer is the embedded etcd server once it runs, for
// survivesRemoval to ask whether it is stopping.
type stoppingServer struct {
	server atomic.Pointer[etcdserver.EtcdServer]
}

// stopping says whether the server has begun to stop: from then on its
// backend may be closed under a call in flight.
func (s *stoppingServer) stopping() bool {
	srv := s.server.Load()
	if srv == nil {
		return false
	}
	select {
	case <-srv.StoppingNotify():
		return true
	default:
		return false
	}
}

// survivesRemoval is a unary interceptor of the embedded etcd's gRPC server
// that answers with Unavailable two panics of a member on its way out,
// where each took the agent's whole process with it: the one above, while
// the member's removal is applied, and any panic of a call that raced the
// server's stop (Maintenance.Status reading the storage version from a
// backend the stop had closed: a nil pointer in bbolt, seen in
// TestRemoveMember). The member stops on its own a moment later (Run ends
// with ErrRemoved, or its stop goes on). Any other panic is etcd's and
// goes on.
func survivesRemoval(s *stoppingServer) grpc.UnaryServerInterceptor {
	return recovery.UnaryServerInterceptor(recovery.WithRecoveryHandler(func(p any) error {
		if msg, ok := p.(string); ok && msg == removedMemberPanic {
			return status.Error(codes.Unavailable, "etcdserver: this member is being removed from the cluster")
		}
		if s.stopping() {
			return status.Error(codes.Unavailable, "etcdserver: this member is stopping")
		}
		panic(p)
	}))
}
