package consensus

import (
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
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

// survivesRemoval is a unary interceptor of the embedded etcd's gRPC server
// that answers that one panic with Unavailable: the member is being removed
// and stops on its own a moment later (Run ends with ErrRemoved), where the
// panic took the agent's whole process with it. Any other panic is etcd's
// and goes on.
func survivesRemoval() grpc.UnaryServerInterceptor {
	return recovery.UnaryServerInterceptor(recovery.WithRecoveryHandler(func(p any) error {
		if msg, ok := p.(string); ok && msg == removedMemberPanic {
			return status.Error(codes.Unavailable, "etcdserver: this member is being removed from the cluster")
		}
		panic(p)
	}))
}
