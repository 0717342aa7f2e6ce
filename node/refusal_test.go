package node

import (
	"errors"
	"testing"

	"github.com/curatorproject/curator/curator/spec"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A refusal is the cluster refusing this node, not a forwarder that cannot
// forward nor a manager going away.
func TestIsRefusal(t *testing.T) {
	notManager, err := status.New(codes.PermissionDenied, "not a manager").WithDetails(&errdetails.ErrorInfo{Reason: spec.NotManagerReason, Domain: spec.ErrorDomain})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"removed", status.Error(codes.PermissionDenied, "node x is not a member of this cluster"), true},
		{"not found", status.Error(codes.NotFound, "node x: not found"), true},
		{"bad certificate", status.Error(codes.Unauthenticated, "no certificate"), true},
		{"forwarder not a manager", notManager.Err(), false},
		{"manager gone", status.Error(codes.Unavailable, "connection refused"), false},
		{"no answer", errors.New("heartbeat 3 unanswered"), false},
	} {
		if got := isRefusal(tc.err); got != tc.want {
			t.Errorf("%s: isRefusal = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A session's end is counted by reason: moved off the leader, refused by
// the cluster, or lost (any other).
func TestSessionEndReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{ErrSessionMoved, "moved"},
		{status.Error(codes.PermissionDenied, "node x was removed from the cluster"), "refused"},
		{status.Error(codes.Unavailable, "connection refused"), "lost"},
		{errors.New("heartbeat 3 unanswered"), "lost"},
	} {
		if got := sessionEndReason(tc.err); got != tc.want {
			t.Errorf("sessionEndReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
