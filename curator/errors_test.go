package curator

import (
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/curator/spec"
)

// No leader elected is Unavailable marked NoLeaderReason, so that a client
// can tell a hand-over (wait) from a manager that is down (try another).
func TestToStatusNoLeader(t *testing.T) {
	for _, err := range []error{spec.ErrNoLeader, fmt.Errorf("%w: an election is under way", spec.ErrNoLeader)} {
		st := status.Convert(toStatus(err))
		if st.Code() != codes.Unavailable {
			t.Errorf("%v: code %v, want Unavailable", err, st.Code())
		}
		marked := false
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason == spec.NoLeaderReason && info.Domain == spec.ErrorDomain {
				marked = true
			}
		}
		if !marked {
			t.Errorf("%v: status %v has no %s detail", err, st, spec.NoLeaderReason)
		}
	}
}
