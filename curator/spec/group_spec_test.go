package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	pb "github.com/curatorproject/curator/proto"
)

const workersFile = `name: workers
size: 2
roles: [worker]
max_parallel: 1
provider:
  process:
    addresses: 127.0.20.10-127.0.20.40
    dir: /var/lib/curator/instances
template:                # the config SHA is taken over this part only
  version: v1
  labels: {tier: web}
  args: []
  env: {}
`

func TestGroupSpecRoundTrip(t *testing.T) {
	for name, file := range map[string]string{
		"workers": workersFile,
		"odd values": `name: m
size: 3
roles: [worker, consensus]
replace_after: 90s
provider:
  docker: {network: curator, subnet: 172.28.0.0/24}
template:
  version: "1.0"
  args: ["--log-level", "debug", "a: b", "#x", ""]
  env: {A: "true", B: "", C: "x y: z", D: "'q'"}
`,
		"repair ceiling": `name: w
roles: [worker]
size: 5
max_unhealthy: 2
max_replacements: 3
replacement_window: 1h
provider:
  process: {addresses: 127.0.0.1-127.0.0.9, dir: /x}
`,
		"plugin": `name: w
roles: [worker]
provider:
  plugin:
    path: /usr/local/bin/curator-provider-exec
    config: {provision: /etc/curator/provision, timeout: 5m, region: "eu-west: 1"}
`,
		"rollout policy": `name: w
roles: [worker]
max_parallel: 3
rollout:
  monitor: 30s
  max_failures: 2
  failure_action: pause
  max_surge: 0
  max_unavailable: 2
provider:
  process: {addresses: 127.0.0.1-127.0.0.9, dir: /x}
`,
	} {
		t.Run(name, func(t *testing.T) {
			spec, err := ParseGroupSpec([]byte(file))
			if err != nil {
				t.Fatal(err)
			}
			out, err := MarshalGroupSpec(spec)
			if err != nil {
				t.Fatal(err)
			}
			again, err := ParseGroupSpec(out)
			if err != nil {
				t.Fatalf("%v in:\n%s", err, out)
			}
			if d := cmp.Diff(spec, again, protocmp.Transform()); d != "" {
				t.Errorf("describe | commit changed the spec (-first +again):\n%s\n%s", d, out)
			}
			if strings.Contains(file, "rollout:") && (spec.Rollout.GetMaxSurge() != 0 || spec.Rollout.GetMaxUnavailable() != 2 || spec.Rollout.ProgressDeadline.AsDuration() != DefaultRolloutProgressDeadline) {
				t.Errorf("rollout policy %v: want max_surge 0 (given), max_unavailable 2, the default progress_deadline", spec.Rollout)
			}
			if name == "repair ceiling" && (spec.MaxUnhealthy != "2" || spec.MaxReplacements != 3 || spec.ReplacementWindow.AsDuration() != time.Hour) {
				t.Errorf("repair ceiling: got %q, %d per %v; want 2, 3 per 1h", spec.MaxUnhealthy, spec.MaxReplacements, spec.ReplacementWindow.AsDuration())
			}
			if name == "workers" && (spec.MaxUnhealthy != DefaultGroupMaxUnhealthy || spec.MaxReplacements != DefaultGroupMaxReplacements || spec.ReplacementWindow.AsDuration() != DefaultGroupReplacementWindow) {
				t.Errorf("defaults not written out: %q, %d per %v", spec.MaxUnhealthy, spec.MaxReplacements, spec.ReplacementWindow.AsDuration())
			}
			if GroupConfigSHA(spec.Template) != GroupConfigSHA(again.Template) {
				t.Error("config SHA changed")
			}
			t.Logf("\n%s", out)
		})
	}
}

