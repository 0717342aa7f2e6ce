package spec

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/curatorproject/curator/proto"
)

// TestReplaceAfterFloor: replace_after below down-after plus a heartbeat
// interval is refused, naming the field, the value, the floor and why.
func TestReplaceAfterFloor(t *testing.T) {
	for _, tc := range []struct {
		replaceAfter time.Duration
		want         string // empty: accepted
	}{
		{time.Nanosecond, "replace_after: 1ns is below its floor 6s (the cluster's --down-after 5s plus --heartbeat-interval 1s): " +
			"nodes that stop together are marked down up to an interval apart, and a shorter replace_after would replace the first of them " +
			"before the others count against max_unhealthy; give at least 6s"},
		{5999 * time.Millisecond, "replace_after: 5.999s is below its floor 6s"},
		{6 * time.Second, ""},
		{time.Minute, ""},
	} {
		s := &pb.GroupSpec{Name: "w", ReplaceAfter: durationpb.New(tc.replaceAfter)}
		err := CheckReplaceAfterFloor(s, 5*time.Second, time.Second)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("replace_after %v: %v, want it accepted", tc.replaceAfter, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("replace_after %v: %v, want an error with %q", tc.replaceAfter, err, tc.want)
		}
	}
}
