package curator

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
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

// TestCancelFailedRollout: a cancel of a rollout paused by its failure
// (failure_action pause) puts the previous template back, as a rollback,
// in one transaction with the cancel's event, so that the group's next
// repair makes a machine that works; a cancel of one paused by an
// operator leaves the template as it is; one that cannot go back (a
// failed rollback, no previous config) is refused, saying how, and
// changes nothing.
func TestCancelFailedRollout(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	admin, _ := c.dialFirst()
	api := pb.NewManagementClient(admin)
	good, bad := &pb.InstanceTemplate{Version: "v1"}, &pb.InstanceTemplate{Version: "v2", Args: []string{"--no-such-flag"}}
	goodSHA, badSHA := spec.GroupConfigSHA(good), spec.GroupConfigSHA(bad)
	for _, tc := range []struct {
		name string
		// the paused rollout to the bad template
		failures   uint32
		previous   *pb.InstanceTemplate
		rollbackOf string
		// want: the group's template after, the rollout's state, and an
		// error saying this
		want      *pb.InstanceTemplate
		wantState pb.RolloutState
		err       string
	}{
		{name: "paused by its failure: rolls back", failures: 1, previous: good, want: good, wantState: pb.RolloutState_ROLLOUT_STATE_ROLLING},
		{name: "paused by an operator: cancelled as it is", failures: 0, previous: good, want: bad, wantState: pb.RolloutState_ROLLOUT_STATE_CANCELLED},
		{name: "a failed rollback: refused", failures: 1, previous: good, rollbackOf: goodSHA, want: bad, wantState: pb.RolloutState_ROLLOUT_STATE_PAUSED,
			err: "is a rollback from " + spec.ShortSHA(goodSHA) + ", and it failed too (machine x failed): a cancel would leave the group on a config that fails. Go back to a config that works with `curator rollout undo w --to SHA`"},
		{name: "no previous config: refused", failures: 1, want: bad, wantState: pb.RolloutState_ROLLOUT_STATE_PAUSED,
			err: "failed (machine x failed), and no previous config is kept to go back to: a cancel would leave the group on a config that fails. Commit a fixed template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A group whose spec names no provider: its loop leaves its
			// machines alone.
			putGroup(t, c, &pb.Group{Spec: &pb.GroupSpec{Name: "w", Size: 2, Template: bad}, ConfigSha: badSHA, SpecRevision: 5},
				&pb.Rollout{Group: "w", TargetSha: badSHA, State: pb.RolloutState_ROLLOUT_STATE_PAUSED, Total: 2, Failures: tc.failures, LastFailure: "machine x failed",
					Reason: "machine x failed", PreviousSha: spec.GroupConfigSHA(tc.previous), PreviousTemplate: tc.previous, RollbackOf: tc.rollbackOf})
			r, err := api.ChangeRollout(callCtx(t), &pb.ChangeRolloutRequest{Group: "w", Action: "cancel"})
			if tc.err != "" {
				if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("cancel: %v, want FailedPrecondition saying %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatalf("cancel: %v", err)
			}
			g, err := store.GroupLoad(context.Background(), c.cli, "w")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, g.Spec.Template, protocmp.Transform()); d != "" || g.ConfigSha != spec.GroupConfigSHA(tc.want) {
				t.Errorf("the group's template after the cancel (-want +got):\n%s(config %s)", d, spec.ShortSHA(g.ConfigSha))
			}
			// A rollback changes the spec: a describe from before it is
			// stale after it (group commit's revision check).
			if wantRev := map[bool]uint64{false: 5, true: 6}[tc.want == good]; g.SpecRevision != wantRev {
				t.Errorf("the group's revision after the cancel: %d, want %d", g.SpecRevision, wantRev)
			}
			stored, _, err := store.RolloutLoad(context.Background(), c.cli, "w")
			if err != nil {
				t.Fatal(err)
			}
			if stored.State != tc.wantState {
				t.Errorf("rollout %v, want %v", stored.State, tc.wantState)
			}
			if tc.wantState != pb.RolloutState_ROLLOUT_STATE_ROLLING {
				return
			}
			if r.RollbackOf != badSHA || r.TargetSha != goodSHA || stored.TargetSha != goodSHA {
				t.Errorf("the cancel answered %+v, stored %+v: want a rollback from %s to %s", r, stored, spec.ShortSHA(badSHA), spec.ShortSHA(goodSHA))
			}
			if h := stored.History; len(h) == 0 || h[0].Sha != badSHA || h[0].State != pb.RolloutState_ROLLOUT_STATE_CANCELLED || !strings.Contains(h[0].Reason, "cancelled by an operator after it failed: machine x failed") {
				t.Errorf("history %v: want the failed rollout first, cancelled after it failed", h)
			}
			if evs := eventsOfGroup(t, c, "cancel-rollout", "w"); len(evs) != 1 || !strings.Contains(evs[0].Reason, "paused by its failure (machine x failed), was cancelled by an operator: the group goes back to its previous config "+spec.ShortSHA(goodSHA)) {
				t.Errorf("cancel events %v", evs)
			}
		})
	}
}