func TestGroupConfigSHA(t *testing.T) {
	a, err := ParseGroupSpec([]byte(workersFile))
	if err != nil {
		t.Fatal(err)
	}
	// The SHA covers the template alone.
	b, _ := ParseGroupSpec([]byte(strings.Replace(workersFile, "size: 2", "size: 5", 1)))
	if GroupConfigSHA(a.Template) != GroupConfigSHA(b.Template) {
		t.Error("size changed the config SHA")
	}
	c, _ := ParseGroupSpec([]byte(strings.Replace(workersFile, "version: v1", "version: v2", 1)))
	if GroupConfigSHA(a.Template) == GroupConfigSHA(c.Template) {
		t.Error("version did not change the config SHA")
	}
	// An empty template and one of empty lists and maps are the same, and
	// the SHA is that of the documented canonical JSON.
	sum := sha256.Sum256([]byte(`{"version":"","labels":{},"args":[],"env":{}}`))
	want := hex.EncodeToString(sum[:])
	if got := GroupConfigSHA(nil); got != want {
		t.Errorf("empty template: SHA %s, want %s", got, want)
	}
	if got := GroupConfigSHA(&pb.InstanceTemplate{Args: []string{}, Env: map[string]string{}}); got != want {
		t.Errorf("template of empty lists: SHA %s, want %s", got, want)
	}
}

