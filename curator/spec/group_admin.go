package spec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// What a group's machines run is an admin's decision. The leader starts
// them on its own host (process provider) or on its Docker engine, as
// the user it runs as: whoever chooses the binary, the image or the
// environment a machine starts with (BASH_ENV, LD_PRELOAD, PATH) runs
// what they like there, the CA's keys in reach. So an operator's commit
// (group commit, group scale, rollout undo and restart: every call that
// writes a group's spec) may change a group's size, roles, timers,
// policies, and its template's version, labels and the args of
// OperatorAgentFlags, but not:
//
//   - create a group (it names a provider);
//   - change any of the provider's settings (its kind, or any field:
//     a field added later is an admin's too);
//   - change the template's environment, or a field of the template
//     added later;
//   - change the template's args other than OperatorAgentFlags (each
//     other flag of `agent join` names a path, a socket, an address or
//     a cluster: --data-dir is written and wiped, --docker-socket is
//     root on its host, --token and --manager join another cluster,
//     whose admin then commits what it likes to this host).
//
// An admin may do all of it.

// OperatorAgentFlags are the `curator agent join` flags an operator may
// put in a group template's args: each tunes the node, and takes a value
// (TestOperatorAgentFlagsAreJoinFlags checks them against the command).
var OperatorAgentFlags = []string{"availability", "down-after", "election-ttl", "heartbeat-interval", "join-timeout", "label", "log-level", "reap-after"}

// agentArg is one item of a template's args: an operator's flag with its
// value (valued: it has one), or one argument of anything else.
type agentArg struct {
	// flag is an operator flag's name (OperatorAgentFlags), "" for any
	// other argument.
	flag   string
	value  string
	valued bool
	// text is the arguments it is made of.
	text []string
}

// parseAgentArgs reads a template's args as `agent join` does for the
// operator's flags: --flag=value, or --flag and the next argument as its
// value, whatever it is.
func parseAgentArgs(args []string) []agentArg {
	var out []agentArg
	for i := 0; i < len(args); {
		a := args[i]
		name, value, eq := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !slices.Contains(OperatorAgentFlags, name) {
			out = append(out, agentArg{text: args[i : i+1]})
			i++
			continue
		}
		switch {
		case eq:
			out = append(out, agentArg{flag: name, value: value, valued: true, text: args[i : i+1]})
			i++
		case i+1 < len(args):
			out = append(out, agentArg{flag: name, value: args[i+1], valued: true, text: args[i : i+2]})
			i += 2
		default:
			out = append(out, agentArg{flag: name, text: args[i : i+1]})
			i++
		}
	}
	return out
}

// adminArgs are the args of a template that are not an operator's flags,
// in order.
func adminArgs(args []string) []string {
	var out []string
	for _, a := range parseAgentArgs(args) {
		if a.flag == "" {
			out = append(out, a.text...)
		}
	}
	return out
}

// AdminGroupChange names the first thing a commit of spec to over the
// group's spec from (nil: a new group) changes that is an admin's
// decision, "" if none: "a new group", "provider.process.binary",
// "template.env.BASH_ENV", "template.args (--data-dir)". Both specs are
// normalized.
func AdminGroupChange(from, to *pb.GroupSpec) string {
	if from == nil {
		return "a new group"
	}
	if f := providerChange(from.GetProvider(), to.GetProvider()); f != "" {
		return f
	}
	return templateChange(from.GetTemplate(), to.GetTemplate())
}

// providerChange names the first provider setting that differs.
func providerChange(from, to *pb.ProviderSpec) string {
	if from == nil || to == nil {
		if from == nil && to == nil {
			return ""
		}
		return "provider"
	}
	f, t := from.ProtoReflect(), to.ProtoReflect()
	kind := f.Descriptor().Oneofs().ByName("kind")
	fk, tk := f.WhichOneof(kind), t.WhichOneof(kind)
	if fk == nil || tk == nil || fk.Name() != tk.Name() {
		return "provider"
	}
	fm, tm := f.Get(fk).Message(), t.Get(tk).Message()
	fields := fm.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !fm.Get(fd).Equal(tm.Get(fd)) {
			return "provider." + string(fk.Name()) + "." + string(fd.Name())
		}
	}
	if !proto.Equal(from, to) {
		return "provider" // unknown fields
	}
	return ""
}

// operatorTemplateFields are the template's fields an operator may change
// (args within OperatorAgentFlags).
var operatorTemplateFields = []protoreflect.Name{"version", "labels", "args"}

// templateChange names the first template setting that differs and is
// not an operator's.
func templateChange(from, to *pb.InstanceTemplate) string {
	if from == nil {
		from = &pb.InstanceTemplate{}
	}
	if to == nil {
		to = &pb.InstanceTemplate{}
	}
	fe, te := from.GetEnv(), to.GetEnv()
	keys := slices.Sorted(maps.Keys(fe))
	for k := range te {
		if _, ok := fe[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		fv, fok := fe[k]
		tv, tok := te[k]
		if fok != tok || fv != tv {
			return "template.env." + k
		}
	}
	if fa, ta := adminArgs(from.GetArgs()), adminArgs(to.GetArgs()); !slices.Equal(fa, ta) {
		i := 0
		for i < min(len(fa), len(ta)) && fa[i] == ta[i] {
			i++
		}
		what := ""
		switch {
		case i < len(ta):
			what = ta[i]
		case i < len(fa):
			what = fa[i]
		}
		return "template.args (" + QuoteShort(what) + ")"
	}
	f, t := from.ProtoReflect(), to.ProtoReflect()
	fields := f.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Name() == "env" || slices.Contains(operatorTemplateFields, fd.Name()) {
			continue
		}
		if !f.Get(fd).Equal(t.Get(fd)) {
			return "template." + string(fd.Name())
		}
	}
	return ""
}

// CheckGroupChange refuses a commit of spec to over spec from (nil: a new
// group) by a certificate named holder of operator role held when it
// changes what only an admin decides (AdminGroupChange). The refusal is
// ErrDenied, naming the field, the role it needs and the one held.
func CheckGroupChange(held, holder string, from, to *pb.GroupSpec) error {
	if pki.OperatorRoleAllows(held, pki.OperatorAdmin) {
		return nil
	}
	what := AdminGroupChange(from, to)
	if what == "" {
		return nil
	}
	if from == nil {
		return fmt.Errorf("%w: group %s: a new group is an admin's decision, as it names what its machines run: it needs the %s role; the certificate %q holds %s: ask an admin to commit it",
			ErrDenied, to.GetName(), pki.OperatorAdmin, holder, held)
	}
	return fmt.Errorf("%w: group %s: %s is an admin's decision, as it changes what the group's machines run: it needs the %s role; the certificate %q holds %s: ask an admin, or keep the group's (`curator group describe %s`)",
		ErrDenied, to.GetName(), what, pki.OperatorAdmin, holder, held, to.GetName())
}
