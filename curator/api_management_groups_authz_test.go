package curator

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// dialRole connects to the first node's curator with a fresh admin
// certificate of operator role role, named who-ROLE.
func (c *testCluster) dialRole(role string) *grpc.ClientConn {
	c.t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		c.t.Fatal(err)
	}
	cert, err := c.root.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: "who-" + role, Role: pki.RoleAdmin, OperatorRole: role})
	if err != nil {
		c.t.Fatal(err)
	}
	tc := pki.TLSCertificate(cert, key)
	return dial(c.t, c.first.address, &tc, c.root.Cert)
}

// executable is an executable file of this host other than the test's
// own binary.
func executable(t *testing.T) string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this host")
	}
	abs, err := filepath.Abs(sh)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// commitSuspended commits spec as admin and suspends the group, so that
// its loop makes no machine whatever its size.
func commitSuspended(t *testing.T, admin pb.ManagementClient, gs *pb.GroupSpec) {
	t.Helper()
	if _, err := admin.CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: gs}); err != nil {
		t.Fatalf("commit %s as admin: %v", gs.Name, err)
	}
	if _, err := admin.SuspendGroup(callCtx(t), &pb.SuspendGroupRequest{Name: gs.Name}); err != nil {
		t.Fatal(err)
	}
}

// TestCommitGroupRoles is the rule of who may change what of a group,
// through the real API: an operator may change a group's size, version,
// labels, the node's tuning flags and its policies, but not create a
// group, nor change its provider, its environment or another agent flag,
// whether by a commit or by a rollout undo; an admin may. A refusal is
// PermissionDenied naming the field, the role needed and the one held,
// and changes nothing.
func TestCommitGroupRoles(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	adminConn, _ := c.dialFirst()
	admin := pb.NewManagementClient(adminConn)
	ops := map[string]pb.ManagementClient{
		pki.OperatorOperator: pb.NewManagementClient(c.dialRole(pki.OperatorOperator)),
		pki.OperatorAdmin:    admin,
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base, err := spec.ParseGroupSpec([]byte("name: web\nsize: 0\nroles: [worker]\n" +
		"provider: {process: {addresses: 127.0.0.1-127.0.0.9, dir: " + t.TempDir() + ", binary: " + self + "}}\n" +
		"template: {version: v1, labels: {tier: web}, args: [--heartbeat-interval, 200ms], env: {TZ: UTC}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	commitSuspended(t, admin, base)
	load := func() *pb.Group {
		t.Helper()
		g, err := store.GroupLoad(context.Background(), c.cli, "web")
		if err != nil || g == nil {
			t.Fatalf("load group web: %v, %v", g, err)
		}
		return g
	}
	sh := executable(t)
	for _, tc := range []struct {
		name   string
		role   string
		change func(s *pb.GroupSpec)
		field  string // the field an operator is refused for; "" when allowed
	}{
		{"binary", pki.OperatorOperator, func(s *pb.GroupSpec) { s.Provider.GetProcess().Binary = sh }, "provider.process.binary"},
		{"dir", pki.OperatorOperator, func(s *pb.GroupSpec) { s.Provider.GetProcess().Dir = "/" }, "provider.process.dir"},
		{"addresses", pki.OperatorOperator, func(s *pb.GroupSpec) { s.Provider.GetProcess().Addresses = "127.0.0.1-127.0.0.2" }, "provider.process.addresses"},
		{"env added", pki.OperatorOperator, func(s *pb.GroupSpec) { s.Template.Env["BASH_ENV"] = "$(id > /tmp/owned)" }, "template.env.BASH_ENV"},
		{"env changed", pki.OperatorOperator, func(s *pb.GroupSpec) { s.Template.Env["TZ"] = "CET" }, "template.env.TZ"},
		{"env removed", pki.OperatorOperator, func(s *pb.GroupSpec) { s.Template.Env = nil }, "template.env.TZ"},
		{"a host flag", pki.OperatorOperator, func(s *pb.GroupSpec) { s.Template.Args = append(s.Template.Args, "--data-dir", "/etc") }, `template.args ("--data-dir")`},
		{"docker socket", pki.OperatorOperator, func(s *pb.GroupSpec) { s.Template.Args = []string{"--docker-socket=/var/run/docker.sock"} }, "template.args"},

		{"size", pki.OperatorOperator, func(s *pb.GroupSpec) { s.Size = 3 }, ""},
		{"version", pki.OperatorOperator, func(s *pb.GroupSpec) { s.Template.Version = "v2" }, ""},
		{"labels", pki.OperatorOperator, func(s *pb.GroupSpec) { s.Template.Labels["zone"] = "a" }, ""},
		{"tuning flags", pki.OperatorOperator, func(s *pb.GroupSpec) { s.Template.Args = []string{"--log-level", "debug", "--label=x=y"} }, ""},
		{"policy", pki.OperatorOperator, func(s *pb.GroupSpec) {
			s.ReplaceAfter = durationpb.New(5 * 60e9)
			s.Rollout.FailureAction = spec.RolloutPause
		}, ""},

		{"admin: binary", pki.OperatorAdmin, func(s *pb.GroupSpec) { s.Provider.GetProcess().Binary = sh }, ""},
		{"admin: env", pki.OperatorAdmin, func(s *pb.GroupSpec) { s.Template.Env["TZ"] = "CET" }, ""},
		{"admin: a host flag", pki.OperatorAdmin, func(s *pb.GroupSpec) { s.Template.Args = append(s.Template.Args, "--pprof") }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := load()
			gs := proto.Clone(before.Spec).(*pb.GroupSpec)
			tc.change(gs)
			_, err := ops[tc.role].CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: gs})
			after := load()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				spec.NormalizeGroupSpec(gs)
				// The release is the leader's to record (group_release_test.go).
				if d := cmp.Diff(gs, after.Spec, protocmp.Transform(), protocmp.IgnoreFields(&pb.InstanceTemplate{}, "release")); d != "" {
					t.Errorf("the stored spec is not the one committed (-want +got):\n%s", d)
				}
				return
			}
			if status.Code(err) != codes.PermissionDenied {
				t.Fatalf("got %v, want PermissionDenied", err)
			}
			for _, say := range []string{tc.field, "is an admin's decision", "needs the admin role", `"who-operator" holds operator`} {
				if !strings.Contains(status.Convert(err).Message(), say) {
					t.Errorf("the refusal %q does not say %q", status.Convert(err).Message(), say)
				}
			}
			if d := cmp.Diff(before, after, protocmp.Transform()); d != "" {
				t.Errorf("a refused commit changed the group (-before +after):\n%s", d)
			}
		})
	}

	// An undo to the environment the admin changed away from is a change
	// of it: an admin's too.
	before := load()
	rollout, _, err := store.RolloutLoad(context.Background(), c.cli, "web")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ops[pki.OperatorOperator].ChangeRollout(callCtx(t), &pb.ChangeRolloutRequest{Group: "web", Action: "undo", ToSha: rollout.History[0].Sha})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "template.") {
		t.Errorf("an operator's undo across an admin's change: %v, want PermissionDenied naming the template's field", err)
	}
	if d := cmp.Diff(before, load(), protocmp.Transform()); d != "" {
		t.Errorf("a refused undo changed the group (-before +after):\n%s", d)
	}
	// An undo within what an operator may change goes through.
	gs := proto.Clone(before.Spec).(*pb.GroupSpec)
	gs.Template.Version = "v3"
	if _, err := ops[pki.OperatorOperator].CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: gs}); err != nil {
		t.Fatal(err)
	}
	if _, err := ops[pki.OperatorOperator].ChangeRollout(callCtx(t), &pb.ChangeRolloutRequest{Group: "web", Action: "undo"}); err != nil {
		t.Errorf("an operator's undo of its own version change: %v", err)
	}

	// A new group is an admin's.
	other := proto.Clone(base).(*pb.GroupSpec)
	other.Name = "other"
	_, err = ops[pki.OperatorOperator].CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: other})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "a new group is an admin's decision") {
		t.Errorf("an operator's new group: %v", err)
	}
	if g, err := store.GroupLoad(context.Background(), c.cli, "other"); err != nil || g != nil {
		t.Errorf("after the refusal group other is %v (%v)", g, err)
	}
	commitSuspended(t, admin, other)
}

