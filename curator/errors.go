package curator

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors that callers decide on. Handlers wrap them with context;
// toStatus maps them to gRPC codes, once, at the boundary.
var (
	// ErrNotLeader: this curator is not (or no longer) the leader, so a
	// write was refused by the fence.
	ErrNotLeader = errors.New("this curator is not the leader")
	// ErrNoLeader: no leader is elected right now.
	ErrNoLeader = errors.New("no curator leader is elected right now: retry in a few seconds")
	// ErrQuorum: too few etcd voters answer for etcd to elect a leader;
	// nothing can be read or written until enough come back (see
	// CheckQuorum).
	ErrQuorum   = errors.New("quorum lost")
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request is malformed.
	ErrInvalid = errors.New("invalid request")
	// ErrDenied: the caller may not do this.
	ErrDenied = errors.New("permission denied")
	// ErrNotManager: a call was forwarded by a node that is not a manager
	// (a worker, or a manager demoted a moment ago): refused, and marked so
	// that a client asks another manager.
	ErrNotManager = errors.New("not a manager")
	// ErrExists: the thing to create exists already.
	ErrExists = errors.New("already exists")
	// ErrPrecondition: the cluster is not in a state that allows this.
	ErrPrecondition = errors.New("refused")
	// ErrNodeGone: a node record to change was removed meanwhile.
	ErrNodeGone = errors.New("the node was removed meanwhile")
	// ErrAddressHeld: a machine made by a provider joins at an address
	// that a node record still names. The provider handed the address
	// out because no machine of its holds it any more, so the record is
	// stale and goes soon (its group removes it once it is down): the
	// joiner is to try again, not give up.
	ErrAddressHeld = errors.New("address still held")
)

// The details of a gRPC status that says the quorum is lost: an
// errdetails.ErrorInfo with this reason and domain.
const (
	ErrorDomain      = "curator.v1"
	QuorumLostReason = "QUORUM_LOST"
	// NotManagerReason marks a PermissionDenied that a forwarding node,
	// not the caller, earned: the caller is to ask another manager.
	NotManagerReason = "FORWARDER_NOT_MANAGER"
	// AddressHeldReason marks an Unavailable join: the joiner's address is
	// still named by a stale node record (ErrAddressHeld).
	AddressHeldReason = "ADDRESS_HELD"
)

// toStatus turns an error from the curator into a gRPC status error.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, ErrQuorum) {
		// Unavailable, as the client should try another manager (one
		// across a partition may have the quorum), marked so that a client
		// that finds no better answer can say what happened.
		st, derr := status.New(codes.Unavailable, err.Error()).WithDetails(&errdetails.ErrorInfo{Reason: QuorumLostReason, Domain: ErrorDomain})
		if derr != nil {
			return status.Error(codes.Unavailable, err.Error())
		}
		return st.Err()
	}
	code := codes.Internal
	switch {
	case errors.Is(err, ErrAddressHeld):
		st, derr := status.New(codes.Unavailable, err.Error()).WithDetails(&errdetails.ErrorInfo{Reason: AddressHeldReason, Domain: ErrorDomain})
		if derr != nil {
			return status.Error(codes.Unavailable, err.Error())
		}
		return st.Err()
	case errors.Is(err, ErrNotManager):
		st, derr := status.New(codes.PermissionDenied, err.Error()).WithDetails(&errdetails.ErrorInfo{Reason: NotManagerReason, Domain: ErrorDomain})
		if derr != nil {
			return status.Error(codes.PermissionDenied, err.Error())
		}
		return st.Err()
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrNoLeader):
		code = codes.Unavailable
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrNodeGone):
		code = codes.NotFound
	case errors.Is(err, ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, ErrDenied):
		code = codes.PermissionDenied
	case errors.Is(err, ErrExists):
		code = codes.AlreadyExists
	case errors.Is(err, ErrPrecondition):
		code = codes.FailedPrecondition
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, err.Error())
}
