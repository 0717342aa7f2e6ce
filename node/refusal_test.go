package node

import (
	"errors"
	"testing"

	"github.com/curatorproject/curator/curator/spec"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
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

// A refusal is warned about once, however each manager words it (the
// leader's "was removed", a follower's "is not a member"), and again
// only for another kind of refusal or after the leader accepted the node.
func TestRefusalWarnedOnce(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	lg := zap.New(core)
	skew, err := status.New(codes.PermissionDenied, "release v9.0.0 is outside the version policy").WithDetails(&errdetails.ErrorInfo{Reason: spec.ReleaseSkewReason, Domain: spec.ErrorDomain})
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{}
	warnings := func() int { return logs.FilterMessageSnippet("the cluster refuses this node").Len() }
	for _, tc := range []struct {
		manager string
		err     error
		before  func()
		want    int
	}{
		{"127.0.0.1:7000", status.Error(codes.PermissionDenied, "node x was removed from the cluster"), nil, 1},
		{"127.0.0.2:7000", status.Error(codes.PermissionDenied, "node x is not a member of this cluster (was it removed?)"), nil, 1},
		{"127.0.0.3:7000", status.Error(codes.Unavailable, "connection refused"), nil, 1},
		{"127.0.0.3:7000", status.Error(codes.NotFound, "node x: not found"), nil, 1},
		{"127.0.0.1:7000", skew.Err(), nil, 2},
		{"127.0.0.1:7000", status.Error(codes.PermissionDenied, "node x was removed from the cluster"), a.refusalOver, 3},
	} {
		if tc.before != nil {
			tc.before()
		}
		a.logStreamError(lg, "session with "+tc.manager, tc.err)
		if got := warnings(); got != tc.want {
			t.Errorf("after %v via %s: %d warnings, want %d", tc.err, tc.manager, got, tc.want)
		}
	}
}
