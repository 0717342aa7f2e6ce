package spec

import (
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/curatorproject/curator/proto"
)

// maxErrorLine bounds one line of an error about what a client sent: a
// message quotes a bad value cut short (QuoteShort), never a huge one
// whole.
const maxErrorLine = 512

// checkRefusal fails t unless err is a readable refusal: a message, each
// line of it short, and no control characters (a value quoted with
// QuoteShort has its newlines escaped), so that a bad value can neither
// drown a log nor forge a line of it. errors.Join puts one error a line.
func checkRefusal(t *testing.T, what string, err error) {
	t.Helper()
	msg := err.Error()
	if strings.TrimSpace(msg) == "" {
		t.Fatalf("%s: refused with an empty message", what)
	}
	for line := range strings.SplitSeq(msg, "\n") {
		if len(line) > maxErrorLine {
			t.Fatalf("%s: an error line of %d bytes: %.200q...", what, len(line), line)
		}
		if i := strings.IndexFunc(line, unicode.IsControl); i >= 0 {
			t.Fatalf("%s: a control character in the error: %q", what, line)
		}
	}
}

// checkGroupRoundTrip fails t unless an accepted spec is a fixed point:
// normalized already, valid, and `group describe | group commit -` gives
// it back, with the same file and the same config SHA.
func checkGroupRoundTrip(t *testing.T, spec *pb.GroupSpec) {
	t.Helper()
	norm := proto.Clone(spec).(*pb.GroupSpec)
	NormalizeGroupSpec(norm)
	if d := cmp.Diff(spec, norm, protocmp.Transform()); d != "" {
		t.Fatalf("normalizing an accepted spec changed it (-accepted +normalized):\n%s", d)
	}
	if err := ValidateGroupSpec(spec); err != nil {
		t.Fatalf("an accepted spec does not validate: %v", err)
	}
	out, err := MarshalGroupSpec(spec)
	if err != nil {
		t.Fatalf("describe an accepted spec: %v", err)
	}
	again, err := ParseGroupSpec(out)
	if err != nil {
		t.Fatalf("commit what describe printed: %v\n%s", err, out)
	}
	if d := cmp.Diff(spec, again, protocmp.Transform()); d != "" {
		t.Fatalf("describe | commit changed the spec (-accepted +again):\n%s\n%s", d, out)
	}
	if a, b := GroupConfigSHA(spec.Template), GroupConfigSHA(again.Template); a != b {
		t.Fatalf("describe | commit changed the config SHA from %s to %s", a, b)
	}
	if out2, err := MarshalGroupSpec(again); err != nil || string(out2) != string(out) {
		t.Fatalf("describe is not stable (%v):\n%s\nthen\n%s", err, out, out2)
	}
}

// FuzzParseGroupSpec: a group file is either refused with a readable
// message, or gives a spec that is normalized, valid and comes back the
// same through describe and commit.
func FuzzParseGroupSpec(f *testing.F) {
	for _, s := range []string{
		workersFile,
		"name: m\nsize: 3\nroles: [worker, consensus]\nreplace_after: 90s\nprovider:\n  docker: {network: curator, subnet: 172.28.0.0/24}\ntemplate:\n  version: \"1.0\"\n  args: [\"--log-level\", \"debug\", \"a: b\", \"#x\", \"\"]\n  env: {A: \"true\", B: \"\", C: \"x y: z\", D: \"'q'\"}\n",
		"name: w\nroles: [worker]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: /x, port: 9000, binary: /bin/curator}}\n",
		"name: w\nroles: [worker]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: /x}}\ntemplate: {labels: {a/b: \"\"}}\n",
		"name: w\nroles: [worker]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: /x}}\ntemplate: {env: {k: [1]}}\n",
		"name: w\nroles: [worker, worker]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: /x}}\n",
		"name: m\nsize: 3\nroles: [consensus]\ndomains: [b]\nprovider: {process: {domains: {a: 127.0.1.1-127.0.1.9, b: 127.0.2.1-127.0.2.9}, dir: /x}}\n",
		"name: m\nroles: [consensus]\nprovider: {process: {domains: {a: 127.0.1.1-127.0.1.9, b: 127.0.1.9-127.0.2.9}, dir: /x}}\n",
		"name: w\nsize: -1\nroles: [worker]\nprovider: {docker: {network: n, subnet: ::/0}}\n",
		"name: w\nroles: [worker]\nprovider: {process: {}, docker: {}}\n",
		"name: [a]\n",
		"- a\n- b\n",
		"",
		"{",
		"name: &a w\nroles: *a\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := ParseGroupSpec(data)
		if err != nil {
			checkRefusal(t, "ParseGroupSpec", err)
			return
		}
		checkGroupRoundTrip(t, spec)
	})
}

// FuzzGroupSpecProto: a spec as CommitGroup receives it (any client may
// send any proto): once normalized, either ValidateGroupSpec refuses it
// with a readable message or it is a spec `group describe` prints and
// `group commit` reads back the same.
func FuzzGroupSpecProto(f *testing.F) {
	for _, s := range []*pb.GroupSpec{
		{},
		{Name: "w", Roles: []pb.Role{pb.Role_ROLE_WORKER}, Provider: &pb.ProviderSpec{Kind: &pb.ProviderSpec_Process{Process: &pb.ProcessProviderSpec{Addresses: "127.0.0.1-127.0.0.9", Dir: "/d"}}}},
		{Name: "w", Roles: []pb.Role{pb.Role_ROLE_WORKER}, Provider: &pb.ProviderSpec{Kind: &pb.ProviderSpec_Process{Process: &pb.ProcessProviderSpec{
			Domains: map[string]string{"a": "127.0.1.1-127.0.1.9", "b": "127.0.2.1-127.0.2.9"}, Dir: "/d"}}}},
		{Name: "m", Size: 3, Roles: []pb.Role{pb.Role_ROLE_WORKER, pb.Role_ROLE_CONSENSUS}, ReplaceAfter: durationpb.New(90e9),
			Provider: &pb.ProviderSpec{Kind: &pb.ProviderSpec_Docker{Docker: &pb.DockerProviderSpec{Network: "n", Subnet: "172.28.0.0/24"}}},
			Template: &pb.InstanceTemplate{Version: "v: 1", Labels: map[string]string{"a": ""}, Args: []string{"", "#"}, Env: map[string]string{"K": "v"}}},
		{Name: "w", Roles: []pb.Role{7}, JoinTimeout: durationpb.New(-1)},
	} {
		data, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec := &pb.GroupSpec{}
		if proto.Unmarshal(data, spec) != nil {
			return
		}
		NormalizeGroupSpec(spec)
		if err := ValidateGroupSpec(spec); err != nil {
			checkRefusal(t, "ValidateGroupSpec", err)
			return
		}
		checkGroupRoundTrip(t, spec)
	})
}