// TestCommitGroupBinaryOnHost: a process binary the leader could not
// start is refused at commit, saying why; nothing is stored.
func TestCommitGroupBinaryOnHost(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	adminConn, _ := c.dialFirst()
	admin := pb.NewManagementClient(adminConn)
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ binary, want string }{
		{"/nonexistent/curator", `"/nonexistent/curator" does not exist on the leader's host`},
		{plain, "is not executable"},
		{dir, "is not a regular file"},
	} {
		gs, err := spec.ParseGroupSpec([]byte("name: w\nroles: [worker]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: " + dir + ", binary: " + tc.binary + "}}\n"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = admin.CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: gs})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "provider.process.binary") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("binary %s: %v; want InvalidArgument naming provider.process.binary and saying %q", tc.binary, err, tc.want)
		}
		if g, err := store.GroupLoad(context.Background(), c.cli, "w"); err != nil || g != nil {
			t.Errorf("after the refusal group w is %v (%v)", g, err)
		}
	}
	// NUL in the environment, as a client other than the CLI may send it:
	// refused by the server as well.
	gs, err := spec.ParseGroupSpec([]byte("name: w\nroles: [worker]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: " + dir + "}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	gs.Template.Env = map[string]string{"A": "x\x00"}
	gs.Template.Args = make([]string, 100000)
	_, err = admin.CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: gs})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "template.env.A") || !strings.Contains(err.Error(), "at most 256 (MaxTemplateArgs)") {
		t.Errorf("a NUL and 100,000 args: %v", err)
	}
}