func TestGroupSpecErrors(t *testing.T) {
	const wProc = "name: w\nroles: [worker]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: /x}}\n"
	for _, tc := range []struct {
		name, file, want string
	}{
		{"not yaml", "name: [", "not a YAML group file"},
		{"not a mapping", "- a\n- b\n", "a group file is a YAML mapping"},
		{"unknown field", "name: w\nsise: 2\n", `line 2: group: unknown field "sise"`},
		{"bad size", "name: w\nsize: two\n", `line 2: size: want a whole number`},
		{"negative size", "name: w\nsize: -1\n", `line 2: size: want a whole number`},
		{"bad role", "name: w\nroles: [boss]\n", `line 2: roles: unknown role "boss"`},
		{"twice", "name: w\nname: v\n", `line 2: group: name is given twice`},
		{"no provider", "name: w\nroles: [worker]\n", "line 1: provider is required"},
		{"two providers", "name: w\nroles: [worker]\nprovider:\n  process: {}\n  docker: {}\n", "line 4: provider: name exactly one provider"},
		{"bad range", "name: w\nroles: [worker]\nprovider:\n  process:\n    addresses: 10.0.0.5-10.0.0.1\n", "line 5: provider.process.addresses: first address 10.0.0.5 comes after"},
		{"relative dir", "name: w\nroles: [worker]\nprovider:\n  process: {addresses: 127.0.0.1-127.0.0.2, dir: x}\n", `provider.process.dir: want an absolute path, got "x"`},
		{"bad label", "name: w\nroles: [worker]\nprovider:\n  process: {addresses: 127.0.0.1-127.0.0.2, dir: /x}\ntemplate:\n  labels: {\"a b\": c}\n", "line 6: template.labels: label key"},
		{"bad duration", "name: w\nreplace_after: soon\n", `line 2: replace_after: want a positive duration`},
		{"bad name", "name: -w\nroles: [worker]\nprovider:\n  process: {addresses: 127.0.0.1-127.0.0.2, dir: /x}\n", `line 1: name: group name "-w": use 1 to`},
		{"bad name, no provider yet", "size: 2\nname: a b\n", `line 2: name: group name "a b"`},
		{"max_parallel 0", "name: w\nmax_parallel: 0\n", "line 2: max_parallel: want 1 or more"},
		{"bad revision", "revision: latest\nname: w\n", "line 1: revision: want the whole number `group describe` wrote"},
		{"negative revision", "revision: -1\nname: w\n", "line 1: revision: want the whole number"},
		{"bad subnet", "name: w\nroles: [worker]\nprovider:\n  docker: {network: n, subnet: 10.0.0.0}\n", "line 4: provider.docker.subnet"},
		{"plugin: relative path", "name: w\nroles: [worker]\nprovider:\n  plugin: {path: bin/exec}\n", `line 4: provider.plugin.path: want the plugin's absolute path on the leader's host, got "bin/exec"`},
		{"plugin: no path", "name: w\nroles: [worker]\nprovider:\n  plugin: {config: {a: b}}\n", "line 4: provider.plugin: path is required"},
		{"plugin: unknown field", "name: w\nroles: [worker]\nprovider:\n  plugin: {path: /x, args: [a]}\n", `line 4: provider.plugin: unknown field "args"`},
		{"plugin: config not a mapping", "name: w\nroles: [worker]\nprovider:\n  plugin: {path: /x, config: [a]}\n", "line 4: provider.plugin.config: want a mapping"},
		{"plugin: config key", "name: w\nroles: [worker]\nprovider:\n  plugin: {path: /x, config: {\"a b\": c}}\n", `line 4: provider.plugin.config: config: key "a b": want a letter, then letters, digits, - and _`},
		{"plugin: timeout", "name: w\nroles: [worker]\nprovider:\n  plugin: {path: /x, config: {timeout: soon}}\n", `provider.plugin.config: config.timeout: want a positive duration such as 30s or 5m, got "soon"`},
		{"plugin: control character", "name: w\nroles: [worker]\nprovider:\n  plugin: {path: /x, config: {a: \"b\\x01\"}}\n", `provider.plugin.config.a: "b\x01" holds a control character`},
		{"max_unhealthy: word", "name: w\nmax_unhealthy: most\n", `line 2: max_unhealthy: want a count from 1 to 10000 such as 2, or a percentage of the size such as 40%, got "most"`},
		{"max_unhealthy: 0", "name: w\nmax_unhealthy: 0\n", `line 2: max_unhealthy: want a count from 1`},
		{"max_unhealthy: 0%", "name: w\nmax_unhealthy: 0%\n", `line 2: max_unhealthy: want a count such as 2 or a percentage of the size from 1% to 100%`},
		{"max_unhealthy: 120%", "name: w\nmax_unhealthy: 120%\n", `line 2: max_unhealthy: want a count such as 2 or a percentage`},
		{"max_unhealthy: list", "name: w\nmax_unhealthy: [1]\n", `line 2: max_unhealthy: want a single value`},
		{"max_replacements 0", "name: w\nmax_replacements: 0\n", "line 2: max_replacements: want 1 or more"},
		{"replacement_window", "name: w\nreplacement_window: 0s\n", "line 2: replacement_window: want a positive duration"},
		{"rollout: unknown field", "name: w\nrollout:\n  monitr: 5s\n", `line 3: rollout: unknown field "monitr"`},
		{"rollout: bad action", "name: w\nrollout:\n  failure_action: undo\n", `line 3: rollout.failure_action: want rollback or pause, got "undo"`},
		{"rollout: no failures", "name: w\nrollout: {max_failures: 0}\n", `line 2: rollout.max_failures: want at least 1`},
		{"rollout: deadline within monitor", wProc + "rollout: {monitor: 1m, progress_deadline: 30s}\n", `line 4: rollout.progress_deadline: 30s leaves no time to join and be ready for rollout.monitor 1m0s`},
		{"rollout: neither surge nor unavailable", wProc + "rollout: {max_surge: 0, max_unavailable: 0}\n", `line 4: rollout: max_surge and max_unavailable are both 0`},
		{"rollout: surge beyond max_parallel", wProc + "max_parallel: 1\nrollout: {max_surge: 2}\n", `line 5: rollout.max_surge: 2 is more than max_parallel 1`},
		{"rollout: managers surge", "name: m\nroles: [consensus]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: /x}}\nrollout: {max_surge: 0, max_unavailable: 1}\n", `line 4: rollout: a consensus group rolls one member at a time, a new one first: want max_surge 1 and max_unavailable 0, got 0 and 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseGroupSpec([]byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestGroupFileRevision: a described file carries the group's revision
// first, and reads back to the same spec and revision; a file without one
// has none (no check).
func TestGroupFileRevision(t *testing.T) {
	gs, err := ParseGroupSpec([]byte("name: w\nroles: [worker]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: /x}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := MarshalGroupFile(gs, 42)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "revision: 42\nname: w\n") {
		t.Errorf("described file:\n%s", data)
	}
	back, rev, err := ParseGroupFile(data)
	if err != nil || rev == nil || *rev != 42 || !proto.Equal(back, gs) {
		t.Errorf("read back: %v, revision %v (%v), want the spec at 42", back, rev, err)
	}
	plain, err := MarshalGroupSpec(gs)
	if err != nil {
		t.Fatal(err)
	}
	if _, rev, err := ParseGroupFile(plain); err != nil || rev != nil {
		t.Errorf("a file without a revision: revision %v (%v), want none", rev, err)
	}
}

// TestGroupSpecEnvNames: an environment variable's name is a name (one with
// '=' would set another variable), and an error about an env entry quotes
// its key, so that a key with a newline cannot forge a line of the
// message.
func TestGroupSpecEnvNames(t *testing.T) {
	const head = "name: w\nroles: [worker]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: /x}}\n"
	for _, tc := range []struct{ env, want string }{
		{`{"A=B": x}`, `environment variable "A=B"`},
		{`{"": x}`, `environment variable ""`},
		{`{"1A": x}`, `environment variable "1A"`},
		{`{"a\nb": [1]}`, `template.env "a\nb": want a single value`},
	} {
		_, err := ParseGroupSpec([]byte(head + "template: {env: " + tc.env + "}\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("env %s: %v, want an error of one line with %s", tc.env, err, tc.want)
		}
		spec := &pb.GroupSpec{Name: "w", Roles: []pb.Role{pb.Role_ROLE_WORKER}, Provider: &pb.ProviderSpec{Kind: &pb.ProviderSpec_Process{Process: &pb.ProcessProviderSpec{Addresses: "127.0.0.1-127.0.0.2", Dir: "/x"}}},
			Template: &pb.InstanceTemplate{Env: map[string]string{"A=B": "x"}}}
		if err := ValidateGroupSpec(spec); err == nil {
			t.Error("ValidateGroupSpec accepted env A=B")
		}
	}
	if _, err := ParseGroupSpec([]byte(head + "template: {env: {_A1: x, b: \"\"}}\n")); err != nil {
		t.Errorf("good env names: %v", err)
	}
}

// TestMaxUnhealthyOf: a percentage rounds down, never below one machine.
func TestMaxUnhealthyOf(t *testing.T) {
	for _, tc := range []struct {
		spec string
		size int
		want int
	}{
		{"40%", 5, 2}, {"40%", 10, 4}, {"40%", 3, 1}, {"40%", 1, 1}, {"40%", 0, 1},
		{"100%", 4, 4}, {"50%", 5, 2}, {"2", 10, 2}, {"3", 2, 3},
	} {
		m, err := ParseMaxUnhealthy(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Of(tc.size); got != tc.want {
			t.Errorf("max_unhealthy %s of size %d: %d, want %d", tc.spec, tc.size, got, tc.want)
		}
	}
}

// TestGroupSpecUnknownFields: a spec holding a field this release does
// not know (a newer client's), at the top or deep inside, is refused,
// naming where: it would be kept nowhere.
func TestGroupSpecUnknownFields(t *testing.T) {
	valid := func() *pb.GroupSpec {
		s := &pb.GroupSpec{Name: "w", Roles: []pb.Role{pb.Role_ROLE_WORKER}, Provider: &pb.ProviderSpec{Kind: &pb.ProviderSpec_Process{Process: &pb.ProcessProviderSpec{Addresses: "127.0.0.1-127.0.0.9", Dir: "/d"}}}}
		NormalizeGroupSpec(s)
		return s
	}
	if err := ValidateGroupSpec(valid()); err != nil {
		t.Fatalf("the valid spec: %v", err)
	}
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1)
	for _, tc := range []struct {
		name  string
		plant func(s *pb.GroupSpec)
		want  string
	}{
		{"top", func(s *pb.GroupSpec) { s.ProtoReflect().SetUnknown(unknown) }, "the spec: field number 99"},
		{"provider", func(s *pb.GroupSpec) { s.GetProvider().GetProcess().ProtoReflect().SetUnknown(unknown) }, "provider.process: field number 99"},
		{"template", func(s *pb.GroupSpec) { s.Template.ProtoReflect().SetUnknown(unknown) }, "template: field number 99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := valid()
			tc.plant(s)
			err := ValidateGroupSpec(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ValidateGroupSpec = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
