package curator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/internal/testenv"
	pb "github.com/curatorproject/curator/proto"
)

// upgradeGroups commits, as admin, a group m with the consensus role and
// a group w of workers, both of size 0 on binary a (the fixture's), and
// suspends those named in suspended (their rollouts then stay rolling).
func (f *releaseFixture) upgradeGroups(t *testing.T, suspended ...string) {
	t.Helper()
	for _, name := range []string{"w", "m"} {
		gs := f.spec(t, f.a)
		gs.Name = name
		if name == "m" {
			gs.Roles = []pb.Role{pb.Role_ROLE_CONSENSUS}
		}
		if _, err := f.commit(t, f.admin, gs); err != nil {
			t.Fatalf("commit %s: %v", name, err)
		}
	}
	for _, name := range suspended {
		if _, err := f.admin.SuspendGroup(callCtx(t), &pb.SuspendGroupRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *releaseFixture) group(t *testing.T, name string) *pb.Group {
	t.Helper()
	g, err := store.GroupLoad(context.Background(), f.c.cli, name)
	if err != nil || g == nil {
		t.Fatalf("load group %s: %v, %v", name, g, err)
	}
	return g
}

// waitUpgrade waits until the upgrade is no longer rolling, or until
// until says it is where the test wants it.
func (f *releaseFixture) waitUpgrade(t *testing.T, until func(*pb.Upgrade) bool) *pb.Upgrade {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		u, err := f.admin.GetUpgrade(callCtx(t), &pb.GetUpgradeRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if until(u) {
			return u
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upgrade is still %v: %v", u.State, u)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func upgradeEnded(u *pb.Upgrade) bool { return u.State != pb.UpgradeState_UPGRADE_STATE_ROLLING }

func groupStates(u *pb.Upgrade) string {
	var out []string
	for _, g := range u.Groups {
		out = append(out, g.Name+" "+g.State)
	}
	return strings.Join(out, ", ")
}

// TestUpgrade: `curator upgrade` takes every group onto the binary, the
// consensus group first, each only once the one before it rolled; an
// operator may not start one, nor may a second start beside it; bad
// input is refused and changes nothing; an upgrade to the release the
// groups run already is done at once.
func TestUpgrade(t *testing.T) {
	f := newReleaseFixture(t)
	f.upgradeGroups(t)

	for _, tc := range []struct {
		name string
		api  pb.ManagementClient
		req  *pb.StartUpgradeRequest
		code codes.Code
		say  string
	}{
		{"no release", f.admin, &pb.StartUpgradeRequest{}, codes.InvalidArgument, "name the release"},
		{"a relative binary", f.admin, &pb.StartUpgradeRequest{Binary: "curator"}, codes.InvalidArgument, "not an absolute path"},
		{"no such binary", f.admin, &pb.StartUpgradeRequest{Binary: f.b + ".missing"}, codes.InvalidArgument, "does not exist"},
		{"an operator", f.operator, &pb.StartUpgradeRequest{Binary: f.b}, codes.PermissionDenied, "admin"},
		{"no group of the image's provider", f.admin, &pb.StartUpgradeRequest{Image: "curator:next"}, codes.FailedPrecondition, "nothing to upgrade"},
	} {
		_, err := tc.api.StartUpgrade(callCtx(t), tc.req)
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.say) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.code, tc.say)
		}
	}
	if _, err := f.admin.GetUpgrade(callCtx(t), &pb.GetUpgradeRequest{}); status.Code(err) != codes.NotFound {
		t.Fatalf("after refused starts GetUpgrade says %v, want NotFound", err)
	}

	u, err := f.admin.StartUpgrade(callCtx(t), &pb.StartUpgradeRequest{Binary: f.b})
	if err != nil {
		t.Fatal(err)
	}
	if got := groupStates(u); got != "m waiting, w waiting" {
		t.Errorf("the upgrade's groups: %s, want m (consensus) first", got)
	}
	u = f.waitUpgrade(t, upgradeEnded)
	if u.State != pb.UpgradeState_UPGRADE_STATE_DONE || groupStates(u) != "m done, w done" {
		t.Fatalf("upgrade ended %v (%s): %s", u.State, groupStates(u), u.Reason)
	}
	for _, name := range []string{"m", "w"} {
		g := f.group(t, name)
		if g.Spec.Provider.GetProcess().Binary != f.b || g.Spec.Template.Release.GetDigest() != digestOf(t, f.b) {
			t.Errorf("group %s runs %s (%v) after the upgrade, want %s", name, g.Spec.Provider.GetProcess().Binary, g.Spec.Template.Release, f.b)
		}
	}
	// m's rollout ended before w was committed.
	evs, err := store.EventList(context.Background(), f.c.cli, 0)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range evs {
		if e.Loop == "upgrade" || e.Action == "end-rollout" || e.Action == "start-rollout" {
			order = append(order, e.Action+" "+firstWord(strings.TrimPrefix(e.Reason, "group ")))
		}
	}
	if got := strings.Join(order, "; "); !strings.Contains(got, "upgrade-group-done") || strings.Index(got, "start-rollout m") > strings.Index(got, "start-rollout w") {
		t.Errorf("the upgrade's events: %s", got)
	}

	// Again onto the same binary: nothing to roll.
	if _, err := f.admin.StartUpgrade(callCtx(t), &pb.StartUpgradeRequest{Binary: f.b}); err != nil {
		t.Fatal(err)
	}
	u = f.waitUpgrade(t, upgradeEnded)
	if u.State != pb.UpgradeState_UPGRADE_STATE_DONE || !strings.Contains(u.Groups[0].Reason, "already") {
		t.Errorf("an upgrade onto the release the groups run: %v %+v", u.State, u.Groups)
	}

	// The same bytes at another path: the groups point at it, and
	// nothing rolls (the SHA is the content's).
	before := f.group(t, "m")
	same := f.b + ".copy"
	data, err := os.ReadFile(f.b)
	if err != nil || os.WriteFile(same, data, 0o755) != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.StartUpgrade(callCtx(t), &pb.StartUpgradeRequest{Binary: same}); err != nil {
		t.Fatal(err)
	}
	u = f.waitUpgrade(t, upgradeEnded)
	after := f.group(t, "m")
	if u.State != pb.UpgradeState_UPGRADE_STATE_DONE || after.Spec.Provider.GetProcess().Binary != same || after.ConfigSha != before.ConfigSha {
		t.Errorf("an upgrade onto the same bytes at %s: %v (%s), group m runs %s, SHA %s (was %s)", same, u.State, groupStates(u),
			after.Spec.Provider.GetProcess().Binary, spec.ShortSHA(after.ConfigSha), spec.ShortSHA(before.ConfigSha))
	}
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, " ")
	return w
}

// TestUpgradeStops: an upgrade stops at a group whose rollout fails,
// saying where and why, and commits no group after it; a cancel stops
// the group in flight's rollout and leaves the groups after it as they
// were.
func TestUpgradeStops(t *testing.T) {
	f := newReleaseFixture(t)
	f.upgradeGroups(t, "m") // m's rollout stays rolling
	if _, err := f.admin.StartUpgrade(callCtx(t), &pb.StartUpgradeRequest{Binary: f.b}); err != nil {
		t.Fatal(err)
	}
	rolling := func(u *pb.Upgrade) bool { return u.Groups[0].State == leader.UpgradeRolling }
	u := f.waitUpgrade(t, rolling)
	if _, err := f.admin.StartUpgrade(callCtx(t), &pb.StartUpgradeRequest{Binary: f.a}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("a second upgrade beside the first: %v, want FailedPrecondition", err)
	}

	// m's rollout fails (as the group loop records a failure).
	r, _, err := store.RolloutLoad(context.Background(), f.c.cli, "m")
	if err != nil || r.TargetSha != u.Groups[0].TargetSha {
		t.Fatalf("m's rollout %v (%v), want one to %s", r, err, u.Groups[0].TargetSha)
	}
	r.State, r.Reason = pb.RolloutState_ROLLOUT_STATE_FAILED, "machine x failed"
	putGroup(t, f.c, f.group(t, "m"), r)
	u = f.waitUpgrade(t, upgradeEnded)
	if u.State != pb.UpgradeState_UPGRADE_STATE_FAILED || groupStates(u) != "m failed, w waiting" || !strings.Contains(u.Reason, "group m: its rollout to "+spec.ShortSHA(r.TargetSha)+" is failed: machine x failed") {
		t.Errorf("upgrade %v (%s): %s", u.State, groupStates(u), u.Reason)
	}
	if b := f.group(t, "w").Spec.Provider.GetProcess().Binary; b != f.a {
		t.Errorf("group w runs %s after the upgrade stopped before it, want %s", b, f.a)
	}

	// Back onto a; cancelled while m rolls.
	if _, err := f.admin.StartUpgrade(callCtx(t), &pb.StartUpgradeRequest{Binary: f.a}); err != nil {
		t.Fatal(err)
	}
	f.waitUpgrade(t, rolling)
	u, err = f.operator.CancelUpgrade(callCtx(t), &pb.CancelUpgradeRequest{})
	if err != nil {
		t.Fatalf("an operator's cancel: %v", err)
	}
	if u.State != pb.UpgradeState_UPGRADE_STATE_CANCELLED || groupStates(u) != "m cancelled, w cancelled" || !strings.Contains(u.Reason, "at group m") {
		t.Errorf("cancelled upgrade %v (%s): %s", u.State, groupStates(u), u.Reason)
	}
	if r, _, _ := store.RolloutLoad(context.Background(), f.c.cli, "m"); r.State != pb.RolloutState_ROLLOUT_STATE_CANCELLED {
		t.Errorf("m's rollout after the cancel: %v", r.State)
	}
	time.Sleep(3 * time.Second) // two of the loop's resyncs
	if b := f.group(t, "w").Spec.Provider.GetProcess().Binary; b != f.a {
		t.Errorf("group w runs %s after a cancel, want %s", b, f.a)
	}
	if _, err := f.admin.CancelUpgrade(callCtx(t), &pb.CancelUpgradeRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("a cancel with no upgrade under way: %v", err)
	}
}

// TestUpgradeAfterACrash: a leader that committed a group onto the
// release and died before the record said so leaves the group rolling,
// not done: the next finds it so, from the group and its rollout.
func TestUpgradeAfterACrash(t *testing.T) {
	f := newReleaseFixture(t)
	f.upgradeGroups(t, "m")
	// m committed onto b, its rollout rolling; the record still says
	// waiting, as a leader killed between the two writes left it.
	gs := proto.Clone(f.group(t, "m").Spec).(*pb.GroupSpec)
	gs.Provider.GetProcess().Binary = f.b
	if _, err := f.commit(t, f.admin, gs); err != nil {
		t.Fatal(err)
	}
	m := f.group(t, "m")
	data := &pb.Upgrade{Binary: f.b, State: pb.UpgradeState_UPGRADE_STATE_ROLLING, StartedBy: "admin",
		Groups: []*pb.UpgradeGroup{{Name: "m", State: leader.UpgradeWaiting}, {Name: "w", State: leader.UpgradeWaiting}}}
	raw, err := proto.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.cli.Put(context.Background(), store.Keys.Upgrade(), string(raw)); err != nil {
		t.Fatal(err)
	}
	u := f.waitUpgrade(t, func(u *pb.Upgrade) bool { return u.Groups[0].State != leader.UpgradeWaiting })
	if u.Groups[0].State != leader.UpgradeRolling || u.Groups[0].TargetSha != m.ConfigSha || u.Groups[1].State != leader.UpgradeWaiting {
		t.Errorf("after the crash: %s, m's target %s: want m rolling to %s, w waiting", groupStates(u), spec.ShortSHA(u.Groups[0].TargetSha), spec.ShortSHA(m.ConfigSha))
	}
}

// TestStorageVersion: the leader names the records' layout of a cluster
// made before storage versions (version 1, an event; cluster info shows
// it), and an upgrade to a release that does not read the layout the
// records are at is refused, saying both versions, while one that reads
// it goes.
func TestStorageVersion(t *testing.T) {
	f := newReleaseFixture(t)
	f.upgradeGroups(t, "m", "w")
	testenv.Eventually(t, testTimeout, "the leader records storage version 1", func() error {
		info, err := f.admin.GetClusterInfo(callCtx(t), &pb.ClusterInfoRequest{})
		if err != nil {
			return err
		}
		cs, err := store.ClusterLoad(context.Background(), f.c.cli)
		if err != nil {
			return err
		}
		if cs.StorageVersion != 1 || info.StorageVersion != 1 {
			return fmt.Errorf("stored %d, cluster info %d", cs.StorageVersion, info.StorageVersion)
		}
		return nil
	})

	// The records at a later layout (as a newer release would leave
	// them); a release that reads up to 1 may not lead them.
	cs, err := store.ClusterLoad(context.Background(), f.c.cli)
	if err != nil {
		t.Fatal(err)
	}
	cs.StorageVersion = 2
	raw, _ := proto.Marshal(cs)
	if _, err := f.c.cli.Put(context.Background(), store.Keys.Cluster(), string(raw)); err != nil {
		t.Fatal(err)
	}
	answers := func(name, json string) string {
		bin := filepath.Join(t.TempDir(), name)
		script := "#!/bin/sh\n[ \"$1\" = version ] && echo '" + json + "'\n"
		if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return bin
	}
	old := answers("old", `{"release": "v0.0.9", "storage_version": 1}`)
	_, err = f.admin.StartUpgrade(callCtx(t), &pb.StartUpgradeRequest{Binary: old})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), `release "v0.0.9" reads the cluster's records up to storage version 1`) || !strings.Contains(err.Error(), "to version 2") {
		t.Errorf("an upgrade to a release that reads storage 1 of records at 2: %v", err)
	}
	if _, err := f.admin.GetUpgrade(callCtx(t), &pb.GetUpgradeRequest{}); status.Code(err) != codes.NotFound {
		t.Errorf("a refused upgrade left a record: %v", err)
	}
	if _, err := f.admin.StartUpgrade(callCtx(t), &pb.StartUpgradeRequest{Binary: answers("new", `{"release": "v0.3.0", "storage_version": 2}`)}); err != nil {
		t.Errorf("an upgrade to a release that reads storage 2: %v", err)
	}
}
