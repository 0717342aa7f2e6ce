package spec

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	pb "github.com/curatorproject/curator/proto"
)

// baseSpec is a valid normalized process group to change in tests.
func baseSpec(t *testing.T) *pb.GroupSpec {
	t.Helper()
	s, err := ParseGroupSpec([]byte(workersFile))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// manyMap is a map of n entries named prefix0, prefix1, ..., each of
// value v.
func manyMap(prefix string, n int, v string) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("%s%d", prefix, i)] = v
	}
	return m
}

// TestGroupSpecValues: what a provider cannot use, and what is past a
// limit, is refused by ValidateGroupSpec (the server's check, and the
// CLI's), naming the field and the limit or the reason; what is within
// passes.
func TestGroupSpecValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(s *pb.GroupSpec)
		want   string // "" for valid
	}{
		{"as it is", func(*pb.GroupSpec) {}, ""},
		{"NUL in an env value", func(s *pb.GroupSpec) { s.Template.Env = map[string]string{"A": "x\x00y"} }, "template.env.A: \"x\\x00y\" holds a control character (U+0000) at byte 1"},
		{"newline in an env value", func(s *pb.GroupSpec) { s.Template.Env = map[string]string{"A": "x\ny"} }, "template.env.A: \"x\\ny\" holds a control character (U+000A)"},
		{"an env value not UTF-8", func(s *pb.GroupSpec) { s.Template.Env = map[string]string{"A": "\xff"} }, "template.env.A: \"\\xff\" is not UTF-8 at byte 0"},
		{"an env name with '='", func(s *pb.GroupSpec) { s.Template.Env = map[string]string{"A=B": "x"} }, "template.env: environment variable \"A=B\""},
		{"an env name with NUL", func(s *pb.GroupSpec) { s.Template.Env = map[string]string{"A\x00": "x"} }, "template.env: environment variable \"A\\x00\""},
		{"an empty env name", func(s *pb.GroupSpec) { s.Template.Env = map[string]string{"": "x"} }, "template.env: environment variable \"\""},
		{"NUL in an arg", func(s *pb.GroupSpec) { s.Template.Args = []string{"--log-level", "de\x00bug"} }, "template.args[1]: \"de\\x00bug\" holds a control character (U+0000)"},
		{"escape in an arg", func(s *pb.GroupSpec) { s.Template.Args = []string{"\x1b[2J"} }, "template.args[0]: \"\\x1b[2J\" holds a control character (U+001B)"},
		{"NUL in the version", func(s *pb.GroupSpec) { s.Template.Version = "v\x00" }, "template.version: \"v\\x00\" holds a control character"},
		{"NUL in the binary", func(s *pb.GroupSpec) { s.Provider.GetProcess().Binary = "/bin/x\x00" }, "provider.process.binary: \"/bin/x\\x00\" holds a control character"},
		{"a relative binary", func(s *pb.GroupSpec) { s.Provider.GetProcess().Binary = "bin/curator" }, "provider.process.binary: want an absolute path"},
		{"NUL in the dir", func(s *pb.GroupSpec) { s.Provider.GetProcess().Dir = "/x\x00" }, "provider.process.dir: \"/x\\x00\" holds a control character"},
		{"NUL in an image", func(s *pb.GroupSpec) {
			s.Provider = &pb.ProviderSpec{Kind: &pb.ProviderSpec_Docker{Docker: &pb.DockerProviderSpec{Network: "n", Subnet: "172.28.0.0/24", Image: "curator:\x00", Port: 7000}}}
		}, "provider.docker.image: \"curator:\\x00\" holds a control character"},
		{"NUL in a network", func(s *pb.GroupSpec) {
			s.Provider = &pb.ProviderSpec{Kind: &pb.ProviderSpec_Docker{Docker: &pb.DockerProviderSpec{Network: "n\x00", Subnet: "172.28.0.0/24", Image: "curator:dev", Port: 7000}}}
		}, "provider.docker.network: \"n\\x00\" holds a control character"},
		{"a long image", func(s *pb.GroupSpec) {
			s.Provider = &pb.ProviderSpec{Kind: &pb.ProviderSpec_Docker{Docker: &pb.DockerProviderSpec{Network: "n", Subnet: "172.28.0.0/24", Image: strings.Repeat("a", MaxProviderValue+1), Port: 7000}}}
		}, fmt.Sprintf("provider.docker.image: %d bytes, at most %d (MaxProviderValue)", MaxProviderValue+1, MaxProviderValue)},
		{"a control character in a label", func(s *pb.GroupSpec) { s.Template.Labels = map[string]string{"a": "b\x00"} }, "template.labels: label a="},

		{"the most args", func(s *pb.GroupSpec) { s.Template.Args = make([]string, MaxTemplateArgs) }, ""},
		{"too many args", func(s *pb.GroupSpec) { s.Template.Args = make([]string, MaxTemplateArgs+1) }, "template.args: 257 arguments, at most 256 (MaxTemplateArgs)"},
		{"100,000 args", func(s *pb.GroupSpec) { s.Template.Args = make([]string, 100000) }, "template.args: 100000 arguments, at most 256 (MaxTemplateArgs)"},
		{"a long arg", func(s *pb.GroupSpec) { s.Template.Args = []string{strings.Repeat("a", MaxTemplateValue+1)} }, "template.args[0]: 4097 bytes, at most 4096 (MaxTemplateValue)"},
		{"the most env", func(s *pb.GroupSpec) { s.Template.Env = manyMap("V", MaxTemplateEnv, "x") }, ""},
		{"too many env", func(s *pb.GroupSpec) { s.Template.Env = manyMap("V", MaxTemplateEnv+1, "x") }, "template.env: 129 variables, at most 128 (MaxTemplateEnv)"},
		{"a long env value", func(s *pb.GroupSpec) {
			s.Template.Env = map[string]string{"A": strings.Repeat("a", MaxTemplateValue+1)}
		}, "template.env.A: 4097 bytes, at most 4096 (MaxTemplateValue)"},
		{"a long version", func(s *pb.GroupSpec) { s.Template.Version = strings.Repeat("v", MaxTemplateVersion+1) }, "template.version: 129 bytes, at most 128 (MaxTemplateVersion)"},
		{"the most labels", func(s *pb.GroupSpec) { s.Template.Labels = manyMap("l", MaxNodeLabels, "x") }, ""},
		{"too many labels", func(s *pb.GroupSpec) { s.Template.Labels = manyMap("l", MaxNodeLabels+1, "x") }, "template.labels and --label args: 65 labels: a node carries at most 64 (MaxNodeLabels)"},
		{"labels and --label args past the most", func(s *pb.GroupSpec) {
			s.Template.Labels = manyMap("l", MaxNodeLabels, "x")
			s.Template.Args = []string{"--label", "extra=1", "--label=l0=y"}
		}, "template.labels and --label args: 65 labels"},
		{"a bad --label arg", func(s *pb.GroupSpec) { s.Template.Args = []string{"--label", "a b=c"} }, "template.args: --label: label key \"a b\""},
		{"a --label arg with no '='", func(s *pb.GroupSpec) { s.Template.Args = []string{"--label=ab"} }, "template.args: --label \"ab\": give a label as KEY=VALUE"},
		{"an operator flag with no value", func(s *pb.GroupSpec) { s.Template.Args = []string{"--log-level"} }, "template.args: --log-level wants a value after it"},
		{"a template past its total", func(s *pb.GroupSpec) {
			s.Template.Args = nil
			for range 17 {
				s.Template.Args = append(s.Template.Args, strings.Repeat("a", MaxTemplateValue))
			}
		}, "template: 69641 bytes of version, labels, args and env, at most 65536 (MaxTemplateBytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSpec(t)
			tc.change(s)
			err := ValidateGroupSpec(s)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
			// The server's check of the request is the same.
			rerr := CheckManagementRequest(&pb.CommitGroupRequest{Spec: s})
			if (rerr == nil) != (tc.want == "") || (rerr != nil && !errors.Is(rerr, ErrInvalid)) {
				t.Errorf("CheckManagementRequest: %v", rerr)
			}
		})
	}
}

