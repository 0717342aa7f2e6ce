package curator

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// TestCommitGroupReplaceAfterFloor: a group committed with replace_after
// below its floor (the leader's down-after plus a heartbeat interval) is
// refused, the floor named, and nothing is stored; at the floor it is
// taken. A group stored below the floor (before there was one) may keep
// its value through a commit that changes something else, but not be
// given another below it.
func TestCommitGroupReplaceAfterFloor(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, _ := c.dialFirst()
	api := pb.NewManagementClient(admin)
	floor := spec.ReplaceAfterFloor(testDownAfter, testHeartbeat)
	groupSpec := func(name string, size uint32, replaceAfter time.Duration) *pb.GroupSpec {
		t.Helper()
		s, err := spec.ParseGroupSpec([]byte("name: " + name + "\nsize: 0\nroles: [worker]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: " + t.TempDir() + "}}\n"))
		if err != nil {
			t.Fatal(err)
		}
		s.Size, s.ReplaceAfter = size, durationpb.New(replaceAfter)
		return s
	}
	refused := func(s *pb.GroupSpec) {
		t.Helper()
		_, err := api.CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: s})
		want := "replace_after: " + s.ReplaceAfter.AsDuration().String() + " is below its floor " + floor.String() +
			" (the cluster's --down-after " + testDownAfter.String() + " plus --heartbeat-interval " + testHeartbeat.String() + ")"
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) {
			t.Errorf("commit with replace_after %v: %v, want InvalidArgument with %q", s.ReplaceAfter.AsDuration(), err, want)
		}
	}

	refused(groupSpec("w", 0, time.Nanosecond))
	refused(groupSpec("w", 0, floor-time.Millisecond))
	if _, err := api.GetGroup(callCtx(t), &pb.GetGroupRequest{Name: "w"}); status.Code(err) != codes.NotFound {
		t.Errorf("after the refusals, get group w: %v, want NotFound: nothing stored", err)
	}
	if _, err := api.CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: groupSpec("w", 0, floor)}); err != nil {
		t.Errorf("commit at the floor %v: %v", floor, err)
	}

	// A group stored before the floor, with 1ns.
	old := groupSpec("old", 0, time.Nanosecond)
	spec.NormalizeGroupSpec(old)
	data, err := proto.Marshal(&pb.Group{Spec: old, ConfigSha: spec.GroupConfigSHA(old.Template)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.cli.Put(context.Background(), store.Keys.Group("old"), string(data)); err != nil {
		t.Fatal(err)
	}
	// Its max_parallel changed, not its size: a machine made here would
	// run this test binary.
	kept := proto.Clone(old).(*pb.GroupSpec)
	kept.MaxParallel = 2
	if _, err := api.CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: kept}); err != nil {
		t.Errorf("a stored group's max_parallel changed, its replace_after 1ns kept: %v", err)
	}
	other := proto.Clone(kept).(*pb.GroupSpec)
	other.ReplaceAfter = durationpb.New(time.Millisecond)
	refused(other)
	g, err := api.GetGroup(callCtx(t), &pb.GetGroupRequest{Name: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.GetGroup().GetSpec().GetReplaceAfter().AsDuration(); got != time.Nanosecond {
		t.Errorf("group old's replace_after %v after the refusal, want 1ns kept", got)
	}
}
