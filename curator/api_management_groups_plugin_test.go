package curator

import (
	"context"
	"errors"
	"os"
	"os/exec"
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

// testPlugin is the provider plugin the test binary serves: it makes no
// machine, refuses a config with a "refuse" setting, and with a
// "hang-list" setting never answers a List (until the call is given up).
type testPlugin struct{ hangList bool }

func newTestPlugin(config map[string]string) (provider.Provider, error) {
	if why := config["refuse"]; why != "" {
		return nil, errors.New(why)
	}
	return testPlugin{hangList: config["hang-list"] != ""}, nil
}

func (testPlugin) Provision(context.Context, provider.Spec) (provider.Instance, error) {
	return provider.Instance{}, errors.New("the test plugin makes no machine")
}

func (testPlugin) Destroy(context.Context, string) error { return nil }

func (p testPlugin) List(ctx context.Context, _ map[string]string) ([]provider.Instance, error) {
	if p.hangList {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, nil
}

// TestCommitPluginGroupRoles: a provider plugin's path and config choose
// what runs on the leader's host (the plugin, the scripts it runs): an
// operator's commit may not change them, and its refusal changes
// nothing; an admin's may. A plugin that does not start, or refuses its
// config, is refused on commit, saying so; a group whose plugin stops
// working after has the group failing, with why.
func TestCommitPluginGroupRoles(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	adminConn, _ := c.dialFirst()
	admin := pb.NewManagementClient(adminConn)
	operator := pb.NewManagementClient(c.dialRole(pki.OperatorOperator))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	notPlugin, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true on this host")
	}
	notPlugin, _ = filepath.Abs(notPlugin)
	base, err := spec.ParseGroupSpec([]byte("name: cloud\nsize: 0\nroles: [worker]\n" +
		"provider: {plugin: {path: " + self + ", config: {provision: /etc/curator/provision, timeout: 5s}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	commitSuspended(t, admin, base)
	load := func(name string) *pb.Group {
		t.Helper()
		g, err := store.GroupLoad(context.Background(), c.cli, name)
		if err != nil || g == nil {
			t.Fatalf("load group %s: %v, %v", name, g, err)
		}
		return g
	}
	for _, tc := range []struct {
		name   string
		who    pb.ManagementClient
		change func(s *pb.GroupSpec)
		code   codes.Code
		say    string
	}{
		{"operator: path", operator, func(s *pb.GroupSpec) { s.Provider.GetPlugin().Path = "/bin/sh" }, codes.PermissionDenied, "provider.plugin.path is an admin's decision"},
		{"operator: a script", operator, func(s *pb.GroupSpec) { s.Provider.GetPlugin().Config["provision"] = "/tmp/mine" }, codes.PermissionDenied, "provider.plugin.config is an admin's decision"},
		{"operator: a setting added", operator, func(s *pb.GroupSpec) { s.Provider.GetPlugin().Config["destroy"] = "/tmp/mine" }, codes.PermissionDenied, "provider.plugin.config is an admin's decision"},
		{"operator: another provider", operator, func(s *pb.GroupSpec) {
			s.Provider = &pb.ProviderSpec{Kind: &pb.ProviderSpec_Process{Process: &pb.ProcessProviderSpec{Addresses: "127.0.0.1-127.0.0.2", Dir: t.TempDir()}}}
		}, codes.PermissionDenied, "provider is an admin's decision"},
		{"admin: relative path", admin, func(s *pb.GroupSpec) { s.Provider.GetPlugin().Path = "bin/plugin" }, codes.InvalidArgument, `provider.plugin.path: want the plugin's absolute path on the leader's host, got "bin/plugin"`},
		{"admin: no such file", admin, func(s *pb.GroupSpec) { s.Provider.GetPlugin().Path = "/no/such/plugin" }, codes.InvalidArgument, `provider.plugin.path: "/no/such/plugin" does not exist on the leader's host`},
		{"admin: a bad timeout", admin, func(s *pb.GroupSpec) { s.Provider.GetPlugin().Config["timeout"] = "-1s" }, codes.InvalidArgument, "config.timeout: want a positive duration"},
		{"admin: not a plugin", admin, func(s *pb.GroupSpec) { s.Provider.GetPlugin().Path = notPlugin }, codes.InvalidArgument, "group cloud: provider.plugin: provider plugin " + notPlugin + " could not start"},
		{"admin: a config refused", admin, func(s *pb.GroupSpec) { s.Provider.GetPlugin().Config["refuse"] = "no region given" }, codes.InvalidArgument, "provider.plugin: provider plugin " + self + " refused its config: config: no region given"},

		{"operator: size", operator, func(s *pb.GroupSpec) { s.Size = 2 }, codes.OK, ""},
		{"admin: a script", admin, func(s *pb.GroupSpec) { s.Provider.GetPlugin().Config["provision"] = "/etc/curator/provision2" }, codes.OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := load("cloud")
			gs := proto.Clone(before.Spec).(*pb.GroupSpec)
			tc.change(gs)
			_, err := tc.who.CommitGroup(callCtx(t), &pb.CommitGroupRequest{Spec: gs})
			after := load("cloud")
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.say) {
				t.Fatalf("commit: %v, want %v saying %q", err, tc.code, tc.say)
			}
			if tc.code == codes.OK {
				if !proto.Equal(after.Spec.Provider, gs.Provider) || after.Spec.Size != gs.Size {
					t.Errorf("the stored spec is %v, want %v", after.Spec, gs)
				}
				return
			}
			if !proto.Equal(before, after) {
				t.Errorf("a refused commit changed the group: %v -> %v", before, after)
			}
		})
	}

	// A group whose plugin no longer runs (its record written past the
	// commit's checks, as a binary replaced since): the group loop cannot
	// list its machines, and the group's record says why, which group ls
	// shows.
	broken := proto.Clone(load("cloud")).(*pb.Group)
	broken.Spec.Name = "broken"
	broken.Spec.Provider.GetPlugin().Path = notPlugin
	putGroup(t, c, broken, nil)
	want := "group broken: its provider does not answer: provider plugin " + notPlugin + " could not start"
	waitFor(t, "the group failing, with its plugin's reason", func() bool {
		return strings.Contains(load("broken").ProviderFailing, want)
	})
	v, err := admin.GetGroup(callCtx(t), &pb.GetGroupRequest{Name: "broken"})
	if err != nil || !strings.Contains(v.GetGroup().GetProviderFailing(), want) {
		t.Errorf("GetGroup: %v, %v; want the group failing with %q", v, err, want)
	}
}
