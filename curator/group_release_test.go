package curator

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
)

// releaseFixture is a leader and two binaries of this host's TempDir
// (scripts: the leader only reads them, its group is suspended at size 0)
// for the release tests.
type releaseFixture struct {
	c        *testCluster
	admin    pb.ManagementClient
	operator pb.ManagementClient
	a, b     string
}

func newReleaseFixture(t *testing.T) *releaseFixture {
	c := newTestCluster(t)
	c.startLeader()
	adminConn, _ := c.dialFirst()
	f := &releaseFixture{c: c, admin: pb.NewManagementClient(adminConn), operator: pb.NewManagementClient(c.dialRole(pki.OperatorOperator))}
	dir := t.TempDir()
	f.a, f.b = filepath.Join(dir, "curator-a"), filepath.Join(dir, "curator-b")
	f.write(t, f.a, "a1")
	f.write(t, f.b, "b1")
	return f
}

// write replaces binary's content in place (same path, same mode).
func (f *releaseFixture) write(t *testing.T, binary, content string) {
	t.Helper()
	if err := os.WriteFile(binary, []byte("#!/bin/sh\n# "+content+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func (f *releaseFixture) spec(t *testing.T, binary string) *pb.GroupSpec {
	t.Helper()
	gs, err := spec.ParseGroupSpec([]byte("name: w\nsize: 0\nroles: [worker]\n" +
		"provider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: " + filepath.Dir(f.a) + ", binary: " + binary + "}}\n" +
		"rollout: {max_failures: 1, failure_action: pause}\ntemplate: {version: v1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

func (f *releaseFixture) load(t *testing.T) *pb.Group {
	t.Helper()
	g, err := store.GroupLoad(context.Background(), f.c.cli, "w")
	if err != nil || g == nil {
		t.Fatalf("load group w: %v, %v", g, err)
	}
	return g
}

func (f *releaseFixture) commit(t *testing.T, api pb.ManagementClient, gs *pb.GroupSpec) (*pb.CommitGroupResponse, error) {
	t.Helper()
	return api.CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: gs})
}

func digestOf(t *testing.T, binary string) string {
	t.Helper()
	d, err := provider.FileDigest(binary)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestReleaseInConfigSHA: a commit records what the machines run (the
// binary and its digest, read by the leader) in the template, over what
// the request said, and the config SHA covers it: the same spec again
// changes nothing, the binary rewritten in place rolls the group, and so
// does another binary. Only an admin may roll onto a rewritten binary.
func TestReleaseInConfigSHA(t *testing.T) {
	f := newReleaseFixture(t)
	gs := f.spec(t, f.a)
	commitSuspended(t, f.admin, gs)
	g := f.load(t)
	want := &pb.MachineRelease{Binary: f.a, Digest: digestOf(t, f.a)}
	if !proto.Equal(g.Spec.Template.Release, want) {
		t.Fatalf("the template records %v, want %v", g.Spec.Template.Release, want)
	}
	bare := proto.Clone(g.Spec.Template).(*pb.InstanceTemplate)
	bare.Release = nil
	if g.ConfigSha != spec.GroupConfigSHA(g.Spec.Template) || g.ConfigSha == spec.GroupConfigSHA(bare) {
		t.Errorf("config SHA %s: want the template's with its release (%s), not without (%s)", g.ConfigSha, spec.GroupConfigSHA(g.Spec.Template), spec.GroupConfigSHA(bare))
	}

	// What a request says of the release is not the leader's record.
	again := proto.Clone(gs).(*pb.GroupSpec)
	again.Template.Release = &pb.MachineRelease{Binary: "/bin/sh", Digest: "sha256:00"}
	if r, err := f.commit(t, f.admin, again); err != nil || r.Changed {
		t.Fatalf("the same spec with a release of the request's: changed %v (%v), want nothing changed", r.GetChanged(), err)
	}

	// The binary rebuilt in place: an operator's commit of the same spec
	// would roll the group onto it, an admin's does.
	f.write(t, f.a, "a2")
	before := f.load(t)
	_, err := f.commit(t, f.operator, gs)
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "template.release") {
		t.Errorf("an operator's commit onto a rebuilt binary: %v, want PermissionDenied naming template.release", err)
	}
	if !proto.Equal(before, f.load(t)) {
		t.Error("a refused commit changed the group")
	}
	// Nor does the leader read or make what an operator's spec names
	// before it refuses it: a dir of its choosing is not created.
	elsewhere := proto.Clone(gs).(*pb.GroupSpec)
	elsewhere.Provider.GetProcess().Dir = filepath.Join(t.TempDir(), "made-by-an-operator")
	if _, err := f.commit(t, f.operator, elsewhere); status.Code(err) != codes.PermissionDenied {
		t.Errorf("an operator's commit of another dir: %v, want PermissionDenied", err)
	}
	if _, err := os.Stat(elsewhere.Provider.GetProcess().Dir); !os.IsNotExist(err) {
		t.Errorf("an operator's refused commit made %s (%v)", elsewhere.Provider.GetProcess().Dir, err)
	}
	if r, err := f.commit(t, f.admin, gs); err != nil || !r.Changed {
		t.Fatalf("an admin's commit onto a rebuilt binary: changed %v (%v)", r.GetChanged(), err)
	}
	g = f.load(t)
	ro, _, err := store.RolloutLoad(context.Background(), f.c.cli, "w")
	if err != nil {
		t.Fatal(err)
	}
	if g.ConfigSha == before.ConfigSha || ro.GetTargetSha() != g.ConfigSha || ro.PreviousSha != before.ConfigSha || ro.PreviousTemplate.GetRelease().GetDigest() != want.Digest {
		t.Errorf("after the rebuild: group %s (was %s), rollout %+v: want a rollout from the old digest's SHA to the new", spec.ShortSHA(g.ConfigSha), spec.ShortSHA(before.ConfigSha), ro)
	}

	// Another binary: its path and digest.
	if r, err := f.commit(t, f.admin, f.spec(t, f.b)); err != nil || !r.Changed {
		t.Fatalf("commit of binary b: changed %v (%v)", r.GetChanged(), err)
	}
	if got, want := f.load(t).Spec.Template.Release, (&pb.MachineRelease{Binary: f.b, Digest: digestOf(t, f.b)}); !proto.Equal(got, want) {
		t.Errorf("after binary b the template records %v, want %v", got, want)
	}
}

// TestReleaseOfAnOldGroup: a group committed before releases were
// recorded keeps its config SHA through a commit that leaves its binary
// as it was (its machines do not all roll because a new leader read it),
// and records its release at the commit that changes the binary.
func TestReleaseOfAnOldGroup(t *testing.T) {
	f := newReleaseFixture(t)
	gs := f.spec(t, f.a)
	spec.NormalizeGroupSpec(gs)
	oldSHA := spec.GroupConfigSHA(gs.Template)
	putGroup(t, f.c, &pb.Group{Spec: gs, ConfigSha: oldSHA, Suspended: "for the test"}, nil)

	scaled := proto.Clone(gs).(*pb.GroupSpec)
	scaled.Size = 1
	scaled.Template.Labels = nil
	if _, err := f.commit(t, f.operator, scaled); err != nil {
		t.Fatalf("an operator's scale of an old group: %v", err)
	}
	if g := f.load(t); g.ConfigSha != oldSHA || g.Spec.Template.Release != nil || g.Spec.Size != 1 {
		t.Errorf("after a scale the old group is size %d, SHA %s, release %v: want size 1, its SHA %s and no release", g.Spec.Size, spec.ShortSHA(g.ConfigSha), g.Spec.Template.Release, spec.ShortSHA(oldSHA))
	}
	if ro, _, err := store.RolloutLoad(context.Background(), f.c.cli, "w"); err != nil || ro != nil {
		t.Errorf("a scale of an old group started a rollout: %v (%v)", ro, err)
	}

	moved := f.spec(t, f.b)
	moved.Size = 1
	if r, err := f.commit(t, f.admin, moved); err != nil || !r.Changed {
		t.Fatalf("commit of binary b: changed %v (%v)", r.GetChanged(), err)
	}
	g := f.load(t)
	if g.Spec.Template.Release.GetDigest() != digestOf(t, f.b) || g.ConfigSha == oldSHA {
		t.Errorf("after binary b: release %v, SHA %s: want b's digest and a new SHA", g.Spec.Template.Release, spec.ShortSHA(g.ConfigSha))
	}
}

// TestReleaseComesBack: a rollback (the cancel of a rollout its failure
// paused) and an undo bring back the binary that ran with the template
// they return to, not only the template's settings.
func TestReleaseComesBack(t *testing.T) {
	f := newReleaseFixture(t)
	commitSuspended(t, f.admin, f.spec(t, f.a))
	onA := f.load(t)
	binaryOf := func() string { return f.load(t).Spec.Provider.GetProcess().GetBinary() }

	if _, err := f.commit(t, f.admin, f.spec(t, f.b)); err != nil {
		t.Fatal(err)
	}
	// The rollout to b fails (as the loop would record it) and pauses.
	ro, _, err := store.RolloutLoad(context.Background(), f.c.cli, "w")
	if err != nil {
		t.Fatal(err)
	}
	ro.State, ro.Failures, ro.LastFailure, ro.Reason = pb.RolloutState_ROLLOUT_STATE_PAUSED, 1, "machine x failed", "machine x failed"
	putGroup(t, f.c, f.load(t), ro)
	if _, err := f.admin.ChangeRollout(callCtx(t), &pb.ChangeRolloutRequest{Group: "w", Action: "cancel"}); err != nil {
		t.Fatalf("cancel of the failed rollout: %v", err)
	}
	if g := f.load(t); binaryOf() != f.a || g.ConfigSha != onA.ConfigSha {
		t.Errorf("after the rollback the group runs %s, SHA %s: want %s again, SHA %s", binaryOf(), spec.ShortSHA(g.ConfigSha), f.a, spec.ShortSHA(onA.ConfigSha))
	}

	// Forward to b again, then undo: a again.
	if _, err := f.commit(t, f.admin, f.spec(t, f.b)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.ChangeRollout(callCtx(t), &pb.ChangeRolloutRequest{Group: "w", Action: "undo"}); err != nil {
		t.Fatalf("undo: %v", err)
	}
	if g := f.load(t); binaryOf() != f.a || g.ConfigSha != onA.ConfigSha {
		t.Errorf("after the undo the group runs %s, SHA %s: want %s again, SHA %s", binaryOf(), spec.ShortSHA(g.ConfigSha), f.a, spec.ShortSHA(onA.ConfigSha))
	}
}
