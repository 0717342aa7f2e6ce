package curator

import (
	"context"
	"errors"

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
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request is malformed.
	ErrInvalid = errors.New("invalid request")
	// ErrDenied: the caller may not do this.
	ErrDenied = errors.New("permission denied")
	// ErrExists: the thing to create exists already.
	ErrExists = errors.New("already exists")
	// ErrPrecondition: the cluster is not in a state that allows this.
	ErrPrecondition = errors.New("refused")
)

// toStatus turns an error from the curator into a gRPC status error.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrNoLeader):
		code = codes.Unavailable
	case errors.Is(err, ErrNotFound):
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
