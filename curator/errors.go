package curator

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/curator/spec"
)

// comeBack is a refusal that tells the caller when to try again: its
// status carries an errdetails.RetryInfo of wait, which the agent honours
// (its reconnection, node/reconnect.go).
type comeBack struct {
	err  error
	wait time.Duration
}

func (c *comeBack) Error() string { return c.err.Error() }
func (c *comeBack) Unwrap() error { return c.err }

// withComeBack makes err say when to come back.
func withComeBack(err error, wait time.Duration) error {
	if err == nil {
		return nil
	}
	return &comeBack{err: err, wait: wait}
}

// markedErrors are the errors whose status carries a reason a client
// decides on (an errdetails.ErrorInfo), first match wins.
var markedErrors = []struct {
	err    error
	code   codes.Code
	reason string
}{
	// Unavailable, as the client should try another manager (one across
	// a partition may have the quorum), marked so that a client that
	// finds no better answer can say what happened.
	{spec.ErrQuorum, codes.Unavailable, spec.QuorumLostReason},
	{spec.ErrAddressHeld, codes.Unavailable, spec.AddressHeldReason},
	{spec.ErrNotManager, codes.PermissionDenied, spec.NotManagerReason},
	{spec.ErrSessionsPaced, codes.Unavailable, spec.SessionsPacedReason},
	{spec.ErrNoLeader, codes.Unavailable, spec.NoLeaderReason},
	{spec.ErrReleaseSkew, codes.PermissionDenied, spec.ReleaseSkewReason},
}

// errorCodes are the codes of the other errors, first match wins; any
// other error is Internal.
var errorCodes = []struct {
	err  error
	code codes.Code
}{
	{spec.ErrNotLeader, codes.Unavailable},
	{spec.ErrNotFound, codes.NotFound},
	{spec.ErrNodeGone, codes.NotFound},
	{spec.ErrNodeChanged, codes.Aborted},
	{spec.ErrInvalid, codes.InvalidArgument},
	{spec.ErrDenied, codes.PermissionDenied},
	{spec.ErrExists, codes.AlreadyExists},
	{spec.ErrPrecondition, codes.FailedPrecondition},
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
}

// toStatus turns an error from the curator into a gRPC status error.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	var cb *comeBack
	if errors.As(err, &cb) {
		st := status.Convert(toStatus(cb.err))
		if st.Code() == codes.OK {
			return nil
		}
		p := st.Proto()
		ri, aerr := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(cb.wait)})
		if aerr != nil {
			return st.Err()
		}
		p.Details = append(p.Details, ri)
		return status.FromProto(p).Err()
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, m := range markedErrors {
		if errors.Is(err, m.err) {
			return marked(m.code, m.reason, err)
		}
	}
	code := codes.Internal
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			code = c.code
			break
		}
	}
	return status.Error(code, err.Error())
}

// marked is err as a status of code, marked with reason (an
// errdetails.ErrorInfo in the curator's domain) for a client to decide on.
func marked(code codes.Code, reason string, err error) error {
	st, derr := status.New(code, err.Error()).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: spec.ErrorDomain})
	if derr != nil {
		return status.Error(code, err.Error())
	}
	return st.Err()
}
