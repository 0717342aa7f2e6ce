package curator

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// planFixture is a leader with one suspended group "web" of size 0 (its
// loop makes no machine), committed by an admin, and clients of each
// role.
type planFixture struct {
	c                       *testCluster
	admin, operator, reader pb.ManagementClient
	base                    *pb.GroupSpec
}

func newPlanFixture(t *testing.T) *planFixture {
	t.Helper()
	c := newTestCluster(t)
	c.startLeader()
	adminConn, _ := c.dialFirst()
	f := &planFixture{c: c, admin: pb.NewManagementClient(adminConn),
		operator: pb.NewManagementClient(c.dialRole(pki.OperatorOperator)),
		reader:   pb.NewManagementClient(c.dialRole(pki.OperatorReader))}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f.base, err = spec.ParseGroupSpec([]byte("name: web\nsize: 0\nroles: [worker]\n" +
		"provider: {process: {addresses: 127.0.0.1-127.0.0.9, dir: " + t.TempDir() + ", binary: " + self + "}}\n" +
		"template: {version: v1, env: {TOKEN: s3cret}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	commitSuspended(t, f.admin, f.base)
	return f
}

func (f *planFixture) load(t *testing.T) *pb.Group {
	t.Helper()
	g, err := store.GroupLoad(context.Background(), f.c.cli, "web")
	if err != nil || g == nil {
		t.Fatalf("load group web: %v, %v", g, err)
	}
	return g
}

// with is the fixture's spec changed by change.
func (f *planFixture) with(change func(*pb.GroupSpec)) *pb.GroupSpec {
	gs := proto.Clone(f.base).(*pb.GroupSpec)
	change(gs)
	return gs
}

func rev(r uint64) *uint64 { return &r }

// TestCommitGroupRevision: a commit of a spec read at a revision the
// group has moved past is refused (FailedPrecondition, saying what to do)
// and changes nothing; without a revision, or at the group's, it goes
// through and the revision moves on by one. A stale spec that is the
// group's own changes nothing and is no error.
func TestCommitGroupRevision(t *testing.T) {
	f := newPlanFixture(t)
	if got := f.load(t).SpecRevision; got != 1 {
		t.Fatalf("a new group's revision is %d, want 1", got)
	}
	for _, tc := range []struct {
		name     string
		spec     *pb.GroupSpec
		expected *uint64
		group    string // the group committed, if not web
		wantCode codes.Code
		wantRev  uint64 // the revision after
		wantMsg  []string
	}{
		{name: "at the group's revision", spec: f.with(func(s *pb.GroupSpec) { s.Size = 1 }), expected: rev(1), wantRev: 2},
		{name: "a stale revision is refused", spec: f.with(func(s *pb.GroupSpec) { s.Template.Version = "v2" }), expected: rev(1),
			wantCode: codes.FailedPrecondition, wantRev: 2, wantMsg: []string{"group web changed since this spec was read: it is at revision 2, the spec was read at 1", "curator group diff FILE", "--force"}},
		{name: "a stale revision of the group's own spec changes nothing", spec: f.with(func(s *pb.GroupSpec) { s.Size = 1 }), expected: rev(1), wantRev: 2},
		{name: "a revision ahead is refused too", spec: f.with(func(s *pb.GroupSpec) { s.Size = 2 }), expected: rev(7),
			wantCode: codes.FailedPrecondition, wantRev: 2},
		{name: "no revision: no check (--force)", spec: f.with(func(s *pb.GroupSpec) { s.Template.Version = "v2" }), wantRev: 3},
		{name: "a revision of a group that does not exist", group: "gone", spec: f.with(func(s *pb.GroupSpec) { s.Name = "gone" }), expected: rev(3),
			wantCode: codes.FailedPrecondition, wantRev: 3, wantMsg: []string{"no such group exists now", "remove the revision: line"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.load(t)
			_, err := f.admin.CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: tc.spec, ExpectedRevision: tc.expected})
			if status.Code(err) != tc.wantCode {
				t.Fatalf("commit: %v, want %v", err, tc.wantCode)
			}
			for _, m := range tc.wantMsg {
				if !strings.Contains(status.Convert(err).Message(), m) {
					t.Errorf("error %q does not say %q", status.Convert(err).Message(), m)
				}
			}
			after := f.load(t)
			if after.SpecRevision != tc.wantRev {
				t.Errorf("revision %d after, want %d", after.SpecRevision, tc.wantRev)
			}
			if tc.wantCode != codes.OK {
				if diff := cmp.Diff(before, after, protocmp.Transform()); diff != "" {
					t.Errorf("a refused commit changed the group (-before +after):\n%s", diff)
				}
				if g, err := store.GroupLoad(context.Background(), f.c.cli, "gone"); g != nil || err != nil {
					t.Errorf("group gone: %v, %v", g, err)
				}
			}
		})
	}
}

