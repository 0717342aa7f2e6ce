package spec

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

func dockerSpec(t *testing.T) *pb.GroupSpec {
	t.Helper()
	s, err := ParseGroupSpec([]byte("name: d\nroles: [worker]\nprovider: {docker: {network: n, subnet: 172.28.0.0/24, image: 'curator:v1'}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pluginGroupSpec(t *testing.T) *pb.GroupSpec {
	t.Helper()
	s, err := ParseGroupSpec([]byte("name: p\nroles: [worker]\nprovider: {plugin: {path: /usr/local/bin/curator-provider-exec, config: {provision: /etc/curator/provision, timeout: 5m}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAdminGroupChange is the rule of who may change what of a group, as
// a table: what an operator's commit may not change (what the machines
// run), named as the refusal names it; what it may ("").
func TestAdminGroupChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		base   func(*testing.T) *pb.GroupSpec
		change func(s *pb.GroupSpec)
		want   string
	}{
		// What the machines run: an admin's.
		{"binary", baseSpec, func(s *pb.GroupSpec) { s.Provider.GetProcess().Binary = "/bin/bash" }, "provider.process.binary"},
		{"dir", baseSpec, func(s *pb.GroupSpec) { s.Provider.GetProcess().Dir = "/etc" }, "provider.process.dir"},
		{"addresses", baseSpec, func(s *pb.GroupSpec) { s.Provider.GetProcess().Addresses = "10.0.0.1-10.0.0.9" }, "provider.process.addresses"},
		{"port", baseSpec, func(s *pb.GroupSpec) { s.Provider.GetProcess().Port = 22 }, "provider.process.port"},
		{"process domains", baseSpec, func(s *pb.GroupSpec) {
			s.Provider.GetProcess().Domains = map[string]string{"a": "10.0.0.1-10.0.0.9"}
		}, "provider.process.domains"},
		{"provider kind", baseSpec, func(s *pb.GroupSpec) { s.Provider = dockerSpec(t).Provider }, "provider"},
		{"image", dockerSpec, func(s *pb.GroupSpec) { s.Provider.GetDocker().Image = "evil:latest" }, "provider.docker.image"},
		{"network", dockerSpec, func(s *pb.GroupSpec) { s.Provider.GetDocker().Network = "host" }, "provider.docker.network"},
		{"engines", dockerSpec, func(s *pb.GroupSpec) {
			s.Provider.GetDocker().Engines = map[string]*pb.DockerEngine{"a": {Host: "tcp://evil:2375"}}
		}, "provider.docker.engines"},
		{"plugin path", pluginGroupSpec, func(s *pb.GroupSpec) { s.Provider.GetPlugin().Path = "/bin/sh" }, "provider.plugin.path"},
		{"plugin script", pluginGroupSpec, func(s *pb.GroupSpec) { s.Provider.GetPlugin().Config["provision"] = "/tmp/mine" }, "provider.plugin.config"},
		{"plugin config added", pluginGroupSpec, func(s *pb.GroupSpec) { s.Provider.GetPlugin().Config["list"] = "/tmp/mine" }, "provider.plugin.config"},
		{"plugin timeout", pluginGroupSpec, func(s *pb.GroupSpec) { delete(s.Provider.GetPlugin().Config, "timeout") }, "provider.plugin.config"},
		{"to a plugin", baseSpec, func(s *pb.GroupSpec) { s.Provider = pluginGroupSpec(t).Provider }, "provider"},
		{"env added", baseSpec, func(s *pb.GroupSpec) { s.Template.Env = map[string]string{"BASH_ENV": "$(id > /tmp/x)"} }, "template.env.BASH_ENV"},
		{"env changed", func(t *testing.T) *pb.GroupSpec {
			s := baseSpec(t)
			s.Template.Env = map[string]string{"PATH": "/usr/bin", "Z": "1"}
			return s
		}, func(s *pb.GroupSpec) { s.Template.Env["PATH"] = "/tmp" }, "template.env.PATH"},
		{"env removed", func(t *testing.T) *pb.GroupSpec {
			s := baseSpec(t)
			s.Template.Env = map[string]string{"A": "1"}
			return s
		}, func(s *pb.GroupSpec) { s.Template.Env = nil }, "template.env.A"},
		{"--data-dir", baseSpec, func(s *pb.GroupSpec) { s.Template.Args = []string{"--data-dir", "/etc"} }, `template.args ("--data-dir")`},
		{"--docker-socket", baseSpec, func(s *pb.GroupSpec) { s.Template.Args = []string{"--docker-socket=/var/run/docker.sock"} }, `template.args ("--docker-socket=/var/run/docker.sock")`},
		{"--token", baseSpec, func(s *pb.GroupSpec) { s.Template.Args = []string{"--token", "x", "--manager", "10.0.0.1:7000"} }, `template.args ("--token")`},
		{"--pprof", baseSpec, func(s *pb.GroupSpec) { s.Template.Args = []string{"--log-level", "debug", "--pprof"} }, `template.args ("--pprof")`},
		{"a flag behind an operator's", baseSpec, func(s *pb.GroupSpec) { s.Template.Args = []string{"--log-level=debug", "--data-dir", "/"} }, `template.args ("--data-dir")`},
		{"an admin's flag removed", func(t *testing.T) *pb.GroupSpec {
			s := baseSpec(t)
			s.Template.Args = []string{"--pprof"}
			return s
		}, func(s *pb.GroupSpec) { s.Template.Args = nil }, `template.args ("--pprof")`},
		{"a single-dash flag", baseSpec, func(s *pb.GroupSpec) { s.Template.Args = []string{"-h"} }, `template.args ("-h")`},

		// The rest: an operator's.
		{"nothing", baseSpec, func(*pb.GroupSpec) {}, ""},
		{"size", baseSpec, func(s *pb.GroupSpec) { s.Size = 9 }, ""},
		{"domains", dockerSpec, func(s *pb.GroupSpec) { s.Domains = []string{"b"} }, ""},
		{"roles", baseSpec, func(s *pb.GroupSpec) { s.Roles = []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER} }, ""},
		{"version", baseSpec, func(s *pb.GroupSpec) { s.Template.Version = "v2" }, ""},
		{"labels", baseSpec, func(s *pb.GroupSpec) { s.Template.Labels = map[string]string{"tier": "db", "zone": "a"} }, ""},
		{"operator flags", baseSpec, func(s *pb.GroupSpec) {
			s.Template.Args = []string{"--heartbeat-interval", "200ms", "--log-level=debug", "--label", "a=b", "--down-after", "3s", "--reap-after=1h", "--join-timeout", "2m", "--availability", "drain", "--election-ttl", "5s"}
		}, ""},
		{"operator flags around an admin's", func(t *testing.T) *pb.GroupSpec {
			s := baseSpec(t)
			s.Template.Args = []string{"--pprof"}
			return s
		}, func(s *pb.GroupSpec) { s.Template.Args = []string{"--log-level", "debug", "--pprof", "--label=x=y"} }, ""},
		{"plugin kept", pluginGroupSpec, func(s *pb.GroupSpec) { s.Size = 4; s.Template.Labels = map[string]string{"zone": "b"} }, ""},
		{"image of a docker group kept", dockerSpec, func(s *pb.GroupSpec) { s.Size = 2; s.Template.Version = "v2" }, ""},
		{"policy", baseSpec, func(s *pb.GroupSpec) {
			s.ReplaceAfter = durationpb.New(1e12)
			s.MaxUnhealthy = "1"
			s.Rollout.MaxFailures = 3
			s.Rollout.FailureAction = RolloutPause
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := tc.base(t)
			to := proto.Clone(from).(*pb.GroupSpec)
			tc.change(to)
			NormalizeGroupSpec(to)
			if got := AdminGroupChange(from, to); got != tc.want {
				t.Errorf("AdminGroupChange = %q, want %q", got, tc.want)
			}
			op := CheckGroupChange(pki.OperatorOperator, "who-op", from, to)
			if (op == nil) != (tc.want == "") {
				t.Errorf("an operator's commit: %v, want refused %v", op, tc.want != "")
			}
			if op != nil {
				for _, say := range []string{tc.want, "needs the admin role", `the certificate "who-op" holds operator`, "ask an admin"} {
					if !strings.Contains(op.Error(), say) {
						t.Errorf("the refusal %q does not say %q", op, say)
					}
				}
				if !errors.Is(op, ErrDenied) {
					t.Errorf("the refusal %v is not ErrDenied", op)
				}
			}
			if err := CheckGroupChange(pki.OperatorAdmin, "who-admin", from, to); err != nil {
				t.Errorf("an admin's commit: %v", err)
			}
			if err := CheckGroupChange(pki.OperatorReader, "who-reader", from, to); (err == nil) != (tc.want == "") {
				// A reader never gets here (authorize refuses CommitGroup),
				// but the rule alone refuses it no less.
				t.Errorf("a reader's commit: %v", err)
			}
		})
	}
	// A new group names a provider: an admin's.
	s := baseSpec(t)
	if got := AdminGroupChange(nil, s); got != "a new group" {
		t.Errorf("a new group: %q", got)
	}
	if err := CheckGroupChange(pki.OperatorOperator, "who-op", nil, s); err == nil || !strings.Contains(err.Error(), "a new group is an admin's decision") {
		t.Errorf("an operator's new group: %v", err)
	}
	if err := CheckGroupChange(pki.OperatorAdmin, "who-admin", nil, s); err != nil {
		t.Errorf("an admin's new group: %v", err)
	}
}

// TestParseAgentArgs: the operator's flags take their value (after '='
// or the next argument, whatever it is, as the agent's flag parser
// does); everything else is one argument of its own.
func TestParseAgentArgs(t *testing.T) {
	got := parseAgentArgs([]string{"--log-level", "--data-dir", "--label=a=b", "x", "--data-dir=/", "--down-after"})
	want := []agentArg{
		{flag: "log-level", value: "--data-dir", valued: true, text: []string{"--log-level", "--data-dir"}},
		{flag: "label", value: "a=b", valued: true, text: []string{"--label=a=b"}},
		{text: []string{"x"}},
		{text: []string{"--data-dir=/"}},
		{flag: "down-after", text: []string{"--down-after"}},
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(agentArg{})); d != "" {
		t.Errorf("parseAgentArgs (-want +got):\n%s", d)
	}
}