// TestGroupFileControlCharacters: the CLI reads a group file with the
// same rules: a NUL written as an escape in a YAML (or JSON) file is
// refused with the field and its line.
func TestGroupFileControlCharacters(t *testing.T) {
	for name, tc := range map[string]struct{ file, want string }{
		"yaml env":    {workersFile + "  env: {BASH_ENV: \"a\\0b\"}\n", "template.env.BASH_ENV: \"a\\x00b\" holds a control character (U+0000)"},
		"yaml args":   {strings.Replace(workersFile, "args: []", "args: [\"--log-level\", \"x\\0\"]", 1), "template.args[1]: \"x\\x00\" holds a control character"},
		"json binary": {`{"name": "w", "roles": ["worker"], "provider": {"process": {"addresses": "127.0.0.1-127.0.0.2", "dir": "/x", "binary": "/bin/a\u0000"}}}`, "provider.process.binary: \"/bin/a\\x00\" holds a control character"},
	} {
		t.Run(name, func(t *testing.T) {
			file := strings.Replace(tc.file, "  env: {}\n", "", 1)
			_, err := ParseGroupSpec([]byte(file))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "line ") {
				t.Errorf("got %v, want an error at a line saying %q", err, tc.want)
			}
		})
	}
}

// TestNodeLabelLimits: a node's labels are bounded at join (the agent's
// --label and Register: ValidateMachine) and by `node update` (the
// request, and what the node is left with); a node over the limit,
// stored before it, may still lose labels or change their values.
func TestNodeLabelLimits(t *testing.T) {
	if err := ValidateMachine("", "", "", manyMap("l", MaxNodeLabels, "x")); err != nil {
		t.Errorf("the most labels at join: %v", err)
	}
	if err := ValidateMachine("", "", "", manyMap("l", MaxNodeLabels+1, "x")); err == nil || !strings.Contains(err.Error(), "65 labels: a node carries at most 64 (MaxNodeLabels)") {
		t.Errorf("too many labels at join: %v", err)
	}
	for _, tc := range []struct {
		req  *pb.UpdateNodeRequest
		want string
	}{
		{&pb.UpdateNodeRequest{Id: "n", LabelAdd: manyMap("l", MaxNodeLabels, "x")}, ""},
		{&pb.UpdateNodeRequest{Id: "n", LabelAdd: manyMap("l", 50000, "x")}, "label_add: 50000 labels, at most 64 (MaxNodeLabels)"},
		{&pb.UpdateNodeRequest{Id: "n", LabelRm: make([]string, MaxLabelRemovals+1)}, "label_rm: 1025 keys, at most 1024 in one call (MaxLabelRemovals)"},
	} {
		err := CheckManagementRequest(tc.req)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("UpdateNode with %d added, %d removed: %v; want %q", len(tc.req.LabelAdd), len(tc.req.LabelRm), err, tc.want)
		}
	}
	full := manyMap("l", MaxNodeLabels, "x")
	over := manyMap("l", MaxNodeLabels+10, "x")
	for _, tc := range []struct {
		name          string
		before, after map[string]string
		refused       bool
	}{
		{"up to the most", manyMap("l", 3, "x"), full, false},
		{"one past the most", full, manyMap("l", MaxNodeLabels+1, "x"), true},
		{"an over-limit node loses some", over, full, false},
		{"an over-limit node changes a value", over, func() map[string]string { m := manyMap("l", MaxNodeLabels+10, "x"); m["l0"] = "y"; return m }(), false},
		{"an over-limit node gains one", over, func() map[string]string { m := manyMap("l", MaxNodeLabels+10, "x"); m["new"] = "y"; return m }(), true},
	} {
		err := CheckNodeLabels("n1", tc.before, tc.after)
		if (err != nil) != tc.refused || (err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "node n1 would carry"))) {
			t.Errorf("%s: %v, want refused %v", tc.name, err, tc.refused)
		}
	}
}