// TestCommitGroupRevisionRace: operators committing different specs from
// one describe at once: the leader takes exactly one; each of the others
// is told the group changed.
func TestCommitGroupRevisionRace(t *testing.T) {
	f := newPlanFixture(t)
	const racers = 6
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gs := f.with(func(s *pb.GroupSpec) { s.Template.Labels = map[string]string{"racer": string(rune('a' + i))} })
			_, errs[i] = f.operator.CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: gs, ExpectedRevision: rev(1)})
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch status.Code(err) {
		case codes.OK:
			won++
		case codes.FailedPrecondition:
		default:
			t.Errorf("racer %d: %v", i, err)
		}
	}
	if won != 1 || f.load(t).SpecRevision != 2 {
		t.Errorf("%d of %d racers committed, revision %d: want exactly one, revision 2 (%v)", won, racers, f.load(t).SpecRevision, errs)
	}
}

// TestPlanGroup: a plan says what a commit would change field by field
// (the audit trail's words, no environment value), whether it rolls, and
// the group's revision; it changes nothing and records no event, needs
// the commit's role, and refuses what the commit would refuse.
func TestPlanGroup(t *testing.T) {
	f := newPlanFixture(t)
	g := f.load(t)
	for _, tc := range []struct {
		name     string
		client   pb.ManagementClient
		spec     *pb.GroupSpec
		expected *uint64
		want     *pb.GroupPlan
		wantCode codes.Code
	}{
		{name: "nothing changes", client: f.operator, spec: f.base,
			want: &pb.GroupPlan{Name: "web", ConfigSha: g.ConfigSha, PreviousConfigSha: g.ConfigSha, Revision: 1}},
		{name: "a scale does not roll", client: f.operator, spec: f.with(func(s *pb.GroupSpec) { s.Size = 3 }),
			want: &pb.GroupPlan{Name: "web", Changes: []string{"size: 0 -> 3"}, ConfigSha: g.ConfigSha, PreviousConfigSha: g.ConfigSha, Revision: 1}},
		{name: "a new version rolls; the environment's values are not shown", client: f.admin, spec: f.with(func(s *pb.GroupSpec) {
			s.Template.Version = "v2"
			s.Template.Env["TOKEN"] = "other"
		}),
			want: &pb.GroupPlan{Name: "web", Changes: []string{`template.version: "v1" -> "v2"`, `template.env: ~"TOKEN" (values not shown)`}, Rolls: true,
				ConfigSha: spec.GroupConfigSHA(f.with(func(s *pb.GroupSpec) {
					s.Template.Version = "v2"
					s.Template.Env["TOKEN"] = "other"
					s.Template.Release = g.Spec.Template.Release
				}).Template), PreviousConfigSha: g.ConfigSha, Revision: 1}},
		{name: "a stale revision is no error: the plan says the group's", client: f.operator, spec: f.with(func(s *pb.GroupSpec) { s.Size = 3 }), expected: rev(0),
			want: &pb.GroupPlan{Name: "web", Changes: []string{"size: 0 -> 3"}, ConfigSha: g.ConfigSha, PreviousConfigSha: g.ConfigSha, Revision: 1}},
		{name: "a new group", client: f.admin, spec: f.with(func(s *pb.GroupSpec) { s.Name = "other" }),
			want: &pb.GroupPlan{Name: "other", NewGroup: true, ConfigSha: g.ConfigSha}},
		{name: "a reader may not plan a commit", client: f.reader, spec: f.base, wantCode: codes.PermissionDenied},
		{name: "what an operator may not commit, it may not plan", client: f.operator, spec: f.with(func(s *pb.GroupSpec) { s.Template.Env["BASH_ENV"] = "x" }), wantCode: codes.PermissionDenied},
		{name: "a bad spec", client: f.operator, spec: f.with(func(s *pb.GroupSpec) { s.MaxParallel = 0; s.Roles = nil }), wantCode: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.load(t)
			evs, err := store.EventList(context.Background(), f.c.cli, 0)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.client.PlanGroup(callCtx(t), &pb.CommitGroupRequest{Spec: tc.spec, ExpectedRevision: tc.expected})
			if status.Code(err) != tc.wantCode {
				t.Fatalf("plan: %v, want %v", err, tc.wantCode)
			}
			if tc.want != nil {
				got.Changes = slicesWithout(got.Changes, "a new group")
				if tc.want.NewGroup {
					tc.want.Changes, got.Changes = nil, nil // a new group's every field: TestCommitGroupAuditChanges
				}
				if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
					t.Errorf("plan (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(before, f.load(t), protocmp.Transform()); diff != "" {
				t.Errorf("a plan changed the group (-before +after):\n%s", diff)
			}
			if o, err := store.GroupLoad(context.Background(), f.c.cli, "other"); o != nil || err != nil {
				t.Errorf("a plan made group other: %v, %v", o, err)
			}
			after, err := store.EventList(context.Background(), f.c.cli, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range after[len(evs):] {
				if ev.Loop == "operator" || ev.Loop == "groups" {
					t.Errorf("a plan recorded an event: %v", ev)
				}
			}
		})
	}
}

func slicesWithout(s []string, drop string) []string {
	var out []string
	for _, v := range s {
		if v != drop {
			out = append(out, v)
		}
	}
	return out
}

// TestPlanDestroys: what a commit takes away, from the spec before and
// after and the machines there are.
func TestPlanDestroys(t *testing.T) {
	proc := func(dir string) *pb.ProviderSpec {
		return &pb.ProviderSpec{Kind: &pb.ProviderSpec_Process{Process: &pb.ProcessProviderSpec{Dir: dir}}}
	}
	docker := &pb.ProviderSpec{Kind: &pb.ProviderSpec_Docker{Docker: &pb.DockerProviderSpec{Image: "curator:dev"}}}
	for _, tc := range []struct {
		name     string
		from, to *pb.GroupSpec
		machines uint32
		want     []string
	}{
		{"a scale up destroys nothing", &pb.GroupSpec{Size: 2, Provider: proc("/a")}, &pb.GroupSpec{Size: 5, Provider: proc("/a")}, 2, nil},
		{"a scale down", &pb.GroupSpec{Size: 5, Provider: proc("/a")}, &pb.GroupSpec{Size: 2, Provider: proc("/a")}, 5,
			[]string{"3 of the group's 5 machines: the size goes from 5 to 2"}},
		{"a scale down of machines not made yet", &pb.GroupSpec{Size: 5, Provider: proc("/a")}, &pb.GroupSpec{Size: 2, Provider: proc("/a")}, 1, nil},
		{"another kind of provider", &pb.GroupSpec{Size: 2, Provider: proc("/a")}, &pb.GroupSpec{Size: 2, Provider: docker}, 2,
			[]string{"the group's 2 machines are left behind: the provider changes from process to docker, which does not see them (destroy them first: scale the group to 0)"}},
		{"another process dir", &pb.GroupSpec{Size: 2, Provider: proc("/a")}, &pb.GroupSpec{Size: 1, Provider: proc("/b")}, 2,
			[]string{"1 of the group's 2 machines: the size goes from 2 to 1", "the group's 2 machines are left behind: provider.process.dir changes, and the provider keeps its books there (destroy them first: scale the group to 0)"}},
		{"another provider with no machines", &pb.GroupSpec{Size: 0, Provider: proc("/a")}, &pb.GroupSpec{Size: 2, Provider: docker}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, planDestroys(tc.from, tc.to, tc.machines)); diff != "" {
				t.Errorf("planDestroys (-want +got):\n%s", diff)
			}
		})
	}
}
