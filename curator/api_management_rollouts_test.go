package curator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

func TestResolveConfigSHA(t *testing.T) {
	known := []string{
		"abcd111111111111111111111111111111111111111111111111111111111111",
		"abcd222222222222222222222222222222222222222222222222222222222222",
		"ef00000000000000000000000000000000000000000000000000000000000000",
		"ef00000000000000000000000000000000000000000000000000000000000000", // twice: one SHA
	}
	for _, tc := range []struct {
		prefix, want, err string
		sentinel          error
	}{
		{prefix: "abcd1", want: known[0]},
		{prefix: "ABCD2222", want: known[1]},
		{prefix: known[0], want: known[0]},
		{prefix: "ef00", want: known[2]},
		{prefix: "abcd", err: "abcd is the beginning of more than one config SHA of group w (abcd11111111, abcd22222222): give more digits", sentinel: spec.ErrInvalid},
		{prefix: "1234", err: "no config SHA of group w begins with 1234 (`curator rollout history w` lists them)", sentinel: spec.ErrNotFound},
		{prefix: "abc", err: `config SHA "abc": want at least 4 hex digits`, sentinel: spec.ErrInvalid},
		{prefix: "abcz", err: `config SHA "abcz": want at least 4 hex digits`, sentinel: spec.ErrInvalid},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			got, err := resolveConfigSHA("w", tc.prefix, known)
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Errorf("resolve %s: %s, %v; want %s", tc.prefix, got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, tc.sentinel) {
				t.Errorf("resolve %s: %s, %v; want an error %v containing %q", tc.prefix, got, err, tc.sentinel, tc.err)
			}
		})
	}
}

func TestRolloutHistory(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	tv := func(v string) *pb.InstanceTemplate { return &pb.InstanceTemplate{Version: v} }
	group := func(sha, v string) *pb.Group {
		return &pb.Group{Spec: &pb.GroupSpec{Name: "w", Template: tv(v)}, ConfigSha: sha, Created: at}
	}
	first := rolloutHistory(group("s1", "v1"), nil)
	want := []*pb.RolloutSummary{{Sha: "s1", Template: tv("v1"), Started: at, Reason: "the group's config before any rollout"}}
	if d := cmp.Diff(want, first, protocmp.Transform()); d != "" {
		t.Errorf("the first config (-want +got):\n%s", d)
	}
	prev := &pb.Rollout{TargetSha: "s2", State: pb.RolloutState_ROLLOUT_STATE_FAILED, Reason: "bad", Started: at, Finished: at, History: first}
	second := rolloutHistory(group("s2", "v2"), prev)
	want = append([]*pb.RolloutSummary{{Sha: "s2", Template: tv("v2"), State: pb.RolloutState_ROLLOUT_STATE_FAILED, Reason: "bad", Started: at, Finished: at}}, first...)
	if d := cmp.Diff(want, second, protocmp.Transform()); d != "" {
		t.Errorf("after a failed rollout (-want +got):\n%s", d)
	}
	// A rollout still rolling when replaced says so; the history is bounded.
	h := second
	for i := 0; i < 2*maxRolloutHistory; i++ {
		h = rolloutHistory(group("s", "v"), &pb.Rollout{TargetSha: "s", State: pb.RolloutState_ROLLOUT_STATE_ROLLING, History: h})
	}
	if len(h) != maxRolloutHistory || h[0].Reason != "replaced by a new config before it ended" {
		t.Errorf("history of %d, the newest %v: want %d, replaced", len(h), h[0], maxRolloutHistory)
	}
}
