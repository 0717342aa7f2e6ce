package spec

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
)

func TestRolloutHistory(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	tv := func(v string) *pb.InstanceTemplate { return &pb.InstanceTemplate{Version: v} }
	group := func(sha, v string) *pb.Group {
		return &pb.Group{Spec: &pb.GroupSpec{Name: "w", Template: tv(v)}, ConfigSha: sha, Created: at}
	}
	first := RolloutHistory(group("s1", "v1"), nil)
	want := []*pb.RolloutSummary{{Sha: "s1", Template: tv("v1"), Started: at, Reason: "the group's config before any rollout"}}
	if d := cmp.Diff(want, first, protocmp.Transform()); d != "" {
		t.Errorf("the first config (-want +got):\n%s", d)
	}
	prev := &pb.Rollout{TargetSha: "s2", State: pb.RolloutState_ROLLOUT_STATE_FAILED, Reason: "bad", Started: at, Finished: at, History: first}
	second := RolloutHistory(group("s2", "v2"), prev)
	want = append([]*pb.RolloutSummary{{Sha: "s2", Template: tv("v2"), State: pb.RolloutState_ROLLOUT_STATE_FAILED, Reason: "bad", Started: at, Finished: at}}, first...)
	if d := cmp.Diff(want, second, protocmp.Transform()); d != "" {
		t.Errorf("after a failed rollout (-want +got):\n%s", d)
	}
	// A rollout still rolling when replaced says so; the history is bounded.
	h := second
	for i := 0; i < 2*MaxRolloutHistory; i++ {
		h = RolloutHistory(group("s", "v"), &pb.Rollout{TargetSha: "s", State: pb.RolloutState_ROLLOUT_STATE_ROLLING, History: h})
	}
	if len(h) != MaxRolloutHistory || h[0].Reason != "replaced by a new config before it ended" {
		t.Errorf("history of %d, the newest %v: want %d, replaced", len(h), h[0], MaxRolloutHistory)
	}
}