// TestStoredGroupPastLimits: the limits bound new writes; a group stored
// past them (before they were) is listed and described, and a commit to
// it is refused with the limit named.
func TestStoredGroupPastLimits(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	adminConn, _ := c.dialFirst()
	admin := pb.NewManagementClient(adminConn)
	gs, err := spec.ParseGroupSpec([]byte("name: old\nroles: [worker]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: " + t.TempDir() + "}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	gs.Template.Args = make([]string, 10000)
	data, err := proto.Marshal(&pb.Group{Spec: gs, ConfigSha: spec.GroupConfigSHA(gs.Template), Suspended: "for the test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.cli.Put(context.Background(), store.Keys.Group("old"), string(data)); err != nil {
		t.Fatal(err)
	}
	v, err := admin.GetGroup(callCtx(t), &pb.GetGroupRequest{Name: "old"})
	if err != nil || len(v.Group.Spec.Template.Args) != 10000 {
		t.Fatalf("describe a stored group past the limits: %v", err)
	}
	if _, err := admin.ListGroups(callCtx(t), &pb.ListGroupsRequest{}); err != nil {
		t.Errorf("list with a stored group past the limits: %v", err)
	}
	gs.Size = 1
	_, err = admin.CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: gs})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "MaxTemplateArgs") {
		t.Errorf("a commit to it: %v, want the limit named", err)
	}
}

