package node

import (
	"context"
	"testing"

	"go.uber.org/zap/zaptest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

// TestLeaveCalls: what the leader answers a leaving node, call after call,
// and what the node makes of it. A leader that leaves resigns (demoting);
// its next call may go through its own curator, demoted meanwhile, which
// the new leader refuses to take calls from (PermissionDenied, marked not
// a manager): that is no answer to the leave, which is asked again. Taken
// as one (CI, TestNodeGuardsRemoveLeave), the node wiped itself while its
// record stayed, a down worker.
func TestLeaveCalls(t *testing.T) {
	st, err := status.New(codes.PermissionDenied, "node m1 is not a manager (any more) and may not forward calls: ask another manager").
		WithDetails(&errdetails.ErrorInfo{Reason: spec.NotManagerReason, Domain: spec.ErrorDomain})
	if err != nil {
		t.Fatal(err)
	}
	notManager := st.Err()
	removed := status.Error(codes.PermissionDenied, "node m1 is not a member of this cluster (was it removed?)")
	demoting := &pb.NodeLeaveResponse{Outcome: "demoting", Message: "this node led the curators: it resigned"}
	left := &pb.NodeLeaveResponse{Outcome: "left", Message: "node m1 left the cluster"}
	type answer struct {
		resp *pb.NodeLeaveResponse
		err  error
	}
	for _, tc := range []struct {
		name    string
		answers []answer
		// want: the answer returned (nil: left, its answer lost), or
		// wantCode, the error's.
		want     *pb.NodeLeaveResponse
		wantCode codes.Code
	}{
		{"a worker leaves", []answer{{left, nil}}, left, codes.OK},
		{"a leader through its demoted curator", []answer{{demoting, nil}, {nil, notManager}, {nil, notManager}, {left, nil}}, left, codes.OK},
		{"through a demoted manager before any answer", []answer{{nil, notManager}, {left, nil}}, left, codes.OK},
		{"the answer to the leave lost", []answer{{demoting, nil}, {nil, removed}}, nil, codes.OK},
		{"a leader change, then the answer lost", []answer{{nil, status.Error(codes.Unavailable, "no leader")}, {nil, removed}}, nil, codes.OK},
		{"refused before any call went through", []answer{{nil, removed}}, nil, codes.PermissionDenied},
		{"the last manager without --force", []answer{{nil, status.Error(codes.FailedPrecondition, "node m1 is the last manager")}}, nil, codes.FailedPrecondition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			resp, err := leaveCalls(context.Background(), zaptest.NewLogger(t), func(context.Context) (*pb.NodeLeaveResponse, error) {
				if calls == len(tc.answers) {
					t.Fatalf("called %d times, after the last answer", calls+1)
				}
				a := tc.answers[calls]
				calls++
				return a.resp, a.err
			})
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("error %v, want code %v", err, tc.wantCode)
			}
			if resp != tc.want {
				t.Errorf("answer %v, want %v", resp, tc.want)
			}
			if calls != len(tc.answers) {
				t.Errorf("called %d times, want %d", calls, len(tc.answers))
			}
		})
	}
}