// TestCommitGroupAuditChanges: the audit entry of a commit says what it
// set, field by field, the binary and the environment's keys included,
// never an environment value; a refused commit's entry says what it
// tried. The operator's event says it too.
func TestCommitGroupAuditChanges(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	adminConn, _ := c.dialFirst()
	admin := pb.NewManagementClient(adminConn)
	operator := pb.NewManagementClient(c.dialRole(pki.OperatorOperator))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const secret = "S3CRET-v4lue"
	base, err := spec.ParseGroupSpec([]byte("name: web\nsize: 0\nroles: [worker]\n" +
		"provider: {process: {addresses: 127.0.0.1-127.0.0.9, dir: " + t.TempDir() + ", binary: " + self + "}}\n" +
		"template: {version: v1, env: {TOKEN: " + secret + "}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	commitSuspended(t, admin, base)
	sh := executable(t)

	// The admin changes the binary, the size and a secret's value, and
	// adds a variable.
	gs := proto.Clone(base).(*pb.GroupSpec)
	gs.Provider.GetProcess().Binary = sh
	gs.Size = 2
	gs.Template.Env = map[string]string{"TOKEN": secret + "2", "TZ": secret + "3"}
	if _, err := admin.CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: gs}); err != nil {
		t.Fatal(err)
	}
	// The operator tries BASH_ENV.
	bad := proto.Clone(gs).(*pb.GroupSpec)
	bad.Template.Env["BASH_ENV"] = "$(id > /tmp/" + secret + ")"
	if _, err := operator.CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: bad}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the operator's BASH_ENV: %v", err)
	}

	entries, _, err := store.AuditList(context.Background(), c.cli, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var commits []*pb.AuditEntry
	for _, e := range entries {
		if e.Call == "CommitGroup" {
			commits = append(commits, e)
		}
		if strings.Contains(e.String(), secret) {
			t.Errorf("an audit entry shows an environment value: %v", e)
		}
	}
	if len(commits) != 3 {
		t.Fatalf("%d CommitGroup entries, want 3: %v", len(commits), commits)
	}
	if got := commits[0].Changes; !strings.HasPrefix(got, "a new group; ") || !strings.Contains(got, "provider.process.binary: \"\" -> "+spec.QuoteShort(self)) || !strings.Contains(got, "template.env: +\"TOKEN\" (values not shown)") {
		t.Errorf("the new group's entry says it set %q", got)
	}
	want := "size: 0 -> 2; provider.process.binary: " + spec.QuoteShort(self) + " -> " + spec.QuoteShort(sh) + "; template.env: ~\"TOKEN\", +\"TZ\" (values not shown)" +
		"; template.release: " + digestOf(t, self)[:19] + " -> " + digestOf(t, sh)[:19]
	if got := commits[1].Changes; got != want {
		t.Errorf("the admin's commit's entry says it set\n%q, want\n%q", got, want)
	}
	if got := commits[2]; got.Name != "who-operator" || !strings.HasPrefix(got.Outcome, "PermissionDenied") || got.Changes != "template.env: +\"BASH_ENV\" (values not shown)" {
		t.Errorf("the operator's refused commit's entry: %v", got)
	}
	// The admin's commit is an event of the operator loop that says it too.
	evs, err := store.EventList(context.Background(), c.cli, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, ev := range evs {
		if ev.Loop == "operator" && ev.Action == "CommitGroup" && strings.Contains(ev.Reason, "set size: 0 -> 2; provider.process.binary") {
			seen = true
		}
		if strings.Contains(ev.Reason, secret) {
			t.Errorf("an event shows an environment value: %v", ev)
		}
	}
	if !seen {
		t.Errorf("no operator event of the commit saying what it set in %v", evs)
	}
}

// TestUpdateNodeLabelLimit: a node carries at most spec.MaxNodeLabels;
// an update past it is refused, naming the limit, and changes nothing.
func TestUpdateNodeLabelLimit(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	adminConn, anon := c.dialFirst()
	admin := pb.NewManagementClient(adminConn)
	n, _ := c.register(anon, c.token(adminConn, "worker"), "w1")
	labels := map[string]string{}
	for i := range spec.MaxNodeLabels {
		labels["l"+string(rune('a'+i/26))+string(rune('a'+i%26))] = "x"
	}
	if _, err := admin.UpdateNode(callCtx(t), &pb.UpdateNodeRequest{Id: n.id, LabelAdd: labels}); err != nil {
		t.Fatalf("the most labels: %v", err)
	}
	_, err := admin.UpdateNode(callCtx(t), &pb.UpdateNodeRequest{Id: n.id, LabelAdd: map[string]string{"one": "more"}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "would carry 65 labels: a node carries at most 64 (MaxNodeLabels)") {
		t.Errorf("one label more: %v", err)
	}
	if got := c.loadNode(n.id).Labels; len(got) != spec.MaxNodeLabels {
		t.Errorf("after the refusal the node has %d labels", len(got))
	}
	// One out, one in: within the limit.
	if _, err := admin.UpdateNode(callCtx(t), &pb.UpdateNodeRequest{Id: n.id, LabelAdd: map[string]string{"one": "more"}, LabelRm: []string{"laa"}}); err != nil {
		t.Errorf("one in, one out: %v", err)
	}
}
